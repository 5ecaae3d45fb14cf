"""Boolean masks computed from traced values (runtime/padded_masks.py, Note [Boolean masks of
data-dependent length]): numpy's mask idioms compile once, staged, with values equal to plain
Python and gradients equal to finite differences, natively and in the interpreter; uses that
need the real length take the dynamic path as before, with a warning naming the line."""
from __future__ import annotations

import inspect
import warnings

import numpy as np
import pytest

import llgrad
from llgrad.runtime.errors import DynamicPathWarning, IndexingError
from tests.e2e.conftest import finite_differences
from tests.fd import FD_TOL


# ---- reads: x[mask] is a value of run-time length --------------------------------------------
def relu_sq(x):
    return np.sum(x[x > 0] ** 2)


def masked_mse(x, y):
    m = ~np.isnan(y)
    return np.mean((x[m] - y[m]) ** 2)


def hinge(w, X, y):
    margins = 1 - y * (X @ w)
    return np.sum(margins[margins > 0]) / len(y)


def reductions(x):
    pos, small = x[x > 0], x[np.abs(x) < 1.0]
    return (pos.sum() * pos.mean() + np.max(small) - np.min(pos ** 3) + np.linalg.norm(pos)
            + np.prod(np.cos(small)) + np.std(pos) + small.var(ddof=1)
            + np.sum(x ** 2, where=x > 0) + np.mean(x, where=x < 1)  # (no selection)
            + np.sum(np.where(x > 0, x, 0.1 * x)))


def rows_and_columns(w, X):
    rows_ok = X[:, 0] > -0.5
    cols = w > 0
    return (np.mean((X[rows_ok] @ w - 1.0) ** 2) + np.sum(X[:, cols] ** 2)
            + np.sum(X[rows_ok, 1:] * 0.5) + np.dot(X[rows_ok, 0], X[rows_ok, 2]))


def two_dimensional_mask(X, w):
    return np.sum(np.sin(X[X > 0.1])) + np.sum(X[X < 0.5] ** 2) * np.sum(w[w > 0])


def same_mask(x, y):
    m = x > y
    return x[m] @ y[m] + np.dot(x[m], np.exp(y[m])) + np.sum(np.outer(x[m], y[m]))


def integer_weights(x, k):
    m = k % 3 != 0
    return np.sum(x[m] * k[m])


def rows_in_a_staged_loop(X):
    s = 0.0
    for i in range(X.shape[0]):
        r = X[i]
        s = s + np.sum(r[r > 0] ** 2) + np.mean(X[i, X[i] < 0.5])
    return s


# ---- writes through a mask ------------------------------------------------------------------
def writes(x, v):
    x = x.copy()
    x[x < 0] = 0
    x[x > 1] *= 2
    x[x > 0.5] += x[x > 0.5] * v[x > 0.5]
    return np.sum(x ** 2)


def row_writes(X, w):
    X = X * 1.0
    rows = X[:, 0] > 0
    X[rows] = X[rows] * w
    X[X[:, 1] < 0] = w
    X[:, w > 0] -= 1.0
    return np.sum(X ** 3)


def add_at_through_masks(x, v):
    y = x * 1.0
    np.add.at(y, y > 0, y[y > 0] * v[x > 0])
    np.subtract.at(y, x < 0, 1.0)
    return np.sum(y ** 2)


def writes_every_selected(x, v):
    y = np.zeros(x.shape[0])
    y[x > 0] = v  # v has one entry per positive x, as numpy requires
    return np.sum(y * x)


