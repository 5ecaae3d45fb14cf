"""Slices whose length depends on a traced value (`L[i, :j]`, `x[i + 1:]` with i, j loop
counters in a staged loop): `Padded` values, and `getitem`/`setitem` for keys with traced
slice bounds (runtime/ops/index.py sends them here). What a Padded supports is in
runtime/padded_ops.py.

Note [Slices of loop-dependent length]
The IR has static shapes, but in a staged loop the length of `L[i, :j]` is known only at run
time. Such a slice is a Padded value: `data`, the slice padded to a static maximal extent
along its dynamic axes (the axis size, or less: `x[i:i + 3]` has at most 3 entries), read by
`dynamic_window` (runtime/ops/window.py), which puts 0 past the length; and per dynamic axis
its run-time length. Operations see numpy's semantics where the padding cannot change the
result, and an error where it could:
- elementwise ops apply to the padded data; `pad` tracks the padding's value while it is a
  known number (0 for a fresh slice, f(0) after a unary f);
- sums, dot/matmul contractions and norms mask the padding to 0 (`where(k < length, ...)`)
  unless it is known to be 0; prod masks it with 1, max/min with -inf/+inf (and an empty
  slice fails as in numpy), mean divides the masked sum by the run-time count;
- lengths numpy requires to agree (operands of `+`, the two sides of a contraction) are
  compared: equal when built by the same expression (`_key`), else a `check` op raises
  numpy's ValueError at run time;
- what needs the real shape (`len()`, `.shape`, reshape, returning or printing it, a numpy
  function not supported) raises ShapeError naming the line.
`x[i + 1:] = v` is a `window_update`. Nothing new is in the IR but the two primitives: AD
(their VJPs), loop tapes, passes and codegen see ordinary ops on arrays of static shape, and
one compiled loop body serves every iteration.
The alternative, dynamic shapes in the IR (views of run-time length), would need symbolic
extents in every shape rule, the verifier, the AD's zero cotangents, ragged tape rows, the
planner's static workspace and every lowering's loop bounds. Padding costs the work of the
maximal extent, the window's copy, and a mask where the padding is not known to be 0.
Measured (`python -m benchmarks.dynamic_extents --compare`), against the same functions
written with scalar loops over exactly the run-time length, the code views of run-time
length would compile to: issue 12's Cholesky and solves at n = 50 run in 0.50 vs 0.46 ms
(index_put's copies of L dominate both) and compile in about 0.3 vs 0.2 s of CPU (0.7 vs
0.45 s with the gradient), flat in n; a bare triangular sum `x[:i] @ y[:i]` at n = 1000
takes 0.97 vs 0.23 ms (gradient 1.5 vs 0.6 ms).
"""
from __future__ import annotations

import numpy as np

from llgrad.runtime.arraylike import ArrayOperators
from llgrad.runtime.errors import ShapeError, UnsupportedError, user_loc
from llgrad.runtime.ops.index import _traced, has_traced_bounds
from llgrad.runtime.prim import is_value
from llgrad.runtime.promotion import NUMPY

_FIX = ("reduce it where it is made (np.sum, np.dot, @, np.max, np.mean, np.linalg.norm), "
        "combine it elementwise with values of the same length, or write it into an array "
        "(y[:j] = ...); use the slice's bounds (e.g. j) for its length")


