"""Captured arrays that change between calls become inputs of the compiled code instead of
retracing it at every change (Note [Captured arrays that change become inputs] in
tracer/captures.py): values and gradients stay those of plain Python with the current data."""
from __future__ import annotations

import logging
import re
import sys
import warnings

import numpy as np
import pytest

import llgrad
from llgrad.runtime.errors import RetraceWarning
from tests.e2e.conftest import finite_differences

XB = np.zeros((8, 3))
YB = np.zeros(8)
SHIFT = np.zeros(3)


def _loss(w, X, y):
    r = X @ w - y
    return np.mean(r ** 2)


def _shifted(w):  # reads a global the differentiated function does not mention
    return np.sum((w - SHIFT) ** 2)


def uses_batch(w):
    return _loss(w, XB, YB) + _shifted(w)


def _data(n=40):
    rng = np.random.default_rng(0)
    X = rng.standard_normal((n, 3))
    return rng, X, X @ np.array([1.0, -2.0, 0.5]) + 0.1 * rng.standard_normal(n)


def _check(fn, w, value, g):
    np.testing.assert_allclose(value, fn(w), rtol=1e-12)
    np.testing.assert_allclose(g, finite_differences(fn, (w,), (0,))[0], rtol=1e-6, atol=1e-8)


def test_a_minibatch_loop_over_a_lambda_traces_twice(mode):
    rng, X, y = _data()
    w = np.zeros(3)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RetraceWarning)
        for _ in range(12):
            idx = rng.integers(0, len(X), 8)
            xb, yb = X[idx], y[idx]
            vg = llgrad.value_and_grad(lambda w: _loss(w, xb, yb))
            value, g = vg(w)
            _check(lambda w: _loss(w, xb, yb), w, value, g)
            np.testing.assert_allclose(g, 2 * xb.T @ (xb @ w - yb) / 8, rtol=1e-12)
            w = w - 0.1 * g
    d = vg.__self__
    assert d.trace_count == 2  # the constants, then xb and yb as inputs
    ins = d.inspect(w)
    assert "%xb" in ins.graph and "%yb" in ins.graph
    assert ins.stats["implicit inputs"] == ("xb (closure variable, f64[8,3]), "
                                            "yb (closure variable, f64[8])")


def test_a_smaller_last_batch_is_traced_once(mode):
    _, X, y = _data(n=20)
    w = np.zeros(3)
    for _ in range(3):  # epochs of batches of 8, 8 and 4 (Note [Earlier traces of a signature])
        for i in range(0, 20, 8):
            xb, yb = X[i:i + 8], y[i:i + 8]
            vg = llgrad.value_and_grad(lambda w: _loss(w, xb, yb))
            value, g = vg(w)
            _check(lambda w: _loss(w, xb, yb), w, value, g)
            w = w - 0.1 * g
    assert vg.__self__.trace_count == 3  # constants; inputs of 8 rows; inputs of 4 rows


def test_globals_and_globals_of_helpers_become_inputs(mode, monkeypatch):
    module = sys.modules[__name__]
    rng, X, y = _data()
    monkeypatch.setattr(module, "SHIFT", np.zeros(3))
    d = llgrad.differentiate(uses_batch)
    w = np.array([0.5, 0.1, -0.2])
    for step in range(5):
        idx = rng.integers(0, len(X), 8)
        monkeypatch.setattr(module, "XB", X[idx])  # rebound
        monkeypatch.setattr(module, "YB", y[idx])
        module.SHIFT[step % 3] += 1.0  # changed in place, read by a helper
        _check(uses_batch, w, *d.value_and_grad(w))
        np.testing.assert_allclose(d(w), uses_batch(w), rtol=1e-12)
    assert d.trace_count == 2
    assert "shift (global, f64[3])" in d.inspect(w).stats["implicit inputs"].lower()


def test_a_changed_index_array_is_read_at_every_call(mode):
    w = np.array([1.0, -2.0, 3.0, 0.5])
    idx = np.array([0, 1, 1], dtype=np.int64)
    scale = np.ones(3, np.float32)  # a float32 capture: its dtype is kept

    def gathered(w):
        return np.sum(w[idx] ** 2 * scale)
    d = llgrad.differentiate(gathered)
    for step in range(4):
        idx[:] = [(step + k) % 4 for k in range(3)]
        scale[:] = step + 1
        value, g = d.value_and_grad(w)
        _check(gathered, w, value, g)
        expected = np.zeros(4)
        np.add.at(expected, idx, 2 * w[idx] * scale)
        np.testing.assert_allclose(g, expected, rtol=1e-6)
    assert d.trace_count == 2
    assert "idx (closure variable, i64[3]), scale (closure variable, f32[3])" == \
        d.inspect(w).stats["implicit inputs"]


def test_a_capture_used_as_a_python_int_stays_a_constant(mode, caplog):
    caplog.set_level(logging.DEBUG, logger="llgrad")  # the compile log
    w = np.array([1.0, 2.0, 3.0])
    k, scale = np.array([2]), np.array([1.0, 1.0, 1.0])

    def prefix(w):
        return np.sum(w[:int(k[0])] ** 2 * scale[:int(k[0])])
    d = llgrad.differentiate(prefix)
    for step in range(4):
        k[0], scale[0] = 1 + step % 3, step
        _check(prefix, w, *d.value_and_grad(w))
    # k is read as a Python int: a constant, traced again at each change; scale an input
    assert d.trace_count == 4
    graph = d.inspect(w).graph
    assert "%scale" in graph and "%k" not in graph
    log = "\n".join(r.getMessage() for r in caplog.records if r.name == "llgrad")
    assert re.search(r"prefix: 'k' stays a constant of the compiled code \(read as an input, "
                     r"the trace failed: .*int\(\)", log), log


def test_a_capture_that_changes_shape_still_warns(mode):
    rng, X, y = _data()
    w = np.zeros(3)
    xb, yb = X[:8], y[:8]

    def batch(w):
        return _loss(w, xb, yb)
    d = llgrad.differentiate(batch)
    d.grad(w)
    xb = X[8:16]  # same shape: an input from now on
    d.grad(w)
    with pytest.warns(RetraceWarning, match=r"closure variable 'xb' changed from f64\[\d+,3\] "
                                            r"to f64\[\d+,3\].*pass xb as an argument"):
        for n in range(2, 14):
            xb, yb = X[:n], y[:n]
            _check(batch, w, *d.value_and_grad(w))


def test_an_input_rebound_to_a_number_is_read_as_python_does(mode):
    c = np.array([2.0, 3.0])
    w = np.array([1.0, 1.0])

    def scaled(w):
        return np.sum(c * w ** 2)
    d = llgrad.differentiate(scaled)
    for value in (np.array([1.0, 5.0]), np.array([4.0, 0.5]), 3.0, np.array([1.0, 2.0])):
        c = value
        _check(scaled, w, *d.value_and_grad(w))
