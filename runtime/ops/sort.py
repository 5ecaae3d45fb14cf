"""Sorting: the argsort primitive (stable; lowered to a merge sort in
codegen/lowerings/sort.py), sort (one eager node, PyTorch's SortBackward0; the compiler sees a
gather through argsort's indices, so each output's gradient goes to the input it came from),
and median / quantile / percentile built on sort.

NaNs sort last (numpy), or first with descending=True (PyTorch, where NaN is the largest).
"""
from __future__ import annotations

import numpy as np

from llgrad.runtime.aval import I64, Aval, ShapeError, normalize_axes
from llgrad.runtime.ops import elementwise as ew
from llgrad.runtime.ops._util import dtype_of, operands, shape_of
from llgrad.runtime.ops.gather import gather_p, put_along_axis_add
from llgrad.runtime.prim import Primitive, bind, register


def _argsort_impl(x, axis, descending):
    if not descending:
        return np.argsort(x, axis, kind="stable").astype(np.int64)
    # equal keys keep their order; ~x reverses integers and bools without -x's overflow of
    # the most negative int64
    idx = np.argsort(-x if x.dtype.kind == "f" else ~x, axis, kind="stable")
    if x.dtype.kind == "f":  # NaNs (last after negation) move to the front, in order
        nan_first = np.argsort(~np.isnan(np.take_along_axis(x, idx, axis)), axis, kind="stable")
        idx = np.take_along_axis(idx, nan_first, axis)
    return idx.astype(np.int64)


argsort_p = register(Primitive(
    "argsort", "sort", _argsort_impl, lambda x, axis, descending: Aval(x.shape, I64),
    nondiff=True))


def _sort_impl(x, axis, descending):
    if not descending:
        return np.sort(x, axis, kind="stable")
    return np.take_along_axis(x, _argsort_impl(x, axis, True), axis)


def _sort_vjp(g, out, x, axis, descending):
    return put_along_axis_add(g, bind(argsort_p, x, axis=axis, descending=descending), axis,
                              shape_of(x))


sort_p = register(Primitive(
    "sort", "sort", _sort_impl, lambda x, axis, descending: Aval(x.shape, x.dtype),
    (_sort_vjp,), saves=(0,),
    decompose=lambda x, axis, descending: bind(
        gather_p, x, bind(argsort_p, x, axis=axis, descending=descending), axis=axis),
    node_name="SortBackward0"))


# ---- the ops API ------------------------------------------------------------------------------
def _axis_input(x, axis):
    """(x, axis, was_0d): axis=None flattens; a 0-d x sorts as one element."""
    from llgrad.runtime.ops.shape import reshape
    (x,), _ = operands(x)
    if axis is None:
        return reshape(x, (-1,)), 0, False
    if not shape_of(x):
        if axis not in (0, -1):
            raise ShapeError(f"axis {axis} is out of bounds for a 0-d array")
        return reshape(x, (1,)), 0, True
    return x, normalize_axes(axis, len(shape_of(x)))[0], False


def sort(x, axis=-1, descending=False):
    """Values sorted along `axis` (stable; axis=None sorts the flattened array)."""
    from llgrad.runtime.ops.shape import reshape
    x, axis, scalar = _axis_input(x, axis)
    r = bind(sort_p, x, axis=axis, descending=descending)
    return reshape(r, ()) if scalar else r


def argsort(x, axis=-1, descending=False):
    """Indices that sort x along `axis` (stable: equal values keep their order)."""
    from llgrad.runtime.ops.shape import reshape
    x, axis, scalar = _axis_input(x, axis)
    r = bind(argsort_p, x, axis=axis, descending=descending)
    return reshape(r, ()) if scalar else r


def _floating(x):
    (x,), dt = operands(x)
    return x if dt.kind == "f" else ew.astype(x, np.float64)


