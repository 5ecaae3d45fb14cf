"""Loops as a new user writes them, found compiling badly and fixed: a numpy work array sliced
at the loop counter (`A[i, :i] @ x[:i]` in Gauss-Seidel, x = np.zeros(n)) concretised the
counter and unrolled the loop with a wrong reason ("indexes a Python list"); a list a staged
loop appended to and then given to np.array was stacked back item by item (n getitems
forward, n scatter-adds backward: 1846 ops for 300 steps; transform/passes/simplify.py
`_merge_rows`); a list read inside the index of a store (`K[idx[a], idx[b]] += ke[a, b]` in
a finite-element assembly) was left to Python, which concretised the counter; a body binding a
variable to a new dict or list of the same structure at every step (`s = {"x": ..., "y":
...}`, Note [Containers rebuilt by a loop body] in tracer/staging.py) was unrolled (1000 steps
of a two-entry dict: 15.7 s to compile), and a Python `while` over such state ran silently as
Python. A body that also changes the old container in place keeps Python's aliasing."""
from __future__ import annotations

import warnings
from collections import OrderedDict

import numpy as np
import pytest

import llgrad
from tests.e2e.conftest import finite_differences

N = 20  # (loops of at most 16 trips are unrolled by design)
A = 4.0 * np.eye(N) + np.eye(N, k=1) + np.eye(N, k=-1) + 0.5 * np.eye(N, k=3)


def gauss_seidel(b):
    x = np.zeros(N)
    for _ in range(30):
        for i in range(N):
            s = b[i] - A[i, :i] @ x[:i] - A[i, i + 1:] @ x[i + 1:]
            x[i] = s / A[i, i]
    return np.sum(x ** 2)


def weighted_prefixes(w):
    c = np.cos(np.arange(N) * 0.3)  # a numpy work array, sliced at the counter
    tot = 0.0
    for i in range(N):
        tot = tot + np.sum(c[:i] * w[:i]) * w[i] + c[i:] @ w[i:]
    return tot


def fem_assembly(k):
    n = 20
    h = 1.0 / n
    K = np.zeros((n + 1, n + 1))
    f = np.zeros(n + 1)
    for e in range(n):
        ke = k[e] / h * np.array([[1.0, -1.0], [-1.0, 1.0]])
        idx = [e, e + 1]
        for a in range(2):
            for b in range(2):
                K[idx[a], idx[b]] += ke[a, b]  # a list read inside a store's index
        f[e] += h / 2
        f[e + 1] += h / 2
    u = np.linalg.solve(K[1:-1, 1:-1], f[1:-1])
    return np.sum(u ** 2)


def lotka(params):
    a, b, c, d = params
    s = {"x": 10.0, "y": 5.0}
    for _ in range(300):
        dx = a * s["x"] - b * s["x"] * s["y"]
        dy = d * s["x"] * s["y"] - c * s["y"]
        s = {"x": s["x"] + 0.01 * dx, "y": s["y"] + 0.01 * dy}
    return s["x"] + s["y"]


def oscillator(k):
    state = [1.0, 0.0]
    for _ in range(300):
        x, v = state
        state = [x + 0.01 * v, v - 0.01 * k * x]
    return state[0] ** 2 + state[1]


def momentum(w):
    st = OrderedDict(p={"w": w, "m": np.zeros(3)}, t=0)
    while st["t"] < 40:  # nested containers, an int leaf, a while loop
        m = 0.9 * st["p"]["m"] + 0.2 * st["p"]["w"]
        st = OrderedDict(p={"w": st["p"]["w"] - 0.1 * m, "m": m}, t=st["t"] + 1)
    return np.sum(st["p"]["w"] ** 2) + st["t"]


def ar_process(phi, n=200):
    rng = np.random.default_rng(0)
    eps = rng.standard_normal(n)
    xs = [0.0]
    for t in range(1, n):
        xs.append(phi * xs[-1] + eps[t])
    xs = np.array(xs)
    return np.mean(xs ** 2) + xs[3] * xs[-1]


