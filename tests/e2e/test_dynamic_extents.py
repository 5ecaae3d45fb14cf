"""Slices whose bounds are loop counters (issue 12, Note [Slices of loop-dependent length] in
runtime/padded.py): the hand-written factorisations and solves people write compile once, as
staged loops, with values equal to plain Python and gradients equal to finite differences,
natively and in the interpreter; uses the padding could change raise naming the line."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import llgrad
from llgrad.tracer.tracing import UnrollWarning
from llgrad.runtime.errors import ShapeError, UnsupportedError
from tests.e2e.conftest import finite_differences
from tests.fd import FD_TOL


def cholesky_solve(A, b):
    n = A.shape[0]
    L = np.zeros_like(A)
    for i in range(n):
        for j in range(i + 1):
            s = np.dot(L[i, :j], L[j, :j])
            if i == j:
                L[i, j] = np.sqrt(A[i, i] - s)
            else:
                L[i, j] = (A[i, j] - s) / L[j, j]
    z = np.zeros(n)
    for i in range(n):
        z[i] = (b[i] - np.dot(L[i, :i], z[:i])) / L[i, i]
    x = np.zeros(n)
    for i in reversed(range(n)):
        x[i] = (z[i] - np.dot(L[i + 1:, i], x[i + 1:])) / L[i, i]
    return np.sum(x ** 2)


def gram_schmidt(A, W):
    n = A.shape[1]
    Q = np.zeros_like(A)
    t = 0.0
    for k in range(n):
        v = A[:, k] - Q[:, :k] @ (Q[:, :k].T @ A[:, k])
        Q[:, k] = v / np.linalg.norm(v)
        t = t + np.sum(np.dot(W[:, k], Q[:, :k]) ** 2) + np.sum(W[:, k] @ Q[:, :k])
    return np.sum(Q * W) + t


def back_substitution(U, b):
    n = b.shape[0]
    x = np.zeros_like(b)
    for i in reversed(range(n)):
        x[i] = (b[i] - U[i, i + 1:] @ x[i + 1:]) / U[i, i]
    return np.sum(x * np.arange(1.0, n + 1))


def prefix_dots(x, y):
    s = x[0] * 0.0  # traced: the loop is staged from i = 0
    for i in range(x.shape[0]):
        s = s + x[:i] @ y[:i] + np.sum(x[i:]) * np.sum(y[1:i] ** 2)
    return s


def row_tail_writes(A):
    B = A.copy()
    for i in range(A.shape[0]):
        B[i, i + 1:] = np.sin(B[i, i + 1:]) * B[i, i]
        B[i + 1:, i] += 0.5 * B[i, i + 1:]
        B[:i, i] = 0.25
    return np.sum(B * B)


def lu_logdet(A):
    U = A.copy()
    s = 0.0
    for k in range(A.shape[0]):
        s = s + np.log(np.abs(U[k, k]))
        U[k + 1:, k + 1:] -= np.outer(U[k + 1:, k], U[k, k + 1:]) / U[k, k]
    return s


def window_statistics(x):
    s = x[0] * 0.0  # traced: the loop is staged from i = 0
    for i in range(x.shape[0]):
        s = s + np.mean(x[:i + 1]) * np.max(x[i:]) + np.min(x[i // 2:i + 1] ** 2)
        s = s + np.sum(x[i:i + 3]) + np.prod(np.cos(x[:i])) + np.linalg.norm(x[::-1][:i])
    return s


def wrapping_bounds(x, w):
    s = x[0] * 0.0  # traced: the loop is staged from i = 0
    for i in range(x.shape[0]):
        s = s + np.sum(x[:i - 1] * 2.0) + x[i::-1] @ w[:i + 1] + np.sum(x[i - 3:i - 1])
        s = s + np.sum(x[i:i + 1] * w) + np.sum(x[i:i + 1] + w[:i + 1])  # length 1 broadcasts
    return s


def sliding_windows(x, stop):
    y = np.zeros(3)
    s = x[0] * 0.0
    for i in range(x.shape[0] - stop):
        y[:3] = x[i:i + 3] * 2.0  # a window of at most 3 into a static slice
        s = s + y @ np.arange(1.0, 4.0) + np.sum(x[i:i + 3] * np.ones(3))
    return s


def matrix_windows(A, v):
    s = A[0, 0] * 0.0
    for i in range(A.shape[0]):
        B = A[i:, :i + 1]  # both axes of run-time length
        c = np.sum(B, axis=0)
        s = s + c @ v[:i + 1] + np.sum(B.T @ v[i:]) + np.mean(B) * np.sum(A[i:][:, 0] * v[i:])
        s = s + np.max(np.abs(B), axis=1) @ v[i:] + np.sum(v[:i][:, None] * A[None, :2, 0])
    return s


def shifted_slices_added_in_place(kernel, image):
    """A cross-correlation by shifted slices `+=`-ed into a fresh numpy array (np.add with
    out= on a slice of loop-dependent length was refused)."""
    kh, kw = kernel.shape
    H, W = image.shape
    out = np.zeros((H - kh + 1, W - kw + 1))
    for i in range(kh):
        for j in range(kw):
            out += kernel[i, j] * image[i:i + H - kh + 1, j:j + W - kw + 1]
    return np.sum(np.tanh(out))


def _spd(n, seed=0):
    rng = np.random.default_rng(seed)
    m = rng.standard_normal((n, n))
    return m @ m.T + n * np.eye(n)


def _cases():
    rng = np.random.default_rng(1)
    x, y = rng.standard_normal(6), rng.standard_normal(6)
    A = rng.standard_normal((5, 4))
    U = np.triu(rng.standard_normal((5, 5))) + 4 * np.eye(5)
    return [
        (cholesky_solve, (_spd(4), rng.standard_normal(4)), (0, 1)),
        (cholesky_solve, (_spd(10), rng.standard_normal(10)), (0,)),
        (gram_schmidt, (A, rng.standard_normal((5, 4))), (0,)),
        (back_substitution, (U, rng.standard_normal(5)), (0, 1)),
        (prefix_dots, (x, y), (0, 1)),
        (row_tail_writes, (rng.standard_normal((5, 5)),), (0,)),
        (lu_logdet, (_spd(5),), (0,)),
        (window_statistics, (rng.uniform(0.5, 2.0, 7) * rng.choice([-1, 1], 7),), (0,)),
        (wrapping_bounds, (x, y), (0, 1)),
        (matrix_windows, (rng.standard_normal((5, 5)), rng.standard_normal(5)), (0, 1)),
        (sliding_windows, (x, 2), (0,)),
        (shifted_slices_added_in_place, (A[:3, :3], rng.standard_normal((6, 7))), (0, 1)),
    ]


CASES = _cases()


@pytest.mark.parametrize("fn, args, wrt", CASES,
                         ids=[f"{c[0].__name__}-{c[1][0].shape[0]}" for c in CASES])
def test_values_and_gradients(fn, args, wrt, mode):
    f = llgrad.differentiate(fn, wrt=wrt)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UnrollWarning)  # compiled as loops, not unrolled
        value, grads = f.value_and_grad(*args)
    ins = f.inspect(*args)
    assert ins.path == "staged" and "dynamic_window" in ins.forward_ir
    np.testing.assert_allclose(value, fn(*args), rtol=1e-10, atol=1e-12)
    grads = grads if isinstance(grads, tuple) else (grads,)
    for g, fd in zip(grads, finite_differences(fn, args, wrt)):
        np.testing.assert_allclose(g, fd, rtol=FD_TOL[0] * 10, atol=1e-7)


def test_cholesky_compiles_once_whatever_n():
    """The IR does not grow with n: one loop body serves every length."""
    f = llgrad.differentiate(cholesky_solve)
    ops = []
    for n in (10, 50):
        ins = f.inspect(_spd(n), np.ones(n))
        assert ins.path == "staged"
        ops.append(ins.stats["ops (traced)"])
    assert ops[0] == ops[1]


# ---- numpy's slice semantics, bound by bound ----------------------------------------------------
def _at(i, offset):
    return None if offset is None else i + offset


def strided_slices(x, y, a, b, step):
    s, y = x[0] * 0.0, y.copy()
    for i in range(x.shape[0]):
        v = x[_at(i, a):_at(i, b):step]
        s = s + np.sum(v * v) + np.sum(v)
        y[_at(i, a):_at(i, b):step] = y[_at(i, a):_at(i, b):step] * 0.5 + v * i
    return s + y @ np.arange(1.0, y.shape[0] + 1)


def _slice_params():
    rng = np.random.default_rng(3)
    starts, stops = [None, -3, -1, 0, 2], [None, -2, 0, 1, 3]
    out = set()
    while len(out) < 16:
        a, b = starts[rng.integers(5)], stops[rng.integers(5)]
        if a is not None or b is not None:  # a bound that is traced
            out.add((a, b, int(rng.choice([1, 2, -1, -2]))))
    return sorted(out, key=repr)


@pytest.mark.parametrize("a, b, step", _slice_params())
def test_slice_bounds_follow_numpy(a, b, step, no_jit):
    """x[i + a:i + b:step] for every i (negative bounds wrap, bounds clamp), read and written,
    through the interpreter (the lowerings are checked against it in test_lower_ops)."""
    x, y = np.linspace(-1.0, 2.0, 6), np.linspace(0.5, 1.5, 6)
    f = llgrad.differentiate(strided_slices, wrt=(0, 1))
    value, grads = f.value_and_grad(x, y, a, b, step)
    assert "dynamic_window" in f.inspect(x, y, a, b, step).forward_ir
    np.testing.assert_allclose(value, strided_slices(x, y, a, b, step), rtol=1e-12)
    fd = finite_differences(lambda x, y: strided_slices(x, y, a, b, step), (x, y), (0, 1))
    for g, d in zip(grads, fd):
        np.testing.assert_allclose(g, d, rtol=1e-6, atol=1e-8)


# ---- reversed(range(...)) is a staged loop -----------------------------------------------------
def reversed_loops(x, step):
    s = x[0] * 0.0
    for i in reversed(range(x.shape[0])):
        for j in reversed(range(1, i + 2, step)):  # traced bounds; empty for some i
            s = s * 0.5 + x[j % x.shape[0]] * (i + 1)
    for i in reversed(range(x.shape[0] - 1, -1, -step)):
        s = s * 0.9 + x[i]
    return s


@pytest.mark.parametrize("step", [1, 2, 3])
def test_reversed_range_is_one_loop(step, no_jit):
    x = np.linspace(0.5, 2.0, 5)
    f = llgrad.differentiate(reversed_loops)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UnrollWarning)
        value, grad = f.value_and_grad(x, step)
    assert f.inspect(x, step).forward_ir.count("for_loop") == 3
    np.testing.assert_allclose(value, reversed_loops(x, step), rtol=1e-12)
    fd, = finite_differences(lambda x: reversed_loops(x, step), (x,), (0,))
    np.testing.assert_allclose(grad, fd, rtol=1e-6, atol=1e-8)


# ---- numpy's errors at run time -------------------------------------------------------------
def max_of_prefix(x):
    s = 0.0
    for i in range(x.shape[0]):
        s = s + np.max(x[:i])
    return s


def mismatched_lengths(x):
    s = x[0] * 0.0  # traced state: the loop is staged from its first iteration
    for i in range(x.shape[0]):
        s = s + np.sum(x[:i] * x[i:])
    return s


def test_max_of_an_empty_slice_raises_as_numpy(mode):
    x = np.arange(4.0)
    with pytest.raises(ValueError, match="zero-size array"):
        max_of_prefix(x)
    with pytest.raises(ValueError, match="zero-size array to reduction operation maximum"):
        llgrad.differentiate(max_of_prefix)(x)


def test_lengths_that_differ_at_run_time_raise(mode):
    x = np.arange(4.0)
    with pytest.raises(ValueError, match="operands could not be broadcast"):
        mismatched_lengths(x)
    with pytest.raises(ValueError, match="lengths of slices with traced bounds differ"):
        llgrad.differentiate(mismatched_lengths)(x)
    with pytest.raises(ValueError, match="could not broadcast input array from shape"):
        sliding_windows(x, 0)  # the last windows are shorter than 3
    with pytest.raises(ValueError, match="lengths of slices with traced bounds differ"):
        llgrad.differentiate(sliding_windows)(x, 0)


# ---- uses that need the real shape, or that the padding could change: errors at the line ---
def uses_len(x):
    s = x[0] * 0.0
    for i in range(x.shape[0]):
        s = s + len(x[:i])
    return s


def uses_shape(x):
    s = x[0] * 0.0
    for i in range(x.shape[0]):
        s = s + x[:i].shape[0] * x[i]
    return s


def unsupported_function(x):
    s = x[0] * 0.0
    for i in range(x.shape[0]):
        s = s + np.sum(np.cumsum(x[:i]))
    return s


def returns_a_slice(x):
    k = np.argmax(x)
    return x[:k]


def merges_a_slice(x):
    s = x[0] * 0.0
    for i in range(x.shape[0]):
        v = x[:i]
        if s > 1.0:
            v = v * 2.0
        s = s + np.sum(v)
    return s


def writes_through_a_view(x):
    y = x.copy()
    for i in range(x.shape[0]):
        v = y[:i]
        v *= 2.0
    return np.sum(y)


@pytest.mark.parametrize("fn, error, match, line", [
    (uses_len, ShapeError, r"len\(\) needs the shape of a slice of loop-dependent length",
     "len(x[:i])"),
    (uses_shape, ShapeError, r"`\.shape` needs the shape", "x[:i].shape"),
    (unsupported_function, UnsupportedError, r"np\.cumsum is not supported on a slice",
     "np.cumsum"),
    (returns_a_slice, ShapeError, r"returning it from returns_a_slice needs the shape",
     "x[:k]"),
    (merges_a_slice, UnsupportedError, r"merging variable `v` over the paths of a traced `if`",
     "if s > 1.0"),
    (writes_through_a_view, UnsupportedError, r"in-place \*= of `v`.*a view of `y`", "v *="),
], ids=lambda c: c.__name__ if callable(c) else None)
def test_uses_needing_the_shape_raise_naming_the_line(fn, error, match, line):
    with pytest.raises(error, match=match) as info:
        llgrad.differentiate(fn)(np.arange(1.0, 5.0))
    assert f"test_dynamic_extents.py:{_line_of(fn, line)}" in str(info.value)


def _line_of(fn, text):
    import inspect
    lines, first = inspect.getsourcelines(fn)
    return first + next(k for k, source in enumerate(lines) if text in source)
