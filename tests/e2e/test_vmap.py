"""vmap through the public API (llgrad/batching.py, transform/vmap.py): `vmap(f)(xs)` equals
`np.stack([f(x) for x in xs])` on the control-flow corpus and the OpInfo table, native and
interpreted; in_axes/out_axes; composition with grad, jvp and itself; errors."""
from __future__ import annotations

import numpy as np
import pytest

import llgrad
from tests import cf_corpus

CASES = cf_corpus.CASES
B = 4


def _batch(make_args, n=B):
    """(the stacked array arguments, in_axes, the per-example argument tuples): examples
    from seeds 0..n-1; non-array arguments (ints, objects) fixed to seed 0's."""
    base = make_args(0)
    examples = []
    for s in range(n):
        args = make_args(s)
        examples.append(tuple(
            np.float64(a) if isinstance(a, float) else a if _mapped(b) else b
            for a, b in zip(args, base)))
    axes = tuple(0 if _mapped(a) else None for a in base)
    stacked = tuple(np.stack([e[k] for e in examples]) if ax == 0 else base[k]
                    for k, ax in enumerate(axes))
    return stacked, axes, examples


def _mapped(a) -> bool:
    return isinstance(a, (np.ndarray, float, np.floating))


def _per_example(f, examples):
    outs = [f(*[np.copy(a) if isinstance(a, np.ndarray) else a for a in e]) for e in examples]
    return np.stack([np.asarray(o) for o in outs])


@pytest.mark.parametrize("name", sorted(CASES))
def test_vmap_on_the_control_flow_corpus(name, mode):
    c = CASES[name]
    stacked, axes, examples = _batch(c.args)
    with np.errstate(all="ignore"):
        want = _per_example(c.fn, examples)
        got = llgrad.vmap(c.fn, in_axes=axes)(*stacked)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


# ---- in_axes and out_axes ------------------------------------------------------------------
def _affine(x, w, b):
    return np.tanh(w @ x + b)


def test_in_axes_int_none_and_tuple(mode, rng):
    xs, w, b = rng.normal(size=(5, 3)), rng.normal(size=(4, 3)), rng.normal(size=4)
    want = np.stack([_affine(x, w, b) for x in xs])
    np.testing.assert_allclose(llgrad.vmap(_affine, (0, None, None))(xs, w, b), want,
                               rtol=1e-12)
    # the mapped axis anywhere, negative included; several arguments mapped
    ws = rng.normal(size=(4, 3, 5))
    want = np.stack([_affine(xs[k], ws[:, :, k], b) for k in range(5)])
    np.testing.assert_allclose(llgrad.vmap(_affine, (0, -1, None))(xs, ws, b), want,
                               rtol=1e-12)
    # in_axes=1 for every argument: all mapped over their axis 1
    got = llgrad.vmap(lambda x, y: x * np.sum(y), in_axes=1)(xs.T, ws[0])
    np.testing.assert_allclose(got, np.stack([xs[k] * np.sum(ws[0][:, k]) for k in range(5)]),
                               rtol=1e-12)


def test_out_axes(mode, rng):
    xs = rng.normal(size=(5, 3))

    def f(x):
        return np.outer(x, x), np.sum(x)
    a, s = llgrad.vmap(f, out_axes=(2, 0))(xs)
    np.testing.assert_allclose(a, np.stack([np.outer(x, x) for x in xs], axis=2), rtol=1e-12)
    np.testing.assert_allclose(s, xs.sum(1), rtol=1e-12)
    # an output that does not depend on the mapped argument: None keeps it, 0 repeats it
    g = lambda x, w: (x * w, w * 2.0)  # noqa: E731
    w = rng.normal(size=3)
    y, w2 = llgrad.vmap(g, in_axes=(0, None), out_axes=(0, None))(xs, w)
    np.testing.assert_allclose(w2, w * 2.0)
    y, w2 = llgrad.vmap(g, in_axes=(0, None))(xs, w)
    np.testing.assert_allclose(w2, np.stack([w * 2.0] * 5))


# ---- composition ----------------------------------------------------------------------------
def _loss(w, x, y):
    h = np.tanh(x @ w[0])
    return np.sum((h @ w[1] - y) ** 2)


