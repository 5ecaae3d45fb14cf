"""Windows whose length is known only at run time (issue 12): `dynamic_window` reads one, of
a static maximal extent, `window_update` writes one; `slice_window` turns a slice with traced
bounds into (start, length, extent) by numpy's rules. runtime/padded.py builds the values of
`x[:j]` (j a loop counter) on them; See Note [Slices of loop-dependent length] there.

Both primitives are total: an entry whose source (or destination) index falls outside the
array is skipped (reads give 0), so no start or length can reach outside an array.
"""
from __future__ import annotations

import numpy as np

from llgrad.runtime.aval import I64, Aval
from llgrad.runtime.errors import ShapeError
from llgrad.runtime.ops._util import dtype_of, shape_of
from llgrad.runtime.prim import Primitive, bind, is_value, register


def _positions(n: int, count: int, start, length, stride):
    """The index into an axis of size n of each window entry 0..count-1, and which entries
    are inside both the window's length and the axis."""
    k = np.arange(count)
    pos = int(start) + k * stride
    return pos, (k < int(length)) & (pos >= 0) & (pos < n)


def _window_impl(x, start, length, *, axis, size, stride):
    pos, ok = _positions(x.shape[axis], size, start, length, stride)
    out = np.zeros(x.shape[:axis] + (size,) + x.shape[axis + 1:], x.dtype)
    at = (slice(None),) * axis
    out[at + (np.nonzero(ok)[0],)] = x[at + (pos[ok],)]
    return out


def _window_update_impl(x, v, start, length, *, axis, stride):
    pos, ok = _positions(x.shape[axis], v.shape[axis], start, length, stride)
    out = x.copy()
    at = (slice(None),) * axis
    out[at + (pos[ok],)] = v[at + (np.nonzero(ok)[0],)]
    return out


def _check_bounds(start, length, name):
    for what, a in (("start", start), ("length", length)):
        if a.shape != () or a.dtype != I64:
            raise ShapeError(f"{name}: the {what} must be an int64 scalar, got "
                             f"{a.dtype}{list(a.shape)}")


def _window_shape(x, start, length, *, axis, size, stride):
    _check_bounds(start, length, "dynamic_window")
    if not 0 <= axis < len(x.shape) or size < 0 or stride == 0:
        raise ShapeError(f"dynamic_window: bad axis {axis}, size {size} or stride {stride} for "
                         f"shape {list(x.shape)}")
    return Aval(x.shape[:axis] + (size,) + x.shape[axis + 1:], x.dtype)


def _window_update_shape(x, v, start, length, *, axis, stride):
    _check_bounds(start, length, "window_update")
    if len(v.shape) != len(x.shape) or v.dtype != x.dtype or not 0 <= axis < len(x.shape) or \
            any(a != b for i, (a, b) in enumerate(zip(x.shape, v.shape)) if i != axis):
        raise ShapeError(f"window_update: cannot write {v.dtype}{list(v.shape)} into "
                         f"{x.dtype}{list(x.shape)} along axis {axis}")
    return Aval(x.shape, x.dtype)


def _zeros(shape, dtype):
    from llgrad.runtime.ops.shape import broadcast_to
    return broadcast_to(np.zeros((), dtype), shape)


def _window_vjp(g, out, x, start, length, *, axis, size, stride):
    return bind(window_update_p, _zeros(shape_of(x), dtype_of(g)), g, start, length,
                axis=axis, stride=stride)


def _window_update_vjp(i, g, out, x, v, start, length, *, axis, stride):
    if i == 0:  # the written entries are overwritten
        return bind(window_update_p, g, _zeros(shape_of(v), dtype_of(g)), start, length,
                    axis=axis, stride=stride)
    if i == 1:
        return bind(dynamic_window_p, g, start, length, axis=axis, size=shape_of(v)[axis],
                    stride=stride)
    return None


dynamic_window_p = register(Primitive(
    "dynamic_window", "index", _window_impl, _window_shape, (_window_vjp, None, None),
    saves=(1, 2), node_name="DynamicWindowBackward0"))

