"""numpy reductions written with other ops: all, any, count_nonzero (no gradient), ptp,
average, nansum, nanmean, diff, and max/min/sum/prod with numpy's `initial=` and `where=`.

Axes arrive as numpy gives them (None, an int or a tuple; negative allowed).
"""
from __future__ import annotations

import numpy as np

from llgrad.runtime.aval import I64, ShapeError, normalize_axes
from llgrad.runtime.ops import elementwise as ew
from llgrad.runtime.ops._util import as_operand, dtype_of, operands, shape_of
from llgrad.runtime.ops import reduce as R


def _axes(x, axis):
    return normalize_axes(axis, len(shape_of(x)))


def count_nonzero(x, axis=None, keepdims=False):
    (x,), _ = operands(x)
    return R.reduce_sum(ew.astype(ew.ne(x, 0), I64), _axes(x, axis), keepdims)


def any(x, axis=None, keepdims=False):
    return ew.gt(count_nonzero(x, axis, keepdims), 0)


def all(x, axis=None, keepdims=False):
    (x,), _ = operands(x)
    return ew.eq(R.reduce_sum(ew.astype(ew.eq(x, 0), I64), _axes(x, axis), keepdims), 0)


def ptp(x, axis=None, keepdims=False):
    """Peak to peak: max - min."""
    return ew.sub(R.amax(x, _axes(x, axis), keepdims), R.amin(x, _axes(x, axis), keepdims))


def isnan(x):
    return ew.ne(x, x)


def nansum(x, axis=None, keepdims=False):
    """The sum treating NaNs as zero."""
    (x,), dt = operands(x)
    if dt.kind != "f":
        return R.sum(x, _axes(x, axis), keepdims)
    return R.reduce_sum(ew.where(isnan(x), 0.0, x), _axes(x, axis), keepdims)


def nanmean(x, axis=None, keepdims=False):
    """The mean of the non-NaN values (NaN, as numpy, where all are NaN)."""
    x = R._floating(x)
    keep = ew.astype(ew.logical_not(isnan(x)), dtype_of(x))
    return ew.div(nansum(x, axis, keepdims), R.reduce_sum(keep, _axes(x, axis), keepdims))


def average(x, axis=None, weights=None, returned=False, keepdims=False):
    """numpy's average: sum(x * w) / sum(w) over `axis`; 1-d weights along one axis."""
    from llgrad.runtime.ops.shape import broadcast_to, reshape
    x = R._floating(x)
    if weights is None:
        r = R.mean(x, axis if axis is None else _axes(x, axis), keepdims)
        if not returned:
            return r
        n = np.prod([shape_of(x)[a] for a in _axes(x, axis)], dtype=np.int64)
        return r, broadcast_to(np.asarray(n, dtype_of(r)), shape_of(r))
    (x, w), _ = operands(x, weights)
    if shape_of(w) != shape_of(x):
        axes = _axes(x, axis)
        if len(shape_of(w)) != 1 or len(axes) != 1 or shape_of(w)[0] != shape_of(x)[axes[0]]:
            raise ShapeError(f"average: weights of shape {list(shape_of(w))} differ from the "
                             f"array's {list(shape_of(x))}",
                             fix="give weights of the array's shape, or 1-d along one axis")
        w = broadcast_to(reshape(w, [-1 if i == axes[0] else 1 for i in range(len(shape_of(x)))]),
                         shape_of(x))
    axes = _axes(x, axis)
    total = R.reduce_sum(w, axes, keepdims)
    r = ew.div(R.reduce_sum(ew.mul(x, w), axes, keepdims), total)
    return (r, total) if returned else r


def diff(x, n=1, axis=-1, prepend=None, append=None):
    """numpy's diff: the n-th forward difference along `axis`, after prepend/append."""
    from llgrad.runtime.ops.index import slice_axis
    from llgrad.runtime.ops.shape import broadcast_to, concatenate
    x = as_operand(x)
    if not shape_of(x):
        raise ShapeError("diff requires input that is at least one dimensional")
    axis = normalize_axes(axis, len(shape_of(x)))[0]
    if n < 0:
        raise ShapeError(f"diff: order must be non-negative, got {n}")
    parts = []
    for extra in (prepend, x, append):
        if extra is None:
            continue
        extra = as_operand(extra, x)
        if extra is not x and len(shape_of(extra)) == 0:
            shape = list(shape_of(x))
            shape[axis] = 1
            extra = broadcast_to(extra, shape)
        parts.append(extra)
    x = concatenate(parts, axis) if len(parts) > 1 else x
    if dtype_of(x) == np.bool_:
        raise NotImplementedError("diff of a boolean array is not supported")
    for _ in range(n):
        m = shape_of(x)[axis]
        x = ew.sub(slice_axis(x, axis, 1, max(m, 1)), slice_axis(x, axis, 0, max(m - 1, 0)))
    return x


