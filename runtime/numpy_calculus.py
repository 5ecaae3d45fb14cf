"""numpy's and scipy's finite differences, integrals, NaN-skipping extrema and histograms on
llgrad values, with the libraries' signatures: np.nanmax/nanmin, np.gradient, np.ediff1d,
np.unwrap, np.histogram, scipy.integrate.trapezoid/cumulative_trapezoid. Composites of
existing primitives, each the libraries' own formula, so values and gradients follow from the
primitives'. `FUNCTIONS` joins runtime/numpy_api.FUNCTIONS; `SCIPY` its lazily named
functions (Note [Lazily named functions] there)."""
from __future__ import annotations

import numpy as np

from llgrad.runtime import ops
from llgrad.runtime.aval import normalize_axes
from llgrad.runtime.errors import UnsupportedError, user_loc
from llgrad.runtime.ops import stats as St
from llgrad.runtime.ops._util import as_operand, dtype_of, shape_of
from llgrad.runtime.numpy_shape import _trapezoid
from llgrad.runtime.prim import is_value


def _refuse(name: str, **given) -> None:
    for k, v in given.items():
        if v is not None and v is not True and v is not np._NoValue:
            raise UnsupportedError(f"{name}({k}=...) is not supported on llgrad values",
                                   loc=user_loc(), fix=f"call {name} without {k}=")


def _floating(a):
    a = as_operand(a)
    return a if dtype_of(a).kind == "f" else ops.astype(a, np.float64)


def _along(nd: int, axis: int, s: slice) -> tuple:
    """The index taking slice `s` along `axis` of an nd-array."""
    key = [slice(None)] * nd
    key[axis] = s
    return tuple(key)


def _on_axis(v, nd: int, axis: int):
    """A 1-D `v` shaped to broadcast along `axis` of an nd-array."""
    shape = [1] * nd
    shape[axis] = shape_of(v)[0]
    return ops.reshape(v, tuple(shape))


# ---- NaN-skipping extrema -------------------------------------------------------------------
def _nan_extremum(kind: str):
    """np.nanmax / np.nanmin: the extremum of the non-NaN values, NaN where all are NaN (as
    numpy, which also warns). A NaN entry gets no gradient."""
    name = f"np.nan{kind}"
    reduce, fill = (ops.amax, -np.inf) if kind == "max" else (ops.amin, np.inf)

    def impl(a, axis=None, out=None, keepdims=False, initial=None, where=True):
        _refuse(name, out=out, initial=initial, where=where)
        a = as_operand(a)
        axes = None if axis is None else normalize_axes(axis, len(shape_of(a)))
        if dtype_of(a).kind != "f":
            return reduce(a, axes, keepdims)
        nan = ops.isnan(a)
        m = reduce(ops.where(nan, fill, a), axes, keepdims)
        return ops.where(St.all(nan, axes, keepdims), np.nan, m)
    return impl


# ---- finite differences ---------------------------------------------------------------------
def _gradient_axis(f, axis: int, spacing):
    """numpy's second-order central differences along `axis`, first-order one-sided ones at
    the two ends (edge_order=1); `spacing` is a scalar step or the coordinates (1-D)."""
    nd, n = len(shape_of(f)), shape_of(f)[axis]
    if n < 2:
        raise ValueError("Shape of array too small to calculate a numerical gradient, at "
                         "least (edge_order + 1) elements are required.")
    s = lambda a, b=None: f[_along(nd, axis, slice(a, b))]  # noqa: E731
    if np.ndim(spacing) == 0:
        first = ops.div(ops.sub(s(1, 2), s(0, 1)), spacing)
        last = ops.div(ops.sub(s(n - 1), s(n - 2, n - 1)), spacing)
        twice = ops.mul(spacing, 2.0) if is_value(spacing) else spacing * 2.0  # (in f64)
        inner = ops.div(ops.sub(s(2), s(0, -2)), twice)
    else:
        if shape_of(spacing) != (n,):
            raise ValueError("when 1d, distances must match the length of the corresponding "
                             "dimension")
        dx = _on_axis(ops.diff(_floating(spacing)), nd, axis)
        d1, d2 = dx[_along(nd, axis, slice(None, -1))], dx[_along(nd, axis, slice(1, None))]
        first = ops.div(ops.sub(s(1, 2), s(0, 1)), dx[_along(nd, axis, slice(0, 1))])
        last = ops.div(ops.sub(s(n - 1), s(n - 2, n - 1)), dx[_along(nd, axis, slice(-1, None))])
        a = ops.div(ops.neg(d2), ops.mul(d1, ops.add(d1, d2)))
        b = ops.div(ops.sub(d2, d1), ops.mul(d1, d2))
        c = ops.div(d1, ops.mul(d2, ops.add(d1, d2)))
        inner = ops.add(ops.add(ops.mul(a, s(0, -2)), ops.mul(b, s(1, -1))), ops.mul(c, s(2)))
    return ops.concatenate([first, inner, last] if n > 2 else [first, last], axis)


