"""Compiled functions called from many Python threads at once (issue 16): every call gives the
single-threaded result, the first calls racing to compile included, and native calls release
the GIL so other Python threads run meanwhile."""
from __future__ import annotations

import threading
import time

import numpy as np

import llgrad
from llgrad.codegen.threads import available as threads_available


def _loss(w, x):
    s = 0.0
    for i in range(x.shape[0]):
        s = s + np.tanh(x[i] @ w) ** 2
    return s / x.shape[0] + np.sum(np.exp(-w * w))


def test_eight_threads_get_the_single_threaded_results(monkeypatch):
    monkeypatch.setenv("LLGRAD_NUM_THREADS", "2")  # and each kernel's own team (threads.py)
    rng = np.random.default_rng(0)
    inputs = [(rng.normal(size=5), rng.normal(size=(n, 5))) for n in (7, 7, 9, 7, 9, 11, 7, 9)]
    want = [llgrad.differentiate(_loss).value_and_grad(w, x) for w, x in inputs]
    big = rng.normal(size=(400, 400))  # large enough for the kernels' own threads
    monkeypatch.setenv("LLGRAD_NUM_THREADS", "1")  # the single-threaded results
    want_big = llgrad.differentiate(_big).value_and_grad(big)
    monkeypatch.setenv("LLGRAD_NUM_THREADS", "2")
    f = llgrad.differentiate(_loss)  # fresh: the threads race to trace and compile
    fb = llgrad.differentiate(_big)
    got, got_big, errors = [[] for _ in inputs], [], []
    start = threading.Barrier(len(inputs))

    def work(k):
        try:
            start.wait()
            for _ in range(25):
                got[k].append(f.value_and_grad(*inputs[k]))
                got[k].append((f(*inputs[k]), got[k][-1][1]))
            got_big.append(fb.value_and_grad(big))
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(len(inputs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    for k, (v, g) in enumerate(want):
        for value, grad in got[k]:
            assert value == v
            np.testing.assert_array_equal(grad, g)
    assert f.cache_info()["signatures"] == 3
    for value, grad in got_big:
        assert value == want_big[0]
        np.testing.assert_array_equal(grad, want_big[1])
    if threads_available():  # the kernels ran their own teams
        assert "llgrad.mmbatch" in fb.inspect(big).llvm_ir


def _big(x):  # row and column blocks, fixed blocks of a sum and a max, a batch of products
    xb = x.reshape(25, 16, 400)
    return (np.sum(np.tanh(x) * np.exp(-x * x)) + np.sum(np.sum(np.sin(x), axis=1) ** 2)
            + np.sum(np.max(x, axis=0) * np.sum(np.cos(x), axis=0)) + np.max(x * x)
            + np.sum(np.tanh(xb @ np.swapaxes(xb, 1, 2))))


def test_native_calls_release_the_gil():
    @llgrad.differentiate
    def slow(x):
        s = 0.0
        for i in range(x.shape[0]):
            s = s + np.sin(x[i]) * np.cos(s)
        return s

    x = np.linspace(0.0, 1.0, 2_000_000)
    slow.grad(x)  # compiled
    count, stop = [0], threading.Event()

    def spin():
        while not stop.is_set():
            count[0] += 1

    t = threading.Thread(target=spin)
    t.start()
    time.sleep(0.01)
    before = count[0]
    t0 = time.perf_counter()
    slow.grad(x)  # one native call of (here) tens of milliseconds
    spent = time.perf_counter() - t0
    during = count[0] - before
    stop.set()
    t.join()
    assert spent > 0.005
    assert during > 1000  # the other thread ran while the kernel did
