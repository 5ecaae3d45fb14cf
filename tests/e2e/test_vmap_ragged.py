"""vmap of gradients through staged loops whose trip count, or a branch taken in or around
them, differs across the batch: ragged tapes (transform/vmap_control.py, Note [Ragged
tapes]). Each against a Python loop of llgrad.grad and finite differences, native and
interpreted."""
from __future__ import annotations

import re

import numpy as np
import pytest

import llgrad
from llgrad.runtime.ops.control import Tape
from tests.fd import FD_TOL, numerical_vjp


def _check(f, xs, *rest, in_axes=0):
    """vmap(grad(f)) over the rows of xs (rest: per-example Python values or batched arrays)
    equals a Python loop of grad(f) and central differences of f."""
    g = llgrad.grad(f)
    got = llgrad.vmap(g, in_axes=in_axes)(xs, *rest)
    per = [tuple(r[e] if isinstance(r, np.ndarray) else r for r in rest)
           for e in range(len(xs))]
    want = np.stack([g(x, *[int(a) if isinstance(a, np.integer) else a for a in p])
                     for x, p in zip(xs, per)])
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-14)
    for x, p in zip(xs, per):
        p = [int(a) if isinstance(a, np.integer) else a for a in p]
        fd = numerical_vjp(lambda x: f(x, *p), [x], np.float64(1.0), [0])[0]
        np.testing.assert_allclose(g(x, *p), fd, rtol=FD_TOL[0], atol=FD_TOL[1])


def _while_sin(x):
    s = np.sum(x)
    while s < 10.0:
        s = np.sin(s) + s * 1.5 + 1.0
    return s


def test_while_loop_whose_trip_count_differs(mode):
    _check(_while_sin, np.array([[1.0, 2.0], [0.1, 0.2], [3.0, 4.0], [6.0, 5.0]]))


def _for_bound(x, n):
    s = 0.0
    for i in range(n):
        s = s + np.sin(s + x[i]) * x[i]
    return s


def test_for_loop_with_batched_bounds(mode, rng):
    """Trip counts 0..6 (one example runs no iteration)."""
    _check(_for_bound, rng.normal(size=(4, 6)), np.array([0, 3, 6, 2]))


def _nested_while(x):
    s, k = x[0], 0
    while s < 5.0:
        t = s
        while t < 2.0 * s + 1.0:
            t = t + np.exp(0.1 * t) * x[1]
        s = s + t * 0.3 + x[1]
        k += 1
    return s


def test_nested_while_loops(mode):
    """An inner loop's tapes grow across the outer loop's iterations (Note [Stacked inner
    tapes]) with a row count per example, and so do its integer counter tapes."""
    _check(_nested_while, np.array([[0.5, 0.7], [1.0, 0.3], [4.5, 1.1], [6.0, 0.2]]))


def _loop_in_branch(x):
    s = 1.0
    for i in range(3):
        if x[i] > 0:
            s = s * np.sin(x[i])
        else:
            y = s
            for j in range(2):
                y = np.cos(y) * x[j]
            s = s + y
    return s


def test_loop_in_a_branch_inside_a_loop(mode):
    """The branch's inner loop pushes rows for the examples that take it only."""
    _check(_loop_in_branch, np.array([[1.0, -1.0, 2.0], [-1.0, 2.0, -3.0],
                                      [0.5, 0.3, -0.2]]))


def _branch_around_loop(x):
    if x[0] > 0:
        s = x[1]
        while s < 3.0:
            s = s * 1.3 + np.tanh(s) * x[0]
    else:
        s = np.cos(x[1])
        for i in range(3):
            s = np.sin(s) * x[0]
    return s


def test_branch_around_loops(mode):
    _check(_branch_around_loop, np.array([[0.5, 0.2], [-0.5, 0.4], [1.5, 2.9], [-1.0, 0.1]]))


def _while_in_for(x, n):
    s = x[0]
    for i in range(n):
        while s < 2.0 * (i + 1):
            s = s + np.exp(-s) * x[1] + 0.5
    return s


