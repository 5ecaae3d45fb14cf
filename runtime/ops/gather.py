"""Gathers along an axis, built on the indexing primitives: gather (take_along_axis; one eager
node, PyTorch's GatherBackward0, decomposed to getitem for the compiler), its transpose
put_along_axis_add (a scatter_add), take, and numpy's repeat / PyTorch's repeat_interleave.

Indices given as numpy arrays are constants and are bounds-checked here, where numpy would
raise; traced indices are not checked (the compiled gather does not check bounds either).
"""
from __future__ import annotations

import numpy as np

from llgrad.runtime.aval import Aval, ShapeError, normalize_axes
from llgrad.runtime.errors import LLGradError
from llgrad.runtime.ops import elementwise as ew
from llgrad.runtime.ops._util import as_operand, dtype_of, shape_of
from llgrad.runtime.ops.index import getitem_p, scatter_add_p
from llgrad.runtime.prim import Primitive, bind, is_value, register


def _along_key(xshape, idx, axis):
    """The getitem key and index operands of x[i0, .., idx, .., iN]: aranges broadcast along
    every axis but `axis`, which takes idx (numpy's take_along_axis)."""
    nd = len(xshape)
    arrays = []
    for d in range(nd):
        if d == axis:
            arrays.append(idx)
        else:
            arrays.append(np.arange(xshape[d]).reshape([-1 if i == d else 1 for i in range(nd)]))
    return tuple(("a", d) for d in range(nd)), arrays


def _gather_shape(x, idx, axis):
    if len(x.shape) != len(idx.shape):
        raise ShapeError(f"take_along_axis: indices of shape {list(idx.shape)} need as many "
                         f"dimensions as the array, of shape {list(x.shape)}")
    if idx.dtype.kind not in "iu":
        raise ShapeError(f"take_along_axis: indices must be integers, got {idx.dtype}")
    other = [d if i != axis else 1 for i, d in enumerate(x.shape)]
    try:
        shape = np.broadcast_shapes(tuple(other), tuple(
            d if i != axis else 1 for i, d in enumerate(idx.shape)))
    except ValueError:
        raise ShapeError(f"take_along_axis: indices of shape {list(idx.shape)} do not "
                         f"broadcast against the array's shape {list(x.shape)}") from None
    return Aval(tuple(d if i != axis else idx.shape[axis] for i, d in enumerate(shape)),
                x.dtype)


def put_along_axis_add(g, idx, axis, shape):
    """zeros(shape) with g added at the positions take_along_axis(., idx, axis) reads."""
    key, arrays = _along_key(shape, idx, axis)
    return bind(scatter_add_p, g, *arrays, key=key, shape=tuple(shape))


def _gather_decompose(x, idx, axis):
    key, arrays = _along_key(shape_of(x), idx, axis)
    return bind(getitem_p, x, *arrays, key=key)


gather_p = register(Primitive(
    "gather", "index", lambda x, idx, axis: np.take_along_axis(x, idx, axis), _gather_shape,
    (lambda g, out, x, idx, axis: put_along_axis_add(g, idx, axis, shape_of(x)), None),
    saves=(1,), decompose=_gather_decompose, node_name="GatherBackward0"))


# ---- the ops API ------------------------------------------------------------------------------
def _check_bounds(idx, n, what):
    """Constant indices out of [-n, n) raise as numpy does; traced ones pass (unchecked)."""
    if is_value(idx):
        return
    bad = (idx < -n) | (idx >= n)
    if np.any(bad):
        raise LLGradError(f"{what}: index {int(np.asarray(idx)[bad].flat[0])} is out of "
                          f"bounds for an axis of size {n}",
                          fix="check the indices, or use mode='wrap' / 'clip'")


def _index_operand(indices):
    if getattr(type(indices), "_lg_level", None) == 0:  # an eager Tensor: its (integer)
        indices = type(indices)._lg_concrete(indices)   # data, no graph edge (PyTorch)
    idx = as_operand(indices)
    if dtype_of(idx).kind not in "iu":
        raise ShapeError(f"indices must be integers, got {dtype_of(idx)}",
                         fix="convert them with .astype(int)")
    return idx


def take_along_axis(x, indices, axis):
    """numpy's take_along_axis (PyTorch's take_along_dim / gather on equal ranks)."""
    x, idx = as_operand(x), _index_operand(indices)
    if axis is None:
        from llgrad.runtime.ops.shape import reshape
        x, idx, axis = reshape(x, (-1,)), reshape(idx, (-1,)), 0
    axis = normalize_axes(axis, len(shape_of(x)))[0]
    n = shape_of(x)[axis]
    _check_bounds(idx, n, "take_along_axis")
    if not is_value(idx):
        idx = np.where(idx < 0, idx + n, idx).astype(np.int64)
    if not is_value(x) and not is_value(idx):
        return np.take_along_axis(x, idx, axis)
    return bind(gather_p, x, idx, axis=axis)


def take(x, indices, axis=None, mode="raise"):
    """numpy's take: elements of x (flattened when axis is None) at `indices` along `axis`."""
    from llgrad.runtime.ops.index import getitem
    from llgrad.runtime.ops.shape import reshape
    x, idx = as_operand(x), _index_operand(indices)
    if axis is None:
        x, axis = reshape(x, (-1,)), 0
    axis = normalize_axes(axis, len(shape_of(x)))[0]
    n = shape_of(x)[axis]
    if mode == "wrap":
        idx = ew.remainder(idx, n) if is_value(idx) else np.mod(idx, n)
    elif mode == "clip":
        idx = ew.clip(idx, 0, n - 1) if is_value(idx) else np.clip(idx, 0, n - 1)
    elif mode == "raise":
        _check_bounds(idx, n, "take")
    else:
        raise ValueError(f"take: mode must be 'raise', 'wrap' or 'clip', got {mode!r}")
    return getitem(x, (slice(None),) * axis + (idx,))


def repeat(x, repeats, axis=None):
    """numpy's repeat (PyTorch's repeat_interleave): each element `repeats` times along `axis`
    (flattened when None); `repeats` is an int or one static count per element."""
    from llgrad.runtime.ops.index import getitem
    from llgrad.runtime.ops.shape import broadcast_to, reshape
    x = as_operand(x)
    if axis is None:
        x, axis = reshape(x, (-1,)), 0
    shape = shape_of(x)
    axis = normalize_axes(axis, len(shape))[0]
    if is_value(repeats):
        raise ShapeError("repeat: the counts must be static (Python ints or a numpy array): "
                         "the result's shape depends on them")
    reps = np.asarray(repeats)
    if reps.ndim == 0 or reps.size == 1:
        r = int(reps.reshape(()))
        if r < 0:
            raise ShapeError(f"repeat: negative count {r}")
        up = shape[:axis + 1] + (1,) + shape[axis + 1:]
        wide = broadcast_to(reshape(x, up), shape[:axis + 1] + (r,) + shape[axis + 1:])
        return reshape(wide, shape[:axis] + (shape[axis] * r,) + shape[axis + 1:])
    if reps.shape != (shape[axis],) or np.any(reps < 0):
        raise ShapeError(f"repeat: {reps.size} counts for an axis of size {shape[axis]}",
                         fix="give one non-negative count per element, or a single int")
    src = np.repeat(np.arange(shape[axis]), reps)
    return getitem(x, (slice(None),) * axis + (src,))
