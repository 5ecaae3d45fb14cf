"""A lambda differentiated (`llgrad.differentiate(lambda w: loss(w, X, y))`) is converted like
a def (Note [Converting lambdas] in tracer/convert/parsing.py): the functions it calls are
converted, so their traced `if` and loops stay staged, and scipy's Python functions get their
traced forms. Before, its calls ran unconverted: loss's `if` took the dynamic path and
scipy.special.logsumexp raised a ConcretizationError. The numpy arrays such a lambda holds are
constants of the trace, read at a loop counter as graph ops (Note [Numpy arrays indexed by
traced values] in tracer/convert/calls.py): before, numpy concretised the counter and the loop
was unrolled."""
from __future__ import annotations

import functools
import warnings

import numpy as np
import pytest
import scipy.special

import llgrad
from tests.e2e.conftest import finite_differences


def _loss(w, X, y):
    r = X @ w - y
    for _ in range(3):
        r = np.tanh(r)
    if np.sum(r) > 0:
        total = np.sum(r ** 2)
    else:
        total = 0.1 * np.sum(r ** 2)
    return total + scipy.special.logsumexp(w)


@pytest.mark.parametrize("wrap", ["lambda", "partial"])
def test_a_lambda_or_partial_closing_over_data_is_staged(wrap, mode):
    """A lambda (a default, a closure) and `functools.partial(loss, X=X, y=y)`: the
    function each calls is converted (tracing._convertible), so its traced `if` in a loop
    stays staged; a partial ran as Python before (the dynamic path, ~10 ms a call)."""
    rng = np.random.default_rng(0)
    X, y, w = rng.standard_normal((6, 3)), rng.standard_normal(6), rng.standard_normal(3)
    f = llgrad.differentiate((lambda w, X=X: _loss(w, X, y)) if wrap == "lambda" else
                             functools.partial(_loss, X=X, y=y))
    with warnings.catch_warnings():
        warnings.simplefilter("error", llgrad.PerformanceWarning)
        value, grad = f.value_and_grad(w)
    assert f.inspect(w).path == "staged"
    np.testing.assert_allclose(value, _loss(w, X, y), rtol=1e-13)
    fd = finite_differences(lambda w: _loss(w, X, y), (w,), (0,))[0]
    np.testing.assert_allclose(grad, fd, rtol=1e-6, atol=1e-9)


def test_two_lambdas_of_one_line_keep_their_own_bodies(mode):
    x = np.array([0.5, -1.0])
    f, g = llgrad.grad(lambda v: np.sum(v ** 2)), llgrad.grad(lambda v: np.sum(np.sin(v)))
    np.testing.assert_allclose(f(x), 2 * x)
    np.testing.assert_allclose(g(x), np.cos(x))


def _per_sample(w, X, y):
    total = 0.0
    for i in range(X.shape[0]):
        r = X[i] @ w - y[i]
        if r > 0:
            total = total + r ** 2
        else:
            total = total + 0.1 * r ** 2
    return total


def test_numpy_data_read_at_a_loop_counter_stays_one_loop(mode):
    rng = np.random.default_rng(1)
    X, y, w = rng.standard_normal((7, 3)), rng.standard_normal(7), rng.standard_normal(3)
    f = llgrad.differentiate(lambda w: _per_sample(w, X, y))
    with warnings.catch_warnings():
        warnings.simplefilter("error", llgrad.PerformanceWarning)
        value, grad = f.value_and_grad(w)
    info = f.inspect(w)
    assert info.path == "staged" and info.forward_ir.count(" for_loop") == 1
    np.testing.assert_allclose(value, _per_sample(w, X, y), rtol=1e-13)
    fd = finite_differences(lambda w: _per_sample(w, X, y), (w,), (0,))[0]
    np.testing.assert_allclose(grad, fd, rtol=1e-6, atol=1e-9)
