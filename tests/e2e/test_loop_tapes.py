"""What loop AD tapes and recomputes in Numba-style loops (issue 13; transform/loop_ad.py and
loop_facts.py): element reads of arrays the loop updates tape the element, not the array
(Note [Element reads of work arrays]); reads of a captured array at indices an inner loop
does not change get scalar cotangents (Note [Element cotangents]); trip counts come from the
bounds (Note [Trip counts]). Values against plain Python, gradients against central
differences, through the interpreter and natively; the tapes read off the joint IR."""
from __future__ import annotations

import re

import numpy as np
import pytest

import llgrad
from tests.e2e.conftest import finite_differences
from tests.e2e.test_numba_style import _gmm_args, gmm_loops

RNG = np.random.default_rng(1313)


def _tapes(d, *args) -> list[tuple[str, str]]:
    """(row shape, rows) of every tape of the joint IR, e.g. ("(3,)", "None")."""
    text = str(d.inspect(*args).backward_ir)
    return re.findall(r"tape_new \{shape=(\([^)]*\)), dtype=\w+, rows=(\w+)\}", text)


def _check(fn, args, wrt):
    d = llgrad.differentiate(fn, wrt=wrt)
    value, grads = d.value_and_grad(*args)
    grads = grads if isinstance(grads, tuple) else (grads,)
    assert value == pytest.approx(fn(*[np.copy(a) for a in args]), rel=1e-12, abs=1e-12)
    for g, fd in zip(grads, finite_differences(fn, args, wrt)):
        np.testing.assert_allclose(g, fd, rtol=1e-6, atol=1e-8)
    return d


def rescale(a0, w):
    """Reads elements after overwriting them: a[j] (rewritten just before), a[j - 1]
    (rewritten by the previous iteration)."""
    a = a0 * 1.0
    for j in range(1, a.shape[0]):
        a[j] = a[j] * w[j]
        a[j] = 0.5 * a[j] * a[j] + 0.25 * a[j - 1] ** 2
    return np.sum(a * a)


def test_element_reads_of_an_updated_array_tape_the_elements(mode):
    n = 12
    args = (RNG.standard_normal(n), RNG.standard_normal(n))
    d = _check(rescale, args, (0, 1))
    # per iteration: the elements read (old a[j], a[j - 1]), never the array (n floats)
    tapes = _tapes(d, *args)
    assert tapes and all(shape == "()" for shape, _ in tapes), tapes
    assert d.inspect(*args).stats["tape bytes (static)"] <= 2 * 8 * n


def centred(x, m):
    """A work array overwritten element by element at every outer iteration (as gmm's xc)."""
    n, dim = x.shape
    xc = np.zeros(dim)
    s = 0.0
    for i in range(n):
        for r in range(dim):
            xc[r] = x[i, r] - m[r]
        for r in range(dim):
            s += np.sin(xc[r]) * xc[r] * m[r]
    return s


def test_a_work_array_overwritten_each_iteration_is_not_taped_per_element(mode):
    args = (RNG.standard_normal((6, 4)), RNG.standard_normal(4))
    d = _check(centred, args, (0, 1))
    # the values the second loop reads (xc once per i), nothing per element written
    rows = [rows for shape, rows in _tapes(d, *args) if shape == "(4,)"]
    assert rows == ["6"], _tapes(d, *args)


def upper_pairs(w, v, x):
    """An inner loop reads w and v at indices it does not change (w[c + 1] is out of range
    when c = n - 1, where the inner loop runs no iteration) and x at its own index."""
    n = x.shape[0]
    s = 0.0
    for c in range(n):
        for r in range(c + 1, n):
            s += w[c + 1] * x[r] + np.sin(v[-1 - c]) * x[r] ** 2
    return s


def test_invariant_element_reads_get_scalar_cotangents(mode):
    n = 5
    args = (RNG.standard_normal(n), RNG.standard_normal(n), RNG.standard_normal(n))
    d = _check(upper_pairs, args, (0, 1, 2))
    if mode == "native":
        return
    # the outer reverse loop carries the cotangents of w, v, x (read at c) and of s; the
    # inner one those of s, w[c + 1], v[-1 - c] (scalars) and x (read at r)
    text = str(d.inspect(*args).backward_ir)
    outer, inner = re.findall(r"region 0\(%k\.\d+: i64\[\], ([^)]*)\)", text)
    assert outer.count(f"f64[{n}]") == 3 and outer.count("f64[]") == 1, outer
    assert inner.count(f"f64[{n}]") == 1 and inner.count("f64[]") == 3, inner


def test_gmm_nest_tapes_per_iteration_what_its_reverse_sweep_reads():
    """Per point: main (k floats) and the log-sum-exp's se; per component: the final xc and
    Qxc (d floats each, what the reverse sweep reads) and one counter; per column of the
    triangle its `pos`; per component of the max and exp loops one float each. No tape
    holds a work array per element written, no counter is taped (Note [Trip counts]), and
    with constant bounds the stacked inner tapes have static rows (Note [Stacked inner
    tapes])."""
    dim, k, n = 3, 4, 5
    args = _gmm_args(dim, k, n)
    d = llgrad.differentiate(gmm_loops, wrt=(0, 1, 2))
    tapes = _tapes(d, *args)
    shapes = sorted(shape for shape, _ in tapes)
    assert shapes.count(f"({dim},)") == 2 and shapes.count(f"({k},)") == 1, tapes
    assert all(s in ("()", f"({dim},)", f"({k},)") for s in shapes), tapes
    assert len(tapes) == 7 and all(rows != "None" for _, rows in tapes), tapes
    stats = d.inspect(*args).stats
    per_point = k + 1 + k * (2 * dim + dim) + (k - 1) + k
    assert stats["tape bytes (static)"] <= n * per_point * 8 and "tapes (growing)" not in stats
