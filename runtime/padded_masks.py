"""Boolean masks whose value is traced (`x[x > 0]`, `margins[margins > 0]`, `X[rows_ok]`): a
read gives a Padded value (runtime/padded.py) of data-dependent length, a write (`x[m] = v`,
`x[m] *= 2`) a select. runtime/ops/index.py sends keys holding such a mask here.

Note [Boolean masks of data-dependent length]
numpy's x[m] (m a boolean array of x's leading shape) is 1-d over m's True positions, in C
order, times x's trailing axes: its length is the count of True, known only at run time. It is
a Padded value like a slice of loop-dependent length (Note [Slices of loop-dependent length]),
so reductions, elementwise ops and contractions of it stay compiled:
- data: the selected rows compacted to the front, in order, then zeros, padded to m.size.
  Built from existing primitives: positions = cumsum(m) - 1 where m holds, the row count n (a
  dropped slot) where not; a scatter_add of x's rows (m's axes merged into one) to those
  positions in n + 1 rows; the first n rows. Its VJP follows from those primitives' rules (a
  gather of the cotangent at the positions), and the same code serves eager, the interpreter,
  codegen, staged loops and vmap. pad = 0.
- length: the count of True, keyed by the mask (`("mask", id(m))`), so `x[m] - y[m]` needs no
  run-time check that the lengths agree; values selected by different masks get one.
- `x[m] = v` (also `x[m] += v`, `x[m] *= 2`, which the tracer makes `x[m] = x[m] + v`) is
  where(m, v', x): v' is v broadcast when it has no axis for the selected rows (or one of
  extent 1), else v's rows gathered back at the positions (numpy's ValueError at run time when
  v's static row count is not the count of True).
What needs the real shape (len(), .shape, returning x[m], a numpy function Padded does not
support, a mask next to other index arrays) does not fail as for slices of loop-dependent
length: it raises ConcretizationError, which sends the call's signature to the dynamic path
exactly as before masks were staged (every call traced with concrete values, and one
DynamicPathWarning naming the line and how to stay compiled). A mask is ordinary numpy code
that ran before; an error would break programs that worked, only to make them fast.
"""
from __future__ import annotations

import numpy as np

from llgrad.runtime import ops
from llgrad.runtime.aval import I64
from llgrad.runtime.errors import ConcretizationError, IndexingError, ShapeError, user_loc
from llgrad.runtime.ops._util import as_operand, dtype_of, shape_of
from llgrad.runtime.prim import bind

MASK_FIX = ("reduce x[mask] where it is made (np.sum, np.mean, np.max, np.min, "
            "np.linalg.norm, @), combine it elementwise with values selected by the same mask, "
            "or write it back with x[mask] = ...; count the selected entries with "
            "np.count_nonzero(mask); or use np.where(mask, x, 0)")


def _unsupported(what: str) -> ConcretizationError:
    return ConcretizationError(f"indexing with a boolean mask {what} gives a shape that "
                               f"depends on the data", loc=user_loc(), fix=MASK_FIX)


def _split(x_shape: tuple, key):
    """(static key, mask axis, mask): `key` with the mask replaced by `:` per axis of it, and
    where the mask's first axis is in x[static key] (numpy puts the selected rows there)."""
    from llgrad.runtime.ops.index import has_traced_bounds, traced_mask
    from llgrad.runtime.padded import _integer
    key = key if type(key) is tuple else (key,)
    at = [j for j, k in enumerate(key) if traced_mask(k)]
    if len(at) > 1:
        raise _unsupported("next to another mask")
    if has_traced_bounds(key):
        raise _unsupported("next to a slice with traced bounds")
    j, m = at[0], key[at[0]]
    k = len(shape_of(m))
    for e in key:
        if not (e is None or e is Ellipsis or type(e) is slice or _integer(e) or e is m):
            raise _unsupported("next to an index array")
    real = sum(k if e is m else 1 for e in key if e is not None and e is not Ellipsis)
    axis = 0
    for e in key[:j]:
        axis += len(x_shape) - real if e is Ellipsis else int(e is None or type(e) is slice)
    return key[:j] + (slice(None),) * k + key[j + 1:], axis, m


def _trivial(key) -> bool:
    return all(type(k) is slice and k == slice(None) for k in key)


