"""scipy.ndimage's linear filters on llgrad values, with scipy's signatures: correlate1d,
convolve1d, correlate, convolve (1-D and 2-D weights), gaussian_filter1d, gaussian_filter,
uniform_filter1d, uniform_filter, laplace, sobel, prewitt; and median_filter (a sort per
window). Each linear one is a cross-correlation, one
`ops.conv`, of the input extended as scipy's `mode` says (`ops.pad`), with scipy's centring
(origin) of the weights; the separable filters are one such 1-D correlation per axis, in
scipy's order, with scipy's kernels. Values equal scipy's up to rounding, and gradients
follow from the primitives'. `SCIPY` joins runtime/numpy_api.LAZY (Note [Lazily named
functions] there)."""
from __future__ import annotations

import numpy as np

from llgrad.runtime import ops
from llgrad.runtime.aval import normalize_axes
from llgrad.runtime.errors import UnsupportedError, user_loc
from llgrad.runtime.ops._util import as_operand, dtype_of, shape_of
from llgrad.runtime.prim import is_value

# scipy's boundary modes as np.pad's: ndimage's 'reflect' repeats the edge sample (numpy's
# 'symmetric'), its 'mirror' does not (numpy's 'reflect')
_PADS = {"reflect": "symmetric", "grid-mirror": "symmetric", "mirror": "reflect",
         "nearest": "edge", "wrap": "wrap", "grid-wrap": "wrap", "constant": "constant",
         "grid-constant": "constant"}


def _refuse(name: str, output=None, **_) -> None:
    if output is not None:
        raise UnsupportedError(f"scipy.ndimage.{name}(output=...) is not supported on traced "
                               f"values", loc=user_loc(), fix="use the returned array")


def _pad_mode(mode: str) -> str:
    if not isinstance(mode, str) or mode not in _PADS:
        raise RuntimeError("boundary mode not supported") if isinstance(mode, str) else \
            UnsupportedError("scipy.ndimage: a sequence of modes is not supported on traced "
                             "values", loc=user_loc(), fix="filter one axis at a time")
    return _PADS[mode]


