"""Special functions (scipy.special's, PyTorch's torch.special): erf, erfc, lgamma (gammaln),
digamma (psi) and trigamma, logit, xlogy, xlog1py. (expit is `sigmoid` in elementwise.py.)

Declared like every elementwise primitive; their `numpy` entries name scipy.special's ufuncs
as strings, resolved only once the user has imported scipy (runtime imports numpy alone).
erf/erfc/lgamma are libm functions (lgamma through the thread-safe `lgamma_r`); digamma and
trigamma are formulas over scalar ops (See Note [Digamma formula]), one rule serving impl and
codegen. Gradients: gammaln' = digamma, digamma' = trigamma; trigamma's own is not provided.
"""
from __future__ import annotations

import math

from llgrad.runtime.errors import UnsupportedError
from llgrad.runtime.ops._scalar import LIBM, formula_impl
from llgrad.runtime.ops.elementwise import (
    _float_binary, _unary, add, div, elementwise, exp, mul, ne, neg, sub,
)

_TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)


def _libm(name):
    return lambda s, *xs: s.call(name, *xs)


erf_p = elementwise("erf", LIBM["erf"],
                    (lambda g, out, x: mul(g, mul(exp(neg(mul(x, x))), _TWO_OVER_SQRT_PI)),),
                    _libm("erf"), numpy="scipy.special.erf")
erfc_p = elementwise("erfc", LIBM["erfc"],
                     (lambda g, out, x: mul(g, mul(exp(neg(mul(x, x))), -_TWO_OVER_SQRT_PI)),),
                     _libm("erfc"), numpy="scipy.special.erfc")
lgamma_p = elementwise("lgamma", LIBM["lgamma"], (lambda g, out, x: mul(g, digamma(x)),),
                       _libm("lgamma"), numpy="scipy.special.gammaln")


# Note [Digamma formula]
# psi(x) for x >= 10 is the asymptotic series log x - 1/(2x) - sum B_2k / (2k x^2k) (seven
# terms: the next is below 1e-17 relative there). Smaller x climb there with the recurrence
# psi(x) = psi(x + 1) - 1/x, unrolled ten times with selects (branch-free, so it vectorises),
# and x < 0 reflects: psi(x) = psi(1 - x) - pi / tan(pi x), where tan(pi x) is evaluated at
# x's distance to the nearest integer, an exact reduction (pi * x itself would round). The
# poles 0, -1, -2, ... give -inf/+inf at +-0 and NaN below, as scipy. trigamma is the same
# scheme: psi1(x) = psi1(x + 1) + 1/x^2, 1/x + 1/(2x^2) + sum B_2k / x^(2k+1), and
# psi1(x) = pi^2 / sin^2(pi x) - psi1(1 - x). Accuracy: a few ulp, except near digamma's
# root 1.4616..., where psi(x) is small and the recurrence's cancellation costs absolute
# (not relative) precision of ~1e-15 (scipy uses a Taylor series around the root).
_DIGAMMA_ASYM = (1 / 12, -1 / 120, 1 / 252, -1 / 240, 1 / 132, -691 / 32760, 1 / 12)
_TRIGAMMA_ASYM = (1 / 6, -1 / 30, 1 / 42, -1 / 30, 5 / 66, -691 / 2730, 7 / 6)
_CLIMB = 10


def _horner(s, z, coeffs):
    acc = coeffs[-1]
    for c in reversed(coeffs[:-1]):
        acc = s.add(s.mul(acc, z), c)
    return acc


def _climb(s, x, term):
    """(y, sum of term(y_k)) after stepping y = x, x + 1, ... up to >= _CLIMB."""
    acc = s.zero(x)
    y = x
    for _ in range(_CLIMB):
        small = s.cmp("<", y, float(_CLIMB))
        acc = s.select(small, s.add(acc, term(y)), acc)
        y = s.select(small, s.add(y, 1.0), y)
    return y, acc


def _frac_to_nearest(s, x):
    """x minus its nearest integer, in (-0.5, 0.5] (exact)."""
    nn = s.sub(x, s.floor(x))
    return s.select(s.cmp(">", nn, 0.5), s.sub(nn, 1.0), nn)


def _digamma_rule(s, x):
    negative = s.cmp("<", x, 0.0)
    y, acc = _climb(s, s.select(negative, s.sub(1.0, x), x), lambda y: s.div(1.0, y))
    z = s.div(1.0, s.mul(y, y))
    psi = s.sub(s.sub(s.sub(s.log(y), s.div(0.5, y)), s.mul(z, _horner(s, z, _DIGAMMA_ASYM))),
                acc)
    nn = _frac_to_nearest(s, x)
    cot = s.select(s.cmp("==", nn, 0.5), 0.0, s.div(math.pi, s.tan(s.mul(nn, math.pi))))
    reflected = s.select(s.cmp("==", x, s.floor(x)), math.nan, s.sub(psi, cot))
    return s.select(negative, reflected, psi)


def _trigamma_rule(s, x):
    negative = s.cmp("<", x, 0.0)
    y, acc = _climb(s, s.select(negative, s.sub(1.0, x), x), lambda y: s.div(1.0, s.mul(y, y)))
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


digamma_p = elementwise("digamma", formula_impl(_digamma_rule),
                        (lambda g, out, x: mul(g, trigamma(x)),), _digamma_rule,
                        numpy=("scipy.special.digamma", "scipy.special.psi"))
trigamma_p = elementwise("trigamma", formula_impl(_trigamma_rule), (_trigamma_vjp,),
                         _trigamma_rule, node_name="PolygammaBackward0")


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

erf, erfc, lgamma, digamma, trigamma, logit = (
    _unary(p) for p in (erf_p, erfc_p, lgamma_p, digamma_p, trigamma_p, logit_p))
xlogy, xlog1py = _float_binary(xlogy_p), _float_binary(xlog1py_p)


def polygamma(n, x):
    """The n-th derivative of digamma, for n = 0 (digamma) and 1 (trigamma)."""
    if n == 0:
        return digamma(x)
    if n == 1:
        return trigamma(x)
    raise UnsupportedError(f"polygamma({n}, x): only n = 0 and n = 1 are supported")

