"""The generic elementwise lowering: one scalar emitter serves every primitive's `scalar` rule,
and one loop emitter runs a fused group of elementwise ops (plus reductions) as one loop nest.

`Emitter` implements the vocabulary of `prim.scalar` rules (docs/ARCHITECTURE.md) on LLVM
scalars or `<W x T>` vectors; Python numbers stay Python (folded) until they meet an LLVM value,
so `x ** 2.0` becomes `x * x` and `3 * x` multiplies by an immediate. `emit_loops` walks an
iteration space with strided operands: dense axes are merged, the innermost axis runs as an
explicit vector loop (see loops.py Note [Explicit vector loops]) and reductions accumulate in
registers over trailing reduced axes. Invariant: results match numpy's (NaN propagation of
maximum/minimum, `!=` true on NaN, float->bool true on NaN).
"""
from __future__ import annotations

import functools

import numpy as np
from llvmlite import ir

from llgrad.runtime.ops._scalar import LIBM

from . import vmath
from .loops import I64, const, element_ptr, for_range
from .loops import elementwise as vector_loop

F32, F64, I1, I8 = ir.FloatType(), ir.DoubleType(), ir.IntType(1), ir.IntType(8)
_LL = {np.dtype(np.float64): F64, np.dtype(np.float32): F32, np.dtype(np.int64): I64,
       np.dtype(np.bool_): I1}
_MEM = {**_LL, np.dtype(np.bool_): I8}
_NP = {"double": np.float64, "float": np.float32, "i64": np.int64, "i1": np.bool_}


def lltype(dtype) -> ir.Type:
    """The register type of a numpy dtype (bool is i1)."""
    try:
        return _LL[np.dtype(dtype)]
    except KeyError:
        raise NotImplementedError(f"codegen supports float64, float32, int64 and bool, "
                                  f"not {np.dtype(dtype)}") from None


def memtype(dtype) -> ir.Type:
    """The in-memory element type of a numpy dtype (bool is i8, as numpy stores it)."""
    lltype(dtype)
    return _MEM[np.dtype(dtype)]


def _elem(t: ir.Type) -> ir.Type:
    return t.element if isinstance(t, ir.VectorType) else t


def _is_float(t: ir.Type) -> bool:
    return isinstance(_elem(t), (ir.FloatType, ir.DoubleType))


def _py(x) -> bool:
    return isinstance(x, (bool, int, float, np.generic))


