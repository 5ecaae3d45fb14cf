"""Comprehensions over traced values are staged as one loop (Note [Comprehensions as loops] in
tracer/convert/comprehensions.py), not one copy of the element per item: values equal plain
Python, gradients central differences, and the IR does not grow with the number of rows."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import llgrad
from tests.e2e.conftest import finite_differences

RNG = np.random.default_rng(3)


def tanh_rows(w, X):
    return np.sum(np.array([np.tanh(np.dot(w, x)) for x in X]) ** 2)


def squared_errors(w, X, y):
    return sum((np.dot(w, x) - t) ** 2 for x, t in zip(X, y))


def mean_logistic_loss(w, X, y):
    losses = [np.log1p(np.exp(-t * np.dot(w, x))) for x, t in zip(X, y)]
    return np.mean(losses)


def softmax_rows(W, X, T):
    probs = np.stack([np.exp(r - np.max(r)) / np.sum(np.exp(r - np.max(r))) for r in X @ W])
    return np.sum(probs * T)


def weighted_by_position(w, X):
    return sum(np.sin(np.dot(w, x)) * (i + 1) for i, x in enumerate(X))


def over_a_list_argument(w, xs):
    return max([np.sum(np.tanh(x * w)) for x in xs]) + sum([np.dot(x, w) for x in xs])


def neighbours(w, x):
    return np.sum(np.array([x[i] * x[i + 1] * w for i in range(len(x) - 1)]))


def nested(w, X):
    return np.sum(np.array([[np.cos(v * w[0]) for v in x] for x in X]))


XN = RNG.standard_normal((12, 4))


def over_numpy_data(w):
    """X is numpy data: staged because the element reads traced w (Note [Loops over numpy
    arrays] in tracer/staging.py)."""
    return np.mean([np.log(1 + np.exp(np.dot(w, x))) for x in XN])


def test_a_comprehension_over_numpy_data_reading_traced_values_is_one_loop(mode):
    w = RNG.standard_normal(4)
    d = llgrad.differentiate(over_numpy_data)
    value, g = d.value_and_grad(w)
    assert d.inspect(w).forward_ir.count(" for_loop") == 1
    assert value == pytest.approx(over_numpy_data(w), rel=1e-12)
    np.testing.assert_allclose(g, finite_differences(over_numpy_data, (w,), (0,))[0],
                               rtol=1e-6, atol=1e-8)


def _data(n):
    X = RNG.standard_normal((n, 4))
    return {"X": X, "y": RNG.standard_normal(n), "w": RNG.standard_normal(4),
            "W": RNG.standard_normal((4, 3)), "T": RNG.standard_normal((n, 3)),
            "xs": list(RNG.standard_normal((n, 4)))}


CASES = [(tanh_rows, "w X"), (squared_errors, "w X y"), (mean_logistic_loss, "w X y"),
         (softmax_rows, "W X T"), (weighted_by_position, "w X"),
         (over_a_list_argument, "w xs"), (neighbours, "w y"), (nested, "w X")]


@pytest.mark.parametrize("fn,names", CASES, ids=[c[0].__name__ for c in CASES])
def test_values_and_gradients(fn, names, mode):
    data = _data(9)
    args = [data[k] for k in names.split()]
    d = llgrad.differentiate(fn, wrt=(0, 1))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no unrolled-loop or dynamic-path warning
        value, grads = d.value_and_grad(*args)
    assert d.inspect(*args).path == "staged"
    assert value == pytest.approx(fn(*args), rel=1e-12)
    for g, fd in zip(grads, finite_differences(fn, args, (0, 1))):
        np.testing.assert_allclose(np.asarray(g), fd, rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("fn,names", CASES[:5], ids=[c[0].__name__ for c in CASES[:5]])
def test_the_ir_does_not_grow_with_the_rows(fn, names):
    """(A list argument is stacked item by item and its gradient is a list: those grow.)"""
    counts = []
    for n in (10, 40):
        data = _data(n)
        info = llgrad.differentiate(fn).inspect(*[data[k] for k in names.split()])
        counts.append(info.stats["ops (forward+backward)"])
        assert info.forward_ir.count(" for_loop") >= 1
    assert counts[0] == counts[1], counts


def conv_taps(w, x):
    """x[:, t:t + L] at a traced t is a slice of loop-dependent length, which np.einsum does
    not take: the loop over range(k) runs as Python, as written."""
    L = x.shape[1] - len(w) + 1
    return np.sum(sum(np.einsum("c,cl->l", w * t, x[:, t:t + L]) for t in range(len(w))) ** 2)


def python_list_index(w, x):
    """params[i] needs i as a Python int: the loop runs as Python."""
    params = [w, 2 * w, w * w]
    return np.sum(np.array([params[i] @ x for i in range(3)]) ** 2)


@pytest.mark.parametrize("fn", [conv_taps, python_list_index], ids=lambda f: f.__name__)
def test_a_body_that_cannot_be_one_loop_runs_as_python(fn):
    w, x = RNG.standard_normal(3), RNG.standard_normal((3, 6))
    value, grads = llgrad.differentiate(fn, wrt=(0, 1)).value_and_grad(w, x)
    assert value == pytest.approx(fn(w, x), rel=1e-12)
    for g, fd in zip(grads, finite_differences(fn, (w, x), (0, 1))):
        np.testing.assert_allclose(g, fd, rtol=1e-6, atol=1e-8)
