"""The per-call path (llgrad/api.py, Note [Per-call fast path]).

What a compiled call leaves behind: nothing (runtime/pytree.py, Note [No reference cycles
per call]; llgrad/api.py `_kept`). Results and arguments are freed as soon as the caller drops
them, without waiting for the cyclic garbage collector: arrays kept alive until a collection
made every call take fresh pages from the OS (a function returning two 200x200 arrays ran
25x slower than numpy), and a kept traceback held the first call's arrays for good."""
from __future__ import annotations

import collections
import gc
import weakref

import numpy as np
import pytest

import llgrad
from llgrad.transform import interp

K = np.linspace(0.0, 1.0, 12).reshape(3, 4)
Pair = collections.namedtuple("Pair", "a b")


def _two(K):
    return K * 2.0, K + 1.0


def _record(K):
    return {"scaled": K * 2.0, "pair": Pair(K + 1.0, np.sum(K))}


def _loss(p, K):
    return np.sum(np.sin(p["w"]) * K) + p["b"] ** 2


@pytest.fixture
def no_gc():
    """Cyclic garbage collection off: only reference counts free anything."""
    gc.collect()
    gc.disable()
    yield
    gc.enable()


@pytest.mark.parametrize("call, expected", [
    (lambda f, K: f(K)[0], K * 2.0),                       # the fast path
    (lambda f, K: f(K=K)[1], K + 1.0),                     # the general path (keywords)
])
def test_results_are_freed_when_dropped(mode, no_gc, call, expected):
    f = llgrad.differentiate(_two)
    call(f, K)  # traced and compiled: what that keeps is not the question
    out = call(f, K)
    np.testing.assert_array_equal(out, expected)
    ref = weakref.ref(out)
    del out
    assert ref() is None


def test_nested_results_and_gradients_are_freed(mode, no_gc):
    f = llgrad.differentiate(_record)
    f(K)
    r = f(K)
    np.testing.assert_array_equal(r["pair"].a, K + 1.0)
    refs = [weakref.ref(r["scaled"]), weakref.ref(r["pair"].a)]
    del r
    assert [w() for w in refs] == [None, None]

    g = llgrad.differentiate(_loss)
    p = {"w": np.ones((3, 4)), "b": 0.5}
    g.grad(p, K)
    grad = g.grad(p, K)
    np.testing.assert_allclose(grad["w"], np.cos(1.0) * K)
    ref = weakref.ref(grad["w"])
    del grad
    assert ref() is None


def test_arguments_are_not_kept(mode, no_gc):
    f = llgrad.differentiate(_two)
    f(K=K.copy())
    arg = K.copy()
    f(K=arg)
    ref = weakref.ref(arg)
    del arg
    assert ref() is None


def test_calls_make_no_cyclic_garbage(mode, no_gc):
    f, g = llgrad.differentiate(_record), llgrad.differentiate(_loss)
    p = {"w": np.ones((3, 4)), "b": 0.5}
    calls = [lambda: f(K), lambda: f(K=K), lambda: g(p, K), lambda: g.value_and_grad(p, K)]
    for c in calls:
        c()  # traced and compiled
    gc.collect()
    for c in calls:
        c()
    assert gc.collect() == 0


@pytest.mark.parametrize("fn", [
    lambda x: x * 2.0,              # not differentiable (an array result): the error is kept
    lambda x: x * float(x[0]),      # concretises: the signature's reason is kept
])
def test_first_call_keeps_nothing(mode, fn):
    f = llgrad.differentiate(fn)
    x = np.arange(1.0, 4.0)
    out = f(x)
    np.testing.assert_allclose(out, fn(x))
    refs = [weakref.ref(out), weakref.ref(x)]
    del out, x
    gc.collect()
    assert [r() for r in refs] == [None, None]


def test_disable_jit_is_read_per_call(monkeypatch):
    """The fast path keeps the native entry, but LLGRAD_DISABLE_JIT still decides each call."""
    f = llgrad.differentiate(lambda x: np.sum(np.sin(x) * 2.0))
    x = np.arange(1.0, 4.0)
    expected = np.sum(np.sin(x) * 2.0)
    f(x), f.value_and_grad(x)
    runs = []
    run = interp.run
    monkeypatch.setattr(interp, "run", lambda fn, *a: runs.append(fn.name) or run(fn, *a))
    monkeypatch.setenv("LLGRAD_DISABLE_JIT", "1")
    assert f(x) == pytest.approx(expected, rel=1e-12)
    f.value_and_grad(x)
    assert len(runs) == 2
    monkeypatch.setenv("LLGRAD_DISABLE_JIT", "0")
    assert f(x) == pytest.approx(expected, rel=1e-12)
    f.value_and_grad(x)
    assert len(runs) == 2


def test_a_dropped_function_and_its_compiled_form_are_freed(mode):
    # The conversion cache held each function it converted for the life of the process.
    def make(scale):
        def f(x):
            return np.sum(np.sin(x) * scale) if np.sum(x) > 0 else np.sum(x)
        return f
    f = make(2.0)
    d = llgrad.differentiate(f)
    np.testing.assert_allclose(d.grad(K), 2.0 * np.cos(K))
    refs = [weakref.ref(f), weakref.ref(d)]
    del f, d
    gc.collect()
    assert [w() for w in refs] == [None, None]