def _gradient(f, *varargs, axis=None, edge_order=1):
    """np.gradient with edge_order=1: one array per axis (a tuple for several axes)."""
    if edge_order != 1:
        raise UnsupportedError(f"np.gradient(edge_order={edge_order}) is not supported on llgrad "
                               f"values", loc=user_loc(), fix="use edge_order=1 (the default)")
    f = _floating(f)
    nd = len(shape_of(f))
    axes = tuple(range(nd)) if axis is None else normalize_axes(axis, nd)
    varargs = [h if is_value(h) or np.ndim(h) == 0 else np.asarray(h) for h in varargs]
    if not varargs:
        spacings = [1.0] * len(axes)
    elif len(varargs) == 1 and np.ndim(varargs[0]) == 0:
        spacings = [varargs[0]] * len(axes)
    elif len(varargs) == len(axes):
        spacings = list(varargs)
    else:
        raise TypeError("invalid number of arguments")
    out = tuple(_gradient_axis(f, ax, h) for ax, h in zip(axes, spacings))
    return out[0] if len(out) == 1 else out


def _ediff1d(ary, to_end=None, to_begin=None):
    """np.ediff1d: the differences of the flattened array, to_begin before, to_end after."""
    flat = ops.ravel(as_operand(ary))
    parts = [ops.sub(flat[1:], flat[:-1])]
    dt = dtype_of(flat)
    if to_begin is not None:
        parts.insert(0, ops.ravel(ops.astype(as_operand(to_begin), dt)))
    if to_end is not None:
        parts.append(ops.ravel(ops.astype(as_operand(to_end), dt)))
    return parts[0] if len(parts) == 1 else ops.concatenate(parts, 0)


def _unwrap(p, discont=None, axis=-1, *, period=2 * np.pi):
    """np.unwrap: numpy's formula (differences taken modulo `period` into [-period/2,
    period/2), corrected where they jump by `discont` or more, the corrections summed). The
    corrections are whole periods, piecewise constant: no gradient flows through them."""
    p = as_operand(p)
    if dtype_of(p).kind != "f" and isinstance(period, (int, np.integer)):
        raise UnsupportedError("np.unwrap of integers with an integer period is not "
                               "supported on llgrad values", loc=user_loc(),
                               fix="unwrap floats: np.unwrap(p.astype(float), ...)")
    p = _floating(p)
    nd = len(shape_of(p))
    axis = normalize_axes(axis, nd)[0]
    dd = ops.diff(p, 1, axis)
    high = period / 2
    discont = high if discont is None else discont
    ddmod = ops.add(ops.remainder(ops.add(dd, high), period), -high)
    ddmod = ops.where(ops.logical_and(ops.eq(ddmod, -high), ops.gt(dd, 0)), high, ddmod)
    correct = ops.where(ops.lt(ops.abs(dd), discont), 0.0, ops.sub(ddmod, dd))
    correct = ops.stop_gradient(ops.cumsum(correct, axis))
    rest = ops.add(p[_along(nd, axis, slice(1, None))], correct)
    return ops.concatenate([p[_along(nd, axis, slice(0, 1))], rest], axis)


# ---- scipy.integrate ------------------------------------------------------------------------
def _sp_trapezoid(y, x=None, dx=1.0, axis=-1):
    return _trapezoid(y, x, dx, axis)


