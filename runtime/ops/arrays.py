"""numpy's shape and construction functions written with the shape ops (views and
concatenations): the stacks, the splits, atleast_Nd, moveaxis/rollaxis, tile, meshgrid,
full_like and sliding_window_view. They need no primitive of their own.
"""
from __future__ import annotations

import numpy as np

from llgrad.runtime.aval import ShapeError, normalize_axes
from llgrad.runtime.ops import elementwise as ew
from llgrad.runtime.ops._util import as_operand, dtype_of, operands, shape_of
from llgrad.runtime.ops.index import slice_axis
from llgrad.runtime.ops.shape import broadcast_to, concatenate, repeat, reshape, transpose


def atleast_1d(x):
    x = as_operand(x)
    return reshape(x, (1,)) if not shape_of(x) else x


def atleast_2d(x):
    x = as_operand(x)
    s = shape_of(x)
    return reshape(x, (1,) * (2 - len(s)) + s) if len(s) < 2 else x


def atleast_3d(x):
    """numpy's rule: (n,) -> (1, n, 1), (m, n) -> (m, n, 1)."""
    x = as_operand(x)
    s = shape_of(x)
    if len(s) == 0:
        return reshape(x, (1, 1, 1))
    if len(s) == 1:
        return reshape(x, (1, s[0], 1))
    if len(s) == 2:
        return reshape(x, s + (1,))
    return x


def _join(xs, axis):
    xs, _ = operands(*xs)
    return concatenate(list(xs), axis)


def vstack(xs):
    return _join([atleast_2d(x) for x in xs], 0)


def hstack(xs):
    xs = [atleast_1d(x) for x in xs]
    return _join(xs, 0 if len(shape_of(xs[0])) == 1 else 1)


def dstack(xs):
    return _join([atleast_3d(x) for x in xs], 2)


def column_stack(xs):
    cols = []
    for x in xs:
        x = as_operand(x)
        cols.append(reshape(x, (-1, 1)) if len(shape_of(x)) < 2 else x)
    return _join(cols, 1)


def moveaxis(x, source, destination):
    nd = len(shape_of(x))
    src, dst = ([normalize_axes(a, nd)[0] for a in ([v] if isinstance(v, (int, np.integer))
                                                    else v)] for v in (source, destination))
    if len(src) != len(dst):
        raise ShapeError("moveaxis: `source` and `destination` arguments must have the same "
                         "number of elements")
    order = [d for d in range(nd) if d not in src]
    for d, s in sorted(zip(dst, src)):
        order.insert(d, s)
    return transpose(x, order)


def rollaxis(x, axis, start=0):
    nd = len(shape_of(x))
    axis = normalize_axes(axis, nd)[0]
    start = start + nd if start < 0 else start
    if not 0 <= start <= nd:
        raise ShapeError(f"rollaxis: start {start} is out of range for {nd} dimensions")
    if axis < start:
        start -= 1
    if axis == start:
        return x
    order = [d for d in range(nd) if d != axis]
    order.insert(start, axis)
    return transpose(x, order)


def _split_points(n, sections, even):
    if isinstance(sections, (int, np.integer)):
        k = int(sections)
        if k <= 0:
            raise ShapeError("number sections must be larger than 0.")
        if even and n % k:
            raise ShapeError("array split does not result in an equal division",
                             fix="use np.array_split for unequal parts")
        each, extra = divmod(n, k)
        sizes = [each + 1] * extra + [each] * (k - extra)
        return list(np.cumsum([0] + sizes))
    return [0] + [int(p) for p in sections] + [n]


def array_split(x, sections, axis=0):
    """numpy's array_split: equal-as-possible parts, or parts between split indices."""
    x = as_operand(x)
    axis = normalize_axes(axis, len(shape_of(x)))[0]
    n = shape_of(x)[axis]
    pts = _split_points(n, sections, even=False)
    out = []
    for a, b in zip(pts[:-1], pts[1:]):
        a, b = min(max(a, 0), n), min(max(b, 0), n)  # numpy clips, and a part may be empty
        out.append(slice_axis(x, axis, a, max(a, b)))
    return out


def split(x, sections, axis=0):
    if isinstance(sections, (int, np.integer)):
        _split_points(shape_of(x)[normalize_axes(axis, len(shape_of(x)))[0]], sections, True)
    return array_split(x, sections, axis)


