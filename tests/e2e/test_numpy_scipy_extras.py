"""Functions found missing by docs/library_survey.py, inside `llgrad.differentiate`: numpy's
quantile methods, np.histogram, np.linalg.multi_dot/cond/matrix_rank, np.polyder/polyint/
polyadd/polysub/polymul, scipy.special's entr/rel_entr/kl_div/huber/pseudo_huber and
scipy.stats' moment/skew/kurtosis/zscore. Values against
numpy/scipy (boundaries and NaN included), gradients against central differences (float64),
errors by their message."""
from __future__ import annotations

import numpy as np
import pytest
import scipy.special as sp
import scipy.stats as st

import llgrad
from llgrad.runtime.errors import UnsupportedError
from tests.e2e.conftest import compiled, finite_differences

R = np.random.default_rng(25)
M = R.standard_normal((4, 4))
V = R.standard_normal(5)
U, W = R.uniform(0.2, 2.0, 5), R.uniform(0.2, 2.0, 5)
METHODS = ["linear", "hazen", "weibull", "median_unbiased", "normal_unbiased",
           "interpolated_inverted_cdf", "lower", "higher", "nearest", "midpoint"]


def test_quantile_methods_against_numpy():
    for n in (1, 2, 5):
        x = R.standard_normal((n, 3))
        for m in METHODS:
            for q in (0.0, 0.1, 0.5, 0.7, 1.0, [0.05, 0.25, 0.95]):
                f = lambda x: np.quantile(x, q, axis=0, method=m)  # noqa: E731
                np.testing.assert_allclose(llgrad.differentiate(f)(x), f(x), rtol=1e-14,
                                           err_msg=f"n={n} {m} q={q}")


def quantiles(x):
    return (np.sum(np.percentile(x, [10.0, 35.0, 80.0], axis=0, method="hazen")
                   * [[1.0], [2.0], [3.0]]) + np.quantile(x, 0.3, method="midpoint")
            + np.quantile(x, 0.55, method="nearest"))


def linalg(a):
    return (np.linalg.multi_dot([a[0], a, a.T, a[:, 1]]) + np.sum(np.linalg.multi_dot([a, a, a]))
            + np.linalg.cond(a) + np.linalg.cond(a, -2) + np.linalg.cond(a, "fro")
            + np.linalg.cond(a, 1) + np.sum(np.linalg.cond(np.stack([a, a.T @ a])))
            + np.sum(a) * np.linalg.matrix_rank(a))


def polynomials(c):
    return (np.sum(np.polyder(c) * np.arange(4.0)) + np.sum(np.polyder(c, 2) ** 2)
            + np.sum(np.polyint(c) * np.arange(6.0)) + np.sum(np.polyint(c, 2, k=[1.0, 2.0]) ** 2)
            + np.sum(np.polyadd(c, [1.0, 2.0]) ** 2) + np.sum(np.polysub([1.0, 2.0], c) ** 3)
            + np.sum(np.polymul(c, c[:2]) ** 2))


def special(u):
    return (np.sum(sp.entr(u)) + np.sum(sp.rel_entr(u, W)) + np.sum(sp.kl_div(W, u))
            + np.sum(sp.huber(0.7, V * u)) + np.sum(sp.pseudo_huber(u, V)) + np.sum(sp.huber(u, V)))


DATA = np.round(R.uniform(0.0, 1.0, 20), 1)  # values on the edges too
DATA[3] = 1.0  # the last edge: in the last bin


def histograms(w):
    return (np.sum(np.histogram(DATA, 3, weights=w)[0] * [1.0, 2.0, 3.0])
            + np.sum(np.histogram(DATA, [0.0, 0.2, 0.5, 1.0], weights=w ** 2, density=True)[0])
            + np.sum(np.histogram(DATA * 2.0, 4, range=(0.1, 1.5), weights=w)[0] ** 2))


def moments(a):
    return (np.sum(st.skew(a, bias=False)) + np.sum(st.kurtosis(a) * [1.0, 2.0])
            + np.sum(st.zscore(a) * np.arange(12.0).reshape(6, 2))
            + np.sum(st.moment(a, 3, axis=1)) + st.kurtosis(a, axis=None, fisher=False))


CASES = [(quantiles, R.standard_normal((7, 3))), (linalg, M), (polynomials, V), (special, U),
         (histograms, R.uniform(0.5, 2.0, 20)), (moments, R.standard_normal((6, 2)))]


@pytest.mark.parametrize("fn,arg", CASES, ids=[c[0].__name__ for c in CASES])
def test_value_and_gradient(fn, arg, mode):
    value, grad = compiled(fn, 0).value_and_grad(arg)
    assert value == pytest.approx(fn(arg), rel=1e-12)
    fd = finite_differences(fn, (arg,), (0,))[0]
    np.testing.assert_allclose(grad, fd, rtol=1e-6, atol=1e-7 * max(1.0, np.abs(fd).max()))


