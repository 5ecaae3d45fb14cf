"""Special functions (scipy.special's, PyTorch's torch.special): erf, erfc, gamma, lgamma
(gammaln), digamma (psi) and trigamma, logit, ndtr (the normal CDF) and log_ndtr, xlogy,
xlog1py, erfinv; and compositions of them: betaln, beta, log_expit. (expit is `sigmoid` in
elementwise.py.)

Declared like every elementwise primitive; their `numpy` entries name scipy.special's ufuncs
as strings, resolved only once the user has imported scipy (runtime imports numpy alone).
erf/erfc/gamma/lgamma are libm functions (lgamma through the thread-safe `lgamma_r`);
digamma, trigamma and log_ndtr are formulas over scalar ops (See Note [Digamma formula]), one
rule serving impl and codegen. Gradients: gammaln' = digamma, digamma' = trigamma;
trigamma's own is not provided.
"""
from __future__ import annotations

import math

import numpy as np

from llgrad.runtime.errors import UnsupportedError
from llgrad.runtime.ops._scalar import LIBM, formula_impl, libm_rule
from llgrad.runtime.ops.elementwise import (
    _float_binary, _unary, add, div, elementwise, eq, exp, floor, ge, gt, le, log,
    logical_and, logical_not, logical_or, lt, mul, ne, neg, remainder, stop_gradient, sub, where,
)
from llgrad.runtime.ops.elementwise import abs as abs_
from llgrad.runtime.prim import is_value

_TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)


erf_p = elementwise("erf", LIBM["erf"],
                    (lambda g, out, x: mul(g, mul(exp(neg(mul(x, x))), _TWO_OVER_SQRT_PI)),),
                    libm_rule("erf"), numpy="scipy.special.erf")
erfc_p = elementwise("erfc", LIBM["erfc"],
                     (lambda g, out, x: mul(g, mul(exp(neg(mul(x, x))), -_TWO_OVER_SQRT_PI)),),
                     libm_rule("erfc"), numpy="scipy.special.erfc")
# log|Gamma(x)|; at -inf scipy's -inf (C's lgamma says +inf)
lgamma_p = elementwise("lgamma", LIBM["lgamma"], (lambda g, out, x: mul(g, digamma(x)),),
                       lambda s, x: s.select(s.cmp("==", x, -math.inf), -math.inf,
                                             s.call("lgamma", x)),
                       numpy="scipy.special.gammaln")
# Gamma(x): C's tgamma, as scipy's gamma at the poles (+-inf at +-0, NaN at -1, -2, ...)
gamma_p = elementwise("gamma", LIBM["tgamma"],
                      (lambda g, out, x: mul(g, mul(out, digamma(x))),), libm_rule("tgamma"),
                      numpy="scipy.special.gamma")


# Note [Digamma formula]
# digamma (psi) is computed in float64 (float32 inputs too, then rounded), in three regimes:
# x >= 10, the asymptotic series log x - 1/(2x) - sum B_2k / (2k x^2k) (seven terms; the next
# is below 1e-17 relative there); 1 <= x < 2, Boost's rational approximation written around
# the positive root 1.4616... (x - root) * (Y + P(x - 1) / Q(x - 1)), the root split in three
# parts, so values near the root keep their relative accuracy (a recurrence from x + 10
# would cancel there); and 0 <= x < 10 otherwise, moved into [1, 2) with the recurrence
# psi(x + 1) = psi(x) + 1/x, unrolled with selects (branch-free, so it vectorises). x < 0
# reflects: psi(x) = psi(1 - x) - pi / tan(pi x), with tan(pi x) evaluated at x's distance
# to the nearest integer, an exact reduction (pi * x itself would round). The poles 0, -1,
# -2, ... give -inf/+inf at +-0 and NaN below, as scipy. Accuracy: a few ulp, except near
# the roots of psi below 0, where the reflection cancels (as scipy's does). trigamma uses the
# same scheme with psi1(x) = psi1(x + 1) + 1/x^2 up to x >= 10, the series 1/x + 1/(2x^2) +
# sum B_2k / x^(2k+1) (no cancellation: all terms are positive), and psi1(x) = pi^2 /
# sin^2(pi x) - psi1(1 - x).
_DIGAMMA_ASYM = (1 / 12, -1 / 120, 1 / 252, -1 / 240, 1 / 132, -691 / 32760, 1 / 12)
_TRIGAMMA_ASYM = (1 / 6, -1 / 30, 1 / 42, -1 / 30, 5 / 66, -691 / 2730, 7 / 6)
# Boost's digamma on [1, 2] (53-bit precision): the root in three parts, Y, P and Q.
_ROOT = (1569415565 / 1073741824, 381566830 / 1073741824 / 1073741824,
         0.9016312093258695918615325266959189453125e-19)
