"""scipy.signal's spectral functions on llgrad values, with scipy's signatures: hilbert (the
analytic signal, a complex intermediate: Note [Complex values are pairs]) and welch (the
averaged periodogram of windowed, detrended segments), through llgrad's np.fft (Note [Fourier
transforms as matrix products]). `SCIPY` joins runtime/numpy_api.LAZY."""
from __future__ import annotations

import numpy as np

from llgrad.runtime import ops
from llgrad.runtime.aval import normalize_axes
from llgrad.runtime.errors import UnsupportedError, user_loc
from llgrad.runtime.ops._util import as_operand, dtype_of, shape_of
from llgrad.runtime.scipy_signal import _float_data
from llgrad.runtime.scipy_signal import detrend as detrend_along


def hilbert(x, N=None, axis=-1):
    """scipy.signal.hilbert: the analytic signal ifft(fft(x) h), h keeping the DC (and
    Nyquist) term and doubling the positive frequencies: a complex intermediate (Note [Complex
    values are pairs]), e.g. for np.abs (the envelope) or np.angle."""
    x = as_operand(x)
    if dtype_of(x).kind == "c":
        raise ValueError("x must be real.")
    axis = normalize_axes(axis, len(shape_of(x)))[0]
    n = shape_of(x)[axis] if N is None else int(N)
    if n <= 0:
        raise ValueError("N must be positive.")
    h = np.zeros(n)
    h[0] = 1.0
    if n % 2 == 0:
        h[n // 2] = 1.0
    h[1:(n + 1) // 2] = 2.0
    h = h.reshape([n if d == axis else 1 for d in range(len(shape_of(x)))])
    x = x if dtype_of(x).kind == "f" else ops.astype(x, np.float64)
    return np.fft.ifft(np.fft.fft(x, n, axis=axis) * h, axis=axis)


def welch(x, fs=1.0, window="hann", nperseg=None, noverlap=None, nfft=None,
          detrend="constant", return_onesided=True, scaling="density", axis=-1,
          average="mean"):
    """scipy.signal.welch of a real signal: (frequencies, the mean over segments of the
    windowed, detrended segments' |rfft|^2, scaled and one-sided as scipy)."""
    import scipy.signal
    if not return_onesided or average != "mean" or callable(detrend):
        raise UnsupportedError("scipy.signal.welch(return_onesided=False, average='median', "
                               "a detrend function) is not supported on traced values",
                               loc=user_loc(), fix="use the defaults, or compute the "
                               "periodogram with np.fft.rfft")
    x = _float_data(x)
    axis = normalize_axes(axis, len(shape_of(x)))[0]
    n = shape_of(x)[axis]
    if isinstance(window, (str, tuple)):
        nperseg = min(256 if nperseg is None else int(nperseg), n)
        win = scipy.signal.get_window(window, nperseg)
    else:
        win = np.asarray(window, np.float64)
        nperseg = win.shape[0] if nperseg is None else int(nperseg)
        if win.shape[0] != nperseg:
            raise ValueError("value specified for nperseg is different from length of window")
    noverlap = nperseg // 2 if noverlap is None else int(noverlap)
    nfft = nperseg if nfft is None else int(nfft)
    if noverlap >= nperseg or nfft < nperseg:
        raise ValueError("noverlap must be less than nperseg, and nfft at least nperseg.")
    step = nperseg - noverlap
    starts = np.arange(0, n - nperseg + 1, step)
    moved = ops.moveaxis(x, axis, -1)
    segs = ops.getitem(moved, (Ellipsis, starts[:, None] + np.arange(nperseg)))
    if detrend in ("constant", "linear"):
        segs = detrend_along(segs, -1, type=detrend)
    elif detrend is not False:
        raise ValueError(f"Unknown detrend type {detrend!r}")
    spectrum = np.fft.rfft(ops.mul(segs, win.astype(dtype_of(x))), nfft, axis=-1)
    power = ops.add(ops.square(np.real(spectrum)), ops.square(np.imag(spectrum)))
    scale = 1.0 / (fs * (win * win).sum()) if scaling == "density" else 1.0 / win.sum() ** 2
    double = np.full(nfft // 2 + 1, 2.0)
    double[0] = 1.0
    if nfft % 2 == 0:
        double[-1] = 1.0
    pxx = ops.mean(ops.mul(power, (scale * double).astype(dtype_of(x))), -2)
    return np.fft.rfftfreq(nfft, 1 / fs), ops.moveaxis(pxx, -1, axis)


SCIPY = {f"scipy.signal.{f.__name__}": f for f in (hilbert, welch)}
