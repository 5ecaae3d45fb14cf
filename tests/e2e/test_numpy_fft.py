"""np.fft and complex intermediates inside `llgrad.differentiate` (Note [Complex values are
pairs] in runtime/complex_values.py, Note [Fourier transforms as matrix products] in
runtime/numpy_fft.py): the real and imaginary parts of every transform against numpy, the
gradient of a real loss of them against central differences (float64), through the
interpreter and natively; realistic programs (power spectra, FFT convolution, spectral
derivatives, a 2-D low-pass, Parseval); the eager runtime; and the errors."""
from __future__ import annotations

import numpy as np
import pytest

import llgrad
import llgrad as lg
from llgrad.runtime.errors import DTypeError, UnsupportedError
from tests.e2e.conftest import compiled, finite_differences

R = np.random.default_rng(22)
F = np.fft


def _case(name, transform, shape):
    """A real function of x: the real and imaginary parts of transform(x) (or the real
    result), stacked, for values; a random projection of them, for gradients."""
    def parts(x):
        z = transform(x)
        return np.stack([z.real, z.imag]) if np.iscomplexobj(z) else z
    parts.__name__ = name
    return parts, R.standard_normal(shape)


def _phase(n):  # a complex constant
    return np.exp(1j * np.linspace(0.3, 2.0, n))


TRANSFORMS = [
    _case("fft", F.fft, (8,)),
    _case("fft_truncated", lambda x: F.fft(x, n=6), (8,)),
    _case("fft_padded_prime", lambda x: F.fft(x, 11), (8,)),
    _case("fft_four_step_square", F.fft, (36,)),  # 6 x 6 (Note: the four-step factorisation)
    _case("fft_four_step_uneven", lambda x: F.fft(x * 1j + x[::-1]), (35,)),  # 5 x 7
    _case("fft_four_step_nested", lambda x: F.fft(x, norm="ortho"), (2, 1089)),  # 33 x 33
    _case("fft_axis0", lambda x: F.fft(x, axis=0, norm="forward"), (5, 3)),
    _case("ifft_of_complex", lambda x: F.ifft(F.fft(x) * _phase(7)), (7,)),
    _case("ifft_ortho_real", lambda x: F.ifft(x, 9, norm="ortho"), (2, 6)),
    _case("rfft_even", F.rfft, (8,)),
    _case("rfft_odd_axis0", lambda x: F.rfft(x, axis=0, norm="forward"), (7, 2)),
    _case("rfft_n", lambda x: F.rfft(x, n=40), (3, 37)),
    _case("irfft", lambda x: F.irfft(F.rfft(x) * _phase(5)), (8,)),
    _case("irfft_odd_n", lambda x: F.irfft(F.rfft(x) * _phase(4), n=7), (7,)),
    _case("irfft_of_complex_input", lambda x: F.irfft(x[0] + 1j * x[1], norm="ortho"), (2, 5)),
    _case("irfft_padded", lambda x: F.irfft(x * (1 + 2j), n=12, axis=0), (4, 2)),
    _case("fft2", F.fft2, (4, 6)),
    _case("ifft2_s", lambda x: F.ifft2(x * 1j, s=(3, 5)), (4, 6)),
    _case("fftn_axes", lambda x: F.fftn(x, s=(4, 2), axes=(0, 2)), (3, 2, 3)),
    _case("ifftn", lambda x: F.ifftn(F.fftn(x) * x), (3, 4)),
    _case("rfft2", lambda x: F.rfft2(x, norm="ortho"), (4, 6)),
    _case("irfft2", lambda x: F.irfft2(F.rfft2(x) * _phase(4), s=(5, 6)), (5, 6)),
    _case("rfftn_irfftn", lambda x: F.irfftn(F.rfftn(x, axes=(0, 1)) * 2j, x.shape[:2],
                                             axes=(0, 1)), (4, 3, 2)),
    _case("fftshift", lambda x: F.fftshift(F.fft(x, axis=1), axes=1) + F.fftshift(x), (3, 5)),
    _case("ifftshift", lambda x: F.ifftshift(F.fft2(x)) * F.ifftshift(x, axes=(0,)), (4, 5)),
]

ALGEBRA = [
    _case("times_1j", lambda x: x * 1j + 2 - 1j * x[::-1], (5,)),
    _case("products", lambda x: (x + 1j * x ** 2) * (x[::-1] - 0.5j) * (3 + 1j), (5,)),
    _case("division", lambda x: (x + 2j) / (x[::-1] + 0.5 + 1j * x) + 1 / (x + 1j), (5,)),
    _case("complex_by_real", lambda x: (x + 1j) / (x ** 2 + 1) - x * (1 - 1j), (5,)),
    _case("exp_conj_angle", lambda x: np.exp(1j * x + 0.1 * x) * np.conj(x - 2j)
          + np.angle(x + 1j * x[::-1]) + np.angle(x), (5,)),
    _case("abs_and_powers", lambda x: np.abs(x + 1j * x[::-1]) + (x - 1j) ** 2
          + (x + 0.3j) ** 0.5 + np.square(1j * x) + abs(x * 1j) ** 3, (5,)),
    _case("real_imag", lambda x: (np.real(x * 1j + x) + np.imag(x * 2j) + np.real(x)
                                  + np.imag(x) + (x + 1j).conj().imag + x.real), (5,)),
    _case("matmul_constant", lambda x: (x @ np.exp(1j * np.outer(np.arange(4.0), [1, 2]))
                                        + (np.exp(1j * x) @ (x[0] + 1j))[:, None]), (2, 4)),
    _case("reductions_and_shapes", lambda x: np.concatenate([
        np.sum(x * 1j + x.T.T, axis=0), np.mean(np.exp(1j * x), axis=1),
        np.exp(1j * x).reshape(-1)[::3], np.exp(1j * x).T[1], (x * 1j).sum(axis=1),
        np.where(x[0] > 0, np.exp(1j * x[0]), x[1])]), (2, 3)),
]


@pytest.mark.parametrize("parts,x", TRANSFORMS + ALGEBRA,
                         ids=[p.__name__ for p, _ in TRANSFORMS + ALGEBRA])
def test_values_and_gradients(parts, x, mode):
    want = parts(x)
    np.testing.assert_allclose(compiled(parts, 0)(x), want, rtol=1e-10, atol=1e-12)
    w = np.random.default_rng(len(want.shape)).standard_normal(want.shape)

    def loss(x):
        return np.sum(w * parts(x)) + 0.1 * np.sum(parts(x) ** 2)
    value, grad = llgrad.differentiate(loss).value_and_grad(x)
    assert value == pytest.approx(loss(x), rel=1e-11)
    np.testing.assert_allclose(grad, finite_differences(loss, (x,), (0,))[0],
                               rtol=1e-6, atol=1e-7)
