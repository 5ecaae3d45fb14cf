"""Python as people write it inside differentiated functions: closures that rebind the
function's own variables (`nonlocal`), builtins over views and with keys, and the idioms of
numeric code. Each is checked against plain Python for its value and against central
differences for its gradient, staying compiled (no DynamicPathWarning); what stays
unsupported is an error naming the user's line.
"""
from __future__ import annotations

import math
import statistics
import warnings

import numpy as np
import pytest

import llgrad
from llgrad.runtime.errors import DynamicPathWarning, UnsupportedError, UnsupportedSyntaxError
from tests.e2e.conftest import finite_differences

X = np.array([0.5, -2.0, 3.0, 1.0])


def _check(fn, x=X):
    """Value equals plain Python, gradient equals central differences, staged path."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", DynamicPathWarning)
        value, grad = llgrad.differentiate(fn).value_and_grad(x)
    np.testing.assert_allclose(value, fn(x), rtol=1e-12)
    np.testing.assert_allclose(grad, finite_differences(fn, (x,), (0,))[0], rtol=1e-6,
                               atol=1e-8)


# ---- nonlocal variables of the differentiated function -----------------------------------------
def nonlocal_static_loop(x):
    total = 0.0

    def add(v):
        nonlocal total
        total = total + np.sum(v ** 2)
    for i in range(3):
        add(x * i)
    return total


def nonlocal_traced_loop(x):
    total = 0.0
    count = 0

    def add(v):
        nonlocal total, count
        total = total + np.sin(v) * count
        count += 1
    for v in x:
        add(v)
    return total + count


def nonlocal_traced_if_in_helper(x):
    best = x[0]

    def keep(v):
        nonlocal best
        if v > best:
            best = v
    for v in x:
        keep(v)
    return best * best


def nonlocal_helper_in_traced_if(x):
    acc = 0.0

    def bump(v):
        nonlocal acc
        acc = acc + v * v
    if np.sum(x) > 0:
        bump(x[0])
    else:
        bump(x[1])
    return acc


def nonlocal_two_levels(x):
    total = x[0]

    def apply_all(v):
        def scale(w):
            nonlocal total
            total = total * w
        for w in v:
            scale(w)
    apply_all(x[1:])
    return total


def nonlocal_in_a_while_loop(x):
    total = 0.0

    def add(v):
        nonlocal total
        total = total + v
    i = 0
    while i < 4:
        add(x[i] ** 2)
        i += 1
    return total


@pytest.mark.parametrize("fn", [nonlocal_static_loop, nonlocal_traced_loop,
                                nonlocal_traced_if_in_helper, nonlocal_helper_in_traced_if,
                                nonlocal_two_levels, nonlocal_in_a_while_loop])
@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_nonlocal_of_the_differentiated_function(fn, sign):
    _check(fn, sign * X)


def helper_reads_a_changing_local(x):
    k = 2.0

    def scale(v):
        return k * v
    s = np.sum(scale(x))
    k = 3.0  # (the helper's variable changes after it ran: no captured constant)
    return s + np.sum(scale(x))


@pytest.mark.parametrize("fn", [nonlocal_static_loop, nonlocal_traced_loop,
                                helper_reads_a_changing_local])
def test_variables_of_the_function_are_no_guards(fn):
    """A nested function's variables of the traced frame are made anew by every call: as
    guards (Note [Captured values are guarded]) they failed at every call after the trace
    changed them, so each call traced again."""
    d = llgrad.differentiate(fn)
    for _ in range(3):
        d.value_and_grad(X)
    assert d.cache_info()["traces"] == 1
    _check(fn)


def _leaking_helper():
    box = 0.0

    def helper(v):
        nonlocal box
        box = v

    def f(x):
        helper(np.sum(x))
        return np.sum(x)
    return f


def test_nonlocal_outside_the_differentiated_function_is_refused():
    f = _leaking_helper()
    with pytest.raises(UnsupportedSyntaxError, match=r"traced values \(v\) to a `nonlocal` "
                       r"variable would leak") as info:
        llgrad.differentiate(f)(X)
    assert info.value.filename == __file__
    assert info.value.lineno == _leaking_helper.__code__.co_firstlineno + 5


# ---- max/min with key= and over views, any/all -------------------------------------------------
def max_min_of_dict_values(x):
    d = {"a": x[0], "b": x[1] * 2, "c": x[2]}
    return max(d.values()) + min(d.values()) + sum(d.values())


def max_min_with_key(x):
    return max(x, key=lambda v: v * v) + min([x[0], x[1]], key=abs)


def max_of_indices_by_key(x):
    i = max(range(3), key=lambda j: x[j] ** 2)
    return x[i] * 2


def min_of_generator_with_key(x):
    return min((v for v in x), key=lambda v: (v - 1) ** 2) + max([], default=1.0)


def argmin_of_enumerate(x):
    i, v = min(enumerate(x), key=lambda p: p[1])
    best = max(zip(x, range(4)), key=lambda p: p[0] ** 2)
    return v * 2 + x[i] + best[0] * 3 + best[1]


def any_all_of_generators(x):
    s = np.sum(x)
    if any(v > 2.5 for v in x):
        s = s + np.sum(x ** 2)
    if all(v > -2.5 for v in x):
        s = s * 3
    return s


def sorted_with_key(x):
    by_size = sorted(x, key=lambda v: v * v)
    by_neg = sorted((v for v in x), key=lambda v: -v, reverse=True)
    return by_size[0] * 2 + by_size[-1] + by_neg[1] * 5


def fsum_of_items(x):
    return math.fsum([x[0], x[1] * 2, x[2]]) + math.fsum(v * v for v in x)


@pytest.mark.parametrize("fn", [max_min_of_dict_values, max_min_with_key, max_of_indices_by_key,
                                min_of_generator_with_key, any_all_of_generators,
                                sorted_with_key, fsum_of_items, argmin_of_enumerate])
@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_builtin_folds_are_staged(fn, sign):
    _check(fn, sign * X)


def max_of_different_shapes(x):
    return np.sum(max(x[0], x[1:2]))


def test_max_of_different_shapes_is_refused():
    with pytest.raises(UnsupportedError, match=r"(?s)max\(a, b\) of operands of shapes \[\] "
                       r"and \[1\] under a traced comparison: Python returns a or b itself.*"
                       r"np.maximum") as info:
        llgrad.differentiate(max_of_different_shapes)(X)
    assert f"{__file__}:{max_of_different_shapes.__code__.co_firstlineno + 1}" in str(info.value)


def any_of_vectors(x):
    return np.sum(x) if any(v > 0 for v in x.reshape(2, 2)) else 0.0


def test_any_of_vectors_is_refused_as_python_does():
    with pytest.raises(ValueError, match=r"(?s)any\(\) of an array of shape \[2\]: Python "
                       r"takes the truth value of each item.*np\.any"):
        llgrad.differentiate(any_of_vectors)(X)


# ---- a list whose length depends on a traced condition -----------------------------------------
def appends_until_break(x):
    out = []
    for v in x:
        if v > 1.5:
            break
        out.append(math.exp(v))
    return sum(out)


def test_append_after_a_traced_break_takes_the_dynamic_path():
    """The length of `out` depends on the values: the call is traced per call, as a boolean
    mask's result is, with a warning at the append that says why and how to stay compiled."""
    with pytest.warns(DynamicPathWarning, match=r"(?s)`.append\(\)` on a list under the traced "
                      r"condition of the `if` at .*:\d+ \(written there, or after a `break`.*"
                      r"the list's length or items would depend on the traced condition.*"
                      r"np\.cumprod") as record:
        for x in (X, -X):
            value, grad = llgrad.differentiate(appends_until_break).value_and_grad(x)
            np.testing.assert_allclose(value, appends_until_break(x), rtol=1e-12)
            want = finite_differences(appends_until_break, (x,), (0,))[0]
            np.testing.assert_allclose(grad, want, rtol=1e-6, atol=1e-8)
    assert record[0].lineno == appends_until_break.__code__.co_firstlineno + 5


