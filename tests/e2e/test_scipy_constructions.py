"""scipy.linalg's block_diag, toeplitz, circulant, sqrtm, lu_factor and lu_solve;
np.nanmedian / nanpercentile / nanquantile; scipy.signal's sosfilt, detrend, savgol_filter
and medfilt; scipy.ndimage's median_filter; np.roots' refusal, inside `llgrad.differentiate`: values against numpy/scipy, gradients against
central differences (float64), and the errors."""
from __future__ import annotations

import numpy as np
import pytest
import scipy.linalg as sl
import scipy.ndimage as nd
import scipy.signal as S

import llgrad
from llgrad.runtime.errors import UnsupportedError
from tests.e2e.conftest import finite_differences

R = np.random.default_rng(23)
V = R.standard_normal(16)
M = R.standard_normal((3, 12))
MT = np.ascontiguousarray(M.T)
SQ = R.standard_normal((4, 4))
IMG = R.standard_normal((6, 7))
SOS = S.butter(3, 0.3, output="sos")
ZI = R.standard_normal((SOS.shape[0], 2))
RECT = R.standard_normal((5, 3))
B = R.standard_normal((4, 2))
NONSYM = np.array([[4.0, 1.0, 0.5], [-0.3, 3.0, 0.2], [0.1, 0.4, 2.0]])
NANS = R.standard_normal((4, 6))
NANS[0, 2] = NANS[2, [0, 3, 5]] = np.nan


def _sos_rows(s):  # traced sections, a0 kept 1 (scipy requires it)
    return S.sosfilt(np.concatenate([s[:, :3], SOS[:, 3:4], s[:, 4:]], 1), V)


CASES = [
    ("block_diag", lambda a: sl.block_diag(a, a[:2, :2], 3.0, a[0]), SQ),
    ("toeplitz", lambda v: sl.toeplitz(v[:5]), V),
    ("toeplitz_r", lambda v: sl.toeplitz(v[:5], v[3:6] * 2.0), V),
    ("toeplitz_batch", lambda m: sl.toeplitz(m, m[:, :4]), M),
    ("circulant", lambda v: sl.circulant(v[:6]), V),
    ("circulant_batch", lambda m: sl.circulant(m[:, :5]), M),
    ("sqrtm_spd", lambda a: sl.sqrtm(a @ a.T + np.eye(4)), SQ),
    ("sqrtm_nonsymmetric", lambda a: sl.sqrtm(a), NONSYM),
    ("sqrtm_batch", lambda a: sl.sqrtm(np.stack([a, a.T]) + 5 * np.eye(4)), SQ),
    ("lu_factor", lambda a: sl.lu_factor(a)[0], SQ),
    ("lu_factor_wide", lambda a: sl.lu_factor(a)[0], np.ascontiguousarray(RECT.T)),
    ("lu_factor_tall", lambda a: sl.lu_factor(a)[0], RECT),
    ("lu_solve", lambda a: sl.lu_solve(sl.lu_factor(a), B), SQ),
    ("lu_solve_vector_b", lambda b: sl.lu_solve(sl.lu_factor(SQ), b[:, 0]), B),
    ("nanmedian", lambda a: np.nanmedian(a, axis=1), NANS[[0, 2, 3]]),
    ("nanmedian_all", lambda a: np.nanmedian(a), NANS),
    ("nanpercentile", lambda a: np.nanpercentile(a, [10.0, 55.0], axis=1, keepdims=True),
     NANS[[0, 2, 3]]),
    ("nanquantile", lambda a: np.nanquantile(a, 0.3, axis=0), NANS),
    ("sosfilt", lambda v: S.sosfilt(SOS, v), V),
    ("sosfilt_axis0", lambda m: S.sosfilt(SOS, m, axis=0), MT),
    ("sosfilt_zi", lambda v: S.sosfilt(SOS, v, zi=ZI)[0] + np.sum(S.sosfilt(SOS, v, zi=ZI)[1]),
     V),
    ("sosfilt_traced_sos", _sos_rows, SOS),
    ("detrend", lambda v: S.detrend(v), V),
    ("detrend_axis0", lambda m: S.detrend(m, axis=0), M),
    ("detrend_constant", lambda m: S.detrend(m, type="constant"), M),
    ("savgol", lambda v: S.savgol_filter(v, 5, 2), V),
    ("savgol_even_window", lambda v: S.savgol_filter(v, 6, 3), V),
    ("savgol_deriv_axis0", lambda m: S.savgol_filter(m, 7, 3, deriv=1, delta=0.5, axis=0),
     MT),
    ("savgol_mirror", lambda v: S.savgol_filter(v, 5, 2, mode="mirror"), V),
    ("savgol_constant", lambda v: S.savgol_filter(v, 5, 2, mode="constant", cval=1.5), V),
    ("medfilt", lambda v: S.medfilt(v, 5), V),
    ("medfilt_2d", lambda a: S.medfilt(a), IMG),
    ("median_filter", lambda a: nd.median_filter(a, 3), IMG),
    ("median_filter_even", lambda a: nd.median_filter(a, (2, 3), mode="nearest"), IMG),
    ("median_filter_footprint", lambda a: nd.median_filter(a, footprint=np.ones((3, 1)),
                                                           mode="wrap"), IMG),
]


