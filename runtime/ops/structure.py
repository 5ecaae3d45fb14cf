"""Structural composites, one eager node each with PyTorch's name, decomposed for the compiler
into views, gathers and selects (so they need no lowering): flip, roll, tril, triu,
diagonal, trace, diag_embed and constant_pad_nd; numpy's pad modes edge/reflect/symmetric/wrap
as one constant-index gather per padded axis.
"""
from __future__ import annotations

import numpy as np

from llgrad.runtime.aval import Aval, ShapeError, normalize_axes
from llgrad.runtime.errors import UnsupportedError
from llgrad.runtime.ops import elementwise as ew
from llgrad.runtime.ops._util import dtype_of, shape_of
from llgrad.runtime.ops.index import getitem, getitem_p, scatter_add_p, slice_axis
from llgrad.runtime.prim import Primitive, bind, is_value, register


def _same(x, **_):
    return Aval(x.shape, x.dtype)


def _composite(name, impl, shape, vjp, decompose, node_name):
    return register(Primitive(name, "shape", impl, shape, (vjp,), saves=(),
                              decompose=decompose, node_name=node_name))


# ---- flip and roll ----------------------------------------------------------------------------
def _flip_decompose(x, axes):
    return getitem(x, tuple(slice(None, None, -1) if d in axes else slice(None)
                            for d in range(len(shape_of(x)))))


flip_p = _composite("flip", lambda x, axes: np.flip(x, axes).copy(), _same,
                    lambda g, out, x, axes: bind(flip_p, g, axes=axes), _flip_decompose,
                    "FlipBackward0")


def _roll_decompose(x, shifts, axes):
    from llgrad.runtime.ops.shape import concatenate
    for s, a in zip(shifts, axes):
        n = shape_of(x)[a]
        s = s % n if n else 0
        if s:
            x = concatenate([slice_axis(x, a, n - s, n), slice_axis(x, a, 0, n - s)], a)
    return x


roll_p = _composite("roll", lambda x, shifts, axes: np.roll(x, shifts, axes), _same,
                    lambda g, out, x, shifts, axes: bind(
                        roll_p, g, shifts=tuple(-s for s in shifts), axes=axes),
                    _roll_decompose, "RollBackward0")


# ---- tril and triu ------------------------------------------------------------------------------
def _tri_mask(shape, k, lower):
    n, m = shape[-2:]
    mask = np.tri(n, m, k, dtype=bool)
    return mask if lower else ~np.tri(n, m, k - 1, dtype=bool)


def _tri(name, lower, numpy_fn):
    def decompose(x, k):
        return ew.where(_tri_mask(shape_of(x), k, lower), x, 0.0)
    p = _composite(name, lambda x, k: numpy_fn(x, k), _same,
                   lambda g, out, x, k: bind(p, g, k=k), decompose,
                   name.capitalize() + "Backward0")
    return p


tril_p = _tri("tril", True, np.tril)
triu_p = _tri("triu", False, np.triu)


# ---- diagonal, trace, diag_embed -----------------------------------------------------------
def _diag_parts(shape, offset, axis1, axis2):
    """(perm, key, index arrays, length): transpose(x, perm)[key] is the diagonal, last."""
    perm = [d for d in range(len(shape)) if d not in (axis1, axis2)] + [axis1, axis2]
    n1, n2 = shape[axis1], shape[axis2]
    length = max(0, min(n1, n2 - offset) if offset >= 0 else min(n1 + offset, n2))
    rows = np.arange(length) + max(-offset, 0)
    return tuple(perm), (("e",), ("a", 0), ("a", 1)), [rows, rows + offset], length


def _diagonal_shape(x, offset, axis1, axis2):
    *_, length = _diag_parts(x.shape, offset, axis1, axis2)
    rest = tuple(d for i, d in enumerate(x.shape) if i not in (axis1, axis2))
    return Aval(rest + (length,), x.dtype)


def _diagonal_decompose(x, offset, axis1, axis2):
    from llgrad.runtime.ops.shape import transpose
    perm, key, idx, _ = _diag_parts(shape_of(x), offset, axis1, axis2)
    return bind(getitem_p, transpose(x, perm), *idx, key=key)


def _diagonal_transpose(g, shape, offset, axis1, axis2):
    """zeros(shape) with g on the diagonal (the diagonal's VJP)."""
    from llgrad.runtime.ops.shape import _inverse_perm, transpose
    perm, key, idx, _ = _diag_parts(shape, offset, axis1, axis2)
    permuted = tuple(shape[p] for p in perm)
    return transpose(bind(scatter_add_p, g, *idx, key=key, shape=permuted), _inverse_perm(perm))


