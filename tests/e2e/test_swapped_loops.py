"""Loops that exchange carried arrays (`u, u_new = u_new, u`, issue 13): codegen runs two
iterations per turn, the second with the two buffers exchanged, instead of copying the
arrays through a staging buffer (Note [Swapped carried arrays] in codegen/inplace.py), and
leaves each array in its own buffer after an odd number of swaps. Values against plain Python and gradients against central differences, through the
interpreter and natively, for trip counts known only at run time (0 to 3 swaps), for
exchanges mixed with copies and views, and inside an outer loop."""
from __future__ import annotations

import numpy as np
import pytest

import llgrad
from tests.e2e.conftest import finite_differences

RNG = np.random.default_rng(31)


def sweeps(u0, c, n):
    """Jacobi-like sweeps of a traced count n[0], the new values nonlinear in the old."""
    u = u0.copy()
    v = u0 * 0.5
    for s in range(n[0]):
        for i in range(1, u.shape[0] - 1):
            v[i] = c * (u[i - 1] + u[i + 1]) + u[i] * u[i]
        u, v = v, u
    return np.sum(u * u) + np.sum(v * np.arange(u.shape[0]))


def swap_and_keep(u0, c):
    """u's buffer moves into two positions and a new value into u's: a cycle through a
    copy, not an exchange of buffers (the yield copies as before)."""
    u = u0.copy()
    v = u0 * c
    prev = u0 * 0.0
    for s in range(3):
        w = c * v + np.sin(u)
        u, v, prev = w, u, u
    return np.sum(u * np.arange(1.0, 7.0)) + np.sum(v * v) + np.sum(prev * u0)


def rotate_three(a0, c):
    """A cycle of three arrays: staged and copied, not swapped."""
    a, b, d = a0.copy(), a0 * c, a0 * a0
    for s in range(4):
        a[0] = a[0] + c * b[1]
        a, b, d = b, d, a
    return np.sum(a * np.arange(1.0, 6.0)) + np.sum(b * b) + np.sum(d)


def swap_transposed(m0, c):
    """`u, v = v.T, u`: a view of the other buffer, staged and copied."""
    u = m0.copy()
    v = m0 * c
    for s in range(3):
        v[0, 1] = v[0, 1] + c * u[1, 0]
        u, v = v.T, u
    return np.sum(u * np.arange(9.0).reshape(3, 3)) + np.sum(v * v)


def nested_swaps(u0, c):
    """The swapping loop runs again in each iteration of an outer loop (an odd count each
    time, so the outer body sees the arrays back in their buffers every time)."""
    total = 0.0
    u = u0.copy()
    for t in range(2):
        u = u.copy()
        v = u * 0.5
        for s in range(3):
            for i in range(1, u.shape[0] - 1):
                v[i] = c * (u[i - 1] + u[i + 1]) + (1 - 2 * c) * u[i]
            u, v = v, u
        total = total + np.sum(v * v)
        u = u * c
    return total + np.sum(u * u)


CASES = [
    (swap_and_keep, (RNG.standard_normal(6), 0.3)),
    (rotate_three, (RNG.standard_normal(5), 0.7)),
    (swap_transposed, (RNG.standard_normal((3, 3)), 0.4)),
    (nested_swaps, (RNG.standard_normal(7), 0.2)),
]


def _check(fn, args, wrt):
    d = llgrad.differentiate(fn, wrt=wrt)
    value, grads = d.value_and_grad(*args)
    assert value == pytest.approx(fn(*[np.copy(a) for a in args]), rel=1e-12, abs=1e-12)
    assert d(*args) == pytest.approx(value, rel=1e-14, abs=1e-14)
    for g, fd in zip(grads, finite_differences(fn, args, wrt)):
        np.testing.assert_allclose(g, fd, rtol=1e-6, atol=1e-8)
    assert d.inspect(*args).stats["path"] == "staged"
    return d


@pytest.mark.parametrize("n", [0, 1, 2, 3])
def test_swaps_of_a_run_time_count(n, mode):
    _check(sweeps, (RNG.standard_normal(9), 0.3, np.array([n])), (0, 1))


@pytest.mark.parametrize("fn,args", CASES, ids=[c[0].__name__ for c in CASES])
def test_exchanges_with_copies_views_and_nesting(fn, args, mode):
    _check(fn, args, (0, 1))


def test_swapped_arrays_are_not_copied_in_the_loop():
    """An exchange costs no copy in the loop, forward or reverse, only 3 after an odd count
    (nested_swaps: in its outer loop); a 3-cycle and a transposed view are still copied
    (through a staging buffer: one copy more)."""
    copies = {}
    for fn, args in [(sweeps, (RNG.standard_normal(9), 0.3, np.array([3])))] + CASES:
        d = llgrad.differentiate(fn)
        d(*args), d.value_and_grad(*args)
        stats = d.inspect(*args).stats
        copies[fn.__name__] = (stats["array copies in loops (forward)"],
                               stats["array copies in loops (joint)"])
    assert copies["sweeps"] == (0, 0)
    assert copies["nested_swaps"] == (3, 6)
    assert copies["rotate_three"][0] == 4   # three moves, one of them staged (two copies)
    assert copies["swap_transposed"][0] == 3
