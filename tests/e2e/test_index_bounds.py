"""Traced indices numpy would reject raise IndexError at the user's line, natively and in the
interpreter (issue 10 item 2); indices numpy accepts (negative ones wrap) give numpy's values
and finite-difference gradients. Each use case runs as plain Python first: the error (or the
value) llgrad must reproduce is numpy's."""
from __future__ import annotations

import inspect

import numpy as np
import pytest

import llgrad
from tests.e2e.conftest import finite_differences

FILE = __file__.rsplit("/", 1)[-1]


def line_of(fn, text: str) -> int:
    lines, first = inspect.getsourcelines(fn)
    return first + next(k for k, s in enumerate(lines) if text in s)


def gather(x, idx):
    return np.sum(x[idx] ** 2)


def put(x, idx):
    z = x * 2.0
    z[idx] = 1.0
    return np.sum(z * x)


def shifted_sum(x):
    acc = 0.0
    for i in range(x.shape[0]):
        acc += x[i + 1]
    return acc


def shifted_copy(x):
    z = np.zeros(x.shape[0])
    for i in range(x.shape[0]):
        z[i + 1] = x[i]
    return np.sum(z * z)


def through_an_index_array(x, idx):
    acc = 0.0
    for i in range(idx.shape[0]):
        acc += x[idx[i]] * x[i]
    return acc


def while_counter(x, n):
    k = 0
    s = 0.0
    while k < n:
        s = s + np.sin(x[k])
        k = k + 1
    return s


def pick_columns(x, target):
    return np.sum(x[np.arange(x.shape[0]), target])


def concretised(x, idx):
    if float(x[0]) > 0:  # the dynamic path: traced per call, eagerly
        return np.sum(x[idx] ** 2)
    return np.sum(x)


CASES = [  # (function, args, the source text of the indexing line)
    (gather, (np.arange(5.0), np.array([0, 5])), "x[idx] ** 2"),
    (gather, (np.arange(5.0), np.array([0, 100_000_000])), "x[idx] ** 2"),
    (gather, (np.arange(5.0), np.array([2, -6])), "x[idx] ** 2"),
    (gather, (np.arange(5.0), np.array(7)), "x[idx] ** 2"),
    (put, (np.arange(5.0), np.array([1, 100_000_000])), "z[idx] = 1.0"),
    (put, (np.arange(5.0), np.array([-6])), "z[idx] = 1.0"),
    (shifted_sum, (np.arange(5.0),), "x[i + 1]"),
    (shifted_copy, (np.arange(5.0),), "z[i + 1] = x[i]"),
    (through_an_index_array, (np.arange(5.0), np.array([0, 4, -5, 5, 1])), "x[idx[i]]"),
    (while_counter, (np.arange(5.0), np.array(6)), "np.sin(x[k])"),
    (pick_columns, (np.ones((3, 4)), np.array([0, 4, 1])), "target]"),
    (concretised, (np.arange(5.0) + 1.0, np.array([1, 5])), "x[idx] ** 2"),
]


@pytest.mark.parametrize("fn, args, text", CASES,
                         ids=lambda c: getattr(c, "__name__", None) or "")
def test_out_of_bounds_raises_index_error_at_the_line(mode, fn, args, text):
    with pytest.raises(IndexError) as plain:
        fn(*args)
    f = llgrad.differentiate(fn)
    for call in (f, f.grad):
        with pytest.raises(IndexError) as e:
            call(*args)
        msg = str(e.value)
        assert msg.startswith(str(plain.value)), msg
        assert f"{FILE}:{line_of(fn, text)} (in {fn.__name__})" in msg
        assert text in msg and "How to fix" in msg


VALID = [
    (gather, (np.arange(5.0) + 1.0, np.array([0, 4, -1, -5, 4]))),
    (gather, (np.arange(5.0) + 1.0, np.array([[-2], [3]]))),
    (put, (np.arange(5.0) + 1.0, np.array([-1, 0]))),
    (through_an_index_array, (np.arange(5.0) + 1.0, np.array([0, 4, -5, -1, 1]))),
    (while_counter, (np.arange(5.0) + 1.0, np.array(5))),
    (pick_columns, (np.arange(12.0).reshape(3, 4), np.array([0, 3, -4]))),
]