def test_vmap_of_grad_is_per_example_gradients(mode, rng):
    w = (rng.normal(size=(3, 4)), rng.normal(size=(4, 2)))
    xs, ys = rng.normal(size=(6, 3)), rng.normal(size=(6, 2))
    got = llgrad.vmap(llgrad.grad(_loss), in_axes=(None, 0, 0))(w, xs, ys)
    for k in range(6):
        want = llgrad.grad(_loss)(w, xs[k], ys[k])
        for g, v in zip(got, want):
            np.testing.assert_allclose(g[k], v, rtol=1e-10, atol=1e-12)


def test_grad_of_vmap_and_jvp_of_vmap(mode, rng):
    w = (rng.normal(size=(3, 4)), rng.normal(size=(4, 2)))
    xs, ys = rng.normal(size=(6, 3)), rng.normal(size=(6, 2))

    def total(w):
        return np.sum(llgrad.vmap(_loss, in_axes=(None, 0, 0))(w, xs, ys))
    got = llgrad.grad(total)(w)
    want = llgrad.grad(lambda w: sum(_loss(w, xs[k], ys[k]) for k in range(6)))(w)
    for g, v in zip(got, want):
        np.testing.assert_allclose(g, v, rtol=1e-10)
    t = rng.normal(size=(6, 3))
    _, tan = llgrad.jvp(llgrad.vmap(lambda x: np.sin(x) * np.sum(x)), (xs,), (t,))
    want = np.stack([llgrad.jvp(lambda x: np.sin(x) * np.sum(x), (xs[k],), (t[k],))[1]
                     for k in range(6)])
    np.testing.assert_allclose(tan, want, rtol=1e-12)


def test_vmap_of_jvp_and_of_hessian(mode, rng):
    f = lambda x: np.sin(x) * np.sum(x)  # noqa: E731
    xs, ts = rng.normal(size=(4, 3)), rng.normal(size=(4, 3))
    got = llgrad.vmap(lambda x, t: llgrad.jvp(f, (x,), (t,))[1])(xs, ts)
    want = np.stack([llgrad.jvp(f, (x,), (t,))[1] for x, t in zip(xs, ts)])
    np.testing.assert_allclose(got, want, rtol=1e-12)
    g = lambda x: np.sum(np.sin(x) ** 2)  # noqa: E731
    want = np.stack([np.diag(2 * np.cos(2 * x)) for x in xs])  # d2/dx2 sin^2 = 2 cos 2x
    np.testing.assert_allclose(llgrad.vmap(llgrad.hessian(g))(xs), want, rtol=1e-10,
                               atol=1e-12)


def test_vmap_of_vmap(mode, rng):
    xs = rng.normal(size=(4, 5, 3))
    f = lambda x: np.sum(np.sin(x)) * x  # noqa: E731
    got = llgrad.vmap(llgrad.vmap(f))(xs)
    np.testing.assert_allclose(got, np.stack([[f(x) for x in row] for row in xs]), rtol=1e-12)
    got = llgrad.vmap(llgrad.vmap(f), in_axes=1, out_axes=1)(xs)
    want = np.stack([[f(xs[i, j]) for i in range(4)] for j in range(5)], axis=1)
    np.testing.assert_allclose(got, want, rtol=1e-12)


def test_linear_algebra(mode, rng):
    a = rng.normal(size=(4, 3, 3)) + 4 * np.eye(3)
    b = rng.normal(size=(4, 3))
    f = lambda m, v: np.linalg.inv(m) @ np.linalg.solve(m, v) + np.linalg.slogdet(m)[1]  # noqa
    np.testing.assert_allclose(llgrad.vmap(f)(a, b), np.stack([f(m, v) for m, v in zip(a, b)]),
                               rtol=1e-10)


def test_the_rule_of_last_resort(mode, rng):
    """Ops without a vectorised rule (an index array after a slice, argmax of the flattened
    array) run per example in a staged loop; under a batched branch, only for the examples
    that take it."""
    def f(x, i):
        y = x[:, i] * 2.0
        if np.sum(x) > 0:
            y = y + np.argmax(x)
        return y
    xs = rng.normal(size=(5, 3, 4))
    idx = np.array([0, 3, 1, 2, 3])
    np.testing.assert_allclose(llgrad.vmap(f)(xs, idx),
                               np.stack([f(x, i) for x, i in zip(xs, idx)]), rtol=1e-12)


