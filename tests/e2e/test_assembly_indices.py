"""Finite-element assembly as textbooks write it: a loop over elements scatter-adds each
element's matrix into a global one at indices built from the loop counter (a constant
connectivity array read in the target, `dofs = [e, e + 1]` or np.array of it given to
np.ix_). Each loop stays one compiled loop (it was unrolled: the counter was concretised),
with Python's value and a gradient equal to central differences."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import llgrad
from tests.e2e.conftest import finite_differences

N_EL = 5
KE = np.array([[1.0, -1.0], [-1.0, 1.0]])


def by_connectivity(E):
    K = np.zeros((N_EL + 1, N_EL + 1))
    conn = np.array([[e, e + 1] for e in range(N_EL)])
    for e in range(N_EL):
        for a in range(2):
            for b in range(2):
                K[conn[e, a], conn[e, b]] += E[e] * KE[a, b]
    return _compliance(K)


def by_ix_of_a_list(E):
    K = np.zeros((N_EL + 1, N_EL + 1))
    for e in range(N_EL):
        dofs = [e, e + 1]
        K[np.ix_(dofs, dofs)] += E[e] * KE
    return _compliance(K)


def by_ix_of_an_array(E):
    K = np.zeros((N_EL + 1, N_EL + 1))
    for e in range(N_EL):
        dofs = np.array([e, e + 1])
        K[np.ix_(dofs, dofs)] = K[np.ix_(dofs, dofs)] + E[e] * KE
    return _compliance(K)


def constant_mask_beside_counter_indices(E):
    total = 0.0
    for i in range(N_EL - 1):
        total = total + np.sum(np.outer(E, E)[np.ix_([True, False, True, False, True], [i, i + 1])])
    return total


def _compliance(K):
    free = np.arange(1, N_EL + 1)
    f = np.linspace(0.5, 1.5, N_EL)
    return f @ np.linalg.solve(K[np.ix_(free, free)], f)


@pytest.mark.parametrize("fn", [by_connectivity, by_ix_of_a_list, by_ix_of_an_array,
                                constant_mask_beside_counter_indices])
def test_assembly_by_counter_indices_is_one_staged_loop(fn):
    E = np.linspace(1.0, 2.0, N_EL)
    with warnings.catch_warnings():
        warnings.simplefilter("error", llgrad.PerformanceWarning)
        f = llgrad.differentiate(fn)
        value, grad = f.value_and_grad(E)
    assert f.inspect(E).path == "staged"
    assert value == pytest.approx(fn(E), rel=1e-12)
    np.testing.assert_allclose(grad, finite_differences(fn, (E,), (0,))[0], rtol=1e-6)


def test_ix_of_a_traced_mask_is_refused_with_the_line():
    def f(x):
        return np.sum(np.outer(x, x)[np.ix_(x > 0, x > 0)])
    with pytest.raises(llgrad.errors.UnsupportedError,
                       match=r"(?s)np.ix_ of a traced boolean mask .*test_assembly_indices.py:\d+"):
        llgrad.differentiate(f)(np.array([1.0, -2.0, 3.0]))
