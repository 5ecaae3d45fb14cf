"""Custom derivatives (runtime/custom.py, tracer/custom.py): llgrad.custom_vjp and
autograd.Function subclasses give the same values and gradients compiled (native and
interpreted), eagerly and as plain Python; the gradient is the rule's backward (the tests use
rules that differ from the true derivative, so they would fail if it were ignored), and
second derivatives differentiate the backward (Note [Custom rules are differentiable])."""
from __future__ import annotations

from collections import namedtuple

import numpy as np
import pytest

import llgrad
from llgrad.autograd import Function
from llgrad.runtime.errors import LLGradError, UnsupportedError
from tests.fd import numerical_vjp

X = np.array([0.3, -1.2, 2.5, 0.05])


# ---- rules ----------------------------------------------------------------------------------
@llgrad.custom_vjp
def log1pexp(x):
    return np.log1p(np.exp(x))


def _log1pexp_fwd(x):
    return log1pexp(x), x  # calls the function itself: its plain value


def _log1pexp_bwd(x, g):
    return (g * (1.0 - 1.0 / (1.0 + np.exp(x))),)  # stable where exp(x) / (1 + exp(x)) is not


log1pexp.defvjp(_log1pexp_fwd, _log1pexp_bwd)


@llgrad.custom_vjp
def clip_gradient(x):
    return x


clip_gradient.defvjp(lambda x: (x, None), lambda _, g: (np.clip(g, -1.0, 1.0),))


def clipped_loss(x):
    return np.sum(clip_gradient(x) ** 2 * 3.0)


def clipped_grad(x):  # what the rule gives: clip(6 x)
    return np.clip(6.0 * x, -1.0, 1.0)


class ScaledExp(Function):
    """exp with a backward scaled by `scale` (a non-tensor argument): deliberately not the
    derivative of the forward."""

    @staticmethod
    def forward(ctx, x, scale):
        out = np.exp(x)
        ctx.save_for_backward(out)
        ctx.scale = scale
        return out

    @staticmethod
    def backward(ctx, g):
        out, = ctx.saved_tensors
        return g * out * ctx.scale, None


class SplitSign(Function):
    """Two outputs, one marked non-differentiable, and a gradient that sums over a broadcast."""

    @staticmethod
    def forward(ctx, x, w):
        pos, sign = np.maximum(x, 0.0) * w, np.sign(x)
        ctx.mark_non_differentiable(sign)
        ctx.save_for_backward(x)
        return pos, sign

    @staticmethod
    def backward(ctx, g_pos, g_sign):
        x, = ctx.saved_tensors
        return g_pos * 2.0, g_pos * x  # the second broadcasts w's shape (): summed


def uses_functions(x, w):
    pos, sign = SplitSign.apply(x, w)
    return np.sum(ScaledExp.apply(x, 3.0)) + np.sum(pos * 2.0) + np.sum(sign)


def uses_functions_grad(x):
    return 3.0 * np.exp(x) + 2.0 * 2.0


# ---- compiled vs Python vs eager ---------------------------------------------------------------
def test_log1pexp_is_stable(mode):
    f = lambda x: np.sum(log1pexp(x) * 2.0)  # noqa: E731
    d = llgrad.differentiate(f)
    assert d(X) == pytest.approx(f(X), rel=1e-12)
    np.testing.assert_allclose(d.grad(X), numerical_vjp(f, [X], 1.0, [0])[0], rtol=1e-6)
    big = np.array([800.0, -800.0])
    np.testing.assert_allclose(d.grad(big), [2.0, 0.0])  # exp(800) / (1 + exp(800)) is nan
    plain = llgrad.differentiate(lambda x: np.sum(np.log1p(np.exp(x)) * 2.0))
    with np.errstate(over="ignore", invalid="ignore"):
        assert np.isnan(plain.grad(big)[0])


def test_clipped_gradient_uses_the_rule(mode):
    d = llgrad.differentiate(clipped_loss)
    assert d(X) == pytest.approx(clipped_loss(X), rel=1e-12)
    np.testing.assert_allclose(d.grad(X), clipped_grad(X), rtol=1e-12)
    t = llgrad.tensor(X, requires_grad=True)
    out = clipped_loss(t)
    out.backward()
    assert out.grad_fn is not None
    np.testing.assert_allclose(t.grad.numpy(), clipped_grad(X), rtol=1e-12)


