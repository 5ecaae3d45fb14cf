"""np.vectorize on traced values (Note [np.vectorize on traced values] in llgrad/batching.py):
a scalar Python function with `if`s, vectorised as numpy users write it, is mapped by vmap
over the broadcast elements; values equal numpy's, gradients equal finite differences,
compiled and through the interpreter, on the staged path."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import llgrad
from llgrad.runtime.errors import UnsupportedError
from tests.e2e.conftest import finite_differences

RNG = np.random.default_rng(17)
X, Y, W = RNG.standard_normal((12, 3)), RNG.standard_normal(12), RNG.standard_normal(3)


def huber_scalar(r, delta=1.0):
    if abs(r) <= delta:
        return 0.5 * r * r
    return delta * (abs(r) - 0.5 * delta)


vhuber = np.vectorize(huber_scalar)


@np.vectorize
def soft_threshold(x, t):
    if x > t:
        return x - t
    elif x < -t:
        return x + t
    return 0.0


def module_level(w, X, y):
    return np.sum(vhuber(X @ w - y))


def made_inside_with_keyword(w, X, y):
    f = np.vectorize(huber_scalar)
    return np.mean(f(X @ w - y, delta=0.5))


def excluded_argument(w, X, y):
    f = np.vectorize(huber_scalar, excluded={1})
    return np.mean(f(X @ w - y, 0.3))


def broadcast_decorator(w, X, y):
    """(12,) against (2, 1): a (2, 12) result."""
    return np.sum(soft_threshold(X @ w - y, np.array([[0.1], [0.5]])) ** 2)


def two_results(w, X, y):
    f = np.vectorize(lambda r: (r * r, np.sin(r) if r > 0 else np.cos(r)))
    a, b = f(X @ w - y)
    return np.sum(a) + np.sum(b * b)


def with_otypes(w, X, y):
    f = np.vectorize(lambda r: 1 if r > 0 else 0, otypes=[np.float64])
    return np.sum(f(X @ w - y) * (X @ w))


CASES = [module_level, made_inside_with_keyword, excluded_argument, broadcast_decorator,
         two_results, with_otypes]


@pytest.mark.parametrize("fn", CASES, ids=[f.__name__ for f in CASES])
def test_values_and_gradients_equal_numpy_and_finite_differences(fn, mode):
    d = llgrad.differentiate(fn)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no dynamic-path warning
        value, grad = d.value_and_grad(W, X, Y)
    assert value == pytest.approx(fn(W, X, Y), rel=1e-12)
    np.testing.assert_allclose(grad, finite_differences(fn, (W, X, Y), (0,))[0],
                               rtol=1e-6, atol=1e-8)
    assert d.inspect(W, X, Y).stats["path"] == "staged"


def test_the_result_has_the_broadcast_shape_and_otypes():
    out = llgrad.differentiate(lambda x, t: soft_threshold(x, t))(Y, np.array([[0.1], [0.5]]))
    assert out.shape == (2, 12)
    np.testing.assert_allclose(out, soft_threshold(Y, np.array([[0.1], [0.5]])))
    f = np.vectorize(lambda r: r > 0, otypes="d")
    out = llgrad.differentiate(lambda x: f(x))(Y)
    assert out.dtype == np.float64
    np.testing.assert_array_equal(out, f(Y))


def test_signature_and_traced_keywords_are_refused_at_the_users_line():
    g = np.vectorize(lambda a, b: a @ b, signature="(n),(n)->()")
    with pytest.raises(UnsupportedError, match=r"(?s)signature=.*test_vectorize.py:\d+"):
        llgrad.grad(lambda w: np.sum(g(X, w)))(W)
    with pytest.raises(UnsupportedError, match="(?s)keyword argument .delta..*pass .delta. "
                                               "positionally"):
        llgrad.grad(lambda w: np.sum(vhuber(X @ w, delta=w[0])))(W)
