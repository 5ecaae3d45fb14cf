"""Memory: saved arrays are released by backward (weakref), and a training-style loop does not
grow memory (tracemalloc)."""
from __future__ import annotations

import gc
import tracemalloc
import weakref

import numpy as np

import llgrad as lg


def _saved_intermediate():
    x = lg.tensor(np.linspace(0.1, 1.0, 1000), requires_grad=True)
    h = x * 2
    ref = weakref.ref(h._data)
    z = h.sin()  # saves h
    del h
    return x, z, ref


def test_backward_releases_saved_arrays():
    x, z, ref = _saved_intermediate()
    gc.collect()
    assert ref() is not None  # alive while the graph may still need it
    z.sum().backward()
    gc.collect()
    assert ref() is None, "the saved input of SinBackward0 outlived backward()"
    assert z.grad_fn is not None  # the graph itself is still there, only its saved values went


def test_retain_graph_keeps_saved_arrays_until_the_graph_goes():
    x, z, ref = _saved_intermediate()
    z.sum().backward(retain_graph=True)
    gc.collect()
    assert ref() is not None
    z.sum().backward()
    del z
    gc.collect()
    assert ref() is None


def test_saved_output_released():
    x = lg.tensor(np.ones(1000), requires_grad=True)
    y = x.exp()  # saves its own output
    ref = weakref.ref(y._data)
    s = (y * 1).sum()
    del y
    s.backward()
    gc.collect()
    assert ref() is None


def test_no_grad_saves_nothing():
    x = lg.tensor(np.ones(1000), requires_grad=True)
    with lg.no_grad():
        h = x * 2
        ref = weakref.ref(h._data)
        y = h.sin()
        del h
    gc.collect()
    assert ref() is None and y.grad_fn is None


def test_graph_freed_when_output_dropped():
    x = lg.tensor(np.ones(1000), requires_grad=True)
    y = x.exp().sin()
    node = weakref.ref(y.grad_fn)
    del y
    gc.collect()
    assert node() is None


def test_thousand_iterations_do_not_grow_memory():
    """1,000 forward/backward iterations on 1 MB tensors grow traced memory by < 10 MB."""
    n = 1 << 18  # float32: 1 MB
    rng = np.random.default_rng(0)
    w = lg.tensor(rng.standard_normal(n).astype(np.float32), requires_grad=True)
    x = lg.tensor(rng.standard_normal(n).astype(np.float32))

    def step():
        loss = ((w * x).tanh() * 0.5 + w).sum()
        loss.backward()
        with lg.no_grad():
            w.sub_(w.grad * 1e-3)
        w.grad = None

    for _ in range(5):  # warm up caches
        step()
    gc.collect()
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        for _ in range(1000):
            step()
        gc.collect()
        grown = tracemalloc.get_traced_memory()[0] - base
    finally:
        tracemalloc.stop()
    assert grown < 10 * 2**20, f"memory grew by {grown / 2**20:.1f} MB over 1,000 iterations"
