"""numpy's elementwise math beyond the core of elementwise.py: hyperbolic and inverse
trigonometric functions, exp2/log2/log10, cbrt, arctan2/hypot/copysign/fmod, logaddexp(2),
the rounding functions, and composites built on them (round with decimals, divmod, sinc,
deg2rad, nan_to_num, heaviside, the float predicates isnan/isinf/isfinite/signbit).

Primitives are declared as in elementwise.py (impl, VJP written with ops, `scalar` rule;
`s.call(name, ...)` is a libm function, SIMD through libmvec in codegen/vmath.py). A function
is a primitive only when it needs its own scalar code; the rest are exact compositions.
Gradient conventions are PyTorch's: rounding functions have zero gradient; fmod's gradient
for the divisor is -trunc(x / y).
"""
from __future__ import annotations

import builtins
import math

import numpy as np

from llgrad.runtime.errors import UnsupportedError
from llgrad.runtime.ops._scalar import libm_rule
from llgrad.runtime.ops._util import dtype_of, operands
from llgrad.runtime.ops.elementwise import (
    _binary, _float_binary, _overloads, _unary, abs, add, astype, copy, div, elementwise, eq,
    exp, floor_divide, gt, lt, mul, ne, neg, remainder, sin, sqrt, sub, where,
)

_LN2, _LN10 = math.log(2.0), math.log(10.0)


def _zero_vjp(g, out, x):
    return mul(g, 0)


# ---- hyperbolic and inverse trigonometric functions -------------------------------------------
sinh_p = elementwise("sinh", np.sinh, (lambda g, out, x: mul(g, cosh(x)),), libm_rule("sinh"),
                     numpy=np.sinh)
cosh_p = elementwise("cosh", np.cosh, (lambda g, out, x: mul(g, sinh(x)),), libm_rule("cosh"),
                     numpy=np.cosh)
arcsin_p = elementwise("arcsin", np.arcsin,
                       (lambda g, out, x: div(g, sqrt(sub(1, mul(x, x)))),),
                       libm_rule("asin"), numpy=np.arcsin, node_name="AsinBackward0")
arccos_p = elementwise("arccos", np.arccos,
                       (lambda g, out, x: neg(div(g, sqrt(sub(1, mul(x, x))))),),
                       libm_rule("acos"), numpy=np.arccos, node_name="AcosBackward0")
arctan_p = elementwise("arctan", np.arctan, (lambda g, out, x: div(g, add(mul(x, x), 1)),),
                       libm_rule("atan"), numpy=np.arctan, node_name="AtanBackward0")
arcsinh_p = elementwise("arcsinh", np.arcsinh,
                        (lambda g, out, x: div(g, sqrt(add(mul(x, x), 1))),),
                        libm_rule("asinh"), numpy=np.arcsinh, node_name="AsinhBackward0")
arccosh_p = elementwise("arccosh", np.arccosh,
                        (lambda g, out, x: div(g, sqrt(sub(mul(x, x), 1))),),
                        libm_rule("acosh"), numpy=np.arccosh, node_name="AcoshBackward0")
arctanh_p = elementwise("arctanh", np.arctanh, (lambda g, out, x: div(g, sub(1, mul(x, x))),),
                        libm_rule("atanh"), numpy=np.arctanh, node_name="AtanhBackward0")


def _atan2_den(y, x):
    return add(mul(x, x), mul(y, y))


# arctan2(y, x): the angle of the point (x, y); d/dy = x / r^2, d/dx = -y / r^2.
arctan2_p = elementwise("arctan2", np.arctan2,
                        (lambda g, out, y, x: div(mul(g, x), _atan2_den(y, x)),
                         lambda g, out, y, x: neg(div(mul(g, y), _atan2_den(y, x)))),
                        libm_rule("atan2"), numpy=np.arctan2, node_name="Atan2Backward0")

