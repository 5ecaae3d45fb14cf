"""Element writes under a view whose overlap with the written part depends on a run-time
index (Note [Overlap known at run time] in tracer/overlap.py): compiled code raises the
refusal at the write's line exactly for the index values where numpy's view would change,
and equals numpy (value and gradient) for the others; where the indices decide it while
tracing, the write is refused at once or compiled with no check at all."""
from __future__ import annotations

import numpy as np
import pytest

import llgrad
from llgrad.runtime.errors import UnsupportedError
from tests.fd import numerical_vjp

X = np.array([0.3, -0.7])


def row_view_then_write_at_a_traced_row(x, k):
    i = k[0]  # a traced int
    Y = np.zeros((3, 2)) + x
    r = Y[0]  # a view of row 0
    Y[i] = x * 2.0  # numpy: if i is 0 (or -3), r changes too
    return np.sum(r * x) + np.sum(Y)


def view_at_a_traced_row_then_write_at_another(x, k):
    Y = np.ones((3, 2)) * x
    r = Y[k[1]]
    Y[k[0]] = np.sin(x)
    return np.sum(r * r) + np.sum(Y)


def view_of_columns_then_write_at_a_traced_element(x, k):
    Y = np.ones((3, 3)) * x[0] + x[1]
    c = Y[:, 1:][k[1]]  # row k[1], columns 1 and 2
    Y[k[0], 1] = x[1] * 3.0
    Y[k[0], 0] = x[0] * 5.0  # column 0: c never sees it (no check)
    return np.sum(c * x[0]) + np.sum(Y * Y)


def first_row_kept_while_rows_are_written_in_a_loop(x, k):
    Y = np.ones((4, 2)) * x
    first = Y[0]
    for j in range(3):
        Y[k[j]] = np.tanh(Y[k[j] - 1] * x)
    return np.sum(Y) + np.sum(first * x)


def numpy_row_view_then_write_at_a_traced_row(x, k):
    Y = np.zeros((3, 2))
    r = Y[0]  # a numpy view of a numpy array, which the write makes traced
    Y[k[0]] = x * 2.0
    Y[k[1], 1] = x[0]  # Y is traced now; r is still a view of the array it was
    return np.sum(r * x) + np.sum(Y * Y)


def _check(fn, x, k, mode):
    k = np.array(k)
    expect = fn(x.copy(), k)
    d = llgrad.differentiate(fn)
    value, grad = d.value_and_grad(x, k)
    assert value == pytest.approx(expect, rel=1e-12)
    fd = numerical_vjp(lambda a: fn(a.copy(), k), [x], 1.0, wrt=[0])[0]
    np.testing.assert_allclose(grad, fd, rtol=1e-6, atol=1e-8)
    return d


def _refused(fn, x, k, line):
    with pytest.raises(UnsupportedError, match="seen through the earlier view") as e:
        llgrad.differentiate(fn).value_and_grad(x, np.array(k))
    assert "at this call's index values" in str(e.value) and line in str(e.value)
    assert any(line in n for n in getattr(e.value, "__notes__", [])), "not the compiled check"


CASES = [  # (fn, indices where the view sees the write, indices where it does not, line)
    (row_view_then_write_at_a_traced_row, [[0], [-3]], [[1], [2], [-1]],
     "Y[i] = x * 2.0"),
    (view_at_a_traced_row_then_write_at_another, [[1, 1], [-1, 2], [0, -3]],
     [[0, 1], [2, 1], [-1, 0]], "Y[k[0]] = np.sin(x)"),
    (view_of_columns_then_write_at_a_traced_element, [[2, 2], [0, -3]], [[0, 2], [1, 0]],
     "Y[k[0], 1] = x[1] * 3.0"),
    (numpy_row_view_then_write_at_a_traced_row, [[0, 1], [-3, 2], [1, 0], [2, -3]],
     [[1, 2], [2, -1], [-1, 1]], "] = x"),
    (first_row_kept_while_rows_are_written_in_a_loop, [[0, 2, 3], [1, 2, 0], [3, 0, 1]],
     [[1, 2, 3], [3, 3, -1]], "Y[k[j]] = np.tanh(Y[k[j] - 1] * x)"),
]