# ---- isinstance of traced values -----------------------------------------------------------------
def isinstance_checks(x):
    s, v, out = np.sum(x), x[0], 0.0
    if isinstance(x, np.ndarray):  # (numpy's answers: an array, numpy scalars)
        out = out + np.sum(x * x)
    if isinstance(s, float):
        out = out + s
    if isinstance(v, (np.floating, int)):
        out = out + v * 3
    if isinstance(x, (list, tuple)) or isinstance(v, np.ndarray):
        out = out + 100.0
    return out


def test_isinstance_answers_for_the_numpy_object():
    _check(isinstance_checks)


# ---- `in` a Python container, round() ------------------------------------------------------------
def skips_indices_in_a_set(x):
    skip = {1, 3}
    s = 0.0
    for i in range(len(x)):  # (a staged loop: `i` is traced)
        if i in skip:
            continue
        s = s + x[i] * (2.0 if i not in {0: "first"} else 1.0)
    return s


def scales_indices_in_a_list(x):
    s = 0.0
    for i in range(len(x)):
        s = s + x[i] * (3.0 if i in [1, 2.0, "a"] else 1.0)
    return s


def rounds_to_digits(x):
    return np.sum(x ** 2) * round(x[0] * 3.0, 1) + round(x[1], 0)


@pytest.mark.parametrize("fn", [skips_indices_in_a_set, scales_indices_in_a_list,
                                rounds_to_digits])
