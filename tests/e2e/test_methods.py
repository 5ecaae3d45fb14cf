"""@llgrad.differentiate on methods (Note [Methods] in llgrad/api.py): `self` is bound as
Python binds it, it is an argument like the others (a plain object static and keyed by its
contents, so changing `self.W` traces again; a dataclass traced), and `wrt` counts the
arguments after `self`."""
from __future__ import annotations

import dataclasses
import functools
import warnings

import numpy as np
import pytest

import llgrad
from llgrad.runtime.errors import UnsupportedError
from tests.e2e.conftest import finite_differences
from tests.fd import numerical_grad_tree, numerical_vjp

W = np.array([[0.5, -0.2], [0.1, 0.3], [-0.4, 0.6]])
X = np.array([[1.0, 2.0, -1.0], [0.5, -0.3, 0.8]])
Y = np.array([[0.2, -0.1], [0.4, 0.3]])


class Model:
    """A model holding its weights; the loss is differentiated w.r.t. its argument."""

    def __init__(self, W, x):
        self.W, self.x = W, x

    @llgrad.differentiate
    def loss(self, y):
        return np.sum((np.tanh(self.x @ self.W) - y) ** 2)

    @llgrad.differentiate(wrt=(0, 1))
    def both(self, y, scale):
        return np.sum((self.x @ self.W * scale - y) ** 2)

    @llgrad.differentiate
    def calls_loss(self, y):
        return self.loss(y) * 2.0 + np.sum(self.loss.grad(y) ** 2)

    def plain(self, y):
        return np.sum(np.sin(self.x @ self.W) * y)


def _loss(W, x, y):
    return np.sum((np.tanh(x @ W) - y) ** 2)


