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
    _case("fft_bluestein_prime", lambda x: F.fft(x * (1 - 1j)), (131,)),
    _case("ifft_bluestein_twice_prime", F.ifft, (262,)),  # 2 x 131
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
    _case("zero_constants", lambda x: x * 0j + 1 + x / (x * 0j + 2) + np.abs(x * 0j),
          (4,)),  # (x's shape kept)
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


# ---- realistic programs ------------------------------------------------------------------
N = 16
T = np.linspace(0, 2 * np.pi, N, endpoint=False)  # a periodic grid
TARGET = np.abs(np.fft.rfft(np.sin(3 * T) + 0.5 * np.cos(5 * T))) ** 2 / N


def power_spectrum_loss(x):
    return np.mean((np.abs(np.fft.rfft(x)) ** 2 / x.shape[0] - TARGET) ** 2)


def fft_convolve(a, b):
    n = a.shape[0] + b.shape[0] - 1
    return np.fft.irfft(np.fft.rfft(a, n) * np.fft.rfft(b, n), n)


def spectral_derivative(u):  # du/dt of a periodic function on the grid T
    k = np.fft.fftfreq(u.shape[0], d=T[1] - T[0]) * 2 * np.pi
    return np.fft.ifft(1j * k * np.fft.fft(u)).real


def lowpass_image_loss(img):
    fy, fx = np.fft.fftfreq(img.shape[0]), np.fft.rfftfreq(img.shape[1])
    keep = np.hypot(fy[:, None], fx[None, :]) < 0.25  # a constant mask
    smooth = np.fft.irfft2(np.fft.rfft2(img) * keep, s=img.shape)
    return np.sum((smooth - img * 0.5) ** 2) + np.sum(np.abs(np.fft.fftshift(
        np.fft.fft2(img)))[:2] ** 2)


def parseval(x):
    return np.sum(np.abs(np.fft.fft(x)) ** 2) / x.shape[0]


PROGRAMS = [(power_spectrum_loss, R.standard_normal(N)),
            (lambda x: np.sum(fft_convolve(x[:7], x[7:]) ** 2), R.standard_normal(12)),
            (lambda u: np.sum(spectral_derivative(u) ** 2 * np.cos(T)), np.sin(2 * T) + T),
            (lowpass_image_loss, R.standard_normal((6, 8))),
            (parseval, R.standard_normal(10))]


@pytest.mark.parametrize("fn,x", PROGRAMS, ids=["power_spectrum", "fft_convolution",
                                                "spectral_derivative", "lowpass_2d",
                                                "parseval"])
def test_programs(fn, x, mode):
    value, grad = compiled(fn, 0).value_and_grad(x)
    assert value == pytest.approx(fn(x), rel=1e-11)
    np.testing.assert_allclose(grad, finite_differences(fn, (x,), (0,))[0], rtol=1e-6,
                               atol=1e-7)


def test_programs_agree_with_their_direct_forms():
    a, b = R.standard_normal(7), R.standard_normal(5)
    conv = llgrad.differentiate(fft_convolve, wrt=(0, 1))
    np.testing.assert_allclose(conv(a, b), np.convolve(a, b), atol=1e-12)
    direct = llgrad.differentiate(lambda a, b: np.sum(np.convolve(a, b) ** 3), wrt=(0, 1))
    spectral = llgrad.differentiate(lambda a, b: np.sum(fft_convolve(a, b) ** 3), wrt=(0, 1))
    for g, h in zip(spectral.grad(a, b), direct.grad(a, b)):
        np.testing.assert_allclose(g, h, rtol=1e-10, atol=1e-12)
    # the spectral derivative of sin(3t) is 3 cos(3t), to rounding
    np.testing.assert_allclose(llgrad.differentiate(spectral_derivative)(np.sin(3 * T)),
                               3 * np.cos(3 * T), atol=1e-12)
    x = R.standard_normal(10)  # Parseval: sum |X|^2 / n = sum x^2, so the gradient is 2x
    value, grad = llgrad.differentiate(parseval).value_and_grad(x)
    assert value == pytest.approx(np.sum(x ** 2), rel=1e-12)
    np.testing.assert_allclose(grad, 2 * x, rtol=1e-12)


def test_complex_values_in_staged_loops_and_branches(mode):
    def fn(x):
        z = np.fft.fft(x)
        for i in range(x.shape[0]):  # staged: z is carried as its two parts
            z = z * np.exp(1j * x[i]) * 0.9
        if x[0] > 0:
            z = z.conj() * 2
        return np.sum(np.abs(z) ** 2 + z.real)
    x = R.standard_normal(6)
    for arg in (x, -x):
        value, grad = compiled(fn, 0).value_and_grad(arg)
        assert value == pytest.approx(fn(arg), rel=1e-11)
        np.testing.assert_allclose(grad, finite_differences(fn, (arg,), (0,))[0], rtol=1e-6,
                                   atol=1e-7)


