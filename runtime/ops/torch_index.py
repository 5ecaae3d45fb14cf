"""PyTorch's gather/scatter family along a dimension: gather, scatter, scatter_add,
index_select, index_add, and topk built on them.

scatter_along (PyTorch's ScatterBackward0), scatter_along_add (ScatterAddBackward0) and
index_select (IndexSelectBackward0) are composite primitives: one eager node each, and for the
compiler a `decompose` into the indexing primitives (index_put, scatter_add, getitem), which
have lowerings. The gathers and scatters follow PyTorch's shapes: `index` has the input's
number of dimensions and, along every other dimension, at most the input's (and src's) size;
position (i, .., index[i, .., k], .., k) of the input meets element (i, .., k) of src/out.
Indices are integers within bounds (no negative ones), as PyTorch requires; constant indices
are checked here, traced ones are not (the compiled getitem does not check them either).
"""
from __future__ import annotations

from collections import namedtuple

import numpy as np

from llgrad.runtime.aval import Aval, ShapeError, normalize_axes
from llgrad.runtime.errors import DTypeError, IndexingError
from llgrad.runtime.ops import elementwise as ew
from llgrad.runtime.ops._util import as_operand, dtype_of, shape_of
from llgrad.runtime.ops.gather import _index_operand, gather_p
from llgrad.runtime.ops.index import (
    _index_put_vjp, getitem_p, index_put_p, scatter_add_p, slice_axis,
)
from llgrad.runtime.prim import Primitive, bind, is_value, register

ValuesIndices = namedtuple("ValuesIndices", ["values", "indices"])


def _key(ishape, idx, axis):
    """The getitem key and index operands reaching position (.., idx[p], ..) of the input for
    each position p of an index of shape `ishape`: idx along `axis`, p's own coordinate
    (an arange) along the others."""
    nd = len(ishape)
    arrays = [idx if d == axis else
              np.arange(ishape[d]).reshape([-1 if i == d else 1 for i in range(nd)])
              for d in range(nd)]
    return tuple(("a", d) for d in range(nd)), arrays


def _scatter_shape(x, idx, src, axis):
    if len(idx.shape) != len(x.shape) or len(src.shape) != len(x.shape):
        raise ShapeError(f"scatter: index and src need the input's {len(x.shape)} dimensions, "
                         f"got index {list(idx.shape)} and src {list(src.shape)}")
    if tuple(idx.shape) != tuple(src.shape) or any(
            i > n for d, (i, n) in enumerate(zip(idx.shape, x.shape)) if d != axis):
        raise ShapeError(f"scatter: index of shape {list(idx.shape)} does not fit src "
                         f"{list(src.shape)} and input {list(x.shape)} (dim {axis})")
    return Aval(x.shape, x.dtype)


def _scatter_add_impl(x, idx, src, axis):
    out = x.copy()
    np.add.at(out, tuple(_key(idx.shape, idx, axis)[1]), src)
    return out


def _scatter_impl(x, idx, src, axis):
    out = x.copy()
    out[tuple(_key(idx.shape, idx, axis)[1])] = src  # numpy: the last write wins
    return out


def _gathered(g, idx, axis):
    key, arrays = _key(shape_of(idx), idx, axis)
    return bind(getitem_p, g, *arrays, key=key)


def _scatter_vjp(i):
    def rule(g, out, x, idx, src, axis):
        key, arrays = _key(shape_of(idx), idx, axis)
        return _index_put_vjp(i, g, out, x, src, *arrays, key=key)
    return rule


scatter_along_add_p = register(Primitive(
    "scatter_along_add", "index", _scatter_add_impl, _scatter_shape,
    (lambda g, out, x, idx, src, axis: g, None,
     lambda g, out, x, idx, src, axis: _gathered(g, idx, axis)),
    decompose=lambda x, idx, src, axis: ew.add(x, bind(
        scatter_add_p, src, *_key(shape_of(idx), idx, axis)[1],
        key=_key(shape_of(idx), idx, axis)[0], shape=shape_of(x))),
    node_name="ScatterAddBackward0"))

