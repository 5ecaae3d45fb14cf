"""Corpus programs with Fourier transforms and complex intermediates (see
tests/corpus/programs.py): spectral losses, FFT convolution and spectral PDE solvers, written
as signal-processing and scientific-computing notebooks write them."""
from __future__ import annotations

import numpy as np

from tests.corpus.registry import program


def _spectrum_args(rng):
    t = np.arange(64) / 64.0
    target = np.sin(2 * np.pi * 5 * t) + 0.5 * np.sin(2 * np.pi * 12 * t)
    return 0.1 * rng.standard_normal(64), target


@program(_spectrum_args)
def spectral_matching_loss(x, target):
    """Match a signal's log power spectrum (a Hann-windowed periodogram) to a target's, plus a
    small time-domain penalty: the spectral loss of audio synthesis models."""
    window = np.hanning(x.shape[0])
    def log_power(s):
        spec = np.fft.rfft(s * window)
        return np.log(np.abs(spec) ** 2 / np.sum(window ** 2) + 1e-8)
    return np.mean((log_power(x) - log_power(target)) ** 2) + 0.01 * np.sum(x ** 2)


def _deconv_args(rng):
    kernel = np.exp(-0.5 * (np.arange(-4, 5) / 1.5) ** 2)
    kernel /= kernel.sum()
    signal = np.repeat(rng.standard_normal(6), 5)
    observed = np.convolve(signal, kernel) + 0.01 * rng.standard_normal(38)
    return np.zeros(30), kernel, observed


@program(_deconv_args)
def fft_deconvolution(estimate, kernel, observed, lam=0.1):
    """Deconvolution by least squares with a total-variation-like smoothness term; the blur is
    a full linear convolution computed with zero-padded real FFTs."""
    n = estimate.shape[0] + kernel.shape[0] - 1
    blurred = np.fft.irfft(np.fft.rfft(estimate, n) * np.fft.rfft(kernel, n), n)
    smooth = np.sum(np.sqrt(np.diff(estimate) ** 2 + 1e-3))
    return 0.5 * np.sum((blurred - observed) ** 2) + lam * smooth


def _burgers_args(rng):
    x = np.linspace(0, 2 * np.pi, 32, endpoint=False)
    return np.sin(x) + 0.1 * rng.standard_normal(32), 0.1


@program(_burgers_args, wrt=(0, 1))
def spectral_burgers(u0, nu, dt=0.01, steps=20):
    """Viscous Burgers' equation u_t + u u_x = nu u_xx on a periodic domain by a
    pseudo-spectral method: derivatives in Fourier space, the product in physical space,
    explicit Euler steps; the energy of the final state."""
    n = u0.shape[0]
    k = np.fft.fftfreq(n, d=1.0 / n)  # integer wavenumbers on [0, 2 pi)
    u = u0
    for _ in range(steps):
        u_hat = np.fft.fft(u)
        u_x = np.real(np.fft.ifft(1j * k * u_hat))
        u_xx = np.real(np.fft.ifft(-(k ** 2) * u_hat))
        u = u + dt * (-u * u_x + nu * u_xx)
    return 0.5 * np.mean(u ** 2)