@pytest.mark.parametrize("fn,arg", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_value_and_gradient(fn, arg):
    want = fn(arg)
    got = llgrad.differentiate(fn)(arg)
    assert np.shape(got) == np.shape(want)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-13)
    weights = np.arange(1.0, np.size(want) + 1.0).reshape(np.shape(want))
    loss = lambda a: np.sum(fn(a) * weights)  # noqa: E731
    value, grad = llgrad.differentiate(loss).value_and_grad(arg)
    assert value == pytest.approx(loss(arg), rel=1e-12)
    # (a NaN moved by eps stays NaN: the differences there are 0, as the gradient)
    np.testing.assert_allclose(grad, finite_differences(loss, (arg,), (0,))[0], rtol=1e-6,
                               atol=1e-6)


def test_nanmedian_of_all_nans_is_nan_with_zero_gradient():
    a = NANS.copy()
    a[1] = np.nan
    f = llgrad.differentiate(lambda a: np.nanmedian(a, axis=1))
    with np.errstate(all="ignore"), pytest.warns(RuntimeWarning):
        np.testing.assert_array_equal(f(a), np.nanmedian(a, axis=1))
    g = llgrad.differentiate(lambda a: np.nansum(np.nanmedian(a, axis=1))).grad(a)
    assert np.all(g[1] == 0) and np.all(g[np.isnan(a)] == 0)


def test_lu_factor_pivots_are_lapacks():
    lu, piv = llgrad.differentiate(lambda a: sl.lu_factor(a))(SQ)
    np.testing.assert_array_equal(piv, sl.lu_factor(SQ)[1])


def test_errors():
    with pytest.raises(UnsupportedError, match=r"sqrtm: the matrix has no real principal "
                       r"square root(.*\n)*.*test_scipy_constructions.py:\d+"):
        llgrad.differentiate(lambda a: sl.sqrtm(a))(np.diag([1.0, -2.0, 3.0]))
    with pytest.raises(UnsupportedError, match=r"np.roots is not supported(.*\n)*.*"
                       r"test_scipy_constructions.py:\d+(.*\n)*.*quadratic"):
        llgrad.differentiate(lambda v: np.roots(v[:3]))(V)
    with pytest.raises(UnsupportedError, match=r"detrend with breakpoints(.*\n)*.*"
                       r"test_scipy_constructions.py:\d+"):
        llgrad.differentiate(lambda v: np.sum(S.detrend(v, bp=[4])))(V)
    with pytest.raises(UnsupportedError, match=r"nanquantile\(method='nearest'\)"):
        llgrad.differentiate(lambda v: np.nanquantile(v, 0.3, method="nearest"))(V)
    with pytest.raises(UnsupportedError, match=r"footprint that is not all ones"):
        llgrad.differentiate(lambda a: nd.median_filter(a, footprint=np.eye(3)))(IMG)
    with pytest.raises(ValueError, match=r"kernel_size should be odd"):
        llgrad.differentiate(lambda v: S.medfilt(v, 4))(V)
    with pytest.raises(ValueError, match=r"sos\[:, 3\] should be all ones"):
        llgrad.differentiate(lambda v: S.sosfilt(SOS * 2.0, v))(V)
