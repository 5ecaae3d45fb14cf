"""scipy.signal's filters on llgrad values, with scipy's signatures: lfilter (b, a constant
or traced, x traced, axis, zi), sosfilt (a cascade of lfilters) and filtfilt (constant b, a);
the 1-D and 2-D convolutions and correlations (convolve, correlate, fftconvolve, convolve2d,
correlate2d); detrend, savgol_filter and medfilt. (hilbert, welch: scipy_spectral.py.)
lfilter is the FIR part, a sum of delayed copies of x, followed by the all-pole recurrence
`ops.iir` (one primitive looping over time, whose VJP is the same filter run backwards: Note
[All-pole filters] in runtime/ops/scan.py). The convolutions are one `ops.conv` (a
cross-correlation) of the input, padded as scipy's boundary says, with the kernel flipped for
a convolution; FFT or direct, scipy's results differ from these by rounding only. `SCIPY`
joins runtime/numpy_api.LAZY (Note [Lazily named functions])."""
from __future__ import annotations

import numpy as np

from llgrad.runtime import ops
from llgrad.runtime.aval import normalize_axes
from llgrad.runtime.errors import UnsupportedError, user_loc
from llgrad.runtime.numpy_calculus import _along
from llgrad.runtime.ops._util import as_operand, dtype_of, shape_of
from llgrad.runtime.prim import is_value


def _delayed(x, k: int, axis: int):
    """x moved k steps later along `axis`, zeros entering at the start."""
    n, nd = shape_of(x)[axis], len(shape_of(x))
    if k == 0:
        return x
    pad = list(shape_of(x))
    pad[axis] = min(k, n)
    zeros = np.zeros(pad, dtype_of(x))
    return zeros if k >= n else ops.concatenate([zeros, x[_along(nd, axis, slice(0, n - k))]],
                                                axis)


def _coefficients(c, name: str, dt):
    """A coefficient vector as `dt` (a scalar as 1-D): an ndarray when constant, else a
    value."""
    c = ops.astype(c, dt) if is_value(c) else np.asarray(c, dt)
    if len(shape_of(c)) == 0:
        c = ops.reshape(c, (1,))
    if len(shape_of(c)) != 1 or shape_of(c)[0] == 0:
        raise ValueError(f"scipy.signal.lfilter: {name} must be a non-empty 1-D array, got "
                         f"shape {tuple(shape_of(c))}")
    return c


def lfilter(b, a, x, axis=-1, zi=None):
    """scipy.signal.lfilter: y with a[0] y[n] = sum_k b[k] x[n-k] - sum_{k>=1} a[k] y[n-k]
    along `axis`; with zi (the initial state of scipy's transposed direct form II, of x's
    shape with `axis` of length max(len(a), len(b)) - 1) also the final state zf."""
    x = as_operand(x)
    dt = np.result_type(*(dtype_of(v) if is_value(v) else np.asarray(v).dtype
                          for v in (b, a, x)), np.float16)
    if dt.kind != "f":
        raise UnsupportedError(f"scipy.signal.lfilter of {dt} values is not supported",
                               loc=user_loc(), fix="pass float arrays")
    b, a, x = _coefficients(b, "b", dt), _coefficients(a, "a", dt), ops.astype(x, dt)
    if not is_value(a) and a[0] == 0:
        raise ValueError("BUG: filter coefficient a[0] == 0 not supported yet")
    nd = len(shape_of(x))
    axis = normalize_axes(axis, nd)[0]
    b, a = ops.div(b, a[0]) if is_value(a) or is_value(b) else b / a[0], \
        ops.div(a[1:], a[0]) if is_value(a) else a[1:] / a[0]
    n, order = shape_of(x)[axis], max(shape_of(a)[0], shape_of(b)[0] - 1)
    v = None
    for k in range(min(shape_of(b)[0], n)):
        term = ops.mul(b[k], _delayed(x, k, axis))
        v = term if v is None else ops.add(v, term)
    if zi is not None:
        zi = ops.astype(as_operand(zi), dt)
        want = list(shape_of(x))
        want[axis] = order
        if tuple(shape_of(zi)) != tuple(want):
            raise ValueError(f"Unexpected shape for zi: expected {tuple(want)}, found "
                             f"{tuple(shape_of(zi))}.")
        head = zi[_along(nd, axis, slice(0, min(order, n)))]
        v = ops.add(v, ops.concatenate([head, np.zeros(_tail(shape_of(x), axis, n - order), dt)],
                                       axis) if order < n else head)
    y = ops.iir(v, a, axis) if shape_of(a)[0] else v
    if zi is None:
        return y
    return y, _final_state(b, a, x, y, zi, axis, order)


