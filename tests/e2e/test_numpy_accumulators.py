"""`acc = np.zeros(n)` then `acc += traced` (Note [Traced values added into numpy arrays]):
the name is rebound to the traced sum where numpy's in-place write could be seen by nothing
else, at the top of a function, in staged loops and in traced branches; refused with the
line and the rewrite where something else holds the array."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import llgrad
from llgrad.runtime.errors import UnsupportedError
from tests.e2e.test_fuzz_regressions import check

XS = [np.array(v) for v in ([1.0, 2.0, 3.0], [-1.0, 2.5, 0.3], [-1.0, -2.0, 0.5])]


def top_level(x):
    acc = np.zeros(3)
    acc += x * 2
    acc -= np.sin(x)
    acc *= x
    acc /= 1.5
    return np.sum(acc ** 2)


def in_loop(x):
    acc = np.zeros(3)
    for i in range(6):
        acc *= 0.5
        acc += np.sin(x) * i
    return acc


def gradient_accumulator(x):  # the way a hand-written batch gradient is summed
    w = np.array([[0.5, -1.0, 2.0], [1.5, 0.25, -0.75]])
    grad = np.zeros_like(x)
    for k in range(w.shape[0]):
        r = w[k] @ x - 1.0
        grad += r * w[k]
    return grad


def in_branch(x):
    acc = np.ones(3)
    if np.sum(x) > 0:
        acc += x
    else:
        acc -= x * x
    return acc


def matmul_in_place(x):
    m = np.eye(3)
    m @= np.diag(x)
    return m


@pytest.mark.parametrize("fn", [top_level, in_loop, gradient_accumulator, in_branch,
                                matmul_in_place])
def test_accumulator_rebound(fn, mode):
    check(fn, XS)


def test_accumulator_loop_is_staged():
    f = llgrad.differentiate(in_loop)
    with warnings.catch_warnings():
        warnings.simplefilter("error", llgrad.PerformanceWarning)
        f(np.ones(3))
    assert f.inspect(np.ones(3)).path == "staged"


G = np.zeros(3)


def through_global(x):
    acc = G
    acc += x
    return np.sum(acc)


def through_list(x):
    acc = np.zeros(3)
    keep = [acc]
    acc += x
    return np.sum(keep[0] * x)


def list_then_loop(x):
    acc = np.zeros(3)
    keep = {"a": [acc]}
    for _ in range(3):
        acc += x
    return np.sum(keep["a"][0] * x)


def view_in_list_then_loop(x):
    acc = np.zeros(3)
    rows = [acc[:2]]
    for _ in range(3):
        acc += x
    return np.sum(rows[0])


def other_name(x):
    acc = np.zeros(3)
    b = acc
    acc += x
    return np.sum(b * x)


def a_view(x):
    acc = np.ones((2, 3))[0]
    acc += x
    return np.sum(acc)


@pytest.mark.parametrize("fn, why", [
    (through_global, r"refers to \(a global\)"),
    (through_list, r"bound to `acc` and `keep\[0\]`"),
    (list_then_loop, r"the same array is also `keep\['a'\]\[0\]`"),
    (view_in_list_then_loop, r"shares memory with `rows\[0\]`"),
    (other_name, "bound to `acc` and `b`"),
    (a_view, "a view of another array"),
])
def test_accumulator_seen_elsewhere_is_refused(fn, why):
    with pytest.raises(UnsupportedError, match=why) as e:
        llgrad.differentiate(fn)(np.ones(3))
    assert "test_numpy_accumulators.py" in str(e.value) and "acc = acc" in str(e.value) \
        or "copy" in str(e.value)
    assert np.all(G == 0)


def test_integer_accumulator_keeps_numpy_casting_error():
    def f(x):
        acc = np.zeros(3, dtype=np.int64)
        acc += x
        return np.sum(acc)
    with pytest.raises(TypeError, match="same_kind"):
        llgrad.differentiate(f)(np.ones(3))