def _sp_cumulative_trapezoid(y, x=None, dx=1.0, axis=-1, initial=None):
    """scipy.integrate.cumulative_trapezoid: the running sums of d * (y[1:] + y[:-1]) / 2,
    with a leading 0 when initial=0 (scipy accepts no other value)."""
    y = _floating(y)
    nd = len(shape_of(y))
    axis = normalize_axes(axis, nd)[0]
    if x is None:
        d = dx
    else:
        x = as_operand(x)
        d = _on_axis(ops.diff(x), nd, axis) if len(shape_of(x)) == 1 else ops.diff(x, 1, axis)
    pieces = ops.mul(d, ops.add(y[_along(nd, axis, slice(1, None))],
                                y[_along(nd, axis, slice(None, -1))]))
    res = ops.cumsum(ops.div(pieces, 2.0), axis)
    if initial is None:
        return res
    if _nonzero(initial):
        raise ValueError("`initial` must be `None` or `0`.")
    shape = list(shape_of(res))
    shape[axis] = 1
    return ops.concatenate([np.zeros(shape, dtype_of(res)), res], axis)


# ---- histograms -------------------------------------------------------------------------------
def _histogram(a, bins=10, range=None, density=None, weights=None):
    """np.histogram: numpy's edges and bins (bin k holds e[k] <= a < e[k+1], the last one
    closed). Constant data: the (traced) weights summed per bin by one scatter-add. Traced
    data needs constant edges (bins an array, or a count with range=); its counts are then
    sums of comparisons, piecewise constant in the data (gradient 0), as numpy's are."""
    if is_value(a):
        if isinstance(bins, str) or (np.ndim(bins) == 0 and range is None):
            raise UnsupportedError(
                "np.histogram of traced data with edges computed from the data is not "
                "supported", loc=user_loc(), fix="pass the edges (bins=array) or a count with "
                "range=(lo, hi), or the data as a numpy array (weights may be traced)")
        edges = np.histogram_bin_edges(np.asarray(range if range is not None else bins,
                                                  np.float64), bins, range)
        flat = ops.reshape(as_operand(a), (-1, 1))
        inside = ops.logical_and(ops.ge(flat, edges[:-1]), ops.lt(flat, edges[1:]))
        last = np.zeros(len(edges) - 1, np.bool_)
        last[-1] = True
        hit = ops.logical_or(inside, ops.logical_and(ops.eq(flat, edges[-1]), last))
        if weights is None:
            counts = ops.sum(ops.astype(hit, np.int64), 0)
        else:
            counts = ops.sum(ops.where(hit, ops.reshape(_floating(weights), (-1, 1)), 0.0), 0)
    else:
        a = np.asarray(a)
        if isinstance(bins, str) and weights is not None:
            raise TypeError("Automated estimation of the number of bins is not supported "
                            "for weighted data")
        edges = np.histogram_bin_edges(a, bins, range)
        flat = a.reshape(-1)
        keep = np.nonzero((flat >= edges[0]) & (flat <= edges[-1]))[0]
        idx = np.minimum(np.searchsorted(edges, flat[keep], "right") - 1, len(edges) - 2)
        w = ops.reshape(_floating(weights), (-1,))
        if shape_of(w)[0] != flat.shape[0]:
            raise ValueError("weights should have the same shape as a.")
        counts = ops.index_add(np.zeros(len(edges) - 1, dtype_of(w)), (idx,), ops.take(w, keep))
    if density:
        counts = ops.div(ops.div(counts, np.diff(edges)), ops.sum(counts))
    return counts, edges


def _nonzero(v) -> bool:
    return np.ndim(v) != 0 or float(v) != 0.0


FUNCTIONS = {
    np.nanmax: _nan_extremum("max"), np.nanmin: _nan_extremum("min"),
    np.gradient: _gradient, np.ediff1d: _ediff1d, np.unwrap: _unwrap, np.histogram: _histogram,
}

SCIPY = {
    "scipy.integrate.trapezoid": _sp_trapezoid,
    "scipy.integrate.cumulative_trapezoid": _sp_cumulative_trapezoid,
}