def _tail(shape, axis: int, length: int) -> tuple:
    s = list(shape)
    s[axis] = length
    return tuple(s)


def _final_state(b, a, x, y, zi, axis: int, order: int):
    """zf[i] = zi[i + n] + sum_{j>i} (b[j] x[n+i-j] - a[j] y[n+i-j]) over the samples that
    exist (scipy's state after the last sample)."""
    n, nd = shape_of(x)[axis], len(shape_of(x))
    rows = []
    for i in range(order):
        z = zi[_along(nd, axis, slice(i + n, i + n + 1))] if i + n < order else None
        for j in range(i + 1, order + 1):
            t = n + i - j
            if t < 0:
                continue
            at = _along(nd, axis, slice(t, t + 1))
            if j < shape_of(b)[0]:
                z = _acc(z, ops.mul(b[j], x[at]))
            if j - 1 < shape_of(a)[0]:
                z = _acc(z, ops.neg(ops.mul(a[j - 1], y[at])))
        rows.append(ops.mul(zi[_along(nd, axis, slice(0, 1))], 0.0) if z is None else z)
    return ops.concatenate(rows, axis)


def _acc(total, term):
    return term if total is None else ops.add(total, term)


def filtfilt(b, a, x, axis=-1, padtype="odd", padlen=None, method="pad", irlen=None):
    """scipy.signal.filtfilt (method='pad'): lfilter forwards and backwards over x extended
    at both ends, each pass started in the steady state of the edge value, so the result has
    no phase shift. The coefficients must be constants (their steady state is a solve)."""
    if is_value(b) or is_value(a) or method != "pad":
        what = "method=" + repr(method) if method != "pad" else "traced coefficients b, a"
        raise UnsupportedError(f"scipy.signal.filtfilt with {what} is not supported on traced "
                               f"values", loc=user_loc(),
                               fix="pass constant b, a and method='pad', or write the two "
                               "passes with scipy.signal.lfilter")
    from scipy.signal import lfilter_zi
    b, a = np.atleast_1d(np.asarray(b, np.float64)), np.atleast_1d(np.asarray(a, np.float64))
    x = as_operand(x)
    if dtype_of(x).kind != "f":
        x = ops.astype(x, np.float64)
    nd = len(shape_of(x))
    axis = normalize_axes(axis, nd)[0]
    edge = 3 * max(len(a), len(b)) if padlen is None else padlen
    if padtype is None:
        edge = 0
    n = shape_of(x)[axis]
    if edge >= n:
        raise ValueError(f"The length of the input vector x must be greater than padlen, "
                         f"which is {edge}.")
    ext = _extend(x, edge, axis, padtype) if edge else x
    zi = lfilter_zi(b, a)
    zi = zi.reshape(_tail([1] * nd, axis, zi.size))
    first = _along(nd, axis, slice(0, 1))
    y, _ = lfilter(b, a, ext, axis, zi=ops.mul(zi, ext[first]))
    y = ops.flip(y, axis)
    y, _ = lfilter(b, a, y, axis, zi=ops.mul(zi, y[first]))
    y = ops.flip(y, axis)
    m = shape_of(y)[axis]
    return y[_along(nd, axis, slice(edge, m - edge))] if edge else y


def _extend(x, edge: int, axis: int, padtype: str):
    """scipy's odd_ext / even_ext / const_ext of x by `edge` samples at each end."""
    nd, n = len(shape_of(x)), shape_of(x)[axis]
    at = lambda s: x[_along(nd, axis, s)]  # noqa: E731
    left_end, right_end = at(slice(0, 1)), at(slice(n - 1, n))
    if padtype == "constant":
        left = ops.concatenate([left_end] * edge, axis)
        right = ops.concatenate([right_end] * edge, axis)
    elif padtype in ("odd", "even"):
        left = ops.flip(at(slice(1, edge + 1)), axis)
        right = ops.flip(at(slice(n - edge - 1, n - 1)), axis)
        if padtype == "odd":
            left = ops.sub(ops.mul(left_end, 2.0), left)
            right = ops.sub(ops.mul(right_end, 2.0), right)
    else:
        raise ValueError(f"Unknown value '{padtype}' given to padtype.  padtype must be "
                         "'even', 'odd', 'constant', or None.")
    return ops.concatenate([left, x, right], axis)


# ---- convolutions -----------------------------------------------------------------------------
_PADS = {"fill": "constant", "pad": "constant", "wrap": "wrap", "circular": "wrap",
         "symm": "symmetric", "symmetric": "symmetric"}


