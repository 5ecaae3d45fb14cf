"""scipy.signal.convolve2d on traced values (runtime/numpy_shape.py): scipy's values for every
mode and boundary (odd, even and larger kernels, 'valid' with the arguments swapped),
gradients in the image and the kernel equal to finite differences, scipy's errors (neither
argument containing the other in 'valid' mode, an argument not 2-d)."""
from __future__ import annotations

import itertools

import numpy as np
import pytest
import scipy.signal

import llgrad
from tests.e2e.conftest import finite_differences

RNG = np.random.default_rng(2207)
SHAPES = [((7, 6), (3, 3)), ((5, 8), (2, 4)), ((4, 4), (5, 3)), ((3, 3), (5, 6))]


@pytest.mark.parametrize("shapes", SHAPES)
def test_values_equal_scipys(shapes):
    a, w = RNG.standard_normal(shapes[0]), RNG.standard_normal(shapes[1])
    for mode, boundary in itertools.product(["full", "same", "valid"], ["fill", "wrap", "symm"]):
        if mode == "valid" and shapes[0] == (4, 4):
            continue  # (neither contains the other: an error, below)
        def f(a, w):
            return scipy.signal.convolve2d(a, w, mode=mode, boundary=boundary, fillvalue=0.5)
        got, want = llgrad.differentiate(f)(a, w), f(a, w)
        assert got.shape == want.shape, (mode, boundary)
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12, err_msg=(mode, boundary))


@pytest.mark.parametrize("mode, boundary", [("same", "symm"), ("full", "wrap"), ("valid", "fill")])
def test_gradients_in_image_and_kernel(mode, boundary):
    a, w, target = RNG.standard_normal((6, 5)), RNG.standard_normal((3, 2)), RNG.random(())

    def loss(a, w):
        out = scipy.signal.convolve2d(a, w, mode=mode, boundary=boundary)
        return np.sum(np.tanh(out) ** 2) * target
    value, grads = llgrad.differentiate(loss, wrt=(0, 1)).value_and_grad(a, w)
    assert value == pytest.approx(loss(a, w), rel=1e-12)
    for g, fd in zip(grads, finite_differences(loss, (a, w), (0, 1))):
        np.testing.assert_allclose(g, fd, rtol=1e-6, atol=1e-8)


def test_valid_mode_needs_one_argument_containing_the_other_and_both_are_2d():
    def f(a, w):
        return scipy.signal.convolve2d(a, w, mode="valid")
    with pytest.raises(ValueError, match="at least as large as the other in every dimension"):
        llgrad.differentiate(f)(RNG.standard_normal((4, 4)), RNG.standard_normal((5, 3)))
    with pytest.raises(ValueError, match="in1 and in2 must be 2-d"):
        llgrad.differentiate(f)(RNG.standard_normal((4, 4)), RNG.standard_normal(3))
