"""Elementwise primitives: arithmetic, math functions, comparisons, select, casts.

Each is declared in one block: numpy impl, VJP rules (one per input, written with ops), and
`scalar`, a rule `scalar(s, *xs)` over an abstract scalar emitter `s` that codegen implements.
Operands broadcast (numpy rules); see Note [Broadcasting at primitives] in prim.py.
"""
from __future__ import annotations

import numpy as np

from llgrad.runtime.aval import BOOL, I64, Aval, broadcast_shapes, to_np
from llgrad.runtime.complex_values import elementwise as complex_elementwise, is_complex
from llgrad.runtime.errors import DTypeError, user_loc
from llgrad.runtime.ops._util import dtype_of
from llgrad.runtime.prim import _DEFAULT, Primitive, bind, is_value, register
from llgrad.runtime.promotion import coerce, rules_of


def _shape_rule(name, out_dtype=None):
    def rule(*avals, **params):
        shape = broadcast_shapes(*(a.shape for a in avals), op=name)
        return Aval(shape, out_dtype or avals[-1].dtype)
    return rule


def _overloads(op: str, n: int) -> dict:
    """PyTorch's names for the overloads of a binary op: Tensor-Scalar `<op>Backward0`,
    Tensor-Tensor `<op>Backward1`, and (n == 3) Scalar-Tensor `<op>Backward2`, keyed by
    which operands are constants (see Primitive.node_name)."""
    names = {(False, True): op + "Backward0", (False, False): op + "Backward1",
             (True, False): op + ("Backward2" if n == 3 else "Backward1"),
             (True, True): op + "Backward0"}  # (no node: nothing needs a gradient)
    return names


def elementwise(name, impl, vjp=None, scalar=None, *, nondiff=False, saves=None, numpy=(),
                out_dtype=None, node_name=None, decompose=None, expensive=False) -> Primitive:
    """Declare an elementwise primitive (the common case is one call)."""
    return register(Primitive(
        name, "elementwise", impl, _shape_rule(name, out_dtype), vjp, nondiff=nondiff,
        saves=saves, scalar=scalar, numpy=numpy, node_name=node_name, decompose=decompose,
        expensive=expensive))


# ---- arithmetic -------------------------------------------------------------------------------
add_p = elementwise("add", np.add, (lambda g, out, x, y: g, lambda g, out, x, y: g),
                    lambda s, x, y: s.add(x, y), saves=(), numpy=np.add)
sub_p = elementwise("sub", np.subtract, (lambda g, out, x, y: g, lambda g, out, x, y: neg(g)),
                    lambda s, x, y: s.sub(x, y), saves=(), numpy=np.subtract)
mul_p = elementwise("mul", np.multiply,
                    (lambda g, out, x, y: mul(g, y), lambda g, out, x, y: mul(g, x)),
                    lambda s, x, y: s.mul(x, y), numpy=np.multiply)
div_p = elementwise("div", np.true_divide,
                    (lambda g, out, x, y: div(g, y),
                     lambda g, out, x, y: neg(div(mul(g, out), y))),
                    lambda s, x, y: s.div(x, y), numpy=(np.true_divide, np.divide))
neg_p = elementwise("neg", np.negative, (lambda g, out, x: neg(g),),
                    lambda s, x: s.neg(x), saves=(), numpy=np.negative)


def _pow_vjp_x(g, out, x, y):
    # d/dx x**y = y * x**(y-1), defined as 0 where y == 0 (as PyTorch does).
    if not is_value(y) and np.all(y != 0):  # a constant exponent: no select needed
        if np.all(y == 2):
            return mul(g, mul(x, y))
        return mul(g, mul(y, pow(x, y - 1)))
    return where(eq(y, 0), 0.0, mul(g, mul(y, pow(x, sub(y, 1)))))


def _pow_vjp_y(g, out, x, y):
    # d/dy x**y = x**y * log(x), defined as 0 where x == 0 and y >= 0.
    return where(logical_and(eq(x, 0), ge(y, 0)), 0.0, mul(g, mul(out, log(x))))


pow_p = elementwise("pow", np.power, (_pow_vjp_x, _pow_vjp_y), lambda s, x, y: s.pow(x, y),
                    numpy=np.power, node_name=_overloads("Pow", 3), expensive=True)

# ---- math functions ---------------------------------------------------------------------------
exp_p = elementwise("exp", np.exp, (lambda g, out, x: mul(g, out),),
                    lambda s, x: s.exp(x), saves=(-1,), numpy=np.exp, expensive=True)
