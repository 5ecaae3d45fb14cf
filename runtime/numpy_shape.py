"""numpy's reductions, scans, sorting, shape, construction and contraction functions on llgrad
values, with numpy's signatures: merged into runtime/numpy_api.FUNCTIONS. Arguments numpy
accepts that llgrad cannot honour (out=, order=, a structured sort order) are errors, never
silently ignored."""
from __future__ import annotations

import numpy as np

from llgrad.runtime import ops
from llgrad.runtime.errors import UnsupportedError, user_loc
from llgrad.runtime.ops import arrays as A, gather as G, stats as St
from llgrad.runtime.ops._util import as_operand, dtype_of, shape_of


def _refuse(name, **given):
    for k, v in given.items():
        if v is not None and v is not False:
            raise UnsupportedError(f"np.{name}({k}=...) is not supported on llgrad values",
                                   loc=user_loc(), fix=f"call np.{name} without {k}=")


def _reduction(kind):
    def impl(a, axis=None, dtype=None, out=None, keepdims=False, initial=None, where=True):
        _refuse(kind, out=out)
        if dtype is not None:
            a = ops.astype(a, dtype)
        if kind == "mean":
            if where is True:
                return ops.mean(a, axis, keepdims)
            return St.average(a, axis, ops.astype(ops.broadcast_to(
                where, shape_of(a)), dtype_of(ops.mean(a))), keepdims=keepdims)
        return St.masked_reduce(kind, a, axis, keepdims, initial, where)
    return impl


def _bool_reduction(fn):
    def impl(a, axis=None, out=None, keepdims=False, *, where=True):
        _refuse("all/any", out=out)
        if where is not True:
            raise UnsupportedError("np.all/np.any(where=...) is not supported on llgrad values",
                                   loc=user_loc(), fix="combine the mask first: "
                                   "np.all(cond | ~mask)")
        return fn(a, axis, keepdims)
    return impl


def _scan(fn, default_axis=None):
    def impl(a, axis=default_axis, dtype=None, out=None):
        _refuse("cumsum", out=out)
        return fn(a, axis, dtype)
    return impl


def _ufunc_reduce(impl, takes_dtype=True):
    """ufunc.reduce as the reduction `impl` (numpy's axis=0 by default)."""
    def reduce(array, axis=0, dtype=None, out=None, keepdims=False, **kw):
        if takes_dtype:
            return impl(array, axis, dtype, out, keepdims, **kw)
        _refuse("logical_and/or.reduce", dtype=dtype)
        return impl(array, axis, out, keepdims, **kw)
    return reduce


def _indices_from(fn):
    """np.triu_indices_from / tril_indices_from: index arrays of the (static) shape."""
    def impl(arr, k=0):
        shape = shape_of(arr)
        if len(shape) != 2:
            raise ValueError("input array must be 2-d")
        return fn(shape[-2], k=k, m=shape[-1])
    return impl


def _diag_indices_from(arr):
    shape = shape_of(arr)
    if len(shape) < 2:
        raise ValueError("input array must be at least 2-d")
    if len(set(shape)) != 1:
        raise ValueError("All dimensions of input must be of equal length")
    return np.diag_indices(shape[0], len(shape))


def _accumulate(fn):
    def impl(a, axis=0, dtype=None, out=None):
        _refuse("accumulate", out=out, dtype=dtype)
        return fn(a, axis)
    return impl


def _accumulate_extremum(pick):
    def impl(a, axis=0, dtype=None, out=None):
        _refuse("accumulate", out=out, dtype=dtype)
        return pick(a, axis)[0]
    return impl


def _sort(a, axis=-1, kind=None, order=None, *, stable=None):
    _refuse("sort", order=order)
    return ops.sort(a, axis)  # always stable, which every kind= allows


def _argsort(a, axis=-1, kind=None, order=None, *, stable=None):
    _refuse("argsort", order=order)
    return ops.argsort(a, axis)


def _median(a, axis=None, out=None, overwrite_input=False, keepdims=False, fn=ops.median):
    _refuse("median", out=out)
    return fn(a, axis, keepdims)