def test_boolean_masks_of_complex_values_stay_compiled(mode):
    def fn(x):  # the parts selected by one mask (Note [Slices of loop-dependent length])
        z = np.fft.fft(x)
        return np.sum(np.abs(z[z.real > 0]) ** 2) + np.sum((z * 2j)[x > 0].imag)
    x = R.standard_normal(6)
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error", llgrad.runtime.errors.DynamicPathWarning)
        value, grad = llgrad.differentiate(fn).value_and_grad(x)
    assert value == pytest.approx(fn(x), rel=1e-11)
    np.testing.assert_allclose(grad, finite_differences(fn, (x,), (0,))[0], rtol=1e-6,
                               atol=1e-7)


def test_fftfreq_of_a_traced_spacing():
    def energy(u, length):  # the domain's length differentiated through the wavenumbers
        k = 2 * np.pi * np.fft.fftfreq(u.shape[0], d=length / u.shape[0])
        return np.sum(np.fft.ifft(1j * k * np.fft.fft(u)).real ** 2)
    u, length = np.sin(T) + 0.1 * T, 3.0
    value, (gu, gl) = llgrad.differentiate(energy, wrt=(0, 1)).value_and_grad(u, length)
    assert value == pytest.approx(energy(u, length), rel=1e-11)
    fu, fl = finite_differences(energy, (u, np.array(length)), (0, 1))
    np.testing.assert_allclose(gu, fu, rtol=1e-6, atol=1e-7)
    assert gl == pytest.approx(float(fl), rel=1e-6)


def test_eager_tensors():
    x = lg.tensor(R.standard_normal(8), requires_grad=True)
    loss = np.sum(np.abs(np.fft.rfft(x) * (1 + 1j)) ** 2)  # a Complex of Tensors, then real
    assert isinstance(loss, lg.Tensor)
    loss.backward()
    f = lambda x: np.sum(np.abs(np.fft.rfft(x) * (1 + 1j)) ** 2)  # noqa: E731
    assert loss.item() == pytest.approx(f(x.detach().numpy()), rel=1e-12)
    np.testing.assert_allclose(x.grad.numpy(), finite_differences(f, (x.detach().numpy(),),
                                                                  (0,))[0], rtol=1e-6)


def test_abs_has_gradient_zero_at_zero():
    # |z|'s derivative is undefined at 0; like JAX and PyTorch, llgrad gives 0 there, so a
    # power spectrum of a signal with empty bins (a constant: all but bin 0) has a gradient
    value, grad = llgrad.differentiate(lambda x: np.sum(np.abs(np.fft.rfft(x)) ** 2)
                                       ).value_and_grad(np.ones(6))
    assert value == pytest.approx(36.0)
    np.testing.assert_allclose(grad, 2 * 6 * np.ones(6))


# ---- errors --------------------------------------------------------------------------------
def returns_complex(x):
    return np.sum(np.fft.fft(x))


def sine_of_complex(x):
    return np.sum(np.sin(np.fft.fft(x)).real)


def assigns_into_complex(x):
    z = np.fft.fft(x)
    z[0] = 0.0
    return np.sum(np.abs(z))


def traced_exponent(x):
    return np.sum(np.abs(np.fft.fft(x) ** x[0]))


def branches_on_complex(x):
    z = np.fft.fft(x)
    return 1.0 if z[1] else 0.0


@pytest.mark.parametrize("fn,cls,what,fix", [
    (returns_complex, UnsupportedError, r"returns_complex returned a complex value "
     r"\(complex128, of shape \(\)\)", "np.abs"),
    (sine_of_complex, UnsupportedError, "np.sin of a complex value is not supported", "z.real"),
    (assigns_into_complex, UnsupportedError, r"assigning into a complex value", "np.where"),
    (traced_exponent, UnsupportedError, "constant real scalar exponent", "z \\* z"),
    (branches_on_complex, UnsupportedError, r"bool\(\) of a complex value", "np.abs"),
])
def test_errors_name_the_line(fn, cls, what, fix):
    with pytest.raises(cls, match=rf"{what}(.*\n)*.*test_numpy_fft.py:\d+ \(in {fn.__name__}"
                       rf"\)(.*\n)*.*How to fix:.*{fix}"):
        llgrad.differentiate(fn)(np.arange(4.0))


def test_argument_errors():
    with pytest.raises(TypeError, match="np.fft.rfft of a complex array"):
        llgrad.differentiate(lambda x: np.sum(np.fft.rfft(x * 1j).real))(np.ones(4))
    with pytest.raises(ValueError, match='Invalid norm value unit; should be'):
        llgrad.differentiate(lambda x: np.sum(np.fft.fft(x, norm="unit").real))(np.ones(4))
    with pytest.raises(ValueError, match="Invalid number of FFT data points"):
        llgrad.differentiate(lambda x: np.sum(np.fft.fft(x, n=0).real))(np.ones(4))
    with pytest.raises(DTypeError, match="complex numbers are not supported"):
        llgrad.differentiate(lambda x: np.sum(np.abs(x)))(np.ones(3) * 1j)
