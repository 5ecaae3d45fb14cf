"""Forward mode through the public API (llgrad/forward.py): `jvp` on the control-flow corpus
against reverse mode and finite differences; `jacfwd` == `jacrev` == finite differences;
Hessians forward over reverse through staged loops; argnums as int or tuple; errors."""
from __future__ import annotations

import numpy as np
import pytest

import llgrad
from tests import cf_corpus
from tests.fd import numerical_vjp

CASES = cf_corpus.CASES
LOOPS = ["recurrence", "for_rows_cond", "newton_sqrt", "while_grow", "nested_break_inner",
         "early_return_while", "horner_reverse", "fixed_point_cos"]


def _wrt(c):
    return c.wrt if isinstance(c.wrt, tuple) else (c.wrt,)


def _tangents(args, wrt, rng):
    """Random tangents for the `wrt` arguments, zero tangents for the other float ones."""
    out = []
    for i, a in enumerate(args):
        if isinstance(a, (np.ndarray, float)) and np.asarray(a).dtype.kind == "f":
            t = rng.normal(size=np.shape(a)) if i in wrt else np.zeros(np.shape(a))
            out.append(float(t) if isinstance(a, float) else t)
        else:
            out.append(a)
    return tuple(out)


def _fd_along(f, args, tangents, eps=1e-6):
    def at(s):
        return np.asarray(f(*[a + s * t if isinstance(a, (np.ndarray, float)) else a
                              for a, t in zip(args, tangents)]), np.float64)
    return (at(eps) - at(-eps)) / (2 * eps)


@pytest.mark.parametrize("name", sorted(CASES))
def test_jvp_on_the_control_flow_corpus(name, monkeypatch, rng):
    """Through the interpreter (the native path is checked on the loops below): the
    tangent equals the reverse-mode gradient along it and finite differences."""
    monkeypatch.setenv("LLGRAD_DISABLE_JIT", "1")
    c = CASES[name]
    args = c.args()
    if any(isinstance(a, float) for a in args):
        args = tuple(np.float64(a) if isinstance(a, float) else a for a in args)
    wrt = _wrt(c)
    ts = _tangents(args, wrt, rng)
    with np.errstate(all="ignore"):
        value, tangent = llgrad.jvp(c.fn, args, ts)
    np.testing.assert_allclose(value, c.fn(*args), rtol=1e-10, atol=1e-12)
    grads = llgrad.grad(c.fn, c.wrt)(*args)
    grads = grads if isinstance(c.wrt, tuple) else (grads,)
    reverse = sum(float(np.sum(g * ts[i])) for g, i in zip(grads, wrt))
    np.testing.assert_allclose(tangent, reverse, rtol=1e-8, atol=1e-10)
    num = numerical_vjp(c.fn, list(args), np.float64(1.0), list(wrt))
    fd = sum(float(np.sum(n * ts[i])) for n, i in zip(num, wrt))
    np.testing.assert_allclose(tangent, fd, rtol=c.fd_tol[0] * 10, atol=c.fd_tol[1] * 10)


@pytest.mark.parametrize("name", LOOPS)
def test_jvp_native_equals_interpreter_on_loops(name, monkeypatch, rng):
    c = CASES[name]
    args = c.args()
    ts = _tangents(args, _wrt(c), rng)
    native = llgrad.jvp(c.fn, args, ts)
    monkeypatch.setenv("LLGRAD_DISABLE_JIT", "1")
    interp = llgrad.jvp(c.fn, args, ts)
    np.testing.assert_allclose(native[1], interp[1], rtol=1e-12, atol=1e-14)


def loop_map(x, w):
    """A vector function with a staged loop: 5 steps of a small tanh recurrence."""
    h = x
    for _ in range(5):
        h = np.tanh(w @ h) + 0.1 * x
    return h * np.sum(x)


