"""Loops over lists of traced values of one shape (Note [Loops over lists of traced values] in
tracer/traced_builtins.py): staged as one loop over the items stacked, so the IR does not
grow with the list; values equal plain Python, gradients central differences, as lists."""
from __future__ import annotations

import warnings
from collections import namedtuple

import numpy as np
import pytest

import llgrad
from tests.corpus.check import _finite_differences, _leaves
from tests.e2e.conftest import finite_differences

RNG = np.random.default_rng(7)
W = RNG.standard_normal((4, 3))
Pair = namedtuple("Pair", "x y")


def over_arrays(w, xs):
    total = 0.0
    for x in xs:
        total = total + np.sum(np.tanh(x @ w))
    return total


def over_dicts(w, data):
    total = 0.0
    for d in data:
        total += np.sum((d["x"] @ w - d["y"]) ** 2)
    return total


def over_namedtuples(w, pairs):
    h = np.zeros(3)
    for p in pairs:
        h = np.tanh(p.x @ w + h) * p.y
    return np.sum(h)


def over_python_floats(x, ts):
    total = np.zeros(3, dtype=x.dtype)
    for t in ts:
        total = total + np.sin(x * t)  # a Python float keeps x's float32
    return np.sum(total)


def with_break(w, xs):
    total = 0.0
    for x in xs:
        if total > 3.0:
            break
        total = total + np.sum(np.abs(x @ w))
    return total


def _arrays(n):
    return [RNG.standard_normal(4) for _ in range(n)]


CASES = [
    (over_arrays, lambda n: (W, _arrays(n)), (0, 1)),
    (over_dicts, lambda n: (W, [{"x": RNG.standard_normal((2, 4)),
                                 "y": RNG.standard_normal((2, 3))} for _ in range(n)]), (0, 1)),
    (over_namedtuples, lambda n: (W, [Pair(RNG.standard_normal(4), RNG.standard_normal(3))
                                      for _ in range(n)]), (0, 1)),
    (over_python_floats, lambda n: (RNG.standard_normal(3), [float(t) for t in
                                                              np.linspace(0, 1, n)]), (0, 1)),
    (with_break, lambda n: (W, _arrays(n)), (0, 1)),
]


@pytest.mark.parametrize("fn,make,wrt", CASES, ids=[c[0].__name__ for c in CASES])
def test_values_and_gradients(fn, make, wrt, mode):
    args = make(12)
    d = llgrad.differentiate(fn, wrt=wrt)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no unrolled-loop or dynamic-path warning
        value, grads = d.value_and_grad(*args)
    assert value == pytest.approx(fn(*args), rel=1e-12, abs=1e-12)
    assert type(grads[1]) is type(args[1]) and len(grads[1]) == len(args[1])
    for g, fd in zip(grads, _finite_differences(fn, list(args), wrt, 1e-6)):
        got = _leaves(g)
        assert len(got) == len(fd)
        for a, b in zip(got, fd):
            np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("fn,make,wrt", CASES[:3], ids=[c[0].__name__ for c in CASES[:3]])
def test_the_ir_does_not_grow_with_the_list(fn, make, wrt):
    small, large = make(10), make(40)
    ops = [llgrad.differentiate(fn, wrt=wrt).inspect(*a).stats["ops (traced)"]
           for a in (small, large)]
    # (one stack of the 10 or 40 items per leaf: a reshape of each, then one concatenate)
    assert ops[1] - ops[0] <= 30 * len(_leaves(small[1][0])) + 2, ops


def test_float32_items_stay_float32():
    x = RNG.standard_normal(3).astype(np.float32)
    ts = [float(t) for t in np.linspace(0, 1, 9)]
    value = llgrad.differentiate(over_python_floats)(x, ts)
    assert type(value) is type(over_python_floats(x, ts)) is np.float32


def layers(x, params):
    """Items of different shapes (a network's layers) are iterated as Python, as before."""
    for W, b in params:
        x = np.tanh(x @ W + b)
    return np.sum(x)