def _cases():
    rng = np.random.default_rng(7)
    x, y = rng.standard_normal(9), rng.standard_normal(9)
    X, w = rng.standard_normal((6, 4)), rng.standard_normal(4)
    y_nan = y.copy()
    y_nan[[2, 5]] = np.nan
    return [
        (relu_sq, (x,), (0,)),
        (masked_mse, (x, y_nan), (0,)),
        (hinge, (w, X, np.sign(rng.standard_normal(6))), (0, 1)),
        (reductions, (1.5 * x,), (0,)),
        (rows_and_columns, (w, X), (0, 1)),
        (two_dimensional_mask, (X, w), (0, 1)),
        (same_mask, (x, y), (0, 1)),
        (integer_weights, (x, np.arange(9)), (0,)),
        (rows_in_a_staged_loop, (X,), (0,)),
        (writes, (2 * x, y), (0, 1)),
        (row_writes, (X, w), (0, 1)),
        (add_at_through_masks, (x, y), (0, 1)),
        (writes_every_selected, (x, np.arange(1.0, 1 + np.sum(x > 0))), (0, 1)),
    ]


CASES = _cases()


@pytest.mark.parametrize("fn, args, wrt", CASES, ids=[c[0].__name__ for c in CASES])
def test_values_and_gradients(fn, args, wrt, mode):
    f = llgrad.differentiate(fn, wrt=wrt)
    with warnings.catch_warnings():
        warnings.simplefilter("error", llgrad.PerformanceWarning)  # staged: no dynamic path
        value, grads = f.value_and_grad(*args)
    ins = f.inspect(*args)
    assert ins.path == "staged"
    np.testing.assert_allclose(value, fn(*args), rtol=1e-10, atol=1e-12)
    grads = grads if isinstance(grads, tuple) else (grads,)
    for g, fd in zip(grads, finite_differences(fn, args, wrt)):
        np.testing.assert_allclose(g, fd, rtol=FD_TOL[0] * 10, atol=1e-7)


def test_one_compile_serves_every_mask():
    """The selection's length is a run-time value: new data, same compiled code."""
    f = llgrad.differentiate(hinge)
    rng = np.random.default_rng(0)
    X, y = rng.standard_normal((20, 3)), np.sign(rng.standard_normal(20))
    ops = set()
    for scale in (0.01, 1.0, 100.0):  # from every margin positive to about half
        w = scale * rng.standard_normal(3)
        np.testing.assert_allclose(f(w, X, y), hinge(w, X, y), rtol=1e-12)
        ins = f.inspect(w, X, y)
        ops.add(ins.stats["ops (traced)"])
        assert ins.path == "staged" and "scatter_add" in ins.forward_ir
    assert len(ops) == 1


def test_vmap_and_second_derivatives(mode):
    """Batched (one mask per example) and differentiated twice."""
    rng = np.random.default_rng(1)
    X = rng.standard_normal((4, 6))
    g = llgrad.grad(reductions)
    np.testing.assert_allclose(llgrad.vmap(relu_sq)(X), [relu_sq(r) for r in X], rtol=1e-12)
    np.testing.assert_allclose(llgrad.vmap(g)(X), np.stack([g(r) for r in X]), rtol=1e-12)
    H = llgrad.hessian(writes, argnums=0)(X[0] * 2, X[1])
    gw = llgrad.grad(writes)
    fd = np.stack([finite_differences(lambda x: gw(x, X[1]) @ e, (X[0] * 2,), (0,))[0]
                   for e in np.eye(6)])
    np.testing.assert_allclose(H, fd, rtol=1e-6, atol=1e-6)


def test_empty_selections_behave_as_numpy(mode):
    x = np.arange(-3.0, 0.0)
    f = llgrad.differentiate(lambda x: np.sum(x[x > 0] ** 2) + np.sum(x))
    assert f(x) == -6.0
    np.testing.assert_array_equal(f.grad(x), np.ones(3))
    with pytest.raises(ValueError, match="zero-size array to reduction operation maximum"):
        llgrad.differentiate(lambda x: np.max(x[x > 0]))(x)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # numpy's and the interpreter's 0/0
        assert np.isnan(llgrad.differentiate(lambda x: np.mean(x[x > 0]))(x))


# ---- numpy's errors -------------------------------------------------------------------------
def mask_of_another_length(x):
    return np.sum(x[x[:3] > 0])


def writes_too_few(x):
    x = x * 1.0
    x[x > 0] = np.ones(2)
    return np.sum(x)


