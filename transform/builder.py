"""The IR builder: the interpretation that turns `bind(prim, ...)` on IR values into ops.

While a Builder is active (`with builder:`), Values behave like numpy arrays: operators, numpy
functions and the ops API append ops to the current region. Broadcasting is made explicit
here (`broadcast_to` ops), so every elementwise op's operands have the output's shape.
Constants (numpy arrays, eager Tensors) become `constant` ops.
"""
from __future__ import annotations

import threading
from contextlib import contextmanager
from typing import Callable

import numpy as np

from llgrad.runtime import ops
from llgrad.runtime.arraylike import ArrayOperators, NumpyMethods
from llgrad.runtime.aval import Aval
from llgrad.runtime.errors import (ConcretizationError, DTypeError, LLGradError, ShapeError,
                                   SourceLoc, _compose, user_loc)
from llgrad.runtime.ops.control import constant_p
from llgrad.runtime.ops import elementwise as ew
from llgrad.runtime.ops.shape import broadcast_to_p
from llgrad.runtime.prim import Primitive
from llgrad.runtime.promotion import NUMPY
from llgrad.transform import ir

_TLS = threading.local()


class ScopeError(LLGradError):
    """A value defined inside a region (loop or branch body) was used outside it."""

    _lg_signal = True  # (the tracer unrolls the loop: tracer/tracing.py)

    def __init__(self, value, region):
        super().__init__(f"a value computed inside a traced loop or branch ({value!r}) is "
                         f"used outside it")
        self.value, self.region = value, region


def current() -> "Builder":
    stack = getattr(_TLS, "stack", None)
    if not stack:
        raise LLGradError("an IR value was used outside of tracing",
                          fix="call compiled functions only through llgrad.differentiate")
    return stack[-1]


# Conversions to Python numbers, and what the dynamic path does with them (DESIGN: a value
# the user concretises is a constant from then on, as in PyTorch): said where it happens, so
# a gradient without the terms through `float(x[0])` is never a surprise.
_TO_NUMBER = ("float()", ".item()", ".tolist()")
_NUMBER_FIX = ("keep it an array (x[0] rather than float(x[0]) or x[0].item(); np.where "
               "instead of if). On the dynamic path the number it gives is a constant: no "
               "gradient flows through it, as in PyTorch")
_FORMAT_FIX = ("format numbers outside the differentiated function (return the value, or print "
               "after the call); f'{x}' without a format spec shows the traced value while "
               "tracing")