class Emitter:
    """The abstract scalar emitter of `prim.scalar` rules, on `width`-lane values."""

    def __init__(self, builder: ir.IRBuilder, width: int):
        self.b, self.w = builder, width
        self.hint: ir.Type = F64  # element type for results made only of Python numbers

    # -- constants and coercion -------------------------------------------------------------
    def const(self, value, elem: ir.Type) -> ir.Constant:
        if isinstance(elem, ir.IntType):
            value = int(bool(value)) if elem.width == 1 else int(value)
        else:
            value = float(value)
        if self.w == 1:
            return ir.Constant(elem, value)
        return ir.Constant(ir.VectorType(elem, self.w), [value] * self.w)

    def materialize(self, x, elem: ir.Type | None = None) -> ir.Value:
        return self.const(x, elem or self.hint) if _py(x) else x

    def _pair(self, a, b):
        if _py(a) and not _py(b):
            a = self.const(a, _elem(b.type))
        elif _py(b) and not _py(a):
            b = self.const(b, _elem(a.type))
        return a, b

    def _fold(self, fn, *xs):
        out = fn(*(np.asarray(x) for x in xs))
        return out.item() if isinstance(out, np.ndarray) else out

    # -- arithmetic ---------------------------------------------------------------------------
    def _arith(self, fop, iop, npfn, x, y):
        if _py(x) and _py(y):
            return self._fold(npfn, x, y)
        x, y = self._pair(x, y)
        if iop == "add" and _elem(x.type) == I1:  # numpy's bool + bool is a logical or
            return self.b.or_(x, y)
        return getattr(self.b, fop if _is_float(x.type) else iop)(x, y)

    def add(self, x, y):
        return self._arith("fadd", "add", np.add, x, y)

    def sub(self, x, y):
        return self._arith("fsub", "sub", np.subtract, x, y)

    def mul(self, x, y):
        return self._arith("fmul", "mul", np.multiply, x, y)

    def div(self, x, y):
        return self._arith("fdiv", "sdiv", np.true_divide, x, y)

    def neg(self, x):
        if _py(x):
            return -x
        return self.b.fneg(x) if _is_float(x.type) else self.b.neg(x)

    def pow(self, x, y):
        if _py(x) and _py(y):
            return self._fold(np.power, x, y)
        if _py(y) and _is_float(x.type):
            # Small integral exponents as products: exact to an ulp, and much faster.
            if y == 0:
                return self.const(1.0, _elem(x.type))
            if y == 1:
                return x
            if y == 2:
                return self.b.fmul(x, x)
            if y == 3:
                return self.b.fmul(self.b.fmul(x, x), x)
            if y == -1:
                return self.b.fdiv(self.const(1.0, _elem(x.type)), x)
            if y == 0.5:
                return self.sqrt(x)
        x, y = self._pair(x, y)
        if _is_float(x.type):
            return vmath.math_call(self.b, "pow", x, y)
        return self._lanes(_ipow_function(self.b.module), x, y)

    def _lanes(self, fn, *args):
        if self.w == 1:
            return self.b.call(fn, list(args))
        out = ir.Constant(args[0].type, ir.Undefined)
        for lane in range(self.w):
            k = ir.Constant(ir.IntType(32), lane)
            out = self.b.insert_element(
                out, self.b.call(fn, [self.b.extract_element(a, k) for a in args]), k)
        return out

    # -- math functions -----------------------------------------------------------------------
    def _math(self, name, npfn, x):
        if _py(x):
            return self._fold(npfn, float(x))
        if not _is_float(x.type):
            raise NotImplementedError(f"{name} of an integer value in codegen")
        return vmath.math_call(self.b, name, x)

    def exp(self, x): return self._math("exp", np.exp, x)  # noqa: E704
    def log(self, x): return self._math("log", np.log, x)  # noqa: E704
    def log1p(self, x): return self._math("log1p", np.log1p, x)  # noqa: E704
    def expm1(self, x): return self._math("expm1", np.expm1, x)  # noqa: E704
    def sin(self, x): return self._math("sin", np.sin, x)  # noqa: E704
    def cos(self, x): return self._math("cos", np.cos, x)  # noqa: E704
    def tan(self, x): return self._math("tan", np.tan, x)  # noqa: E704
    def tanh(self, x): return self._math("tanh", np.tanh, x)  # noqa: E704
    def sqrt(self, x): return self._math("sqrt", np.sqrt, x)  # noqa: E704

    def call(self, name, *xs):
        """libm function `name` (vmath's vocabulary: sinh, atan2, erf, lgamma, ...); the
        rounding functions leave integers as they are, as numpy's do."""
        if all(_py(x) for x in xs):
            return self._fold(LIBM[name], *(float(x) for x in xs))
        xs = [self.materialize(x, _elem(next(v for v in xs if not _py(v)).type)) for x in xs]
        if not _is_float(xs[0].type):
            if name in _ROUNDING:
                return xs[0]
            raise NotImplementedError(f"{name} of an integer value in codegen")
        return vmath.math_call(self.b, name, *xs)

    def abs(self, x):
        if _py(x):
            return abs(x)
        if _is_float(x.type):
            return vmath.math_call(self.b, "fabs", x)
        return self.select(self.cmp("<", x, 0), self.neg(x), x)

    def sign(self, x):
        if _py(x):
            return self._fold(np.sign, x)
        return self.select(self.cmp(">", x, 0), 1, self.select(self.cmp("<", x, 0), -1, x))

    def _extremum(self, name, pred, npfn, x, y):
        if _py(x) and _py(y):
            return self._fold(npfn, x, y)
        x, y = self._pair(x, y)
        if _is_float(x.type):
            return vmath.math_call(self.b, name, x, y)  # NaN-propagating, as numpy
        if _elem(x.type).width == 1:
            return (self.b.or_ if name == "maximum" else self.b.and_)(x, y)
        return self.b.select(self.b.icmp_signed(pred, x, y), x, y)

    def max(self, x, y):
        return self._extremum("maximum", ">", np.maximum, x, y)

    def min(self, x, y):
        return self._extremum("minimum", "<", np.minimum, x, y)

    def floor(self, x):
        if _py(x):
            return self._fold(np.floor, x)
        return vmath.math_call(self.b, "floor", x) if _is_float(x.type) else x

    def _divmod(self, x, y):
        """Python's floor division and remainder (the remainder takes the divisor's sign), as
        numpy computes them. See Note [Float floor division]."""
        x, y = self._pair(x, y)
        if _is_float(x.type):
            return self._float_divmod(x, y)
        zero = self.cmp("==", y, 0)
        safe = self.select(zero, 1, y)  # integer division by zero traps: numpy gives 0
        q, r = self.b.sdiv(x, safe), self.b.srem(x, safe)
        fix = self.and_(self.cmp("!=", r, 0), self.cmp("!=", self.cmp("<", r, 0),
                                                        self.cmp("<", safe, 0)))
        q = self.select(zero, 0, self.select(fix, self.sub(q, 1), q))
        r = self.select(zero, 0, self.select(fix, self.add(r, safe), r))
        return q, r

    def _float_divmod(self, x, y):
        """Note [Float floor division]: the exact floor quotient when it is checked to be one
        for every lane (cheap), else numpy's own divmod (fmod, a libm call per element)."""
        b = self.b
        q = self.floor(self.div(x, y))
        r = vmath.math_call(b, "fma", self.neg(q), y, x)  # x - q * y, rounded once
        pos = self.and_(self.cmp(">=", r, 0), self.cmp("<", r, y))
        neg = self.and_(self.cmp("<=", r, 0), self.cmp(">", r, y))
        exact = 2.0 ** (50 if _elem(x.type) == F64 else 21)  # 2**(mantissa bits - 3)
        ok = self.and_(self.cmp("<", self.abs(q), exact),
                       self.select(self.cmp(">", y, 0), pos, neg))
        if self.w > 1:
            ok = functools.reduce(b.and_, (b.extract_element(ok, ir.Constant(ir.IntType(32), k))
                                           for k in range(self.w)))
        fast = self.select(self.cmp("==", r, 0), self.call("copysign", 0.0, y), r)
        with b.if_else(ok, likely=True) as (then, otherwise):
            with then:
                then_block = b.block
            with otherwise:
                slow_q, slow_r = self._numpy_divmod(x, y)
                else_block = b.block
        out = []
        for f, sl in ((q, slow_q), (fast, slow_r)):
            phi = b.phi(f.type)
            phi.add_incoming(f, then_block)
            phi.add_incoming(sl, else_block)
            out.append(phi)
        return tuple(out)

    def _numpy_divmod(self, x, y):
        """numpy's npy_divmod: mod = fmod(x, y), div = (x - mod) / y, signs fixed, snapped."""
        mod = self.b.frem(x, y)
        div = self.div(self.sub(x, mod), y)
        fix = self.and_(self.cmp("!=", mod, 0), self.cmp("!=", self.cmp("<", y, 0),
                                                          self.cmp("<", mod, 0)))
        r = self.select(self.cmp("==", mod, 0), self.call("copysign", 0.0, y),
                        self.select(fix, self.add(mod, y), mod))
        div = self.select(fix, self.sub(div, 1.0), div)
        q = self.floor(div)
        q = self.select(self.cmp(">", self.sub(div, q), 0.5), self.add(q, 1.0), q)
        q = self.select(self.cmp("==", div, 0), self.call("copysign", 0.0, self.div(x, y)), q)
        return self.select(self.cmp("==", y, 0), self.div(x, y), q), r

    def fmod(self, x, y):
        """C's fmod (the remainder takes the dividend's sign); integer x % 0 is 0, as numpy."""
        if _py(x) and _py(y):
            return self._fold(np.fmod, x, y)
        x, y = self._pair(x, y)
        if _is_float(x.type):
            return self.b.frem(x, y)
        zero = self.cmp("==", y, 0)
        return self.select(zero, 0, self.b.srem(x, self.select(zero, 1, y)))

    def floordiv(self, x, y):
        if _py(x) and _py(y):
            return self._fold(np.floor_divide, x, y)
        return self._divmod(x, y)[0]

    def mod(self, x, y):
        if _py(x) and _py(y):
            return self._fold(np.remainder, x, y)
        return self._divmod(x, y)[1]

    def zero(self, x):
        return 0 if _py(x) else self.const(0, _elem(x.type))

    # -- selection, comparison, logic ---------------------------------------------------------
    def select(self, c, a, b):
        if _py(c):
            return a if c else b
        if _py(a) and _py(b):
            a = self.const(a, self.hint)
        a, b = self._pair(a, b)
        return self.b.select(self.to_bool(c), a, b)

    def cmp(self, sym, x, y):
        if _py(x) and _py(y):
            return bool(self._fold(_CMP_NP[sym], x, y))
        x, y = self._pair(x, y)
        if _is_float(x.type):
            if sym == "!=":
                return self.b.fcmp_unordered("!=", x, y)  # NaN != anything, as numpy
            return self.b.fcmp_ordered(sym, x, y)
        if _elem(x.type).width == 1:
            return self.b.icmp_unsigned(sym, x, y)
        return self.b.icmp_signed(sym, x, y)

    def to_bool(self, x):
        if _py(x):
            return bool(x)
        t = _elem(x.type)
        if isinstance(t, ir.IntType) and t.width == 1:
            return x
        if _is_float(x.type):
            return self.b.fcmp_unordered("!=", x, self.const(0.0, t))  # NaN is truthy
        return self.b.icmp_signed("!=", x, self.const(0, t))

    def and_(self, x, y):
        x, y = self.to_bool(x), self.to_bool(y)
        if _py(x) or _py(y):
            return (y if x else False) if _py(x) else (x if y else False)
        return self.b.and_(x, y)

    def or_(self, x, y):
        x, y = self.to_bool(x), self.to_bool(y)
        if _py(x) or _py(y):
            return (True if x else y) if _py(x) else (True if y else x)
        return self.b.or_(x, y)

    def not_(self, x):
        x = self.to_bool(x)
        return (not x) if _py(x) else self.b.xor(x, self.const(1, I1))

    def dtype(self, x):
        """The numpy dtype of an LLVM value (its element type)."""
        return np.dtype(_NP[str(_elem(x.type))])

    def cast(self, x, dtype):
        dst = lltype(dtype)
        if _py(x):
            return np.asarray(x).astype(dtype).item()
        src = _elem(x.type)
        vt = (lambda e: e) if self.w == 1 else (lambda e: ir.VectorType(e, self.w))
        if src == dst:
            return x
        if isinstance(dst, ir.IntType) and dst.width == 1:
            return self.to_bool(x)
        if _is_float(x.type) and isinstance(dst, (ir.FloatType, ir.DoubleType)):
            wider = isinstance(dst, ir.DoubleType)
            return (self.b.fpext if wider else self.b.fptrunc)(x, vt(dst))
        if _is_float(x.type):
            return self.b.fptosi(x, vt(dst))
        if src.width == 1:
            return (self.b.uitofp if isinstance(dst, (ir.FloatType, ir.DoubleType))
                    else self.b.zext)(x, vt(dst))
        return self.b.sitofp(x, vt(dst))


