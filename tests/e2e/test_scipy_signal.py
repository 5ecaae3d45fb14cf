"""scipy.signal.lfilter and filtfilt inside `llgrad.differentiate`: values against scipy,
gradients against central differences (float64) with respect to the signal, the coefficients
and the initial state; the recurrence stays one loop (not unrolled); and the errors."""
from __future__ import annotations

import numpy as np
import pytest
import scipy.signal as S

import llgrad
from llgrad.runtime.errors import UnsupportedError
from tests.e2e.conftest import compiled, finite_differences

R = np.random.default_rng(23)
Y = R.standard_normal(16)
M = R.standard_normal((3, 12))
B, A = np.array([0.3, 0.2, -0.1]), np.array([1.2, -0.5, 0.2])
ZI, ZIM = R.standard_normal(2), R.standard_normal((3, 2))
RAMP = np.arange(16.0)


def first_order(y):  # the brief's example
    return np.sum(S.lfilter([1.0], [1.0, -0.5], y) ** 2)


def second_order(y):
    return np.sum(S.lfilter(B, A, y) * RAMP) + np.sum(S.lfilter(B, [2.0], y) ** 2)  # FIR too


def with_state(y):
    out, zf = S.lfilter(B, A, y, zi=ZI)
    short, zf1 = S.lfilter(B, A, y[:1], zi=ZI)  # fewer samples than the state
    return np.sum(out ** 2) + np.sum(zf * [1.0, 2.0]) + np.sum(zf1 ** 2) + short[0]


def along_axis0(m):
    return np.sum(S.lfilter(B, A, m, axis=0) ** 2)


def traced_b(b):
    return np.sum(S.lfilter(b, A, Y) ** 2)


def traced_a(a):
    return np.sum(S.lfilter(B, a, Y) ** 2)


def traced_state(z):
    out, zf = S.lfilter(B, A, M, zi=z)
    return np.sum(out ** 2) + np.sum(zf ** 3)


def zero_phase(y):
    return np.sum(S.filtfilt(B, A, y) * RAMP)


def zero_phase_pads(m):
    return (np.sum(S.filtfilt(B, A, m, padtype="even", padlen=4) ** 2)
            + np.sum(S.filtfilt(B, A, m, axis=0, padtype=None) ** 2)
            + np.sum(S.filtfilt(B, A, m, padtype="constant") ** 2))


CASES = [(first_order, Y), (second_order, Y), (with_state, Y), (along_axis0, M),
         (traced_b, B), (traced_a, A), (traced_state, ZIM), (zero_phase, Y),
         (zero_phase_pads, M)]


@pytest.mark.parametrize("fn,arg", CASES, ids=[c[0].__name__ for c in CASES])
def test_value_and_gradient(fn, arg):
    value, grad = compiled(fn, 0).value_and_grad(arg)
    assert value == pytest.approx(fn(arg), rel=1e-12)
    np.testing.assert_allclose(grad, finite_differences(fn, (arg,), (0,))[0], rtol=1e-6,
                               atol=1e-8)


def test_arrays_against_scipy(mode):
    f = llgrad.differentiate(lambda y: S.lfilter(B, A, y, zi=ZI))
    got, want = f(Y), S.lfilter(B, A, Y, zi=ZI)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(llgrad.differentiate(lambda m: S.filtfilt(B, A, m))(M),
                               S.filtfilt(B, A, M), rtol=1e-11, atol=1e-13)


def test_recurrence_is_one_loop_forward_and_backward():
    text = compiled(first_order, 0).inspect(Y).backward_ir
    assert "iir" in text and "reverse=True" in text  # the transpose: the filter run backwards
    assert text.count(" = iir ") == 2  # not unrolled: one op per direction


@pytest.mark.parametrize("call,err,match", [
    (lambda y: S.filtfilt(y[:3], A, Y), UnsupportedError,
     r"filtfilt with traced coefficients(.*\n)*.*test_scipy_signal.py:\d+"),
    (lambda y: S.filtfilt(B, A, y, method="gust"), UnsupportedError, "method='gust'"),
    (lambda y: S.lfilter(B, A, y, zi=ZI[:1])[0], ValueError, "Unexpected shape for zi"),
    (lambda y: S.filtfilt(B, A, y, padtype="wrap"), ValueError, "Unknown value 'wrap'"),
    (lambda y: S.lfilter(B, [0.0, 1.0], y), ValueError, "a\\[0\\] == 0"),
    (lambda y: S.lfilter(np.ones((2, 2)), A, y), ValueError, "b must be a non-empty 1-D"),
])
def test_errors(call, err, match):
    with pytest.raises(err, match=match):
        llgrad.differentiate(lambda y: np.sum(call(y)))(Y)