def test_method_binds_self_and_differentiates_its_argument(mode):
    """Was `TypeError: loss(): missing a required argument: 'w'`."""
    m = Model(W, X)
    assert m.loss(Y) == pytest.approx(_loss(W, X, Y), rel=1e-12)
    want = numerical_vjp(lambda y: _loss(W, X, y), [Y], 1.0, [0])[0]
    np.testing.assert_allclose(m.loss.grad(Y), want, rtol=1e-6, atol=1e-9)
    value, g = m.loss.value_and_grad(Y)
    assert value == pytest.approx(_loss(W, X, Y), rel=1e-12)
    np.testing.assert_allclose(g, want, rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(Model.loss.grad(m, Y), want, rtol=1e-6, atol=1e-9)


def test_wrt_counts_after_self(mode):
    m = Model(W, X)
    gy, gs = m.both.grad(Y, 1.5)
    f = lambda y, s: np.sum((X @ W * s - Y * 0 - y) ** 2)  # noqa: E731
    want_y, want_s = numerical_vjp(f, [Y, np.array(1.5)], 1.0, [0, 1])
    np.testing.assert_allclose(gy, want_y, rtol=1e-6, atol=1e-9)
    assert isinstance(gs, float) and gs == pytest.approx(float(want_s), rel=1e-6)


def test_changing_self_traces_again(mode):
    class Fresh(Model):  # its own compiled method: trace counts start here
        loss = llgrad.differentiate(Model.loss.fn)
    m = Fresh(W, X)
    m.loss(Y)
    traces = m.loss.cache_info()["traces"]
    m.W = W * 2.0  # rebound: a new value of a static argument
    assert m.loss(Y) == pytest.approx(_loss(W * 2.0, X, Y), rel=1e-12)
    m.W[0, 0] = 3.0  # changed in place
    assert m.loss(Y) == pytest.approx(_loss(m.W, X, Y), rel=1e-12)
    np.testing.assert_allclose(
        m.loss.grad(Y), numerical_vjp(lambda y: _loss(m.W, X, y), [Y], 1.0, [0])[0],
        rtol=1e-6, atol=1e-9)
    assert m.loss.cache_info()["traces"] == traces + 2
    Fresh(m.W.copy(), X).loss(Y)  # another instance with the same contents: no trace
    assert m.loss.cache_info()["traces"] == traces + 2


def test_methods_calling_methods_and_grad_of_bound_methods(mode):
    m = Model(W, X)
    g = Model.loss.grad(m, Y)
    assert m.calls_loss(Y) == pytest.approx(2 * _loss(W, X, Y) + np.sum(g ** 2), rel=1e-10)
    want = numerical_vjp(lambda y: np.sum(np.sin(X @ W) * y), [Y], 1.0, [0])[0]
    np.testing.assert_allclose(llgrad.grad(m.plain)(Y), want, rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(llgrad.grad(m.loss)(Y), g, rtol=1e-12)


@dataclasses.dataclass
class Linear:
    """A dataclass model: its arrays are traced leaves, so wrt="self" gives a Linear."""

    W: np.ndarray
    b: float

    @llgrad.differentiate(wrt="self")
    def loss(self, x, y):
        return np.sum((x @ self.W + self.b - y) ** 2)


def test_dataclass_self_differentiated_by_name(mode):
    lin = Linear(W, 0.3)
    g = lin.loss.grad(X, Y)
    want = numerical_grad_tree(lambda p: np.sum((X @ p.W + p.b - Y) ** 2), [lin], 0)
    assert isinstance(g, Linear) and isinstance(g.b, float)
    np.testing.assert_allclose(g.W, want.W, rtol=1e-6, atol=1e-9)
    assert g.b == pytest.approx(want.b, rel=1e-6)


def test_a_method_changing_self_is_an_error():
    class Counter:
        def __init__(self):
            self.calls = 0

        @llgrad.differentiate
        def f(self, x):
            self.calls += 1
            return np.sum(x ** 2)
    with pytest.raises(UnsupportedError, match=r"f changes its static argument `self` "
                       r"\(Counter\) while it runs(.|\n)*How to fix: return the new state"):
        Counter().f(np.ones(2))


def test_bound_method_with_eager_tensors():
    m = Model(W, X)
    y = llgrad.tensor(Y, requires_grad=True)
    out = m.loss(y)
    out.backward()
    want = numerical_vjp(lambda y: _loss(W, X, y), [Y], 1.0, [0])[0]
    np.testing.assert_allclose(y.grad.numpy(), want, rtol=1e-6, atol=1e-9)


class Statics:
    @staticmethod
    @llgrad.differentiate
    def outer(x, y):
        return np.sum(x * y ** 2)

    @llgrad.differentiate(wrt=1)
    @staticmethod
    def inner(x, y):
        return np.sum(x * y ** 2)


def test_static_methods_bind_nothing(mode):
    x, y = np.array([1.0, 2.0]), np.array([3.0, -1.0])
    for f in (Statics.outer, Statics().outer):
        np.testing.assert_allclose(f.grad(x, y), y ** 2)
    for f in (Statics.inner, Statics().inner):
        np.testing.assert_allclose(f.grad(x, y), 2 * x * y)


class Cached:
    """A cached_property read in a method: filling the cache does not change `self`."""

    def __init__(self, W):
        self.W = W

    @functools.cached_property
    def gram(self):
        return self.W.T @ self.W

    @llgrad.differentiate
    def energy(self, v):
        return v @ self.gram @ v


def test_cached_property_of_self(mode):
    c, v = Cached(W), np.array([0.5, -1.0])
    assert c.energy(v) == pytest.approx(v @ W.T @ W @ v, rel=1e-12)
    np.testing.assert_allclose(c.energy.grad(v), 2 * W.T @ W @ v, rtol=1e-12)
    assert c.energy.cache_info()["traces"] == 1


@dataclasses.dataclass
class _Scale:
    """A callable dataclass: eq=True makes its instances unhashable."""
    k: float

    def __call__(self, x):
        return self.k * np.tanh(x) if self.k > 0 else x


_SCALE = _Scale(2.0)


def _uses_a_callable_dataclass(x):
    return np.sum(_SCALE(x) ** 2)


def test_a_callable_unhashable_object_is_called_in_the_function(mode):
    """Its call in converted code looked it up in a set (a TypeError: unhashable type)."""
    x = np.array([0.3, -1.2, 0.8])
    value, grad = llgrad.differentiate(_uses_a_callable_dataclass).value_and_grad(x)
    assert value == pytest.approx(_uses_a_callable_dataclass(x), rel=1e-12)
    np.testing.assert_allclose(grad, numerical_vjp(_uses_a_callable_dataclass, [x],
                                                   np.ones(()), [0])[0], rtol=1e-6)


class _HuberLoss:
    """A loss object as people write them: data in __init__, the loss in __call__."""

    def __init__(self, X, y, delta=1.0):
        self.X, self.y, self.delta = X, y, delta

    def __call__(self, w):
        tot = 0.0
        for i in range(self.X.shape[0]):
            r = self.X[i] @ w - self.y[i]
            if abs(r) < self.delta:
                tot = tot + 0.5 * r ** 2
            else:
                tot = tot + self.delta * (abs(r) - 0.5 * self.delta)
        return tot


def test_a_callable_object_is_differentiated_through_its_converted_call(mode):
    """`llgrad.grad(obj)` for an instance of the user's class with __call__: the method bound
    to it (api._user_callable), so its traced `if` in a loop is staged; it ran as Python
    before (the dynamic path)."""
    rng = np.random.default_rng(0)
    loss = _HuberLoss(rng.standard_normal((12, 3)), rng.standard_normal(12))
    w = np.array([0.3, -0.2, 0.5])
    f = llgrad.differentiate(loss)
    with warnings.catch_warnings():
        warnings.simplefilter("error", llgrad.PerformanceWarning)
        value, grad = f.value_and_grad(w)
    assert f.inspect(w).path == "staged"
    assert value == pytest.approx(loss(w), rel=1e-13)
    np.testing.assert_allclose(llgrad.grad(loss)(w), grad)
    np.testing.assert_allclose(grad, finite_differences(loss, (w,), (0,))[0], rtol=1e-6)