def _quantile(fn):
    def impl(a, q, axis=None, out=None, overwrite_input=False, method="linear",
             keepdims=False, *, weights=None, interpolation=None):
        _refuse("quantile", out=out, weights=weights, interpolation=interpolation)
        return fn(a, q, axis, keepdims, method)
    return impl


def _trace(a, offset=0, axis1=0, axis2=1, dtype=None, out=None):
    _refuse("trace", out=out)
    r = ops.trace(a, offset, axis1, axis2)
    return r if dtype is None else ops.astype(r, dtype)


def _einsum(*operands, out=None, optimize=False, dtype=None, **kw):
    _refuse("einsum", out=out, dtype=dtype)
    return ops.einsum(*operands)


def _cross(a, b, axisa=-1, axisb=-1, axisc=-1, axis=None):
    if axis is not None:
        axisa = axisb = axisc = axis
    a, b = ops.moveaxis(as_operand(a), axisa, -1), ops.moveaxis(as_operand(b), axisb, -1)
    return ops.moveaxis(ops.cross(a, b, -1), -1, axisc)


def _pad(array, pad_width, mode="constant", **kw):
    unknown = set(kw) - {"constant_values"}
    if unknown or callable(mode):
        raise UnsupportedError(f"np.pad({', '.join(sorted(unknown)) or 'mode=<function>'}) is "
                               "not supported on llgrad values", loc=user_loc(),
                               fix="use mode constant, edge, reflect, symmetric or wrap")
    return ops.pad(array, pad_width, mode, kw.get("constant_values", 0))


