"""Checkpointing: `@differentiate(checkpoint=...)` on staged loops (transform/checkpoint.py,
Note [Checkpointed loops]) and `llgrad.checkpoint` on helpers (llgrad/checkpointing.py):
the same gradients as without (and as finite differences), and tapes that shrink as
promised."""
from __future__ import annotations

import numpy as np
import pytest

import llgrad
import llgrad as lg
from llgrad.runtime.errors import AutogradError, UnsupportedError
from tests.e2e.conftest import finite_differences
from tests.fd import FD_TOL


def recurrence(x):
    s = x[0]
    for i in range(1, len(x)):
        s = 0.9 * s + np.sin(x[i]) * x[i - 1]
    return s


def rnn(W, xs, h):
    for t in range(xs.shape[0]):
        h = np.tanh(W @ h + xs[t])
    return np.sum(h ** 2)


def branchy(w, x):
    s = w * 0.0
    for i in range(2, 2 + 3 * x.shape[0], 3):  # start and step: the index is recomputed
        j = (i - 2) // 3
        if x[j] > 0.2:
            s = s + np.exp(w * x[j]) * 0.1
        else:
            s = np.sin(s * w) + x[j]
    return np.sum(s * s)


def nested(w, x):
    s = w * 0.0
    for i in range(x.shape[0]):
        for k in range(3):  # an inner loop in a segment
            s = np.cos(s) * w * 0.5 + x[i] * k * 0.1
    return np.sum(s)


def _grads(fn, args, checkpoint, wrt=0):
    return llgrad.differentiate(fn, wrt=wrt, checkpoint=checkpoint).value_and_grad(*args)


CASES = [
    (recurrence, lambda r: (r.normal(size=50),), 0),
    (rnn, lambda r: (r.normal(size=(4, 4)) * 0.4, r.normal(size=(23, 4)),
                     r.normal(size=4)), (0, 2)),
    (branchy, lambda r: (r.normal(size=3), r.random(17)), (0, 1)),
    (nested, lambda r: (r.normal(size=2), r.normal(size=11)), (0, 1)),
]


@pytest.mark.parametrize("schedule", ["sqrt", 3, "log"])
@pytest.mark.parametrize("fn,make,wrt", CASES, ids=[c[0].__name__ for c in CASES])
def test_checkpointed_loops_give_the_plain_gradient(fn, make, wrt, schedule, mode):
    args = make(np.random.default_rng(3))
    value, grads = _grads(fn, args, schedule, wrt)
    v0, g0 = _grads(fn, args, None, wrt)
    np.testing.assert_allclose(value, fn(*args), rtol=1e-12)
    np.testing.assert_allclose(value, v0, rtol=1e-12)
    for g, h, k in zip(grads if isinstance(wrt, tuple) else (grads,),
                       g0 if isinstance(wrt, tuple) else (g0,),
                       wrt if isinstance(wrt, tuple) else (wrt,)):
        np.testing.assert_allclose(g, h, rtol=1e-11, atol=1e-13)
        fd = finite_differences(fn, args, [k])[0]
        np.testing.assert_allclose(g, fd, rtol=FD_TOL[0] * 100, atol=FD_TOL[1] * 100)


def _tape_bytes(n, schedule):
    x = np.random.default_rng(0).normal(size=n)
    st = llgrad.differentiate(recurrence, checkpoint=schedule).inspect(x).stats
    return st


def test_tape_shrinks_to_sqrt_n():
    small, large = _tape_bytes(2_500, "sqrt"), _tape_bytes(40_000, "sqrt")
    for st in (small, large):
        assert st["checkpointed loops"] == 1
        assert st["tape bytes (static)"] < st["tape bytes (static, without checkpointing)"] / 20
    plain = large["tape bytes (static, without checkpointing)"] / \
        small["tape bytes (static, without checkpointing)"]
    ratio = large["tape bytes (static)"] / small["tape bytes (static)"]
    assert plain > 15  # 16x the iterations: the plain tape grows linearly
    assert ratio < 5   # and the checkpointed one as sqrt(16) = 4
    assert "tape bytes (static, without checkpointing)" not in _tape_bytes(2_500, None)


def test_loops_that_cannot_be_checkpointed_are_counted(mode):
    def newton(a):
        x = a * 0.0 + 1.0
        while np.max(np.abs(x * x - a)) > 1e-12:
            x = 0.5 * (x + a / x)
        return np.sum(x)

    a = np.array([2.0, 3.0])
    f = llgrad.differentiate(newton, checkpoint="sqrt")
    np.testing.assert_allclose(f.grad(a), 0.5 / np.sqrt(a), rtol=1e-9)
    assert f.inspect(a).stats["checkpointed loops"] == 0


@pytest.mark.parametrize("bad", ["binomial", 0, -2, 1.5, True])
def test_bad_schedule_is_refused(bad):
    with pytest.raises(UnsupportedError, match="is not a checkpoint schedule"):
        llgrad.differentiate(recurrence, checkpoint=bad)


# -- llgrad.checkpoint on a helper ------------------------------------------------------------
def cell(h, w):
    a = np.sin(h * w) + h
    for _ in range(2):
        a = np.tanh(a) * 1.1
    return a


ccell = llgrad.checkpoint(cell)