def test_function_subclass_compiled_as_eager(mode):
    d = llgrad.differentiate(uses_functions, wrt=(0, 1))
    w = np.array(1.5)
    value = np.sum(np.exp(X)) + np.sum(np.maximum(X, 0) * 3.0) + np.sum(np.sign(X))
    assert d(X, w) == pytest.approx(value, rel=1e-12)
    gx, gw = d.grad(X, w)
    np.testing.assert_allclose(gx, uses_functions_grad(X), rtol=1e-12)
    assert gw == pytest.approx(2.0 * np.sum(X), rel=1e-12)  # g_pos * x summed to w's shape
    t, tw = llgrad.tensor(X, requires_grad=True), llgrad.tensor(w, requires_grad=True)
    out = uses_functions(t, tw)
    assert float(out) == pytest.approx(value, rel=1e-12)
    out.backward()
    np.testing.assert_allclose(t.grad.numpy(), gx, rtol=1e-12)
    assert float(tw.grad) == pytest.approx(gw, rel=1e-12)


class GradForAFloat(Function):
    @staticmethod
    def forward(ctx, x, scale):
        return x * scale

    @staticmethod
    def backward(ctx, g):
        return g * 2.0, g  # scale is not a tensor: its gradient must be None


def test_function_gradient_for_a_non_tensor_is_an_error(mode):
    match = r"returned a gradient different than None at position 1, but the corresponding " \
            r"forward input was not a Tensor"
    with pytest.raises(LLGradError, match=match):
        llgrad.differentiate(lambda x: np.sum(GradForAFloat.apply(x, 3))).grad(X)
    with pytest.raises(LLGradError, match=match):
        np.sum(GradForAFloat.apply(llgrad.tensor(X, requires_grad=True), 3)).backward()


Pair = namedtuple("Pair", "a b")


@llgrad.custom_vjp
def weighted(p, x):
    """A pytree argument and a tuple output."""
    return p.a * x, np.sum(p.b * x)


weighted.defvjp(lambda p, x: (weighted(p, x), (p, x)),
                lambda res, g: (Pair(g[0] * res[1] * 10.0, np.sum(g[1] * res[1])),
                                g[0] * res[0].a + g[1] * res[0].b))


@llgrad.custom_vjp
def power(n, x):
    return x ** n


power = llgrad.custom_vjp(power.fun, nondiff_argnums=(0,))
power.defvjp(lambda n, x: (x ** n, x), lambda n, x, g: (g * n * x ** (n - 1) * 0.5,))


def trees_and_nondiff(a, x):
    u, v = weighted(Pair(a, 2.0), x)
    return np.sum(u) + v + np.sum(power(3, x))


def test_pytree_arguments_tuple_outputs_and_nondiff_argnums(mode):
    a = np.array([1.0, -2.0, 0.5, 3.0])
    d = llgrad.differentiate(trees_and_nondiff, wrt=(0, 1))
    assert d(a, X) == pytest.approx(trees_and_nondiff(a, X), rel=1e-12)
    ga, gx = d.grad(a, X)
    np.testing.assert_allclose(ga, 10.0 * X, rtol=1e-12)
    np.testing.assert_allclose(gx, a + 2.0 + 1.5 * X ** 2, rtol=1e-12)
    ta, tx = llgrad.tensor(a, requires_grad=True), llgrad.tensor(X, requires_grad=True)
    trees_and_nondiff(ta, tx).backward()
    np.testing.assert_allclose(ta.grad.numpy(), ga, rtol=1e-12)
    np.testing.assert_allclose(tx.grad.numpy(), gx, rtol=1e-12)


def in_a_loop(x, w):
    h = x
    for _ in range(20):
        h = clip_gradient(np.tanh(h * w)) + 0.1 * h
    return np.sum(h)


def test_custom_rule_inside_a_staged_loop(mode):
    d = llgrad.differentiate(in_a_loop, wrt=1)
    w = np.array([0.9, -0.4, 1.1, 0.3])
    assert d(X, w) == pytest.approx(in_a_loop(X, w), rel=1e-12)
    assert d.inspect(X, w).stats["ops (traced)"] < 40  # one loop op
    t = llgrad.tensor(w, requires_grad=True)
    in_a_loop(X, t).backward()
    np.testing.assert_allclose(d.grad(X, w), t.grad.numpy(), rtol=1e-10)


def test_custom_rule_on_the_dynamic_path(mode):
    def f(x):
        k = float(np.sum(x)) > 0  # concretises: the dynamic path
        return np.sum(clip_gradient(x) ** 2 * 3.0) * (2.0 if k else 1.0)
    d = llgrad.differentiate(f)
    np.testing.assert_allclose(d.grad(X), np.clip(12.0 * X, -1.0, 1.0), rtol=1e-12)
    assert d.inspect(X).stats["path"].startswith("dynamic")


# ---- second derivatives go through the backward ----------------------------------------------
@llgrad.custom_vjp
def fake_sin(x):
    return np.sin(x)