_Y = 0.99558162689208984
_P = (0.25479851061131551, -0.32555031186804491, -0.65031853770896507, -0.28919126444774784,
      -0.045251321448739056, -0.0020713321167745952)
_Q = (1.0, 2.0767117023730469, 1.4606242909763515, 0.43593529692665969,
      0.054151797245674225, 0.0021284987017821144, -0.55789841321675513e-6)
_BIG = 10.0


def _horner(s, z, coeffs):
    acc = coeffs[-1]
    for c in reversed(coeffs[:-1]):
        acc = s.add(s.mul(acc, z), c)
    return acc


def _in_float64(rule):
    """Evaluate `rule` in float64 and round the result to the input's dtype."""
    def wrapped(s, x):
        dt = s.dtype(x)
        return s.cast(rule(s, s.cast(x, np.float64)), dt)
    return wrapped


def _frac_to_nearest(s, x):
    """x minus its nearest integer, in (-0.5, 0.5] (exact)."""
    nn = s.sub(x, s.floor(x))
    return s.select(s.cmp(">", nn, 0.5), s.sub(nn, 1.0), nn)


def _psi(s, y):
    """digamma of y >= 0 (or -0.0: +inf)."""
    big = s.cmp(">=", y, _BIG)
    ya = s.select(big, y, _BIG)  # every lane computes both regimes: keep them finite
    z = s.div(1.0, s.mul(ya, ya))
    series = s.sub(s.sub(s.log(ya), s.div(0.5, ya)), s.mul(z, _horner(s, z, _DIGAMMA_ASYM)))
    t, acc = s.select(big, 1.5, y), s.zero(y)
    for _ in range(int(_BIG) - 2):  # [2, 10) down to [1, 2): psi(t + 1) = psi(t) + 1/t
        down = s.cmp(">=", t, 2.0)
        t = s.select(down, s.sub(t, 1.0), t)
        acc = s.select(down, s.add(acc, s.div(1.0, t)), acc)
    up = s.cmp("<", t, 1.0)  # (0, 1) up to [1, 2)
    acc = s.select(up, s.sub(acc, s.div(1.0, t)), acc)
    t = s.select(up, s.add(t, 1.0), t)
    g = s.sub(s.sub(s.sub(t, _ROOT[0]), _ROOT[1]), _ROOT[2])
    u = s.sub(t, 1.0)
    near = s.mul(g, s.add(_Y, s.div(_horner(s, u, _P), _horner(s, u, _Q))))
    return s.select(big, series, s.add(near, acc))


def _digamma_rule(s, x):
    negative = s.cmp("<", x, 0.0)
    psi = _psi(s, s.select(negative, s.sub(1.0, x), x))
    nn = _frac_to_nearest(s, x)
    cot = s.select(s.cmp("==", nn, 0.5), 0.0, s.div(math.pi, s.tan(s.mul(nn, math.pi))))
    reflected = s.select(s.cmp("==", x, s.floor(x)), math.nan, s.sub(psi, cot))
    return s.select(negative, reflected, psi)


def _trigamma_rule(s, x):
    negative = s.cmp("<", x, 0.0)
    y = s.select(negative, s.sub(1.0, x), x)
    acc = s.zero(y)
    for _ in range(int(_BIG)):  # up to >= 10: psi1(y) = psi1(y + 1) + 1/y^2
        small = s.cmp("<", y, _BIG)
        acc = s.select(small, s.add(acc, s.div(1.0, s.mul(y, y))), acc)
        y = s.select(small, s.add(y, 1.0), y)
    z = s.div(1.0, s.mul(y, y))
    series = s.add(s.add(s.div(1.0, y), s.mul(z, 0.5)),
                   s.mul(s.div(z, y), _horner(s, z, _TRIGAMMA_ASYM)))
    psi1 = s.add(series, acc)
    sn = s.sin(s.mul(_frac_to_nearest(s, x), math.pi))
    reflected = s.select(s.cmp("==", x, s.floor(x)), math.inf,
                         s.sub(s.div(math.pi * math.pi, s.mul(sn, sn)), psi1))
    return s.select(negative, reflected, psi1)