# ---- per-example control flow ----------------------------------------------------------------
def _guarded(x):
    if np.sum(x) > 0:
        s = np.sum(x)
        while s < 100.0:
            s = s * 2.0
    else:
        s = np.float64(-1.0)
        assert np.sum(x) <= 0, "reached only by examples with a non-positive sum"
    return s


def test_masks_keep_examples_to_their_own_path(mode):
    """A batched predicate runs both branches: the loop runs for each example only as long
    as its own, and the assert only fails for examples that take its branch."""
    xs = np.array([[1.0, 2.0], [-1.0, -2.0], [0.001, 0.0]])
    np.testing.assert_allclose(llgrad.vmap(_guarded)(xs), [_guarded(x) for x in xs])


def test_a_failing_check_in_one_example_raises(mode):
    def f(x):
        if np.sum(x) > 0:
            assert np.max(x) < 5.0, "too large"
        return x * 2
    np.testing.assert_allclose(llgrad.vmap(f)(np.array([[1.0], [-9.0]])), [[2.0], [-18.0]])
    with pytest.raises(AssertionError, match="too large"):
        llgrad.vmap(f)(np.array([[1.0], [9.0]]))


# ---- errors -----------------------------------------------------------------------------------
def test_errors():
    x = np.ones((3, 2))
    with pytest.raises(ValueError, match="maps no array argument"):
        llgrad.vmap(lambda x: x, in_axes=None)(x)
    with pytest.raises(llgrad.errors.ShapeError, match="different sizes"):
        llgrad.vmap(lambda x, y: x + y)(x, np.ones((4, 2)))
    with pytest.raises(llgrad.errors.ShapeError, match="out of range"):
        llgrad.vmap(lambda x: x, in_axes=2)(x)
    with pytest.raises(ValueError, match="out_axes is None"):
        llgrad.vmap(lambda x: x, out_axes=None)(x)
    with pytest.raises(TypeError, match="in_axes must be"):
        llgrad.vmap(lambda x: x, in_axes="0")
    with pytest.raises(ValueError, match="1 entries for 2 arguments"):
        llgrad.vmap(lambda x, y: x + y, in_axes=(0,))(x, x)


@pytest.mark.parametrize("name", sorted(CASES))
def test_vmap_of_grad_on_the_control_flow_corpus(name, monkeypatch):
    """Per-example gradients (through the interpreter; native on a few cases above), tapes
    of staged loops batched, ragged where trip counts or branches differ across the batch
    (Note [Ragged tapes])."""
    monkeypatch.setenv("LLGRAD_DISABLE_JIT", "1")
    c = CASES[name]
    stacked, axes, examples = _batch(c.args)
    g = llgrad.grad(c.fn, c.wrt)
    with np.errstate(all="ignore"):
        want = [g(*e) for e in examples]
        got = llgrad.vmap(g, in_axes=axes)(*stacked)
    got = got if isinstance(c.wrt, tuple) else (got,)
    want = [w if isinstance(c.wrt, tuple) else (w,) for w in want]
    for k, gk in enumerate(got):
        np.testing.assert_allclose(gk, np.stack([w[k] for w in want]), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("name", ["recurrence", "for_rows_cond", "horner_reverse",
                                  "triangular_sin", "for_rows_vector_carry"])
def test_vmap_of_grad_through_staged_loops_native(name):
    """The batched tapes of the reverse sweep, compiled (Note [Batched tapes])."""
    c = CASES[name]
    stacked, axes, examples = _batch(c.args)
    g = llgrad.grad(c.fn, c.wrt)
    got = llgrad.vmap(g, in_axes=axes)(*stacked)
    got = got[0] if isinstance(c.wrt, tuple) else got
    want = [g(*e) for e in examples]
    want = np.stack([w[0] if isinstance(c.wrt, tuple) else w for w in want])
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)