def _correlate(x, w, origins, mode: str, cval):
    """scipy's correlate of x with weights w over the last len(shape(w)) axes of x (1 or 2):
    out[i] = sum_j w[j] x[i + j - (n // 2 + origin)], x extended by `mode`."""
    k = len(shape_of(w))
    lead, tail = tuple(shape_of(x)[:-k]), tuple(shape_of(x)[-k:])
    widths = []
    for n, o in zip(shape_of(w), origins):
        if not -(n // 2) <= o <= (n - 1) // 2:
            raise ValueError("Invalid origin; origin must satisfy -(weights.shape[k] // 2) <= "
                             "origin[k] <= (weights.shape[k]-1) // 2")
        c = n // 2 + o
        widths.append((c, n - 1 - c))
    pad = _pad_mode(mode)
    x = ops.pad(x, [(0, 0)] * len(lead) + widths, pad,
                **({"constant_values": float(cval)} if pad == "constant" else {}))
    flat = ops.reshape(x, (-1, 1) + tuple(shape_of(x)[-k:]))
    out = ops.conv(flat, ops.reshape(w, (1, 1) + tuple(shape_of(w))))
    return ops.reshape(out, lead + tail)


def _input(x):
    x = as_operand(x)
    return x if dtype_of(x).kind == "f" else ops.astype(x, np.float64)


def _weights(w, dt):
    return ops.astype(as_operand(w), dt) if is_value(w) else np.asarray(w, dt)


def _result(out, like):
    """scipy's output has the input's dtype."""
    return out if dtype_of(out) == dtype_of(like) else ops.astype(out, dtype_of(like))


def correlate1d(input, weights, axis=-1, output=None, mode="reflect", cval=0.0, origin=0):
    """scipy.ndimage.correlate1d: the 1-D correlation along `axis`."""
    _refuse("correlate1d", output)
    x = as_operand(input)
    xf = _input(x)
    w = _weights(weights, dtype_of(xf))
    if len(shape_of(w)) != 1 or shape_of(w)[0] < 1:
        raise RuntimeError("no filter weights given")
    axis = normalize_axes(axis, len(shape_of(x)))[0]
    moved = ops.moveaxis(xf, axis, -1)
    return _result(ops.moveaxis(_correlate(moved, w, [origin], mode, cval), -1, axis), x)


def convolve1d(input, weights, axis=-1, output=None, mode="reflect", cval=0.0, origin=0):
    """scipy.ndimage.convolve1d: correlate1d with the weights reversed, the origin mirrored
    (one further for an even length), as scipy."""
    w = as_operand(weights) if is_value(weights) else np.asarray(weights)
    origin = -origin - (0 if shape_of(w)[0] & 1 else 1)
    return correlate1d(input, ops.flip(w, 0) if is_value(w) else w[::-1], axis, output, mode,
                       cval, origin)


def _nd(name: str, convolution: bool):
    def filt(input, weights, output=None, mode="reflect", cval=0.0, origin=0, *, axes=None):
        _refuse(name, output)
        if axes is not None:
            raise UnsupportedError(f"scipy.ndimage.{name}(axes=...) is not supported on traced "
                                   f"values", loc=user_loc(), fix="filter over all axes")
        x = as_operand(input)
        xf = _input(x)
        w = _weights(weights, dtype_of(xf))
        nd = len(shape_of(x))
        if len(shape_of(w)) != nd:
            raise RuntimeError(f"weights.ndim ({len(shape_of(w))}) must match len(axes) ({nd})")
        if nd > 2:
            raise UnsupportedError(f"scipy.ndimage.{name} of {nd}-D arrays is not supported on "
                                   f"traced values (1-D and 2-D are)", loc=user_loc(),
                                   fix="use separable filters (correlate1d per axis)")
        origins = list(np.broadcast_to(np.asarray(origin, np.int64), (nd,)))
        if convolution:
            w = ops.flip(w, tuple(range(nd))) if is_value(w) else w[(slice(None, None, -1),) * nd]
            origins = [-o - (0 if n & 1 else 1) for o, n in zip(origins, shape_of(w))]
        return _result(_correlate(xf, w, origins, mode, cval), x)
    filt.__name__ = name
    return filt


correlate = _nd("correlate", False)
convolve = _nd("convolve", True)


def _per_axis(value, nd: int) -> list:
    return list(value) if isinstance(value, (list, tuple, np.ndarray)) else [value] * nd


def _along_axes(name: str, input, output, axes, *per_axis) -> tuple:
    """The operand of a separable filter, and (axis, *its parameters) for each axis it
    filters along (`axes`, all by default; each parameter one value or one per axis)."""
    _refuse(name, output)
    x = as_operand(input)
    nd = len(shape_of(x))
    axes = list(range(nd)) if axes is None else list(normalize_axes(axes, nd))
    return x, list(zip(axes, *(_per_axis(p, len(axes)) for p in per_axis)))


def _gaussian_kernel(sigma: float, order: int, radius: int) -> np.ndarray:
    """scipy's (reversed, for correlate1d) Gaussian kernel, or its derivative of `order`."""
    from scipy.ndimage._filters import _gaussian_kernel1d
    return _gaussian_kernel1d(sigma, order, radius)[::-1]


def gaussian_filter1d(input, sigma, axis=-1, order=0, output=None, mode="reflect", cval=0.0,
                      truncate=4.0, *, radius=None):
    """scipy.ndimage.gaussian_filter1d: correlate1d with scipy's Gaussian kernel (or its
    derivative of `order`), radius int(truncate * sigma + 0.5) unless given."""
    sd = float(sigma)
    r = int(truncate * sd + 0.5) if radius is None else radius
    if not isinstance(r, int) or r < 0:
        raise ValueError("Radius must be a nonnegative integer.")
    return correlate1d(input, _gaussian_kernel(sd, int(order), r), axis, output, mode, cval, 0)


def gaussian_filter(input, sigma, order=0, output=None, mode="reflect", cval=0.0,
                    truncate=4.0, *, radius=None, axes=None):
    """scipy.ndimage.gaussian_filter: gaussian_filter1d along each axis (per-axis sigma,
    order, mode, radius), axes whose sigma is ~0 left alone, as scipy."""
    out, rows = _along_axes("gaussian_filter", input, output, axes, sigma, order, mode,
                            radius)
    for ax, s, o, m, r in rows:
        if s > 1e-15:
            out = gaussian_filter1d(out, s, ax, o, None, m, cval, truncate, radius=r)
    return out


def uniform_filter1d(input, size, axis=-1, output=None, mode="reflect", cval=0.0, origin=0):
    """scipy.ndimage.uniform_filter1d: the mean over a window of `size` along `axis`."""
    if size < 1:
        raise RuntimeError("incorrect filter size")
    return correlate1d(input, np.full(int(size), 1.0 / size), axis, output, mode, cval, origin)


def uniform_filter(input, size=3, output=None, mode="reflect", cval=0.0, origin=0, *,
                   axes=None):
    """scipy.ndimage.uniform_filter: uniform_filter1d along each axis (size > 1)."""
    out, rows = _along_axes("uniform_filter", input, output, axes, size, mode, origin)
    for ax, s, m, o in rows:
        if s > 1:
            out = uniform_filter1d(out, s, ax, None, m, cval, o)
    return out


def laplace(input, output=None, mode="reflect", cval=0.0, *, axes=None):
    """scipy.ndimage.laplace: the sum over axes of the second differences [1, -2, 1]."""
    x, rows = _along_axes("laplace", input, output, axes, mode)
    out = None
    for ax, m in rows:
        d2 = correlate1d(x, [1.0, -2.0, 1.0], ax, None, m, cval, 0)
        out = d2 if out is None else ops.add(out, d2)
    return out


def _edge(name: str, smooth: list):
    def filt(input, axis=-1, output=None, mode="reflect", cval=0.0):
        """scipy's derivative [-1, 0, 1] along `axis`, smoothed by `smooth` along the
        others."""
        _refuse(name, output)
        x = as_operand(input)
        nd = len(shape_of(x))
        axis = normalize_axes(axis, nd)[0]
        modes = _per_axis(mode, nd)
        out = correlate1d(x, [-1.0, 0.0, 1.0], axis, None, modes[axis], cval, 0)
        for ax in range(nd):
            if ax != axis:
                out = correlate1d(out, smooth, ax, None, modes[ax], cval, 0)
        return out
    filt.__name__ = name
    return filt


sobel = _edge("sobel", [1.0, 2.0, 1.0])
prewitt = _edge("prewitt", [1.0, 1.0, 1.0])

def window_median(x, sizes, pad: str, cval=0.0):
    """scipy's median filter: over a window of `sizes` (one per axis of x) centred at each
    element (the centre at size // 2; x extended as np.pad's `pad` mode), the sorted value at
    count // 2 (scipy's rank filter: the upper middle one for an even count, no mean); the
    gradient goes to that element, as np.median's. scipy.signal.medfilt shares it."""
    from llgrad.runtime.ops.arrays import sliding_window_view
    nd = len(shape_of(x))
    widths = [(s // 2, s - 1 - s // 2) for s in sizes]
    x = ops.pad(x, widths, pad, **({"constant_values": float(cval)} if pad == "constant"
                                    else {}))
    windows = sliding_window_view(x, tuple(sizes), tuple(range(nd)))
    count = int(np.prod(sizes))
    flat = ops.reshape(windows, tuple(shape_of(windows)[:nd]) + (count,))
    return ops.getitem(ops.sort(flat, -1), (Ellipsis, count // 2))


def median_filter(input, size=None, footprint=None, output=None, mode="reflect", cval=0.0,
                  origin=0, *, axes=None):
    """scipy.ndimage.median_filter with a box window (`size`, or a footprint of ones)."""
    _refuse("median_filter", output)
    x = as_operand(input)
    nd = len(shape_of(x))
    if footprint is not None:
        fp = np.asarray(footprint, bool)
        if not fp.all():
            raise UnsupportedError("scipy.ndimage.median_filter with a footprint that is not "
                                   "all ones is not supported on traced values",
                                   loc=user_loc(), fix="pass size= (a box window)")
        size = fp.shape
    if size is None:
        raise RuntimeError("no footprint or filter size provided")
    if axes is not None or np.any(np.asarray(origin) != 0):
        raise UnsupportedError("scipy.ndimage.median_filter(axes=, origin=) are not supported "
                               "on traced values", loc=user_loc(), fix="filter all axes, "
                               "with origin=0")
    sizes = [int(s) for s in _per_axis(size, nd)]
    if len(sizes) != nd or min(sizes, default=1) < 1:
        raise RuntimeError("filter sizes must be positive, one per axis")
    return _result(window_median(_input(x), sizes, _pad_mode(mode), cval), x)


SCIPY = {f"scipy.ndimage.{f.__name__}": f for f in (
    correlate1d, convolve1d, correlate, convolve, gaussian_filter1d, gaussian_filter,
    uniform_filter1d, uniform_filter, laplace, sobel, prewitt, median_filter)}