class Value(ir.Value, ArrayOperators, NumpyMethods):
    """An IR value with array behaviour (the compiler's counterpart of Tensor). It follows
    numpy's promotion; `_lg_weak` marks a value standing for a Python number (a loop counter,
    a Python float argument): See Note [Two promotion rules] in runtime/promotion.py."""

    __slots__ = ("_lg_weak", "_lg_array")
    _lg_level = 1
    _lg_promotion = NUMPY

    def __init__(self, aval: Aval, name: str | None = None, op=None, weak: bool = False):
        super().__init__(aval, name, op)
        self._lg_weak = weak
        self._lg_array = False  # a 0-d array, not a numpy scalar: Note [Augmented assignment]

    def _lg_as_array(self) -> "Value":
        if self.aval.shape == ():
            self._lg_array = True
        return self

    @staticmethod
    def _lg_process(prim, args, params):
        return current().bind(prim, args, params)

    @staticmethod
    def _lg_concrete(v):
        b = current()
        return b.concrete(v) if b.concrete is not None else None

    @staticmethod
    def _lg_custom_vjp(call):
        """A custom derivative rule applied to IR values (runtime/custom.py)."""
        hook = current().on_custom_vjp
        if hook is None:
            raise LLGradError(f"the custom derivative rule {call.name} was called on IR values "
                              f"outside a trace", loc=call.loc)
        return hook(call)

    # Note [Augmented assignment]
    # `y += x` computes a new value (IR values are immutable); the tracer's `on_inplace` hook
    # refuses it where numpy's in-place update would be seen through another reference
    # (tracer/aliasing.py, Note [In-place updates are by value]). Like numpy's, the update of
    # an array keeps its shape and dtype (`y32 += x64` stays float32, cast "same_kind"). A 0-d
    # value is taken for a scalar (a Python number, or the numpy scalar that arithmetic,
    # reductions and elements give), which is immutable: `t = s; t += x` rebinds `t` and
    # leaves `s`, with no alias to check. A 0-d array is updated in place: an argument (the
    # caller's: refused), or what numpy's reshape and squeeze return (`_lg_array`, set by
    # runtime/arraylike.as_array; ops.reshape inside llgrad's own rules, a vector matmul's,
    # leaves it unset), whose aliases are checked like any array's.
    def _inplace(self, fn, other, what: str):
        b = current()
        if not isinstance(self, ir.Value):  # a Padded slice (runtime/padded.py): its own rules
            if b.on_inplace is not None:
                b.on_inplace(self, what)
            return fn(self, other)
        scalar = self.aval.shape == () and self.id not in b.arguments and not self._lg_array
        if b.on_inplace is not None and not scalar:
            b.on_inplace(self, what)
        out = fn(self, other)
        if scalar:
            return out
        if out.aval.shape != self.aval.shape:
            raise ShapeError(f"non-broadcastable output operand with shape "
                             f"{tuple(self.aval.shape)} doesn't match the broadcast shape "
                             f"{tuple(out.aval.shape)} (in-place {what})", loc=user_loc())
        if out.aval.dtype != self.aval.dtype:
            if not np.can_cast(out.aval.dtype, self.aval.dtype, "same_kind"):
                raise DTypeError(f"Cannot cast ufunc '{self._UFUNC[what]}' output from "
                                 f"dtype('{out.aval.dtype}') to dtype('{self.aval.dtype}') with "
                                 f"casting rule 'same_kind'", loc=user_loc(),
                                 fix="cast explicitly: `y = (y op x).astype(...)`")
            out = ops.astype(out, self.aval.dtype)
        return out

    _UFUNC = {"+=": "add", "-=": "subtract", "*=": "multiply", "/=": "divide",
              "//=": "floor_divide", "%=": "remainder", "**=": "power"}

    def __iadd__(self, o): return self._inplace(ops.add, o, "+=")
    def __isub__(self, o): return self._inplace(ops.sub, o, "-=")
    def __imul__(self, o): return self._inplace(ops.mul, o, "*=")
    def __itruediv__(self, o): return self._inplace(ops.div, o, "/=")
    def __ifloordiv__(self, o): return self._inplace(ops.floor_divide, o, "//=")
    def __imod__(self, o): return self._inplace(ops.remainder, o, "%=")
    def __ipow__(self, o): return self._inplace(ops.pow, o, "**=")

    def _lg_nonnegative(self) -> bool:
        """Whether this integer value is provably >= 0: a loop counter counting up from
        >= 0, a constant >= 0, `x % c` with c > 0, sums, products and floor quotients of
        such. Python's `(-1) ** (i % 2)` is an int only because its exponent is >= 0."""
        op = self.op
        if op is None:
            return self.id in current().nonneg
        ins = op.inputs
        if op.prim is constant_p:
            return bool(np.all(op.params["value"] >= 0))
        if op.prim is ew.remainder_p:
            return ins[1].op is not None and ins[1].op.prim is constant_p and \
                bool(np.all(ins[1].op.params["value"] > 0))
        if op.prim in (ew.add_p, ew.mul_p, ew.floor_divide_p, broadcast_to_p):
            return all(v._lg_nonnegative() for v in ins)
        return op.prim is ew.abs_p

    def _concretize(self, what: str):
        b = current()
        if b.on_concretize is not None:
            return b.on_concretize(self, what)
        e = ConcretizationError(
            f"{what} of a traced value: its value is not known while llgrad compiles the "
            f"function", loc=user_loc(),
            fix=_NUMBER_FIX if what in _TO_NUMBER else _FORMAT_FIX if what.startswith(
                "formatting with") else "keep it an array (use np.where instead of if, or "
            "pass the value as a static Python argument)")
        e.value = self  # the tracer may react (e.g. unroll a loop whose index is needed)
        raise e

    # While the tracer builds the message of a raised exception (Builder.format_concrete),
    # formatting a value (f-strings, str, repr) needs its value: a concretisation, as float()
    # is; so does a format spec (f"{loss:.3f}") anywhere. Otherwise it shows the IR value
    # (`%x.3: f64[]`), for debugging.
    def _formatted(self, spec=""):
        stack = getattr(_TLS, "stack", None)
        if not stack:
            return None
        if stack[-1].format_concrete:
            c = np.asarray(self._concretize("formatting into an exception message"))
        elif spec:  # f"{loss:.3f}" needs the number (f"{loss}" shows the traced value)
            c = np.asarray(self._concretize(f"formatting with the format spec {spec!r}"))
        else:
            return None
        if c.ndim:
            return (c,)
        # A weak value stands for a Python number (an argument 0.5, a loop counter): Python
        # formats it, so f"{a!r}" shows 0.5, not np.float64(0.5).
        return (c.item() if getattr(self, "_lg_weak", False) else c[()],)

    def __format__(self, spec):
        c = self._formatted(spec)
        return format(c[0], spec) if c is not None else super().__format__(spec)

    def __str__(self):
        c = self._formatted()
        return str(c[0]) if c is not None else super().__repr__()

    def __repr__(self):
        c = self._formatted()
        return repr(c[0]) if c is not None else super().__repr__()

    def __bool__(self):
        return bool(self._concretize("bool()"))

    def __float__(self):
        return float(self._concretize("float()"))

    def __int__(self):
        return int(self._concretize("int()"))

    def __index__(self):
        return int(self._concretize("use as an index"))

    def detach(self):
        """The value without gradient (Tensor.detach; llgrad.stop_gradient)."""
        return ops.stop_gradient(self)

    def item(self):
        return self._concretize(".item()").item()

    def tolist(self):
        return self._concretize(".tolist()").tolist()

    def __array__(self, dtype=None, copy=None):
        return np.asarray(self._concretize("conversion to a numpy array"), dtype=dtype)

    def __hash__(self):
        return id(self)