_ROUNDING = frozenset({"ceil", "trunc", "rint"})
# Note [Float floor division]
# numpy's float `//` and `%` (npy_divmod, after CPython's float divmod) are not floor(x / y):
# x / y rounds, so 1.0 // 0.1 would be floor(10.0) = 10 where the exact quotient 9.99...
# floors to 9. numpy takes mod = fmod(x, y) (exact), div = (x - mod) / y (nearly an integer),
# moves mod to the divisor's sign (div - 1 then) and snaps floor(div) to the nearest integer;
# zero results take their sign from y (mod) and x / y (div); y == 0 gives x / y and fmod's
# NaN; NaN or inf operands give NaN; nothing traps. That is the exact floor quotient q
# whenever |q| < 2**50 (float32: 2**21; below, div is within 0.5 of q), with the remainder
# x - q * y rounded once. fmod is a libm call per element (~70x a division), so the emitted
# code first tries q = floor(x / y) and r = fma(-q, y, x): r is x - q * y rounded once, and
# rounding keeps its sign and its order with y, so 0 <= r < y (y < r <= 0 for y < 0) proves
# q is the exact floor quotient; below that bound, q and r (a zero r signed as y) are
# numpy's results. Only a vector with a lane that fails the test (near-integer quotients,
# zeros, infinities, NaN) branches to numpy's algorithm (_numpy_divmod).
_CMP_NP = {"<": np.less, "<=": np.less_equal, ">": np.greater, ">=": np.greater_equal,
           "==": np.equal, "!=": np.not_equal}


