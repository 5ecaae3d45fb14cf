"""Large elementwise loops and sums on native threads (codegen/threads.py, Note [Threads in
kernels]): results identical to the bit at 1, 2, 3 and 4 threads and equal to numpy's,
small loops single-threaded."""
from __future__ import annotations

import os

import numpy as np
import pytest

import llgrad
from llgrad.codegen import threads


def _run(monkeypatch, fn, args, n_threads, wrt=0):
    monkeypatch.setenv("LLGRAD_NUM_THREADS", str(n_threads))
    monkeypatch.delenv("LLGRAD_DISABLE_JIT", raising=False)
    d = llgrad.differentiate(fn, wrt=wrt)  # a fresh function: compiled at this thread count
    value, grad = d.value_and_grad(*args)
    return value, grad, d.inspect(*args).llvm_ir


def full_sum(x, y):
    return np.sum(np.sin(x) * np.exp(-y * y) + np.tanh(x * y))


def row_sums(x, y):  # axis 0 kept: rows split between threads
    return np.sum(np.sum(np.cos(x) * y, axis=1) ** 2)


def views(x, y):  # a transposed and a reversed operand, and a broadcast row
    return np.sum(np.sin(x.T) * y[::-1] + x[:, 0])


def mean_of_squares(x, y):
    return np.mean((x - y) ** 2) + np.max(x * y)  # max: per fixed block, as sums


def column_sums(x, y):  # axis 0 reduced, axis 1 kept: columns split between threads
    return np.sum(np.log1p(np.sum(np.exp(np.sin(x) * y), axis=0)) * np.max(x, axis=0))


def extrema(x, y):  # max, min and prod over every axis: fixed blocks combined in order
    return np.max(np.sin(x) * y) - np.min(x * np.cos(y)) + np.prod(1.0 + 1e-3 * np.tanh(x * y))


def vector_tails(x, y):  # an elementwise exp/cos loop whose blocks must start on vector lanes
    return np.sum(np.exp(np.sin(x)) @ y.T[:, :5])


CASES = [full_sum, row_sums, views, mean_of_squares, column_sums, extrema, vector_tails]


@pytest.mark.parametrize("fn", CASES, ids=[f.__name__ for f in CASES])
def test_results_do_not_depend_on_the_thread_count(monkeypatch, fn):
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=(601, 257)), rng.normal(size=(601, 257))
    if fn is views:
        y = rng.normal(size=(257, 601))
    ref = None
    for n in (1, 2, 3, 4):
        value, (gx, gy), ir_text = _run(monkeypatch, fn, (x, y), n, wrt=(0, 1))
        if ref is None:
            ref = value, gx, gy
            np.testing.assert_allclose(value, fn(x, y), rtol=1e-12)
        else:
            assert value == ref[0]
            np.testing.assert_array_equal(gx, ref[1])
            np.testing.assert_array_equal(gy, ref[2])
        if threads.available() and fn not in (mean_of_squares, extrema):
            assert ("GOMP_parallel" in ir_text) == (n > 1)


def batched(a, b, c):  # 25 BLAS products of 10x10x1000 and 64 loop-nest products of 8x8x300
    return np.sum(np.tanh(a @ b)) + np.sum(np.sin(c @ np.swapaxes(c, 1, 2)[:, :, :8] @ c))


def test_batched_products_split_between_threads(monkeypatch):
    rng = np.random.default_rng(1)
    args = rng.normal(size=(25, 10, 10)), rng.normal(size=(25, 10, 1000)), \
        rng.normal(size=(64, 8, 300)) * 0.1
    ref = None
    for n in (1, 2, 4):
        value, grads, ir_text = _run(monkeypatch, batched, args, n, wrt=(0, 1, 2))
        if ref is None:
            ref = value, grads
            np.testing.assert_allclose(value, batched(*args), rtol=1e-12)
        else:
            assert value == ref[0]
            for g, want in zip(grads, ref[1]):
                np.testing.assert_array_equal(g, want)
        if threads.available():
            assert ("llgrad.mmbatch" in ir_text) == (n > 1)


def test_blocks_start_on_vector_lanes():
    assert threads.blocks_of(601, 2, 16) == ((0, 304), (304, 297))
    assert threads.blocks_of(601, 3) == ((0, 201), (201, 200), (401, 200))
    assert threads.blocks_of(20, 4, 16) == ((0, 20),)  # one unit: one block


