"""Use cases of numpy's scans, sorting, structural, contraction and construction functions
(issue 11), registered into tests/usecases.py's USECASES (same argument roles: x, w vectors
(4,), m (3, 4), k (4, 3), s (3, 3), t (2, 3, 4), idx int64 [3, 0, 2, 0])."""
from __future__ import annotations

import numpy as np

from tests.usecases import NUMPY_METHOD, usecase


# ---- scans and reductions ------------------------------------------------------------------
@usecase
def scans(x, m):
    return (np.sum(np.cumsum(x) * x) + np.sum(np.cumprod(m, axis=1) * m)
            + np.sum(np.add.accumulate(m) * m) + np.sum(np.multiply.accumulate(x) ** 2))


@usecase
def running_extrema(x, m):
    return (np.sum(np.maximum.accumulate(x) * np.arange(4.0))
            + np.sum(np.minimum.accumulate(m, axis=1) * m)
            + np.sum(np.logaddexp.accumulate(m, axis=1) * m))


@usecase
def ufunc_reduce_select_append(x, m, s):
    both = np.logical_and.reduce([x > 0.2, x < 0.8]) | np.logical_or.reduce(m > 1.0, axis=0)
    return (np.sum(np.add.reduce(m) * x) + np.sum(np.multiply.reduce(m, axis=1))
            + np.maximum.reduce(x) + np.sum(np.minimum.reduce(m) * both)
            + np.sum(np.select([x < 0.3, x > 0.6], [x ** 2, -x], default=0.5))
            + np.sum(np.append(x, m[0, 0]) ** 2) + np.sum(np.append(m, m[:1], axis=0))
            + np.sum(s[np.triu_indices_from(s, k=1)] ** 2) + np.sum(s[np.tril_indices_from(s)])
            + np.sum(s[np.diag_indices_from(s)] ** 3))


@usecase
def windows_and_outer_products(x, w, m):
    windows = np.lib.stride_tricks.sliding_window_view(m, (2, 3))
    arithmetic = (np.add.outer(x, w) * np.subtract.outer(x, w) + np.multiply.outer(x, w)
                  + np.divide.outer(x, w + 3.0) + np.power.outer(np.abs(x) + 1.0, w)
                  + np.maximum.outer(x, w) * np.minimum.outer(x, w) + np.logaddexp.outer(x, w)
                  + np.hypot.outer(x, w) + np.arctan2.outer(x, w))
    compared = (np.equal.outer(x, w) + np.not_equal.outer(x, w) + np.less.outer(x, w)
                + np.less_equal.outer(x, w) + np.greater.outer(x, w)
                + np.greater_equal.outer(x, w))
    return (np.sum(windows ** 2 * np.arange(6.0).reshape(2, 3))
            + np.sum(np.lib.stride_tricks.sliding_window_view(x, 2) @ w[:2])
            + np.sum(arithmetic * compared))


@usecase
def reductions_numpy_style(m, x):
    mask = m > 0
    return (np.max(m, axis=1, initial=0.25).sum() + np.min(x, initial=0.5, where=x < 0.5)
            + np.sum(m, where=mask) + np.ptp(m, axis=0).sum() + np.count_nonzero(mask)
            + np.all(mask) + np.any(m > 1.5, axis=0).sum()
            + np.average(m, axis=1, weights=np.arange(1.0, 5.0)).sum())


@usecase
def nan_reductions_and_diff(m, x):
    holes = np.where(m > 1.0, np.nan, m)
    return (np.nansum(holes) + np.nanmean(holes, axis=0).sum()
            + np.sum(np.diff(m, axis=1) ** 2) + np.sum(np.diff(x, n=2, prepend=0.5)))


@usecase(float32=False)  # np.cov computes in float64 whatever the input (numpy's rule)
def covariances(m, k, x):
    return (np.sum(np.cov(m) * np.arange(9.0).reshape(3, 3)) + np.sum(np.cov(k, rowvar=False))
            + np.cov(x, bias=True) + np.sum(np.cov(m[0], m[1], ddof=0) ** 2)
            + np.sum(np.corrcoef(k.T) * np.arange(9.0).reshape(3, 3)))


# ---- sorting --------------------------------------------------------------------------------
@usecase
def sorting_and_order_statistics(x, m):
    order = np.argsort(x)
    return (np.sum(np.sort(m, axis=1) * np.arange(4.0)) + np.sum(x[order] * np.arange(4.0))
            + np.median(m) + np.sum(np.quantile(m, [0.25, 0.8], axis=1))
            + np.percentile(x, 40.0))


