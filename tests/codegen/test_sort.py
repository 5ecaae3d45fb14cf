"""The compiled argsort: the radix sort of long lines (Note [Radix sort]) and the merge sort
of short ones give the primitive's own numpy result (stable; NaN last ascending, first
descending; -0.0 equal to 0.0), for every key type, axis and order."""
from __future__ import annotations

import numpy as np
import pytest

import llgrad
from llgrad.codegen.lowerings.radix import RADIX_MIN
from llgrad.runtime import ops
from llgrad.runtime.ops.sort import argsort_p


def _keys(rng, n, dtype):
    """Ties, both zeros, infinities and NaNs of both signs among random keys."""
    if np.dtype(dtype).kind == "i":
        x = rng.integers(-5, 5, n) * (1 << rng.integers(0, 60, n))
        x[: n // 10] = rng.choice([np.iinfo(np.int64).min, np.iinfo(np.int64).max, 0, -1],
                                  n // 10)
        return rng.permutation(x).astype(dtype)
    x = np.round(rng.standard_normal(n) * 3, 1)  # many ties
    special = [0.0, -0.0, np.inf, -np.inf, np.nan, -np.nan, 1e-310, -1e-310]
    x[: 4 * len(special)] = special * 4
    return rng.permutation(x).astype(dtype)


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.int64])
@pytest.mark.parametrize("descending", [False, True])
@pytest.mark.parametrize("n", [RADIX_MIN - 1, RADIX_MIN, 3000])
def test_argsort_matches_numpy(dtype, descending, n):
    rng = np.random.default_rng(n)
    x = _keys(rng, n, dtype)
    f = llgrad.differentiate(lambda x: ops.argsort(x, 0, descending))
    np.testing.assert_array_equal(f(x), argsort_p.impl(x, axis=0, descending=descending))


@pytest.mark.parametrize("axis", [0, 1])
def test_radix_sort_along_either_axis(axis):
    rng = np.random.default_rng(1)
    x = _keys(rng, 2 * RADIX_MIN * 3, np.float64).reshape((2 * RADIX_MIN, 3) if axis == 0
                                                          else (3, 2 * RADIX_MIN))
    f = llgrad.differentiate(lambda x: np.argsort(x, axis=axis))
    np.testing.assert_array_equal(f(x), np.argsort(x, axis=axis, kind="stable"))


def test_radix_sort_keys_sharing_high_bytes_and_gradient():
    """Keys of one sign and magnitude share their high digits (those passes are skipped);
    np.sort's gradient goes to where each value came from."""
    rng = np.random.default_rng(2)
    x = 1.0 + rng.random(4 * RADIX_MIN) * 1e-9
    w = rng.standard_normal(x.size)

    def loss(x):
        return np.sum(np.sort(x) * w)

    v, g = llgrad.value_and_grad(loss)(x)
    order = np.argsort(x, kind="stable")
    np.testing.assert_allclose(v, np.sum(x[order] * w))
    expected = np.zeros_like(x)
    expected[order] = w
    np.testing.assert_array_equal(g, expected)


def test_descending_int64_keys_put_the_minimum_last():
    # the eager rule negated the keys, and -(int64 min) is int64 min: it sorted first
    x = np.array([np.iinfo(np.int64).min, 0, 5, 0, np.iinfo(np.int64).max])
    want = np.argsort(-x.astype(np.float64), kind="stable")  # exact here: distinct magnitudes
    np.testing.assert_array_equal(argsort_p.impl(x, axis=0, descending=True), want)
    np.testing.assert_array_equal(llgrad.differentiate(lambda x: ops.argsort(x, 0, True))(x), want)
