"""has_aux (jax.grad's option): the function returns (value, aux); only value is
differentiated, aux comes back beside it (Note [Auxiliary outputs] in llgrad/api.py)."""
import pickle

import numpy as np
import pytest

import llgrad
from llgrad.runtime.errors import ShapeError
from tests.fd import numerical_vjp


def _init(rng):
    return [(rng.standard_normal((3, 5)) * 0.5, np.zeros(5)),
            (rng.standard_normal((5, 2)) * 0.5, np.zeros(2))]


def loss_and_metrics(params, x, y):
    """A JAX-tutorial classifier: the loss, and the metrics a training loop logs."""
    h = x
    for W, b in params[:-1]:
        h = np.tanh(h @ W + b)
    W, b = params[-1]
    logits = h @ W + b
    logp = logits - np.log(np.sum(np.exp(logits), axis=1, keepdims=True))
    loss = -np.mean(np.sum(logp * y, axis=1))
    acc = np.mean(np.argmax(logits, axis=1) == np.argmax(y, axis=1))
    return loss, {"accuracy": acc, "logits": logits, "steps": 1}


def _data():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((8, 3))
    y = np.eye(2)[rng.integers(0, 2, 8)]
    return _init(rng), x, y


def _fd(params, x, y):
    flat = [a for p in params for a in p]

    def f(*leaves):
        it = iter(leaves)
        return loss_and_metrics([(next(it), next(it)) for _ in params], x, y)[0]
    return numerical_vjp(f, flat, 1.0, range(len(flat)))


def test_value_and_grad_returns_value_aux_and_gradient(mode):
    params, x, y = _data()
    (value, aux), g = llgrad.value_and_grad(loss_and_metrics, has_aux=True)(params, x, y)
    loss, expected = loss_and_metrics(params, x, y)
    assert value == pytest.approx(loss, rel=1e-12)
    assert aux["accuracy"] == pytest.approx(expected["accuracy"])
    np.testing.assert_allclose(aux["logits"], expected["logits"], rtol=1e-12)
    assert aux["steps"] == 1
    got = [a for p in g for a in p]
    for a, b in zip(got, _fd(params, x, y)):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-8)


def test_grad_returns_gradient_and_aux_and_the_fast_path_agrees():
    params, x, y = _data()
    g = llgrad.grad(loss_and_metrics, has_aux=True)
    first, aux = g(params, x, y)
    again, aux2 = g(params, x, y)
    assert aux["accuracy"] == aux2["accuracy"]
    for (a, b), (c, d) in zip(first, again):
        np.testing.assert_array_equal(a, c)
        np.testing.assert_array_equal(b, d)

    @llgrad.differentiate(has_aux=True)
    def scaled(w, s):  # arrays only: the per-call fast path
        return np.sum(w ** 2) * s, w * s
    w = np.array([1.0, -2.0, 3.0])
    for _ in range(2):
        (v, aux), gw = scaled.value_and_grad(w, 2.0)
        gw2, aux2 = scaled.grad(w, 2.0)
        assert v == 28.0
        np.testing.assert_array_equal(aux, w * 2.0)
        np.testing.assert_array_equal(gw, 4.0 * w)
        np.testing.assert_array_equal(gw2, gw)
    assert scaled(w, 2.0)[0] == 28.0  # calling it gives (value, aux) too


def test_has_aux_on_a_method_and_after_pickling():
    class Model:
        def __init__(self):
            self.scale = 3.0

        def loss(self, w):
            return self.scale * np.sum(w ** 2), np.max(w)
    w = np.array([0.5, 2.0])
    g, aux = llgrad.grad(Model().loss, has_aux=True)(w)
    np.testing.assert_allclose(g, 6.0 * w)
    assert aux == 2.0
    d = llgrad.differentiate(_module_level_loss, has_aux=True)
    back = pickle.loads(pickle.dumps(d))
    assert back.has_aux
    g, aux = back.grad(w)
    np.testing.assert_allclose(g, np.cos(w))
    assert aux == pytest.approx(np.sum(w))


def _module_level_loss(w):
    return np.sum(np.sin(w)), np.sum(w)


def test_inside_another_compiled_function():
    inner = llgrad.grad(_module_level_loss, has_aux=True)

    @llgrad.differentiate
    def outer(w):
        g, total = inner(w)
        return np.sum(g ** 2) + total
    w = np.array([0.3, 1.2])
    # d/dw [sum(cos(w)^2) + sum(w)] = -2 cos(w) sin(w) + 1
    np.testing.assert_allclose(outer.grad(w), 1.0 - 2.0 * np.cos(w) * np.sin(w), rtol=1e-12)


def test_not_a_pair_is_a_clear_error():
    def loss(w):
        return np.sum(w ** 2)
    with pytest.raises(ShapeError, match=r"(?s)has_aux=True, so it must return a pair \(value, "
                                         r"aux\).*test_has_aux\.py"):
        llgrad.grad(loss, has_aux=True)(np.ones(2))

    def vector_value(w):
        return w ** 2, np.sum(w)
    with pytest.raises(ShapeError, match="must return a scalar"):
        llgrad.grad(vector_value, has_aux=True)(np.ones(2))