def masked_reduce(kind, x, axis=None, keepdims=False, initial=None, where=True):
    """numpy's sum/prod/max/min with `initial=` (a start value) and `where=` (a mask)."""
    (x,), dt = operands(x)
    axes = _axes(x, axis)
    if kind in ("max", "min") and where is not True and initial is None:
        raise ValueError(f"reduction operation '{'maximum' if kind == 'max' else 'minimum'}' "
                         "does not have an identity, so to use a where mask one has to "
                         "specify 'initial'")
    identity = {"sum": 0, "prod": 1}.get(kind, initial)
    if where is not True:
        x = ew.where(where, x, identity)
    if kind in ("sum", "prod"):
        r = (R.sum if kind == "sum" else R.prod)(x, axes, keepdims)
        if initial is not None:
            r = (ew.add if kind == "sum" else ew.mul)(r, initial)
        return r
    if initial is None:
        return (R.amax if kind == "max" else R.amin)(x, axes, keepdims)
    if any_empty(x, axes):
        from llgrad.runtime.ops.shape import broadcast_to
        return broadcast_to(np.asarray(initial, dt), R._reduced_shape(shape_of(x), axes,
                                                                      keepdims))
    r = (R.amax if kind == "max" else R.amin)(x, axes, keepdims)
    return (ew.maximum if kind == "max" else ew.minimum)(r, initial)


def any_empty(x, axes) -> bool:
    return 0 in [shape_of(x)[a] for a in axes]


def cov(m, y=None, rowvar=True, bias=False, ddof=None, fweights=None, aweights=None, *,
        dtype=None):
    """numpy's cov: variables in rows (rowvar) or columns, centred, X Xᵀ / (n - ddof); in
    float64 at least (numpy's result_type(m, float64)), squeezed as numpy squeezes it."""
    from llgrad.runtime.errors import UnsupportedError, user_loc
    from llgrad.runtime.ops.arrays import atleast_2d
    from llgrad.runtime.ops.linalg import matmul
    from llgrad.runtime.ops.shape import concatenate, squeeze, transpose
    if fweights is not None or aweights is not None:
        raise UnsupportedError("np.cov's fweights= and aweights= are not supported on traced "
                               "values", loc=user_loc(),
                               fix="weight the centred data yourself: (X * w) @ X.T / sum(w)")

    def rows(a):
        (a,), _ = operands(a)
        a = atleast_2d(ew.astype(a, np.result_type(dtype_of(a), np.float64, dtype or np.float64)))
        return transpose(a) if not rowvar and shape_of(a)[0] != 1 else a
    x = rows(m)
    if y is not None:
        x = concatenate([x, rows(y)], 0)
    ddof = (0 if bias else 1) if ddof is None else ddof
    xc = ew.sub(x, R.mean(x, (1,), True))
    c = ew.mul(matmul(xc, transpose(xc)), 1.0 / (shape_of(x)[1] - ddof))
    return squeeze(c, tuple(i for i, d in enumerate(shape_of(c)) if d == 1) or None)


def corrcoef(x, y=None, rowvar=True, *, dtype=None):
    """numpy's corrcoef: cov / (σ_i σ_j), clipped to [-1, 1]."""
    from llgrad.runtime.ops.shape import reshape
    from llgrad.runtime.ops.structure import diagonal
    c = cov(x, y, rowvar, dtype=dtype)
    if not shape_of(c):
        return ew.div(c, c)
    d = ew.sqrt(diagonal(c))
    c = ew.div(ew.div(c, reshape(d, (-1, 1))), reshape(d, (1, -1)))
    return ew.clip(c, -1.0, 1.0)