def test_jacfwd_equals_jacrev_equals_finite_differences(mode, rng):
    x, w = rng.normal(size=4), rng.normal(size=(4, 4)) * 0.5
    jf, jr = llgrad.jacfwd(loop_map)(x, w), llgrad.jacrev(loop_map)(x, w)
    fd = np.stack([_fd_along(loop_map, (x, w), (e, np.zeros_like(w))) for e in np.eye(4)],
                  axis=-1)
    assert jf.shape == jr.shape == (4, 4)
    np.testing.assert_allclose(jf, jr, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(jf, fd, rtol=1e-6, atol=1e-8)


def test_jacobians_with_tuple_argnums(mode, rng):
    x, w = rng.normal(size=3), rng.normal(size=(3, 3)) * 0.5
    jx, jw = llgrad.jacfwd(loop_map, argnums=(0, 1))(x, w)
    rx, rw = llgrad.jacrev(loop_map, argnums=(0, 1))(x, w)
    assert jx.shape == (3, 3) and jw.shape == (3, 3, 3)
    np.testing.assert_allclose(jw, rw, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(jx, rx, rtol=1e-10, atol=1e-12)
    for k in range(9):
        e = np.zeros(9)
        e[k] = 1.0
        fd = _fd_along(loop_map, (x, w), (np.zeros(3), e.reshape(3, 3)))
        np.testing.assert_allclose(jw.reshape(3, 9)[:, k], fd, rtol=1e-6, atol=1e-8)


def scalar_loop(x, y):
    s = 0.0
    for i in range(x.shape[0]):  # staged: its reverse sweep reads tapes
        s = np.sin(s) * y + x[i] ** 2 * np.cos(x[i] * y)
    return s


def test_hessian_through_a_staged_loop_is_forward_over_reverse(mode, rng):
    x, y = rng.normal(size=5), 0.7
    h = llgrad.hessian(scalar_loop)(x, y)
    g = llgrad.grad(scalar_loop)
    fd = np.stack([_fd_along(lambda a: g(a, y), (x,), (e,)) for e in np.eye(5)], axis=-1)
    assert h.shape == (5, 5)
    np.testing.assert_allclose(h, fd, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(h, h.T, rtol=1e-10, atol=1e-12)
    v = rng.normal(size=5)
    np.testing.assert_allclose(llgrad.hvp(scalar_loop)(x, y, v), h @ v, rtol=1e-10,
                               atol=1e-12)


def test_hessian_with_tuple_argnums(mode, rng):
    x, y = rng.normal(size=3), np.float64(0.4)
    (hxx, hxy), (hyx, hyy) = llgrad.hessian(scalar_loop, argnums=(0, 1))(x, y)
    gy = llgrad.grad(scalar_loop, 1)
    fd_yy = _fd_along(lambda b: gy(x, b), (y,), (1.0,))
    fd_xy = _fd_along(lambda b: llgrad.grad(scalar_loop)(x, b), (y,), (1.0,))
    assert hxx.shape == (3, 3) and np.shape(hxy) == (3,) and np.shape(hyy) == ()
    np.testing.assert_allclose(hyy, fd_yy, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(hxy, fd_xy, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(hyx, hxy, rtol=1e-10, atol=1e-12)


def test_jvp_of_pytrees_and_composition(mode):
    def f(p, x):
        return np.tanh(p["w"] @ x + p["b"])
    p = {"w": np.arange(6.0).reshape(2, 3) / 10, "b": np.array([0.1, -0.2])}
    x = np.array([0.5, -1.0, 2.0])
    tp = {"w": np.ones((2, 3)), "b": np.zeros(2)}
    out, t = llgrad.jvp(f, (p, x), (tp, np.zeros(3)))
    fd = _fd_along(lambda w: f({"w": w, "b": p["b"]}, x), (p["w"],), (np.ones((2, 3)),))
    np.testing.assert_allclose(out, f(p, x), rtol=1e-12)
    np.testing.assert_allclose(t, fd, rtol=1e-6, atol=1e-8)

    @llgrad.differentiate
    def outer(x):  # jvp inside a compiled function: inlined into its IR
        return np.sum(llgrad.jvp(lambda a: np.sin(a) * a, (x,), (np.ones(3),))[1] ** 2)
    g = outer.grad(x)
    fd = np.array([_fd_along(outer, (x,), (e,)) for e in np.eye(3)])
    np.testing.assert_allclose(g, fd, rtol=1e-6, atol=1e-8)


def test_compiled_entries_are_kept_with_the_function():
    """hessian(f) twice traces once: the compiled entries are kept on f."""
    def f(x):
        return np.sum(np.sin(x) ** 2 * x)
    x = np.array([0.3, -0.2, 1.1])
    h1 = llgrad.hessian(f)(x)
    h2 = llgrad.hessian(f)(x)
    np.testing.assert_array_equal(h1, h2)
    g = f.__dict__["_lg_forward_cache"][(None, ("grad", 0))]
    entries = [d for d in g.__self__.__dict__["_lg_forward_cache"].values()
               if isinstance(d, llgrad.Differentiable)]
    assert [d.trace_count for d in entries] == [1]


def test_jvp_errors():
    with pytest.raises(llgrad.errors.ShapeError, match="tangent 0 does not have"):
        llgrad.jvp(lambda x: np.sin(x), (np.ones(3),), (np.ones(4),))
    with pytest.raises(TypeError, match="1 primals but 2 tangents"):
        llgrad.jvp(lambda x: np.sin(x), (np.ones(3),), (np.ones(3), np.ones(3)))
    with pytest.raises(TypeError, match="argnums must be an int or a tuple"):
        llgrad.jacfwd(lambda x: np.sin(x), argnums="x")
    with pytest.raises(llgrad.errors.DTypeError, match="has no derivative"):
        llgrad.jacfwd(lambda n: n * 2.0)(np.arange(3))