class Builder:
    """Builds one Function. Emits into the innermost open region.

    `loc` supplies the SourceLoc stamped on each op (the tracer uses the user's frame);
    `concrete(v)` may return a value's concrete ndarray (the dynamic path), and
    `on_concretize(v, what)` decides what happens when user code needs one.
    """

    def __init__(self, name: str, loc: Callable[[], SourceLoc | None] | None = user_loc):
        self.fn = ir.Function(name, ir.Region())
        self.regions = [self.fn.body]
        self.loc = loc
        self.concrete = None
        self.on_concretize = None
        self.on_inplace = None
        self.format_concrete = False  # see Value._formatted
        self.nonneg: set = set()  # ids of loop counters known >= 0 (Value._lg_nonnegative)
        self.on_custom_vjp = None  # traces a runtime.custom.CustomCall (tracer/custom.py)
        self.home: dict = {}  # value id -> the (non-root) region defining it
        self.n_ops = 0  # ops emitted so far: Note [A cap on trace size]
        # For the tracer's in-place checks (tracer/aliasing.py): parameter id -> the path of
        # an array the caller passed (`x`, `state.pos`); value id -> the values it may be
        # at run time (a loop-carried parameter: its first and next values; a cond's or a
        # loop's result: the paths' values); the in-place updates in the loop bodies being
        # traced (one list a loop).
        self.arguments: dict = {}
        self.origins: dict = {}
        self.inplace: list = []
        # generators the traced function seeded itself (tracer/operators.py, Note [Generators
        # seeded inside the function]): id -> the generator
        self.seeded: dict = {}

    def __enter__(self) -> "Builder":
        stack = getattr(_TLS, "stack", None)
        if stack is None:
            stack = _TLS.stack = []
        stack.append(self)
        return self

    def __exit__(self, *exc):
        _TLS.stack.pop()
        return False

    @property
    def region(self) -> ir.Region:
        return self.regions[-1]

    @contextmanager
    def open_region(self, params=()):
        """Emit into a fresh region (for cond/for/while bodies)."""
        r = ir.Region(params=list(params))
        for p in r.params:
            self.home[p.id] = r
        self.regions.append(r)
        try:
            yield r
        finally:
            self.regions.pop()

    @contextmanager
    def emitting_where_defined(self, values):
        """Emit into the innermost open region that defines all of `values` (the function's
        body when none is defined in a region), as if the regions opened since were not: a
        value computed from them there is visible to every region still open."""
        homes = {id(self.home.get(v.id)) for v in values}
        k = max((i for i, r in enumerate(self.regions) if id(r) in homes), default=0)
        inner = self.regions[k + 1:]
        del self.regions[k + 1:]
        try:
            yield
        finally:
            self.regions.extend(inner)

    def check_scope(self, values) -> None:
        """Raise ScopeError if a value defined in a closed region is used outside it."""
        for v in values:
            r = self.home.get(v.id)
            if r is not None and not any(r is o for o in self.regions):
                raise ScopeError(v, r)

    def param(self, aval: Aval, name: str | None = None, weak: bool = False) -> Value:
        v = Value(Aval(tuple(aval[0]), np.dtype(aval[1])), name, weak=weak)
        self.fn.body.params.append(v)
        return v

    def new_value(self, aval: Aval, name: str | None = None, weak: bool = False) -> Value:
        """A value not defined by an op (a region parameter); `weak`: a Python number."""
        return Value(Aval(tuple(aval[0]), np.dtype(aval[1])), name, weak=weak)

    def emit(self, prim: Primitive, inputs, params, out_avals, regions=(), loc=None) -> list:
        self.n_ops += 1
        if self.n_ops > MAX_TRACE_OPS:
            raise _too_large(self)
        outs = [Value(a) for a in out_avals]
        if len(self.regions) > 1:
            for v in outs:
                self.home[v.id] = self.region
        op = ir.Op(prim, inputs, params, outs, regions,
                   loc if loc is not None else (self.loc() if self.loc else None))
        self.region.ops.append(op)
        return outs

    def const(self, value) -> Value:
        # A copy: the user may write into their array after this use (Python semantics).
        arr = np.array(value, copy=True)
        return self.emit(constant_p, [], {"value": arr}, [Aval(arr.shape, arr.dtype)])[0]

    def lift(self, a) -> Value:
        if isinstance(a, ir.Value):
            return a
        data = getattr(a, "_data", None)  # an eager Tensor captured by the function
        return self.const(data if isinstance(data, np.ndarray) else a)

    def bind(self, prim: Primitive, args, params):
        if prim.decompose is not None:  # a composite: the IR holds its parts
            return prim.decompose(*args, **params)
        ins = [self.lift(a) for a in args]
        if self.home:
            self.check_scope(ins)
        try:
            out = prim.shape(*[v.aval for v in ins], **params)
        except LLGradError as e:
            if e.loc is None:
                e.loc = self.loc() if self.loc else None
                e.args = (_compose(e.what, e.loc, e.fix),)  # where, then how to fix
            raise
        avals = list(out) if prim.multiple_results else [out]
        if prim.family == "elementwise":
            shape = avals[0].shape
            ins = [v if v.aval.shape == shape else self._broadcast(v, shape) for v in ins]
        outs = self.emit(prim, ins, params, avals)
        return tuple(outs) if prim.multiple_results else outs[0]

    def _broadcast(self, v: Value, shape) -> Value:
        return self.emit(broadcast_to_p, [v], {"shape": tuple(shape)}, [Aval(shape, v.aval.dtype)])[0]


# Note [A cap on trace size]
# A loop that runs as Python while tracing (a function without source, a loop whose body
# uses its index as a Python value) adds one copy of its body to the trace per iteration: a
# loop of 10**6 steps grew the trace until the machine ran out of memory, and anything near
# the cap would take minutes to compile. Past MAX_TRACE_OPS operations the trace stops with
# an error at the user's line. Legitimate programs are far below it: the corpus's largest
# trace holds a few hundred ops, an unrolled 40-step LSTM about two thousand.
MAX_TRACE_OPS = 200_000


def _too_large(b: Builder) -> LLGradError:
    return LLGradError(
        f"the trace of {b.fn.name} has grown past {MAX_TRACE_OPS:,} operations, most likely a "
        f"long loop that runs as Python at trace time (unrolled) instead of being compiled as "
        f"one loop; compiling it would take minutes and the trace may exhaust memory",
        loc=b.loc() if b.loc else None,
        fix="define the function in a .py file (a function without source cannot have its "
        "loops staged), and keep the loop's body free of what forces unrolling (see the "
        "UnrollWarning), or run it eagerly with llgrad's Tensor API")
