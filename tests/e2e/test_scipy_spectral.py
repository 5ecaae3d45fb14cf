"""scipy.signal.hilbert (a complex intermediate) and scipy.signal.welch inside
`llgrad.differentiate`: values against scipy, gradients against central differences."""
from __future__ import annotations

import numpy as np
import pytest
import scipy.signal as S

import llgrad
from llgrad.runtime.errors import UnsupportedError
from tests.e2e.conftest import finite_differences

R = np.random.default_rng(23)
V = R.standard_normal(40)
M = R.standard_normal((3, 30))
MT = np.ascontiguousarray(M.T)

CASES = [
    ("hilbert_envelope", lambda v: np.abs(S.hilbert(v[:9])), V),
    ("hilbert_phase_axis0", lambda m: np.angle(S.hilbert(m[:8], axis=0)), MT),
    ("hilbert_padded", lambda m: np.imag(S.hilbert(m, N=32)), M),
    ("welch", lambda v: S.welch(v, nperseg=8)[1], V),
    ("welch_fs", lambda v: S.welch(v, fs=3.0, nperseg=16)[1], V),
    ("welch_options", lambda m: S.welch(m, nperseg=8, noverlap=2, nfft=11, detrend="linear",
                                        scaling="spectrum", window="hamming")[1], M),
    ("welch_axis0", lambda m: S.welch(m, nperseg=10, axis=0, detrend=False)[1], MT),
]


@pytest.mark.parametrize("fn,arg", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_value_and_gradient(fn, arg):
    want = fn(arg)
    np.testing.assert_allclose(llgrad.differentiate(fn)(arg), want, rtol=1e-12, atol=1e-13)
    weights = np.linspace(0.5, 2.0, np.size(want)).reshape(np.shape(want))
    loss = lambda a: np.sum(fn(a) * weights)  # noqa: E731
    np.testing.assert_allclose(llgrad.differentiate(loss).grad(arg),
                               finite_differences(loss, (arg,), (0,))[0], rtol=1e-6, atol=1e-7)


def test_welch_frequencies_and_refusals():
    freqs, _ = llgrad.differentiate(lambda v: S.welch(v, fs=2.0, nperseg=8))(V)
    np.testing.assert_array_equal(freqs, S.welch(V, fs=2.0, nperseg=8)[0])
    with pytest.raises(UnsupportedError, match=r"welch\(return_onesided=False(.*\n)*.*"
                       r"test_scipy_spectral.py:\d+"):
        llgrad.differentiate(lambda v: S.welch(v, average="median")[1])(V)
    with pytest.raises(UnsupportedError, match=r"returned a complex value"):
        llgrad.differentiate(lambda v: S.hilbert(v))(V)
