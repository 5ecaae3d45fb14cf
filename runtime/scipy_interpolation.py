"""scipy.ndimage's interpolation on llgrad values, with scipy's signatures: shift, zoom and
map_coordinates. See Note [Interpolation as constant matrices]. `SCIPY` joins
runtime/numpy_api.LAZY (Note [Lazily named functions] there)."""
from __future__ import annotations

import numpy as np

from llgrad.runtime import ops
from llgrad.runtime.errors import UnsupportedError, user_loc
from llgrad.runtime.ops._util import as_operand, dtype_of, shape_of
from llgrad.runtime.prim import is_value

# Note [Interpolation as constant matrices]
# shift and zoom with constant amounts are linear maps of the input, separable by axis: the
# spline prefilter runs along each axis in turn, and each output coordinate along an axis
# depends on the output index along that axis only. So each is one constant matrix per axis,
# which scipy itself computes exactly: its own shift/zoom applied to the identity (the
# identity's other axis is left in place), for every order (0-5), mode and prefilter, with
# the constant cval part added from scipy's result on zeros. Values then equal scipy's up to
# rounding, and the gradient is the transposed matrices. map_coordinates' coordinates are not
# separable (and may be traced): there order 0 and 1 are written out, the gradient flowing to
# the input values and (order 1) to the coordinates; higher orders are refused.


def _operand(name: str, input, output):
    if output is not None:
        raise UnsupportedError(f"scipy.ndimage.{name}(output=...) is not supported on traced "
                               f"values", loc=user_loc(), fix="use the returned array")
    x = as_operand(input)
    if dtype_of(x).kind != "f":
        raise UnsupportedError(f"scipy.ndimage.{name} of {dtype_of(x)} values is not supported "
                               f"on traced values (scipy rounds the result to integers)",
                               loc=user_loc(), fix="pass a float array")
    return x


def _per_axis(value, nd: int, name: str, what: str, fix: str) -> list:
    if is_value(value):
        raise UnsupportedError(f"scipy.ndimage.{name} with a traced {what} is not supported",
                               loc=user_loc(), fix=fix)
    v = np.asarray(value, np.float64)
    return list(np.broadcast_to(v, (nd,)) if v.ndim == 0 else v)


def _separable(x, scipy_fn, params: list, neutral: float, cval: float, **kw):
    """x through one constant matrix per axis (Note [Interpolation as constant matrices]):
    `scipy_fn(array, per-axis params, cval=, **kw)` is scipy's function, `neutral` the
    parameter that leaves an axis alone (shift 0, zoom 1)."""
    shape, dt = shape_of(x), dtype_of(x)
    for axis, p in enumerate(params):
        # (scipy along axis 1 of the identity: row j is the image of the j-th basis vector)
        image = scipy_fn(np.eye(shape[axis]), [neutral, p], cval=0.0, **kw)
        x = ops.moveaxis(ops.matmul(ops.moveaxis(x, axis, -1), image.astype(dt)), -1, axis)
    if cval != 0:
        x = ops.add(x, scipy_fn(np.zeros(shape), params, cval=cval, **kw).astype(dt))
    return x


def shift(input, shift, output=None, order=3, mode="constant", cval=0.0, prefilter=True):
    """scipy.ndimage.shift: out[i] = input[i - shift], interpolated (spline of `order`)."""
    import scipy.ndimage
    x = _operand("shift", input, output)
    nd = len(shape_of(x))
    if is_value(shift) and order <= 1:
        grid = np.indices(shape_of(x), dtype=np.float64)
        s = ops.reshape(ops.astype(shift, np.float64), (-1,) + (1,) * nd)
        return map_coordinates(x, ops.sub(grid, s), None, order, mode, cval)
    amounts = _per_axis(shift, nd, "shift", "shift (at order > 1)",
                        "pass the shift as numbers, or use order=1")
    return _separable(x, scipy.ndimage.shift, amounts, 0.0, float(cval), order=order,
                      mode=mode, prefilter=prefilter)


def zoom(input, zoom, output=None, order=3, mode="constant", cval=0.0, prefilter=True, *,
         grid_mode=False):
    """scipy.ndimage.zoom by constant factors (output shape round(n * zoom), as scipy)."""
    import scipy.ndimage
    x = _operand("zoom", input, output)
    factors = _per_axis(zoom, len(shape_of(x)), "zoom", "zoom factor",
                        "pass the zoom factors as numbers (they set the output's shape)")
    return _separable(x, scipy.ndimage.zoom, factors, 1.0, float(cval), order=order,
                      mode=mode, prefilter=prefilter, grid_mode=grid_mode)