log_p = elementwise("log", np.log, (lambda g, out, x: div(g, x),),
                    lambda s, x: s.log(x), saves=(0,), numpy=np.log, expensive=True)
log1p_p = elementwise("log1p", np.log1p, (lambda g, out, x: div(g, add(x, 1)),),
                      lambda s, x: s.log1p(x), saves=(0,), numpy=np.log1p,
                      node_name="Log1PBackward0", expensive=True)
expm1_p = elementwise("expm1", np.expm1, (lambda g, out, x: mul(g, add(out, 1)),),
                      lambda s, x: s.expm1(x), saves=(-1,), numpy=np.expm1, expensive=True)
sin_p = elementwise("sin", np.sin, (lambda g, out, x: mul(g, cos(x)),),
                    lambda s, x: s.sin(x), saves=(0,), numpy=np.sin, expensive=True)
cos_p = elementwise("cos", np.cos, (lambda g, out, x: neg(mul(g, sin(x))),),
                    lambda s, x: s.cos(x), saves=(0,), numpy=np.cos, expensive=True)
tan_p = elementwise("tan", np.tan, (lambda g, out, x: mul(g, add(mul(out, out), 1)),),
                    lambda s, x: s.tan(x), saves=(-1,), numpy=np.tan, expensive=True)
tanh_p = elementwise("tanh", np.tanh, (lambda g, out, x: mul(g, sub(1, mul(out, out))),),
                     lambda s, x: s.tanh(x), saves=(-1,), numpy=np.tanh, expensive=True)
# Note [Zero cotangents at sqrt(0)]
# sqrt's derivative is infinite at 0, but where the cotangent is exactly 0 its contribution is
# 0, not 0 * inf = nan (ChainRules' "strong zero"): pairwise distances sqrt(sum(d ** 2)) are 0
# on the diagonal, which the program then leaves out (`r[mask]`, `r[i, j]` for i < j, a
# kernel whose derivative at r = 0 is 0, as Matern's); the true gradient is finite, and
# PyTorch and JAX give nan. A non-zero cotangent at 0 still gives inf (the derivative there).
# (np.linalg.norm's rule gives 0 at a zero norm, as PyTorch's: reduce.py, _norm_vjp.)
sqrt_p = elementwise("sqrt", np.sqrt,
                     (lambda g, out, x: div(g, mul(where(eq(g, 0), 1.0, out), 2)),),
                     lambda s, x: s.sqrt(x), saves=(-1,), numpy=np.sqrt, expensive=True)
# square and rsqrt are one node each in eager graphs (PyTorch's PowBackward0, RsqrtBackward0);
# the compiler sees x * x and 1 / sqrt(x), as before they were primitives.
square_p = elementwise("square", lambda x: np.multiply(x, x),
                       (lambda g, out, x: mul(g, mul(x, 2.0)),),
                       lambda s, x: s.mul(x, x), saves=(0,), node_name="PowBackward0",
                       decompose=lambda x: mul(x, x), numpy=np.square)
rsqrt_p = elementwise("rsqrt", lambda x: 1.0 / np.sqrt(x),
                      (lambda g, out, x: mul(g, mul(mul(out, mul(out, out)), -0.5)),),
                      lambda s, x: s.div(1.0, s.sqrt(x)), saves=(-1,),
                      decompose=lambda x: div(1.0, sqrt(x)))
abs_p = elementwise("abs", np.abs, (lambda g, out, x: mul(g, sign(x)),),
                    lambda s, x: s.abs(x), saves=(0,), numpy=(np.absolute, np.abs))
sign_p = elementwise("sign", np.sign, (lambda g, out, x: mul(g, 0),),
                     lambda s, x: s.sign(x), saves=(), numpy=np.sign)


floor_p = elementwise("floor", np.floor, (lambda g, out, x: mul(g, 0),),
                      lambda s, x: s.floor(x), saves=(), numpy=np.floor)
# Python's // and % (numpy's floor_divide/remainder): the remainder takes the divisor's sign.
floor_divide_p = elementwise("floor_divide", np.floor_divide, None,
                             lambda s, x, y: s.floordiv(x, y), nondiff=True,
                             numpy=np.floor_divide)
remainder_p = elementwise("remainder", np.remainder,
                          (lambda g, out, x, y: g,
                           lambda g, out, x, y: neg(mul(g, floor_divide(x, y)))),
                          lambda s, x, y: s.mod(x, y), numpy=(np.remainder, np.mod),
                          node_name=_overloads("Remainder", 2))