def test_items_of_different_shapes_run_as_python(mode):
    sizes = [4, 5, 3, 6, 2, 5, 3, 4, 2]
    params = [(RNG.standard_normal((m, n)), RNG.standard_normal(n))
              for m, n in zip(sizes[:-1], sizes[1:])]
    x = RNG.standard_normal(4)
    value, g = llgrad.differentiate(layers).value_and_grad(x, params)
    assert value == pytest.approx(layers(x, params), rel=1e-12)
    np.testing.assert_allclose(g, finite_differences(layers, (x, params), (0,))[0],
                               rtol=1e-6, atol=1e-8)


# ---- xs[t] at a staged loop's counter (Note [Lists indexed by a traced index]) --------------
def indexed_rnn(w, xs):
    h = np.zeros(3)
    for t in range(len(xs)):
        h = np.tanh(xs[t] @ w + h)
    return np.sum(h)


def two_lists_back_in_time(w, xs, ys):
    """Two lists, a nest, and xs[-1] read at t = 1, k = 1 (a negative index wraps)."""
    total = 0.0
    for t in range(1, len(xs)):
        for k in range(2):
            total = total + np.sum((xs[t - 1 - k] @ w - ys[t]) ** 2)
    return total


def records_at_t(w, data):
    total = 0.0
    for t in range(len(data)):
        total = total + np.sum(data[t]["x"] @ w) * data[t]["s"]
    return total


INDEXED = [
    (indexed_rnn, lambda n: (0.5 * W, _arrays(n)), (0, 1)),
    (two_lists_back_in_time, lambda n: (W, _arrays(n), [RNG.standard_normal(3)
                                                         for _ in range(n)]), (0, 1, 2)),
    (records_at_t, lambda n: (W, [{"x": RNG.standard_normal(4), "s": float(RNG.standard_normal())}
                                  for _ in range(n)]), (0, 1)),
]


@pytest.mark.parametrize("fn,make,wrt", INDEXED, ids=[c[0].__name__ for c in INDEXED])
def test_lists_indexed_at_the_counter(fn, make, wrt, mode):
    args = make(6)
    d = llgrad.differentiate(fn, wrt=wrt)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # not unrolled
        value, grads = d.value_and_grad(*args)
    assert value == pytest.approx(fn(*args), rel=1e-12, abs=1e-12)
    for g, fd in zip(grads, _finite_differences(fn, list(args), wrt, 1e-6)):
        got = _leaves(g)
        assert len(got) == len(fd)
        for a, b in zip(got, fd):
            np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)
    # one loop whatever the length; 15 more items cost only their stacking (a reshape each,
    # and a conversion of a Python float), never a copy of the body
    small, large = make(5), make(20)
    assert "for_loop" in str(d.inspect(*large).forward_ir)
    ops = [d.inspect(*a).stats["ops (traced)"] for a in (small, large)]
    assert ops[1] - ops[0] <= 15 * 3 * sum(len(_leaves(a[0])) for a in small[1:]) + 4, ops


def reads_what_it_appends(W, h0):
    hs = [h0]
    for t in range(6):
        hs.append(np.tanh(hs[t] @ W))
    return np.sum(hs[-1])


def reads_the_previous_step(W, h0):
    """A time series as tutorials simulate it: xs[t - 1] in range(1, T), and an item this
    iteration appended read back at the counter."""
    xs, ys = [h0], [np.sum(h0)]
    for t in range(1, 7):
        xs.append(0.9 * np.tanh(xs[t - 1] @ W) + 0.1 * t)
        ys.append(np.sum(xs[t] ** 2))
    return np.sum(np.array(ys)) + np.sum(xs[3])


def reads_two_back(W, h0):
    hs = [h0, h0 * 0.5]
    for t in range(2, 6):
        hs.append(np.tanh(hs[t - 2] @ W) + hs[-1])
    return np.sum(hs[-1])


def reads_the_initial_condition(W, h0):
    hs = [h0]
    for t in range(4):  # hs[0] is h0 at every trip (it read the carried last item)
        hs.append(np.tanh(hs[-1] @ W) + hs[0])
    return np.sum(hs[-1]) + np.sum(hs[0])


READS_BACK = [reads_what_it_appends, reads_the_previous_step, reads_two_back,
              reads_the_initial_condition]