def _ipow_function(module: ir.Module) -> ir.Function:
    """`i64 llgrad_ipow(i64 x, i64 n)` by repeated squaring (numpy's integer power)."""
    fn = module.globals.get("llgrad.ipow")
    if fn is not None:
        return fn
    fn = ir.Function(module, ir.FunctionType(I64, [I64, I64]), "llgrad.ipow")
    fn.linkage = "internal"
    x, n = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    acc, base, e = (b.alloca(I64) for _ in range(3))
    b.store(ir.Constant(I64, 1), acc)
    b.store(x, base)
    b.store(n, e)
    head, body, done = (fn.append_basic_block(s) for s in ("head", "body", "done"))
    b.branch(head)
    b.position_at_end(head)
    b.cbranch(b.icmp_signed(">", b.load(e), ir.Constant(I64, 0)), body, done)
    b.position_at_end(body)
    odd = b.trunc(b.load(e), I1)
    b.store(b.select(odd, b.mul(b.load(acc), b.load(base)), b.load(acc)), acc)
    b.store(b.mul(b.load(base), b.load(base)), base)
    b.store(b.ashr(b.load(e), ir.Constant(I64, 1)), e)
    b.branch(head)
    b.position_at_end(done)
    b.ret(b.load(acc))
    return fn


# ---- the loop emitter -----------------------------------------------------------------------
class Operand:
    """An input of a loop: a Python scalar constant, or memory (`ptr`, strides, dtype)."""

    __slots__ = ("value", "ptr", "strides", "dtype")

    def __init__(self, value=None, ptr=None, strides=(), dtype=None):
        self.value, self.ptr, self.strides, self.dtype = value, ptr, tuple(strides), dtype