def _conv(name: str, a, k, mode: str, flip: bool, boundary="fill", fillvalue=0):
    """scipy's convolution (flip) or correlation of 1-D or 2-D a and k, in mode 'full',
    'same' or 'valid', a extended by `boundary` (2-D only: 'fill' with fillvalue, 'wrap',
    'symm')."""
    a, k = as_operand(a), as_operand(k)
    nd = len(shape_of(a))
    if name.endswith("2d") and (nd, len(shape_of(k))) != (2, 2):  # (as scipy refuses them)
        raise ValueError(f"{name}: in1 and in2 must be 2-d")
    if len(shape_of(k)) != nd:
        raise ValueError(f"{name}: in1 and in2 should have the same dimensionality")
    if nd not in (1, 2):
        raise UnsupportedError(f"{name} of {nd}-D arrays is not supported on traced values "
                               f"(1-D and 2-D are)", loc=user_loc(), fix="call it per slice")
    dt = np.result_type(dtype_of(a), dtype_of(k), np.float16)
    a, k = ops.astype(a, dt), ops.astype(k, dt)
    sa, sk = shape_of(a), shape_of(k)
    if mode == "valid" and any(x < y for x, y in zip(sa, sk)):
        if not all(x <= y for x, y in zip(sa, sk)):
            raise ValueError("For 'valid' mode, one must be at least as large as the other in "
                             "every dimension")
        # scipy swaps the operands: a convolution commutes; a correlation comes out reversed
        out = _conv(name, k, a, mode, flip, boundary, fillvalue)
        return out if flip else ops.flip(out, tuple(range(nd)))
    if flip:
        k = ops.flip(k, tuple(range(nd)))
    if mode == "full":
        widths = [(n - 1, n - 1) for n in sk]
    elif mode == "same":  # scipy's centre of the full result (correlate2d's the mirror)
        lo = [(n - 1) // 2 for n in sk]
        widths = [(n - 1 - m, m) if flip else (m, n - 1 - m) for n, m in zip(sk, lo)]
    elif mode == "valid":
        widths = [(0, 0)] * nd
    else:
        raise ValueError("Acceptable mode flags are 'valid', 'same', or 'full'.")
    if boundary not in _PADS:
        raise ValueError("Acceptable boundary flags are 'fill', 'circular' (or 'wrap'), and "
                         "'symmetric' (or 'symm').")
    pad_mode = _PADS[boundary]
    if any(w != (0, 0) for w in widths):
        a = ops.pad(a, widths, pad_mode, **({"constant_values": fillvalue}
                                             if pad_mode == "constant" else {}))
    out = ops.conv(ops.reshape(a, (1, 1) + tuple(shape_of(a))),
                   ops.reshape(k, (1, 1) + tuple(sk)))
    return ops.reshape(out, tuple(shape_of(out))[2:])


def convolve2d(in1, in2, mode="full", boundary="fill", fillvalue=0):
    return _conv("scipy.signal.convolve2d", in1, in2, mode, True, boundary, fillvalue)


def correlate2d(in1, in2, mode="full", boundary="fill", fillvalue=0):
    return _conv("scipy.signal.correlate2d", in1, in2, mode, False, boundary, fillvalue)


def convolve(in1, in2, mode="full", method="auto"):
    return _conv("scipy.signal.convolve", in1, in2, mode, True)


def correlate(in1, in2, mode="full", method="auto"):
    # scipy's: the convolution with in2 reversed (so 'same' is centred as a convolution's,
    # unlike correlate2d's)
    k = as_operand(in2)
    return _conv("scipy.signal.correlate", in1, ops.flip(k, tuple(range(len(shape_of(k))))),
                 mode, True)


def fftconvolve(in1, in2, mode="full", axes=None):
    if axes is not None:
        raise UnsupportedError("scipy.signal.fftconvolve(axes=...) is not supported on traced "
                               "values", loc=user_loc(), fix="convolve over all axes")
    return _conv("scipy.signal.fftconvolve", in1, in2, mode, True)


def sosfilt(sos, x, axis=-1, zi=None):
    """scipy.signal.sosfilt: lfilter with each second-order section (a row b0 b1 b2 a0 a1 a2
    of sos, constant or traced) in turn; with zi (n_sections, then lfilter's zi shape) also
    the final states, stacked."""
    sections = as_operand(sos) if is_value(sos) else np.asarray(sos)
    if len(shape_of(sections)) != 2 or shape_of(sections)[1] != 6:
        raise ValueError("sos array must be shape (n_sections, 6)")
    if not is_value(sections) and not np.all(sections[:, 3] == 1):
        raise ValueError("sos[:, 3] should be all ones")
    states = []
    for i in range(shape_of(sections)[0]):
        row = sections[i]
        x = lfilter(row[:3], row[3:], x, axis, None if zi is None else zi[i])
        if zi is not None:
            x, zf = x
            states.append(zf)
    return x if zi is None else (x, ops.stack(states, 0))


def _float_data(x):
    """x as scipy.signal's detrend/savgol_filter compute it: float32/float64 kept, else
    float64."""
    x = as_operand(x)
    return x if dtype_of(x) in (np.float32, np.float64) else ops.astype(x, np.float64)


def detrend(data, axis=-1, type="linear", bp=0, overwrite_data=False):
    """scipy.signal.detrend: data minus its mean ('constant') or minus its least-squares line
    ('linear', one segment: bp=0) along `axis`; the line is a constant 2 x N projection."""
    if type not in ("linear", "l", "constant", "c"):
        raise ValueError("Trend type must be 'linear' or 'constant'.")
    x = _float_data(data)
    axis = normalize_axes(axis, len(shape_of(x)))[0]
    if type in ("constant", "c"):
        return ops.sub(x, ops.mean(x, axis, True))
    if np.ndim(bp) or bp != 0:
        raise UnsupportedError("scipy.signal.detrend with breakpoints (bp=...) is not "
                               "supported on traced values", loc=user_loc(),
                               fix="detrend each segment on its own, or use bp=0")
    n = shape_of(x)[axis]
    design = np.ones((n, 2))  # scipy's: columns (1..N)/N and 1
    design[:, 0] = np.arange(1, n + 1) / n
    moved = ops.moveaxis(x, axis, -1)
    trend = ops.matmul(ops.matmul(moved, np.linalg.pinv(design).T.astype(dtype_of(x))),
                       design.T.astype(dtype_of(x)))
    return ops.moveaxis(ops.sub(moved, trend), -1, axis)


def savgol_filter(x, window_length, polyorder, deriv=0, delta=1.0, axis=-1, mode="interp",
                  cval=0.0):
    """scipy.signal.savgol_filter: ndimage's convolve1d with scipy's (constant) coefficients;
    with mode='interp' the window_length // 2 outputs at each edge are polynomial fits of the
    edge window, a constant matrix (scipy's own filter applied to the identity)."""
    import scipy.signal
    from llgrad.runtime.scipy_ndimage import convolve1d
    x = _float_data(x)
    dt = dtype_of(x)
    coeffs = scipy.signal.savgol_coeffs(window_length, polyorder, deriv=deriv, delta=delta)
    if mode != "interp":
        return convolve1d(x, coeffs.astype(dt), axis, mode=mode, cval=cval)
    axis = normalize_axes(axis, len(shape_of(x)))[0]
    n, half = shape_of(x)[axis], window_length // 2
    if window_length > n:
        raise ValueError("If mode is 'interp', window_length must be less than or equal to "
                         "the size of x.")
    y = ops.moveaxis(convolve1d(x, coeffs.astype(dt), axis, mode="constant"), axis, -1)
    if not half:
        return ops.moveaxis(y, -1, axis)
    edges = scipy.signal.savgol_filter(np.eye(window_length), window_length, polyorder, deriv,
                                       delta, axis=0, mode="interp").astype(dt)
    moved = ops.moveaxis(x, axis, -1)
    left = ops.matmul(ops.slice_axis(moved, -1, 0, window_length), edges[:half].T)
    right = ops.matmul(ops.slice_axis(moved, -1, n - window_length, n),
                       edges[window_length - half:].T)
    out = ops.concatenate([left, ops.slice_axis(y, -1, half, n - half), right], -1)
    return ops.moveaxis(out, -1, axis)


def medfilt(volume, kernel_size=None):
    """scipy.signal.medfilt: the median over an odd window (3 along each axis by default) of
    the zero-extended input."""
    from llgrad.runtime.scipy_ndimage import window_median
    x = as_operand(volume)
    nd = len(shape_of(x))
    sizes = [3] * nd if kernel_size is None else \
        [int(k) for k in np.broadcast_to(np.asarray(kernel_size), (nd,))]
    if any(k % 2 == 0 for k in sizes):
        raise ValueError("Each element of kernel_size should be odd.")
    return window_median(x if dtype_of(x).kind == "f" else ops.astype(x, np.float64), sizes,
                         "constant")


SCIPY = {f"scipy.signal.{f.__name__}": f for f in (
    lfilter, filtfilt, convolve, correlate, fftconvolve, convolve2d, correlate2d, sosfilt,
    detrend, savgol_filter, medfilt)}