def _sorted_along(x, axis):
    """(sorted x with the reduction axis last, its length); axis=None flattens, a tuple of
    axes is moved to the end and merged (numpy's median/quantile over several axes)."""
    from llgrad.runtime.ops.shape import reshape, transpose
    x = _floating(x)
    nd = len(shape_of(x))
    axes = tuple(range(nd)) if axis is None else normalize_axes(axis, nd)
    keep = [d for d in range(nd) if d not in axes]
    x = transpose(x, keep + list(axes))
    n = int(np.prod([shape_of(x)[len(keep) + i] for i in range(len(axes))], dtype=np.int64))
    x = reshape(x, tuple(shape_of(x)[:len(keep)]) + (n,))
    if n == 0:
        raise ShapeError("median/quantile of an empty array",
                         fix="check the array's shape and the axis")
    return bind(sort_p, x, axis=len(keep), descending=False), n, axes


def _at(s, k):
    from llgrad.runtime.ops.index import getitem
    return getitem(s, (Ellipsis, k))


def _nan_guard(r, s):
    # NaNs sort last: where any is present, numpy's median/quantile is NaN
    last = _at(s, -1)
    return ew.where(ew.ne(last, last), np.nan, r)


def _keep(r, x_shape, axes, keepdims):
    from llgrad.runtime.ops.shape import reshape
    if not keepdims:
        return r
    lead = shape_of(r)[:len(shape_of(r)) - (len(x_shape) - len(axes))]
    return reshape(r, lead + tuple(1 if d in axes else n for d, n in enumerate(x_shape)))