window_update_p = register(Primitive(
    "window_update", "index", _window_update_impl, _window_update_shape, _window_update_vjp,
    saves=lambda n: (2, 3), node_name="WindowUpdateBackward0"))


# ---- slices with traced bounds ----------------------------------------------------------------
def slice_window(start, stop, step: int, n: int) -> tuple:
    """(first index, length, maximal length) of `slice(start, stop, step)` on an axis of size
    n, as slice.indices computes them (negative bounds count from the end, bounds clamp),
    with start/stop traced ints or Python ints/None; the first two are int64 values."""
    from llgrad.runtime.ops.elementwise import add, astype, floor_divide, maximum, sub
    if step == 0:
        raise ValueError("slice step cannot be zero")
    lo, hi = (0, n) if step > 0 else (-1, n - 1)  # where clamped bounds land
    first = _bound(start, n, lo, hi, 0 if step > 0 else n - 1)
    last = _bound(stop, n, lo, hi, n if step > 0 else -1)
    span = sub(last, first) if step > 0 else sub(first, last)
    a = abs(step)
    length = maximum(floor_divide(add(span, np.int64(a - 1)), np.int64(a)), np.int64(0))
    return astype(first, I64), astype(length, I64), _max_length(start, stop, step, n)


def _bound(b, n, lo, hi, default):
    """One bound normalised as slice.indices does: None -> default, b < 0 -> b + n, then
    clamped into [lo, hi]."""
    from llgrad.runtime.ops.elementwise import add, astype, lt, maximum, minimum, where
    if b is None:
        return np.int64(default)
    if not is_value(b):
        return np.int64(slice(int(b), None).indices(n)[0] if lo == 0 else
                        slice(int(b), None, -1).indices(n)[0])
    b = astype(b, I64)
    hi_b = minimum(b, np.int64(hi))
    if getattr(b, "_lg_nonnegative", lambda: False)():
        return hi_b
    return where(lt(b, np.int64(0)), maximum(add(b, np.int64(n)), np.int64(lo)), hi_b)


def _max_length(start, stop, step: int, n: int) -> int:
    """A static bound on the length: the axis' count of steps, or fewer when start and stop
    differ by a constant (`x[i:i + 3]`: 3). With stop - start = c >= 0 (for step > 0) a
    negative stop implies a negative start, so wrapping only shortens the slice."""
    a = abs(step)
    most = -(-n // a)
    d = _offset_between(start, stop)
    if d is not None:
        span = d if step > 0 else -d
        if span >= 0:
            most = min(most, -(-span // a))
    return most


def _offset_between(a, b):
    """c if b == a + c for a constant c, with a and b traced ints built from one base by
    adding constants; else None."""
    if not (is_value(a) and is_value(b)):
        return None
    (ba, ca), (bb, cb) = _affine(a), _affine(b)
    return cb - ca if ba is bb else None


def _affine(v, depth=0):
    """(base, c) with v == base + c, following add/sub of constants and int casts."""
    op = getattr(v, "op", None)
    if op is None or depth > 16:
        return v, 0
    name = op.prim.name
    if name in ("add", "sub") and len(op.inputs) == 2:
        x, y = op.inputs
        c = _constant(y)
        if c is not None:
            base, k = _affine(x, depth + 1)
            return base, k + (c if name == "add" else -c)
        c = _constant(x)
        if c is not None and name == "add":
            base, k = _affine(y, depth + 1)
            return base, k + c
    if name in ("astype", "broadcast_to") and v.aval.shape == () and \
            op.inputs[0].aval.dtype.kind in "iu":
        return _affine(op.inputs[0], depth + 1)
    return v, 0


def _constant(v):
    """The Python int a scalar IR constant holds, else None."""
    op = getattr(v, "op", None)
    if op is None or op.prim.name != "constant":
        return None
    value = op.params["value"]
    return int(value) if value.shape == () and value.dtype.kind in "iu" else None
