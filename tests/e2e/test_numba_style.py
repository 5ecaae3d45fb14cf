"""Numba-style programs (issue 13): nested scalar loops that update small work arrays element
by element. Values against plain Python, gradients against central differences, through the
interpreter and natively; and the structure of what is compiled: the element updates are
stores in place (no array copied inside a loop: Note [Updates in place] in
codegen/inplace.py), no loop iteration is peeled, and the program grows with the source, not
with the sizes or the nesting."""
from __future__ import annotations

import math
import re

import numpy as np
import pytest

import llgrad
from tests.e2e.conftest import finite_differences

RNG = np.random.default_rng(13)


def gmm_loops(alphas, means, icf, x):
    """ADBench's GMM objective (no prior) as Numba users write it: scalar loops over points,
    components, dimensions and the triangle of each component's matrix."""
    n, d = x.shape
    k = alphas.shape[0]
    Qd = np.exp(icf[:, :d])
    sum_qs = np.zeros(k)
    for j in range(k):
        sum_qs[j] = np.sum(icf[j, :d])
    main = np.zeros(k)
    xc = np.zeros(d)
    Qxc = np.zeros(d)
    slse = 0.0
    for i in range(n):
        for j in range(k):
            for r in range(d):
                xc[r] = x[i, r] - means[j, r]
                Qxc[r] = Qd[j, r] * xc[r]
            pos = d
            for c in range(d):
                for r in range(c + 1, d):
                    Qxc[r] += icf[j, pos] * xc[c]
                    pos += 1
            sq = 0.0
            for r in range(d):
                sq += Qxc[r] * Qxc[r]
            main[j] = alphas[j] + sum_qs[j] - 0.5 * sq
        mx = main[0]
        for j in range(1, k):
            mx = max(mx, main[j])
        se = 0.0
        for j in range(k):
            se += math.exp(main[j] - mx)
        slse += math.log(se) + mx
    return slse


