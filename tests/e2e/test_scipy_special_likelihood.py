"""scipy.special's functions of likelihoods (runtime/ops/special.py): log_ndtr in its three
regimes, gamma, betaln and beta (with scipy's asymptotic regime), log_expit, polygamma of a
constant order and digamma by both names, against scipy's values in float64, with gradients
against finite differences, natively, through the interpreter and on eager Tensors."""
from __future__ import annotations

import numpy as np
import pytest
import scipy.special as sp

import llgrad
import llgrad as lg
from llgrad.runtime.errors import UnsupportedError
from tests.e2e.conftest import finite_differences


def test_log_ndtr_keeps_relative_accuracy_in_both_tails(mode):
    """log(ndtr(x)) underflows below -38 and rounds to 0 above 8; scipy's does neither.
    (libm's erfc and scipy's differ by a few 1e-14 relative far out.)"""
    x = np.concatenate([np.linspace(-60, 40, 401), [-1e5, -20.0, -19.999, np.inf, -np.inf,
                                                    np.nan, -0.0]])
    got = llgrad.differentiate(lambda x: sp.log_ndtr(x))(x)
    np.testing.assert_allclose(got, sp.log_ndtr(x), rtol=1e-13, atol=1e-300,
                               equal_nan=True)


def test_log_ndtr_gradient_is_finite_far_in_the_lower_tail(mode):
    x = np.array([-200.0, -45.0, -20.5, -19.5, -3.0, 0.0, 4.0, 30.0])
    g = llgrad.differentiate(lambda x: np.sum(sp.log_ndtr(x))).grad(x)
    # d/dx log ndtr(x) = pdf(x) / ndtr(x), which tends to -x as x -> -inf
    want = np.exp(-0.5 * x * x - 0.5 * np.log(2 * np.pi) - sp.log_ndtr(x))
    np.testing.assert_allclose(g, want, rtol=1e-12, atol=0)  # (exp of x^2/2 - ...: 1e3 ulp)
    assert abs(g[0] / 200.0 - 1) < 1e-4


A = np.array([0.3, 2.0, 150.0, 1e7, 3e8, 2.5, -0.5, -2.5, 40.0, 1e-3, 300.0, -1.5])
B = np.array([0.7, 5.0, 40.0, 2.5, 1e-3, 2e7, 1.5, 1.0, 1e8, 8.0, 0.5, -200.5])
# poles: a or b 0, -1, ... (+inf, or (-1)^b B(1 - a - b, b) for a positive integer b), a + b
POLE_A = np.array([-1.0, 0.0, -1.5, -1.0, -3.0, 2.0, -2.0, 0.0, -3.0, -1e8, 1.0, 0.0, -4.0])
POLE_B = np.array([0.5, 1.0, 0.5, -2.0, 4.0, -2.0, 1.0, 0.0, 1.0, 0.5, -1.0, 3.0, 5.0])


@pytest.mark.parametrize("name", ["betaln", "beta"])
def test_betaln_and_beta_match_scipy_in_every_regime(name, mode):
    """Moderate arguments, one beyond 1e6 times the other (the asymptotic form), beyond the
    Gammas' overflow, negative non-integers (beta's sign), poles, in either order and
    broadcast."""
    fn = getattr(sp, name)
    f = llgrad.differentiate(lambda a, b: fn(a, b))
    with np.errstate(all="ignore"):
        for a, b in [(A, B), (B, A), (A[:, None], B[None, :5]), (POLE_A, POLE_B),
                     (POLE_B, POLE_A)]:
            got, want = f(a, b), fn(a, b)
            # (beta: exp(betaln) near -600 turns 1e-16 of betaln into 3e-13 relative)
            np.testing.assert_allclose(got, want, rtol=1e-13 if name == "betaln" else 1e-12,
                                       atol=0)
            assert (np.signbit(got) == np.signbit(want)).all()