@pytest.mark.parametrize("fn,args", [(gauss_seidel, (np.linspace(1.0, 2.0, N),)),
                                     (weighted_prefixes, (np.linspace(-1.0, 1.0, N),)),
                                     (fem_assembly, (1.0 + 0.1 * np.sin(np.arange(20.0)),)),
                                     (ar_process, (0.7,)),
                                     (lotka, (np.array([1.1, 0.4, 0.4, 0.1]),)),
                                     (oscillator, (2.0,)),
                                     (momentum, (np.array([1.0, -2.0, 0.5]),))],
                         ids=["gauss_seidel", "prefixes", "fem", "ar", "dict_state",
                              "list_state", "nested_while_state"])
def test_staged_with_exact_values_and_gradients(fn, args, mode):
    f = llgrad.differentiate(fn)
    with warnings.catch_warnings():
        warnings.simplefilter("error", llgrad.PerformanceWarning)  # nothing unrolled
        value, grad = f.value_and_grad(*args)
    np.testing.assert_allclose(value, fn(*args), rtol=1e-12)
    np.testing.assert_allclose(grad, finite_differences(fn, args, (0,))[0], rtol=1e-6,
                               atol=1e-9)
    stats = f.inspect(*args).stats
    assert stats["path"] == "staged"
    assert stats["ops (traced)"] < 700  # one body per loop, not one per step


def test_np_array_of_an_appended_list_reads_the_loop_buffer_once():
    f = llgrad.differentiate(ar_process)
    f.value_and_grad(0.7)
    stats = f.inspect(0.7).stats
    joint = stats["ops (joint)"]
    assert joint.get("scatter_add", 0) <= 2  # xs[3] and xs[-1]; 201 before: one per item
    assert joint.get("getitem", 0) < 10


def test_the_old_container_changed_in_place_keeps_python_aliasing(mode):
    def alias(x):
        d = {"a": x}
        e = d
        for _ in range(5):
            d["a"] = d["a"] * 2  # changes the dict `e` also names, in the first step only
            d = {"a": d["a"] + 1}
        return e["a"] + d["a"]

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", llgrad.PerformanceWarning)
        value, grad = llgrad.value_and_grad(alias)(1.5)
    assert value == alias(1.5)
    assert grad == pytest.approx(finite_differences(alias, (1.5,), (0,))[0], rel=1e-6)


def test_a_container_of_another_structure_still_unrolls_with_its_reason():
    def grow(x):
        s = {"a": x}
        for i in range(3):
            s = {**s, f"k{i}": x * i}  # a new key every step
        return sum(s.values())

    with pytest.warns(llgrad.PerformanceWarning, match="changes `s` into a new dict"):
        value = llgrad.differentiate(grow)(2.0)
    assert value == grow(2.0)


def test_a_container_rebuilt_on_one_path_of_a_traced_if_is_merged(mode):
    def decay_while_large(w):
        s = {"x": w, "steps": [0.0, 1.0]}
        for _ in range(30):
            if np.sum(s["x"]) > 1.0:  # traced: a new dict on one path, the old on the other
                s = {"x": s["x"] * 0.9, "steps": [s["steps"][0] + 1.0, s["steps"][1]]}
        return np.sum(s["x"] ** 2) + s["steps"][0]

    w = np.array([0.5, 0.4, 0.3])
    value, grad = llgrad.value_and_grad(decay_while_large)(w)
    assert value == pytest.approx(decay_while_large(w), rel=1e-12)
    np.testing.assert_allclose(grad, finite_differences(decay_while_large, (w,), (0,))[0],
                               rtol=1e-6)

    def other_keys(w):
        s = {"x": w}
        if np.sum(w) > 0:
            s = {"y": w}
        return np.sum(s.get("x", 0.0))

    with pytest.raises(llgrad.errors.LLGradError, match="other keys or length"):
        llgrad.grad(other_keys)(w)