def _gmm_args(d, k, n):
    return (RNG.standard_normal(k), RNG.random((k, d)),
            0.3 * RNG.standard_normal((k, d * (d + 1) // 2)), RNG.standard_normal((n, d)))


def tri_matvec(L, x):
    """y = tril(L) @ x, one dot product per row, then sum(y**2)."""
    n = x.shape[0]
    y = np.zeros(n)
    for i in range(n):
        s = 0.0
        for j in range(i + 1):
            s += L[i, j] * x[j]
        y[i] = s
    return np.sum(y * y)


def packed_tri(Lp, x):
    """sum_i (sum_{j<=i} L[i, j] x[j])**2, L's lower triangle packed by rows in Lp and walked
    by a counter (`pos += 1`), as Numba users write it."""
    return packed_tri_from(Lp, x, 0)


def packed_tri_from(Lp, x, start):
    n = x.shape[0]
    total, pos = 0.0, start
    for i in range(n):
        s = 0.0
        for j in range(i + 1):
            s += Lp[pos] * x[j]
            pos += 1
        total += s * s
    return total


def compact(x):
    """The positive entries moved to the front (`out[cnt] = x[i]; cnt += 1` under an if)."""
    out = np.zeros(x.shape[0])
    cnt = 0
    for i in range(x.shape[0]):
        if x[i] > 0:
            out[cnt] = x[i] * (i + 1)
            cnt += 1
    return np.sum(out * np.arange(1.0, x.shape[0] + 1.0))


def histogram(w, idx):
    """h[idx[t]] += w[t] (idx repeats), then a weighted sum of squares."""
    h = np.zeros(4)
    for t in range(idx.shape[0]):
        h[idx[t]] += w[t]
    return np.sum(h * h * np.arange(1.0, 5.0))


def stencil(u0, c):
    """Jacobi sweeps of a 5-point stencil: u_new[i, j] from u's four neighbours, then swap."""
    n, m = u0.shape
    u = u0.copy()
    u_new = u0.copy()
    for s in range(3):
        for i in range(1, n - 1):
            for j in range(1, m - 1):
                u_new[i, j] = c * (u[i - 1, j] + u[i + 1, j] + u[i, j - 1] + u[i, j + 1]) \
                    + (1 - 4 * c) * u[i, j]
        u, u_new = u_new, u
    return np.sum(u * u)


def pairwise(X):
    """D[i, j] = squared distance of rows i and j, by a double loop (and a third over the
    coordinates); then sum(exp(-D))."""
    n, dim = X.shape
    D = np.zeros((n, n))
    for i in range(n):
        for j in range(n):
            acc = 0.0
            for q in range(dim):
                diff = X[i, q] - X[j, q]
                acc += diff * diff
            D[i, j] = acc
    return np.sum(np.exp(-D))


def rnn_loops(Wx, Wh, xs):
    """A tanh RNN as scalar loops: the state h is carried across steps, read by the next
    step's products and updated element by element (its entry value is taped before the
    update, so the update is in place)."""
    T, d = xs.shape
    m = Wh.shape[0]
    h = np.zeros(m)
    hn = np.zeros(m)
    loss = 0.0
    for t in range(T):
        for a in range(m):
            s = 0.0
            for b in range(d):
                s += Wx[a, b] * xs[t, b]
            for b in range(m):
                s += Wh[a, b] * h[b]
            hn[a] = math.tanh(s)
        for a in range(m):
            h[a] = hn[a]
            loss += h[a] * h[a]
    return loss


def column_accumulate(W, X):
    """A column of a work matrix accumulated in a loop (`G[:, 0] += z`): its reverse sweep
    passes G's cotangent through (`_restored` in transform/passes/simplify.py)."""
    G = np.zeros_like(W)
    total = 0.0
    for i in range(X.shape[0]):
        z = W @ X[i]
        G[:, 0] += z
        total += np.dot(z, z)
    return total + np.sum(G * G)


CASES = [
    (gmm_loops, _gmm_args(3, 4, 5), (0, 1, 2)),
    (tri_matvec, (RNG.standard_normal((5, 5)), RNG.standard_normal(5)), (0, 1)),
    (packed_tri, (RNG.standard_normal(15), RNG.standard_normal(5)), (0, 1)),
    (histogram, (RNG.standard_normal(7), np.array([0, 3, 1, 0, 3, 3, 2])), (0,)),
    (stencil, (RNG.standard_normal((5, 6)), 0.2), (0,)),
    (pairwise, (RNG.standard_normal((4, 3)),), (0,)),
    (compact, (RNG.standard_normal(9),), (0,)),
    (column_accumulate, (RNG.standard_normal((4, 5)), RNG.standard_normal((6, 5))), (0, 1)),
    (rnn_loops, (0.4 * RNG.standard_normal((4, 3)), 0.4 * RNG.standard_normal((4, 4)),
                 RNG.standard_normal((5, 3))), (0, 1)),
]


@pytest.mark.parametrize("fn,args,wrt", CASES, ids=[c[0].__name__ for c in CASES])
def test_values_and_gradients(fn, args, wrt, mode):
    d = llgrad.differentiate(fn, wrt=wrt)
    value, grads = d.value_and_grad(*args)
    grads = grads if isinstance(grads, tuple) else (grads,)
    assert value == pytest.approx(fn(*[np.copy(a) for a in args]), rel=1e-12, abs=1e-12)
    assert d(*args) == pytest.approx(value, rel=1e-14, abs=1e-14)
    # central differences round off about 1e-16 |value| / eps: 1e-7 for column_accumulate's
    # value of ~1e3, whose small entries fail a fixed atol of 1e-8 by that much
    atol = 1e-8 * max(1.0, abs(value) / 100)
    for g, fd in zip(grads, finite_differences(fn, args, wrt)):
        np.testing.assert_allclose(g, fd, rtol=1e-6, atol=atol)
    assert d.inspect(*args).stats["path"] == "staged"


@pytest.mark.parametrize("fn,args,wrt", CASES, ids=[c[0].__name__ for c in CASES])
def test_no_array_is_copied_inside_a_loop(fn, args, wrt):
    """Every element update and every loop's carried array, forward and reverse, lives in
    one buffer (Note [Updates in place], Note [Running cotangents]); the stencil's swap
    `u, u_new = u_new, u` (and its cotangents' in the reverse sweep) swaps two pointers
    (Note [Swapped carried arrays] in codegen/inplace.py)."""
    d = llgrad.differentiate(fn, wrt=wrt)
    d(*args), d.value_and_grad(*args)  # compile both entries
    stats = d.inspect(*args).stats
    assert stats["array copies in loops (forward)"] == 0
    assert stats["array copies in loops (joint)"] == 0


@pytest.mark.parametrize("fn,args,wrt", CASES, ids=[c[0].__name__ for c in CASES])
def test_indices_proven_or_checked_before_are_not_checked(fn, args, wrt):
    """The loops' indices are counters, sums of them and the triangle walks' `pos` (Note
    [Integer ranges] in codegen/ranges.py): no index check or wrap of a negative index is
    emitted for them. The histogram's `h[idx[t]]` is checked (and wrapped) in the forward;
    its reverse sweep rereads and scatters at the indices the forward checked, and checks
    nothing more (Note [Replayed indices] in transform/ad.py)."""
    d = llgrad.differentiate(fn, wrt=wrt)
    d(*args), d.value_and_grad(*args)  # compile both entries
    stats = d.inspect(*args).stats
    checks = [stats[f"index checks ({e})"] for e in ("forward", "joint")]
    wraps = [stats[f"index wraps ({e})"] for e in ("forward", "joint")]
    assert checks == ([1, 1] if fn is histogram else [0, 0])  # h[idx[t]]'s, once
    assert (wraps[0] > 0) == (wraps[1] > 0) == (fn is histogram)


def test_a_counter_advanced_under_an_if_is_proven_in_range(mode):
    """compact's `out[cnt]`: cnt gains 0 or 1 an iteration, so it stays below x.shape[0]."""
    x = RNG.standard_normal(9)
    d = llgrad.differentiate(compact)
    value, grad = d.value_and_grad(x)
    assert value == pytest.approx(compact(x), rel=1e-12)
    np.testing.assert_allclose(grad, finite_differences(compact, (x,), (0,))[0], rtol=1e-6)
    if mode == "native":
        d(x)
        stats = d.inspect(x).stats
        assert [stats[f"index {k} ({e})"] for k in ("checks", "wraps")
                for e in ("forward", "joint")] == [0, 0, 0, 0]


@pytest.mark.parametrize("start", [1, -16])
def test_an_index_out_of_range_in_a_loop_raises_at_its_line(start, mode):
    """A walk that starts one too far reads past the end of Lp (or before its start): the
    forward and the gradient raise numpy's IndexError at the line, as plain Python does."""
    Lp, x = RNG.standard_normal(15), RNG.standard_normal(5)
    bad = 15 if start > 0 else start
    with pytest.raises(IndexError, match=f"index {bad} is out of bounds for axis 0 with size 15"):
        packed_tri_from(Lp, x, start)
    d = llgrad.differentiate(packed_tri_from, wrt=(0, 1))
    where = rf"index {bad} is out of bounds for axis 0 with size 15\n  at .*test_numba_style" \
        rf".py:\d+ \(in packed_tri_from\)\n    s \+= Lp\[pos\] \* x\[j\]"
    for run in (d, d.grad, d.value_and_grad):
        with pytest.raises(IndexError, match=where):
            run(Lp, x, start)


def test_negative_indices_the_ir_does_not_bound_still_wrap(mode):
    """pos from -3 reads Lp[-3], Lp[-2], Lp[-1] (numpy's last elements), then Lp[0], ...:
    forward and gradient as plain Python and finite differences."""
    Lp, x = RNG.standard_normal(15), RNG.standard_normal(5)
    d = llgrad.differentiate(packed_tri_from, wrt=(0, 1))
    value, grads = d.value_and_grad(Lp, x, -3)
    assert value == pytest.approx(packed_tri_from(Lp, x, -3), rel=1e-12)
    fds = finite_differences(lambda a, b: packed_tri_from(a, b, -3), (Lp, x), (0, 1))
    for g, fd in zip(grads, fds):
        np.testing.assert_allclose(g, fd, rtol=1e-6, atol=1e-8)


def test_gmm_nest_is_not_peeled_and_grows_with_the_source():
    """The forward IR has one index_put per element assignment of the source (a peeled
    iteration would add its own), one for_loop per `for`, and the same ops whatever the
    sizes (all distinct, the trip count k - 1 too, and none 1: equal constants are one op)."""
    small = llgrad.differentiate(gmm_loops, wrt=(0, 1, 2)).inspect(*_gmm_args(5, 8, 13))
    big = llgrad.differentiate(gmm_loops, wrt=(0, 1, 2)).inspect(*_gmm_args(6, 9, 40))
    for ins in (small, big):
        text = str(ins.forward_ir)
        assert text.count("= index_put ") == 5, text
        assert text.count("= for_loop ") == 9, text
    for key in ("ops (traced)", "ops (forward)", "ops (forward+backward)"):
        assert small.stats[key] == big.stats[key], key


def long_rows(x):
    """A staged loop of 2998 iterations over array elements: LLVM's vectoriser may gain on it,
    so it is compiled at O2 (Note [Choosing the optimisation level] in codegen/compile.py)."""
    y = np.zeros(3000)
    for i in range(1, 2999):
        y[i] = x[i - 1] * x[i + 1]
    return np.sum(y)


def test_long_element_loops_are_compiled_at_o2_short_ones_below():
    x = RNG.standard_normal(3000)
    d = llgrad.differentiate(long_rows)
    assert d(x) == pytest.approx(long_rows(x), rel=1e-12)
    assert d.inspect(x).stats["opt level (forward)"] == 2
    args = _gmm_args(3, 4, 5)  # loops of 3, 4 and 5 iterations
    g = llgrad.differentiate(gmm_loops)
    g(*args)
    # O1, or the light pipeline (level 0) for a module this small (codegen/compile.py)
    assert g.inspect(*args).stats["opt level (forward)"] < 2


def strided_walk(w, x):
    """Counters the body advances by a fixed step (`pos += 2`, `back -= 1`): the reverse
    sweep computes them from the iteration number instead of taping them."""
    pos, back, total = 1, x.shape[0] - 1, 0.0
    for i in range(4):
        total += w[pos] * x[back] + w[i] * w[i]
        pos += 2
        back -= 1
    return total


def test_counters_are_recomputed_not_taped(mode):
    w, x = RNG.standard_normal(9), RNG.standard_normal(6)
    d = llgrad.differentiate(strided_walk, wrt=(0, 1))
    value, grads = d.value_and_grad(w, x)
    assert value == pytest.approx(strided_walk(w, x), rel=1e-12)
    for g, fd in zip(grads, finite_differences(strided_walk, (w, x), (0, 1))):
        np.testing.assert_allclose(g, fd, rtol=1e-6, atol=1e-8)
    tapes = str(d.inspect(w, x).backward_ir).count("tape_new")
    assert tapes == 0, d.inspect(w, x).backward_ir


def varying_steps(w, x):
    """`pos += i`, `back -= i + 1`: steps that vary with the index, which the reverse sweep
    recovers backwards from the loop's result (Note [Counters recovered backwards])."""
    pos, back, total = 0, x.shape[0] - 1, 0.0
    for i in range(5):
        total += w[pos] * x[back] + w[i] * w[i]
        pos += i
        back -= i + 1
    return total


def ragged_triangle(w, x, m):
    """An inner loop advancing `pos` with bounds from data (m[0] may be 0: no iteration)."""
    pos, total = 0, 0.0
    for i in range(m[0]):
        for r in range(i, m[1]):
            total += w[pos] * x[r] * x[i]
            pos += 1
    return total


@pytest.mark.parametrize("fn,args", [
    (varying_steps, (RNG.standard_normal(7), RNG.standard_normal(15))),
    (packed_tri, (RNG.standard_normal(15), RNG.standard_normal(5))),
    (ragged_triangle, (RNG.standard_normal(9), RNG.standard_normal(4), np.array([3, 4]))),
    (ragged_triangle, (RNG.standard_normal(9), RNG.standard_normal(4), np.array([0, 4]))),
], ids=["varying_steps", "packed_tri", "ragged_triangle", "ragged_triangle_empty"])
def test_counters_are_recovered_backwards_not_taped(fn, args, mode):
    d = llgrad.differentiate(fn, wrt=(0, 1))
    value, grads = d.value_and_grad(*args)
    assert value == pytest.approx(fn(*args), rel=1e-12, abs=1e-12)
    for g, fd in zip(grads, finite_differences(fn, args, (0, 1))):
        np.testing.assert_allclose(g, fd, rtol=1e-6, atol=1e-8)
    ir_text = str(d.inspect(*args).backward_ir)
    assert "i64" not in "".join(line for line in ir_text.splitlines() if "tape_new" in line)


def test_gmm_tapes_the_triangle_counter_once_per_component_not_per_column():
    """The triangle's `pos` is an i64 taped per (point, component), the middle loop's result
    the enclosing sweep starts from, not per column of the triangle (d times more)."""
    d, k, n = 4, 3, 5
    args = _gmm_args(d, k, n)
    ir_text = str(llgrad.differentiate(gmm_loops, wrt=(0, 1, 2)).inspect(*args).backward_ir)
    rows = [int(m) for m in re.findall(r"i64\[(\d+)\] = tape_new", ir_text)]
    assert rows and max(rows) == n * k


def relax_swap(x):
    """Two numpy work arrays made inside, updated element by element, exchanged each step."""
    u = np.zeros(3)
    v = np.ones(3)
    for s in range(x.shape[0]):
        for r in range(3):
            v[r] = 0.5 * u[r] + x[s] * (r + 1)
        u, v = v, u
    return np.sum(u * u)


def test_numpy_work_arrays_exchanged_in_a_staged_loop(mode):
    # before: a bare "truth value of an array is ambiguous" ValueError from the stager
    x = np.array([0.5, -1.0, 2.0, 0.25])
    d = llgrad.differentiate(relax_swap)
    value, grad = d.value_and_grad(x)
    assert value == pytest.approx(relax_swap(x.copy()), rel=1e-14)
    np.testing.assert_allclose(grad, finite_differences(relax_swap, (x,), (0,))[0],
                               rtol=1e-6, atol=1e-8)
    assert d.inspect(x).stats["path"] == "staged"


# Updates under an `if` in a loop (Note [Updates in place under if] in codegen/inplace.py):
# in place where the array dies at the cond, copied where anything can still see it.
def both_branches(x):
    out = np.zeros(x.shape[0])
    for i in range(x.shape[0]):
        if x[i] > 0:
            out[i] = x[i] ** 2
        else:
            out[i] = -x[i]
    return np.sum(out * x)


def read_after_the_if(x):
    out = np.ones(x.shape[0])
    acc = 0.0
    for i in range(x.shape[0]):
        if x[i] > 0:
            out[i] = x[i] * 3.0
        acc = acc + np.sum(out * x)  # out is read after the cond: not overwritten before
    return acc


def read_in_the_branch(x):
    out = np.ones(x.shape[0])
    acc = 0.0
    for i in range(x.shape[0]):
        if x[i] > 0:
            out[i] = x[i] * 3.0
            acc = acc + out[(i + 1) % x.shape[0]] * out[i]
    return acc + np.sum(out)


def old_copy_kept(x):
    out = np.ones(x.shape[0])
    acc = 0.0
    for i in range(x.shape[0]):
        old = out.copy()
        if x[i] > 0:
            out[i] = x[i] * 3.0
        acc = acc + np.sum(old * x)
    return acc + np.sum(out)


def top_level_if(x):
    y = np.sin(x)
    if x[0] > 0:
        y[1] = x[2] * 5
    return np.sum(y * y)


def view_in_a_branch(x):
    out = np.sin(x) * 1.0
    for i in range(3):
        if x[i] > 0:
            out = out[::-1]  # a view of the array the other branch yields unchanged
    return np.sum(out * np.arange(1.0, x.shape[0] + 1.0))


@pytest.mark.parametrize("fn", [compact, both_branches, read_after_the_if, read_in_the_branch,
                                old_copy_kept, top_level_if, view_in_a_branch])
def test_updates_under_an_if(fn, mode):
    mixed = RNG.standard_normal(7)
    mixed += np.where(mixed >= 0, 0.1, -0.1)  # (finite differences stay on one side of 0)
    for x in (mixed, -(RNG.random(7) + 0.1), RNG.random(7) + 0.1):
        d = llgrad.differentiate(fn)
        value, grad = d.value_and_grad(x)
        assert value == pytest.approx(fn(x.copy()), rel=1e-12, abs=1e-12)
        assert d(x) == pytest.approx(value, rel=1e-14, abs=1e-14)
        np.testing.assert_allclose(grad, finite_differences(fn, (x,), (0,))[0], rtol=1e-6,
                                   atol=1e-8)


@pytest.mark.parametrize("fn", [compact, both_branches])
def test_updates_under_an_if_copy_nothing(fn):
    x = RNG.standard_normal(9)
    d = llgrad.differentiate(fn)
    d(x), d.value_and_grad(x)  # compile both entries
    stats = d.inspect(x).stats
    assert (stats["array copies in loops (forward)"],
            stats["array copies in loops (joint)"]) == (0, 0)