def test_while_loop_in_a_for_loop_with_batched_bounds(mode):
    _check(_while_in_for, np.array([[0.1, 1.0], [0.5, 2.0], [3.0, 0.5]]), np.array([2, 0, 3]))


def test_uniform_batches_keep_plain_tapes(rng):
    """jacrev's batch is the cotangent: trip counts are the same for all, no tape is ragged
    (Note [Batched Jacobians])."""
    from llgrad.forward import _jacobian_entry
    x = rng.uniform(0.5, 1.0, 3)

    def f(x):
        s = x
        while np.sum(s) < 20.0:
            s = np.sin(s) + 2.0 * s
        return s
    jac = llgrad.Differentiable(_jacobian_entry(f, (0,), True, "jacrev"))
    ir = str(jac.inspect(x).forward_ir)
    assert "tape_new {" in ir and not re.search(r"tape_new \{[^}]*ragged", ir)
    d = jac(x)
    eps = 1e-6
    fd = np.stack([(f(x + eps * e) - f(x - eps * e)) / (2 * eps) for e in np.eye(3)], axis=1)
    np.testing.assert_allclose(d, fd, rtol=1e-6, atol=1e-8)


def test_ragged_tape_reads_each_examples_own_rows():
    """The interpreter's ragged tape (the reference of the native one): masked pushes,
    per-example reads, zero where an example holds no such row."""
    t = Tape((3, 2), np.float64, None, ragged=True)
    t.push(np.arange(6.0).reshape(3, 2), np.array([True, False, True]))
    t.push(np.arange(6.0, 12.0).reshape(3, 2), np.array([False, True, True]))
    np.testing.assert_array_equal(t.counts, [1, 1, 2])
    np.testing.assert_array_equal(t.get(np.array([0, 0, 1])), [[0, 1], [8, 9], [10, 11]])
    np.testing.assert_array_equal(t.get(1), [[0, 0], [0, 0], [10, 11]])
    np.testing.assert_array_equal(t.get(np.array([-1, 2, 0])), [[0, 0], [0, 0], [4, 5]])
    t2 = Tape((2, 2), np.float64, 4, ragged=2)  # two column dims (vmap of vmap)
    t2.push(np.array([[1.0, 2.0], [3.0, 4.0]]), np.array([[True, False], [False, True]]))
    t2.push(np.array([[5.0, 6.0], [7.0, 8.0]]))
    np.testing.assert_array_equal(t2.counts, [[2, 1], [1, 2]])
    np.testing.assert_array_equal(t2.get(np.array([[1, 0], [0, 1]])), [[5, 6], [7, 8]])
    np.testing.assert_array_equal(t2.get(1), [[5, 0], [0, 8]])


@pytest.mark.parametrize("f", [_while_sin, _nested_while, _loop_in_branch])
def test_vmap_of_vmapped_gradients(f, mode):
    """The outer vmap batches tapes that are ragged already: a row count per example of both
    batches, the inner masks and the outer ones combined."""
    xs = np.array([[[1.0, 0.6, -0.3], [0.1, 0.2, 0.4], [4.8, 0.9, -1.0]],
                   [[-0.5, 0.7, 0.2], [6.0, 0.1, 0.3], [0.3, 0.3, 0.3]]])
    g = llgrad.grad(f)
    got = llgrad.vmap(llgrad.vmap(g))(xs)
    np.testing.assert_allclose(got, np.array([[g(x) for x in row] for row in xs]),
                               rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("f", [_while_sin, _nested_while])
def test_jvp_of_vmapped_gradients(f):
    """Forward mode over the batched reverse sweep: tangent tapes are pushed under the same
    masks (the Hessian diagonal per example, against a loop of llgrad.hessian)."""
    xs = np.array([[1.0, 0.6], [0.1, 0.2], [4.8, 0.9]])
    per = llgrad.vmap(llgrad.grad(f))
    v = np.ones_like(xs)
    _, got = llgrad.jvp(per, (xs,), (v,))
    want = np.stack([llgrad.hessian(f)(x) @ np.ones(2) for x in xs])
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)