def _trigamma_vjp(g, out, x):
    raise UnsupportedError(
        "the derivative of trigamma (polygamma(2, x)) is not implemented: digamma is "
        "differentiable twice, lgamma/gammaln three times, not more",
        fix="differentiate fewer times, or compute this derivative outside llgrad")


_digamma_scalar, _trigamma_scalar = _in_float64(_digamma_rule), _in_float64(_trigamma_rule)
digamma_p = elementwise("digamma", formula_impl(_digamma_scalar),
                        (lambda g, out, x: mul(g, trigamma(x)),), _digamma_scalar,
                        numpy=("scipy.special.digamma", "scipy.special.psi"))
trigamma_p = elementwise("trigamma", formula_impl(_trigamma_scalar), (_trigamma_vjp,),
                         _trigamma_scalar, node_name="PolygammaBackward0")


def _logit_rule(s, x):
    # scipy's formula: log(x / (1 - x)) loses precision near 1/2, where
    # log1p(2(x - 1/2)) - log1p(-2(x - 1/2)) does not.
    d = s.mul(s.sub(x, 0.5), 2.0)
    middle = s.sub(s.log1p(d), s.log1p(s.neg(d)))
    outer = s.log(s.div(x, s.sub(1.0, x)))
    return s.select(s.or_(s.cmp("<", x, 0.3), s.cmp(">", x, 0.65)), outer, middle)


logit_p = elementwise("logit", formula_impl(_logit_rule),
                      (lambda g, out, x: div(g, mul(x, sub(1, x))),), _logit_rule,
                      numpy="scipy.special.logit")


def _xlog_rule(fn):
    # x * log(y), 0 where x == 0 unless y is NaN (scipy's and PyTorch's convention)
    def rule(s, x, y):
        zero = s.and_(s.cmp("==", x, 0.0), s.cmp("==", y, y))
        return s.select(zero, 0.0, s.mul(x, getattr(s, fn)(y)))
    return rule


# PyTorch's gradients: d/dx = xlogy(x != 0, y) (0 where x == 0), d/dy = x / y.
xlogy_p = elementwise("xlogy", formula_impl(_xlog_rule("log")),
                      (lambda g, out, x, y: mul(g, xlogy(ne(x, 0), y)),
                       lambda g, out, x, y: div(mul(g, x), y)),
                      _xlog_rule("log"), numpy="scipy.special.xlogy")
xlog1py_p = elementwise("xlog1py", formula_impl(_xlog_rule("log1p")),
                        (lambda g, out, x, y: mul(g, xlog1py(ne(x, 0), y)),
                         lambda g, out, x, y: div(mul(g, x), add(y, 1))),
                        _xlog_rule("log1p"), numpy="scipy.special.xlog1py",
                        node_name="SpecialXlog1PyBackward0")


# the standard normal's CDF; d/dx = exp(-x^2 / 2) / sqrt(2 pi)
_SQRT1_2, _INV_SQRT_2PI = math.sqrt(0.5), 1.0 / math.sqrt(2.0 * math.pi)


def _ndtr_rule(s, a):
    # scipy's (cephes') ndtr: 1/2 + erf / 2 near 0; erfc in the tails, which keeps the lower
    # tail's relative accuracy (1/2 + erf / 2 would cancel to 0 there)
    x = s.mul(a, _SQRT1_2)
    z = s.abs(x)
    tail = s.mul(s.call("erfc", z), 0.5)
    tail = s.select(s.cmp(">", x, 0.0), s.sub(1.0, tail), tail)
    return s.select(s.cmp("<", z, _SQRT1_2), s.add(s.mul(s.call("erf", x), 0.5), 0.5), tail)


ndtr_p = elementwise("ndtr", formula_impl(_ndtr_rule),
                     (lambda g, out, x: mul(g, mul(exp(mul(mul(x, x), -0.5)), _INV_SQRT_2PI)),),
                     _ndtr_rule, numpy="scipy.special.ndtr", node_name="SpecialNdtrBackward0")


# Note [log_ndtr in three regimes]
# log(ndtr(x)) is exact where ndtr keeps its relative accuracy, -20 <= x <= 0 (erfc in the
# lower tail); above 0, log1p(-ndtr(-x)) keeps the tiny log of a number near 1 (log of
# 1 - 1e-20 would be 0); below -20 ndtr underflows near -38, so the asymptotic series
# log ndtr(x) = -x^2/2 - log(-x) - log(sqrt(2 pi)) + log(1 + sum_k (-1)^k (2k-1)!! / x^2k)
# is used (ten terms; the next is below 1e-17 there). These are scipy's regimes. The
# gradient pdf(x) / ndtr(x) is exp(log pdf(x) - log_ndtr(x)), finite far into the tail.
_LOG_SQRT_2PI = 0.5 * math.log(2.0 * math.pi)
_NDTR_ASYM = tuple((-1) ** k * math.prod(range(1, 2 * k, 2)) for k in range(11))