# map_coordinates' boundary modes for order 0 and 1: how an integer index outside [0, n) maps
# inside (scipy's extensions: 'reflect' repeats the edge sample, 'mirror' does not), or None
# where an outside sample is cval ('grid-constant') / the point itself is cval ('constant').
# (numpy-written: on traced indices they run through __array_function__.)
def _reflect(i, n):
    p = np.mod(i, 2 * n)
    return np.where(p < n, p, 2 * n - 1 - p)


def _mirror(i, n):
    if n == 1:
        return np.zeros_like(i)
    p = np.mod(i, 2 * n - 2)
    return np.where(p < n, p, 2 * n - 2 - p)


_LINEAR_MODES = {"nearest": lambda i, n: np.clip(i, 0, n - 1), "reflect": _reflect,
                 "grid-mirror": _reflect, "mirror": _mirror,
                 "grid-wrap": lambda i, n: np.mod(i, n), "constant": None,
                 "grid-constant": None}


def map_coordinates(input, coordinates, output=None, order=3, mode="constant", cval=0.0,
                    prefilter=True):
    """scipy.ndimage.map_coordinates for order 0 (nearest sample, ties up) and 1 (linear);
    the coordinates may be traced (order 1: the gradient flows to them too)."""
    x = _operand("map_coordinates", input, output)
    nd, dt = len(shape_of(x)), dtype_of(x)
    if order not in (0, 1):
        raise UnsupportedError(
            f"scipy.ndimage.map_coordinates(order={order}) is not supported on traced values: "
            f"only order=0 and order=1 (linear interpolation; the default is the cubic "
            f"spline, order=3)", loc=user_loc(),
            fix="pass order=1 (or use scipy.ndimage.shift/zoom, which support every order)")
    if mode not in _LINEAR_MODES or (order == 0 and mode not in (
            "nearest", "constant", "grid-constant")):
        raise UnsupportedError(f"scipy.ndimage.map_coordinates(order={order}, mode={mode!r}) "
                               f"is not supported on traced values", loc=user_loc(),
                               fix="use mode='constant', 'nearest' or 'grid-constant' "
                               "(order=1 also 'reflect', 'mirror', 'grid-mirror', 'grid-wrap')")
    c = as_operand(coordinates) if is_value(coordinates) else np.asarray(coordinates, dt)
    if len(shape_of(c)) == 0 or shape_of(c)[0] != nd:
        raise RuntimeError("invalid shape for coordinate array")
    c = ops.astype(c, dt) if is_value(c) else c
    flat = ops.reshape(x, (-1,))
    strides = [int(np.prod(shape_of(x)[k + 1:])) for k in range(nd)]
    outside = None  # 'constant': the points outside [0, n - 1] along some axis
    corners = [(None, 1.0)]  # (flat index, weight) of the samples interpolated
    for k in range(nd):
        n, ck = shape_of(x)[k], c[k]
        if mode == "constant":
            out_k = ops.logical_or(ops.lt(ck, 0.0), ops.gt(ck, n - 1.0))
            outside = out_k if outside is None else ops.logical_or(outside, out_k)
        if mode == "nearest":
            ck = ops.clip(ck, 0.0, n - 1.0)
        if order == 0:
            base = ops.floor(ops.add(ck, 0.5))
            steps = [(base, None)]
        else:
            base = ops.floor(ck)
            t = ops.sub(ck, base)
            steps = [(base, ops.sub(1.0, t)), (ops.add(base, 1.0), t)]
        new = []
        for idx, w in steps:
            i = ops.astype(ops.stop_gradient(idx), np.int64)
            valid = None
            if mode == "grid-constant":
                valid = ops.logical_and(ops.ge(i, 0), ops.lt(i, n))
            fix = _LINEAR_MODES[mode]
            i = ops.clip(i, 0, n - 1) if fix is None else fix(i, n)
            if valid is not None:
                w = ops.where(valid, 1.0 if w is None else w, 0.0)
            for f, wf in corners:
                term = ops.mul(i, strides[k])
                new.append((term if f is None else ops.add(f, term),
                            wf if w is None else ops.mul(wf, w)))
        corners = new
    out = None
    for f, w in corners:
        v = ops.take(flat, f)
        v = v if isinstance(w, float) else ops.mul(v, w)
        out = v if out is None else ops.add(out, v)
    if mode == "grid-constant":  # outside samples are cval: add cval times their weights
        total = None
        for _, w in corners:
            if not isinstance(w, float):
                total = w if total is None else ops.add(total, w)
        out = ops.add(out, ops.mul(ops.sub(1.0, total), float(cval)))
    if outside is not None:
        out = ops.where(outside, float(cval), out)
    return out


SCIPY = {f"scipy.ndimage.{f.__name__}": f for f in (shift, zoom, map_coordinates)}
