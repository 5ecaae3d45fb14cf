"""Python data to values: a (nested) list or tuple holding llgrad values and numbers becomes one
value, with the dtype and shape numpy would give (`np.array([a, 1.0, b])`, `np.sum([1, a*a])`).

numpy's own conversion (`np.asarray`) would call each value's `__array__`, losing the graph;
these build the array with `stack` instead. numpy itself decides the result's dtype and shape,
run on stand-ins of the values (zeros of the same shape and dtype; numpy scalars for 0-d
values, as indexing and reductions give in plain numpy), so both are numpy's exactly.
"""
from __future__ import annotations

import numpy as np

from llgrad.runtime import ops
from llgrad.runtime.aval import aval_str
from llgrad.runtime.errors import DTypeError, ShapeError, user_loc
from llgrad.runtime.ops._util import dtype_of, shape_of
from llgrad.runtime.prim import is_value


def holds_value(obj) -> bool:
    """True for a value, or a list/tuple with a value somewhere inside."""
    if is_value(obj):
        return True
    return type(obj) in (list, tuple) and any(holds_value(o) for o in obj)


def stand_in(obj):
    """`obj` with each value replaced by zeros of its shape and dtype (0-d: a numpy scalar)."""
    if is_value(obj):
        z = np.zeros(shape_of(obj), dtype_of(obj))
        return z[()] if z.ndim == 0 else z
    if type(obj) in (list, tuple):
        return [stand_in(o) for o in obj]
    return obj


def _result(fn, *args, **kwargs) -> np.ndarray:
    """numpy's own `fn` on stand-ins: the result's dtype and shape, or numpy's error at the
    user's line."""
    try:
        out = fn(*stand_in(list(args)), **kwargs)
    except (ValueError, TypeError) as e:
        raise ShapeError(f"{getattr(fn, '__name__', fn)}: {e} (got "
                         f"{', '.join(map(_describe, args))})",
                         loc=user_loc()) from None
    out = np.asarray(out)
    if out.dtype.kind not in "biuf":
        raise DTypeError(f"{getattr(fn, '__name__', fn)} would make an array of dtype "
                         f"{out.dtype} from llgrad values", loc=user_loc(),
                         fix="use numbers and arrays of numbers only")
    return out


def _describe(obj) -> str:
    """`f64[4]`, `[f64[4], 2.0]`: the operands of a failed conversion, for its message."""
    if is_value(obj) or isinstance(obj, np.ndarray):
        return aval_str(shape_of(obj), dtype_of(obj))
    if type(obj) in (list, tuple):
        return "[" + ", ".join(_describe(o) for o in obj) + "]"
    return repr(obj)


def array_from(obj, dtype=None):
    """`np.array(obj, dtype)` for a value or a nested list/tuple of values and numbers."""
    if is_value(obj):
        return obj if dtype is None else ops.astype(obj, dtype)
    dt = _result(np.array, obj, dtype=dtype).dtype
    return _build(obj, dt)


def _build(obj, dt):
    if is_value(obj):
        return ops.astype(obj, dt)
    if type(obj) in (list, tuple) and holds_value(obj):
        return ops.stack([_build(o, dt) for o in obj], 0)
    return np.asarray(obj, dtype=dt)


def numpy_operands(fn, arrays, **kwargs) -> list:
    """The sequence `arrays` of a numpy function such as np.stack, each element converted to
    the dtype numpy's `fn(arrays, **kwargs)` would give (Python numbers become arrays)."""
    arrays = list(arrays)
    dt = _result(fn, arrays, **kwargs).dtype
    return [array_from(a, dt) if holds_value(a) else np.asarray(a, dtype=dt) for a in arrays]