# ---- convolutions and correlations: one conv op of the padded input ---------------------------
IMG = R.standard_normal((6, 7))
K24, K33 = R.standard_normal((2, 4)), R.standard_normal((3, 3))


@pytest.mark.parametrize("name", ["convolve2d", "correlate2d"])
def test_2d_modes_and_boundaries_against_scipy(name, mode):
    fn = getattr(S, name)
    for k in (K24, K33):
        for m in ("full", "same", "valid"):
            for kw in ({"boundary": "fill", "fillvalue": 0.7}, {"boundary": "wrap"},
                       {"boundary": "symm"}):
                f = lambda a: fn(a, k, m, **kw)  # noqa: E731
                np.testing.assert_allclose(llgrad.differentiate(f)(IMG), f(IMG), rtol=1e-12,
                                           atol=1e-13, err_msg=f"{k.shape} {m} {kw}")


def test_nd_convolutions_against_scipy():
    k4 = np.array([1.0, -2.0, 0.5, 3.0])
    for f, arg in [(lambda v: S.convolve(v, k4, "same"), Y), (lambda v: S.correlate(v, k4, "same"),
                                                              Y),
                   (lambda v: S.correlate(v[:3], k4, "valid"), Y),  # the kernel larger
                   (lambda v: S.fftconvolve(v, k4, "same"), Y),
                   (lambda a: S.fftconvolve(a, K24, "valid"), IMG)]:
        np.testing.assert_allclose(llgrad.differentiate(f)(arg), f(arg), rtol=1e-11, atol=1e-13)


def image_and_kernel(a, k):
    return (np.sum(S.convolve2d(a, k, "same", boundary="symm") ** 2)
            + np.sum(S.correlate2d(a, k, "valid") * a[:4, :5]) + np.sum(S.fftconvolve(a, k) ** 2))


def test_2d_gradients_wrt_image_and_kernel():
    value, (ga, gk) = compiled(image_and_kernel, (0, 1)).value_and_grad(IMG, K33)
    assert value == pytest.approx(image_and_kernel(IMG, K33), rel=1e-12)
    fa, fk = finite_differences(image_and_kernel, (IMG, K33), (0, 1))
    np.testing.assert_allclose(ga, fa, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(gk, fk, rtol=1e-6, atol=1e-7)


def test_convolution_errors():
    with pytest.raises(UnsupportedError, match=r"scipy.signal.convolve of 3-D arrays(.*\n)*.*"
                       r"test_scipy_signal.py:\d+"):
        llgrad.differentiate(lambda a: np.sum(S.convolve(a[None], a[None])))(IMG)
    with pytest.raises(ValueError, match="at least as large as the other"):
        llgrad.differentiate(lambda a: np.sum(S.convolve2d(a, np.ones((2, 9)), "valid")))(IMG)
    with pytest.raises(ValueError, match="Acceptable boundary flags"):
        llgrad.differentiate(lambda a: np.sum(S.convolve2d(a, K33, boundary="odd")))(IMG)

# ---- compiled library code given traced values (Note [Compiled library code on traced values])
def test_compiled_library_function_is_named_not_its_conversion_error():
    # scipy's C filter reports the failed conversion of a traced value as "could not convert
    # b, a, and x to a common type", which read like the user's mistake
    from scipy.signal import _sigtools
    with pytest.raises(UnsupportedError, match=r"scipy.signal._sigtools._linear_filter is "
                       r"compiled code, which cannot take traced values \(ValueError: could not "
                       r"convert(.*\n)*.*test_scipy_signal.py:\d+(.*\n)*.*How to fix"):
        llgrad.differentiate(lambda y: np.sum(_sigtools._linear_filter(
            np.ones(1), np.array([1.0, -0.5]), y, -1)))(Y)


def test_library_function_calling_compiled_code_names_the_function_called():
    with pytest.raises(UnsupportedError, match=r"scipy.signal.upfirdn is not supported on traced "
                       r"values.*_apply is compiled code(.*\n)*.*test_scipy_signal.py:\d+"):
        llgrad.differentiate(lambda y: np.sum(S.upfirdn([1.0, 1.0], y, 2)))(Y)
