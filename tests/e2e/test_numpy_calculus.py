"""np.nanmax/nanmin, np.gradient, np.ediff1d, np.unwrap, scipy.integrate.trapezoid/cumulative_trapezoid,
scipy.linalg.expm and np.linalg.lstsq inside `llgrad.differentiate`: values against numpy and
scipy, gradients against central differences (float64), through the interpreter and natively;
their errors; and the error for a scipy function llgrad does not support (Note [Unsupported
library functions] in tracer/operators.py)."""
from __future__ import annotations

import numpy as np
import pytest
import scipy.integrate as si
import scipy.linalg as sl
import scipy.ndimage

import llgrad
from llgrad.runtime.errors import LinAlgError, UnsupportedError
from tests.e2e.conftest import compiled, finite_differences

R = np.random.default_rng(19)
Y6 = R.standard_normal(6)
X6 = np.cumsum(R.uniform(0.2, 1.0, 6))  # uneven coordinates
M45 = R.standard_normal((4, 5))
NANS = M45.copy()
NANS[1, 2] = NANS[3, 0] = np.nan


def _weights(shape):
    return np.linspace(0.5, 1.5, int(np.prod(shape))).reshape(shape)


def nanmax_rows(m):
    return np.sum(np.nanmax(m, axis=1) * np.arange(1.0, 5.0)) + np.nanmin(m)


def nanmin_cols_keepdims(m):
    return np.sum(np.nanmin(m, axis=0, keepdims=True) ** 2) + np.nanmax(m * 2.0)


def gradient_uniform(y):
    return np.sum(np.gradient(y) * _weights(6)) + np.sum(np.gradient(y, 0.3) ** 2)


def gradient_coordinates(y):
    return np.sum(np.gradient(y, X6) ** 2)


def gradient_coordinates_traced(x):  # the coordinates themselves differentiated
    return np.sum(np.gradient(Y6, np.cumsum(np.exp(x))) * _weights(6))


def gradient_2d(m):
    gy, gx = np.gradient(m, 0.5, X6[:5])
    return np.sum(gy * gx) + np.sum(np.gradient(m, axis=-1) * _weights((4, 5)))


def ediff1d(m):
    return np.sum(np.ediff1d(m, to_begin=-1.0, to_end=[2.0, 3.0]) ** 2 * _weights(22))


def trapezoids(y):
    return (si.trapezoid(y ** 2, X6) + si.trapezoid(y, dx=0.3)
            + np.sum(si.cumulative_trapezoid(y, X6, initial=0) * _weights(6)))


def trapezoids_2d(m):
    return (np.sum(si.cumulative_trapezoid(m, dx=0.2, axis=0) ** 2)
            + np.sum(si.trapezoid(m, X6[:5]) ** 2))


def expm_sum(a):
    return np.sum(sl.expm(a) * _weights(a.shape))


def lstsq_tall(a):
    x, res, rank, s = np.linalg.lstsq(a, Y6[:5], rcond=None)
    return np.sum(x * np.arange(1.0, 4.0)) + res[0] + np.sum(s) + rank


def unwrap_phases(x):  # wrapped by arctan2, a jump of about 2 pi between each pair
    phases = np.arctan2(np.sin(x), np.cos(x))
    return np.sum(np.unwrap(phases) * _weights(x.shape)) + np.sum(np.unwrap(x, axis=0) ** 2)


def lstsq_wide_2d(a):
    x = np.linalg.lstsq(a.T, M45[:3, :2], rcond=None)[0]
    return np.sum(x * _weights((5, 2)))


CASES = [
    (nanmax_rows, NANS), (nanmin_cols_keepdims, NANS), (gradient_uniform, Y6),
    (gradient_coordinates, Y6), (gradient_coordinates_traced, 0.3 * Y6), (gradient_2d, M45),
    (ediff1d, M45), (trapezoids, Y6), (trapezoids_2d, M45),
    (expm_sum, 0.3 * M45[:, :4]),  # no squaring
    (expm_sum, 4.0 * M45[:, :4]),  # norm > theta_13: squarings
    (expm_sum, np.stack([M45[:3, :3], 3.0 * M45[1:, 2:]])),  # a stack, one with squarings
    (lstsq_tall, R.standard_normal((5, 3))),
    (lstsq_wide_2d, R.standard_normal((5, 3))),
    (unwrap_phases, np.cumsum(R.uniform(1.0, 4.0, (5, 4)), axis=1)),
]


