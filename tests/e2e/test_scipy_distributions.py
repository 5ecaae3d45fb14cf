"""scipy.stats's distributions in compiled functions (runtime/scipy_stats.py, scipy_dists.py):
t, gamma, beta, expon, laplace, logistic, lognorm, cauchy (logpdf, pdf, cdf/sf where cheap),
poisson, binom, nbinom (logpmf, pmf) and multivariate_normal.logpdf, by method and frozen,
equal to scipy's values (float64; invalid parameters, the support's edges, NaN; parameters
broadcast against x) with gradients in x, loc, scale and the shape parameters equal to finite
differences, natively, through the interpreter and on the dynamic path."""
from __future__ import annotations

import numpy as np
import pytest
import scipy.stats as st

import llgrad
from llgrad.runtime.errors import UnsupportedError
from tests.e2e.conftest import finite_differences

# name: (valid shapes, an invalid one in its place, x inside the support for gradients)
CONTINUOUS = {
    "t": ((2.5,), (-1.0,), [-2.0, -0.3, 0.4, 3.0]),
    "gamma": ((1.7,), (0.0,), [0.2, 0.9, 2.5, 6.0]),
    "beta": ((2.0, 3.5), (2.0, -1.0), [0.1, 0.35, 0.6, 0.9]),
    "expon": ((), (), [0.1, 0.8, 2.0, 5.0]),
    "laplace": ((), (), [-2.0, -0.3, 0.4, 3.0]),
    "logistic": ((), (), [-2.0, -0.3, 0.4, 3.0]),
    "lognorm": ((0.8,), (-0.5,), [0.2, 0.9, 2.5, 6.0]),
    "cauchy": ((), (), [-2.0, -0.3, 0.4, 3.0]),
}
# x across the support's edges (0, 1), far out, infinite and NaN
X = np.array([-np.inf, -40.0, -1.0, 0.0, 1e-3, 0.3, 1.0, 1.5, 30.0, np.inf, np.nan])


def _methods(name):
    d = getattr(st, name)
    return [getattr(d, m) for m in ("logpdf", "pdf", "cdf", "sf")
            if m in ("logpdf", "pdf") or name not in ("t", "gamma", "beta")]


def _all_continuous(name, x, shapes, loc, scale):
    return tuple(m(x, *shapes, loc=loc, scale=scale) for m in _methods(name))


@pytest.mark.parametrize("name", list(CONTINUOUS))
def test_continuous_methods_match_scipy(name, mode):
    """Valid and invalid shapes side by side (broadcast against x as a column), with a
    positive, a broadcast and a non-positive scale."""
    good, bad, _ = CONTINUOUS[name]
    shapes = tuple(np.array([g, b]) for g, b in zip(good, bad))
    for loc, scale in [(0.0, 1.0), (np.array([0.3, -0.2]), 2.0), (0.1, np.array([1.5, -1.0]))]:
        def f(x):
            return _all_continuous(name, x, shapes, loc, scale)
        with np.errstate(all="ignore"):
            got, want = llgrad.differentiate(f)(X[:, None]), f(X[:, None])
        for g, w in zip(got, want):
            assert np.asarray(g).dtype == w.dtype == np.float64 and g.shape == w.shape
            np.testing.assert_allclose(g, w, rtol=1e-13, atol=0, equal_nan=True)


def test_float32_x_and_scalar_results_as_scipy(mode):
    x = np.float32(0.7)
    got = llgrad.differentiate(lambda x: _all_continuous("logistic", x, (), 0.2, 1.5))(x)
    for g, w in zip(got, _all_continuous("logistic", x, (), 0.2, 1.5)):
        assert np.asarray(g).dtype == np.float64 and np.shape(g) == ()
        np.testing.assert_allclose(g, w, rtol=1e-14)


