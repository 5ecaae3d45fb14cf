"""scipy.special functions computed by scipy's own C code (i0, i1, ndtri, erfcx, gammainc, kv,
jv, binom, betainc, ...) and scipy.stats' entropy, gmean, hmean, sem and pearsonr inside
`llgrad.differentiate`: values against scipy (compiled and interpreted), gradients against
central differences, and the errors: a derivative in an order parameter, library code that
fails on traced values (named at the user's line), np.pad's per-side constants."""
from __future__ import annotations

import numpy as np
import pytest
import scipy.special as sp
import scipy.stats as st

import llgrad
from llgrad.runtime.errors import UnsupportedError
from tests.e2e.conftest import finite_differences

R = np.random.default_rng(23)
X = R.uniform(0.2, 3.0, 7)
Y = R.uniform(0.2, 3.0, 7)
A = R.uniform(0.2, 3.0, (3, 5))
WIDE = np.concatenate([-np.geomspace(1e-8, 40.0, 12), [0.0], np.geomspace(1e-8, 40.0, 12)])
UNIT = np.concatenate([np.geomspace(1e-12, 0.5, 12), 1 - np.geomspace(1e-12, 0.5, 12)])

# name -> (elementwise function of one array, the arguments its values are checked on)
SPECIAL = {
    "i0": (sp.i0, WIDE), "i0e": (sp.i0e, WIDE), "i1": (sp.i1, WIDE), "i1e": (sp.i1e, WIDE),
    "ndtri": (sp.ndtri, UNIT), "erfcx": (sp.erfcx, WIDE), "dawsn": (sp.dawsn, WIDE),
    "exprel": (sp.exprel, WIDE),
    "gammainc": (lambda x: sp.gammainc(2.5, x), np.abs(WIDE)),
    "gammaincc": (lambda x: sp.gammaincc(0.7, x), np.abs(WIDE)),
    "kv": (lambda x: sp.kv(1.5, x), np.abs(WIDE[WIDE != 0])),
    "kve": (lambda x: sp.kve(0.5, x), np.abs(WIDE[WIDE != 0])),
    "jv": (lambda x: sp.jv(1.0, x), WIDE),
    "binom": (lambda x: sp.binom(5.5, x), WIDE),
    "binom_n": (lambda x: sp.binom(x + 41.0, 2.5), WIDE),
    "comb": (lambda x: sp.comb(5.0, x * 0.2), WIDE),
    "betainc": (lambda x: sp.betainc(2.0, 3.5, x), UNIT),
}
# where the gradient is checked (away from the ends of the domains)
GRAD_AT = {"ndtri": X / 3.1, "betainc": X / 3.1, "exprel": np.concatenate([X - 1.5, X * 0.1])}


@pytest.mark.parametrize("name", SPECIAL)
def test_special_values_match_scipy(name, mode):
    f, x = SPECIAL[name]
    np.testing.assert_allclose(llgrad.differentiate(f)(x), f(x), rtol=1e-15, atol=0)
    x32 = x.astype(np.float32)
    np.testing.assert_allclose(llgrad.differentiate(f)(x32), f(x32).astype(np.float32),
                               rtol=1e-6)


@pytest.mark.parametrize("name", SPECIAL)
def test_special_gradients(name):
    f, _ = SPECIAL[name]
    x = GRAD_AT.get(name, np.concatenate([X - 1.6, X]) if name in ("jv", "i1", "i1e", "i0e")
                    else X)
    loss = lambda v: np.sum(f(v) * np.arange(1.0, v.size + 1.0))  # noqa: E731
    value, grad = llgrad.differentiate(loss).value_and_grad(x)
    assert value == pytest.approx(loss(x), rel=1e-14)
    np.testing.assert_allclose(grad, finite_differences(loss, (x,), (0,))[0], rtol=1e-6,
                               atol=1e-7)


def test_bessel_gradients_at_zero_are_the_limits():
    g = llgrad.differentiate(lambda x: np.sum(sp.i1(x) + sp.i1e(x) + sp.i0(x)))
    assert g.grad(np.zeros(2)) == pytest.approx([1.0, 1.0])  # i1'(0) = i1e'(0) = 1/2