def _log_ndtr_rule(s, x):
    lower = s.cmp("<", x, -20.0)
    xa = s.select(lower, x, -20.0)  # every lane computes each regime: keep them finite
    z = s.div(1.0, s.mul(xa, xa))
    series = s.sub(s.sub(s.mul(s.mul(xa, xa), -0.5), s.log(s.neg(xa))), _LOG_SQRT_2PI)
    series = s.add(series, s.log(_horner(s, z, _NDTR_ASYM)))
    upper = s.log1p(s.neg(_ndtr_rule(s, s.neg(x))))
    return s.select(lower, series, s.select(s.cmp(">", x, 0.0), upper,
                                            s.log(_ndtr_rule(s, x))))


_log_ndtr_scalar = _in_float64(_log_ndtr_rule)
log_ndtr_p = elementwise(
    "log_ndtr", formula_impl(_log_ndtr_scalar),
    (lambda g, out, x: mul(g, exp(sub(sub(mul(mul(x, x), -0.5), _LOG_SQRT_2PI), out))),),
    _log_ndtr_scalar, numpy="scipy.special.log_ndtr", node_name="SpecialLogNdtrBackward0")

# Note [erfinv by Newton steps]
# erfinv(y): Giles' (2010) single-precision approximation x0 (a polynomial in w = -log(1 -
# y^2), relative error ~1e-7 where float32 reaches), then Newton steps on erf(x) = |y| (the
# error squares each step). Where |y| >= 1/2 they solve log erfc(x) = log(1 - |y|) instead:
# 1 - |y| is exact there, where erf(x) - |y| would cancel near 1, and log erfc is nearly
# quadratic, so the steps also converge from Giles' rougher x0 in float64's far tail
# (1 - |y| down to 1e-16). Four steps reach float64's rounding everywhere.
# |y| = 1 gives +-inf, |y| > 1 NaN, as scipy. The gradient sqrt(pi)/2 exp(erfinv(y)^2) is
# 1 / erf'(x), from the derivative of erf at the result.
_ERFINV_STEPS = 4
_GILES_CENTRAL = (1.50140941, 0.246640727, -0.00417768164, -0.00125372503, 0.00021858087,
                  -4.39150654e-06, -3.5233877e-06, 3.43273939e-07, 2.81022636e-08)
_GILES_TAIL = (2.83297682, 1.00167406, 0.00943887047, -0.0076224613, 0.00573950773,
               -0.00367342844, 0.00134934322, 0.000100950558, -0.000200214257)


def _erfinv_rule(s, y):
    a = s.abs(y)
    w = s.neg(s.log(s.mul(s.sub(1.0, a), s.add(1.0, a))))
    central = _horner(s, s.sub(w, 2.5), _GILES_CENTRAL)
    tail = _horner(s, s.sub(s.sqrt(s.max(w, 5.0)), 3.0), _GILES_TAIL)
    x = s.mul(s.select(s.cmp("<", w, 5.0), central, tail), a)
    central, t = s.cmp("<", a, 0.5), s.sub(1.0, a)
    for _ in range(_ERFINV_STEPS):
        slope = s.mul(s.exp(s.neg(s.mul(x, x))), _TWO_OVER_SQRT_PI)  # erf'(x)
        c = s.call("erfc", x)
        step = s.select(central, s.div(s.sub(s.call("erf", x), a), slope),
                        s.div(s.mul(s.sub(s.log(t), s.log(c)), c), slope))
        x = s.sub(x, step)
    x = s.select(s.cmp("==", a, 1.0), math.inf, x)
    return s.select(s.cmp("<", y, 0.0), s.neg(x), x)


_erfinv_scalar = _in_float64(_erfinv_rule)
erfinv_p = elementwise(
    "erfinv", formula_impl(_erfinv_scalar),
    (lambda g, out, x: mul(g, mul(exp(mul(out, out)), 1.0 / _TWO_OVER_SQRT_PI)),),
    _erfinv_scalar, numpy="scipy.special.erfinv", node_name="ErfinvBackward0")