def test_matrix_rank_counts_and_has_no_gradient():
    def f(a):
        low = a[:, :2] @ a[:2]  # rank 2
        return (np.linalg.matrix_rank(a) * 10 + np.linalg.matrix_rank(low)
                + 100 * np.linalg.matrix_rank(a[0]) + 1000 * np.linalg.matrix_rank(a, tol=1e9))
    assert llgrad.differentiate(f)(M) == f(M) == 142
    assert not llgrad.differentiate(lambda a: np.sum(a) * np.linalg.matrix_rank(a)).grad(
        M).std()  # the rank is a constant factor of the gradient: all entries equal


def test_special_boundaries_against_scipy():
    x = np.array([-1.0, 0.0, 0.3, 1.5, np.nan, np.inf, 2.0])
    y = np.array([0.5, 0.0, 0.0, 2.0, 1.0, 1.0, -1.0])
    delta = np.array([0.5, 0.0, 0.0, 2.0, 1.0, 1.0, -1.0])
    for name, args in [("entr", (x,)), ("rel_entr", (x, y)), ("kl_div", (x, y)),
                       ("huber", (delta, x)), ("pseudo_huber", (delta, x))]:
        f = getattr(sp, name)
        with np.errstate(all="ignore"):
            np.testing.assert_allclose(llgrad.differentiate(f)(*args), f(*args), rtol=1e-15,
                                          err_msg=name)


def test_unsupported_quantile_method_names_the_line():
    with pytest.raises(UnsupportedError, match=r"quantile\(method='inverted_cdf'\) is not "
                       r"supported(.*\n)*.*test_numpy_scipy_extras.py:\d+(.*\n)*.*hazen"):
        llgrad.differentiate(lambda x: np.quantile(x, 0.3, method="inverted_cdf"))(V)


def test_histograms_against_numpy():
    w = R.uniform(0.5, 2.0, 20)
    for bins, rng, density in [(3, None, None), (5, (0.1, 0.8), True),
                               ([0.0, 0.2, 0.5, 1.0], None, False), (4, None, True)]:
        f = lambda w: np.histogram(DATA, bins, rng, density, w)  # noqa: E731
        got, edges = llgrad.differentiate(f)(w)
        np.testing.assert_allclose(got, f(w)[0], rtol=1e-14)
        np.testing.assert_array_equal(edges, f(w)[1])
        if np.ndim(bins) or rng is not None:  # traced data, constant edges: counts
            for ww in (None, w):
                g = lambda x: np.histogram(x, bins, rng, density, ww)[0]  # noqa: E731
                got = llgrad.differentiate(g)(DATA)
                assert got.dtype == g(DATA).dtype
                np.testing.assert_allclose(got, g(DATA), rtol=1e-14)


def test_histogram_of_traced_data_needs_constant_edges():
    with pytest.raises(UnsupportedError, match=r"np.histogram of traced data with edges "
                       r"computed from the data(.*\n)*.*test_numpy_scipy_extras.py:\d+"
                       r"(.*\n)*.*range="):
        llgrad.differentiate(lambda x: np.sum(np.histogram(x, 4)[0] * x[:4]))(DATA)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # (scipy's, on the constant column)
def test_moments_against_scipy():
    m = R.standard_normal((6, 3))
    m[:, 2] = 1.5  # a constant column: NaN skew, kurtosis and z-scores
    for f in [lambda a: st.moment(a, 3), lambda a: st.moment(a, 5, axis=None),
              lambda a: st.moment(a, 0), lambda a: st.moment(a, 1),
              lambda a: st.moment(a, 2, center=0.5, keepdims=True),
              lambda a: st.skew(a), lambda a: st.skew(a, bias=False),
              lambda a: st.skew(a, axis=1, keepdims=True), lambda a: st.kurtosis(a),
              lambda a: st.kurtosis(a, fisher=False, bias=False), lambda a: st.zscore(a),
              lambda a: st.zscore(a, axis=1, ddof=1), lambda a: st.zscore(a, axis=None)]:
        want = f(m)
        got = llgrad.differentiate(f)(m)
        assert np.shape(got) == np.shape(want)
        np.testing.assert_allclose(got, want, rtol=1e-12)
    with pytest.raises(UnsupportedError, match=r"skew\(nan_policy='omit'\)(.*\n)*.*"
                       r"test_numpy_scipy_extras.py:\d+"):
        llgrad.differentiate(lambda a: np.sum(st.skew(a, nan_policy="omit")))(m)
