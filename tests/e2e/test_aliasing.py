"""In-place updates seen through another reference (Note [In-place updates are by value] in
tracer/aliasing.py): compiled code updates traced arrays by value, so where numpy's in-place
update would be seen through another name, a view, or a caller's variable, compiling is an
error naming the statement; where nothing else sees it, the compiled function equals numpy."""
from __future__ import annotations

import inspect

import numpy as np
import pytest

import llgrad
from llgrad.runtime.errors import UnsupportedError
from tests.fd import numerical_vjp

X = np.array([0.3, -0.7, 1.2, 0.5])


def second_name_augassign(x):
    y = x * 1.0
    z = y
    z += 1.0
    return np.sum(y * y)


def augassign_through_a_view(x):
    y = x * 1.0
    v = y[:2]
    v *= 3.0
    return np.sum(y * x)


def update_through_a_second_name(x):
    y = np.zeros(4)
    y[1:3] = x[:2] * 2
    w = y
    w[0] = x[3]
    return np.sum(y * y)


def write_into_a_transpose(x):
    y = x.reshape(2, 2) * 1.0
    t = y.T
    t[1] = x[:2]
    return np.sum(y * y)


def write_under_an_earlier_view(x):
    y = x.reshape(2, 2) * 1.0
    r = y[0]
    y[0, 1] = x[0] * x[3]
    return np.sum(r * r)


def write_at_a_loop_index_under_a_full_view(x):
    a = x * 1.0
    t = 0.0
    for i in range(x.shape[0] - 1):
        r = a[::-1]  # sees a[i] whatever i is: numpy's r changes with the write
        a[i] = a[i + 1] * 0.5 + 1.0
        t += np.sum(r * x)
    return t


def update_of_a_zero_d_array(x):
    z = x[:1] * 2.0
    a = z.reshape(())  # numpy: a 0-d array (a view of z), not an immutable scalar
    b = a
    a += 1.0
    return np.sum(a + b) + np.sum(z)


def alias_made_in_the_previous_iteration(x):
    a = x * 1.0
    b = x * 2.0
    for i in range(3):
        a[i] = a[i] * 2.0 + b[i]  # from the second iteration on, b is a's array
        b = a
    return np.sum(a) + np.sum(b)


def _writes_into_its_argument(a, v):
    a[0] = v


def helper_writes_into_the_callers_array(x):
    y = x * 1.0
    _writes_into_its_argument(y, x[1])
    return np.sum(y)


def whole_update_under_a_view_at_a_traced_index(x):
    y = x.reshape(2, 2) * 1.0
    r = y[np.argmax(x) % 2]  # a view of a row, which one known only at run time
    y += 1.0  # changes every row: numpy's r sees it whatever the index is
    return np.sum(r * r) + np.sum(y)


def write_under_a_view_taken_before_another_write(x):
    y = x.reshape(2, 2) * 1.0
    r = y[0]
    y[1] = x[2:]  # numpy's y is still the array r views
    y[0, 1] = x[0]
    return np.sum(r * r) + np.sum(y)


def write_under_a_numpy_view_after_the_array_became_traced(x):
    y = np.zeros((2, 2))
    c = y[:, 1]  # a numpy view of a numpy array
    y[np.argmax(x) % 2, 0] = x[0]  # y becomes traced (a copy); c does not see column 0
    y[np.argmin(x) % 2, 1] = x[1]
    return np.sum(c * x[:2]) + np.sum(y)


def view_held_in_a_list(x):
    y = x.reshape(2, 2) * 1.0
    rs = [y[0]]  # the list holds a view of row 0
    y[0] = x[:2] * 2.0
    return np.sum(rs[0])


def array_held_in_a_dict(x):
    y = x * 1.0
    d = {"a": y}
    y += 1.0
    return np.sum(d["a"])