def test_membership_and_round(fn):
    # a traced number in a set was hashed as an object: never found, a wrong value
    _check(fn, X + 0.01)


def divmod_of_a_traced_float(x):
    q, r = divmod(x[0] * 3.0, 1.5)
    return q * x[1] + r * x[2] + np.sum(np.divmod(x, 0.75)[1] ** 2)


def divmod_of_the_loop_counter(x):
    s = 0.0
    for day in range(10):  # (a staged loop: `day` is traced)
        week, weekday = divmod(day, 4)
        s = s + x[weekday] * (week + 1) + np.sum(divmod(x, -0.7)[0] * x)
    return s


@pytest.mark.parametrize("fn", [divmod_of_a_traced_float, divmod_of_the_loop_counter])
def test_divmod(fn):
    """divmod (the builtin and np.divmod) is (x // y, x % y), as in Python: it was refused."""
    _check(fn, X + 0.01)


def array_in_a_set(x):
    return np.sum(x) if x in {1.0} else 0.0


def test_array_in_a_set_is_unhashable_as_in_numpy():
    with pytest.raises(TypeError, match="unhashable type: 'numpy.ndarray'"):
        array_in_a_set(X)
    with pytest.raises(TypeError, match="unhashable type: 'numpy.ndarray'"):
        llgrad.differentiate(array_in_a_set)(X)


# ---- library code that fails on traced values ----------------------------------------------------
def statistics_mean(x):
    return statistics.mean([x[0], x[1]])


def test_standard_library_failures_name_the_function_and_line():
    with pytest.raises(UnsupportedError, match=r"(?s)statistics.mean is not supported on traced "
                       r"values: .*its own Python code fails on them \(TypeError") as info:
        llgrad.differentiate(statistics_mean)(X)
    assert f"{__file__}:{statistics_mean.__code__.co_firstlineno + 1}" in str(info.value)


def test_math_fsum_of_traced_floats_is_a_python_float():
    """A Python float times a float32 array stays float32, as in numpy."""
    import math

    def f(x, a):
        return np.sum(x * math.fsum([a, a * 2.0]))
    x = np.ones(3, np.float32)
    assert type(llgrad.differentiate(f)(x, 0.5)) is type(f(x, 0.5)) is np.float32
