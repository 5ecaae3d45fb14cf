"""Python lists (and tuples) of floats as differentiated arguments, given to numpy and scipy
functions (tracer/operators.py `list_call`, Note [Lists of traced values]): built as one
traced array wherever a function takes an array, with the gradient as a list of floats
(the argument's structure), natively, through the interpreter and on the dynamic path,
against finite differences."""
from __future__ import annotations

import numpy as np
import pytest
import scipy.special
import scipy.stats

import llgrad
from tests.e2e.conftest import finite_differences

X = np.linspace(-1.0, 1.5, 5)


def polyval(c):
    return np.sum(np.polyval(c, X) ** 2)


def reductions(c):
    return np.sum(c) * np.mean(c) + np.std(c) + np.max(c) + np.prod(c)


def conversions(c):
    return np.sum(np.asarray(c) * X[:3]) + np.sum(np.array(c) * X[1:4]) + c[0] * X[0] + c[1]


def contractions(c):
    return np.dot(c, X[:3]) + np.sum(np.outer(c, X)) + np.sum(np.where(X[:3] > 0, c, 0.0))


def ufuncs(c):
    return np.sum(np.exp(c) + scipy.special.expit(c) + np.maximum(c, 0.5))


def scipy_stats(c):
    return (np.sum(scipy.stats.norm.logpdf(X, c[0], c[1])) + np.sum(scipy.stats.norm.cdf(c))
            + np.sum(scipy.stats.t.logpdf(c, 3.0)))


def _helper(coeffs, x):
    return np.polyval(coeffs, x)


def through_a_helper(c):
    return np.sum(_helper(c, X))


def in_a_dict(p):
    return np.sum(np.polyval(p["c"], X)) + np.sum(p["w"] * X)


CASES = [polyval, reductions, conversions, contractions, ufuncs, scipy_stats, through_a_helper]


@pytest.mark.parametrize("fn", CASES, ids=lambda f: f.__name__)
@pytest.mark.parametrize("kind", [list, tuple])
def test_lists_of_floats_are_arrays_to_numpy(fn, kind, mode):
    c = kind([0.7, 1.3, -0.4])
    f = llgrad.differentiate(fn)
    value, grad = f.value_and_grad(c)
    np.testing.assert_allclose(value, fn(c), rtol=1e-13)
    assert type(grad) is kind and len(grad) == 3 and all(type(g) is float for g in grad)
    want = finite_differences(fn, (np.array(c),), (0,))[0]
    np.testing.assert_allclose(grad, want, rtol=1e-6, atol=1e-8)
    assert f.inspect(c).path == "staged"


def test_a_list_in_a_dict_argument(mode):
    p = {"c": [0.5, -1.0, 2.0], "w": np.array([0.1, 0.2, 0.3, 0.4, 0.5])}
    value, grad = llgrad.differentiate(in_a_dict).value_and_grad(p)
    np.testing.assert_allclose(value, in_a_dict(p), rtol=1e-13)
    assert type(grad["c"]) is list and all(type(g) is float for g in grad["c"])
    want = finite_differences(lambda c: in_a_dict({"c": c, "w": p["w"]}),
                              (np.array(p["c"]),), (0,))[0]
    np.testing.assert_allclose(grad["c"], want, rtol=1e-6)


def test_the_dynamic_path_builds_lists_too():
    def f(c):
        n = int(float(c[0]))  # (concretises: the dynamic path)
        return np.sum(np.polyval(c, X)) * (n + 1) + np.sum(scipy.special.expit(c))
    c = [1.5, -2.0, 0.25]
    d = llgrad.differentiate(f)
    value, grad = d.value_and_grad(c)
    assert d.inspect(c).path.startswith("dynamic")
    np.testing.assert_allclose(value, f(c), rtol=1e-13)
    np.testing.assert_allclose(grad, finite_differences(f, (np.array(c),), (0,))[0], rtol=1e-6)


def test_lists_of_arrays_are_arrays_or_sequences_as_numpy_takes_them(mode):
    """np.sum of a list of equal arrays is the sum of their stack; np.concatenate and np.stack
    take the arrays one by one (of different shapes too)."""
    def f(ms):
        return (np.sum(ms[1:]) + np.sum(np.mean(ms[1:], axis=0) ** 2)
                + np.sum(np.concatenate(ms) ** 2) + np.sum(np.stack(ms[1:]) * 0.5))
    ms = [np.ones((2, 3)), np.full((3, 3), 0.5), np.eye(3)]
    value, g = llgrad.differentiate(f).value_and_grad(ms)
    np.testing.assert_allclose(value, f(ms), rtol=1e-13)
    assert type(g) is list
    for gi, wi in zip(g, finite_differences(lambda a, b, c: f([a, b, c]), ms, (0, 1, 2))):
        np.testing.assert_allclose(gi, wi, rtol=1e-6)


def test_a_list_made_by_a_call_is_built_as_one_array(mode):
    """`np.sum(list(map(f, x)))`, `np.stack(tuple(...))`: the list made by list/tuple holds
    traced values (convert/calls.py `_list_argument`); numpy concretised them before (a
    ConcretizationError)."""
    def f(x):
        sq = lambda t: t ** 2  # noqa: E731
        return np.sum(list(map(sq, x))) + np.sum(np.stack(tuple(x[i] * x for i in range(2))))

    def g(x):
        s = sorted([x[0], x[2]])  # a name bound to sorted(...) holds a list too
        return np.max(s) + np.sum(s)

    x = np.array([0.5, -1.5, 2.0])
    for fn in (f, g):
        value, grad = llgrad.value_and_grad(fn)(x)
        assert value == pytest.approx(fn(x), rel=1e-13)
        np.testing.assert_allclose(grad, finite_differences(fn, (x,), (0,))[0], rtol=1e-6)