def _sigmoid_impl(x):
    # Stable for both signs: exp of a non-positive number only.
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1 / (1 + e), e / (1 + e)).astype(x.dtype, copy=False)


sigmoid_p = elementwise("sigmoid", _sigmoid_impl,
                        (lambda g, out, x: mul(g, mul(out, sub(1, out))),),
                        lambda s, x: s.div(1.0, s.add(1.0, s.exp(s.neg(x)))), saves=(-1,),
                        numpy="scipy.special.expit", expensive=True)
relu_p = elementwise("relu", lambda x: np.maximum(x, 0).astype(x.dtype, copy=False),
                     (lambda g, out, x: where(gt(out, 0), g, 0.0),),
                     lambda s, x: s.max(x, s.zero(x)), saves=(-1,))


# PyTorch's maximum/minimum rule: ties split the gradient evenly, and where either operand
# is NaN (no order holds), both get all of it.
def _max_vjp(first):
    def rule(g, out, x, y):
        a, b = (x, y) if first else (y, x)
        return where(lt(a, b), 0.0, where(eq(a, b), mul(g, 0.5), g))
    return rule


def _min_vjp(first):
    def rule(g, out, x, y):
        a, b = (x, y) if first else (y, x)
        return where(gt(a, b), 0.0, where(eq(a, b), mul(g, 0.5), g))
    return rule


maximum_p = elementwise("maximum", np.maximum, (_max_vjp(True), _max_vjp(False)),
                        lambda s, x, y: s.max(x, y), saves=(0, 1), numpy=np.maximum)
minimum_p = elementwise("minimum", np.minimum, (_min_vjp(True), _min_vjp(False)),
                        lambda s, x, y: s.min(x, y), saves=(0, 1), numpy=np.minimum)


def _clip_impl(x, lo, hi):
    return np.clip(x, lo, hi).astype(x.dtype, copy=False)


# PyTorch's clamp rule (clamp_backward_min_max): x gets the gradient inside [lo, hi], bounds
# included; lo where x < lo < hi; hi where x > hi or hi < lo (then hi is the result). Where
# any of them is NaN, none does.
def _clip_vjp(g, out, x, lo, hi):
    return where(logical_and(ge(x, lo), le(x, hi)), g, 0.0)


def _clip_vjp_lo(g, out, x, lo, hi):
    return where(logical_and(lt(x, lo), lt(lo, hi)), g, 0.0)


def _clip_vjp_hi(g, out, x, lo, hi):
    return where(logical_or(gt(x, hi), lt(hi, lo)), g, 0.0)


clip_p = elementwise("clip", _clip_impl, (_clip_vjp, _clip_vjp_lo, _clip_vjp_hi),
                     lambda s, x, lo, hi: s.min(s.max(x, lo), hi), saves=(0, 1, 2),
                     node_name="ClampBackward1")

# ---- select, casts, copies ---------------------------------------------------------------------
def _where_impl(c, x, y):
    """np.where; for float operands by bit masks, which select exactly (NaN, inf, -0.0
    included) and are ~10x faster than np.where when the condition is irregular (relu's
    gradient after a convolution: 6 ms vs 0.6 ms for 1.6M float32)."""
    x, y = np.asarray(x), np.asarray(y)
    if not (c.dtype == BOOL and x.dtype == y.dtype and x.dtype.kind == "f"
            and x.dtype.itemsize in (4, 8)):
        return np.where(c, x, y)
    ints = np.int32 if x.dtype.itemsize == 4 else np.int64
    shape = np.broadcast_shapes(c.shape, x.shape, y.shape)
    m = np.broadcast_to(c, shape).astype(ints)
    np.negative(m, out=m)  # all bits set where c
    xb = np.broadcast_to(x, shape).view(ints)
    if not y.view(ints).any():  # y == +0.0 everywhere (gradients): x's bits where c, in m
        return np.bitwise_and(xb, m, out=m).view(x.dtype)
    out = np.bitwise_and(xb, m)
    np.invert(m, out=m)
    out |= np.broadcast_to(y, shape).view(ints) & m
    return out.view(x.dtype)