class Padded(ArrayOperators):
    """A value of run-time length along the axes in `lengths` (axis -> (int64 value, key)):
    `data` holds it padded to a static extent; `pad` is the padding's value when known."""

    __slots__ = ("data", "lengths", "pad", "source", "loc")
    _lg_level = 2  # above IR values: every primitive applied to one comes here
    _lg_padded = True
    _lg_promotion = NUMPY
    _lg_weak = False

    def __init__(self, data, lengths: dict, pad=None, source=None, loc=None):
        self.data, self.lengths, self.pad = data, dict(sorted(lengths.items())), pad
        self.source = source  # the array it was sliced from (tracer/aliasing.py)
        self.loc = loc or user_loc()

    @property
    def _np_dtype(self):
        return self.data._np_dtype

    @property
    def dtype(self):
        return self.data._np_dtype

    @property
    def ndim(self) -> int:
        return len(self.data.shape)

    @property
    def masked(self) -> bool:
        """Whether a length is a mask's count of True (runtime/padded_masks.py)."""
        return any(key[0] == "mask" for _, key in self.lengths.values())

    def describe(self) -> str:
        from llgrad.runtime.aval import aval_str
        extents = [f"<={d}" if a in self.lengths else d for a, d in enumerate(self.data.shape)]
        where = f" (made at {self.loc})" if self.loc is not None else ""
        what = "a value selected by a boolean mask (x[mask]), of data-dependent length" \
            if self.masked else "a slice of loop-dependent length"
        return f"{what}, {aval_str(extents, self.dtype)}{where}"

    def refuse(self, use: str, shape: bool = True, loc=None):
        """The error for a use the padding could change, or that needs the real shape; for
        x[mask], the dynamic path's ConcretizationError (Note [Boolean masks of
        data-dependent length] in runtime/padded_masks.py)."""
        what = f"{use} needs the shape of {self.describe()}, which is known only at run time" \
            if shape else f"{use} is not supported on {self.describe()}"
        if self.masked:
            from llgrad.runtime.errors import ConcretizationError
            from llgrad.runtime.padded_masks import MASK_FIX
            return ConcretizationError(what, loc=loc or user_loc(), fix=MASK_FIX)
        return (ShapeError if shape else UnsupportedError)(what, loc=loc or user_loc(),
                                                           fix=_FIX)

    @staticmethod
    def _lg_process(prim, args, params):
        from llgrad.runtime import padded_ops
        if prim.family == "elementwise":
            return padded_ops.elementwise(prim, args, params)
        p = next(a for a in args if type(a) is Padded)
        raise p.refuse(f"`{prim.name}`", shape=False)

    def __repr__(self) -> str:
        return f"<{self.describe()}>"

    # -- what needs the real shape ------------------------------------------------------------
    @property
    def shape(self):
        raise self.refuse("`.shape`")

    @property
    def size(self):
        raise self.refuse("`.size`")

    def __len__(self):
        raise self.refuse("len()")

    def __iter__(self):
        raise self.refuse("iterating over it")

    def __bool__(self):
        raise self.refuse("bool()")

    def __float__(self):
        raise self.refuse("float()")

    def __int__(self):
        raise self.refuse("int()")

    def __index__(self):
        raise self.refuse("its use as an index")

    def __array__(self, dtype=None, copy=None):
        raise self.refuse("conversion to a numpy array")

    def __str__(self):
        raise self.refuse("printing it")

    def __format__(self, spec):
        raise self.refuse("formatting it")

    def __setitem__(self, key, value):
        raise self.refuse("assigning into it", shape=False)

    def __getattr__(self, name):
        if not name.startswith("_") and hasattr(np.ndarray, name):
            raise self.refuse(f"`.{name}`", shape=False)
        raise AttributeError(f"'Padded' object has no attribute {name!r}")

    # -- supported: runtime/padded_ops.py -------------------------------------------------------
    def __matmul__(self, other):
        from llgrad.runtime import padded_ops
        return padded_ops.contract(self, other, "matmul")

    def __rmatmul__(self, other):
        from llgrad.runtime import padded_ops
        return padded_ops.contract(other, self, "matmul")

    def __getitem__(self, key):
        from llgrad.runtime import padded_ops
        return padded_ops.getitem(self, key)

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        from llgrad.runtime import padded_ops
        return padded_ops.numpy_call(self, ufunc if method == "__call__" else None, ufunc,
                                     inputs, kwargs, method)

    def __array_function__(self, func, types, args, kwargs):
        from llgrad.runtime import padded_ops
        return padded_ops.numpy_call(self, func, func, args, kwargs, "__call__")

    def _method(name):  # noqa: N805 - a factory of methods
        def method(self, *args, **kwargs):
            return getattr(np, name)(self, *args, **kwargs)
        method.__name__ = name
        return method

    sum, mean, max, min, prod, var, std, dot, transpose = map(
        _method, ("sum", "mean", "max", "min", "prod", "var", "std", "dot", "transpose"))
    del _method

    @property
    def T(self):
        return np.transpose(self)

    def astype(self, dtype, *args, **kwargs):
        from llgrad.runtime import ops
        return ops.astype(self, dtype)

    def copy(self):
        return Padded(self.data, self.lengths, self.pad, None, self.loc)  # not a view

    # In-place statements: numpy writes through the view into the array sliced, which an
    # immutable value cannot do; the tracer's hook refuses them where another name would see
    # it (Note [In-place updates are by value]); `y[:j] += v` (converted to a setitem of
    # y[:j] + v) passes. The hook is reached through the IR value class of `data`.
    def _inplace(self, fn, other, what):
        return type(self.data)._inplace(self, fn, other, what)

    def __iadd__(self, o): return self._inplace(type(self).__add__, o, "+=")
    def __isub__(self, o): return self._inplace(type(self).__sub__, o, "-=")
    def __imul__(self, o): return self._inplace(type(self).__mul__, o, "*=")
    def __itruediv__(self, o): return self._inplace(type(self).__truediv__, o, "/=")
    def __ipow__(self, o): return self._inplace(type(self).__pow__, o, "**=")