def _counts(x_shape: tuple, axis: int, m):
    """The mask flattened, its running count of True (int64) and its count of True; m's shape
    must be x's at `axis` (numpy's IndexError otherwise)."""
    mshape = shape_of(m)
    if tuple(x_shape[axis:axis + len(mshape)]) != tuple(mshape):
        bad = next(a for a in range(len(mshape)) if axis + a >= len(x_shape) or
                   x_shape[axis + a] != mshape[a])
        size = x_shape[axis + bad] if axis + bad < len(x_shape) else 0
        raise IndexingError(f"boolean index did not match indexed array along axis "
                            f"{axis + bad}; size of axis is {size} but size of corresponding "
                            f"boolean axis is {mshape[bad]}", loc=user_loc())
    flat = ops.reshape(m, (int(np.prod(mshape, dtype=np.int64)),))
    return flat, ops.cumsum(ops.astype(flat, I64)), ops.sum(flat, dtype=I64)


def getitem(x, key):
    """x[key] for a key holding one traced mask: a Padded value (Note [Boolean masks of
    data-dependent length])."""
    from llgrad.runtime.ops.index import scatter_add_p
    from llgrad.runtime.padded import Padded
    x = as_operand(x)
    static, axis, m = _split(shape_of(x), key)
    y = x if _trivial(static) else ops.getitem(x, static)
    flat, cum, total = _counts(shape_of(y), axis, m)
    n, k, shape = shape_of(flat)[0], len(shape_of(m)), list(shape_of(y))
    rows = ops.reshape(y, tuple(shape[:axis] + [n] + shape[axis + k:]))
    to = ops.where(flat, ops.sub(cum, np.int64(1)), np.int64(n))  # not selected: row n
    moved = bind(scatter_add_p, rows, to, key=(("s", None, None, None),) * axis + (("a", 0),),
                 shape=tuple(shape[:axis] + [n + 1] + shape[axis + k:]))
    data = ops.slice_axis(moved, axis, 0, n)
    return Padded(data, {axis: (total, ("mask", id(m)))}, pad=0)


def setitem(x, key, v):
    """Functional `x[key] = v` for a key holding one traced mask (Note [Boolean masks of
    data-dependent length])."""
    from llgrad.runtime.padded import Padded
    from llgrad.runtime.padded_ops import agree
    x = as_operand(x)
    static, axis, m = _split(shape_of(x), key)
    base = x if _trivial(static) else ops.getitem(x, static)
    shape, k = shape_of(base), len(shape_of(m))
    trailing = tuple(shape[axis + k:])
    target = len(shape) - k + 1  # axes of numpy's x[key]: the selected rows at `axis`
    v = ops.astype(v if type(v) is Padded else as_operand(v), dtype_of(x))
    nd = v.ndim if type(v) is Padded else len(shape_of(v))
    if nd > target:
        raise ShapeError(f"x[mask] = v: a value of {nd} axes does not fit the {target} of "
                         f"the selection", loc=user_loc())
    if type(v) is Padded and set(v.lengths) != {axis - (target - nd)}:
        raise _unsupported("written a value of run-time length along other axes")
    data = v.data if type(v) is Padded else v
    data = ops.reshape(data, (1,) * (target - nd) + tuple(shape_of(data)))
    flat, cum, total = _counts(shape, axis, m)
    if shape_of(data)[axis] == 1 and type(v) is not Padded:  # one row for all: broadcast
        new = ops.reshape(data, shape_of(data)[:axis] + (1,) * k + shape_of(data)[axis + 1:])
    else:
        if type(v) is Padded:
            agree(v.lengths[nd - target + axis], (total, ("mask", id(m))), "x[mask] = value")
        else:
            from llgrad.runtime.ops.control import check_p
            have = shape_of(data)[axis]
            bind(check_p, ops.ne(total, np.int64(have)), exc=ValueError, args=(
                f"NumPy boolean array indexing assignment cannot assign {have} input values "
                f"to the output values where the mask is true",))
        last = shape_of(data)[axis] - 1
        if last < 0:  # nothing to write (and the count was checked to be 0)
            return x
        at = ops.reshape(ops.minimum(ops.maximum(ops.sub(cum, np.int64(1)), np.int64(0)),
                                     np.int64(last)), shape_of(m))
        new = ops.getitem(data, (slice(None),) * axis + (at,))
    try:
        fits = np.broadcast_shapes(shape_of(new), tuple(shape)) == tuple(shape)
    except ValueError:
        fits = False
    if not fits:
        raise ShapeError(f"x[mask] = v: a value of shape {list(shape_of(data))} does not fit "
                         f"the selection of {list(shape)} (selected axis {axis})",
                         loc=user_loc())
    out = ops.where(ops.reshape(m, tuple(shape_of(m)) + (1,) * len(trailing)), new, base)
    return out if _trivial(static) else ops.setitem(x, static, out)
