"""max/min/argmax/argmin on empty axes and on NaN, compiled and eager.

numpy raises for an extremum over an axis of length 0 (there is no identity); compiled code
would return -inf, so the shape rule raises numpy's error while tracing, at the user's line.
A NaN propagates through max/min (numpy's value) and the gradient goes to the NaN elements,
shared evenly among them (PyTorch's max()), instead of NaN everywhere.
"""
from __future__ import annotations

import numpy as np
import pytest

import llgrad
from llgrad.runtime.errors import ShapeError
from tests.fd import numerical_vjp


def max_all(x):
    return np.max(x)


def min_all(x):
    return np.min(x)


def amax_method(x):
    return x.max()


def max_rows(x):
    return np.sum(np.max(x.reshape(2, -1), axis=1))


def min_cols_keepdims(x):
    return np.sum(np.min(x.reshape(2, -1), axis=0, keepdims=True) * np.array([1.0, 2.0]))


def argmax_all(x):
    return np.argmax(x) * 1.0


def argmin_rows(x):
    return np.sum(np.argmin(x.reshape(2, -1), axis=1)) * 1.0


def _line(fn) -> int:
    return fn.__code__.co_firstlineno + 1  # the return line


# ---- empty axes ----------------------------------------------------------------------------
EMPTY = [(max_all, np.zeros(0), "zero-size array to reduction operation maximum which has "
          "no identity"),
         (min_all, np.zeros(0), "zero-size array to reduction operation minimum which has "
          "no identity"),
         (amax_method, np.zeros((2, 0)), "zero-size array to reduction operation maximum"),
         (max_rows, np.zeros(0), "zero-size array to reduction operation maximum"),
         (argmax_all, np.zeros(0), "attempt to get argmax of an empty sequence"),
         (argmin_rows, np.zeros(0), "attempt to get argmin of an empty sequence")]


@pytest.mark.parametrize("fn,x,what", EMPTY, ids=[fn.__name__ for fn, _, _ in EMPTY])
def test_extremum_over_empty_axis_raises_as_numpy(fn, x, what, mode):
    with pytest.raises(ValueError, match=what):
        fn(x)  # numpy's error, which the compiled function must give as well
    with pytest.raises(ShapeError, match=what) as e:
        llgrad.differentiate(fn)(x)
    assert (e.value.loc.file, e.value.loc.line) == (__file__, _line(fn))
    assert isinstance(e.value, ValueError) and "How to fix" in str(e.value)
    with pytest.raises(ShapeError, match=what):
        fn(llgrad.tensor(x))  # eager: raises too (PyTorch raises for an empty reduction)


def max_over_kept_empty(x):
    return np.max(x.reshape(0, 3), axis=1)


def test_empty_output_over_non_empty_axis_is_fine(mode):
    x = np.zeros(0)
    np.testing.assert_array_equal(llgrad.differentiate(max_over_kept_empty)(x),
                                  max_over_kept_empty(x))


def logsumexp_empty(x):
    return llgrad.logsumexp(x, 0)


def test_logsumexp_of_empty_is_minus_infinity(mode):
    value = llgrad.differentiate(logsumexp_empty)(np.zeros(0))
    assert value == -np.inf == float(llgrad.logsumexp(llgrad.tensor(np.zeros(0)), 0))


# ---- NaN -----------------------------------------------------------------------------------
def _nan_rule(fn, x):
    """The expected gradient, written independently: per reduced slice, 1/count on the NaN
    elements if the slice holds one, else on the elements equal to the extremum."""
    if fn in (max_all, min_all, amax_method):
        slices, weights = [np.arange(x.size)], [1.0]
    elif fn is max_rows:
        half = x.size // 2
        slices, weights = [np.arange(half), np.arange(half, x.size)], [1.0, 1.0]
    else:  # min_cols_keepdims: columns of the (2, n/2) view, weighted 1 and 2
        half = x.size // 2
        slices, weights = [np.array([0, half]), np.array([1, half + 1])], [1.0, 2.0]
    g = np.zeros_like(x)
    pick = np.max if fn in (max_all, amax_method, max_rows) else np.min
    for idx, w in zip(slices, weights):
        part = x[idx]
        hit = np.isnan(part) if np.isnan(part).any() else part == pick(part)
        g[idx[hit]] = w / hit.sum()
    return g


@pytest.mark.parametrize("fn", [max_all, min_all, amax_method, max_rows, min_cols_keepdims],
                         ids=lambda f: f.__name__)
@pytest.mark.parametrize("x", [np.array([1.0, np.nan, 3.0, np.nan]),
                               np.array([np.nan, 2.0, 3.0, 3.0]),
                               np.array([3.0, -1.0, 3.0, 0.5])], ids=["two-nans", "nan", "ties"])
def test_nan_propagates_and_its_positions_get_the_gradient(fn, x, mode):
    with np.errstate(invalid="ignore"):
        expected_value = fn(x)
    d = llgrad.differentiate(fn)
    value, grad = d.value_and_grad(x)
    np.testing.assert_array_equal(value, expected_value)  # nan where numpy gives nan
    np.testing.assert_array_equal(grad, _nan_rule(fn, x))
    t = llgrad.tensor(x, requires_grad=True)
    out = fn(t)
    out.backward()
    np.testing.assert_array_equal(out.detach().numpy(), expected_value)
    np.testing.assert_array_equal(t.grad.numpy(), _nan_rule(fn, x))


def test_gradient_without_nan_matches_finite_differences(mode):
    x = np.array([0.3, -1.2, 2.5, 0.7])
    for fn in (max_all, min_all, max_rows, min_cols_keepdims):
        np.testing.assert_allclose(llgrad.differentiate(fn).grad(x),
                                   numerical_vjp(fn, [x], 1.0, wrt=[0])[0], atol=1e-8)