# ---- keys with traced slice bounds --------------------------------------------------------------
def _split(x_ndim: int, key) -> tuple[tuple, list]:
    """`key` with each slice of traced bounds replaced by `:`, and those slices as
    (axis of the static key's result, start, stop, step)."""
    key = key if type(key) is tuple else (key,)
    real = sum(1 for k in key if k is not None and k is not Ellipsis)
    static, dyn, out_axis = [], [], 0
    for k in key:
        if k is None:
            static.append(k)
            out_axis += 1
        elif k is Ellipsis:
            static.append(k)
            out_axis += x_ndim - real
        elif type(k) is slice:
            if has_traced_bounds(k):
                if _traced(k.step):
                    raise UnsupportedError("a traced slice step is not supported",
                                           loc=user_loc(), fix="use a Python int step")
                dyn.append((out_axis, k.start, k.stop, 1 if k.step is None else int(k.step)))
                k = slice(None)
            static.append(k)
            out_axis += 1
        elif _integer(k):
            static.append(k)
        else:
            raise UnsupportedError(
                "an index array or mask next to a slice whose bounds are traced values is "
                "not supported", loc=user_loc(),
                fix="index with integers and slices only, or split the indexing in two steps")
    return tuple(static), dyn


def _integer(k) -> bool:
    """A Python/numpy integer or a 0-d integer value (an index that removes an axis)."""
    from llgrad.runtime.ops._util import dtype_of, shape_of
    if is_value(k):
        return shape_of(k) == () and dtype_of(k).kind in "iu"
    return isinstance(k, (int, np.integer)) and not isinstance(k, (bool, np.bool_))


def _trivial(key) -> bool:
    return all(type(k) is slice and k == slice(None) for k in key)


def getitem(x, key) -> Padded:
    """`x[key]`, some slice of key with traced bounds (Note [Slices of loop-dependent
    length])."""
    from llgrad.runtime import ops
    from llgrad.runtime.ops._util import as_operand, shape_of
    from llgrad.runtime.ops.window import dynamic_window_p, slice_window
    from llgrad.runtime.prim import bind
    x = as_operand(x)
    static, dyn = _split(len(shape_of(x)), key)
    y = x if _trivial(static) else ops.getitem(x, static)
    lengths = {}
    for axis, start, stop, step in dyn:
        first, length, size = slice_window(start, stop, step, shape_of(y)[axis])
        y = bind(dynamic_window_p, y, first, length, axis=axis, size=size, stride=step)
        lengths[axis] = (length, _key(length))
    return Padded(y, lengths, pad=0, source=x)


def setitem(x, key, v):
    """`x[key] = v` (functional), some slice of key with traced bounds (a window_update per
    such axis, nested for several) or v a Padded (Note [Slices of loop-dependent length])."""
    from llgrad.runtime import ops
    from llgrad.runtime.ops._util import dtype_of, shape_of
    from llgrad.runtime.ops.window import slice_window
    from llgrad.runtime.padded_ops import fit_value
    static, dyn = _split(len(shape_of(x)), key)
    base = x if _trivial(static) else ops.getitem(x, static)
    target = list(shape_of(base))
    windows = []
    for axis, start, stop, step in dyn:
        first, length, size = slice_window(start, stop, step, target[axis])
        windows.append((axis, first, (length, _key(length)), size, step))
        target[axis] = size
    v = fit_value(v, dtype_of(x), tuple(target), {w[0]: w[2] for w in windows})
    if not windows:  # a static key, a Padded value: fitted to the key's static shape
        return ops.setitem(x, key, v)
    new = _write(base, windows, v)
    return new if _trivial(static) else ops.setitem(x, static, new)


def _write(base, windows, v):
    from llgrad.runtime.ops.window import dynamic_window_p, window_update_p
    from llgrad.runtime.prim import bind
    axis, first, (length, _), size, step = windows[0]
    if len(windows) > 1:
        inner = bind(dynamic_window_p, base, first, length, axis=axis, size=size, stride=step)
        v = _write(inner, windows[1:], v)
    return bind(window_update_p, base, v, first, length, axis=axis, stride=step)


def _key(v, depth: int = 0):
    """A structural key of an int expression: equal keys, equal values (two slices
    `x[i + 1:]` and `L[i + 1:, i]` compute their lengths by the same ops)."""
    if not is_value(v):
        return ("c", int(v))
    op = getattr(v, "op", None)
    if op is None or depth > 32 or op.regions or op.prim.has_effect(op) or \
            any(i.aval.shape != () for i in op.inputs):
        return ("v", id(v))
    if op.prim.name == "constant":
        value = op.params["value"]
        return ("c", value.dtype.str, value.tobytes())
    params = tuple(sorted((k, repr(p)) for k, p in op.params.items()))
    return (op.prim.name, params, op.outputs.index(v),
            tuple(_key(i, depth + 1) for i in op.inputs))
