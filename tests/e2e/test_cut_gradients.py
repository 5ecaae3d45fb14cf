"""A value whose only dependence on the differentiated input goes through a concretised number
on the dynamic path (`return float(loss)`, `x.tolist()`) has no gradient: grad() refuses it
with the line of the concretisation instead of returning zeros (Note [Gradients cut by a
constant] in tracer/dynamic.py), as PyTorch (no grad_fn) and JAX (float() of a tracer) do. A
partial cut keeps PyTorch's semantics (the constant path contributes nothing), and a value
that does not depend on the input, or only through decisions, keeps its zero gradient."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import llgrad
from llgrad.runtime.errors import ConcretizationError


def returns_float(x):
    return float(np.sum(x ** 2))


def via_tolist(x):
    xs = x.tolist()
    return sum(v * v for v in xs)


@pytest.fixture(autouse=True)
def _quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", llgrad.PerformanceWarning)
        yield


@pytest.mark.parametrize("fn,what,line", [(returns_float, "float()", "return float("),
                                          (via_tolist, ".tolist()", "xs = x.tolist()")])
def test_a_fully_cut_gradient_is_refused_at_its_line(fn, what, line, mode):
    f = llgrad.differentiate(fn)
    x = np.array([1.0, 2.0, 3.0])
    assert f(x) == pytest.approx(14.0)  # the value is fine
    with pytest.raises(ConcretizationError) as e:
        f.grad(x)
    msg = str(e.value)
    assert f"only by {what}," in msg and "test_cut_gradients.py" in msg and line in msg
    with pytest.raises(ConcretizationError, match="gradient would be 0"):
        llgrad.value_and_grad(fn)(x)


def test_a_partial_cut_and_a_value_free_of_the_input_keep_their_gradients(mode):
    def partial(x):
        s = float(x[0])  # a constant, as in PyTorch
        return s * np.sum(x)

    def free(x):
        if x.shape[0] > 1:  # (static)
            return 3.0
        return float(x[0])

    x = np.array([2.0, 1.0])
    np.testing.assert_array_equal(llgrad.grad(partial)(x), [2.0, 2.0])
    np.testing.assert_array_equal(llgrad.grad(free)(x), [0.0, 0.0])


def test_a_value_decided_by_a_concretised_number_is_refused_a_decision_is_not(mode):
    def step(x):  # PyTorch: the result has no grad_fn; JAX: float() of a tracer
        return 1.0 if float(x[0]) > 0 else 0.0

    def decided(x):  # piecewise constant through bool(): derivative 0 where it exists
        if bool(x[0] > 0):  # (explicit: the dynamic path)
            return 1.0
        return 0.0

    with pytest.raises(ConcretizationError, match="only by float[(][)],"):
        llgrad.grad(step)(np.array([2.0, 1.0]))
    d = llgrad.differentiate(decided)
    np.testing.assert_array_equal(d.grad(np.array([2.0, 1.0])), [0.0, 0.0])
    assert d.inspect(np.array([2.0, 1.0])).path.startswith("dynamic")