REDUCERS = {"sum": ("add", 0), "prod": ("mul", 1), "max": ("max", -np.inf),
            "min": ("min", np.inf)}


def _identity(kind: str, dtype) -> float | int:
    v = REDUCERS[kind][1]
    if np.dtype(dtype).kind in "iu" and not np.isfinite(v):
        info = np.iinfo(dtype)
        return info.min if v < 0 else info.max
    if np.dtype(dtype) == np.bool_:
        return v > 0 if np.isfinite(v) else bool(v > 0)
    return v


def vector_width(dtypes) -> int:
    """Lanes for a loop over these dtypes: one AVX register of the widest type."""
    widest = max((np.dtype(d).itemsize for d in dtypes), default=8)
    return vmath.vector_width("f32" if widest <= 4 else "f64")


def emit_loops(b: ir.IRBuilder, shape, ins: list[Operand], outs: list[tuple], compute,
               reductions: list[tuple] = (), red_axes=()) -> None:
    """Emit one loop nest over `shape`.

    Args:
        ins: the operands; memory operands carry strides over `shape` (0 = broadcast).
        outs: (ptr, dtype) of contiguous results over `shape`, or (ptr, dtype, strides).
        compute: `compute(emitter, values) -> list` of len(outs) + len(reductions) values.
        reductions: (kind, ptr, dtype) of results reduced over `red_axes` (sum/prod/max/min),
            each stored contiguous over the kept axes.
    """
    from .layout import collapse, contiguous_strides
    shape = tuple(int(d) for d in shape)
    if all(d == 1 for d in shape):  # one element (0-d values): straight-line code, no loop
        _emit_one(b, ins, outs, compute, reductions)
        return
    red_axes = set(red_axes)
    kept = [d for i, d in enumerate(shape) if i not in red_axes]
    kept_strides = iter(contiguous_strides(kept))
    red_strides = [0 if i in red_axes else next(kept_strides) for i in range(len(shape))]
    mem = [o for o in ins if o.ptr is not None]
    outs = [o if len(o) == 3 else (o[0], o[1], contiguous_strides(shape)) for o in outs]
    lists = [o.strides for o in mem] + [o[2] for o in outs] + [red_strides] * bool(reductions)
    dims, strides = collapse(shape, *lists)
    n_mem, n_out = len(mem), len(outs)
    r_strides = strides[-1] if reductions else None
    nd = len(dims)
    split = nd
    if reductions:
        while split > 0 and r_strides[split - 1] == 0 and dims[split - 1] != 1:
            split -= 1
    reduced = [reductions and r_strides[k] == 0 and dims[k] != 1 for k in range(nd)]
    dtypes = [o.dtype for o in mem] + [o[1] for o in outs] + [d for _, _, d in reductions]
    width = vector_width(dtypes)
    ks = [REDUCERS[k][0] for k, _, _ in reductions]
    # Reduced axes outside the trailing run revisit output elements: accumulate in memory.
    in_memory = any(reduced[:split])
    if in_memory:
        n_kept = int(np.prod(kept, dtype=np.int64))
        for kind, ptr, dt in reductions:
            em = Emitter(b, 1)
            with for_range(b, 0, n_kept, name="init") as i:
                _store(b, em.const(_identity(kind, dt), lltype(dt)), ptr, i, dt)
    accs = []
    if reductions and split < nd:
        with b.goto_entry_block():
            for _, _, dt in reductions:
                t = lltype(dt)
                accs.append((b.alloca(ir.VectorType(t, width)), b.alloca(t)))

    def column(k):
        return [s[k] for s in strides]

    def level(k, bases):
        if k == split and accs:
            for (kind, _, dt), (vacc, sacc) in zip(reductions, accs):
                ident = _identity(kind, dt)
                b.store(Emitter(b, width).const(ident, lltype(dt)), vacc)
                b.store(Emitter(b, 1).const(ident, lltype(dt)), sacc)
        if k == nd - 1:
            inner(bases)
        else:
            with for_range(b, 0, dims[k], name=f"d{k}") as i:
                level(k + 1, [_advance(b, base, i, s) for base, s in zip(bases, column(k))])
        if k == split and accs:
            em = Emitter(b, 1)
            for j, ((kind, ptr, dt), (vacc, sacc)) in enumerate(zip(reductions, accs)):
                total, vec = b.load(sacc), b.load(vacc)
                for lane in range(width):
                    total = getattr(em, ks[j])(
                        total, b.extract_element(vec, ir.Constant(ir.IntType(32), lane)))
                if in_memory:
                    total = getattr(em, ks[j])(_load(b, ptr, bases[-1], dt, 1), total)
                _store(b, total, ptr, bases[-1], dt)

    def inner(bases):
        col = column(nd - 1)

        def body(b, i, w):
            em = Emitter(b, w)
            idx = [_advance(b, base, i, s) for base, s in zip(bases, col)]
            vals, it = [], iter(range(n_mem))
            for o in ins:
                if o.ptr is None:
                    vals.append(o.value)
                else:
                    j = next(it)
                    vals.append(_load_strided(b, o.ptr, idx[j], col[j], o.dtype, w))
            results = compute(em, vals)
            for j, ((ptr, dt, _), v) in enumerate(zip(outs, results)):
                _store_strided(b, em.materialize(v, lltype(dt)), ptr, idx[n_mem + j],
                               col[n_mem + j], dt, w)
            for j, ((kind, ptr, dt), v) in enumerate(zip(reductions, results[n_out:])):
                v = em.materialize(v, lltype(dt))
                if accs:
                    slot = accs[j][0] if w > 1 else accs[j][1]
                    b.store(getattr(em, ks[j])(b.load(slot), v), slot)
                else:
                    if in_memory:
                        v = getattr(em, ks[j])(_load(b, ptr, idx[-1], dt, w), v)
                    _store(b, v, ptr, idx[-1], dt)

        vector_loop(b, dims[nd - 1], width, body, name=f"d{nd - 1}")

    level(0, [ir.Constant(I64, 0)] * len(strides))