fake_sin.defvjp(lambda x: (np.sin(x), x), lambda x, g: (g * x ** 2,))  # "derivative" x^2


def test_second_derivative_differentiates_the_backward(mode):
    f = lambda x: fake_sin(x) * 1.0  # noqa: E731
    assert llgrad.grad(f)(0.7) == pytest.approx(0.7 ** 2)
    assert llgrad.grad(llgrad.grad(f))(0.7) == pytest.approx(2 * 0.7)  # d(x^2)/dx, not -sin
    t = llgrad.tensor(0.7, requires_grad=True)
    (g,) = llgrad.autograd.grad(fake_sin(t), t, create_graph=True)
    (gg,) = llgrad.autograd.grad(g, t)
    assert float(g) == pytest.approx(0.49) and float(gg) == pytest.approx(1.4)


def test_second_derivative_through_residuals(mode):
    """log1pexp's backward reads its residual x: its derivative is sigmoid'(x)."""
    f = lambda x: log1pexp(x) * 1.0  # noqa: E731
    s = 1.0 / (1.0 + np.exp(-0.4))
    assert llgrad.grad(llgrad.grad(f))(0.4) == pytest.approx(s * (1 - s), rel=1e-10)


# ---- stop_gradient ------------------------------------------------------------------------
def stopped(x):
    return np.sum(x * llgrad.stop_gradient(x)) + np.sum(x.detach() * 0.0 + x ** 2)


def test_stop_gradient_and_detach(mode):
    d = llgrad.differentiate(stopped)
    assert d(X) == pytest.approx(2 * np.sum(X ** 2), rel=1e-12)
    np.testing.assert_allclose(d.grad(X), 3.0 * X, rtol=1e-12)  # x*sg(x): x, x^2: 2x
    t = llgrad.tensor(X, requires_grad=True)
    stopped(t).backward()
    np.testing.assert_allclose(t.grad.numpy(), 3.0 * X, rtol=1e-12)
    np.testing.assert_array_equal(llgrad.stop_gradient({"a": X})["a"], X)


# ---- errors -----------------------------------------------------------------------------------
def _rule(bwd, fwd=lambda x: (x * 2.0, x)):
    f = llgrad.custom_vjp(lambda x: x * 2.0)
    f.defvjp(fwd, bwd)
    return f


@pytest.mark.parametrize("rule,match", [
    (_rule(lambda x, g: g), r"returned a \w+; it must return a tuple with one cotangent per "
                            r"argument \(1\)"),
    (_rule(lambda x, g: (g, g)), r"returned a tuple of 2; it must return a tuple with one "),
    (_rule(lambda x, g: (g[:2],)), r"returned a cotangent of shape \[2\] for argument 0 of "
                                   r"shape \[4\]"),
    (_rule(lambda x, g: (g,), fwd=lambda x: x * 2.0),
     r"the forward of <lambda> must return a pair \(output, residuals\)")],
    ids=["not a tuple", "too many", "shape", "fwd"])
def test_malformed_rules_are_errors(rule, match):
    d = llgrad.differentiate(lambda x: np.sum(rule(x)))
    with pytest.raises(LLGradError, match=match):
        d.grad(X)
    with pytest.raises(LLGradError, match=match):
        np.sum(rule(llgrad.tensor(X, requires_grad=True))).backward()


def test_differentiating_a_closed_over_value_is_an_error():
    def f(x, w):
        scaled = llgrad.custom_vjp(lambda x: x * w)
        scaled.defvjp(lambda x: (x * w, None), lambda _, g: (g * 2.0,))
        return np.sum(scaled(x))
    d = llgrad.differentiate(f, wrt=1)
    with pytest.raises(UnsupportedError, match=r"its forward reads a differentiated value "
                       r"\(f64\[4\]\) that is not one of its arguments(.|\n)*How to fix: pass"):
        d.grad(X, X)
    assert llgrad.differentiate(f, wrt=0).grad(X, X) == pytest.approx(np.full(4, 2.0))
    with pytest.raises(LLGradError, match=r"its forward uses a tensor that requires grad but "
                       r"is not one of its arguments(.|\n)*How to fix: pass"):
        f(llgrad.tensor(X, requires_grad=True), llgrad.tensor(X, requires_grad=True))
    t = llgrad.tensor(X, requires_grad=True)
    f(t, llgrad.tensor(X)).backward()  # w needs no gradient: the rule is enough
    np.testing.assert_allclose(t.grad.numpy(), np.full(4, 2.0))


def test_a_rule_without_defvjp_is_an_error():
    f = llgrad.custom_vjp(lambda x: x)
    with pytest.raises(TypeError, match=r"has no rules: call <lambda>.defvjp\(fwd, bwd\)"):
        f(X)