@pytest.mark.parametrize("fn", READS_BACK)
def test_a_list_read_at_the_counter_while_appended_to_stays_one_loop(fn, mode):
    """The item at the counter (plus a constant) stands at the same place in every
    iteration's list (Note [Containers in staged loops]): a carried item, or one appended
    earlier in the iteration; it was unrolled, one copy of the body a trip. hs[0] is the
    item from before the loop (it was the carried last item: a wrong value)."""
    W3, h0 = 0.5 * RNG.standard_normal((3, 3)), RNG.standard_normal(3)
    d = llgrad.differentiate(fn, wrt=(0, 1))
    with warnings.catch_warnings():
        warnings.simplefilter("error", llgrad.PerformanceWarning)
        value, grads = d.value_and_grad(W3, h0)
    assert value == pytest.approx(fn(W3, h0), rel=1e-12)
    for g, fd in zip(grads, finite_differences(fn, (W3, h0), (0, 1))):
        np.testing.assert_allclose(g, fd, rtol=1e-6, atol=1e-8)
    assert "for_loop" in str(d.inspect(W3, h0).forward_ir)


def reads_a_slice(W, h0):
    hs = [h0, h0 * 0.5]
    for t in range(4):
        hs.append(np.tanh(sum(hs[:2]) @ W) + hs[-1])
    return np.sum(hs[-1])


def wraps_around(W, h0):
    hs = [h0]
    for t in range(4):
        hs.append(np.tanh(hs[t - 1] @ W))  # hs[-1] at t = 0, as Python reads it
    return np.sum(hs[-1])


@pytest.mark.parametrize("fn", [reads_a_slice, wraps_around])
def test_other_reads_of_a_list_the_loop_appends_to_are_unrolled(fn, mode):
    """A slice of it, or an index that is negative at the first trip: unrolled, with the
    reason named, and Python's value."""
    W3, h0 = 0.5 * RNG.standard_normal((3, 3)), RNG.standard_normal(3)
    with pytest.warns(llgrad.PerformanceWarning, match="reads the list `hs` it appends to"):
        value = llgrad.differentiate(fn)(W3, h0)
    assert value == pytest.approx(fn(W3, h0), rel=1e-12)


def test_items_of_different_shapes_indexed_at_the_counter_are_unrolled(mode):
    xs = [RNG.standard_normal(4), RNG.standard_normal(4), RNG.standard_normal((4,))[:3]]

    def f(w, xs):
        total = 0.0
        for t in range(len(xs)):
            total = total + np.sum(xs[t]) * w
        return total
    value = llgrad.differentiate(f)(2.0, xs)
    assert value == pytest.approx(f(2.0, xs), rel=1e-12)


# ---- bodies that change the list: Python's iteration sees the changes ------------------------
def replaces_a_later_item(w, xs):
    xs = list(xs)
    total = 0.0
    for x in xs:
        xs[-1] = xs[-1] * 2.0  # the last item read is doubled len(xs) times
        total = total + np.sum(x * w)
    return total


def appends_to_what_it_iterates(w, xs):
    xs = list(xs)
    total = 0.0
    for x in xs:
        total = total + np.sum(x * w)
        if len(xs) < 12:
            xs.append(x * 0.5)  # iterated too
    return total


def indexed_while_replacing(w, xs):
    xs = list(xs)
    total = 0.0
    for t in range(len(xs)):
        total = total + np.sum(xs[t] * w)
        xs[-1] = xs[-1] * 2.0
    return total


@pytest.mark.parametrize("fn", [replaces_a_later_item, appends_to_what_it_iterates,
                                indexed_while_replacing])
def test_a_body_changing_the_list_sees_its_changes(fn, mode):
    args = (RNG.standard_normal(3), [RNG.standard_normal(3) for _ in range(10)])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", llgrad.PerformanceWarning)  # (unrolled: named)
        value, grad = llgrad.differentiate(fn).value_and_grad(*args)
    assert value == pytest.approx(fn(*args), rel=1e-12)
    np.testing.assert_allclose(grad, finite_differences(fn, args, (0,))[0], rtol=1e-6,
                               atol=1e-7)
