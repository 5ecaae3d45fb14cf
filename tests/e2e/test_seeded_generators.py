"""Note [Generators seeded inside the function] (tracer/operators.py): a generator the function
makes from a constant seed draws the same numbers at every call, so its draws stay on the
staged path and equal Python's; draws in a loop body or a branch, from a generator made
elsewhere or without a seed, still run per call (the dynamic path), equal to Python's."""
from __future__ import annotations

import numpy as np
import pytest

import llgrad
from tests.fd import numerical_vjp


def reparam_loss(mu, log_sigma):
    rng = np.random.default_rng(42)
    eps = rng.standard_normal((16, mu.shape[0]))
    w = mu + np.exp(log_sigma) * eps
    legacy = np.random.RandomState([1, 2]).uniform(size=mu.shape[0])
    return np.mean(np.sum(w ** 2, axis=1)) - np.sum(log_sigma) + np.sum(legacy * mu)


def draws_in_a_loop(x):
    rng = np.random.default_rng(0)
    s = 0.0
    for i in range(3):  # a staged loop: one trace for three iterations
        s = s + np.sum(x * rng.standard_normal(x.shape[0]))
    return s


def draws_in_a_branch(x):
    rng = np.random.default_rng(0)
    if np.sum(x) > 0:
        x = x * rng.random(x.shape[0])
    return np.sum(x * rng.random(x.shape[0]))


def unseeded(x):
    return np.sum(x * np.random.default_rng().random(x.shape[0]))


def test_draws_of_a_generator_seeded_inside_are_staged():
    mu, log_sigma = np.array([0.3, -0.2, 0.5]), np.array([-1.0, -0.5, 0.0])
    d = llgrad.differentiate(reparam_loss, wrt=(0, 1))
    value, grads = d.value_and_grad(mu, log_sigma)
    assert value == pytest.approx(reparam_loss(mu, log_sigma), rel=1e-13)
    assert d(mu, log_sigma) == pytest.approx(value, rel=1e-13)  # the same numbers again
    assert d.inspect(mu, log_sigma).path == "staged"
    for g, fd in zip(grads, numerical_vjp(reparam_loss, [mu, log_sigma], 1.0, wrt=[0, 1])):
        np.testing.assert_allclose(g, fd, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("fn", [draws_in_a_loop, draws_in_a_branch, unseeded])
def test_other_draws_still_run_per_call(fn):
    x = np.array([0.3, -0.2, 0.5])
    d = llgrad.differentiate(fn)
    if fn is not unseeded:
        assert d(x) == pytest.approx(fn(x), rel=1e-13)
        assert d(-x) == pytest.approx(fn(-x), rel=1e-13)
    assert d.inspect(x).path.startswith("dynamic")
    assert "drawing random numbers" in d.inspect(x).path