erf, erfc, gamma, lgamma, digamma, trigamma, logit, ndtr, log_ndtr, erfinv = (
    _unary(p) for p in (erf_p, erfc_p, gamma_p, lgamma_p, digamma_p, trigamma_p, logit_p,
                        ndtr_p, log_ndtr_p, erfinv_p))
gamma.__doc__ = "Gamma(x), as scipy.special.gamma (C's tgamma: +-inf at +-0, NaN at -1, ...)."
xlogy, xlog1py = _float_binary(xlogy_p), _float_binary(xlog1py_p)


def polygamma(n, x):
    """The n-th derivative of digamma, for n = 0 (digamma) and 1 (trigamma)."""
    if n == 0:
        return digamma(x)
    if n == 1:
        return trigamma(x)
    raise UnsupportedError(f"polygamma({n}, x): only n = 0 and n = 1 are supported")


# ---- compositions (exact where their parts are; scipy computes them the same way) --------------
def _gamma_sign(x):
    """The sign of Gamma(x) (1 at the poles): -1 between -2k-1 and -2k."""
    fl = floor(x)
    odd = logical_and(logical_and(lt(x, 0), ne(x, fl)), eq(remainder(fl, 2), 1))
    return stop_gradient(where(odd, -1.0, 1.0))


_MAXGAM = 171.624376956302725  # cephes': Gamma(x) overflows above it


def _pole(x):
    return logical_and(le(x, 0.0), eq(x, floor(x)))


def _at_poles(a, b):
    """scipy's (cephes') beta_negint: where a is a pole (0, -1, ...), b an integer and
    1 - a - b > 0, B(a, b) = (-1)^b B(1 - a - b, b) (a pole b likewise, with a's sign),
    +inf where that is a pole again and at the other poles of a or b. Gives the arguments
    to use, the lanes of that sign and the sign, and the lanes that are infinite."""
    pa, pb = _pole(a), _pole(b)
    whole = logical_and(eq(a, floor(a)), eq(b, floor(b)))
    signed = logical_and(logical_and(logical_or(pa, pb), whole), gt(sub(1.0, add(a, b)), 0.0))
    swap = logical_and(signed, logical_not(logical_and(pa, pb)))
    other = where(pa, b, a)
    sign = stop_gradient(where(eq(remainder(other, 2), 0), 1.0, -1.0))
    a, b = where(swap, sub(sub(1.0, a), b), a), where(swap, other, b)
    return a, b, signed, sign, logical_and(logical_or(pa, pb), logical_not(swap))


def _betaln(a, b):
    y = add(a, b)
    direct = sub(add(lgamma(a), lgamma(b)), lgamma(y))
    # lanes of another regime compute on finite stand-ins (1.5, 1e7): where's gradient of an
    # unselected NaN or inf would be NaN
    near = logical_and(logical_and(le(abs_(a), _MAXGAM), le(abs_(b), _MAXGAM)),
                       logical_and(le(abs_(y), _MAXGAM), logical_not(_pole(y))))
    ga, gb, gy = (gamma(where(near, v, 1.5)) for v in (a, b, y))
    ratio = where(gt(abs_(sub(abs_(ga), abs_(gy))), abs_(sub(abs_(gb), abs_(gy)))),
                  mul(div(gb, gy), ga), mul(div(ga, gy), gb))
    out = where(near, log(abs_(ratio)), direct)
    first = ge(abs_(a), abs_(b))
    big, small = where(first, a, b), where(first, b, a)
    far = logical_and(gt(big, 1e6), gt(big, mul(abs_(small), 1e6)))
    if is_value(far) or np.any(far):
        big, small = where(far, big, 1e7), where(far, small, 1.0)
        t = mul(small, sub(1.0, small))
        big2 = mul(big, big)
        asym = sub(lgamma(small), mul(small, log(big)))
        asym = add(asym, add(div(t, mul(big, 2.0)),
                             div(mul(t, sub(1.0, mul(small, 2.0))), mul(big2, 12.0))))
        out = where(far, sub(asym, div(mul(t, t), mul(mul(big2, big), 12.0))), out)
    return where(_pole(y), -math.inf, out)