@usecase(eager=NUMPY_METHOD)
def array_methods(m, x):
    return (np.sum(m.cumsum(axis=0) * m) + x[x.argsort()][0] + m[:, :3].diagonal().sum()
            + m[:, :3].trace() + np.sum(x.repeat(2) * np.arange(8.0)) + x.take([1, 1]).sum()
            + m.max(axis=0, initial=0.0).sum())


# ---- shape and structure --------------------------------------------------------------------
@usecase
def flips_and_rolls(m, x):
    return (np.sum(np.flip(m, 0) * m) + np.sum(np.fliplr(m) * m) + np.sum(np.flipud(m) * m)
            + np.sum(np.roll(x, 1) * x) + np.sum(np.roll(m, -1, axis=1) * m))


@usecase
def padding_tiling_repeating(m, x):
    return (np.sum(np.pad(m, 1) * np.pad(m, ((1, 1), (1, 1)), mode="edge"))
            + np.sum(np.pad(x, (2, 1), mode="reflect") ** 2)
            + np.sum(np.pad(x, 3, mode="symmetric") * np.arange(10.0))
            + np.sum(np.tile(x, (2, 1)) * np.arange(8.0).reshape(2, 4))
            + np.sum(np.repeat(m, [1, 0, 2], axis=0) ** 2))


@usecase
def stacking(x, w, m):
    return (np.sum(np.vstack([x, w]) * np.hstack([x, w]).reshape(2, 4))
            + np.sum(np.dstack([m, m]) ** 2) + np.sum(np.column_stack([x, w]) ** 2)
            + np.sum(np.row_stack([x, w]) * 2.0) + np.sum(np.atleast_1d(x[0]) * 3.0)
            + np.sum(np.atleast_2d(x) ** 2) + np.sum(np.atleast_3d(m) ** 3))


@usecase
def moving_and_splitting(t, m, x):
    a, b = np.split(x, 2)
    c, d, e = np.array_split(m, 3, axis=1)
    f, g = np.hsplit(m, [1])
    h, i = np.vsplit(t[0], [2])
    j, k = np.dsplit(t, 2)
    return (np.sum(a * b) + np.sum(c) * np.sum(d * d) + np.sum(e) + np.sum(f * g[:, :1])
            + np.sum(h) * np.sum(i) + np.sum(j * k)
            + np.sum(np.moveaxis(t, 0, -1) * np.rollaxis(t, 0, 3)))


@usecase
def triangles_and_diagonals(s, x):
    return (np.sum(np.tril(s) * np.triu(s, 1)) + np.sum(np.diag(x) ** 2)
            + np.sum(np.diag(s, -1)) + np.sum(np.diagonal(s) ** 2) + np.trace(s @ s))


@usecase
def takes(m, x, idx):
    return (np.sum(np.take(m, [0, 5, 5, 11])) + np.sum(np.take(m, idx[:2], axis=1) ** 2)
            + np.sum(np.take_along_axis(m, np.argsort(m, axis=1), axis=1) * np.arange(4.0))
            + np.sum(np.take(x, [-1, 5], mode="wrap")))


# ---- contractions and construction ----------------------------------------------------------
@usecase
def contractions(m, k, x, t, s):
    return (np.sum(np.einsum("ij,jk->ik", m, k)) + np.einsum("ii", s)
            + np.sum(np.einsum("bij,j->bi", t, x)) + np.sum(np.tensordot(t, m, 2))
            + np.sum(np.inner(m, x)) + np.vdot(m, m) + np.sum(np.kron(s, x[:2]))
            + np.sum(np.cross(m[:, :3], m[:, 1:])))


@usecase
def construction_from_traced(x, m, a):
    gx, gy = np.meshgrid(x, x[:3])
    return (np.sum(gx * gy) + np.sum(np.full_like(m, a) * m)
            + np.sum(x + np.empty_like(x).shape[0]) + np.sum(np.eye(4) @ x)
            + np.sum(np.tri(3, 4) * m) + np.sum(np.linspace(0.0, 1.0, 4) * x))


