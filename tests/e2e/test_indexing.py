"""Indexing with 0-d booleans (`x[True]`, `x[np.array(False)]`) as numpy does: a new axis of
length 1 or 0 at the entry's place (Note [0-d boolean indices] in runtime/ops/index.py), in
reads, writes and gradients; compiled (native and interpreted) and eager."""
from __future__ import annotations

import numpy as np
import pytest

import llgrad
from tests.e2e.conftest import finite_differences

X = np.arange(1.0, 7.0).reshape(2, 3) / 7.0
KEYS = [(True,), (False,), (np.array(True),), (np.array(False),), (np.bool_(True),),
        (slice(None), True), (Ellipsis, True), (True, [0, 1]), ([0, 1], True), (0, True),
        (True, 0), (True, slice(None), [0, 2]), (None, True), (True, True),
        (np.array(True), Ellipsis, 1)]


@pytest.mark.parametrize("key", KEYS, ids=repr)
def test_zero_d_boolean_index_reads_as_numpy(key, mode):
    def f(x):
        return np.sum(x[key] ** 2) + x[key].shape[0]
    value, grad = llgrad.differentiate(f).value_and_grad(X)
    np.testing.assert_allclose(value, f(X), rtol=1e-14)
    np.testing.assert_allclose(grad, finite_differences(f, [X], (0,))[0], atol=1e-8)
    assert llgrad.differentiate(lambda x: x[key] * 1.0)(X).shape == X[key].shape
    t = llgrad.tensor(X, requires_grad=True)
    out = f(t)
    out.backward()
    np.testing.assert_allclose(t.grad.numpy(), grad)


@pytest.mark.parametrize("key", [(True,), (False,), (0, np.array(True)), (Ellipsis, True, 2)],
                         ids=repr)
def test_zero_d_boolean_index_writes_as_numpy(key, mode):
    def f(x, a):
        y = x * 1.0
        y[key] = a * 3.0
        return np.sum(y * x)
    value, grads = llgrad.differentiate(f, wrt=(0, 1)).value_and_grad(X, 0.5)
    np.testing.assert_allclose(value, f(X, 0.5), rtol=1e-14)
    for g, fd in zip(grads, finite_differences(f, [X, 0.5], (0, 1))):
        np.testing.assert_allclose(g, fd, atol=1e-8)


def test_issue_example_sum_of_x_masked_by_0d_true(mode):
    m = np.array(True)
    x = np.array([1.0, 2.0, 3.0])
    assert llgrad.differentiate(lambda x: np.sum(x[m]))(x) == np.sum(x[m]) == 6.0
