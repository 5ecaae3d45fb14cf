"""Names, attributes and items rebound inside traced branches (issue 10, item 1).

Each branch of a traced `if` starts from the state before the `if` (Note [Each branch starts
from the state before the if], Note [Stores in traced branches]): compiled values (native and
interpreter) equal plain Python and gradients equal central finite differences, for both
outcomes of every condition. Stores that cannot be undone are errors naming the line.
"""
from __future__ import annotations

import inspect

import numpy as np
import pytest

import llgrad
from llgrad.runtime.errors import UnsupportedError
from llgrad.tracer.convert.errors import UnsupportedSyntaxError
from tests.e2e.conftest import compiled, finite_differences


# ---- the programs (ordinary user code) ---------------------------------------------------
def issue_example(x, s, lo):  # the reproduction from the issue
    v = x
    if s > 1.0:
        v = lo
        r = v * 3.0
    else:
        r = v * 5.0
    return r


def dead_after(x, s, lo):  # was: "a value computed inside a traced `if` branch is used ..."
    v = s * 2
    if s > 1.0:
        v = v + 1
    else:
        v = v * 3
    return x * s + lo


def elif_chain(x, s, lo):
    v = x * 2.0
    if s > 1.0:
        v = lo
        r = v * v
    elif s > -1.0:
        r = v * 3.0
        v = r + lo
    else:
        r = v - lo
    return r + x


def nested(x, s, lo):
    v, w = x, lo
    if s > 0.0:
        if x > 0.5:
            v = w * 2.0
            w = x
        else:
            w = v * 3.0
        r = v + w
    else:
        r = v * w
    return r + v


def in_for(x, s, lo):
    t = 0.0
    v = x
    for i in range(3):
        v = x * i
        if s > i:
            v = lo
            t = t + v
        else:
            t = t + v * 2.0
    return t


def in_while_break_continue(x, s, lo):
    t, k = x * 0.0, 0
    v = lo
    while k < 4:
        k = k + 1
        if s > k:
            v = x * k
            continue
        if t > 3.0:
            v = lo * 2.0
            break
        t = t + v * x
    return t + v


def return_in_loop(x, s, lo):  # a name bound after an early return (was refused)
    for i in range(3):
        if s < i:
            return x * lo
        c = x * i + lo
    return c


def return_in_branch(x, s, lo):
    if s > 0.0:
        if x > 1.0:
            return x
        c = x * 2.0
    else:
        c = lo * 3.0
    return c


def ternary_reads(x, s, lo):
    v = x
    if s > 0.0:
        v = x * 7.0
        r = v
    else:
        r = v * 2.0 if s < -1.0 else v * lo
    return r


def one_branch_only(x, s, lo):
    if s > 0.0:
        c = x * lo
        r = c + 1.0
    else:
        r = x
    if s > 1.0:
        d = lo
    else:
        d = x * 2.0
    return r + d


def deleted(x, s, lo):
    v = 2.0
    if s > 0.0:
        del v
        r = x
    else:
        r = x * v + lo
    return r


def augmented(x, s, lo):
    v = x * 1.0
    if s > 0.0:
        v += lo
        v *= x
        r = v
    else:
        r = v * 2.0
    return r + x


def closure_reads(x, s, lo):
    v = x

    def get():
        return v
    if s > 0.0:
        v = lo * 2.0
    return get() + x


def array_updates(x, s, lo):
    y = np.zeros(3)
    y[0] = x
    if s > 0.0:
        y[1] = x * lo
    else:
        y[2] = y[1] + y[0] * 3.0
    z = y * 1.0
    if s > 1.0:
        z[0] += lo
    return np.sum(y * y) + np.sum(z)


def array_argument(x, s, lo):
    v = x
    if s > 0.0:
        v = x * lo
        r = np.sum(v)
    else:
        r = np.sum(v * 2.0)
    return r + np.sum(v)


class Box:
    pass


def attribute_stores(x, s, lo):
    b = Box()
    b.v = x
    if s > 0.0:
        b.v = x * 2.0
        b.w = lo
    else:
        b.v = b.v * 3.0
        b.w = x
    return b.v * b.w


def attribute_one_branch(x, s, lo):
    b = Box()
    b.v = 1.0
    if s > 0.0:
        b.v = 2.0
    return x * b.v + lo


