"""In-place statements with numpy's semantics in compiled functions: augmented element
updates, repeated indices (the last write wins: Note [Repeated indices]), np.add.at
(accumulating), masked assignment; and writes into arguments, refused at their line because
a compiled function cannot change the caller's array (Note [Writes into arguments])."""
from __future__ import annotations

import re

import numpy as np
import pytest

import llgrad
from llgrad.runtime.errors import UnsupportedError
from tests.fd import numerical_vjp

X = np.array([0.3, -0.7, 1.2, 0.5])
V = np.array([1.0, -2.0, 0.5, 3.0])
IDX = np.array([0, 2, 0, 1])  # 0 repeats


def _check(fn, *args, wrt=(0,)):
    """Compiled value equals numpy's (on copies: the function may update its locals), the
    gradient equals central differences, and the trace is staged."""
    d = llgrad.differentiate(fn, wrt=wrt)
    value, grads = d.value_and_grad(*args)
    want = fn(*[np.copy(a) for a in args])
    assert value == pytest.approx(want, rel=1e-12)
    grads = grads if isinstance(grads, tuple) else (grads,)
    for g, fd in zip(grads, numerical_vjp(fn, [np.copy(a) for a in args], 1.0, list(wrt))):
        np.testing.assert_allclose(g, fd, rtol=1e-6, atol=1e-8)
    assert d.inspect(*args).stats["path"] == "staged"
    return grads


def slice_augassign(w):
    acc = np.zeros(5)
    acc[1:3] += w
    return np.sum(acc * np.arange(5.0))


def repeated_augassign(x, v):
    y = x.copy()
    y[IDX] += v  # numpy: y[0] = y[0] + v[2]; the update with v[0] is lost
    return np.sum(y * np.arange(1.0, 5.0))


def repeated_assign(x, v):
    y = x * 1.0
    y[[1, 1, 3]] = v[:3]
    return np.sum(y ** 2)


def repeated_traced_index(x, v, idx):
    y = x * 2.0
    y[idx] += v
    return np.sum(y ** 2)


def add_at(x, v):
    y = x * 1.0
    np.add.at(y, IDX, v)  # accumulates: y[0] gets v[0] + v[2]
    np.subtract.at(y, [3, 3], v[:2])
    return np.sum(y * np.arange(1.0, 5.0) ** 2)


def add_at_in_a_loop(v):
    hist = np.zeros(3)
    for i in range(4):
        np.add.at(hist, [i % 3, 0], v[i])  # a numpy local written in a staged loop body
    return np.sum(hist ** 2)


def masked(x):
    y = x.copy()
    m = np.array([True, False, True, False])
    y[m] = 7.0
    y[~m] = y[~m] * 3.0
    y[x > 0.4] = 0.0  # a traced mask with a scalar: np.where
    return np.sum(y ** 2)


def test_slice_augassign_of_a_numpy_local(mode):
    """Said "out= is not supported" (numpy wrote the traced w into acc's view in place)."""
    _check(slice_augassign, np.array([1.0, 2.0]))


def test_repeated_indices_last_write_wins(mode):
    _, gv = _check(repeated_augassign, X, V, wrt=(0, 1))
    assert gv[0] == 0.0 and gv[2] == 1.0  # the first write to y[0] has no effect
    _, gv = _check(repeated_assign, X, V, wrt=(0, 1))
    np.testing.assert_array_equal(gv, [0.0, 2 * V[1], 2 * V[2], 0.0])


def test_repeated_traced_indices(mode):
    _check(repeated_traced_index, X, V, IDX, wrt=(0, 1))


def test_repeated_indices_eager():
    t, tv = llgrad.tensor(X, requires_grad=True), llgrad.tensor(V, requires_grad=True)
    y = t * 1.0
    y[IDX] = y[IDX] + tv
    (y * llgrad.tensor(np.arange(1.0, 5.0))).sum().backward()
    gx, gv = numerical_vjp(repeated_augassign, [X, V], 1.0, [0, 1])
    np.testing.assert_allclose(t.grad.numpy(), gx, rtol=1e-6)
    np.testing.assert_allclose(tv.grad.numpy(), gv, rtol=1e-6, atol=1e-9)


def test_add_at_accumulates(mode):
    _, gv = _check(add_at, X, V, wrt=(0, 1))
    # v[0] and v[2] both reach y[0] (weight 1); v[0] is also subtracted at y[3] (weight 16)
    assert gv[2] == 1.0 and gv[0] == 1.0 - 16.0
    _check(add_at_in_a_loop, V)


def test_masked_assignment(mode):
    _check(masked, X)


