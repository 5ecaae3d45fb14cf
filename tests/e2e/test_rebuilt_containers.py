"""A loop body that binds a variable to a new dict or list of the same structure at every step
(`s = {"x": ..., "y": ...}`, `state = [x, v]`) is one staged loop carrying the container's
leaves (Note [Containers rebuilt by a loop body] in tracer/staging.py); it was unrolled (1000
steps of a two-entry dict: 15.7 s to compile). A body that also changes the old container in
place keeps Python's aliasing (the loop is unrolled, the value is Python's)."""
from __future__ import annotations

import warnings
from collections import OrderedDict

import numpy as np
import pytest

import llgrad
from tests.e2e.conftest import finite_differences


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


CASES = [(lotka, (np.array([1.1, 0.4, 0.4, 0.1]),)),
         (oscillator, (2.0,)),
         (momentum, (np.array([1.0, -2.0, 0.5]),))]


@pytest.mark.parametrize("fn,args", CASES, ids=lambda c: getattr(c, "__name__", ""))
def test_staged_with_exact_values_and_gradients(fn, args, mode):
    f = llgrad.differentiate(fn)
    with warnings.catch_warnings():
        warnings.simplefilter("error", llgrad.PerformanceWarning)  # no unrolling
        value, grad = f.value_and_grad(*args)
    np.testing.assert_allclose(value, fn(*args), rtol=1e-12)
    fd = finite_differences(fn, args, (0,))[0]
    np.testing.assert_allclose(grad, fd, rtol=1e-6, atol=1e-8)
    stats = f.inspect(*args).stats
    assert stats["path"] == "staged"
    assert stats["ops (traced)"] < 60  # one body, not one per step


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
