"""Small work arrays on the stack and small loops unrolled (issue 13): Note [Small arrays on
the stack] in codegen/plan.py, Note [Unrolled small loops] in codegen/unroll.py.

Structure: an array of at most plan.STACK_BYTES lives in an alloca that LLVM promotes to
registers once the loops over it are unrolled, a larger one stays in the workspace; loops
with constant bounds are marked for unrolling, loops whose bounds LLVM could not make
constant are not (LLVM would warn on stderr). Values: every way two names can share or
exchange a small array's storage (views, copies, in-place updates, exchanged carried
arrays, results that are work arrays or arguments, a kernel run in segments), compiled vs
plain Python vs the interpreter, gradients vs central differences."""
from __future__ import annotations

import re

import numpy as np
import pytest

import llgrad
from llgrad.codegen.plan import STACK_BYTES
from tests.e2e.conftest import finite_differences

RNG = np.random.default_rng(1313)


def _module(d, entry):
    return next(iter(d._cache.values())).modules[entry]


def rows_triangle(L, X):
    """Per row of X: y = tril(L) @ x in a work array of d = 8, built column by column."""
    n, d = X.shape
    y = np.zeros(d)
    total = 0.0
    for i in range(n):
        for c in range(d):
            y[c] = L[c, c] * X[i, c]
        for c in range(d):
            for r in range(c + 1, d):
                y[r] += L[r, c] * X[i, c]
        for r in range(d):
            total += y[r] * y[r]
    return total


def big_work_array(x):
    """A work array of 100 doubles (800 bytes): over STACK_BYTES, it stays in the workspace."""
    a = np.zeros(100)
    total = 0.0
    for i in range(x.shape[0]):
        for r in range(100):
            a[r] = a[r] * 0.5 + x[i] * r
        total += a[7] * a[93]
    return total


def test_work_arrays_are_promoted_to_registers_and_loops_unrolled():
    L, X = RNG.standard_normal((8, 8)), RNG.standard_normal((300, 8))
    d = llgrad.differentiate(rows_triangle, wrt=0)
    value, grad = d.value_and_grad(L, X)
    assert value == pytest.approx(rows_triangle(L, X), rel=1e-12)
    assert d(L, X) == pytest.approx(rows_triangle(L, X), rel=1e-12)
    np.testing.assert_allclose(grad, finite_differences(rows_triangle, (L, X), (0,))[0],
                               rtol=1e-6, atol=1e-6)
    for entry in ("forward", "joint"):
        m = _module(d, entry)
        assert re.search(r'%"?stack\d+"? = alloca \[64 x i8\]', m.llvm_ir)  # y: 8 doubles
        assert "llvm.loop.unroll.full" in m.llvm_ir
        assert m.stats["opt level"] == 2  # Note [Choosing the optimisation level]
        # unrolled, y's elements are registers: SROA removed its alloca
        assert not re.search(r"%stack\d+(\.i)? = alloca \[64 x i8\]", m.optimized_ir)
        # a nest of loops this small never polls for Ctrl-C (Note [Where loops poll]): the
        # counter is read once, at the kernel's entry
        assert m.llvm_ir.count('load volatile i64, i64* @"llgrad_interrupts"') == 1


def test_a_work_array_over_the_limit_stays_in_the_workspace():
    assert 100 * 8 > STACK_BYTES
    x = RNG.standard_normal(50)
    d = llgrad.differentiate(big_work_array)
    assert d(x) == pytest.approx(big_work_array(x), rel=1e-12)
    sizes = [int(n) for n in re.findall(r"alloca \[(\d+) x i8\]", _module(d, "forward").llvm_ir)]
    assert all(n <= STACK_BYTES for n in sizes)


def tall_triangle(L, x):
    """An outer loop too long to unroll (UNROLL_TRIPS) around a triangle whose inner bound
    depends on its counter: the inner loop's trip count is not a constant, so it is not
    marked for unrolling, and LLVM has nothing to warn about."""
    n = x.shape[0]
    y = np.zeros(n)
    for c in range(n):
        for r in range(c + 1, n):
            y[r] += L[r, c] * x[c]
    return np.sum(y * y)


def test_no_unroll_warning_for_loops_whose_bounds_stay_unknown(capfd):
    L, x = RNG.standard_normal((20, 20)), RNG.standard_normal(20)
    d = llgrad.differentiate(tall_triangle)
    value, grad = d.value_and_grad(L, x)
    assert value == pytest.approx(tall_triangle(L, x), rel=1e-12)
    np.testing.assert_allclose(grad, finite_differences(tall_triangle, (L, x), (0,))[0],
                               rtol=1e-6, atol=1e-6)
    assert "llvm.loop.unroll.full" not in _module(d, "joint").llvm_ir
    args = (RNG.standard_normal((8, 8)), RNG.standard_normal((30, 8)))
    llgrad.differentiate(rows_triangle, wrt=0).value_and_grad(*args)
    assert "not unrolled" not in capfd.readouterr().err


