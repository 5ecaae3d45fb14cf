"""jacfwd/jacrev peel the first iteration of a loop that carries the basis in and skip its
products with the identity (transform/basis.py, Note [Products with the basis]): the same
Jacobians as finite differences for trip counts 0, 1 and more, static and run-time."""
from __future__ import annotations

import numpy as np
import pytest

import llgrad
from llgrad import forward
from llgrad.transform import basis


def _fd(f, x, eps=1e-6):
    return np.stack([(f(x + eps * e) - f(x - eps * e)) / (2 * eps) for e in np.eye(x.size)],
                    axis=-1)


def _spy(monkeypatch):
    peeled = []
    orig = basis.peel_basis
    monkeypatch.setattr(forward, "peel_basis", lambda fn, b: peeled.append(orig(fn, b)) or
                        peeled[-1])
    return peeled


@pytest.mark.parametrize("steps", [0, 1, 4])
@pytest.mark.parametrize("mode", ["jacfwd", "jacrev"])
def test_recurrence_with_a_static_trip_count(steps, mode, monkeypatch, rng):
    peeled = _spy(monkeypatch)
    w = rng.normal(size=(5, 5)) / 3

    def f(x):
        h = x
        for _ in range(steps):
            h = np.tanh(w @ h) + 0.1 * x
        return h
    x = rng.normal(size=5)
    np.testing.assert_allclose(getattr(llgrad, mode)(f)(x), _fd(f, x), rtol=1e-7, atol=1e-9)
    if steps > 1:  # a staged loop (jacrev: its reverse sweep's, of run-time trip count)
        assert any(peeled)


@pytest.mark.parametrize("start", [5.0, 0.5, 0.05])
@pytest.mark.parametrize("mode", ["jacfwd", "jacrev"])
def test_while_loop_whose_trip_count_is_known_at_run_time(start, mode, rng):
    """0, 1 and several iterations: jacrev's reverse sweep is peeled under a cond."""
    w = rng.normal(size=(3, 3)) / 4

    def f(x):
        h = x
        while np.sum(np.abs(h)) < 1.0:
            h = np.sin(w @ h) + 1.5 * h
        return h * 2.0
    x = np.full(3, start / 3)
    np.testing.assert_allclose(getattr(llgrad, mode)(f)(x), _fd(f, x), rtol=1e-6, atol=1e-8)


def test_hessian_of_a_loop(rng):
    """jacfwd of the gradient: the basis enters the forward-over-reverse sweeps."""
    def e(x):
        s = 0.0
        for i in range(x.shape[0] - 1):
            s = s + np.sin(x[i] * x[i + 1]) + 0.5 * x[i] ** 2 * np.cos(s)
        return s
    x = rng.normal(size=6)
    np.testing.assert_allclose(llgrad.hessian(e)(x), _fd(llgrad.grad(e), x), rtol=1e-6,
                               atol=1e-8)
