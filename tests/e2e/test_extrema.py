"""max/min/argmax/argmin on empty axes and on NaN, compiled and eager; np.maximum/minimum,
np.clip (array bounds too) and infinity norms on NaN, with PyTorch's gradients.

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


# ---- NaN in elementwise extrema, clip and infinity norms: PyTorch's gradients ---------------
# The expected gradients are PyTorch 2.13's, written out (computed there by hand, never here):
# torch.maximum/minimum give the whole gradient to both operands where either is NaN (ties:
# half each); torch.clamp gives x the gradient inside [lo, hi] (bounds included), lo where
# x < lo < hi, hi where x > hi or hi < lo, nobody where anything is NaN; the inf-norms of a
# slice holding a NaN have gradient 0.
NAN = np.nan
EXTREMA_X = np.array([NAN, 1.0, NAN, 2.0, 3.0])
EXTREMA_Y = np.array([1.0, NAN, NAN, 2.0, 1.0])
TORCH_EXTREMA = {"maximum": ([1.0, 1.0, 1.0, 0.5, 1.0], [1.0, 1.0, 1.0, 0.5, 0.0]),
                 "minimum": ([1.0, 1.0, 1.0, 0.5, 0.0], [1.0, 1.0, 1.0, 0.5, 1.0])}


def _eager_grads(fn, *args):
    ts = [llgrad.tensor(a, requires_grad=True) for a in args]
    out = fn(*ts)
    llgrad.autograd.backward(out.sum())
    return out.detach().numpy(), [t.grad.numpy() for t in ts]


def _all_ways(fn, args, expected):
    """Compiled value and gradients, then eager ones: numpy's value, the expected gradients."""
    with np.errstate(invalid="ignore"):
        value = fn(*args)
    def total(*a):
        return np.sum(fn(*a))
    d = llgrad.differentiate(total, wrt=tuple(range(len(args))))
    got, grads = d.value_and_grad(*args)
    np.testing.assert_array_equal(got, np.sum(value))
    for g, e in zip(grads, expected):
        np.testing.assert_array_equal(g, e)
    out, grads = _eager_grads(fn, *args)
    np.testing.assert_array_equal(out, value)
    for g, e in zip(grads, expected):
        np.testing.assert_array_equal(g, e)


@pytest.mark.parametrize("name", ["maximum", "minimum"])
def test_elementwise_extrema_of_nan_give_both_operands_the_gradient(name, mode):
    _all_ways(getattr(np, name), (EXTREMA_X, EXTREMA_Y), TORCH_EXTREMA[name])


CLIP_CASES = [  # x, lo, hi, PyTorch's gradients (x, lo, hi)
    ([NAN, 0.5, 2.0, -1.0, 0.0, 1.0], [0.0, NAN, 0.0, 0.0, 0.0, 0.0],
     [1.0, 1.0, NAN, 1.0, 0.0, 1.0],
     ([0, 0, 0, 0, 1, 1], [0, 0, 0, 1, 0, 0], [0, 0, 0, 0, 0, 0])),
    ([0.0, 1.0, 0.5], [0.0, 0.0, 0.5], [1.0, 1.0, 0.5], ([1, 1, 1], [0, 0, 0], [0, 0, 0])),
    ([0.5, 3.0, -3.0], [1.0, 1.0, 1.0], [0.0, 0.0, 0.0], ([0, 0, 0], [0, 0, 0], [1, 1, 1])),
]


@pytest.mark.parametrize("case", range(len(CLIP_CASES)), ids=["nan", "ties", "lo>hi"])
def test_clip_with_array_bounds_follows_pytorch(case, mode):
    x, lo, hi, expected = CLIP_CASES[case]
    _all_ways(np.clip, (np.array(x), np.array(lo), np.array(hi)),
              [np.array(e, dtype=float) for e in expected])


def test_clip_of_nan_with_number_bounds_has_no_gradient(mode):
    x = np.array([NAN, 0.5, 2.0])
    _all_ways(lambda v: np.clip(v, 0.0, 1.0), (x,), [np.array([0.0, 1.0, 0.0])])


def test_clip_with_traced_array_bounds_matches_finite_differences(mode):
    """The issue's example: the bounds' gradients were 0 compiled (an error eagerly)."""
    def f(x, lo, hi):
        return np.sum(np.clip(x, lo, hi) ** 2)
    args = (np.array([-1.0, 0.2, 0.9, 0.1]), np.array([-0.5, -0.5, -0.5, 0.3]),
            np.array([0.5, 0.5, 0.5, 0.2]))
    value, grads = llgrad.differentiate(f, wrt=(0, 1, 2)).value_and_grad(*args)
    assert value == f(*args)
    for g, e in zip(grads, numerical_vjp(f, args, 1.0, wrt=[0, 1, 2])):
        np.testing.assert_allclose(g, e, atol=1e-8)


NORM_CASES = [  # x, ord, axis, PyTorch's gradient
    ([1.0, NAN, -3.0], np.inf, None, [0.0, 0.0, 0.0]),
    ([1.0, NAN, -3.0], -np.inf, None, [0.0, 0.0, 0.0]),
    ([3.0, 1.0, -3.0], np.inf, None, [0.5, 0.0, -0.5]),
    ([[NAN, 1.0], [2.0, -2.0]], np.inf, 1, [[0.0, 0.0], [0.5, -0.5]]),
]


@pytest.mark.parametrize("case", range(len(NORM_CASES)), ids=["nan", "-inf-nan", "ties", "rows"])
def test_infinity_norm_of_nan_has_no_gradient(case, mode):
    x, ord, axis, expected = NORM_CASES[case]
    _all_ways(lambda v: np.linalg.norm(v, ord, axis=axis), (np.array(x),), [np.array(expected)])