def test_gamma_matches_scipy_at_poles_and_overflow(mode):
    x = np.array([0.0, -0.0, -1.0, -2.5, 0.5, 20.0, 171.5, 172.0, -np.inf, np.inf, np.nan])
    with np.errstate(all="ignore"):
        got = llgrad.differentiate(lambda x: sp.gamma(x))(x)
        np.testing.assert_allclose(got, sp.gamma(x), rtol=1e-14, atol=0, equal_nan=True)


def _loss(x, a, b):
    return np.sum(np.sin(sp.log_ndtr(x)) + 0.3 * sp.log_expit(2.0 * x) + 0.1 * sp.gamma(b)
                  + np.cos(sp.betaln(a, b)) + 0.5 * sp.beta(a, b) + sp.digamma(b)
                  + sp.polygamma(0, a))


ARGS = (np.array([-30.0, -4.0, -0.3, 1.5, 9.0]), np.array([0.4, 2.5, 4.0, 1.2, 3e7]),
        np.array([1.5, 0.7, 3.0, 5e-1, 2.0]))


@pytest.mark.parametrize("wrt", [0, 1, 2])
def test_gradients_match_finite_differences(wrt, mode):
    f = llgrad.differentiate(_loss, wrt=wrt)
    value, grad = f.value_and_grad(*ARGS)
    np.testing.assert_allclose(value, _loss(*ARGS), rtol=1e-13)
    # (a = 3e7: scaled steps, as its own relative step would lose the difference)
    (want,) = finite_differences(_loss, ARGS, (wrt,), eps=1e-6)
    if wrt == 1:
        big = np.array(ARGS[1])
        big[4] += 1.0
        lo = np.array(ARGS[1])
        lo[4] -= 1.0
        want[4] = (_loss(ARGS[0], big, ARGS[2]) - _loss(ARGS[0], lo, ARGS[2])) / 2.0
    np.testing.assert_allclose(grad, want, rtol=1e-6, atol=1e-9)


def test_eager_tensors_dispatch_to_the_new_functions():
    x = np.array([0.4, 1.3, 2.2])
    ts = [lg.tensor(x, requires_grad=True) for _ in range(2)]
    out = (sp.log_ndtr(ts[0]) + sp.gamma(ts[0]) + sp.betaln(ts[0], ts[1]) + sp.beta(ts[1], 2.0)
           + sp.log_expit(ts[1]))
    out.sum().backward()
    want = _eager_reference(x, x)
    np.testing.assert_allclose(out.detach().numpy(), want, rtol=1e-14)
    for t, w in zip(ts, finite_differences(lambda a, b: np.sum(_eager_reference(a, b)),
                                           (x, x), (0, 1))):
        np.testing.assert_allclose(t.grad.numpy(), w, rtol=1e-6)


def _eager_reference(a, b):
    return (sp.log_ndtr(a) + sp.gamma(a) + sp.betaln(a, b) + sp.beta(b, 2.0)
            + sp.log_expit(b))


def test_polygamma_needs_a_constant_order_of_zero_or_one():
    x = np.array([0.5, 2.0])
    np.testing.assert_allclose(llgrad.differentiate(lambda x: sp.polygamma(1, x))(x),
                               sp.polygamma(1, x), rtol=1e-14)
    with pytest.raises(UnsupportedError, match=r"constant order n of 0 or 1, not 2.*line|"
                                               r"constant order n of 0 or 1, not 2"):
        llgrad.differentiate(lambda x: sp.polygamma(2, x))(x)
    f = llgrad.differentiate(lambda n, x: sp.polygamma(n, x), wrt=1)
    with pytest.raises(UnsupportedError, match=r"polygamma\(n, x\) on llgrad values needs a "
                                               r"constant order"):
        f(np.array(1.0), x)


def test_digamma_is_psi():
    x = np.array([0.3, 4.0])
    f = llgrad.differentiate(lambda x: sp.digamma(x) + sp.psi(x))
    np.testing.assert_allclose(f(x), 2 * sp.digamma(x), rtol=1e-14)