def betaln(a, b):
    """log|B(a, b)| in scipy's (cephes') regimes: where the argument larger in magnitude,
    big, exceeds 1e6 and 1e6 times the other, small, the asymptotic form gammaln(small) -
    small log(big) + t/2big + t(1-2small)/12big^2 - t^2/12big^3, t = small(1 - small)
    (gammaln(a + b) - gammaln(big) would cancel there); where |a|, |b|, |a + b| <= 171.6,
    log|Gamma(a) Gamma(b) / Gamma(a + b)| (exact Gammas; gammaln's sum cancels when the
    result is small); else that sum. At the poles as scipy: +inf where a or b is 0, -1,
    ... (but (-1)^b B(1 - a - b, b) for a positive integer b with 1 - a - b > 0), -inf
    where a + b is one."""
    a, b, _, _, inf = _at_poles(a, b)
    return where(inf, math.inf, _betaln(a, b))


def beta(a, b):
    """B(a, b) = Gamma(a) Gamma(b) / Gamma(a + b), as sign * exp(betaln(a, b)) (no overflow
    of the Gammas for large arguments); poles as betaln's."""
    a, b, signed, sign, inf = _at_poles(a, b)
    gamma_sign = mul(mul(_gamma_sign(a), _gamma_sign(b)), _gamma_sign(add(a, b)))
    out = mul(where(signed, sign, gamma_sign), exp(_betaln(a, b)))
    return where(inf, where(signed, mul(sign, math.inf), math.inf), out)


def log_expit(x):
    """log(expit(x)) = -log(1 + exp(-x)), as -logaddexp(0, -x): exact for large |x| of
    either sign (log(expit(x)) would give -inf below -745 and 0 above 37)."""
    from llgrad.runtime.ops.ufuncs import logaddexp
    return neg(logaddexp(0.0, neg(x)))


# ---- scipy.special's entropies and robust losses (where-compositions, scipy's formulas) -------
# Their boundary lanes (x = 0) are constants, so the gradient there is 0, as xlogy's at x = 0;
# the lanes not selected compute on stand-ins (1.0) so no NaN reaches a gradient.
def _nan_of(*xs):
    nan = None
    for x in xs:
        m = ne(x, x)
        nan = m if nan is None else logical_or(nan, m)
    return nan


def entr(x):
    """scipy.special.entr: -x log(x) for x > 0, 0 at 0, -inf below, NaN for NaN."""
    pos = gt(x, 0.0)
    safe = where(pos, x, 1.0)
    out = where(pos, neg(mul(safe, log(safe))), where(eq(x, 0.0), 0.0, -math.inf))
    return where(_nan_of(x), x, out)


def _x_log_ratio(x, y):
    """(x log(x / y) where x > 0 and y > 0, the lanes of that, the lanes x = 0 <= y)."""
    both = logical_and(gt(x, 0.0), gt(y, 0.0))
    xs, ys = where(both, x, 1.0), where(both, y, 1.0)
    return mul(xs, log(div(xs, ys))), both, logical_and(eq(x, 0.0), ge(y, 0.0))


def rel_entr(x, y):
    """scipy.special.rel_entr: x log(x / y) for x, y > 0; 0 for x = 0 <= y; else inf."""
    v, both, zero = _x_log_ratio(x, y)
    out = where(both, v, where(zero, 0.0, math.inf))
    return where(_nan_of(x, y), add(x, y), out)


def kl_div(x, y):
    """scipy.special.kl_div: x log(x / y) - x + y for x, y > 0; y for x = 0 <= y; else inf."""
    v, both, zero = _x_log_ratio(x, y)
    out = where(both, add(sub(v, x), y), where(zero, y, math.inf))
    return where(_nan_of(x, y), add(x, y), out)


def huber(delta, r):
    """scipy.special.huber: r^2 / 2 where |r| <= delta, delta (|r| - delta / 2) beyond; inf
    for delta < 0."""
    inside = le(abs_(r), delta)
    out = where(inside, mul(mul(r, r), 0.5), mul(delta, sub(abs_(r), mul(delta, 0.5))))
    return where(_nan_of(delta, r), add(delta, r), where(lt(delta, 0.0), math.inf, out))


def pseudo_huber(delta, r):
    """scipy.special.pseudo_huber: delta^2 (sqrt(1 + (r / delta)^2) - 1); 0 where delta or r
    is 0, inf for delta < 0."""
    from llgrad.runtime.ops.elementwise import sqrt
    zero = logical_or(eq(delta, 0.0), eq(r, 0.0))
    d = where(zero, 1.0, delta)
    ratio = div(r, d)
    out = where(zero, 0.0, mul(mul(d, d), sub(sqrt(add(1.0, mul(ratio, ratio))), 1.0)))
    return where(_nan_of(delta, r), add(delta, r), where(lt(delta, 0.0), math.inf, out))