def _correlate_valid_or_padded(a, v, mode, name):
    """numpy's 1-d cross-correlation sum_n a[n + k] v[n] of `a` with a `v` no longer than it,
    `a` zero-padded as numpy's modes say, as one 1-d convolution (ops.conv correlates)."""
    n, m = shape_of(a)[0], shape_of(v)[0]
    if mode not in ("full", "same", "valid"):
        raise ValueError(f"np.{name}: mode must be 'full', 'same' or 'valid', got {mode!r}")
    pad = {"full": (m - 1, m - 1), "same": (m // 2, m - 1 - m // 2), "valid": (0, 0)}[mode]
    out = ops.conv(ops.reshape(a, (1, 1, n)), ops.reshape(v, (1, 1, m)), padding=(pad,))
    return ops.reshape(out, shape_of(out)[2:])


def _vectors(a, v, name):
    a, v = as_operand(a), as_operand(v)
    if len(shape_of(a)) > 1 or len(shape_of(v)) > 1:
        raise ValueError(f"np.{name}: the arguments must be 1-d, got shapes {shape_of(a)} "
                         f"and {shape_of(v)}")
    a, v = ops.ravel(a), ops.ravel(v)
    if 0 in (shape_of(a)[0], shape_of(v)[0]):
        raise ValueError(f"np.{name}: neither argument can be empty")
    return a, v


def _convolve(a, v, mode="full"):
    """np.convolve: the correlation of the longer argument with the shorter one reversed."""
    a, v = _vectors(a, v, "convolve")
    if shape_of(v)[0] > shape_of(a)[0]:
        a, v = v, a
    return _correlate_valid_or_padded(a, ops.flip(v, 0), mode, "convolve")


def _correlate(a, v, mode="valid"):
    """np.correlate (real arrays): c[k] = sum_n a[n + k] v[n]; reversed when v is longer."""
    a, v = _vectors(a, v, "correlate")
    if shape_of(v)[0] > shape_of(a)[0]:
        return ops.flip(_correlate_valid_or_padded(v, a, mode, "correlate"), 0)
    return _correlate_valid_or_padded(a, v, mode, "correlate")


def _insert(arr, obj, values, axis=None):
    """np.insert at one index (numpy's a[:, i:i+1, :] broadcasting of `values`)."""
    if not isinstance(obj, (int, np.integer)) or isinstance(obj, (bool, np.bool_)):
        raise UnsupportedError("np.insert at several indices (a slice or a sequence) is not "
                               "supported on llgrad values", loc=user_loc(),
                               fix="insert at one index, or build the result with "
                               "np.concatenate")
    arr = as_operand(arr)
    if axis is None:
        arr, axis = ops.ravel(arr), 0
    shape = shape_of(arr)
    axis = axis + len(shape) if axis < 0 else axis
    n = shape[axis]
    if not -n <= obj <= n:
        raise IndexError(f"index {obj} is out of bounds for axis {axis} with size {n}")
    index = int(obj) + n if obj < 0 else int(obj)
    values = ops.astype(as_operand(values), dtype_of(arr))
    vshape = shape_of(values)
    values = ops.reshape(values, (1,) * (len(shape) - len(vshape)) + vshape)
    values = ops.moveaxis(values, 0, axis)
    k = shape_of(values)[axis]
    values = ops.broadcast_to(values, shape[:axis] + (k,) + shape[axis + 1:])
    before = (slice(None),) * axis
    return ops.concatenate([arr[before + (slice(None, index),)], values,
                            arr[before + (slice(index, None),)]], axis)


# Note [searchsorted by counting]
# np.searchsorted(a, v) on a sorted 1-d `a` is the number of entries of `a` that sort before v
# (side='left': a < v; 'right': a <= v), counted over a (len(v), len(a)) comparison: no
# gradient flows through an index, and numpy's order puts NaN last (a NaN v comes after every
# number; a NaN in `a` after every number v). The comparison is O(len(a) * len(v)): grids of
# thousands of knots, as np.interp's, not searches in millions of entries.
def _searchsorted(a, v, side="left", sorter=None):
    if sorter is not None:
        a = ops.take(as_operand(a), sorter)
    a, v = as_operand(a), as_operand(v)
    if len(shape_of(a)) != 1:
        raise ValueError("np.searchsorted: the array searched must be 1-d")
    if side not in ("left", "right"):
        raise ValueError(f"np.searchsorted: side must be 'left' or 'right', got {side!r}")
    col = ops.unsqueeze(v, -1)
    nan_v = ops.isnan(col)
    if side == "left":
        before = ops.logical_or(ops.lt(a, col), ops.logical_and(nan_v, ops.logical_not(
            ops.isnan(a))))
    else:
        before = ops.logical_or(ops.le(a, col), nan_v)
    return ops.sum(ops.astype(before, np.int64), -1)


def _interp(x, xp, fp, left=None, right=None, period=None):
    """np.interp with numpy's formula (slope * (x - xp[j]) + fp[j] on the interval xp[j] <= x
    < xp[j + 1]; fp[-1] at xp[-1]; `left` / `right` outside); differentiable in x and fp."""
    if period is not None:
        raise UnsupportedError("np.interp(period=...) is not supported on llgrad values",
                               loc=user_loc(), fix="reduce x modulo the period first")
    x, xp, fp = (ops.astype(as_operand(v), "float64") for v in (x, xp, fp))  # (as numpy)
    n = shape_of(xp)[0]
    if n == 0 or shape_of(fp) != (n,):
        raise ValueError("np.interp: xp and fp must be 1-d sequences of the same, non-zero "
                         "length")
    first, last = fp[0], fp[n - 1]
    if n == 1:
        out = ops.broadcast_to(first, shape_of(x))
    else:
        j = ops.clip(ops.sub(_searchsorted(xp, x, "right"), 1), 0, n - 2)
        x0, f0 = ops.take(xp, j), ops.take(fp, j)
        slope = ops.div(ops.sub(ops.take(fp, ops.add(j, 1)), f0),
                        ops.sub(ops.take(xp, ops.add(j, 1)), x0))
        out = ops.add(ops.mul(slope, ops.sub(x, x0)), f0)
        out = ops.where(ops.eq(x, xp[n - 1]), last, out)
    out = ops.where(ops.lt(x, xp[0]), first if left is None else left, out)
    return ops.where(ops.gt(x, xp[n - 1]), last if right is None else right, out)


def _trapezoid(y, x=None, dx=1.0, axis=-1):
    """np.trapezoid (np.trapz): numpy's sum of d * (y[1:] + y[:-1]) / 2 along `axis`."""
    y = as_operand(y)
    nd = len(shape_of(y))
    if x is None:
        d = dx
    else:
        x = as_operand(x)
        if len(shape_of(x)) == 1:
            d = ops.diff(x)
            shape = [1] * nd
            shape[axis] = shape_of(d)[0]
            d = ops.reshape(d, tuple(shape))
        else:
            d = ops.diff(x, 1, axis)
    hi, lo = [slice(None)] * nd, [slice(None)] * nd
    hi[axis], lo[axis] = slice(1, None), slice(None, -1)
    return ops.sum(ops.div(ops.mul(d, ops.add(y[tuple(hi)], y[tuple(lo)])), 2.0), axis)


def _polyval(p, x):
    """np.polyval by numpy's Horner loop (y = y * x + p[k], from zeros like x)."""
    p, x = as_operand(p), as_operand(x)
    y = np.zeros(shape_of(x), dtype_of(x))
    for k in range(shape_of(p)[0]):
        y = ops.add(ops.mul(y, x), p[k])
    return y


def _atleast(fn):
    def impl(*arys):
        out = [fn(a) for a in arys]
        return out[0] if len(out) == 1 else tuple(out)
    return impl


def _stack(fn):
    def impl(tup, *, dtype=None, casting="same_kind"):
        _refuse("stack", dtype=dtype)
        return fn(list(tup))
    return impl


def _like(fill):
    def impl(a, dtype=None, order="K", subok=True, shape=None, **kw):
        return A.full_like(a, fill, dtype, shape)
    return impl


def _full_like(a, fill_value, dtype=None, order="K", subok=True, shape=None, **kw):
    return A.full_like(a, fill_value, dtype, shape)


def _sliding_window_view(x, window_shape, axis=None, *, subok=False, writeable=False):
    _refuse("lib.stride_tricks.sliding_window_view", writeable=writeable)
    return A.sliding_window_view(x, window_shape, axis)


def _ix(*args):
    """np.ix_: the k-th 1-d sequence of indices reshaped along the k-th of len(args) axes, so
    that `K[np.ix_(rows, cols)]` (read or `+=`) is the block of those rows and columns, as
    finite-element assembly indexes a stiffness matrix with an element's nodes."""
    from llgrad.runtime.conversions import array_from, holds_value
    out = []
    for k, seq in enumerate(args):
        a = array_from(seq) if holds_value(seq) else np.asarray(seq)
        if isinstance(a, np.ndarray) and a.dtype == np.bool_:
            a = np.flatnonzero(a)
        if len(shape_of(a)) != 1:
            raise ValueError("Cross index must be 1 dimensional")
        if dtype_of(a) == np.bool_:
            raise UnsupportedError("np.ix_ of a traced boolean mask is not supported on llgrad "
                                   "values (its length depends on the values)", loc=user_loc(),
                                   fix="pass the indices (np.flatnonzero of a constant mask)")
        shape = [1] * len(args)
        shape[k] = shape_of(a)[0]
        out.append(ops.reshape(a, tuple(shape)))
    return tuple(out)


def _take(a, indices, axis=None, out=None, mode="raise"):
    _refuse("take", out=out)
    return ops.take(a, indices, axis, mode)


def _ptp(a, axis=None, out=None, keepdims=False):
    _refuse("ptp", out=out)
    return ops.ptp(a, axis, keepdims)


def _nan(fn):
    def impl(a, axis=None, dtype=None, out=None, keepdims=False, **kw):
        _refuse("nansum/nanmean", out=out, dtype=dtype)
        return fn(a, axis, keepdims)
    return impl


# NaN-ignoring variants: numpy's functions on x with its NaNs replaced by the neutral value
# first (a replaced NaN gets no gradient; computing on x and masking after would give
# 0 * NaN = NaN in the backward, the "double where" trap).
def _filled(a, fill):
    a = as_operand(a)
    return ops.where(ops.isnan(a), fill, a) if dtype_of(a).kind == "f" else a


def _nan_fill(fn, fill):
    def impl(a, *args, **kw):
        return fn(_filled(a, fill), *args, **kw)
    return impl


def _nan_var(root: bool):
    def impl(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, **kw):
        _refuse("nanvar/nanstd", out=out, dtype=dtype)
        a = as_operand(a)
        keep = ops.astype(ops.logical_not(ops.isnan(a)), dtype_of(a))
        x = _filled(a, 0.0)
        n = np.sum(keep, axis=axis, keepdims=True)
        dev = ops.mul(ops.sub(x, ops.div(np.sum(x, axis=axis, keepdims=True), n)), keep)
        var = ops.div(np.sum(ops.mul(dev, dev), axis=axis, keepdims=keepdims),
                      ops.sub(np.sum(keep, axis=axis, keepdims=keepdims), float(ddof)))
        return ops.sqrt(var) if root else var
    return impl


def _nan_arg(fn, fill):
    def impl(a, axis=None, out=None, *, keepdims=False):
        _refuse("nanargmax/nanargmin", out=out)
        return fn(_filled(a, fill), axis=axis, keepdims=keepdims)
    return impl


def _block(arrays):
    """np.block: nested lists concatenated along the last axes, innermost along -1."""
    def depth(a):
        return 1 + depth(a[0]) if type(a) is list and a else 0
    levels = depth(arrays)
    leaves = []

    def collect(a):
        if type(a) is list:
            for e in a:
                collect(e)
        else:
            leaves.append(as_operand(a))
    collect(arrays)
    nd = max(levels, *(len(shape_of(x)) for x in leaves))

    def build(a, level):
        if type(a) is not list:
            x = as_operand(a)
            return ops.reshape(x, (1,) * (nd - len(shape_of(x))) + shape_of(x))
        return ops.concatenate([build(e, level + 1) for e in a], nd - (levels - level))
    return build(arrays, 0)


def _rot90(m, k=1, axes=(0, 1)):
    m = as_operand(m)
    a, b = (ax % len(shape_of(m)) for ax in axes)
    k %= 4
    if k == 0:
        return m
    if k == 2:
        return ops.flip(ops.flip(m, a), b)
    perm = list(range(len(shape_of(m))))
    perm[a], perm[b] = perm[b], perm[a]
    return ops.transpose(ops.flip(m, b), perm) if k == 1 else ops.flip(ops.transpose(m, perm), b)


def _broadcast_arrays(*args, subok=False):
    shape = np.broadcast_shapes(*(shape_of(as_operand(a)) for a in args))
    return tuple(ops.broadcast_to(as_operand(a), shape) for a in args)


def _unstack(x, /, *, axis=0):
    x = ops.movedim(as_operand(x), axis, 0)
    return tuple(x[i] for i in range(shape_of(x)[0]))


def _linspace(start, stop, num=50, endpoint=True, retstep=False, dtype=None, axis=0, **kw):
    """np.linspace with traced endpoints, as numpy computes it: k * step + start, the last
    point `stop` itself."""
    if num < 0:
        raise ValueError(f"Number of samples, {num}, must be non-negative.")
    start, stop = ops.astype(as_operand(start), np.float64), ops.astype(as_operand(stop), np.float64)
    shape = np.broadcast_shapes(shape_of(start), shape_of(stop))
    start, stop = ops.broadcast_to(start, shape), ops.broadcast_to(stop, shape)
    div = num - 1 if endpoint else num
    step = ops.div(ops.sub(stop, start), float(div)) if div > 0 else np.full(shape, np.nan)
    k = np.arange(num, dtype=np.float64).reshape((num,) + (1,) * len(shape))
    y = ops.add(ops.mul(k, ops.unsqueeze(step, 0)), ops.unsqueeze(start, 0)) if div > 0 else \
        ops.broadcast_to(ops.unsqueeze(start, 0), (num,) + shape)
    if endpoint and num > 1:
        y = ops.concatenate([y[:-1], ops.unsqueeze(stop, 0)], 0)
    if axis != 0:
        y = ops.movedim(y, 0, axis)
    if dtype is not None:
        y = ops.astype(y, dtype)
    return (y, step) if retstep else y


def _logspace(start, stop, num=50, endpoint=True, base=10.0, dtype=None, axis=0):
    y = ops.pow(base, _linspace(start, stop, num, endpoint, axis=axis))
    return y if dtype is None else ops.astype(y, dtype)


def _array_equal(a1, a2, equal_nan=False):
    a1, a2 = as_operand(a1), as_operand(a2)
    if shape_of(a1) != shape_of(a2):
        return False
    same = ops.eq(a1, a2)
    if equal_nan:
        same = ops.logical_or(same, ops.logical_and(ops.isnan(a1), ops.isnan(a2)))
    return St.all(same)


def _array_equiv(a1, a2):
    a1, a2 = as_operand(a1), as_operand(a2)
    try:
        np.broadcast_shapes(shape_of(a1), shape_of(a2))
    except ValueError:
        return False
    return St.all(ops.eq(a1, a2))


def _isin(element, test_elements, assume_unique=False, invert=False, *, kind=None):
    element, tests = as_operand(element), ops.ravel(as_operand(test_elements))
    found = St.any(ops.eq(ops.unsqueeze(element, -1), tests), -1)
    return ops.logical_not(found) if invert else found


def _diff(a, n=1, axis=-1, prepend=None, append=None):
    return ops.diff(a, n, axis, prepend, append)


FUNCTIONS = {
    # reductions (with numpy's initial= / where=) and scans
    np.sum: _reduction("sum"), np.prod: _reduction("prod"), np.mean: _reduction("mean"),
    np.max: _reduction("max"), np.amax: _reduction("max"),
    np.min: _reduction("min"), np.amin: _reduction("min"),
    np.all: _bool_reduction(St.all), np.any: _bool_reduction(St.any),
    np.count_nonzero: lambda a, axis=None, *, keepdims=False: St.count_nonzero(a, axis,
                                                                                keepdims),
    np.ptp: _ptp, np.average: St.average, np.diff: _diff, np.cov: St.cov,
    np.corrcoef: St.corrcoef,
    np.nansum: _nan(St.nansum), np.nanmean: _nan(St.nanmean),
    np.nanprod: _nan_fill(np.prod, 1.0), np.nancumsum: _nan_fill(np.cumsum, 0.0),
    np.nancumprod: _nan_fill(np.cumprod, 1.0), np.nanvar: _nan_var(False),
    np.nanstd: _nan_var(True), np.nanargmax: _nan_arg(np.argmax, -np.inf),
    np.nanargmin: _nan_arg(np.argmin, np.inf),
    np.cumsum: _scan(ops.cumsum), np.cumprod: _scan(ops.cumprod),
    np.add.accumulate: _scan(ops.cumsum, 0), np.multiply.accumulate: _scan(ops.cumprod, 0),
    np.maximum.accumulate: _accumulate_extremum(ops.cummax),
    np.minimum.accumulate: _accumulate_extremum(ops.cummin),
    np.logaddexp.accumulate: _accumulate(ops.logcumsumexp),
    # ufunc.reduce: the reductions, with numpy's axis=0 by default
    np.add.reduce: _ufunc_reduce(_reduction("sum")),
    np.multiply.reduce: _ufunc_reduce(_reduction("prod")),
    np.maximum.reduce: _ufunc_reduce(_reduction("max")),
    np.minimum.reduce: _ufunc_reduce(_reduction("min")),
    np.logical_and.reduce: _ufunc_reduce(_bool_reduction(St.all), False),
    np.logical_or.reduce: _ufunc_reduce(_bool_reduction(St.any), False),
    np.sort: _sort, np.argsort: _argsort, np.median: _median,
    np.quantile: _quantile(ops.quantile), np.percentile: _quantile(ops.percentile),
    np.nanquantile: _quantile(ops.nanquantile), np.nanpercentile: _quantile(ops.nanpercentile),
    np.nanmedian: lambda a, axis=None, out=None, overwrite_input=False, keepdims=False:
        _median(a, axis, out, keepdims=keepdims, fn=ops.nanmedian),
    # shape and structure
    np.flip: lambda m, axis=None: ops.flip(m, axis), np.fliplr: lambda m: ops.flip(m, 1),
    np.flipud: lambda m: ops.flip(m, 0), np.roll: lambda a, shift, axis=None: ops.roll(
        a, shift, axis), np.pad: _pad, np.tile: A.tile, np.repeat: G.repeat,
    np.insert: _insert, np.searchsorted: _searchsorted, np.interp: _interp,
    np.polyval: _polyval,
    **{f: _trapezoid for f in (getattr(np, "trapezoid", None), getattr(np, "trapz", None))
       if f is not None},
    np.vstack: _stack(A.vstack), np.hstack: _stack(A.hstack), np.dstack: _stack(A.dstack),
    np.column_stack: lambda tup: A.column_stack(list(tup)),
    np.atleast_1d: _atleast(A.atleast_1d), np.atleast_2d: _atleast(A.atleast_2d),
    np.atleast_3d: _atleast(A.atleast_3d), np.moveaxis: A.moveaxis, np.rollaxis: A.rollaxis,
    np.lib.stride_tricks.sliding_window_view: _sliding_window_view,
    np.split: A.split, np.array_split: A.array_split, np.hsplit: A.hsplit,
    np.vsplit: A.vsplit, np.dsplit: A.dsplit,
    np.tril: lambda m, k=0: ops.tril(m, k), np.triu: lambda m, k=0: ops.triu(m, k),
    np.triu_indices_from: _indices_from(np.triu_indices),
    np.tril_indices_from: _indices_from(np.tril_indices),
    np.diag_indices_from: _diag_indices_from,
    np.diag: lambda v, k=0: ops.diag(v, k), np.diagonal: ops.diagonal, np.trace: _trace,
    np.diagflat: lambda v, k=0: ops.diag(ops.ravel(v), k), np.block: _block, np.rot90: _rot90,
    np.broadcast_arrays: _broadcast_arrays,
    np.take: _take, np.take_along_axis: lambda arr, indices, axis=-1: ops.take_along_axis(
        arr, indices, axis), np.ix_: _ix,
    # contractions
    np.einsum: _einsum, np.tensordot: ops.tensordot, np.inner: ops.inner, np.vdot: ops.vdot,
    np.kron: ops.kron, np.cross: _cross, np.convolve: _convolve, np.correlate: _correlate,
    # construction from traced arrays
    np.full_like: _full_like, np.empty_like: _like(0), np.linspace: _linspace,
    np.logspace: _logspace, np.array_equal: _array_equal, np.array_equiv: _array_equiv,
    np.isin: _isin,
    np.meshgrid: lambda *xi, copy=True, sparse=False, indexing="xy": A.meshgrid(
        *xi, indexing=indexing, sparse=sparse),
}
for _name, _fn in (("unstack", _unstack), ("matrix_transpose",
                                          lambda x, /: ops.swapaxes(as_operand(x), -1, -2)),
                   ("vecdot", lambda x1, x2, /, *, axis=-1, **kw: np.sum(
                       np.conj(x1) * x2, axis=axis)),
                   ("matvec", lambda x1, x2, /, **kw: (x1 @ x2[..., None])[..., 0]),
                   ("vecmat", lambda x1, x2, /, **kw: (np.conj(x1)[..., None, :] @ x2)[..., 0, :])):
    if hasattr(np, _name):  # (numpy 2.1+)
        FUNCTIONS[getattr(np, _name)] = _fn
if hasattr(np, "row_stack"):
    FUNCTIONS[np.row_stack] = _stack(A.vstack)