def attribute_in_helper(x, s, lo):  # the store happens in a function the branch calls
    b = Box()
    b.v = lo

    def bump(box, by):
        box.v = box.v + by
    if s > 0.0:
        bump(b, x)
    else:
        bump(b, x * lo)
    return b.v


def container_items(x, s, lo):
    d = {"k": x}
    L = [x, 1.0]
    if s > 0.0:
        d["k"] = x * 2.0
        d["new"] = lo
        L[0] = lo
    else:
        L[-2] = L[0] * 3.0
        d["new"] = x
    return d["k"] + d["new"] * L[0] + L[1]


CASES = [issue_example, dead_after, elif_chain, nested, in_for, in_while_break_continue,
         return_in_loop, return_in_branch, ternary_reads, one_branch_only, deleted, augmented,
         closure_reads, array_updates, attribute_stores, attribute_one_branch,
         attribute_in_helper, container_items]
POINTS = [(0.7, 2.0, -0.4), (0.7, 0.5, 1.3), (1.6, -0.6, 0.9), (0.3, -1.5, -0.8),
          (1.2, 0.2, 0.6)]  # s on both sides of every threshold, x on both sides of 0.5, 1


def _check(fn, args, wrt=(0, 2)):
    expected = fn(*args)
    value, grads = compiled(fn, wrt).value_and_grad(*args)
    np.testing.assert_allclose(value, expected, rtol=1e-12, atol=1e-12,
                               err_msg=f"{fn.__name__}{args}")
    for g, n in zip(grads, finite_differences(fn, args, wrt)):
        np.testing.assert_allclose(g, n, rtol=1e-6, atol=1e-8,
                                   err_msg=f"gradient of {fn.__name__}{args}")


@pytest.mark.parametrize("fn", CASES, ids=lambda f: f.__name__)
def test_each_branch_starts_from_the_state_before_the_if(fn, mode):
    for args in POINTS:
        _check(fn, args)


def test_issue_reproduction_exactly(mode):
    d = llgrad.differentiate(issue_example, wrt=(0, 2))
    assert d(3.0, 0.0, 7.0) == 15.0
    assert d.grad(3.0, 0.0, 7.0) == (5.0, 0.0)
    assert d(3.0, 2.0, 7.0) == 21.0
    assert d.grad(3.0, 2.0, 7.0) == (0.0, 3.0)


def test_array_arguments(mode):
    rng = np.random.default_rng(0)
    for s in (-1.0, 1.0):
        _check(array_argument, (rng.normal(size=4), s, rng.normal(size=4)))


# ---- refused stores: errors at the line, never a wrong result ---------------------------
G = 0.0


def assigns_global(x, s):
    global G
    if s > 0.0:
        G = 1.0
    else:
        G = 2.0
    return x * G


def writes_attribute_array(x, s):
    b = Box()
    b.buf = np.zeros(2)
    if s > 0.0:
        b.buf[0] = 1.0
    return x * b.buf[0]


def slices_list(x, s):
    L = [1.0, 2.0]
    if s > 0.0:
        L[0:1] = [3.0]
    return x * L[0]


def deletes_list_item(x, s):
    L = [1.0, 2.0]
    if s > 0.0:
        del L[0]
    return x * L[0]


def _line(fn, text):
    lines, first = inspect.getsourcelines(fn)
    return first + next(k for k, s in enumerate(lines) if text in s)


@pytest.mark.parametrize("fn, error, match, text", [
    (assigns_global, UnsupportedSyntaxError,
     r"assignment to a `global` variable inside a branch of the traced `if` at .*:\d+",
     "G = 1.0"),
    (writes_attribute_array, UnsupportedError,
     r"an element update of an array that is not a local variable inside a branch of the "
     r"traced `if`", "b.buf[0] = 1.0"),
    (slices_list, UnsupportedError, r"a slice assignment into a Python list", "L[0:1]"),
    (deletes_list_item, UnsupportedError, r"deleting an item of a Python list", "del L[0]"),
], ids=["global", "attribute_array", "list_slice", "list_del"])
def test_stores_that_cannot_be_undone_are_refused(fn, error, match, text):
    with pytest.raises(error, match=match) as info:
        llgrad.differentiate(fn)(1.5, 1.0)
    assert f"{__file__}:{_line(fn, text)}" in str(info.value) or \
        getattr(info.value, "lineno", None) == _line(fn, text)
    assert "fix" in str(info.value).lower()