def _emit_one(b, ins, outs, compute, reductions) -> None:
    """emit_loops over a single element: scalar loads, the computation, scalar stores."""
    em = Emitter(b, 1)
    zero = ir.Constant(I64, 0)
    vals = [o.value if o.ptr is None else _load(b, o.ptr, zero, o.dtype, 1) for o in ins]
    results = compute(em, vals)
    for o, v in zip(outs, results):
        _store(b, em.materialize(v, lltype(o[1])), o[0], zero, o[1])
    for (kind, ptr, dt), v in zip(reductions, results[len(outs):]):
        v = em.materialize(v, lltype(dt))
        if v.type != lltype(dt):
            v = em.cast(v, dt)
        _store(b, v, ptr, zero, dt)


def _advance(b, base, i, stride):
    if stride == 0:
        return base
    step = i if stride == 1 else b.mul(i, ir.Constant(I64, stride))
    if isinstance(base, ir.Constant) and base.constant == 0:
        return step
    return b.add(base, step)


def _load(b, ptr, idx, dtype, w):
    t = memtype(dtype)
    ty = t if w == 1 else ir.VectorType(t, w)
    v = b.load(element_ptr(b, ptr, idx, t), typ=ty, align=t.width // 8 if isinstance(
        t, ir.IntType) else (8 if t == F64 else 4))
    if np.dtype(dtype) == np.bool_:
        v = b.icmp_unsigned("!=", v, ir.Constant(ty, 0 if w == 1 else [0] * w))
    return v


