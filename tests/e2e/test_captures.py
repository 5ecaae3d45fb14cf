"""Globals and closure values read by compiled code (Note [Captured values are guarded] in
tracer/captures.py): changing them between calls gives what Python gives (the function is
traced again), and leaving them alone costs no retrace."""
from __future__ import annotations

import sys

import numpy as np

import llgrad

W = np.array([1.0, 2.0])
SCALE = 2.0
OFFSET = 1.0
WITH_NAN = np.array([np.nan, 1.0])
X = np.array([1.0, 1.0])


def _helper(v):
    return v * OFFSET


def uses_globals(x):
    return np.sum(W * x) * SCALE + _helper(x[0])


def uses_nan_global(x):
    return np.sum(np.where(np.isnan(WITH_NAN), 0.0, WITH_NAN) * x)


def _agree(d, fn):
    value, grad = d.value_and_grad(X)
    assert float(d(X)) == value == fn(X)
    eps = 1e-6
    fd = [(fn(X + e) - fn(X - e)) / (2 * eps) for e in np.eye(2) * eps]
    np.testing.assert_allclose(grad, fd, rtol=1e-6)


def test_changed_globals_are_read_again_as_in_python(mode, monkeypatch):
    module = sys.modules[__name__]
    monkeypatch.setattr(module, "W", W.copy())
    d = llgrad.differentiate(uses_globals)
    _agree(d, uses_globals)
    for _ in range(3):
        d(X)
    assert d.cache_info()["traces"] == 1  # unchanged globals: no retrace
    module.W[0] = 10.0  # mutated in place
    _agree(d, uses_globals)
    monkeypatch.setattr(module, "SCALE", 3.0)  # rebound
    _agree(d, uses_globals)
    monkeypatch.setattr(module, "W", np.array([5.0, 5.0]))
    _agree(d, uses_globals)
    monkeypatch.setattr(module, "OFFSET", 7.0)  # read by a helper
    _agree(d, uses_globals)
    assert d.cache_info()["traces"] == 5


def test_closure_arrays_are_guarded(mode):
    c = np.array([2.0, 2.0])

    def g(x):
        return np.sum(c * x * x)
    d = llgrad.differentiate(g)
    _agree(d, g)
    c[1] = -3.0
    _agree(d, g)


def test_an_unchanged_array_with_nan_does_not_retrace():
    d = llgrad.differentiate(uses_nan_global)
    for _ in range(3):
        assert d(X) == 1.0
    assert d.cache_info()["traces"] == 1
