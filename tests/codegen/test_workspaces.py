"""Workspaces and the loop tapes kept in them (codegen/compiled.py, Note [Workspaces]; plan.py,
Note [Tapes in codegen]): a tape's buffer outlives the call and the next call in the thread
reuses it; each thread has its own; buffers are freed with their workspace; a buffer over
KEEP_BYTES is not kept."""
from __future__ import annotations

import gc
import threading

import numpy as np
import pytest

import llgrad
from llgrad.codegen import abi, compiled
from llgrad.codegen.lowerings.tapes import KEEP_BYTES


def recurrence(x):
    s = x[0]
    for i in range(1, len(x)):
        s = 0.9 * s + np.sin(x[i]) * x[i - 1]
    return s


def _reference_grad(x):
    """d recurrence / dx by hand: s_i = 0.9 s_{i-1} + sin(x_i) x_{i-1}."""
    n, g, bar = len(x), np.zeros_like(x), 1.0
    for i in range(n - 1, 0, -1):
        g[i] += bar * np.cos(x[i]) * x[i - 1]
        g[i - 1] += bar * np.sin(x[i])
        bar *= 0.9
    g[0] += bar
    return g


def _joint(f, *args) -> compiled.Entry:
    f.value_and_grad(*args)
    (c,) = f._cache.values()
    return c.modules["joint"]["joint"]


def _heads(entry: compiled.Entry) -> list[tuple[int, int]]:
    """This thread's (buffer address, rows allocated) of each tape of `entry`."""
    ws = entry._tls.ws
    raw = ws[entry.record - abi.TAPE_HEADER * entry.tapes:entry.record].view(np.uintp)
    return [(int(raw[2 * k]), int(raw[2 * k + 1])) for k in range(entry.tapes)]


def test_tapes_are_kept_and_reused():
    f = llgrad.differentiate(recurrence)
    x = np.random.default_rng(0).standard_normal(1000)
    entry = _joint(f, x)
    first = _heads(entry)
    assert entry.tapes >= 1 and all(data and rows >= 999 for data, rows in first)
    for _ in range(3):
        value, grad = f.value_and_grad(x)
        assert _heads(entry) == first  # the same buffers, not grown
        np.testing.assert_allclose(grad, _reference_grad(x), rtol=1e-12)
        assert value == pytest.approx(recurrence(x), rel=1e-13)


def test_each_thread_has_its_tapes_and_frees_them(monkeypatch):
    freed = []
    free = compiled._free
    monkeypatch.setattr(compiled, "_free", lambda p: (freed.append(p), free(p)))
    f = llgrad.differentiate(recurrence)
    xs = [np.random.default_rng(k).standard_normal(500) for k in range(3)]
    entry = _joint(f, xs[0])
    mine = _heads(entry)
    seen, grads, alive = {}, {}, threading.Barrier(3)

    def work(k):
        for _ in range(20):
            grads[k] = f.grad(xs[k])
        seen[k] = _heads(entry)
        alive.wait()  # every thread's workspace exists at once: their buffers are distinct

    threads = [threading.Thread(target=work, args=(k,)) for k in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    del t
    gc.collect()
    for k in range(3):
        np.testing.assert_allclose(grads[k], _reference_grad(xs[k]), rtol=1e-12)
    theirs = {data for k in seen for data, _ in seen[k]}
    assert len(theirs) == 3 * entry.tapes and not theirs & {d for d, _ in mine}
    assert theirs <= set(freed)  # their threads ended: their workspaces went
    assert _heads(entry) == mine  # this thread's are still there


def test_a_tape_over_keep_bytes_is_not_kept():
    rows = KEEP_BYTES // (1024 * 8) + 64  # rows of 1024 float64: just over KEEP_BYTES

    def f(x):
        for _ in range(rows):
            x = np.sin(x)
        return np.sum(x)

    d = llgrad.differentiate(f)
    x = np.linspace(0.0, 1.0, 1024)
    entry = _joint(d, x)
    assert entry.tapes >= 1 and _heads(entry) == [(0, 0)] * entry.tapes
    g, y = np.ones_like(x), x
    for _ in range(rows):
        g, y = g * np.cos(y), np.sin(y)
    np.testing.assert_allclose(d.grad(x), g, rtol=1e-9)  # 8,000 steps of libmvec sin, cos