def test_an_integer_scale_is_taken_in_float64_as_scipy(mode):
    """`norm.logpdf(x, 0, 5)`: log(5) in float64 (it was float32, 3e-8 off)."""
    def f(x):
        return st.norm.logpdf(x, 0, 5) + st.cauchy.logpdf(x, 1, 5) + st.cauchy.pdf(x, 1, 5)
    assert llgrad.differentiate(f)(0.7) == pytest.approx(f(0.7), rel=1e-15)


@pytest.mark.parametrize("name", list(CONTINUOUS))
def test_continuous_gradients_match_finite_differences(name, mode):
    good, _, x = CONTINUOUS[name]
    x = np.array(x)

    def loss(x, loc, scale, *shapes):
        return sum(np.sum(np.tanh(v)) for v in _all_continuous(name, x, shapes, loc, scale))
    args = (x, np.array(0.05), np.array(1.1)) + tuple(np.array(s) for s in good)
    wrt = tuple(range(len(args)))
    grads = llgrad.differentiate(loss, wrt=wrt).grad(*args)
    for i, (g, n) in enumerate(zip(grads, finite_differences(loss, args, wrt))):
        np.testing.assert_allclose(g, n, rtol=1e-6, atol=1e-8, err_msg=f"argument {i}")


def test_t_with_large_df_keeps_its_accuracy(mode):
    """log(Gamma((df+1)/2) / Gamma(df/2)) by its expansion from df = 200 on: scipy's value
    below; above, where scipy's own poch loses 1e-12, the exact recurrence
    logpdf(0, df + 2) - logpdf(0, df) = log1p(1/df) - log1p(2/df)/2; the normal limit."""
    x = np.array([-3.0, 0.0, 0.5, 2.0])
    f = llgrad.differentiate(lambda x, df: st.t.logpdf(x, df))
    for df in (3.0, 30.0, 199.0, 201.0):
        np.testing.assert_allclose(f(x, df), st.t.logpdf(x, df), rtol=1e-13, atol=0)
    for df in (199.0, 5e3, 1e5):
        step = f(0.0, df + 2.0) - f(0.0, df)
        assert abs(step - (np.log1p(1 / df) - np.log1p(2 / df) / 2)) < 2e-15  # (scipy: 1e-12)
    np.testing.assert_allclose(f(x, 1e15), st.norm.logpdf(x), rtol=1e-13)


def test_constant_parameters_cost_no_selects():
    """Note [scipy's methods as selects]: with constant shapes and scale over all reals the
    method is its formula; a bounded support or a traced scale selects."""
    x = np.linspace(-1.0, 1.0, 8)
    for fn in (lambda x: st.t.logpdf(x, 3.0, scale=2.0), lambda x: st.norm.logpdf(x, 0.5),
               lambda x: st.logistic.cdf(x, scale=np.array([1.0, 2.0])[:, None])):
        assert " where " not in llgrad.differentiate(fn).inspect(x).forward_ir
    assert " where " in llgrad.differentiate(
        lambda x: st.gamma.logpdf(x, 2.0)).inspect(x).forward_ir
    # a traced scale selects, but a constant df's normaliser stays a constant
    ir = llgrad.differentiate(lambda x, s: st.t.logpdf(x, 3.0, 0.5, s)).inspect(x, 1.5).forward_ir
    assert " where " in ir and " lgamma " not in ir and " gamma " not in ir


# name: (valid shapes, invalid shapes in their place)
DISCRETE = {"poisson": ((3.2,), (-1.0,)), "binom": ((10.0, 0.3), (2.5, 0.3)),
            "nbinom": ((4.5, 0.4), (4.5, 1.5))}
K = np.array([-1.0, 0.0, 1.0, 2.0, 3.5, 7.0, 10.0, 11.0, 40.0, np.nan])


def _all_discrete(name, k, shapes, loc=0):
    d = getattr(st, name)
    return d.logpmf(k, *shapes, loc=loc), d.pmf(k, *shapes, loc)