def test_vmap_of_grad_with_per_example_trip_counts():
    """Without tapes (a linear body) the reverse sweep's trip counts are masked like the
    forward's; with tapes, ragged ones (tests/e2e/test_vmap_ragged.py)."""
    def lin(x):
        s = np.sum(x)
        while s < 10.0:
            s = s * 1.5 + 1.0
        return s
    xs = np.array([[1.0, 2.0], [0.1, 0.2]])
    np.testing.assert_allclose(llgrad.vmap(llgrad.grad(lin))(xs),
                               np.stack([llgrad.grad(lin)(x) for x in xs]), rtol=1e-12)


def test_custom_vjp_rules_are_batched(mode):
    """grad of vmap keeps a custom rule that is not the derivative of the forward."""
    @llgrad.custom_vjp
    def clip_gradient(x):
        return x
    clip_gradient.defvjp(lambda x: (x, None), lambda _, g: (np.clip(g, -1.0, 1.0),))
    xs = np.array([[0.05, -0.4], [1.0, 0.1]])
    per = llgrad.vmap(lambda x: np.sum(clip_gradient(x) ** 2 * 3.0))
    np.testing.assert_allclose(per(xs), 3.0 * np.sum(xs ** 2, axis=1))
    np.testing.assert_allclose(llgrad.grad(lambda x: np.sum(per(x)))(xs),
                               np.clip(6.0 * xs, -1.0, 1.0))


# ---- batched Jacobians -------------------------------------------------------------------------
def test_jacobians_are_one_batched_sweep(monkeypatch, rng):
    """jacfwd/jacrev batch the basis (no staged loop over it); `jacobian` takes the mode
    with fewer basis vectors; all equal the per-row Jacobian."""
    from llgrad import forward
    calls = []
    orig = forward._batched_sweep
    monkeypatch.setattr(forward, "_batched_sweep",
                        lambda fn, *a: calls.append(fn.name) or orig(fn, *a))
    w = rng.normal(size=(5, 2))

    def f(x):
        h = x
        for _ in range(3):
            h = np.tanh(h) * 1.5
        return w @ h
    x = rng.normal(size=2)
    want = llgrad.jacobian(llgrad.Differentiable(f))(x)  # the per-row loop
    for jac in (llgrad.jacfwd(f), llgrad.jacrev(f), llgrad.jacobian(f)):
        np.testing.assert_allclose(jac(x), want, rtol=1e-12, atol=1e-14)
    assert len(calls) == 3 and calls[2].endswith("_jvp")  # 2 inputs < 5 outputs: forward
    g = lambda x: w.T @ np.sin(x)  # noqa: E731  5 inputs > 2 outputs: reverse
    np.testing.assert_allclose(llgrad.jacobian(g)(np.ones(5)),
                               w.T * np.cos(np.ones(5)), rtol=1e-12)
    assert not calls[3].endswith("_jvp")


def test_jacrev_through_a_while_loop_is_batched_over_the_basis(rng):
    """The batch is the cotangent: the loop's trip count, from the primal values, is the
    same for every basis vector (Note [Batched Jacobians]); against the chain rule."""
    def f(x):
        s = x
        k = 0
        while k < 3:
            s = np.sin(s) * x
            k += 1
        return s
    x = rng.uniform(0.5, 1.0, 3)
    d = lambda v: np.diag(v)  # noqa: E731
    s1 = np.sin(x) * x
    s2 = np.sin(s1) * x
    ds1 = d(np.cos(x) * x + np.sin(x))
    ds2 = d(np.cos(s1) * x) @ ds1 + d(np.sin(s1))
    ds3 = d(np.cos(s2) * x) @ ds2 + d(np.sin(s2))
    np.testing.assert_allclose(llgrad.jacrev(f)(x), ds3, rtol=1e-12)


def test_vmap_of_grad_with_per_example_branches_in_a_loop(mode):
    """Branches taken per example inside a staged loop: their tapes are pushed outside the
    branches, so both run and select."""
    def f(x):
        s = 1.0
        for i in range(3):
            if x[i] > 0:
                s = s * np.sin(x[i]) * 2
            else:
                s = s + np.cos(s) * x[i]
        return s
    xs = np.array([[1.0, -1.0, 2.0], [-1.0, 2.0, -3.0]])
    np.testing.assert_allclose(llgrad.vmap(llgrad.grad(f))(xs),
                               np.stack([llgrad.grad(f)(x) for x in xs]), rtol=1e-12)
