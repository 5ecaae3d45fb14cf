"""scipy.special functions computed by scipy's own C functions: i0, i0e, i1, i1e, ndtri, erfcx,
dawsn, exprel, gammainc, gammaincc, kv, kve, jv, binom and betainc.

Each is an elementwise primitive whose scalar rule is `s.call(name, ...)` in float64: eager
mode calls scipy's ufunc, generated code the same C function (codegen/special.py, Note
[scipy.special's C functions]), so values are scipy's on both paths. Gradients come from
identities: i0' = i1, i1' = i0 - i1/x, ndtri' = sqrt(2 pi) exp(ndtri^2 / 2), erfcx' = 2x
erfcx - 2/sqrt(pi), dawsn' = 1 - 2x dawsn, d/dx gammainc(a, x) = x^(a-1) e^-x / Gamma(a),
kv' = -(k_{v-1} + k_{v+1}) / 2, jv' = (j_{v-1} - j_{v+1}) / 2, d/dx betainc(a, b, x) =
x^(a-1) (1-x)^(b-1) / B(a, b), binom's from digamma. Derivatives in an order or shape
parameter (v of kv/jv, a of gammainc, a and b of betainc) have no cheap closed form: asking
for one is an error naming the parameter, never a silent zero.
"""
from __future__ import annotations

import math

import numpy as np

from llgrad.runtime.errors import UnsupportedError
from llgrad.runtime.ops._scalar import formula_impl
from llgrad.runtime.ops.elementwise import (
    _binary, _unary, add, div, elementwise, eq, exp, lt, mul, neg, sign, sub, where,
)
from llgrad.runtime.ops.elementwise import abs as abs_
from llgrad.runtime.ops.special import betaln, digamma, lgamma, xlog1py, xlogy
from llgrad.runtime.prim import bind
from llgrad.runtime.promotion import coerce


def _scipy_rule(name: str):
    """The scalar rule `s.call(name, ...)` evaluated in float64, rounded to the operands'
    dtype."""
    def rule(s, *xs):
        dt = next((s.dtype(x) for x in xs if not isinstance(x, (int, float))), np.float64)
        return s.cast(s.call(name, *(s.cast(x, np.float64) for x in xs)), dt)
    return rule


def _declare(name: str, vjp: tuple, node: str):
    rule = _scipy_rule(name)
    return elementwise(name, formula_impl(rule), vjp, rule, numpy=f"scipy.special.{name}",
                       node_name=node, expensive=True)


def _no_gradient(fn: str, param: str, fix: str):
    def vjp(g, out, *xs):
        raise UnsupportedError(
            f"the derivative of scipy.special.{fn} in its {param} is not implemented (no cheap "
            f"exact form); only the last argument is differentiable", fix=fix)
    return vjp


def _safe(x, bad, stand_in=1.0):
    """x with the lanes `bad` replaced by a finite stand-in (their gradient lane is chosen
    with a where, and a NaN there would leak through it)."""
    return where(bad, stand_in, x)


# ---- modified Bessel functions of the first kind, orders 0 and 1 ------------------------------
def _i1_vjp(g, out, x):
    zero = eq(x, 0.0)  # i1'(0) = 1/2: the limit of i0 - i1/x
    return mul(g, where(zero, 0.5, sub(i0(x), div(out, _safe(x, zero)))))


def _i1e_vjp(g, out, x):
    zero = eq(x, 0.0)  # i1e = e^-|x| i1: i1e' = i0e - i1e (sign(x) + 1/x)
    d = sub(i0e(x), mul(out, add(sign(x), div(1.0, _safe(x, zero)))))
    return mul(g, where(zero, 0.5, d))


i0_p = _declare("i0", (lambda g, out, x: mul(g, i1(x)),), "SpecialI0Backward0")
i0e_p = _declare("i0e", (lambda g, out, x: mul(g, sub(i1e(x), mul(sign(x), out))),),
                 "SpecialI0EBackward0")
i1_p = _declare("i1", (_i1_vjp,), "SpecialI1Backward0")
i1e_p = _declare("i1e", (_i1e_vjp,), "SpecialI1EBackward0")

# ---- the normal quantile, the scaled complementary error function, Dawson's integral ---------
_SQRT_2PI, _TWO_OVER_SQRT_PI = math.sqrt(2.0 * math.pi), 2.0 / math.sqrt(math.pi)
ndtri_p = _declare("ndtri", (lambda g, out, x: mul(g, mul(exp(mul(mul(out, out), 0.5)),
                                                          _SQRT_2PI)),), "SpecialNdtriBackward0")
erfcx_p = _declare("erfcx", (lambda g, out, x: mul(g, sub(mul(mul(x, out), 2.0),
                                                          _TWO_OVER_SQRT_PI)),),
                   "SpecialErfcxBackward0")
dawsn_p = _declare("dawsn", (lambda g, out, x: mul(g, sub(1.0, mul(mul(x, out), 2.0))),),
                   "SpecialDawsnBackward0")