def test_augassign_casting_follows_numpy():
    def f(w):
        acc = np.zeros(3, dtype=np.int64)
        acc[:2] += w
        return np.sum(acc) * 1.0
    with pytest.raises(TypeError, match="Cannot cast ufunc 'add' output from"):
        f(np.ones(2))
    with pytest.raises(TypeError, match="Cannot cast ufunc 'add' output from"):
        llgrad.differentiate(f)(np.ones(2))


# ---- writes into arguments ------------------------------------------------------------------
def writes_element(x):
    x[0] = 5.0
    return np.sum(x)


def augassigns(x):
    x += 1.0
    return np.sum(x)


def writes_a_slice(x):
    x[:2] *= 3.0
    return np.sum(x)


def writes_through_a_view(x):
    v = x[1:]
    v[0] = 2.0
    return np.sum(x)


def writes_in_a_loop(x):
    for i in range(3):
        x[i] = x[i] * 2.0
    return np.sum(x)


def _helper(y):
    y[1] = 0.0


def writes_in_a_helper(x):
    _helper(x)
    return np.sum(x)


def writes_an_add_at(x):
    np.add.at(x, [0, 0], 1.0)
    return np.sum(x)


@pytest.mark.parametrize("fn,what,fix", [
    (writes_element, r"update of the argument `x`", "x = x.copy()"),
    (augassigns, r"\+= of the argument `x`", "x = x.copy()"),
    (writes_a_slice, r"\*= of a view of the argument `x`", "x = x.copy()"),
    (writes_through_a_view, r"update of `v`, a view of the argument `x`", "v = v.copy()"),
    (writes_in_a_loop, r"update of the argument `x`", "x = x.copy()"),
    (writes_in_a_helper, r"update of `y`, which is the argument `x`", "y = y.copy()"),
    (writes_an_add_at, r"np.add.at of the argument `x`", "x = x.copy()")],
    ids=["element", "augassign", "slice", "view", "loop", "helper", "add.at"])
def test_writing_into_an_argument_is_an_error(fn, what, fix, mode):
    """Python would change the caller's array; the compiled function left it unchanged."""
    x = X.copy()
    with pytest.raises(UnsupportedError, match=rf"in-place {what}: Python would change the "
                       rf"caller's array(.|\n)*test_inplace_semantics.py:\d+(.|\n)*How to fix: "
                       rf"copy first: `{re.escape(fix)}`"):
        llgrad.differentiate(fn)(x)
    np.testing.assert_array_equal(x, X)


def copies_first(x, s):
    x = x.copy()
    x[0] = 5.0
    x += 1.0
    s += 1.0  # a Python float argument: rebinding, as in Python
    return np.sum(x) * s


def test_writes_after_a_copy_and_into_float_arguments(mode):
    d = llgrad.differentiate(copies_first)
    assert d(X, 2.0) == pytest.approx(copies_first(X.copy(), 2.0), rel=1e-12)
    np.testing.assert_allclose(d.grad(X, 2.0), [0.0, 3.0, 3.0, 3.0])


# ---- np.fill_diagonal as a statement ----------------------------------------------------------
def kernel_without_self_pairs(X, scale):
    K = np.exp(-np.sum((X[:, None] - X[None]) ** 2, axis=-1) / scale)
    np.fill_diagonal(K, 0.0)  # (t-SNE / kernel code: no self-similarity)
    P = np.ones((5, 3))
    np.fill_diagonal(P, X[:4, 0] * 2.0, wrap=True)  # a tall matrix's 4 positions, wrapped
    D = np.zeros((3, 3))
    np.fill_diagonal(D, scale)  # a numpy array, a traced value
    return np.sum(K ** 2) + np.sum(P * X[:, :3]) + np.sum(D @ K[:3, :3])


def test_fill_diagonal_statement_is_a_functional_update(mode):
    """np.fill_diagonal(K, 0.0) on a traced K was unsupported (numpy writes in place); the
    statement is rewritten to K[diagonal] = value, numpy's positions (wrap included)."""
    X = np.random.default_rng(3).standard_normal((5, 4))
    d = llgrad.differentiate(kernel_without_self_pairs, wrt=(0, 1))
    value, grads = d.value_and_grad(X, 1.5)
    assert value == pytest.approx(kernel_without_self_pairs(X, 1.5), rel=1e-13)
    fd = numerical_vjp(kernel_without_self_pairs, [X, 1.5], np.ones(()), [0, 1])
    for g, e in zip(grads, fd):
        np.testing.assert_allclose(g, e, rtol=1e-6, atol=1e-8)
    with pytest.raises(ValueError, match="All dimensions of input must be of equal length"):
        llgrad.differentiate(_fill_uneven)(np.ones((2, 3, 4)))


def _fill_uneven(x):
    y = x * 2.0
    np.fill_diagonal(y, 0.0)
    return np.sum(y)