def median(x, axis=None, keepdims=False):
    """numpy's median: the middle of the sorted values (the mean of the two middle ones for
    an even count); NaN where the data has a NaN."""
    shape = shape_of(x)
    s, n, axes = _sorted_along(x, axis)
    r = _at(s, n // 2) if n % 2 else ew.div(ew.add(_at(s, n // 2 - 1), _at(s, n // 2)), 2.0)
    return _keep(_nan_guard(r, s), shape, axes, keepdims)


# numpy's quantile methods that interpolate between order statistics: (alpha, beta) of the
# continuous ones (Hyndman and Fan), the virtual index (n q + alpha + q (1 - alpha - beta) - 1
# in numpy's _compute_virtual_index); the others pick or average neighbours of (n - 1) q.
_CONTINUOUS = {"linear": (1.0, 1.0), "hazen": (0.5, 0.5), "weibull": (0.0, 0.0),
               "median_unbiased": (1 / 3, 1 / 3), "normal_unbiased": (3 / 8, 3 / 8),
               "interpolated_inverted_cdf": (0.0, 1.0)}
_NEIGHBOURS = ("lower", "higher", "nearest", "midpoint")


def _order_statistic_weights(qk: float, n: int, method: str, dt) -> tuple[int, int, float]:
    """(lo, hi, t): numpy's quantile `qk` of n sorted values is s[lo] + (s[hi] - s[lo]) t."""
    if method in _CONTINUOUS:
        alpha, beta = _CONTINUOUS[method]
        virtual = n * qk + (alpha + qk * (1 - alpha - beta)) - 1
        if virtual >= n - 1:
            return n - 1, n - 1, 0.0
        if virtual < 0:
            return 0, 0, 0.0
        lo = int(np.floor(virtual))
        return lo, lo + 1, float(np.asarray(virtual - lo, dt))
    virtual = qk * (n - 1)
    lo, hi = int(np.floor(virtual)), int(np.ceil(virtual))
    if method == "lower":
        return lo, lo, 0.0
    if method == "higher":
        return hi, hi, 0.0
    if method == "nearest":  # (numpy rounds half to even)
        k = int(np.around(virtual))
        return k, k, 0.0
    return lo, hi, 0.5 if hi != lo else 0.0  # midpoint


def quantile(x, q, axis=None, keepdims=False, method="linear"):
    """numpy's quantile (q in [0, 1], static) for the methods that interpolate (linear, the
    default, hazen, weibull, median_unbiased, normal_unbiased, interpolated_inverted_cdf) or
    pick neighbours (lower, higher, nearest, midpoint); a sequence of q gives a leading axis of
    results, as numpy."""
    from llgrad.runtime.errors import UnsupportedError, user_loc
    from llgrad.runtime.ops.shape import stack
    if method not in _CONTINUOUS and method not in _NEIGHBOURS:
        raise UnsupportedError(
            f"quantile(method={method!r}) is not supported on llgrad values", loc=user_loc(),
            fix="use one of " + ", ".join([*_CONTINUOUS, *_NEIGHBOURS]))
    qs = np.asarray(q, np.float64)
    if qs.ndim > 1 or np.any((qs < 0) | (qs > 1)) or np.any(np.isnan(qs)):
        raise ShapeError("quantile: q must be a number or a 1-d sequence of numbers in [0, 1]")
    shape = shape_of(x)
    if not isinstance(q, (int, float)):  # an array of q promotes, as in numpy (f32 -> f64)
        x = _floating(x)
        dt = np.result_type(dtype_of(x), np.asarray(q))
        x = x if dt == dtype_of(x) else ew.astype(x, dt)
    s, n, axes = _sorted_along(x, axis)
    dt = dtype_of(s)
    out = []
    for qk in qs.reshape(-1):
        lo, hi, t = _order_statistic_weights(float(qk), n, method, dt)
        a, b = _at(s, lo), _at(s, hi)
        if lo == hi:
            r = a
        else:  # numpy's _lerp: a + (b - a) t, or b - (b - a)(1 - t) for t >= 0.5
            d = ew.sub(b, a)
            r = ew.sub(b, ew.mul(d, 1.0 - t)) if t >= 0.5 else ew.add(a, ew.mul(d, t))
        out.append(_keep(_nan_guard(r, s), shape, axes, keepdims))
    return out[0] if qs.ndim == 0 else stack(out, 0)


def percentile(x, q, axis=None, keepdims=False, method="linear"):
    return quantile(x, np.true_divide(np.asarray(q, np.float64), 100), axis, keepdims, method)


def nanquantile(x, q, axis=None, keepdims=False, method="linear"):
    """numpy's nanquantile with the linear method: quantile of the values that are not NaN.
    Their count k varies along the other axes, so the order statistics (k - 1) q are picked
    with take_along_axis at traced positions of the sorted values (NaNs sort last); the
    gradient flows to the picked values, as quantile's. NaN where all values are NaN."""
    from llgrad.runtime.errors import UnsupportedError, user_loc
    from llgrad.runtime.ops.gather import take_along_axis
    from llgrad.runtime.ops.reduce import sum as sum_
    from llgrad.runtime.ops.shape import stack, unsqueeze
    if method != "linear":
        raise UnsupportedError(f"nanquantile(method={method!r}) is not supported on llgrad "
                               "values", loc=user_loc(), fix="use method='linear' (the default)")
    qs = np.asarray(q, np.float64)
    if qs.ndim > 1 or np.any((qs < 0) | (qs > 1)) or np.any(np.isnan(qs)):
        raise ShapeError("quantile: q must be a number or a 1-d sequence of numbers in [0, 1]")
    shape = shape_of(x)
    s, n, axes = _sorted_along(x, axis)
    dt = dtype_of(s)
    k = sum_(ew.astype(ew.eq(s, s), dt), -1)  # the values that are not NaN
    last = ew.maximum(ew.sub(k, 1.0), 0.0)
    out = []
    for qk in qs.reshape(-1):
        virtual = ew.mul(last, float(qk))
        lo = ew.floor(virtual)
        hi = ew.minimum(ew.add(lo, 1.0), last)
        t = ew.sub(virtual, lo)
        a, b = (take_along_axis(s, unsqueeze(ew.astype(i, np.int64), -1), -1)[..., 0]
                for i in (lo, hi))
        d = ew.sub(b, a)  # numpy's _lerp
        r = ew.where(ew.ge(t, 0.5), ew.sub(b, ew.mul(d, ew.sub(1.0, t))), ew.add(a, ew.mul(d, t)))
        out.append(_keep(ew.where(ew.eq(k, 0.0), np.nan, r), shape, axes, keepdims))
    return out[0] if qs.ndim == 0 else stack(out, 0)


def nanpercentile(x, q, axis=None, keepdims=False, method="linear"):
    return nanquantile(x, np.true_divide(np.asarray(q, np.float64), 100), axis, keepdims, method)


def nanmedian(x, axis=None, keepdims=False):
    return nanquantile(x, 0.5, axis, keepdims)
