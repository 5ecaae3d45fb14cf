"""llgrad.grad / value_and_grad called again on the same function, or on a lambda made again
by the same line, reuse its compiled code (Note [Functions made anew at every step] in
llgrad/api.py): a JAX-style training loop `g = llgrad.grad(loss)(w, X, y)` traced at every
step before (20-30 ms a step). Reuse must never return another function's gradient: what a
function computes with besides its arguments (code, closure cells, defaults, globals) is its
key, and the cells' current contents are what the compiled code guards."""
from __future__ import annotations

import gc
import weakref

import numpy as np

import llgrad
from llgrad import api
from tests.e2e.conftest import finite_differences


def _loss(w, X, y):
    r = X @ w - y
    return np.mean(r ** 2)


def _data(seed=0, n=40):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, 3))
    return X, X @ np.array([1.0, -2.0, 0.5]) + 0.1 * rng.standard_normal(n)


def test_grad_of_one_function_at_every_step_traces_once(mode):
    X, y = _data()
    w = np.zeros(3)
    for _ in range(5):
        g = llgrad.grad(_loss)(w, X, y)
        fd = finite_differences(_loss, (w, X, y), (0,))[0]
        np.testing.assert_allclose(g, fd, rtol=1e-6, atol=1e-8)
        w = w - 0.1 * g
    d = llgrad.grad(_loss).__self__
    assert d is llgrad.value_and_grad(_loss).__self__
    assert d.trace_count == 1
    assert llgrad.grad(_loss, argnums=1).__self__ is not d  # other options: its own


def test_a_lambda_made_in_the_loop_reuses_code_and_reads_the_current_data(mode):
    X, y = _data()
    w, seen = np.zeros(3), set()
    for step in range(4):
        scale = 1.0 + step  # a cell of this frame: the same cell, rebound at every step
        value, g = llgrad.value_and_grad(lambda w: scale * _loss(w, X, y))(w)
        seen.add(id(llgrad.grad(lambda w: scale * _loss(w, X, y)).__self__))
        np.testing.assert_allclose(value, scale * _loss(w, X, y), rtol=1e-12)
        fd = finite_differences(lambda w: scale * _loss(w, X, y), (w,), (0,))[0]
        np.testing.assert_allclose(g, fd, rtol=1e-6, atol=1e-8)
        w = w - 0.05 * g
    assert len(seen) == 1


def test_closures_of_other_cells_or_defaults_keep_their_own_values(mode):
    X, y = _data()
    w = np.array([0.3, -0.2, 0.1])

    def make(k):
        return lambda w: k * _loss(w, X, y)

    for k in (1.0, 2.0, 3.0):  # one code, other cells
        np.testing.assert_allclose(llgrad.grad(make(k))(w), k * llgrad.grad(_loss)(w, X, y),
                                   rtol=1e-12)
    for k in (np.array(1.0), np.array(4.0)):  # one code, other defaults
        f = lambda w, k=k: k * _loss(w, X, y)  # noqa: E731
        np.testing.assert_allclose(llgrad.grad(f)(w), k * llgrad.grad(_loss)(w, X, y),
                                   rtol=1e-12)


def test_reuse_is_bounded_and_lets_functions_go():
    X, y = _data(n=8)
    w = np.zeros(3)

    def make(k):
        return lambda w: k * _loss(w, X, y)

    first = make(0.5)
    ref = weakref.ref(first)
    llgrad.grad(first)(w)
    del first
    for k in range(api._RECENT_MAX + 1):
        llgrad.grad(make(float(k)))  # a Differentiable each (not called: nothing compiles)
    assert len(api._RECENT) <= api._RECENT_MAX
    gc.collect()
    assert ref() is None
