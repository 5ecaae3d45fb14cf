"""A zero cotangent at a point where a derivative is infinite contributes zero, not nan (Note
[Zero cotangents at sqrt(0)] in runtime/ops/elementwise.py): pairwise distances whose zero
diagonal the program leaves out, compiled and eager; a non-zero cotangent there stays inf."""
from __future__ import annotations

import numpy as np
import pytest

import llgrad
import llgrad as lg
from tests.e2e.conftest import finite_differences

RNG = np.random.default_rng(2222)


def masked_inverse_distances(pos):
    """Coulomb-like: every pair by broadcasting, the zero self-distances masked out."""
    r = np.sqrt(np.sum((pos[:, None, :] - pos[None, :, :]) ** 2, axis=-1))
    mask = ~np.eye(len(pos), dtype=bool)
    return np.sum(1.0 / r[mask])


def test_masked_zero_distances_give_finite_gradients_compiled():
    pos = RNG.standard_normal((4, 3))
    value, grad = llgrad.differentiate(masked_inverse_distances).value_and_grad(pos)
    assert value == pytest.approx(masked_inverse_distances(pos), rel=1e-12)
    np.testing.assert_allclose(grad, finite_differences(masked_inverse_distances, (pos,),
                                                        (0,))[0], rtol=1e-6, atol=1e-8)


def test_masked_zero_distances_give_finite_gradients_eager():
    pos = RNG.standard_normal((4, 3))
    x = lg.tensor(pos, requires_grad=True)
    r = lg.sqrt(((x[:, None, :] - x[None, :, :]) ** 2).sum(-1))
    (1.0 / r[lg.tensor(~np.eye(4, dtype=bool))]).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), finite_differences(
        masked_inverse_distances, (pos,), (0,))[0], rtol=1e-6, atol=1e-8)


def sqrt_at_zero(x):
    return np.sum(np.sqrt(x))


@pytest.mark.filterwarnings("ignore:divide by zero")
def test_a_nonzero_cotangent_at_sqrt_zero_is_still_infinite():
    x = np.array([0.0, 4.0])
    grad = llgrad.differentiate(sqrt_at_zero).grad(x)
    np.testing.assert_array_equal(grad, [np.inf, 0.25])
    t = lg.tensor(x, requires_grad=True)
    lg.sqrt(t).sum().backward()
    np.testing.assert_array_equal(t.grad.numpy(), [np.inf, 0.25])