where_p = register(Primitive(
    "where", "elementwise", _where_impl,
    lambda c, x, y: Aval(broadcast_shapes(c.shape, x.shape, y.shape, op="where"), x.dtype),
    (None, lambda g, out, c, x, y: where(c, g, 0.0), lambda g, out, c, x, y: where(c, 0.0, g)),
    saves=(0,), scalar=lambda s, c, x, y: s.select(c, x, y), numpy=np.where,
    node_name="WhereBackward0"))

astype_p = register(Primitive(
    "astype", "elementwise", lambda x, dtype: x.astype(dtype),
    lambda x, dtype: Aval(x.shape, np.dtype(dtype)),
    (lambda g, out, x, dtype: astype(g, dtype_of(x)),), saves=(),
    scalar=lambda s, x, dtype: s.cast(x, dtype), node_name="ToCopyBackward0"))

copy_p = elementwise("copy", np.copy, (lambda g, out, x: g,), lambda s, x: x, saves=(),
                     node_name="CloneBackward0")

stop_gradient_p = elementwise("stop_gradient", lambda x: x, None, lambda s, x: x,
                              nondiff=True)

# ---- comparisons and logic (no gradient) -------------------------------------------------------
_CMP = {}
for _name, _np, _sym in [("lt", np.less, "<"), ("le", np.less_equal, "<="),
                         ("gt", np.greater, ">"), ("ge", np.greater_equal, ">="),
                         ("eq", np.equal, "=="), ("ne", np.not_equal, "!=")]:
    _CMP[_name] = elementwise(_name, _np, None, (lambda sym: lambda s, x, y: s.cmp(sym, x, y))(_sym),
                              nondiff=True, numpy=_np, out_dtype=BOOL)
lt_p, le_p, gt_p, ge_p, eq_p, ne_p = (_CMP[k] for k in ("lt", "le", "gt", "ge", "eq", "ne"))
logical_and_p = elementwise("logical_and", np.logical_and, None, lambda s, x, y: s.and_(x, y),
                            nondiff=True, numpy=np.logical_and, out_dtype=BOOL)
logical_or_p = elementwise("logical_or", np.logical_or, None, lambda s, x, y: s.or_(x, y),
                           nondiff=True, numpy=np.logical_or, out_dtype=BOOL)
logical_not_p = elementwise("logical_not", np.logical_not, None, lambda s, x: s.not_(x),
                            nondiff=True, numpy=np.logical_not, out_dtype=BOOL)


# ---- the ops API over values and constants ----------------------------------------------------
# Note [Eager fast path]
# The op functions below first try the eager fast path: Tensor operands of one dtype, or a
# Tensor with a Python float or int (weak: it takes the tensor's dtype within its kind) or a
# same-dtype constant array, go straight to `Tensor._lg_binary` (unary: `_lg_process`) --
# exactly what `coerce` + `bind` would do. Everything else (IR and traced values, promotion,
# lists) takes the general path, where runtime/promotion.py decides the dtypes (Note [Two
# promotion rules]). This is the per-op overhead of eager code (benchmarks/eager_overhead.py).
_NO_PARAMS: dict = {}  # the params of these calls: one dict, never changed (nodes keep it)


def _binary(p, floating=False, check=None):
    def op(x, y):
        T = _DEFAULT[0]
        if type(x) is T:
            d = x._data.dtype
            if not floating or d.kind == "f":
                ty = type(y)
                if ty is T:
                    if y._data.dtype is d:
                        return T._lg_binary(p, x, y)
                elif ty is float and d.kind == "f" or ty is int and d.kind in "fi":
                    return T._lg_binary(p, x, np.asarray(y, d))
                elif ty is np.ndarray and y.dtype is d:
                    return T._lg_binary(p, x, y)
        elif type(y) is T:
            d = y._data.dtype
            if d.kind == "f":
                tx = type(x)
                if tx is float or tx is int:
                    return T._lg_binary(p, np.asarray(x, d), y)
                if tx is np.ndarray and x.dtype is d:
                    return T._lg_binary(p, x, y)
        if is_complex(x) or is_complex(y):  # Note [Complex values are pairs]
            return complex_elementwise(p, x, y)
        (x, y), dt, weak = coerce(p, (x, y), floating)
        if check is not None:
            check(x, y, dt)
        out = bind(p, x, y)
        if weak:
            out._lg_weak = True
        return out
    op.__name__ = p.name
    return op


def _float_binary(p):
    return _binary(p, floating=True)