# ---- signals, interpolation and quadrature -----------------------------------------------
@usecase
def signals_and_insertions(x, w, m):
    return (np.sum(np.convolve(x, w[:3]) * np.arange(6.0)) + np.sum(np.convolve(x, w, "same") ** 2)
            + np.sum(np.correlate(x, w[:2], mode="full") * x[0]) + np.sum(np.correlate(x, w))
            + np.sum(np.insert(x, 2, w[0]) ** 2) + np.sum(np.insert(m, 1, x[:3], axis=1) * 0.5)
            + np.sum(np.polyval(w, x)))


@usecase
def interpolation_and_quadrature(x, w, p, m):
    grid = np.cumsum(p)  # increasing knots
    return (np.sum(np.interp(x, grid, w) ** 2)
            + np.sum(np.interp(3.0 * x, grid, w, left=0.0, right=1.0))
            + np.sum(np.searchsorted(grid, 3.0 * x) * x) + np.sum(np.searchsorted(grid, x, "right"))
            + np.trapezoid(x ** 2) + np.trapezoid(m, axis=0).sum() + np.trapezoid(x, grid))


@usecase
def bincount_weights(x, m):
    """Weighted counts of constant indices (sums per group), and the unweighted counts."""
    groups = np.array([0, 2, 2, 5])
    sums = np.bincount(groups, weights=x, minlength=7)
    return np.sum(sums ** 2 * np.arange(7.0)) + np.sum(np.bincount(groups) * x[0]) \
        + np.sum(np.bincount(np.array([1, 0, 1, 2]), m[0]) * m[1, :3])


@usecase
def nan_ignoring_reductions(x, m):
    """numpy's nan* reductions and scans on data with missing values (NaN where m > 1)."""
    data = np.where(m > 1.0, np.nan, m)
    return (np.sum(np.nanvar(data, axis=1)) + np.nanstd(data, ddof=1)
            + np.sum(np.nanprod(data, axis=0)) + np.sum(np.nancumsum(data, axis=1) * m)
            + np.sum(np.nancumprod(data) ** 2) + np.nanmax(data) * np.nanargmax(data)
            + np.sum(np.nanargmin(data, axis=1) * x[:3]))


@usecase
def blocks_rotations_and_splits(x, m, s):
    fractional, whole = np.modf(3.0 * m)
    return (np.sum(np.block([[s, m[:, :1]], [x[:3], x[3]]]) ** 2)
            + np.sum(np.rot90(m) * np.arange(12.0).reshape(4, 3)) + np.sum(np.rot90(m, 3)[0])
            + np.sum(np.diagflat(x, 1) @ np.arange(5.0))
            + sum(np.sum(b * b) for b in np.broadcast_arrays(m, x))
            + np.sum(fractional ** 2) + np.sum(whole * m)
            + np.sum(np.where(np.isposinf(m / 0.0) | np.isneginf(x), 0.0, 1.0) * m)
            + np.sum(np.where(np.isreal(x) & ~np.iscomplex(x), x, 0.0))
            + np.sum(np.real_if_close(x) ** 3))


@usecase(eager="np.require converts its argument with numpy (no __array_function__ dispatch)")
def conversions_and_views(x, m):
    cols = np.unstack(m, axis=1) if hasattr(np, "unstack") else tuple(m.T)
    mt = np.matrix_transpose(m) if hasattr(np, "matrix_transpose") else m.T
    return (np.sum(np.require(x, dtype=np.float64) ** 2) + np.sum(cols[2] * cols[0])
            + np.sum(mt[1] ** 3))


@usecase
def grids_and_comparisons(x, w):
    """Grids with traced endpoints (a final time as a parameter), array comparisons and
    membership, numpy 2's vector products."""
    t = np.linspace(0.0, x[0] ** 2 + 1.0, 6)
    grid, step = np.linspace(x[:2], x[2:], 4, axis=1, retstep=True)
    same = np.array_equal(x, x) * x[1] + np.array_equiv(x, x[0]) * x[2] \
        + np.array_equal(x, w, equal_nan=True) * x[3]
    member = np.where(np.isin(np.round(2 * x), [0.0, 1.0, -1.0]), x, 2 * x)
    out = (np.sum(np.sin(t) * w[0]) + np.sum(grid ** 2) + np.sum(step)
           + np.sum(np.logspace(0.0, x[1], 3, base=2.0)) + same + np.sum(member))
    if hasattr(np, "vecdot"):
        out = out + np.sum(np.vecdot(x.reshape(2, 2), w.reshape(2, 2))) \
            + np.sum(np.matvec(np.outer(x, w), x)) + np.sum(np.vecmat(x, np.outer(w, x)))
    return out
