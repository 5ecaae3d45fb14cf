import ctypes
import threading
import timeit

import numpy as np
import pytest

from llgrad.codegen import abi, loops, vmath

F64 = vmath.F64


def _axpy(b, alpha, x, y, out):
    a = loops.load(b, alpha, 0, F64)

    def body(b, i, w):
        av = vmath.splat(b, a, w)
        xv, yv = loops.load(b, x, i, F64, w), loops.load(b, y, i, F64, w)
        loops.store(b, b.fadd(b.fmul(av, xv), yv), out, i)
    loops.elementwise(b, 100, 4, body)


@pytest.fixture
def axpy(kernel):
    return kernel(4, _axpy)


def _inputs():
    x, y = np.arange(100.0), np.linspace(0, 1, 100)
    return np.array(3.0), x, y, np.empty(100)


def test_kernel_call_path(axpy):
    alpha, x, y, out = _inputs()
    axpy(alpha, x, y, out)
    np.testing.assert_array_equal(out, 3.0 * x + y)


def test_unchecked_and_pointer_paths_agree(axpy):
    alpha, x, y, out = _inputs()
    axpy.call_unchecked((alpha, x, y, out))
    out2 = np.empty(100)
    axpy.call_pointers(abi.pointer_array([alpha, x, y, out2]))
    np.testing.assert_array_equal(out, out2)
    np.testing.assert_array_equal(out, 3.0 * x + y)


def test_fallback_without_trampoline(kernel, monkeypatch):
    monkeypatch.setattr(abi, "fast_path_available", lambda: False)
    k = kernel(4, _axpy)
    alpha, x, y, out = _inputs()
    k(alpha, x, y, out)
    np.testing.assert_array_equal(out, 3.0 * x + y)


def test_views_pass_their_data_pointer(axpy):
    """The trampoline reads `data`, so an offset view starts at the right element."""
    alpha, x, y, _ = _inputs()
    big = np.zeros(110)
    axpy(alpha, x, y, big[5:105])
    np.testing.assert_array_equal(big[5:105], 3.0 * x + y)
    assert not big[:5].any() and not big[105:].any()


def test_fast_path_offsets_hold_here():
    assert abi.fast_path_available()


def test_checked_call_errors(axpy):
    alpha, x, y, out = _inputs()
    with pytest.raises(TypeError, match="takes 4 buffers, got 3"):
        axpy(alpha, x, y)
    with pytest.raises(TypeError, match="must be numpy arrays"):
        axpy(alpha, list(x), y, out)


def test_threads_call_concurrently(axpy):
    errors = []

    def work(seed):
        rng = np.random.default_rng(seed)
        for _ in range(50):
            x, y = rng.normal(size=100), rng.normal(size=100)
            out = np.empty(100)
            axpy(np.array(float(seed)), x, y, out)
            if not np.array_equal(out, seed * x + y):
                errors.append(seed)

    threads = [threading.Thread(target=work, args=(s,)) for s in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors


def test_entry_signature_returns_a_status(axpy):
    """i64 (ptr): 0 when the kernel ran to the end (Note [Native errors])."""
    assert isinstance(axpy._entry, ctypes._CFuncPtr)
    assert abi.ENTRY_TYPE.return_type == abi.ir.IntType(64)
    alpha, x, y, out = _inputs()
    assert axpy(alpha, x, y, out) == 0
    assert axpy.call_unchecked((alpha, x, y, out)) == 0
    assert axpy.call_pointers(abi.pointer_array([alpha, x, y, out])) == 0


def test_call_overhead_is_small(kernel):
    """Not a benchmark: a generous bound that catches a regression to ~10 us per call."""
    k = kernel(5, lambda b, *ptrs: None)
    arrays = tuple(np.ones(10) for _ in range(5))
    per_call = min(timeit.repeat(lambda: k(*arrays), number=2000, repeat=3)) / 2000
    assert per_call < 10e-6