@pytest.mark.parametrize("fn, args", VALID, ids=lambda c: getattr(c, "__name__", None) or "")
def test_indices_numpy_accepts_give_numpys_values_and_gradients(mode, fn, args):
    """Negative indices wrap, duplicates accumulate in the backward's scatter-add."""
    f = llgrad.differentiate(fn)
    value, grad = f.value_and_grad(*args)
    np.testing.assert_allclose(value, fn(*args), rtol=1e-12)
    np.testing.assert_allclose(grad, finite_differences(fn, args, (0,))[0], rtol=1e-6,
                               atol=1e-8)


def test_a_failed_call_leaves_the_function_usable(mode):
    f = llgrad.differentiate(gather)
    x = np.arange(5.0)
    with pytest.raises(IndexError):
        f.grad(x, np.array([1, 5]))
    np.testing.assert_allclose(f.grad(x, np.array([1, 4])), [0, 2, 0, 0, 8])


def static_index(x):
    return x[5] * 2.0


def test_a_static_index_out_of_bounds_is_an_index_error_when_traced(mode):
    with pytest.raises(IndexError, match="index 5 is out of bounds for axis 0 with size 5") as e:
        llgrad.differentiate(static_index)(np.arange(5.0))
    assert f"{FILE}:{line_of(static_index, 'x[5]')}" in str(e.value)


def static_store(x):
    y = np.zeros(3)
    y[5] = x[0]
    return np.sum(y)


def test_a_static_store_out_of_bounds_names_its_line(mode):
    with pytest.raises(IndexError, match="index 5 is out of bounds for axis 0 with size 3") as e:
        llgrad.differentiate(static_store)(np.arange(5.0))
    assert f"{FILE}:{line_of(static_store, 'y[5] = x[0]')}" in str(e.value)


def unread_reads(x, k):
    """Element reads whose values nothing uses (numpy still checks them): in a loop, in a
    branch, after it."""
    s = 0.0
    for i in range(3):
        v = x[i + k]  # unread
        s += x[i] * x[i]
    if s > 0:
        w = x[k - 1]  # unread
    t = x[2 * k]  # unread
    return s


@pytest.mark.parametrize("k, text", [(3, "x[i + k]"), (-6, "x[i + k]"), (-5, "x[k - 1]"),
                                     (-3, "x[2 * k]")])
def test_unread_element_reads_at_traced_indices_raise_index_error(mode, k, text):
    """They keep their checks, of the indices alone (transform/passes/dce.py, Note [Unread
    element reads keep their checks])."""
    x, k = np.arange(5.0) + 1.0, np.array(k)
    with pytest.raises(IndexError):
        unread_reads(x, k)
    f = llgrad.differentiate(unread_reads)
    for call in (f, f.grad):
        with pytest.raises(IndexError, match="out of bounds for axis 0 with size 5") as e:
            call(x, k)
        assert f"{FILE}:{line_of(unread_reads, text)} (in unread_reads)" in \
            "".join(getattr(e.value, "__notes__", [])) + str(e.value)


def test_unread_element_reads_in_range_cost_no_tape(mode):
    """In range they give numpy's values and gradients, and the loop tapes nothing for the
    read it does not use (the array would be read, and taped per iteration, if it were
    kept: runtime/ops/index.py `_checked`)."""
    x, k = np.arange(5.0) + 1.0, np.array(2)
    f = llgrad.differentiate(unread_reads)
    value, grad = f.value_and_grad(x, k)
    np.testing.assert_allclose(value, unread_reads(x, k), rtol=1e-12)
    np.testing.assert_allclose(grad, finite_differences(unread_reads, (x, k), (0,))[0],
                               rtol=1e-6, atol=1e-8)
    assert "tape_new" not in str(f.inspect(x, k).backward_ir)