diagonal_p = _composite(
    "diagonal", lambda x, offset, axis1, axis2: np.diagonal(x, offset, axis1, axis2).copy(),
    _diagonal_shape,
    lambda g, out, x, offset, axis1, axis2: _diagonal_transpose(
        g, shape_of(x), offset, axis1, axis2),
    _diagonal_decompose, "DiagonalBackward0")


def _trace_decompose(x, offset, axis1, axis2):
    from llgrad.runtime.ops.reduce import reduce_sum
    d = _diagonal_decompose(x, offset, axis1, axis2)
    return reduce_sum(d, (len(shape_of(d)) - 1,))


def _trace_vjp(g, out, x, offset, axis1, axis2):
    from llgrad.runtime.ops.shape import broadcast_to, reshape
    *_, length = _diag_parts(shape_of(x), offset, axis1, axis2)
    g = broadcast_to(reshape(g, shape_of(g) + (1,)), shape_of(g) + (length,))
    return _diagonal_transpose(g, shape_of(x), offset, axis1, axis2)


trace_p = _composite(
    "trace", lambda x, offset, axis1, axis2: np.asarray(np.trace(x, offset, axis1, axis2)),
    lambda x, offset, axis1, axis2: Aval(_diagonal_shape(x, offset, axis1, axis2).shape[:-1],
                                         x.dtype),
    _trace_vjp, _trace_decompose, "TraceBackward0")


def _embed_shape(v, offset):
    n = v.shape[-1] + abs(offset)
    return Aval(v.shape[:-1] + (n, n), v.dtype)


def _embed(v, offset):
    n = shape_of(v)[-1] + abs(offset)
    nd = len(shape_of(v)) + 1
    return _diagonal_transpose(v, shape_of(v)[:-1] + (n, n), offset, nd - 2, nd - 1)


def _embed_impl(v, offset):
    n = v.shape[-1] + abs(offset)
    out = np.zeros(v.shape[:-1] + (n, n), v.dtype)
    rows = np.arange(v.shape[-1]) + max(-offset, 0)
    out[..., rows, rows + offset] = v
    return out


diag_embed_p = _composite(
    "diag_embed", _embed_impl, _embed_shape,
    lambda g, out, v, offset: bind(diagonal_p, g, offset=offset, axis1=len(shape_of(g)) - 2,
                                   axis2=len(shape_of(g)) - 1),
    _embed, "DiagEmbedBackward0")


# ---- padding ----------------------------------------------------------------------------------
def _pad_shape(x, pad, value):
    return Aval(tuple(d + a + b for d, (a, b) in zip(x.shape, pad)), x.dtype)


def _pad_decompose(x, pad, value):
    from llgrad.runtime.ops.index import setitem
    full = np.full(_pad_shape(x, pad, value).shape, value, dtype_of(x))
    return setitem(full, tuple(slice(a, a + d) for d, (a, _) in zip(shape_of(x), pad)), x)


constant_pad_nd_p = _composite(
    "constant_pad_nd", lambda x, pad, value: np.pad(x, pad, constant_values=value),
    _pad_shape, lambda g, out, x, pad, value: getitem(
        g, tuple(slice(a, a + d) for d, (a, _) in zip(shape_of(x), pad))),
    _pad_decompose, "ConstantPadNdBackward0")


def _source_index(n, before, after, mode):
    """For each padded position along an axis of size n, the source position (numpy's pad
    modes; reflect/symmetric repeat their pattern for pads wider than the axis)."""
    i = np.arange(-before, n + after)
    if mode == "edge":
        return np.clip(i, 0, n - 1)
    if mode == "wrap":
        return np.mod(i, n)
    if mode == "reflect":
        if n == 1:
            return np.zeros_like(i)
        p = np.mod(i, 2 * n - 2)
        return np.where(p < n, p, 2 * n - 2 - p)
    p = np.mod(i, 2 * n)  # symmetric: the edge is repeated
    return np.where(p < n, p, 2 * n - 1 - p)