scatter_along_p = register(Primitive(
    "scatter_along", "index", _scatter_impl, _scatter_shape,
    (_scatter_vjp(0), None, _scatter_vjp(1)), saves=(1,),  # of x and src only the shapes
    decompose=lambda x, idx, src, axis: bind(
        index_put_p, x, src, *_key(shape_of(idx), idx, axis)[1],
        key=_key(shape_of(idx), idx, axis)[0]),
    node_name="ScatterBackward0"))


def _select_key(axis):
    return (("s", None, None, None),) * axis + (("a", 0),)


def _index_select_shape(x, idx, axis):
    if len(idx.shape) != 1:
        raise ShapeError(f"index_select: index must be 1-D, got shape {list(idx.shape)}")
    return Aval(x.shape[:axis] + idx.shape + x.shape[axis + 1:], x.dtype)


index_select_p = register(Primitive(
    "index_select", "index", lambda x, idx, axis: np.take(x, idx, axis), _index_select_shape,
    (lambda g, out, x, idx, axis: bind(scatter_add_p, g, idx, key=_select_key(axis),
                                       shape=shape_of(x)), None),
    decompose=lambda x, idx, axis: bind(getitem_p, x, idx, key=_select_key(axis)),
    node_name="IndexSelectBackward0"))


# ---- the ops API (PyTorch's argument order: input, dim, index, ...) ---------------------------
def _dim(x, dim, what):
    nd = len(shape_of(x))
    if nd == 0:
        raise ShapeError(f"{what}: the input must have at least one dimension")
    return normalize_axes(dim, nd)[0]


def _torch_index(index, n, what, axis):
    """Integer indices within [0, n) (checked when constant), as PyTorch requires."""
    idx = _index_operand(index)  # (refuses non-integer indices)
    if not is_value(idx):
        idx = idx.astype(np.int64, copy=False)
        bad = (idx < 0) | (idx >= n)
        if np.any(bad):
            raise IndexingError(f"{what}: index {int(idx[bad].flat[0])} is out of bounds for "
                                f"dimension {axis} with size {n}")
    return idx


def _fit(x, ishape, axis, what, name):
    """x cut to `ishape` along every dimension but `axis` (PyTorch reads only that part)."""
    xs = shape_of(x)
    if len(xs) != len(ishape):
        raise ShapeError(f"{what}: index of shape {list(ishape)} needs {name}'s {len(xs)} "
                         f"dimensions")
    for d, (i, n) in enumerate(zip(ishape, xs)):
        if d != axis and i != n:
            if i > n:
                raise ShapeError(f"{what}: index of shape {list(ishape)} is larger than "
                                 f"{name} of shape {list(xs)} in dimension {d}")
            x = slice_axis(x, d, 0, i)
    return x


def gather_dim(input, dim, index):
    """out[i][j] = input[index[i][j]][j] (dim 0): PyTorch's gather (GatherBackward0)."""
    x = as_operand(input)
    axis = _dim(x, dim, "gather")
    idx = _torch_index(index, shape_of(x)[axis], "gather", axis)
    return bind(gather_p, _fit(x, shape_of(idx), axis, "gather", "the input"), idx, axis=axis)


def _src(x, src, value, ishape, axis, what):
    if (src is None) == (value is None):
        raise TypeError(f"{what}: give exactly one of src (a tensor) and value (a number)")
    if value is not None:
        return np.full(ishape, value, dtype_of(x))
    src = as_operand(src)
    if dtype_of(src) != dtype_of(x):
        raise DTypeError(f"{what}(): Expected self.dtype to be equal to src.dtype "
                         f"({dtype_of(x)} and {dtype_of(src)})", fix="cast src first")
    if len(shape_of(src)) != len(ishape) or any(
            i > n for i, n in zip(ishape, shape_of(src))):
        raise ShapeError(f"{what}: index of shape {list(ishape)} is larger than src of shape "
                         f"{list(shape_of(src))}")
    return _fit(src, ishape, -1, what, "src") if ishape != shape_of(src) else src


