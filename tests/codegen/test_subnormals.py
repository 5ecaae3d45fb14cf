"""Gradient entries run with subnormals flushed to zero and restore the caller's floating-point
mode (Note [Subnormals in gradient code] in codegen/abi.py); the forward entry keeps IEEE
subnormals, as numpy does."""
from __future__ import annotations

import numpy as np
import pytest

import llgrad

TINY = 1e-310  # a subnormal float64


def decaying(x):
    s = x[0]
    for i in range(1, x.shape[0]):
        s = 0.9 * s + np.sin(x[i]) * x[i - 1]
    return s


def _decaying_grad(x):
    """The adjoint recurrence, by hand in numpy (IEEE subnormals)."""
    g, a = np.zeros_like(x), 1.0
    for i in range(x.shape[0] - 1, 0, -1):
        g[i] += a * np.cos(x[i]) * x[i - 1]
        g[i - 1] += a * np.sin(x[i])
        a *= 0.9
    g[0] += a
    return g


def scaled(x):
    return np.sum(x * 1e-300) * 1e-10


def test_gradients_flush_subnormals_and_the_callers_mode_is_restored():
    x = np.random.default_rng(0).standard_normal(8000)  # the cotangent goes subnormal
    value, grad = llgrad.differentiate(decaying).value_and_grad(x)
    assert np.float64(TINY) * 0.5 == pytest.approx(TINY / 2, rel=1e-3)  # not flushed to 0
    assert value == pytest.approx(decaying(x), rel=1e-12)
    ref = _decaying_grad(x)
    assert np.any((ref != 0) & (np.abs(ref) < 2.3e-308))  # the case: subnormal entries
    np.testing.assert_allclose(grad, ref, rtol=1e-12, atol=1e-300)  # (a flushed factor)


def test_the_forward_entry_keeps_subnormals():
    x = np.array([3.0, 2.0])
    f = llgrad.differentiate(scaled)
    assert f(x) == scaled(x) != 0.0  # 5e-310: IEEE, as numpy
    value, _ = f.value_and_grad(x)
    assert abs(value - scaled(x)) < 2.3e-308  # 0 there: flushed, less than 2.2e-308 off