def _unroll(step):
    def f(w, h):
        for _ in range(30):
            h = step(h, w)
        return np.sum(h * h)
    return f


def test_checkpointed_helper_in_a_loop(mode):
    w, h = np.linspace(0.1, 0.9, 8), np.linspace(-1.0, 1.0, 8)
    fc, fp = llgrad.differentiate(_unroll(ccell)), llgrad.differentiate(_unroll(cell))
    gc, gp = fc.grad(w, h), fp.grad(w, h)
    np.testing.assert_allclose(gc, gp, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(gc, finite_differences(_unroll(cell), (w, h), [0])[0],
                               rtol=1e-6, atol=1e-8)
    if mode == "native":
        tc, tp = (f.inspect(w, h).stats for f in (fc, fp))
        # the plain loop tapes cell's own loop (2 tanh per step, static rows: Note [Stacked
        # inner tapes]); the checkpointed one its argument per step and one step's inside
        assert "tapes (growing)" not in tc and "tapes (growing)" not in tp
        assert tc["tape bytes (static)"] < tp["tape bytes (static)"]


def test_checkpointed_helper_with_pytrees_second_derivative():
    @llgrad.checkpoint
    def layer(p, x):
        W, b = p["W"], p["b"]
        return {"y": np.tanh(x @ W + b), "n": np.sum(x)}

    def loss(W, b, x):
        out = layer({"W": W, "b": b}, x)
        return np.sum(out["y"] ** 2) + out["n"]

    rng = np.random.default_rng(2)
    W, b, x = rng.normal(size=(3, 2)), rng.normal(size=2), rng.normal(size=(4, 3))
    g = llgrad.differentiate(loss, wrt=(0, 1)).grad(W, b, x)
    for k in range(2):
        np.testing.assert_allclose(g[k], finite_differences(loss, (W, b, x), [k])[0],
                                   rtol=1e-6, atol=1e-8)
    hb = llgrad.hessian(lambda b, W, x: loss(W, b, x))(b, W, x)  # through the recomputation
    fd = np.stack([finite_differences(lambda bb: llgrad.grad(
        lambda b, W, x: loss(W, b, x))(bb, W, x)[k], (b,), [0])[0] for k in range(2)])
    np.testing.assert_allclose(hb, fd, rtol=1e-5, atol=1e-7)


def test_checkpointed_helper_eagerly():
    def tcell(h, w):
        a = (h * w).sin() + h
        return a.tanh() * 1.1

    def run(step):
        w = lg.tensor(np.linspace(0.1, 0.9, 5), requires_grad=True)
        h = lg.tensor(np.linspace(-1.0, 1.0, 5))
        for _ in range(4):
            h = step(h, w)
        (h * h).sum().backward()
        return h.detach().numpy(), w.grad.numpy()

    (hc, gc), (hp, gp) = run(llgrad.checkpoint(tcell)), run(tcell)
    np.testing.assert_allclose(hc, hp, rtol=1e-15)
    np.testing.assert_allclose(gc, gp, rtol=1e-13)
    w = lg.tensor(np.ones(3), requires_grad=True)
    y = llgrad.checkpoint(tcell)(w * 1.0, w)
    assert y.grad_fn.name() == "CustomVJPBackward"
    np.testing.assert_array_equal(ccell(np.ones(2), np.ones(2)), cell(np.ones(2), np.ones(2)))
    with pytest.raises(AutogradError, match="second derivative through a checkpointed"):
        y2 = llgrad.checkpoint(tcell)(w * 1.0, w)
        lg.autograd.grad(y2.sum(), [w], create_graph=True)


def test_checkpointed_helper_reading_a_differentiated_closure_is_refused():
    def loss(w, x):
        helper = llgrad.checkpoint(lambda_free(w))
        return np.sum(helper(x))

    with pytest.raises(UnsupportedError, match="reads a traced value that is not one of its "
                       "arguments"):
        llgrad.differentiate(loss).grad(np.ones(3), np.ones(3))


def lambda_free(w):
    def scaled(x):
        return np.sin(x * w)
    return scaled


# -- a nested loop in its init's buffer (codegen/inplace.py, Note [Updates in place]) --------
def _grow(y):
    for _ in range(3):
        y = y * 2.0
    return y


def grow_in_condition(x):
    c = 0
    while np.sum(_grow(x)) < 200.0 and c < 50:  # the condition must not change x
        x = x + 1.0
        c = c + 1
    return np.sum(x * x)


def swap_after_inner_loop(x, y):
    for _ in range(4):
        z = x
        for _ in range(2):
            z = z * 1.5 + y
        x, y = y + 1.0, z  # the inner loop's result (in x's buffer) moves to y's position
    return np.sum(x * y)


@pytest.mark.parametrize("fn", [grow_in_condition, swap_after_inner_loop])
def test_nested_loops_sharing_buffers(fn, mode):
    args = (np.arange(100.0) / 1000, np.linspace(-1.0, 1.0, 100))[:fn.__code__.co_argcount]
    value, g = llgrad.differentiate(fn).value_and_grad(*args)
    np.testing.assert_allclose(value, fn(*args), rtol=1e-12)
    np.testing.assert_allclose(g, finite_differences(fn, args, [0])[0], rtol=1e-6, atol=1e-6)