def test_refused_stores_run_as_python_under_python_conditions():
    """The same statements under a condition on Python values are plain Python."""
    def f(x, s):
        global G
        L = [1.0, 2.0]
        if len(L) > 1:
            G = 3.0
            del L[0]
        return x * G * L[0] + s
    assert llgrad.differentiate(f)(1.5, 1.0) == 10.0


def test_attribute_bound_in_one_branch_is_undefined_after():
    def f(x, s):
        b = Box()
        if s > 0.0:
            b.v = x
        return b.v * 2.0
    with pytest.raises(UnboundLocalError, match=r"'b.v' is assigned only in the true branch "
                                                r"of the `if` at .*:\d+"):
        llgrad.differentiate(f)(1.5, 1.0)


def key_set_in_one_branch(x):
    d = {"sq": x[1] ** 2}
    if x[0] > 0:
        d["a"] = x[0] * 3.0
    return sum(d.values()) + len(d) + d.get("a", 0.5 * x[1])


def key_set_in_one_branch_of_a_loop(x):
    total = 0.0
    for i in range(3):  # (staged: its body reads x; unrolled for the key)
        d = {"sq": x[i] ** 2}
        if x[i] > 0:
            d["pos"] = x[i]
        total = total + sum(d.values()) * len(d)
    return total


@pytest.mark.parametrize("fn", [key_set_in_one_branch, key_set_in_one_branch_of_a_loop])
def test_a_dict_key_set_in_one_branch_takes_the_dynamic_path(fn):
    """Whether the dict has the key after the `if` depends on the condition, which `len(d)`,
    `d.get` and `d.values()` read: it was an UnboundLocalError at the `if` (and `len(d)` alone
    counted the key on both paths). The dynamic path gives Python's values, with a warning
    naming the dict's key as the code names it, the `if`'s line and the fix."""
    with pytest.warns(llgrad.errors.DynamicPathWarning, match=r"d\['\w+'\] is set only in the "
                      r"true branch of the traced `if` at .*:\d+: whether the dict has this "
                      r"key .*set d\['\w+'\] on both paths") as record:
        for x in (np.array([1.0, 2.0, -0.5]), np.array([-1.0, 2.0, 0.7])):
            value, grad = llgrad.differentiate(fn).value_and_grad(x)
            assert value == pytest.approx(fn(x), rel=1e-12)
            np.testing.assert_allclose(grad, finite_differences(fn, (x,), (0,))[0], rtol=1e-6)
    assert f"{__file__}:{_line(fn, 'if x[')}" in str(record[0].message)


def appends_in_branches(x, s):
    out = []
    if s > 0.0:
        out.append(x * 2.0)
    else:
        out.append(x * 3.0)
    return out[0]


def test_traced_value_leaving_a_branch_through_a_list_takes_the_dynamic_path():
    """Returned from the function (it was an internal KeyError in transform/ad.py, then an
    error): the list's items depend on the traced condition, so the call is traced per call,
    as a boolean mask's result is (Note [Boolean masks of data-dependent length])."""
    with pytest.warns(llgrad.errors.DynamicPathWarning, match=r"`.append\(\)` on a list under "
                      r"the traced condition of the `if` at ") as record:
        for s in (1.0, -1.0):
            value, grad = llgrad.differentiate(appends_in_branches).value_and_grad(1.5, s)
            assert value == appends_in_branches(1.5, s) and grad == (2.0 if s > 0 else 3.0)
    assert f"{__file__}:{_line(appends_in_branches, 'if s > 0.0')}" in str(record[0].message)
    assert record[0].lineno == _line(appends_in_branches, "out.append(x * 2.0)")


def none_on_one_path(x, s):
    v = 2.0
    if s > 0.0:
        v = None
    if v is None:
        return x
    return x * v


def test_none_on_one_path_is_an_error():
    """A user's None on the first path was taken for the other path's value (silently 6.0
    where Python gives 3.0)."""
    with pytest.raises(llgrad.errors.LLGradError, match=r"variable `v` holds different "
                                                        r"Python objects on the two paths"):
        llgrad.differentiate(none_on_one_path)(3.0, 1.0)