def _finite(a):
    return np.where(np.isnan(a), 0.0, a)


@pytest.mark.parametrize("fn,arg", CASES, ids=[f"{c[0].__name__}{i}" for i, c in
                                               enumerate(CASES)])
def test_value_and_gradient(fn, arg, mode):
    value, grad = compiled(fn, 0).value_and_grad(arg)
    np.testing.assert_allclose(value, fn(arg), rtol=1e-11)
    # (a NaN entry gets no gradient; its central difference is NaN)
    fd = finite_differences(fn, (arg,), (0,))[0]
    np.testing.assert_allclose(grad, _finite(fd), rtol=1e-6, atol=1e-7)


def test_expm_is_scipys_across_scales(mode):
    f = compiled(lambda a: sl.expm(a), 0)
    for scale in (1e-3, 0.5, 5.0, 40.0, 100.0):
        a = scale * M45[:, :4]
        want = sl.expm(a)
        np.testing.assert_allclose(f(a), want, rtol=1e-9, atol=1e-12 * np.abs(want).max())


def test_nan_extrema_of_all_nan_slice_and_integers(mode):
    m = NANS.copy()
    m[2] = np.nan
    with np.errstate(all="ignore"):
        got = compiled(lambda m: np.nanmax(m, axis=1) + np.nanmin(m, axis=1), 0)(m)
    with pytest.warns(RuntimeWarning):
        want = np.nanmax(m, axis=1) + np.nanmin(m, axis=1)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_allclose(got[~np.isnan(want)], want[~np.isnan(want)])
    ints = np.array([[3, 1], [2, 5]])
    assert llgrad.differentiate(lambda a, k: np.sum(a) * np.nanmax(k, axis=0), wrt=0)(
        np.ones(2), ints).tolist() == [6.0, 10.0]


def test_lstsq_rank_deficient_is_an_error(mode):
    a = R.standard_normal((5, 3))
    a[:, 2] = a[:, 0] - a[:, 1]
    f = compiled(lambda a: np.sum(np.linalg.lstsq(a, Y6[:5], rcond=None)[0]), 0)
    f.value_and_grad(R.standard_normal((5, 3)))  # compiled for full rank: fine
    with pytest.raises(LinAlgError, match="lstsq of a rank-deficient matrix.*\n.*"
                       "test_numpy_calculus.py.*\n(.*\n)*.*np.linalg.pinv"):
        f.value_and_grad(a)


def test_expm_of_a_huge_norm_is_an_error(mode):
    with pytest.raises(UnsupportedError, match="expm of a matrix of 1-norm above"):
        compiled(expm_sum, 0).value_and_grad(1e9 * M45[:, :4])


def test_argument_errors():
    with pytest.raises(UnsupportedError, match=r"np.gradient\(edge_order=2\)"):
        llgrad.differentiate(lambda y: np.sum(np.gradient(y, edge_order=2)))(Y6)
    with pytest.raises(ValueError, match="`initial` must be `None` or `0`"):
        llgrad.differentiate(lambda y: np.sum(si.cumulative_trapezoid(y, initial=1.0)))(Y6)
    with pytest.raises(ValueError, match="at least \\(edge_order \\+ 1\\) elements"):
        llgrad.differentiate(lambda y: np.sum(np.gradient(y[:1])))(Y6)
    with pytest.raises(UnsupportedError, match="np.unwrap of integers with an integer period"):
        llgrad.differentiate(lambda y, k: np.sum(y) + np.sum(np.unwrap(k, period=360)))(
            Y6, np.arange(4) * 200)


def resample(a):
    return np.sum(scipy.signal.resample(a, 5))


def rank(a):
    return np.sum(scipy.ndimage.rank_filter(a, 1, 3))


def logm(a):  # a scipy function whose Python code fails on traced values
    return np.sum(sl.logm(a))


@pytest.mark.parametrize("fn,name,fix", [
    (resample, "scipy.signal.resample", "docs/numpy_support.md"),
    (rank, "scipy.ndimage.rank_filter", "sliding_window_view"),
    (logm, "scipy.linalg.logm", "docs/numpy_support.md"),
])
@pytest.mark.filterwarnings("ignore::llgrad.runtime.errors.DynamicPathWarning")
def test_unsupported_library_function_names_itself_and_the_line(fn, name, fix):
    with pytest.raises(UnsupportedError, match=rf"{name} is not supported on traced values"
                       rf"(.*\n)*.*test_numpy_calculus.py:\d+ \(in {fn.__name__}\)"
                       rf"(.*\n)*.*How to fix:.*{fix}"):
        llgrad.differentiate(fn)(np.eye(3) + 0.1 * M45[:3, :3])