@pytest.mark.parametrize("name", list(DISCRETE))
def test_discrete_methods_match_scipy(name, mode):
    good, bad = DISCRETE[name]
    shapes = tuple(np.array([g, b]) for g, b in zip(good, bad))
    for loc in (0, np.array([0.0, 1.0])):
        def f(k):
            return _all_discrete(name, k, shapes, loc)
        with np.errstate(all="ignore"):
            got, want = llgrad.differentiate(f)(K[:, None]), f(K[:, None])
        for g, w in zip(got, want):
            assert g.dtype == w.dtype == np.float64 and g.shape == w.shape
            # (scipy's binom/nbinom pmf are Boost's, not exp(logpmf): a few ulp apart)
            np.testing.assert_allclose(g, w, rtol=1e-12, atol=0, equal_nan=True)


@pytest.mark.parametrize("name", list(DISCRETE))
def test_discrete_gradients_in_the_parameters(name, mode):
    """The shapes (binom's n only takes integers: its p), as a likelihood of counts."""
    good, _ = DISCRETE[name]
    k = np.array([0.0, 1.0, 3.0, 4.0, 9.0])

    def loss(*shapes):
        logpmf, pmf = _all_discrete(name, k, shapes)
        return np.sum(logpmf) + np.sum(pmf)
    args = tuple(np.array(s) for s in good)
    wrt = (1,) if name == "binom" else tuple(range(len(args)))
    grads = llgrad.differentiate(loss, wrt=wrt).grad(*args)
    grads = (grads,) if len(wrt) == 1 else grads
    for g, n in zip(grads, finite_differences(loss, args, wrt)):
        np.testing.assert_allclose(g, n, rtol=1e-6, atol=1e-9)


def test_frozen_distributions_with_traced_or_constant_parameters(mode):
    x = np.array([0.4, 1.3, 2.8])

    def traced(df, loc, scale, a):
        t, g = st.t(df, loc, scale=scale), st.gamma(a, scale=scale)
        return np.sum(t.logpdf(x) + t.pdf(x) + g.logpdf(x)) + np.sum(st.poisson(a).logpmf([0, 2]))

    def constant(x):  # frozen distributions of constants (their own copies) on traced x
        return np.sum(st.t(3.0, 0.5).logpdf(x) + st.lognorm(0.7).cdf(x)
                      + st.beta(2.0, 3.0, scale=4.0).logpdf(x))
    args = (np.array(2.2), np.array(0.1), np.array(1.4), np.array(1.9))
    f = llgrad.differentiate(traced, wrt=(0, 1, 2, 3))
    np.testing.assert_allclose(f(*args), traced(*args), rtol=1e-14)
    for g, n in zip(f.grad(*args), finite_differences(traced, args, (0, 1, 2, 3))):
        np.testing.assert_allclose(g, n, rtol=1e-6)
    h = llgrad.differentiate(constant)
    np.testing.assert_allclose(h(x), constant(x), rtol=1e-14)
    np.testing.assert_allclose(h.grad(x), finite_differences(constant, (x,), (0,))[0], rtol=1e-6)


def test_dynamic_path_gives_the_same_values_and_gradients():
    x = np.array([0.3, 1.2, 2.0])

    def f(a, s):
        n = 1 + int(float(a))  # (concretises: the dynamic path)
        return np.sum(st.gamma.logpdf(x, a, scale=s)) * n + np.sum(st.nbinom.logpmf([1, 4], a, 0.3))
    d = llgrad.differentiate(f, wrt=(0, 1))
    np.testing.assert_allclose(d(1.5, 0.8), f(1.5, 0.8), rtol=1e-14)
    assert d.inspect(1.5, 0.8).path.startswith("dynamic")
    for g, n in zip(d.grad(1.5, 0.8), finite_differences(f, (1.5, 0.8), (0, 1))):
        np.testing.assert_allclose(g, n, rtol=1e-6)