# ---- exponentials and logarithms ----------------------------------------------------------------
exp2_p = elementwise("exp2", np.exp2, (lambda g, out, x: mul(g, mul(out, _LN2)),),
                     libm_rule("exp2"), saves=(-1,), numpy=np.exp2)
log2_p = elementwise("log2", np.log2, (lambda g, out, x: div(g, mul(x, _LN2)),),
                     libm_rule("log2"), numpy=np.log2)
log10_p = elementwise("log10", np.log10, (lambda g, out, x: div(g, mul(x, _LN10)),),
                      libm_rule("log10"), numpy=np.log10)
cbrt_p = elementwise("cbrt", np.cbrt, (lambda g, out, x: div(g, mul(mul(out, out), 3)),),
                     libm_rule("cbrt"), saves=(-1,), numpy=np.cbrt)


def _logaddexp_scalar(base):
    # numpy's loop: equal inputs (both infinite included) give x + log(2); otherwise
    # max + log1p(exp(-|x - y|)), computed for base 2 with exp2 and a final log2 scaling.
    def rule(s, x, y):
        d = s.abs(s.sub(x, y))
        if base == 2:
            tail = s.div(s.log1p(s.call("exp2", s.neg(d))), _LN2)
            same = s.add(x, 1.0)
        else:
            tail = s.log1p(s.exp(s.neg(d)))
            same = s.add(x, _LN2)
        return s.select(s.cmp("==", x, y), same, s.add(s.max(x, y), tail))
    return rule


# d/dx log(e^x + e^y) = e^(x - out): stable, and differentiable again.
logaddexp_p = elementwise("logaddexp", np.logaddexp,
                          (lambda g, out, x, y: mul(g, exp(sub(x, out))),
                           lambda g, out, x, y: mul(g, exp(sub(y, out)))),
                          _logaddexp_scalar(np.e), numpy=np.logaddexp)
logaddexp2_p = elementwise("logaddexp2", np.logaddexp2,
                           (lambda g, out, x, y: mul(g, exp2(sub(x, out))),
                            lambda g, out, x, y: mul(g, exp2(sub(y, out)))),
                           _logaddexp_scalar(2), numpy=np.logaddexp2)

# ---- hypot, copysign, fmod ----------------------------------------------------------------------
hypot_p = elementwise("hypot", np.hypot, (lambda g, out, x, y: mul(g, div(x, out)),
                                          lambda g, out, x, y: mul(g, div(y, out))),
                      libm_rule("hypot"), numpy=np.hypot)
# PyTorch's copysign gradient: out / x (the sign flip), 0 where x == 0; none for the sign.
copysign_p = elementwise("copysign", np.copysign,
                         (lambda g, out, x, y: mul(g, where(eq(x, 0), 0.0, div(out, x))),
                          lambda g, out, x, y: mul(g, 0)),
                         libm_rule("copysign"), numpy=np.copysign)
# C's fmod: the remainder takes the dividend's sign (x - trunc(x / y) * y).
fmod_p = elementwise("fmod", np.fmod, (lambda g, out, x, y: g,
                                       lambda g, out, x, y: neg(mul(g, trunc(div(x, y))))),
                     lambda s, x, y: s.fmod(x, y), numpy=np.fmod,
                     node_name=_overloads("Fmod", 2))

# ---- rounding (zero gradient) -------------------------------------------------------------------
ceil_p = elementwise("ceil", np.ceil, (_zero_vjp,), libm_rule("ceil"), saves=(), numpy=np.ceil)
trunc_p = elementwise("trunc", np.trunc, (_zero_vjp,), libm_rule("trunc"), saves=(),
                      numpy=(np.trunc, np.fix))
# rint rounds half to even (the default rounding mode), as numpy's rint and round do.
rint_p = elementwise("rint", np.rint, (_zero_vjp,), libm_rule("rint"), saves=(), numpy=np.rint,
                     node_name="RoundBackward0")

