"""scipy.stats.norm in compiled functions (runtime/scipy_stats.py): cdf, sf, pdf and logpdf,
with loc and scale positional, by keyword or traced, and the frozen norm(loc, scale), equal to
scipy's values (NaN where scale <= 0, float64 for float32 x) with gradients equal to finite
differences, natively and through the interpreter."""
from __future__ import annotations

import numpy as np
import pytest
import scipy.special
import scipy.stats
from scipy.stats import norm

import llgrad
from tests.e2e.conftest import finite_differences

X = np.array([-40.0, -3.0, -0.4, 0.0, 0.3, 2.5, 9.0])


def _all_methods(x, loc, scale):
    return (norm.cdf(x, loc, scale), norm.sf(x, loc=loc, scale=scale),
            scipy.stats.norm.pdf(x, loc, scale=scale), norm.logpdf(x, loc, scale))


@pytest.mark.parametrize("loc, scale", [(0, 1), (0.5, 2.0), (-1.0, -0.5), (0.0, 0.0)], ids=str)
def test_norm_methods_match_scipy(loc, scale, mode):
    with np.errstate(all="ignore"):
        want = _all_methods(X, loc, scale)
        got = llgrad.differentiate(lambda x: _all_methods(x, loc, scale))(X)
    for g, w in zip(got, want):
        assert np.asarray(g).dtype == w.dtype
        np.testing.assert_allclose(g, w, rtol=1e-14, atol=0, equal_nan=True)


def test_float32_x_gives_float64_as_scipy(mode):
    x = X.astype(np.float32)
    got = llgrad.differentiate(lambda x: _all_methods(x, 0.25, 1.5))(x)
    for g, w in zip(got, _all_methods(x, 0.25, 1.5)):
        assert np.asarray(g).dtype == np.float64 == w.dtype
        np.testing.assert_allclose(g, w, rtol=1e-14, atol=0)


def _loss(x, loc, scale):
    return np.sum(sum(np.tanh(v) for v in _all_methods(x, loc, scale)[:3])
                  + 0.1 * norm.logpdf(x, loc, scale))


@pytest.mark.parametrize("wrt", [0, (1, 2)], ids=["x", "loc-scale"])
def test_gradients_match_finite_differences(wrt, mode):
    args = (np.array([-1.5, -0.2, 0.4, 2.0]), np.array(0.3), np.array(1.7))
    f = llgrad.differentiate(_loss, wrt=wrt)
    value, grads = f.value_and_grad(*args)
    np.testing.assert_allclose(value, _loss(*args), rtol=1e-13)
    wrt = (wrt,) if isinstance(wrt, int) else wrt
    grads = (grads,) if len(wrt) == 1 else grads
    for g, n in zip(grads, finite_differences(_loss, args, wrt)):
        np.testing.assert_allclose(g, n, rtol=1e-6, atol=1e-9)


def test_frozen_norm_with_traced_or_constant_parameters(mode):
    x = np.array([0.3, -1.2, 2.0])

    def traced(mu, s):  # norm(mu, s) with traced mu, s
        d = norm(mu, scale=s)
        return np.sum(d.logpdf(x) + d.cdf(x) + d.pdf(x) + d.sf(x))

    def constant(x):  # a frozen norm of constants (its own copy of norm) applied to traced x
        return np.sum(norm(0.5, 2.0).logpdf(x) + norm(0.5, 2.0).cdf(x))
    f = llgrad.differentiate(traced, wrt=(0, 1))
    np.testing.assert_allclose(f(0.1, 0.7), traced(0.1, 0.7), rtol=1e-14)
    for g, n in zip(f.grad(0.1, 0.7), finite_differences(traced, (0.1, 0.7), (0, 1))):
        np.testing.assert_allclose(g, n, rtol=1e-6)
    h = llgrad.differentiate(constant)
    np.testing.assert_allclose(h(x), constant(x), rtol=1e-14)
    np.testing.assert_allclose(h.grad(x), finite_differences(constant, (x,), (0,))[0], rtol=1e-6)


def test_frozen_norm_names_an_unsupported_method():
    f = llgrad.differentiate(lambda mu: norm(mu, 1.0).ppf(0.3))
    with pytest.raises(AttributeError, match=r"norm\(\.\.\.\)\.ppf is not supported .*cdf"):
        f(0.2)


def test_ndtr_keeps_relative_accuracy_in_the_lower_tail(mode):
    """erfc in the tails (1/2 + erf/2 would give 0 below -8); libm's erfc and scipy's differ
    by a few 1e-14 relative far out."""
    x = np.concatenate([np.linspace(-37, 37, 301), [0.0, -0.0, np.inf, -np.inf, np.nan]])
    got = llgrad.differentiate(lambda x: scipy.special.ndtr(x))(x)
    np.testing.assert_allclose(got, scipy.special.ndtr(x), rtol=1e-12, atol=0, equal_nan=True)