def test_small_loops_stay_single_threaded(monkeypatch):
    x = np.linspace(0.0, 1.0, threads.PARALLEL_MIN_ELEMENTS // 16)  # sin and cos: 1 + 8 each
    _, g, ir_text = _run(monkeypatch, lambda x: np.sum(np.sin(x) * x), (x,), 4)
    np.testing.assert_allclose(g, np.cos(x) * x + np.sin(x), rtol=1e-13)
    assert "GOMP_parallel" not in ir_text
    x = np.linspace(0.0, 1.0, threads.PARALLEL_MIN_ELEMENTS // 2)  # cheap: one thread
    _, g, ir_text = _run(monkeypatch, lambda x: np.sum(x * x), (x,), 4)
    assert "GOMP_parallel" not in ir_text
    _, g, ir_text = _run(monkeypatch, lambda x: np.sum(np.sin(x) * x), (x,), 4)
    assert "GOMP_parallel" in ir_text or not threads.available()  # costly per element


def test_small_products_stay_single_threaded(monkeypatch):  # mlp_step's shapes
    rng = np.random.default_rng(2)
    x, w = rng.normal(size=(64, 784)), rng.normal(size=(784, 128)) * 0.05
    _, g, ir_text = _run(monkeypatch, lambda w, x: np.sum(np.tanh(x @ w) ** 2), (w, x), 4)
    np.testing.assert_allclose(g, x.T @ (2 * np.tanh(x @ w) * (1 - np.tanh(x @ w) ** 2)),
                               rtol=1e-10)
    assert "GOMP_parallel" not in ir_text


def test_thread_count_is_checked(monkeypatch):
    monkeypatch.setenv("LLGRAD_NUM_THREADS", "many")
    with pytest.raises(ValueError, match="LLGRAD_NUM_THREADS='many' is not a number"):
        threads.num_threads()
    monkeypatch.setenv("LLGRAD_NUM_THREADS", "3")
    assert threads.num_threads() == 3
    monkeypatch.setenv("LLGRAD_NUM_THREADS", "auto")
    assert threads.num_threads() >= 1
    monkeypatch.delenv("LLGRAD_NUM_THREADS")
    assert threads.num_threads() == len(os.sched_getaffinity(0))  # unset: the cores we may use


@pytest.mark.skipif(not hasattr(__import__("os"), "fork"), reason="needs fork")
def test_a_forked_child_runs_the_blocks_in_order(monkeypatch):
    import os
    x = np.random.default_rng(1).normal(size=(512, 512))
    value, g, _ = _run(monkeypatch, lambda x: np.sum(np.sin(x) * x), (x,), 2)
    d = llgrad.differentiate(lambda x: np.sum(np.sin(x) * x))
    d.value_and_grad(x)  # compiled with 2 threads and run in this process
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: no team (libgomp's pool does not survive fork), same bits
        try:
            v2, g2 = d.value_and_grad(x)
            ok = v2 == value and np.array_equal(g2, g)
            os.write(w, b"1" if ok else b"0")
        finally:
            os._exit(0)
    os.close(w)
    import select
    assert select.select([r], [], [], 120)[0], "the forked child hung"
    assert os.read(r, 1) == b"1"
    os.waitpid(pid, 0)


def test_teams_skipped_after_waiting_run_in_order(monkeypatch):
    # Note [Teams on a busy machine]: while the process's backoff count is positive, each
    # team runs its blocks in order on the calling thread and counts down; same results
    x = np.random.default_rng(3).normal(size=(512, 512))
    fn = lambda x: np.sum(np.sum(np.sin(x), axis=1) ** 2)  # noqa: E731
    value, g, ir_text = _run(monkeypatch, fn, (x,), 2)
    if not threads.available():
        pytest.skip("no libgomp")
    joint = ir_text[ir_text.index("_joint.body"):]
    teams = joint.count('call void @"GOMP_parallel"')
    assert teams >= 1
    d = llgrad.differentiate(fn)
    d.value_and_grad(x)  # compiled with 2 threads
    saved = list(threads._BACKOFF)
    try:
        threads._BACKOFF[0], threads._BACKOFF[1] = 100, 8
        v2, g2 = d.value_and_grad(x)
        assert threads._BACKOFF[0] == 100 - teams and threads._BACKOFF[1] == 8
        assert v2 == value and np.array_equal(g2, g)
    finally:
        threads._BACKOFF[0], threads._BACKOFF[1] = saved