def quad_of_a_closure(k):  # quad's C code calls float() on what the integrand returns
    value, _ = si.quad(lambda t: np.exp(-k[0] * t), 0.0, 1.0)
    return value


@pytest.mark.filterwarnings("ignore::llgrad.runtime.errors.DynamicPathWarning")
def test_a_library_turning_a_traced_float_into_a_number_is_refused():
    """On the dynamic path the number would be a constant: a zero gradient where the user
    asked for none (Note [Unsupported library functions]). The user's own float() stays a
    documented constant."""
    with pytest.raises(UnsupportedError, match=r"scipy.integrate._quadpack_py converts a traced "
                       r"float to a Python number \(float\(\)\), which would lose its gradient"
                       r"(.*\n)*.*test_numpy_calculus.py:\d+ \(in quad_of_a_closure\)"
                       r"(.*\n)*.*How to fix:.*np.trapezoid"):
        llgrad.differentiate(quad_of_a_closure).grad(np.array([0.7]))

    def own_float(k):
        return float(k[0]) * k[1]
    assert llgrad.differentiate(own_float).grad(np.array([2.0, 3.0]))[0] == 0.0


# ---- sorted() of traced scalars: one np.sort, staged ------------------------------------------
def sorted_scalars(a):
    s = sorted([a[0], a[1] * 2.0, a[2] - 1.0, a[3]])
    r = sorted((a[0], a[3]), reverse=True)
    return s[0] + 2.0 * s[1] + 3.0 * s[2] + 4.0 * s[3] + 10.0 * r[0] + r[1]


def test_sorted_of_traced_scalars_stays_compiled(mode):
    import warnings
    a = np.array([0.3, -0.2, 0.9, 0.1])
    with warnings.catch_warnings():
        warnings.simplefilter("error", llgrad.runtime.errors.DynamicPathWarning)
        value, grad = llgrad.differentiate(sorted_scalars).value_and_grad(a)
    assert value == pytest.approx(sorted_scalars(a), rel=1e-14)
    np.testing.assert_allclose(grad, finite_differences(sorted_scalars, (a,), (0,))[0],
                               rtol=1e-8)
    np.testing.assert_allclose(grad, [14.0, 2.0, 2.0, 4.0])  # by hand: ranks times weights


# ---- np.apply_along_axis: batched (Note [np.apply_along_axis on traced values]) -------------
def _pnorm(r, p=2.0):
    return np.sum(np.abs(r) ** p) ** (1 / p)


def along_axes(m):
    a = np.apply_along_axis(_pnorm, 1, m)
    b = np.apply_along_axis(lambda r: r[::-1] * r, 0, m)  # the result's axis where axis 0 was
    c = np.apply_along_axis(np.sum, -1, m[None] * 2.0)
    d = np.apply_along_axis(_pnorm, 0, m, 3.0)  # extra arguments passed on
    e = np.apply_along_axis(lambda r: (np.max(r), np.min(r)), 1, m)  # a tuple: stacked
    return (np.sum(a) + np.sum(b * m) + np.sum(c ** 2) + np.sum(d) + np.sum(e * np.arange(2.0))
            + np.sum(np.apply_along_axis(lambda r: np.outer(r, r), 1, m)[1] * m[0]))


def test_apply_along_axis(mode):
    value, grad = compiled(along_axes, 0).value_and_grad(M45)
    assert value == pytest.approx(along_axes(M45), rel=1e-12)
    np.testing.assert_allclose(grad, finite_differences(along_axes, (M45,), (0,))[0],
                               rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("name", ["eigvals", "eig"])
def test_eig_of_a_general_matrix_is_refused_with_the_symmetric_alternative(name):
    fn = getattr(np.linalg, name)
    with pytest.raises(UnsupportedError, match=rf"np.linalg.{name} is not supported(.*\n)*.*"
                       rf"test_numpy_calculus.py(.*\n)*.*np.linalg.{name}h"):
        llgrad.differentiate(lambda a: np.sum(fn(a)[0]))(M45[:3, :3])
