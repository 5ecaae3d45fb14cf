"""Programs the compiler's differential fuzzer (tests/fuzz) found wrong, minimised.

Each is checked against plain Python (values, and dtypes of array outputs) and its gradient
against central finite differences, through the interpreter and natively (`mode`), for
inputs that take every path; where llgrad cannot follow the program, the error must name the
user's line and say how to rewrite it.
"""
from __future__ import annotations

import numpy as np
import pytest

import llgrad
from llgrad.runtime.errors import LLGradError
from tests.e2e.conftest import finite_differences

XS = [np.array(v) for v in ([1.0, 2.0, 3.0], [-1.0, 2.0, 3.0], [-1.0, -2.0, 3.0],
                            [-1.0, -1.0, -1.0], [-0.5, 0.7, 0.3])]


def _outputs(r) -> tuple:
    return r if isinstance(r, tuple) else (r,)


def check(fn, xs=XS):
    """llgrad's `fn(x)` equals plain Python's and its gradient (of a scalar of the outputs)
    equals finite differences, for each x in `xs`."""
    def loss(x):
        return sum(np.sum(np.sin(o)) for o in _outputs(fn(x)))
    f, dl = llgrad.differentiate(fn), llgrad.differentiate(loss)
    for x in xs:
        want, got = _outputs(fn(x.copy())), _outputs(f(x.copy()))
        assert len(got) == len(want), (x, got, want)
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w, rtol=1e-12, err_msg=str(x))
            if np.ndim(w):
                assert np.asarray(g).dtype == np.asarray(w).dtype
        value, grad = dl.value_and_grad(x.copy())
        np.testing.assert_allclose(value, loss(x.copy()), rtol=1e-12)
        np.testing.assert_allclose(grad, finite_differences(loss, [x.copy()], [0])[0],
                                   rtol=1e-6, atol=1e-8, err_msg=str(x))


# ---- records (tuples) made on the paths of a traced `if` ---------------------------------
def return_tuple(x):  # was: "`__lg_retval` holds different Python objects (tuple and tuple)"
    if x[0] > 0:
        return (x * 2, x[1])
    return (x * 3, x[2])


def return_tuple_twice(x):
    if x[0] > 0:
        return (x * 2, x[1])
    y = x + 1
    if x[1] > 0:
        return (y, x[0])
    return (x * 3, x[2])


def tuple_in_branches(x):
    if x[0] > 0:
        t = (x * 2, x[1])
    else:
        t = (x * 3, x[2])
    return t[0] * t[1]


def tuple_beside_raise(x):
    if x[0] > 5.0:
        raise ValueError("too large")
    else:
        t = (x * 2, x[1])
    return t[0] * t[1]


# ---- records first bound in a staged loop ------------------------------------------------
def return_tuple_in_loop(x):  # was: silently (zeros, 0.0)
    for i in range(3):
        if x[i] > 0:
            return (x * i, x[i])
    return (x, x[0])


def return_tuple_in_while(x):
    if x[2] > 2.0:
        return (x, x[1])
    k = 0
    while k < 3:
        if x[k] > 0.5:
            return (x * 2, x[k])
        k += 1
    return (x * 3, x[0])


def tuple_bound_in_loop(x):
    for i in range(3):
        t = (x * i, x[i])
    return t[0] * t[1]


def return_in_loop_after_if(x):
    acc = x[0]
    if x[1] > 2.5:
        return acc * 2
    for i in range(3):
        acc = acc + x[i]
        if acc > 1:
            return acc
    return acc * 0.5


@pytest.mark.parametrize("fn", [return_tuple, return_tuple_twice, tuple_in_branches,
                                tuple_beside_raise, return_tuple_in_loop, return_tuple_in_while,
                                tuple_bound_in_loop, return_in_loop_after_if])
def test_records_on_paths(fn, mode):
    check(fn)


def tuple_of_two_shapes(x):
    if x[0] > 0:
        t = (x * 2, x[1])
    else:
        t = (x * 2, x[1], x[2])
    return t[0]


def test_records_of_different_structure_are_refused_at_the_if(mode):
    with pytest.raises(LLGradError, match=r"(?s)`t` holds a tuple of 2 items on one path.*"
                       r"a tuple of 3 items on the other.*test_fuzz_regressions.py:\d+.*"
                       r"same structure"):
        llgrad.differentiate(tuple_of_two_shapes)(XS[0])