# ---- the ops API ---------------------------------------------------------------------------------
sinh, cosh, arcsin, arccos, arctan, arcsinh, arccosh, arctanh = (
    _unary(p) for p in (sinh_p, cosh_p, arcsin_p, arccos_p, arctan_p, arcsinh_p, arccosh_p,
                        arctanh_p))
exp2, log2, log10, cbrt, rint = (_unary(p) for p in (exp2_p, log2_p, log10_p, cbrt_p, rint_p))
ceil, trunc = _unary(ceil_p, floating=False), _unary(trunc_p, floating=False)
arctan2, logaddexp, logaddexp2, hypot, copysign = (
    _float_binary(p) for p in (arctan2_p, logaddexp_p, logaddexp2_p, hypot_p, copysign_p))
fmod = _binary(fmod_p)


def round(x, decimals=0):
    """Round half to even to `decimals` places, as numpy (x * 10**d, rint, / 10**d)."""
    (x,), dt = operands(x)
    if dt.kind != "f":
        if decimals >= 0:
            return copy(x)
        raise UnsupportedError("round of an integer array to negative decimals is not "
                               "supported on llgrad values", fix="round a float array")
    if decimals == 0:
        return rint(x)
    scale = 10.0 ** builtins.abs(decimals)
    if decimals > 0:
        return div(rint(mul(x, scale)), scale)
    return mul(rint(div(x, scale)), scale)


def divmod(x, y):
    """Python's divmod and np.divmod: (x // y, x % y), each with its own gradient rule."""
    return floor_divide(x, y), remainder(x, y)


def reciprocal(x):
    return div(1.0, x)


def positive(x):
    return copy(x)


def sinc(x):
    """sin(pi x) / (pi x), 1 at 0: numpy's formula (x == 0 replaced by 1e-20)."""
    y = mul(where(eq(x, 0), 1.0e-20, x), math.pi)
    return div(sin(y), y)


def _angle_factor(x, num, den):
    """num / den rounded in x's float type, as numpy's deg2rad/rad2deg loops compute it."""
    (x,), dt = operands(x)
    if dt.kind != "f":
        x, dt = astype(x, np.float64), np.dtype(np.float64)
    return x, float(np.asarray(num, dt) / np.asarray(den, dt))


def deg2rad(x):
    x, c = _angle_factor(x, math.pi, 180.0)
    return mul(x, c)


def rad2deg(x):
    x, c = _angle_factor(x, 180.0, math.pi)
    return mul(x, c)


# ---- float predicates (no gradient) --------------------------------------------------------------
def _is_float(x) -> bool:
    return dtype_of(operands(x)[0][0]).kind == "f"


def isnan(x):
    return ne(x, x)  # NaN is the one value unequal to itself; never true for integers


def isinf(x):
    return eq(abs(x), math.inf) if _is_float(x) else ne(x, x)


def isfinite(x):
    return lt(abs(x), math.inf) if _is_float(x) else eq(x, x)  # `<` is false for NaN


def signbit(x):
    return lt(copysign(1.0, x), 0.0) if _is_float(x) else lt(x, 0)  # -0.0 and -NaN too


def nan_to_num(x, copy=True, nan=0.0, posinf=None, neginf=None):
    """NaN -> `nan`, +inf -> `posinf` (default: the largest finite value), -inf -> `neginf`;
    the gradient flows where x is finite."""
    (x,), dt = operands(x)
    if dt.kind != "f":
        return x
    info = np.finfo(dt)
    posinf = float(info.max) if posinf is None else posinf
    neginf = float(info.min) if neginf is None else neginf
    return where(ne(x, x), nan, where(eq(x, math.inf), posinf,
                                      where(eq(x, -math.inf), neginf, x)))


def heaviside(x, values):
    """0 where x < 0, `values` where x == 0, 1 where x > 0 (NaN stays NaN)."""
    (x, values), _ = operands(x, values)
    return where(eq(x, 0), values, where(gt(x, 0), 1.0, where(lt(x, 0), 0.0, x)))

