"""scipy.ndimage's linear filters inside `llgrad.differentiate`: values against scipy for
every boundary mode and origin (the centring of even-sized weights included), gradients
against central differences (float64), and the errors."""
from __future__ import annotations

import numpy as np
import pytest
import scipy.ndimage as nd

import llgrad
from llgrad.runtime.errors import UnsupportedError
from tests.e2e.conftest import compiled, finite_differences

R = np.random.default_rng(26)
IMG = R.standard_normal((6, 7))
MODES = ["reflect", "mirror", "nearest", "wrap", "constant", "grid-wrap", "grid-constant",
         "grid-mirror"]
W24 = np.arange(8.0).reshape(2, 4) - 3.0


def _filters(m):
    """(name, call) pairs, each of one traced image, in boundary mode m."""
    return [
        ("correlate1d", lambda x: nd.correlate1d(x, [0.5, 1.5, -1.0, 2.0], 0, mode=m, cval=0.3,
                                                 origin=-1)),
        ("convolve1d", lambda x: nd.convolve1d(x, [0.5, 1.5], 1, mode=m, cval=0.3)),
        ("correlate", lambda x: nd.correlate(x, W24, mode=m, cval=0.3, origin=(0, -1))),
        ("convolve", lambda x: nd.convolve(x, W24, mode=m, origin=(0, 1))),
        ("gaussian_filter", lambda x: nd.gaussian_filter(x, (1.0, 2.5), mode=m, cval=0.3)),
        ("gaussian_filter order", lambda x: nd.gaussian_filter(x, 0.8, (1, 2), mode=m)),
        ("gaussian_filter1d", lambda x: nd.gaussian_filter1d(x, 1.5, 0, 1, mode=m,
                                                             truncate=2.0)),
        ("uniform_filter", lambda x: nd.uniform_filter(x, (4, 3), mode=m)),
        ("uniform_filter1d", lambda x: nd.uniform_filter1d(x, 3, 0, mode=m, origin=-1)),
        ("laplace", lambda x: nd.laplace(x, mode=m)),
        ("sobel", lambda x: nd.sobel(x, 0, mode=m)),
        ("prewitt", lambda x: nd.prewitt(x, mode=m)),
    ]


@pytest.mark.parametrize("m", MODES)
def test_filters_against_scipy(m):
    for name, f in _filters(m):
        np.testing.assert_allclose(llgrad.differentiate(f)(IMG), f(IMG), rtol=1e-11,
                                   atol=1e-12, err_msg=name)


def filtered(x):
    return (np.sum(nd.gaussian_filter(x, 1.0) ** 2) + np.sum(nd.sobel(x, 0, mode="wrap") * IMG)
            + np.sum(nd.convolve(x, W24, mode="mirror") ** 2)
            + np.sum(nd.uniform_filter(x, 3, mode="constant", cval=1.0) ** 3)
            + np.sum(nd.correlate1d(x[0], [1.0, -2.0, 0.5]) ** 2))


def test_value_and_gradient(mode):
    value, grad = compiled(filtered, 0).value_and_grad(IMG)
    assert value == pytest.approx(filtered(IMG), rel=1e-12)
    fd = finite_differences(filtered, (IMG,), (0,))[0]
    np.testing.assert_allclose(grad, fd, rtol=1e-6, atol=1e-7 * np.abs(fd).max())


def test_traced_weights():
    f = lambda w: np.sum(nd.correlate(IMG, w, mode="nearest") ** 2)  # noqa: E731
    grad = llgrad.differentiate(f).grad(W24)
    np.testing.assert_allclose(grad, finite_differences(f, (W24,), (0,))[0], rtol=1e-6)


@pytest.mark.parametrize("call,err,match", [
    (lambda x: nd.gaussian_filter(x, 1.0, output=np.empty((6, 7))), UnsupportedError,
     r"gaussian_filter\(output=...\)(.*\n)*.*test_scipy_ndimage.py:\d+"),
    (lambda x: nd.convolve(x[None], np.ones((1, 2, 2))), UnsupportedError,
     r"convolve of 3-D arrays(.*\n)*.*test_scipy_ndimage.py:\d+"),
    (lambda x: nd.correlate1d(x, [1.0, 2.0, 3.0], origin=2), ValueError, "Invalid origin"),
    (lambda x: nd.uniform_filter(x, 3, mode="bogus"), RuntimeError, "boundary mode"),
    (lambda x: nd.correlate(x, np.ones(3)), RuntimeError, r"weights.ndim \(1\) must match"),
])
def test_errors(call, err, match):
    with pytest.raises(err, match=match):
        llgrad.differentiate(lambda x: np.sum(call(x)))(IMG)