def pad(x, pad_width, mode="constant", constant_values=0):
    """numpy's pad: pad_width and constant_values as numpy accepts them (one number,
    (before, after), or one pair per axis); modes constant, edge, reflect, symmetric and
    wrap."""
    nd = len(shape_of(x))
    widths = np.broadcast_to(np.asarray(pad_width, dtype=np.int64), (nd, 2)) if nd else \
        np.zeros((0, 2), np.int64)
    if np.any(widths < 0):
        raise ShapeError(f"pad: negative pad widths {widths.tolist()}")
    widths = tuple((int(a), int(b)) for a, b in widths)
    if mode == "constant":
        if is_value(constant_values) or any(is_value(v) for v in np.ravel(
                np.asarray(constant_values, dtype=object))):
            raise UnsupportedError("pad(mode='constant'): traced constant_values are not "
                                   "supported", fix="pass numbers, or pad with 0 and add the "
                                   "values with np.where on a constant mask")
        values = np.broadcast_to(np.asarray(constant_values, np.float64), (nd, 2))
        if not any(a or b for a, b in widths):
            return x
        if np.all(values == values.flat[0]):
            return bind(constant_pad_nd_p, x, pad=widths, value=float(values.flat[0]))
        for axis, pair in enumerate(widths):  # numpy's order: a later axis fills the corners
            for side in (0, 1):
                if pair[side]:
                    one = [(0, 0)] * nd
                    one[axis] = (pair[0], 0) if side == 0 else (0, pair[1])
                    x = bind(constant_pad_nd_p, x, pad=tuple(one),
                             value=float(values[axis, side]))
        return x
    if mode not in ("edge", "reflect", "symmetric", "wrap"):
        raise NotImplementedError(f"pad(mode={mode!r}): supported modes are constant, edge, "
                                  "reflect, symmetric and wrap")
    for axis, (a, b) in enumerate(widths):
        n = shape_of(x)[axis]
        if a or b:
            if n == 0:
                raise ShapeError(f"pad(mode={mode!r}) of an empty axis {axis}")
            src = _source_index(n, a, b, mode)
            x = getitem(x, (slice(None),) * axis + (src,))
    return x


_numpy_pad = pad


def torch_pad(x, pad, mode="constant", value=None):
    """PyTorch's F.pad: `pad` lists (left, right) pairs from the LAST dimension backwards;
    modes constant, reflect, replicate and circular."""
    if len(pad) % 2 or len(pad) // 2 > len(shape_of(x)):
        raise ShapeError(f"pad: {len(pad)} values do not pair up over {len(shape_of(x))} "
                         f"dimensions", fix="give (left, right) pairs, last dimension first")
    pairs = [(0, 0)] * len(shape_of(x))
    for k in range(len(pad) // 2):
        pairs[len(pairs) - 1 - k] = (int(pad[2 * k]), int(pad[2 * k + 1]))
    numpy_mode = {"constant": "constant", "reflect": "reflect", "replicate": "edge",
                  "circular": "wrap"}.get(mode)
    if numpy_mode is None:
        raise NotImplementedError(f"pad(mode={mode!r}): supported modes are constant, "
                                  "reflect, replicate and circular")
    return _numpy_pad(x, pairs, numpy_mode, 0.0 if value is None else value)


# ---- the ops API ------------------------------------------------------------------------------
def flip(x, axis=None):
    nd = len(shape_of(x))
    axes = tuple(range(nd)) if axis is None else normalize_axes(axis, nd)
    return bind(flip_p, x, axes=axes) if axes else x


def roll(x, shift, axis=None):
    """numpy's roll (PyTorch's roll(shifts, dims)); axis=None rolls the flattened array."""
    from llgrad.runtime.ops.shape import reshape
    if axis is None:
        return reshape(roll(reshape(x, (-1,)), shift, 0), shape_of(x))
    shifts = (shift,) if isinstance(shift, (int, np.integer)) else tuple(shift)
    axes = (axis,) if isinstance(axis, (int, np.integer)) else tuple(axis)
    nd = len(shape_of(x))
    shifts, axes = np.broadcast_arrays(np.asarray(shifts), np.asarray(axes))
    return bind(roll_p, x, shifts=tuple(int(s) for s in shifts),
                axes=tuple(int(a) % max(nd, 1) for a in axes))


def _need2d(x, what):
    if len(shape_of(x)) < 2:
        raise ShapeError(f"{what} needs at least 2 dimensions, got shape {list(shape_of(x))}")


def tril(x, k=0):
    _need2d(x, "tril")
    return bind(tril_p, x, k=int(k))


def triu(x, k=0):
    _need2d(x, "triu")
    return bind(triu_p, x, k=int(k))


def diagonal(x, offset=0, axis1=0, axis2=1):
    _need2d(x, "diagonal")
    a1, a2 = (normalize_axes(a, len(shape_of(x)))[0] for a in (axis1, axis2))
    if a1 == a2:
        raise ShapeError("diagonal: axis1 and axis2 cannot be the same")
    return bind(diagonal_p, x, offset=int(offset), axis1=a1, axis2=a2)


def trace(x, offset=0, axis1=0, axis2=1):
    _need2d(x, "trace")
    a1, a2 = (normalize_axes(a, len(shape_of(x)))[0] for a in (axis1, axis2))
    return bind(trace_p, x, offset=int(offset), axis1=a1, axis2=a2)


def diag(x, k=0):
    """numpy's diag: a 1-D x becomes a 2-D matrix with x on diagonal k; a 2-D x gives its
    diagonal k."""
    nd = len(shape_of(x))
    if nd == 1:
        return bind(diag_embed_p, x, offset=int(k))
    if nd == 2:
        return diagonal(x, k)
    raise ShapeError(f"diag: input must be 1-d or 2-d, got shape {list(shape_of(x))}")