def test_a_mask_of_the_wrong_shape_raises_as_numpy_at_the_line():
    x = np.arange(-2.0, 3.0)
    with pytest.raises(IndexError, match="boolean index did not match indexed array along "
                                         "axis 0; size of axis is 5 but size of corresponding "
                                         "boolean axis is 3"):
        mask_of_another_length(x)
    with pytest.raises(IndexingError, match="boolean index did not match") as info:
        llgrad.differentiate(mask_of_another_length)(x)
    assert f"test_masks.py:{_line_of(mask_of_another_length, 'x[x[:3]')}" in str(info.value)


def writes_nothing(x):
    x = x * 1.0
    x[x > 2] = np.zeros(0)
    return np.sum(x)


def test_writing_a_wrong_count_raises_at_run_time(mode):
    f = llgrad.differentiate(writes_too_few)
    assert f(np.array([-1.0, 2.0, 3.0])) == writes_too_few(np.array([-1.0, 2.0, 3.0]))
    x = np.arange(-1.0, 3.0)  # two positive entries: fine; three: numpy's ValueError
    with pytest.raises(ValueError, match="cannot assign 2 input values"):
        writes_too_few(x + 0.5)
    with pytest.raises(ValueError, match="cannot assign 2 input values"):
        f(x + 0.5)
    g = llgrad.differentiate(writes_nothing)
    assert g(x) == writes_nothing(x) == 2.0
    with pytest.raises(ValueError, match="cannot assign 0 input values"):
        writes_nothing(x + 0.5)
    with pytest.raises(ValueError, match="cannot assign 0 input values"):
        g(x + 0.5)


def different_masks(x):
    return np.sum(x[x > 0] * x[x < 1])


def test_selections_of_different_lengths_raise_at_run_time(mode):
    f = llgrad.differentiate(different_masks)
    x = np.array([-1.0, 0.5, 2.0])  # two entries in each selection; then three and two
    assert f(x) == different_masks(x)
    x = np.array([0.25, 0.5, 2.0])
    with pytest.raises(ValueError, match="operands could not be broadcast"):
        different_masks(x)
    with pytest.raises(ValueError, match="lengths of values selected by boolean masks differ"):
        f(x)


# ---- uses that need the real length: the dynamic path, as before -------------------------------
def uses_len(x):
    pos = x[x > 0]
    return np.sum(pos) / len(pos)


def uses_shape(x):
    pos = x[x > 0]
    return np.sum(pos) / pos.shape[0]


def unsupported_function(x):
    return np.sum(np.cumsum(x[x > 0]))


def merges_a_selection(x):
    v = x[x > 0]
    if np.sum(x) > 0:
        v = v * 2.0
    return np.sum(v)


@pytest.mark.parametrize("fn, line, reason", [
    (uses_len, "len(pos)", r"len\(\) needs the shape of a value selected by a boolean mask"),
    (uses_shape, "pos.shape[0]", r"`\.shape` needs the shape of a value selected by"),
    (unsupported_function, "np.cumsum", r"np\.cumsum is not supported on a value selected"),
    (merges_a_selection, "if np.sum(x)", r"merging variable `v` over the paths of a traced"),
], ids=lambda c: c.__name__ if callable(c) else None)
def test_uses_needing_the_length_take_the_dynamic_path(fn, line, reason):
    x = np.array([0.5, -1.0, 2.0, 3.0])
    f = llgrad.differentiate(fn)
    with pytest.warns(DynamicPathWarning, match=reason) as caught:
        value, grad = f.value_and_grad(x)
    message = str(caught[0].message)
    assert f"test_masks.py:{_line_of(fn, line)}" in message and "np.count_nonzero" in message
    assert f.inspect(x).path.startswith("dynamic")
    np.testing.assert_allclose(value, fn(x), rtol=1e-12)
    np.testing.assert_allclose(grad, finite_differences(fn, (x,), (0,))[0], rtol=1e-6)


def _line_of(fn, text):
    lines, first = inspect.getsourcelines(fn)
    return first + next(k for k, source in enumerate(lines) if text in source)