def scatter_dim(input, dim, index, src=None, value=None):
    """A copy of input with src (or the number `value`) written at the positions `index`
    names along `dim`: out[index[i][j]][j] = src[i][j] (dim 0). Where an index repeats, the
    last write wins (PyTorch leaves it undefined)."""
    x = as_operand(input)
    axis = _dim(x, dim, "scatter")
    idx = _torch_index(index, shape_of(x)[axis], "scatter", axis)
    _fit(x, shape_of(idx), axis, "scatter", "the input")  # shape check only
    s = _src(x, src, value, shape_of(idx), axis, "scatter")
    return bind(scatter_along_p, x, idx, s, axis=axis)


def scatter_add_dim(input, dim, index, src):
    """A copy of input with src added at the positions `index` names along `dim` (repeated
    indices add up): out[index[i][j]][j] += src[i][j] (dim 0)."""
    x = as_operand(input)
    axis = _dim(x, dim, "scatter_add")
    idx = _torch_index(index, shape_of(x)[axis], "scatter_add", axis)
    _fit(x, shape_of(idx), axis, "scatter_add", "the input")
    s = _src(x, src, None, shape_of(idx), axis, "scatter_add")
    return bind(scatter_along_add_p, x, idx, s, axis=axis)


def index_select(input, dim, index):
    """The slices of input at `index` (1-D) along `dim`."""
    x = as_operand(input)
    axis = _dim(x, dim, "index_select")
    idx = _torch_index(index, shape_of(x)[axis], "index_select", axis)
    if len(shape_of(idx)) == 0:  # a 0-d index selects one slice, keeping the dimension
        from llgrad.runtime.ops.shape import reshape
        idx = reshape(idx, (1,))
    return bind(index_select_p, x, idx, axis=axis)


def index_add_dim(input, dim, index, source, alpha=1):
    """input plus alpha * source's slices added at `index` (1-D) along `dim`."""
    x = as_operand(input)
    axis = _dim(x, dim, "index_add")
    idx = _torch_index(index, shape_of(x)[axis], "index_add", axis)
    source = as_operand(source)
    if dtype_of(source) != dtype_of(x):
        raise DTypeError(f"index_add(): self ({dtype_of(x)}) and source ({dtype_of(source)}) "
                         f"must have the same scalar type", fix="cast source first")
    if alpha != 1:
        source = ew.mul(source, alpha)
    want = shape_of(x)[:axis] + shape_of(idx) + shape_of(x)[axis + 1:]
    if shape_of(source) != want:
        raise ShapeError(f"index_add: source of shape {list(shape_of(source))}, expected "
                         f"{list(want)}")
    added = bind(scatter_add_p, source, idx, key=_select_key(axis), shape=shape_of(x))
    return ew.add(x, added)


def topk(input, k, dim=-1, largest=True, sorted=True):
    """The k largest (smallest with largest=False) elements along `dim` and their indices,
    in order (also for sorted=False, which allows any order). NaN counts as the largest."""
    from llgrad.runtime.ops.sort import argsort
    x = as_operand(input)
    if not shape_of(x):
        from llgrad.runtime.ops.shape import reshape
        x = reshape(x, (1,))
    axis = normalize_axes(dim, len(shape_of(x)))[0]
    n = shape_of(x)[axis]
    if not 0 <= k <= n:
        raise IndexingError(f"topk: k ({k}) is out of range for dimension {axis} of size {n}")
    idx = slice_axis(argsort(x, axis, descending=largest), axis, 0, k)
    values = bind(gather_p, x, _index_operand(idx), axis=axis)
    if not shape_of(input):
        from llgrad.runtime.ops.shape import reshape
        values, idx = reshape(values, ()), reshape(idx, ())
    return ValuesIndices(values, idx)
