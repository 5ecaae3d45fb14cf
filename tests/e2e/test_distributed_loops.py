"""Long loops of element updates run as one loop per group of statements when every access
keeps its order (Note [Distributed element loops] in codegen/distribute.py, issue 13): the
results are those of the loop as written, to the bit, and the split loops vectorise. Loops
whose accesses forbid it (a recurrence, indices through an array, a carried scalar) stay
whole and are still right. Values against plain Python, gradients against central
differences, through the interpreter and natively."""
from __future__ import annotations

import re

import numpy as np
import pytest

import llgrad
from llgrad.codegen import distribute, jit
from tests.e2e.conftest import finite_differences
# the stencil, 3 sweeps: on a 5x66 grid its inner loops have 64 trips (distributed)
from tests.e2e.test_numba_style import stencil

RNG = np.random.default_rng(37)


def spread(g, c):
    """Each g[j] added into out[j-1], out[j], out[j+1]: read-modify-writes one element
    apart; split, the statements run right to left (each element's additions keep their
    order)."""
    out = np.zeros(g.shape[0] + 2)
    for j in range(1, g.shape[0] + 1):
        out[j - 1] = out[j - 1] + c * g[j - 1]
        out[j] = out[j] + g[j - 1] * g[j - 1]
        out[j + 1] = out[j + 1] + c * g[j - 1]
    return out


def spread_loss(g, c):
    return np.sum(spread(g, c) * np.arange(g.shape[0] + 2.0))


def recurrence(a0, b0):
    """a[j] from a[j-1], b[j+1] from a[j]: each statement must see the other's last write,
    a cycle: the loop stays whole."""
    a, b = a0.copy(), b0.copy()
    for j in range(1, a.shape[0] - 1):
        a[j] = 0.5 * a[j - 1] + b[j]
        b[j + 1] = b[j + 1] - 0.25 * a[j]
    return np.sum(a * a) + np.sum(b * np.arange(b.shape[0]))


def through_indices(w, idx):
    """h[idx[t]] updated twice per iteration: indices not affine, the loop stays whole."""
    h = np.zeros(5)
    for t in range(idx.shape[0]):
        h[idx[t]] = h[idx[t]] + w[t]
        h[idx[t] - 1] = h[idx[t] - 1] * 0.5 + w[t] * w[t]
    return np.sum(h * np.arange(1.0, 6.0))


def with_a_carried_sum(x):
    """A carried scalar beside two element updates: it would run once per copy; whole."""
    y = np.zeros(x.shape[0])
    z = np.zeros(x.shape[0])
    s = 0.0
    for j in range(1, x.shape[0] - 1):
        y[j] = x[j - 1] * x[j + 1]
        z[j - 1] = z[j - 1] + y[j] * s
        s = s + x[j]
    return np.sum(y) + np.sum(z * z) + s


CASES = [
    (spread_loss, (RNG.standard_normal(70), 0.3), (0, 1)),
    (recurrence, (RNG.standard_normal(70), RNG.standard_normal(70)), (0, 1)),
    (through_indices, (RNG.standard_normal(70), RNG.integers(1, 5, 70)), (0,)),
    (with_a_carried_sum, (RNG.standard_normal(70),), (0,)),
    (stencil, (RNG.standard_normal((5, 66)), 0.2), (0, 1)),
]


@pytest.mark.parametrize("fn,args,wrt", CASES, ids=[c[0].__name__ for c in CASES])
def test_values_and_gradients(fn, args, wrt, mode):
    d = llgrad.differentiate(fn, wrt=wrt)
    value, grads = d.value_and_grad(*args)
    assert value == pytest.approx(fn(*[np.copy(a) for a in args]), rel=1e-12, abs=1e-12)
    for g, fd in zip(grads, finite_differences(fn, args, wrt)):  # rounding: ~1e-16 |f| / eps
        np.testing.assert_allclose(g, fd, rtol=1e-6, atol=1e-7)


def test_split_loops_give_the_loop_s_results_to_the_bit(monkeypatch):
    """The additions into each element keep their order: the array equals plain Python's
    exactly, and the stencil's gradient the interpreter's."""
    g = RNG.standard_normal(70)
    np.testing.assert_array_equal(llgrad.differentiate(spread)(g, 0.3), spread(g, 0.3))
    args = CASES[-1][1]
    native = llgrad.differentiate(stencil, wrt=(0, 1)).grad(*args)
    monkeypatch.setenv("LLGRAD_DISABLE_JIT", "1")
    interp = llgrad.differentiate(stencil, wrt=(0, 1)).grad(*args)
    np.testing.assert_array_equal(native[0], interp[0])
    assert native[1] == interp[1]


def _vector_fadds(fn, args, entry):
    d = llgrad.differentiate(fn)
    d.value_and_grad(*args) if entry == "joint" else d(*args)
    m = d.inspect(*args)._c.module(entry)
    return len(re.findall(r"fadd <\d+ x double>", jit.optimized_ir(m.llvm_ir, 2)))


@pytest.mark.parametrize("fn,args,entry", [(spread, (RNG.standard_normal(70), 0.3), "forward"),
                                           (stencil, CASES[-1][1], "joint")],
                         ids=["spread", "stencil-reverse"])
def test_split_loops_vectorise(fn, args, entry, monkeypatch):
    """LLVM vectorises the split loops and not the whole one (`spread` has no other vector
    addition; the stencil's joint entry gains those of its reverse sweep)."""
    split = _vector_fadds(fn, args, entry)
    monkeypatch.setattr(distribute, "DISTRIBUTE_MIN_TRIPS", 1 << 30)
    whole = _vector_fadds(fn, args, entry)
    assert split > whole, (split, whole)
    if fn is spread:
        assert whole == 0


def test_the_stencil_s_reverse_sweep_tapes_nothing():
    """The stencil is linear in u: its reverse sweep reads no tape of u, and the trip counts
    of its inner loops are constants, not read back from tapes (Note [Trip counts] in
    transform/loop_ad.py)."""
    d = llgrad.differentiate(stencil)
    stats = d.inspect(*CASES[-1][1]).stats
    assert stats["tapes"] == 0 and stats["tape bytes (static)"] == 0
    assert "tape_" not in str(d.inspect(*CASES[-1][1]).backward_ir)
