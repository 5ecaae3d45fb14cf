"""scipy.ndimage's shift, zoom (every order and mode: constant matrices from scipy, Note
[Interpolation as constant matrices]) and map_coordinates (order 0 and 1, traced
coordinates) inside `llgrad.differentiate`: values against scipy, gradients with respect to
the input and the coordinates against central differences, and the refusals."""
from __future__ import annotations

import numpy as np
import pytest
import scipy.ndimage as nd

import llgrad
from llgrad.runtime.errors import UnsupportedError
from tests.e2e.conftest import finite_differences

R = np.random.default_rng(23)
IMG = R.standard_normal((6, 7))
V = R.standard_normal(8)
COORDS = np.stack([R.uniform(-1.5, 6.5, 9), R.uniform(-1.5, 7.5, 9)])
TIES = COORDS.copy()
TIES[:, :2] = [[0.0, 5.0], [2.5, 6.0]]  # an edge and a tie of order 0 (values and input only)
SHIFT = np.array([0.3, -1.7])

CASES = [
    ("shift_default", lambda a: nd.shift(a, (0.5, 1.0)), IMG),
    ("shift_linear_nearest", lambda a: nd.shift(a, (0.3, -1.7), order=1, mode="nearest"), IMG),
    ("shift_order5_mirror", lambda a: nd.shift(a, 1.3, order=5, mode="mirror", cval=2.0), IMG),
    ("shift_cval", lambda a: nd.shift(a, (0.3, -1.2), cval=1.5), IMG),
    ("shift_grid_constant", lambda a: nd.shift(a, (0.3, -1.2), mode="grid-constant",
                                               cval=1.5), IMG),
    ("shift_1d_wrap", lambda v: nd.shift(v, 0.4, mode="wrap"), V),
    ("shift_traced_amount", lambda s: nd.shift(IMG, s, order=1, mode="nearest"), SHIFT),
    ("zoom_default", lambda a: nd.zoom(a, 2), IMG),
    ("zoom_linear", lambda a: nd.zoom(a, (0.5, 1.7), order=1), IMG),
    ("zoom_grid_mode", lambda a: nd.zoom(a, 1.5, mode="grid-wrap", grid_mode=True), IMG),
    ("zoom_cval", lambda a: nd.zoom(a, 1.5, cval=3.0), IMG),
]
for _mode in ["constant", "nearest", "reflect", "mirror", "grid-constant", "grid-wrap"]:
    CASES += [
        (f"map_linear_{_mode}_input",
         lambda a, m=_mode: nd.map_coordinates(a, TIES, order=1, mode=m, cval=-0.5), IMG),
        (f"map_linear_{_mode}_coordinates",
         lambda c, m=_mode: nd.map_coordinates(IMG, c, order=1, mode=m, cval=-0.5), COORDS),
    ]
for _mode in ["constant", "nearest", "grid-constant"]:
    CASES.append((f"map_nearest_{_mode}",
                  lambda a, m=_mode: nd.map_coordinates(a, TIES, order=0, mode=m, cval=-0.5),
                  IMG))


@pytest.mark.parametrize("fn,arg", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_value_and_gradient(fn, arg):
    want = fn(arg)
    got = llgrad.differentiate(fn)(arg)
    assert np.shape(got) == np.shape(want)
    np.testing.assert_allclose(got, want, rtol=1e-13, atol=1e-13)
    weights = np.linspace(0.5, 2.0, np.size(want)).reshape(np.shape(want))
    loss = lambda a: np.sum(fn(a) * weights)  # noqa: E731
    np.testing.assert_allclose(llgrad.differentiate(loss).grad(arg),
                               finite_differences(loss, (arg,), (0,))[0], rtol=1e-6, atol=1e-7)


def test_float32_stays_float32():
    got = llgrad.differentiate(lambda a: nd.zoom(a, 2))(IMG.astype(np.float32))
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, nd.zoom(IMG.astype(np.float32), 2), rtol=1e-5, atol=1e-5)


def test_refusals_name_the_order_and_the_line():
    with pytest.raises(UnsupportedError, match=r"map_coordinates\(order=3\) is not supported"
                       r"(.*\n)*.*test_scipy_interpolation.py:\d+(.*\n)*.*order=1"):
        llgrad.differentiate(lambda a: nd.map_coordinates(a, COORDS))(IMG)
    with pytest.raises(UnsupportedError, match=r"order=0, mode='mirror'"):
        llgrad.differentiate(lambda a: nd.map_coordinates(a, COORDS, order=0, mode="mirror"))(
            IMG)
    with pytest.raises(UnsupportedError, match=r"shift with a traced shift"):
        llgrad.differentiate(lambda s: nd.shift(IMG, s))(SHIFT)