def test_unsupported_methods_name_the_line():
    cases = [lambda x: st.t.ppf(x, 3.0), lambda x: st.gamma.cdf(x, 2.0),
             lambda x: st.poisson.cdf(x, 2.0), lambda x: st.t(x, 1.0).sf(0.3),
             lambda x: st.multivariate_normal.cdf(x, np.zeros(1))]
    for fn, what in zip(cases, [r"scipy\.stats\.t\.ppf", r"scipy\.stats\.gamma\.cdf",
                                r"scipy\.stats\.poisson\.cdf", r"scipy\.stats\.t\(\.\.\.\)\.sf",
                                r"scipy\.stats\.multivariate_normal\.cdf"]):
        with pytest.raises((UnsupportedError, AttributeError),
                           match=what + r" is not supported on llgrad values \(supported: "
                           r"log.*\n  at .*test_scipy_distributions\.py"):
            llgrad.differentiate(fn)(np.array(0.4))


# ---- multivariate_normal.logpdf ----------------------------------------------------------------
XS = np.array([[0.3, -0.2, 1.0], [1.0, 0.5, -0.4], [0.1, 0.1, 0.0], [-2.0, 0.7, 0.3]])
MEAN = np.array([0.1, 0.2, -0.3])
COV = np.array([[1.0, 0.3, 0.1], [0.3, 2.0, -0.4], [0.1, -0.4, 1.5]])


@pytest.mark.parametrize("x, mean, cov", [
    (XS, MEAN, COV), (XS[0], MEAN, COV), (XS, None, COV), (XS, MEAN, np.array([0.5, 2.0, 1.5])),
    (XS, MEAN, 2.5), (np.array([0.3, -1.0, 2.0]), 0.5, 2.0), (np.array(0.4), None, 1.0),
    (XS[:1], MEAN, COV)], ids=["matrix", "one-point", "no-mean", "diagonal", "number", "1-d",
                               "0-d", "one-row"])
def test_multivariate_normal_logpdf_matches_scipy(x, mean, cov, mode):
    f = llgrad.differentiate(lambda x, mean, cov: st.multivariate_normal.logpdf(x, mean, cov))
    got, want = f(x, mean, cov), st.multivariate_normal.logpdf(x, mean, cov)
    assert np.shape(got) == np.shape(want)
    np.testing.assert_allclose(got, want, rtol=1e-13)


def _mvn_loss(x, mean, c):
    cov = (c + c.T) / 2  # (a symmetric matrix either side of finite differences)
    return (np.sum(st.multivariate_normal.logpdf(x, mean, cov))
            + np.sum(st.multivariate_normal(mean, cov=cov).logpdf(x[:2]))
            + np.sum(st.multivariate_normal.pdf(x, mean, cov=cov) * 10.0)
            + st.multivariate_normal(mean, cov).pdf(x[3]))


def test_multivariate_normal_gradients_in_x_mean_and_cov(mode):
    f = llgrad.differentiate(_mvn_loss, wrt=(0, 1, 2))
    args = (XS, MEAN, COV)
    np.testing.assert_allclose(f(*args), _mvn_loss(*args), rtol=1e-13)
    for g, n in zip(f.grad(*args), finite_differences(_mvn_loss, args, (0, 1, 2))):
        np.testing.assert_allclose(g, n, rtol=1e-6, atol=1e-9)


def test_multivariate_normal_frozen_of_constants_on_traced_x(mode):
    def f(x):
        return np.sum(st.multivariate_normal(MEAN, COV).logpdf(x))
    d = llgrad.differentiate(f)
    np.testing.assert_allclose(d(XS), f(XS), rtol=1e-13)
    np.testing.assert_allclose(d.grad(XS), finite_differences(f, (XS,), (0,))[0], rtol=1e-6)


def test_multivariate_normal_refuses_singular_and_non_positive_definite_covariances():
    f = llgrad.differentiate(lambda m: st.multivariate_normal.logpdf(XS, m, COV,
                                                                     allow_singular=True))
    with pytest.raises(UnsupportedError, match=r"allow_singular=True\) is not supported.*\n"
                                               r"  at .*test_scipy_distributions"):
        f(MEAN)
    g = llgrad.differentiate(lambda c: np.sum(st.multivariate_normal.logpdf(XS, MEAN, c)))
    with pytest.raises(np.linalg.LinAlgError):
        g(-COV)