def _load_strided(b, ptr, idx, stride, dtype, w):
    if w == 1 or stride == 1:
        return _load(b, ptr, idx, dtype, w)
    if stride == 0:
        return vmath.splat(b, _load(b, ptr, idx, dtype, 1), w)
    t = lltype(dtype)
    out = ir.Constant(ir.VectorType(t, w), ir.Undefined)
    for lane in range(w):
        v = _load(b, ptr, b.add(idx, const(lane * stride)), dtype, 1)
        out = b.insert_element(out, v, ir.Constant(ir.IntType(32), lane))
    return out


def _store(b, v, ptr, idx, dtype):
    t = memtype(dtype)
    if np.dtype(dtype) == np.bool_:
        v = b.zext(v, ir.VectorType(I8, v.type.count) if isinstance(v.type, ir.VectorType)
                   else I8)
    b.store(v, element_ptr(b, ptr, idx, t),
            align=t.width // 8 if isinstance(t, ir.IntType) else (8 if t == F64 else 4))


def _store_strided(b, v, ptr, idx, stride, dtype, w):
    if w == 1 or stride == 1:
        return _store(b, v, ptr, idx, dtype)
    for lane in range(w):
        k = ir.Constant(ir.IntType(32), lane)
        _store(b, b.extract_element(v, k), ptr, b.add(idx, const(lane * stride)), dtype)
