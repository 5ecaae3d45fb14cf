"""`while` loops whose test is a plain Python value over traced state (Note [Python while
loops over traced state] in tracer/operators.py): staged as one while_loop op (the counter
carried), not one copy of the body per iteration; run as Python with a warning where they
cannot be one op; a counter used as a Python value after a static loop unrolls that loop
(Note [Values a static loop made traced] in tracer/staging.py), for `while` and `for` alike.
"""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import llgrad
from llgrad.tracer.tracing import UnrollWarning
from tests.fd import numerical_vjp

X = np.array([0.3, 0.5, -0.7])


def decay(x, n):
    i = 0
    while i < n:  # n static int: a Python test
        x = x * 0.999
        i += 1
    return np.sum(x)


def counted_decay(x, n):
    i = 0
    while i < n:
        x = np.sin(x) * 1.5
        i += 2
    return np.sum(x) * i  # the counter, traced by the loop, used as a number


def time_steps(x):
    t = 0.0
    while t < 1.0:  # a Python float counter
        x = x + 0.1 * np.sin(x)
        t += 0.1
    return np.sum(x)


def with_break(x, n):
    i = 0
    while True:
        x = np.tanh(x) + 0.5
        i += 1
        if i >= n:
            break
    return np.sum(x ** 2)


def _ir(d, *args) -> str:
    return d.inspect(*args).graph


def _check(fn, *args):
    d = llgrad.differentiate(fn)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UnrollWarning)
        value, grad = d.value_and_grad(*args)
    assert value == pytest.approx(fn(*args), rel=1e-12)
    np.testing.assert_allclose(grad, numerical_vjp(fn, args, 1.0, wrt=[0])[0], rtol=1e-6,
                               atol=1e-8)
    return d


@pytest.mark.parametrize("fn,args", [(decay, (X, 0)), (decay, (X, 1)), (decay, (X, 7)),
                                     (counted_decay, (X, 7)), (time_steps, (X,)),
                                     (with_break, (X, 1)), (with_break, (X, 6))],
                         ids=["decay-0", "decay-1", "decay-7", "counted", "time", "break-1",
                              "break-6"])
def test_python_test_while_is_one_loop_op(fn, args, mode):
    d = _check(fn, *args)
    ir = _ir(d, *args)
    assert ir.count("while_loop") == (0 if args[1:] == (0,) else 1), ir


def test_trace_size_does_not_grow_with_the_trip_count(mode):
    d = llgrad.differentiate(decay)
    ops = [d.inspect(X, n).stats["ops (traced)"] for n in (10, 1000, 100_000)]
    assert ops[0] == ops[1] == ops[2]
    value, grad = d.value_and_grad(X, 100_000)
    ones = np.ones(3)
    for _ in range(100_000):
        ones = ones * 0.999  # the same rounding as the loop, in plain numpy
    assert value == pytest.approx(float(np.sum(X * ones)), rel=1e-12)
    np.testing.assert_allclose(grad, ones, rtol=1e-12)


# ---- run as Python (with a warning) where the loop cannot be one op --------------------------
def pops_a_list(x):
    stack = [1.5, 2.0, -0.5]
    while stack:  # its length changes in place: not a value the loop can carry
        x = x * stack.pop()
    return np.sum(np.sin(x))


def indexes_a_list(x, ws):
    i = 0
    while i < len(ws):
        x = x * ws[i]  # the counter as a Python list index
        i += 1
    return np.sum(np.sin(x))


def grows_a_shape(x, n):
    i = 0
    while i < n:
        x = np.concatenate([x, x[:1] * 0.5])  # the carried shape changes
        i += 1
    return np.sum(x ** 2)


@pytest.mark.parametrize("fn,args,why", [
    (pops_a_list, (X,), "it removes items from the list `stack`"),
    (grows_a_shape, (X, 3), "it changes the shape/dtype of `x`"),
], ids=["pops_a_list", "grows_a_shape"])
def test_python_while_that_cannot_be_one_op_runs_as_python(fn, args, why, mode):
    d = llgrad.differentiate(fn)
    with pytest.warns(UnrollWarning, match=why):
        value, grad = d.value_and_grad(*args)
    assert value == pytest.approx(fn(*args), rel=1e-12)
    np.testing.assert_allclose(grad, numerical_vjp(fn, args, 1.0, wrt=[0])[0], rtol=1e-6,
                               atol=1e-8)
    assert d.inspect(*args).path == "staged"


def test_a_list_indexed_by_the_counter_is_one_op(mode):
    """Its items (floats of one type) are stacked once, and ws[i] reads row i (Note [Lists
    indexed by a traced index] in tracer/staging.py); it was unrolled."""
    import warnings
    args = (X, [1.5, -2.0, 0.5, 0.7])
    d = llgrad.differentiate(indexes_a_list)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        value, grad = d.value_and_grad(*args)
    assert value == pytest.approx(indexes_a_list(*args), rel=1e-12)
    np.testing.assert_allclose(grad, numerical_vjp(indexes_a_list, args, 1.0, wrt=[0])[0],
                               rtol=1e-6, atol=1e-8)
    assert str(d.inspect(*args).forward_ir).count("while_loop") == 1


# ---- a counter used as a Python value after the loop ------------------------------------------
def while_then_shape(x, n):
    i = 0
    while i < n:
        x = x * 0.5
        i += 1
    return np.sum(x) + np.sum(np.ones((i,)) * x[0])


def for_then_shape(x, n):
    count, s = 0, 0.0
    for k in range(n):
        s = s + x[k] ** 2
        count += 1
    return s + np.sum(np.ones((count, 2)) * x[0])


@pytest.mark.parametrize("fn", [while_then_shape, for_then_shape], ids=lambda f: f.__name__)
def test_counter_used_as_a_shape_after_the_loop_unrolls_it(fn, mode):
    d = llgrad.differentiate(fn)
    with pytest.warns(UnrollWarning, match="is used after it as a Python value"):
        value, grad = d.value_and_grad(X, 3)
    assert value == pytest.approx(fn(X, 3), rel=1e-12)
    np.testing.assert_allclose(grad, numerical_vjp(fn, (X, 3), 1.0, wrt=[0])[0], rtol=1e-6,
                               atol=1e-8)
    assert d.inspect(X, 3).path == "staged"  # not the dynamic path