def blur_by_offsets(img, k):
    """A 3x3 kernel applied by a loop over its offsets, each adding a whole window of the
    image: few ops, but array ops (Note [Unrolled small loops])."""
    n = img.shape[0]
    padded = np.pad(img, 1, mode="edge")
    out = np.zeros_like(img)
    for dy in range(3):
        for dx in range(3):
            out += k[dy, dx] * padded[dy:dy + n, dx:dx + n]
    return np.sum(out ** 2)


def test_loops_of_array_ops_writing_many_elements_are_not_unrolled():
    img, k = RNG.standard_normal((20, 20)), RNG.standard_normal((3, 3))
    d = llgrad.differentiate(blur_by_offsets, wrt=(0, 1))
    value, grads = d.value_and_grad(img, k)
    assert value == pytest.approx(blur_by_offsets(img, k), rel=1e-12)
    assert d(img, k) == pytest.approx(value, rel=1e-12)
    for g, fd in zip(grads, finite_differences(blur_by_offsets, (img, k), (0, 1))):
        np.testing.assert_allclose(g, fd, rtol=1e-6, atol=1e-6)
    for entry in ("forward", "joint"):  # 3 x 2 x 400 elements: over UNROLL_ELEMENTS
        assert "llvm.loop.unroll.full" not in _module(d, entry).llvm_ir


# ---- two names, one small array: compiled == plain Python == interpreter ----------------
def views(x):
    """Slices of a work array read and written in the same statement, and a reversed view."""
    a = np.zeros(6)
    for i in range(x.shape[0]):
        a[1:4] = a[0:3] + x[i]
        a[5] = np.sum(a[::-1][:3]) * 0.5 + a[0]
        a[0] = x[i] * a[4]
    return np.sum(a * a)


def copies(x):
    """A copy of a work array read after the original is updated in place."""
    a = np.zeros(5)
    total = 0.0
    for i in range(x.shape[0]):
        b = a.copy()
        for r in range(5):
            a[r] = b[4 - r] + x[i] * 2.0
        total += a[0] * b[1] + a[4] * b[4]
    return total


def swapped(x):
    """Two small carried arrays exchanged every iteration (Note [Swapped carried arrays])."""
    u = x[:5] * 0.0  # arrays made from the argument
    v = x[:5] * 0.0 + 1.0
    for s in range(x.shape[0]):
        for r in range(5):
            v[r] = 0.5 * u[r] + x[s] * (r + 1) + 0.25 * v[4 - r]
        u, v = v, u
    return np.sum(u * u) + np.sum(v * x[:5])


def scattered(w, idx):
    """`h[idx[t]] += w[t]` into a small histogram, then an element read between updates."""
    h = np.zeros(4)
    total = 0.0
    for t in range(idx.shape[0]):
        h[idx[t]] += w[t]
        total += h[idx[t]] * h[0]
    return total + np.sum(h * h)


CASES = [
    (views, lambda: (RNG.standard_normal(7),)),
    (copies, lambda: (RNG.standard_normal(6),)),
    (swapped, lambda: (RNG.standard_normal(7),)),
    (scattered, lambda: (RNG.standard_normal(9), RNG.integers(0, 4, 9))),
]


@pytest.mark.parametrize("fn,make", CASES, ids=[c[0].__name__ for c in CASES])
def test_shared_small_arrays(fn, make, mode):
    args = make()
    d = llgrad.differentiate(fn)
    value, grad = d.value_and_grad(*args)
    assert value == pytest.approx(fn(*args), rel=1e-12, abs=1e-12)
    np.testing.assert_allclose(grad, finite_differences(fn, args, (0,))[0], rtol=1e-6, atol=1e-8)


def work_array_out(x):
    a = np.zeros(4)
    for i in range(x.shape[0]):
        for r in range(4):
            a[r] = a[r] * x[i] + r
    return a, x, a[::-1]


def test_results_that_are_work_arrays_or_arguments(mode):
    x = RNG.standard_normal(5)
    a, y, back = llgrad.differentiate(work_array_out)(x)
    ea, ey, eback = work_array_out(x)
    np.testing.assert_allclose(a, ea, rtol=1e-14)
    np.testing.assert_allclose(back, eback, rtol=1e-14)
    assert np.array_equal(y, x)
    if mode == "native":  # fresh arrays: writing one changes neither another result nor x
        assert not np.shares_memory(a, back)
        a[0] = y[0] = 1e9
        assert back[3] != 1e9 and x[0] != 1e9


def across_segments(x):
    """A work array written and read by the units of a kernel run in segments, a loop among
    them (Note [Kernel segments] in codegen/lower.py)."""
    a = np.zeros(4)
    a[0] = x[0] * 2.0
    a[1] = a[0] + x[1]
    for i in range(3):
        a[i + 1] += a[i] * x[2]
    b = a[::-1] * a
    return np.sum(b) + a[3]


def test_small_arrays_across_kernel_segments(mode, monkeypatch):
    from llgrad.codegen import lower
    monkeypatch.setattr(lower, "SEGMENT_OPS", 1)
    x = RNG.standard_normal(3)
    d = llgrad.differentiate(across_segments)
    assert d(x) == pytest.approx(across_segments(x), rel=1e-14)
    if mode == "native":
        ir = _module(d, "forward").llvm_ir
        assert ".part1" in ir and '%"stack" = alloca' in ir