def test_derivative_in_an_order_parameter_is_refused_at_the_line():
    with pytest.raises(UnsupportedError, match=r"derivative of scipy.special.kv in its order v"
                       r"(.*\n)*.*test_scipy_special_stats.py:\d+"):
        llgrad.differentiate(lambda v: np.sum(sp.kv(v, X))).grad(X)
    with pytest.raises(UnsupportedError, match=r"gammainc in its first argument a"):
        llgrad.differentiate(lambda a: np.sum(sp.gammainc(a, X))).grad(X)
    with pytest.raises(UnsupportedError, match=r"comb\(exact=True\)"):
        llgrad.differentiate(lambda x: sp.comb(5, x, exact=True))(X)


# ---- scipy.stats -------------------------------------------------------------------------------
STATS = [
    ("entropy", lambda v: st.entropy(v), X),
    ("entropy_qk_base", lambda v: st.entropy(v, Y, base=2.0), X),
    ("entropy_axis", lambda a: st.entropy(a, axis=1, keepdims=True), A),
    ("gmean", lambda a: st.gmean(a), A),
    ("gmean_weights", lambda a: st.gmean(a, axis=1, weights=np.arange(1.0, 6.0)), A),
    ("hmean", lambda a: st.hmean(a, axis=None), A),
    ("sem", lambda a: st.sem(a, axis=1, ddof=0), A),
    ("pearsonr", lambda v: st.pearsonr(v, Y)[0], X),
    ("pearsonr_pvalue", lambda v: st.pearsonr(v, Y).pvalue, X),
    ("pearsonr_greater", lambda v: st.pearsonr(v, Y, alternative="greater").pvalue, X),
    ("pearsonr_less", lambda v: st.pearsonr(Y, v, alternative="less").pvalue, X),
]


@pytest.mark.parametrize("fn,arg", [c[1:] for c in STATS], ids=[c[0] for c in STATS])
def test_stats_value_and_gradient(fn, arg):
    loss = lambda v: np.sum(fn(v))  # noqa: E731
    np.testing.assert_allclose(llgrad.differentiate(fn)(arg), fn(arg), rtol=1e-13)
    value, grad = llgrad.differentiate(loss).value_and_grad(arg)
    assert value == pytest.approx(loss(arg), rel=1e-13)
    np.testing.assert_allclose(grad, finite_differences(loss, (arg,), (0,))[0], rtol=1e-6,
                               atol=1e-8)


# ---- errors from inside library code name the user's line ------------------------------------
def test_llgrad_error_inside_scipy_names_the_users_line():
    # scipy's _axis_nan_policy wrapper branches on `any(contains_nan) and nan_policy ==
    # 'omit'` (a traced condition) and keeps a different list on each path
    with pytest.raises(UnsupportedError, match=r"scipy.stats.tvar is not supported on traced "
                       r"values(.*\n)*.*test_scipy_special_stats.py:\d+"):
        llgrad.differentiate(lambda v: st.tvar(v)).grad(X)


def test_pad_with_constants_per_side():
    for cv in [(1.0, 2.0), ((1.0, 2.0), (3.0, 4.0)), 5.0]:
        f = lambda a: np.pad(a, ((1, 2), (2, 1)), constant_values=cv)  # noqa: E731
        np.testing.assert_array_equal(llgrad.differentiate(f)(A), f(A))
    loss = lambda a: np.sum(np.pad(a, 1, constant_values=(1.0, 2.0)) ** 2)  # noqa: E731
    assert llgrad.differentiate(loss).grad(A) == pytest.approx(2 * A)


def test_ops_refusal_names_the_users_line():
    with pytest.raises(UnsupportedError, match=r"pad\(mode='linear_ramp'\)(.*\n)*.*"
                       r"test_scipy_special_stats.py:\d+"):
        llgrad.differentiate(lambda a: np.sum(np.pad(a, 1, mode="linear_ramp"))).grad(A)
    with pytest.raises(UnsupportedError, match=r"traced constant_values"):
        llgrad.differentiate(lambda a: np.sum(np.pad(a, 1, constant_values=a[0, 0]))).grad(A)