def hsplit(x, sections):
    if not shape_of(x):
        raise ShapeError("hsplit only works on arrays of 1 or more dimensions")
    return split(x, sections, 1 if len(shape_of(x)) > 1 else 0)


def vsplit(x, sections):
    if len(shape_of(x)) < 2:
        raise ShapeError("vsplit only works on arrays of 2 or more dimensions")
    return split(x, sections, 0)


def dsplit(x, sections):
    if len(shape_of(x)) < 3:
        raise ShapeError("dsplit only works on arrays of 3 or more dimensions")
    return split(x, sections, 2)


def tile(x, reps):
    """numpy's tile: `reps` copies along each axis (shapes and reps padded with 1s in front)."""
    x = as_operand(x)
    reps = (int(reps),) if isinstance(reps, (int, np.integer)) else tuple(int(r) for r in reps)
    nd = max(len(reps), len(shape_of(x)))
    reps = (1,) * (nd - len(reps)) + reps
    x = reshape(x, (1,) * (nd - len(shape_of(x))) + shape_of(x))
    if not nd:
        return x
    return repeat(x, *reps)


def meshgrid(*xs, indexing="xy", sparse=False, copy=True):
    """numpy's/PyTorch's meshgrid of 1-d arrays (indexing 'xy' or 'ij')."""
    if indexing not in ("xy", "ij"):
        raise ValueError("Valid values for `indexing` are 'xy' and 'ij'.")
    xs = [reshape(as_operand(x), (-1,)) for x in xs]
    n = len(xs)
    shape = [shape_of(x)[0] for x in xs]
    if indexing == "xy" and n > 1:
        shape[0], shape[1] = shape[1], shape[0]
    out = []
    for i, x in enumerate(xs):
        axis = (1 - i if i < 2 else i) if indexing == "xy" and n > 1 else i
        view = reshape(x, [-1 if d == axis else 1 for d in range(n)])
        out.append(view if sparse else broadcast_to(view, shape))
    return out


def full_like(x, fill_value, dtype=None, shape=None):
    """numpy's full_like; a traced fill value broadcasts (and casts to the dtype)."""
    dt = dtype_of(x) if dtype is None else np.dtype(dtype)
    shape = shape_of(x) if shape is None else ((shape,) if isinstance(shape, int) else
                                              tuple(shape))
    v = as_operand(fill_value)
    if dtype_of(v) != dt:
        v = ew.astype(v, dt) if not isinstance(v, np.ndarray) else v.astype(dt)
    return broadcast_to(v, shape)


def sliding_window_view(x, window_shape, axis=None):
    """numpy's np.lib.stride_tricks.sliding_window_view: every window of `window_shape` along
    `axis` (all axes when None), the windows' axes appended last in the order given. numpy
    returns a strided view; here each windowed axis is one gather by the constant index
    array start + offset (so the gradient adds back where windows overlap)."""
    from llgrad.runtime.ops.gather import take
    x = as_operand(x)
    nd = len(shape_of(x))
    ws = ((int(window_shape),) if isinstance(window_shape, (int, np.integer))
          else tuple(int(w) for w in window_shape))
    if any(w < 0 for w in ws):
        raise ValueError("`window_shape` cannot contain negative values")
    if axis is None:
        if len(ws) != nd:
            raise ValueError(f"Since axis is `None`, must provide window_shape for all "
                             f"dimensions of `x`; got {len(ws)} window_shape elements and "
                             f"`x.ndim` is {nd}.")
        axes = list(range(nd))
    else:
        axes = [normalize_axes(a, nd)[0] for a in
                ([axis] if isinstance(axis, (int, np.integer)) else axis)]
        if len(ws) != len(axes):
            raise ValueError(f"Must provide matching length window_shape and axis; got "
                             f"{len(ws)} window_shape elements and {len(axes)} axes elements.")
    for ax, w in zip(axes, ws):
        n = shape_of(x)[ax]
        if n < w:
            raise ValueError("window shape cannot be larger than input array shape")
        x = take(x, np.arange(n - w + 1)[:, None] + np.arange(w), axis=ax)
        x = moveaxis(x, ax + 1, -1)
    return x