def _unary(p, floating=True):
    def op(x):
        T = _DEFAULT[0]
        if type(x) is T and (not floating or x._data.dtype.kind == "f"):
            return T._lg_process(p, (x,), _NO_PARAMS)
        if is_complex(x):
            return complex_elementwise(p, x)
        (x,), dt, weak = coerce(p, (x,), floating)
        out = bind(p, x)
        if weak:
            out._lg_weak = True
        return out
    op.__name__ = p.name
    return op


def _integer_exponent(x, y, dt):
    """numpy (and PyTorch) refuse an integer to a negative integer power: a constant exponent
    at once, a traced one by a check op where the code runs (eager Tensors: numpy raises)."""
    if dt.kind not in "iub":
        return
    if not is_value(y):
        if np.any(np.asarray(y) < 0):
            raise DTypeError("integers to negative integer powers are not allowed",
                             loc=user_loc(), fix="make the base a float: "
                             "x.astype(np.float64) ** y, or 2.0 ** y")
    elif type(y) is not _DEFAULT[0] and y._np_dtype.kind == "i" and \
            0 not in y.shape and not getattr(y, "_lg_nonnegative", bool)():
        from llgrad.runtime.ops.control import check_p
        from llgrad.runtime.ops.reduce import amin
        bind(check_p, lt(amin(y) if y.shape else y, 0), exc=ValueError,
             args=("Integers to negative integer powers are not allowed.",))


add, sub, mul = (_binary(p) for p in (add_p, sub_p, mul_p))
pow = _binary(pow_p, check=_integer_exponent)
floor_divide, remainder = _binary(floor_divide_p), _binary(remainder_p)
floor = _unary(floor_p, floating=False)
maximum, minimum = _binary(maximum_p), _binary(minimum_p)
div = _float_binary(div_p)
lt, le, gt, ge, eq, ne = (_binary(p) for p in (lt_p, le_p, gt_p, ge_p, eq_p, ne_p))
logical_and, logical_or = _binary(logical_and_p), _binary(logical_or_p)
logical_not = _unary(logical_not_p, floating=False)
neg, abs, sign = (_unary(p, floating=False) for p in (neg_p, abs_p, sign_p))
relu = _unary(relu_p, floating=False)
exp, log, log1p, expm1, sin, cos, tan, tanh, sqrt, sigmoid = (
    _unary(p) for p in (exp_p, log_p, log1p_p, expm1_p, sin_p, cos_p, tan_p, tanh_p, sqrt_p,
                        sigmoid_p))
rsqrt = _unary(rsqrt_p)


def where(cond, x, y):
    """Select `x` where `cond` else `y` (x and y promote; cond is cast to bool)."""
    rules = rules_of(cond, x, y)
    (x, y), _, weak = rules.coerce(where_p, (x, y))
    if not (is_value(cond) and cond._np_dtype == BOOL):
        (cond,), _, _ = rules.coerce(None, (cond,))
        cond = astype(cond, BOOL)
    out = bind(where_p, cond, x, y)
    if weak:
        out._lg_weak = True
    return out


def _extreme(dt, top: bool):
    if dt.kind == "f":
        return np.inf if top else -np.inf
    if dt.kind == "b":
        return top
    return np.iinfo(dt).max if top else np.iinfo(dt).min


def clip(x, min=None, max=None):
    """Clamp into [min, max]; the gradient is 1 inside (bounds included), 0 outside, and
    array bounds get it where they are the result (PyTorch's clamp). The bounds given take
    part in promotion (numpy; PyTorch since 1.13)."""
    given = [b for b in (min, max) if b is not None]
    (x, *given), dt, _ = coerce(None, (x, *given))
    lo = given.pop(0) if min is not None else np.asarray(_extreme(dt, False), dt)
    hi = given.pop(0) if max is not None else np.asarray(_extreme(dt, True), dt)
    return bind(clip_p, x, lo, hi)


def astype(x, dtype):
    dt = to_np(dtype)
    if dtype_of(x) == dt:
        return x
    if not is_value(x):
        return np.asarray(x).astype(dt)
    return bind(astype_p, x, dtype=dt)


def square(x):
    """x * x; bool promotes to int64, as PyTorch's square (pow(x, 2)) does."""
    (x,), dt, weak = coerce(square_p, (x,))  # (numpy's rules refuse bool: int8)
    out = bind(square_p, astype(x, I64) if dt == BOOL else x)
    if weak:
        out._lg_weak = True
    return out


def copy(x):
    return bind(copy_p, x)


def stop_gradient(x):
    return bind(stop_gradient_p, x)