REFUSED = {
    write_under_a_view_taken_before_another_write: ("update", "earlier view `r`",
                                                    "y[0, 1] = x[0]"),
    write_under_a_numpy_view_after_the_array_became_traced: (
        "update", "earlier view `c`", "y[np.argmin(x) % 2, 1] = x[1]"),
    second_name_augassign: ("+=", "bound to `y` and `z`", "z += 1.0"),
    augassign_through_a_view: ("*=", "view of `y`", "v *= 3.0"),
    update_through_a_second_name: ("update", "bound to `y` and `w`", "w[0] = x[3]"),
    write_into_a_transpose: ("update", "view of `y`", "t[1] = x[:2]"),
    write_under_an_earlier_view: ("update", "earlier view `r`", "y[0, 1] = x[0] * x[3]"),
    update_of_a_zero_d_array: ("+=", "bound to `a` and `b`", "a += 1.0"),
    alias_made_in_the_previous_iteration: ("update", "in a later iteration `a` may be the same "
                                           "array as `b`", "a[i] = a[i] * 2.0 + b[i]"),
    write_at_a_loop_index_under_a_full_view: ("update", "earlier view `r`",
                                              "a[i] = a[i + 1] * 0.5 + 1.0"),
    helper_writes_into_the_callers_array: ("update", "`y` (in helper_writes_into_the_caller",
                                           "a[0] = v"),
    whole_update_under_a_view_at_a_traced_index: ("+=", "earlier view `r`", "y += 1.0"),
    view_held_in_a_list: ("update", "earlier view `rs[0]`", "y[0] = x[:2] * 2.0"),
    array_held_in_a_dict: ("+=", "bound to `y` and `d['a']`", "y += 1.0"),
}


@pytest.mark.parametrize("fn", list(REFUSED), ids=lambda f: f.__name__)
def test_an_update_numpy_would_show_elsewhere_is_refused_at_its_line(fn):
    what, who, line = REFUSED[fn]
    with pytest.raises(UnsupportedError) as e:
        llgrad.differentiate(fn).value_and_grad(X)
    msg = str(e.value)
    assert f"in-place {what} of " in msg and who in msg, msg
    assert "test_aliasing.py:" in msg and line in msg and ".copy()`" in msg, msg


def rows_of_a_state_array(x):
    Y = np.zeros((4, 2))
    for i in range(1, 4):
        prev = Y[i - 1]  # a view of a row that the next statement does not write
        Y[i] = prev * 0.5 + x[i]
    return np.sum(Y * Y)


def update_then_alias(x):
    y = x * 1.0
    y[:2] *= 3.0  # the converter writes the updated view back into y, as numpy
    z = y
    z = z + x
    return np.sum(z * y)


def copy_then_update(x):
    y = x * 1.0
    z = y.copy()
    z += 1.0
    z[0] = x[2]
    return np.sum(y * z)


def first_row_kept_while_later_rows_are_written(x):
    Y = np.ones((4, 2)) * x[0]
    first = Y[0]  # a view: Y[i] for i >= 1 never writes it
    for i in range(1, 4):
        Y[i] = np.tanh(Y[i - 1] * x[i])
    return np.sum(Y) + np.sum(first * x[1])


def scalars_rebind(x):
    m = x[:2] @ x[2:]  # a numpy scalar (a reshape in the IR): += rebinds m only
    n = m
    m += 1.0
    s = np.sum(x).reshape(()) * 1.0  # arithmetic on a 0-d array gives a scalar again
    t = s
    s += 2.0
    return m * n + s * t


def counter_and_accumulator(x):
    s = 0.0
    k = 0
    while k < 3:
        s += x[k] * x[k + 1]
        k += 1
    return s


@pytest.mark.parametrize("fn", [rows_of_a_state_array, update_then_alias, copy_then_update,
                                counter_and_accumulator, scalars_rebind,
                                first_row_kept_while_later_rows_are_written],
                         ids=lambda f: f.__name__)
def test_updates_nothing_else_sees_compile_and_match_numpy(fn):
    value, grad = llgrad.differentiate(fn).value_and_grad(X)
    assert value == pytest.approx(fn(X.copy()), rel=1e-12)
    fd = numerical_vjp(lambda a: fn(a.copy()), [X], 1.0, wrt=[0])[0]
    np.testing.assert_allclose(grad, fd, rtol=1e-6, atol=1e-8)


def test_refused_functions_really_differ_by_value():
    """The refusals are not over-cautious: run by value, each would differ from numpy."""
    src = inspect.getsource(second_name_augassign)
    assert "z += 1.0" in src
    y = X * 1.0
    z = y
    z = z + 1.0  # what the compiled code would do
    assert np.sum(y * y) != second_name_augassign(X.copy())