@pytest.mark.parametrize("fn,bad,good,line", CASES, ids=[c[0].__name__ for c in CASES])
def test_a_run_time_overlap_raises_at_the_write_and_the_rest_match_numpy(fn, bad, good, line,
                                                                         mode):
    xs = X if fn is not view_of_columns_then_write_at_a_traced_element else X + 0.5
    for k in good:
        _check(fn, xs, k, mode)
    for k in bad:  # numpy's answer differs from the by-value one: an error, never the latter
        _refused(fn, xs, k, line)
    for k in good[:1]:  # the compiled function is still usable after an error
        _check(fn, xs, k, mode)


def test_the_refused_indices_really_change_numpys_view():
    """The run-time refusals are not over-cautious: numpy's value depends on the view seeing
    the write."""
    fn = row_view_then_write_at_a_traced_row
    Y = np.zeros((3, 2)) + X
    by_value = np.sum(Y[0].copy() * X) + np.sum(np.where([[1], [0], [0]], X * 2.0, Y))
    assert fn(X.copy(), np.array([0])) != pytest.approx(by_value)


def _checks(fn, *args) -> list:
    ir = str(llgrad.differentiate(fn).inspect(*args).forward_ir)
    return [ln for ln in ir.splitlines() if "UnsupportedError" in ln]


def _recurrence(x):
    Y = np.zeros((4, 2))
    for i in range(1, 4):
        prev = Y[i - 1]  # the row before: never the one written
        Y[i] = prev * 0.5 + x
    return Y


def state_rows(x, k):
    Y = _recurrence(x)
    j = k[0]
    a = Y[j + 1]
    Y[j - 2] = a * x  # rows j + 1 and j - 2 of 4 are never one row
    b = Y[j]
    Y[j - 1, k[0]] = b[0] * 2.0  # nor rows j + 1 or j and j - 1
    return np.sum(Y * Y) + np.sum(a) + np.sum(b)


def static_row_traced_column(x, k):
    Y = np.ones((3, 2)) * x
    r = Y[1]
    Y[2, k[0]] = r[0] * 2.0  # another static row, whatever the column
    return np.sum(Y * Y) + np.sum(r)


def test_overlap_decided_while_tracing_emits_no_check(mode):
    for fn in (state_rows, static_row_traced_column):
        assert _checks(fn, X, np.array([1])) == []
        for k in ([0], [1]):
            _check(fn, X, k, mode)
    assert len(_checks(row_view_then_write_at_a_traced_row, X, np.array([1]))) == 1
    assert len(_checks(view_of_columns_then_write_at_a_traced_element, X, np.array([0, 1]))) \
        == 1  # the write into column 0 is not checked


def same_traced_row(x, k):
    Y = np.ones((3, 2)) * x
    r = Y[k[0] + 1]
    Y[k[0] - 2] = x * 2.0  # rows k + 1 and k - 2 of 3 are one row, whatever k is
    return np.sum(r)


def index_array_write(x, k):
    Y = np.ones((3, 2)) * x
    r = Y[0]
    Y[k] = x * 2.0  # rows given by an index array: not checked, refused
    return np.sum(r)


def reversed_view(x, k):
    Y = np.ones((3, 2)) * x
    r = Y[::-1]  # sees every row, whichever is written
    Y[k[0]] = x * 2.0
    return np.sum(r)


def traced_slice_write(x, k):
    Y = np.ones((3, 2)) * x
    r = Y[2]
    Y[:k[0]] = x * 2.0  # rows up to a run-time bound: not checked, refused
    return np.sum(r)


@pytest.mark.parametrize("fn,line", [(same_traced_row, "Y[k[0] - 2] = x * 2.0"),
                                     (index_array_write, "Y[k] = x * 2.0"),
                                     (traced_slice_write, "Y[:k[0]] = x * 2.0"),
                                     (reversed_view, "Y[k[0]] = x * 2.0")],
                         ids=lambda a: getattr(a, "__name__", ""))
def test_an_overlap_that_cannot_be_excluded_or_checked_is_refused_while_tracing(fn, line):
    with pytest.raises(UnsupportedError, match="earlier view `r`") as e:
        llgrad.differentiate(fn).inspect(X, np.array([1, 2]))  # traced only, never run
    assert line in str(e.value) and ".copy()`" in str(e.value)