# exprel(x) = (e^x - 1) / x; exprel'(x) = (e^x - exprel(x)) / x, which cancels for small |x|:
# there the Taylor series sum_k k x^(k-1) / (k+1)! (|x| < 1/2: 16 terms, below 1e-17).
_EXPREL_SERIES = tuple(k / math.factorial(k + 1) for k in range(1, 17))


def _exprel_vjp(g, out, x):
    small = lt(abs_(x), 0.5)
    xs = _safe(x, small, 1.0)
    direct = div(sub(exp(xs), out), xs)
    acc = _EXPREL_SERIES[-1]
    for c in reversed(_EXPREL_SERIES[:-1]):
        acc = add(mul(acc, where(small, x, 0.0)), c)
    return mul(g, where(small, acc, direct))


exprel_p = _declare("exprel", (_exprel_vjp,), "SpecialExprelBackward0")


# ---- the regularised incomplete gamma and beta functions (differentiable in x) ---------------
def _gammainc_dx(a, x):
    """x^(a-1) e^-x / Gamma(a) (0 at x = 0 for a > 1, as x^(a-1) is)."""
    return exp(sub(sub(xlogy(sub(a, 1.0), x), x), lgamma(a)))


_IN_A = "pass `a` as a constant (a number or an array computed without the traced inputs)"
gammainc_p = _declare("gammainc", (
    _no_gradient("gammainc", "first argument a", _IN_A),
    lambda g, out, a, x: mul(g, _gammainc_dx(a, x))), "SpecialGammaincBackward0")
gammaincc_p = _declare("gammaincc", (
    _no_gradient("gammaincc", "first argument a", _IN_A),
    lambda g, out, a, x: neg(mul(g, _gammainc_dx(a, x)))), "SpecialGammainccBackward0")
betainc_p = _declare("betainc", (
    _no_gradient("betainc", "first argument a", "pass a and b as constants"),
    _no_gradient("betainc", "second argument b", "pass a and b as constants"),
    lambda g, out, a, b, x: mul(g, exp(sub(add(xlogy(sub(a, 1.0), x),
                                               xlog1py(sub(b, 1.0), neg(x))), betaln(a, b))))),
    "SpecialBetaincBackward0")

# ---- Bessel functions of real order v (differentiable in x) -----------------------------------
_IN_V = "pass the order v as a constant (a number or a numpy array)"
kv_p = _declare("kv", (_no_gradient("kv", "order v", _IN_V),
                       lambda g, out, v, x: mul(g, mul(add(kv(sub(v, 1.0), x),
                                                           kv(add(v, 1.0), x)), -0.5))),
                "SpecialKvBackward0")
# kve = e^x kv: kve' = kve - (kve_{v-1} + kve_{v+1}) / 2
kve_p = _declare("kve", (_no_gradient("kve", "order v", _IN_V),
                         lambda g, out, v, x: mul(g, sub(out, mul(add(kve(sub(v, 1.0), x),
                                                                      kve(add(v, 1.0), x)),
                                                                  0.5)))),
                 "SpecialKveBackward0")
jv_p = _declare("jv", (_no_gradient("jv", "order v", _IN_V),
                       lambda g, out, v, x: mul(g, mul(sub(jv(sub(v, 1.0), x),
                                                           jv(add(v, 1.0), x)), 0.5))),
                "SpecialJvBackward0")


# ---- binomial coefficients of real arguments -------------------------------------------------
# binom(n, k) = Gamma(n + 1) / (Gamma(k + 1) Gamma(n - k + 1)): d/dn = binom (psi(n + 1) -
# psi(n - k + 1)), d/dk = binom (psi(n - k + 1) - psi(k + 1)).
binom_p = _declare("binom", (
    lambda g, out, n, k: mul(g, mul(out, sub(digamma(add(n, 1.0)),
                                             digamma(add(sub(n, k), 1.0))))),
    lambda g, out, n, k: mul(g, mul(out, sub(digamma(add(sub(n, k), 1.0)),
                                             digamma(add(k, 1.0)))))),
    "SpecialBinomBackward0")


def _nary(p):
    """The op of a primitive of two or three float operands (numpy's promotion)."""
    if len(p.vjp) == 2:
        return _binary(p, floating=True)

    def op(*xs):
        xs, _, weak = coerce(p, xs, True)
        out = bind(p, *xs)
        if weak:
            out._lg_weak = True
        return out
    op.__name__ = p.name
    return op


i0, i0e, i1, i1e, ndtri, erfcx, dawsn, exprel = (
    _unary(p) for p in (i0_p, i0e_p, i1_p, i1e_p, ndtri_p, erfcx_p, dawsn_p, exprel_p))
gammainc, gammaincc, betainc, kv, kve, jv, binom = (
    _nary(p) for p in (gammainc_p, gammaincc_p, betainc_p, kv_p, kve_p, jv_p, binom_p))
