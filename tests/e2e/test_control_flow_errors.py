"""Every control-flow error of issue 5: what went wrong, the user's file:line, and a fix.

Each function below makes one mistake; the test checks the message (pytest.raises(match=...)),
that the location named is this file at the offending line, and that a fix is suggested.
"""
from __future__ import annotations

import inspect
import warnings

import numpy as np
import pytest

import llgrad
from llgrad.runtime.errors import (DynamicPathWarning, LLGradError, ShapeError,
                                   UnsupportedSyntaxError)
from llgrad.tracer.tracing import UnrollWarning

FILE = __file__.rsplit("/", 1)[-1]


@pytest.fixture(autouse=True)
def _interp(monkeypatch):
    monkeypatch.setenv("LLGRAD_DISABLE_JIT", "1")


def line_of(fn, text: str) -> int:
    """The file line of the first source line of `fn` containing `text`."""
    lines, first = inspect.getsourcelines(fn)
    return first + next(k for k, s in enumerate(lines) if text in s)


def assert_at(err: BaseException, fn, text: str) -> None:
    line = line_of(fn, text)
    msg = str(err)
    assert f"{FILE}:{line}" in msg, f"expected {FILE}:{line} in:\n{msg}"


# ---- variables defined on one path only ------------------------------------------------------
def defined_in_true_branch(x):
    if np.sum(x) > 0:
        y = x * 2.0
    return np.sum(y)


def defined_in_false_branch(x):
    if np.sum(x) > 0:
        pass
    else:
        z = x * 2.0
    return np.sum(z)


def defined_in_loop_body_only(x):
    n = np.sum(x > 0)
    for i in range(n):
        last = x[i]
    return last


@pytest.mark.parametrize("fn, name, branch", [
    (defined_in_true_branch, "y", "true"),
    (defined_in_false_branch, "z", "false"),
])
def test_variable_defined_in_one_branch(fn, name, branch):
    with pytest.raises(UnboundLocalError,
                       match=rf"variable '{name}' is assigned only in the {branch} branch of "
                             rf"the `if` at .*{FILE}:\d+; it is undefined here") as info:
        llgrad.differentiate(fn)(np.ones(3))
    assert_at(info.value, fn, "if np.sum(x) > 0")
    assert "Fix: assign" in str(info.value)


def test_variable_defined_in_one_branch_is_fine_if_unused():
    def f(x):
        if np.sum(x) > 0:
            tmp = x * 2.0
            r = np.sum(tmp)
        else:
            r = np.sum(x)
        return r
    assert llgrad.differentiate(f)(np.ones(3)) == 6.0


def test_variable_defined_only_in_traced_loop():
    # Python raises UnboundLocalError when the loop runs zero times; a traced trip count can be
    # zero, so the use after the loop is an error (not the placeholder's zeros).
    with pytest.raises(UnboundLocalError, match=rf"variable 'last' is assigned only inside the "
                                                rf"loop at .*{FILE}:\d+, which may run zero "
                                                rf"times") as info:
        llgrad.differentiate(defined_in_loop_body_only)(np.ones(3))
    assert_at(info.value, defined_in_loop_body_only, "for i in range(n)")


def test_variable_defined_only_in_static_loop_is_fine():
    def f(x):
        for i in range(x.shape[0]):
            last = x[i] * 2.0
        return last
    assert llgrad.differentiate(f)(np.arange(1.0, 4.0)) == 6.0


# ---- mismatched shapes / dtypes between branches -----------------------------------------------
def shapes_differ(x):
    if np.sum(x) > 0:
        y = x[:2]
    else:
        y = x[1:]
        y = y[:1]
    return np.sum(y)


def dtypes_differ(x):
    if np.sum(x) > 0:
        y = x
    else:
        y = (x > 0)
    return np.sum(y * 1.0)


def array_vs_object(x):
    if np.sum(x) > 0:
        y = x
    else:
        y = "negative"
    return y


def ternary_shapes_differ(x):
    return np.sum(x[:2] if np.sum(x) > 0 else x)


def test_branch_shapes_differ():
    with pytest.raises(ShapeError, match=r"variable `y` is f64\[2\] on one path of a traced "
                                         r"condition but f64\[1\] on the other") as info:
        llgrad.differentiate(shapes_differ)(np.ones(3))
    assert_at(info.value, shapes_differ, "if np.sum(x) > 0")
    assert "How to fix" in str(info.value)


def test_branch_dtypes_differ():
    with pytest.raises(ShapeError, match=r"variable `y` is f64\[3\] on one path .* but "
                                         r"bool\[3\] on the other") as info:
        llgrad.differentiate(dtypes_differ)(np.ones(3))
    assert_at(info.value, dtypes_differ, "if np.sum(x) > 0")


def test_branch_array_vs_python_object():
    with pytest.raises(LLGradError, match=r"variable `y` is an array on one path of a traced "
                                          r"condition and a str on the other") as info:
        llgrad.differentiate(array_vs_object)(np.ones(3))
    assert_at(info.value, array_vs_object, "if np.sum(x) > 0")


def test_ternary_shapes_differ():
    with pytest.raises(ShapeError, match=r"f64\[2\] on one path .* f64\[3\] on the other") as info:
        llgrad.differentiate(ternary_shapes_differ)(np.ones(3))
    assert_at(info.value, ternary_shapes_differ, "return np.sum(")


def and_mixes_types(x):
    s = np.sum(x)
    r = (s > 0) and s
    return r * 1.0


def test_and_value_types_differ():
    with pytest.raises(ShapeError, match=r"the value of a conditional expression .*`and`/`or`.* "
                                         r"is f64\[\] on one path .* bool\[\] on the other") as info:
        llgrad.differentiate(and_mixes_types)(np.ones(3))
    assert_at(info.value, and_mixes_types, "r = (s > 0) and s")


# ---- non-scalar conditions ----------------------------------------------------------------------
def array_condition(x):
    if x > 0:
        return np.sum(x)
    return -np.sum(x)


def test_array_condition_is_ambiguous():
    with pytest.raises(ShapeError, match=r"truth value of a traced array of shape \[3\] is "
                                         r"ambiguous") as info:
        llgrad.differentiate(array_condition)(np.ones(3))
    assert_at(info.value, array_condition, "if x > 0")
    assert "np.where" in str(info.value)


# ---- unsupported statements on traced values (the fence) ----------------------------------------
class _Ctx:
    def __enter__(self):
        return self

    def __exit__(self, *a):
        return False


def uses_with(x):
    s = np.sum(x)
    with _Ctx():
        r = s * 2.0
    return r


def uses_del(x):
    s = np.sum(x)
    t = s * 2.0
    del s
    return t


_G = None


def uses_global(x):
    global _G
    s = np.sum(x)
    _G = s
    return s


def uses_nonlocal():
    box = None

    def inner(x):
        nonlocal box
        s = np.sum(x)
        box = s
        return s
    return inner


def uses_yield(x):
    yield np.sum(x)


@pytest.mark.parametrize("fn, match, text", [
    (uses_with, r"`with` statement on traced values \(s\)", "with _Ctx()"),
    (uses_del, r"`del` of traced values \(s\) cannot be compiled", "del s"),
    (uses_global, r"assignment of traced values \(s\) to a `global` variable", "_G = s"),
    (uses_nonlocal(), r"assignment of traced values \(s\) to a `nonlocal` variable", "box = s"),
    (uses_yield, r"generators cannot be differentiated: `yield`", "yield np"),
], ids=["with", "del", "global", "nonlocal", "yield"])
def test_fenced_statements(fn, match, text):
    with pytest.raises(UnsupportedSyntaxError, match=match) as info:
        llgrad.differentiate(fn)(np.ones(3))
    e = info.value
    assert e.filename.endswith(FILE) and e.lineno == line_of(fn, text), (e.filename, e.lineno)
    assert "Fix:" in str(e) or "How to fix" in str(e)


def test_try_on_traced_values_is_compiled_and_a_caught_exception_reruns_as_python(mode):
    """A jitter retry around a Cholesky factorisation (Note [try on the dynamic path] in
    tracer/convert/fence.py): compiled while the factorisation succeeds; a call where it
    fails runs as Python, through the except block, with that block's gradient."""
    def nll(log_ell, X, y):
        K = np.exp(-0.5 * ((X[:, None] - X[None, :]) / np.exp(log_ell)) ** 2)
        try:
            L = np.linalg.cholesky(K)
        except np.linalg.LinAlgError:
            L = np.linalg.cholesky(K + 1e-6 * np.eye(len(X)))
        a = np.linalg.solve(L.T, np.linalg.solve(L, y))
        return 0.5 * y @ a + np.sum(np.log(np.diag(L)))

    X = np.linspace(0.0, 1.0, 12)
    y = np.sin(6.0 * X)
    f = llgrad.differentiate(nll)
    h = 1e-6
    with warnings.catch_warnings():
        warnings.simplefilter("error", llgrad.PerformanceWarning)
        value, grad = f.value_and_grad(-3.0, X, y)  # K is positive definite: compiled
    assert f.inspect(-3.0, X, y).path == "staged"
    for log_ell in (-3.0, 1.0):  # 1.0: K is singular, the except block runs
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", llgrad.PerformanceWarning)
            value, grad = f.value_and_grad(log_ell, X, y)
            assert f(log_ell, X, y) == pytest.approx(nll(log_ell, X, y), rel=1e-12)
        assert value == pytest.approx(nll(log_ell, X, y), rel=1e-12)
        fd = (nll(log_ell + h, X, y) - nll(log_ell - h, X, y)) / (2 * h)
        assert grad == pytest.approx(fd, rel=1e-5)
    with pytest.warns(llgrad.PerformanceWarning, match="compiled code raised LinAlgError, "
                                                       "which a `try` in it catches"):
        llgrad.differentiate(nll).value_and_grad(1.0, X, y)


def test_a_raise_under_a_traced_condition_inside_try_runs_the_handler_when_it_happens(mode):
    def f(x):
        try:
            if np.sum(x) > 0:
                raise ValueError("positive")
            r = np.sum(x ** 2)
        except ValueError:
            r = np.sum(x ** 3)
        return r

    d = llgrad.differentiate(f)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", llgrad.PerformanceWarning)
        for x in (np.array([-1.0, -2.0]), np.array([1.0, 2.0]), np.array([-1.0, -3.0])):
            value, grad = d.value_and_grad(x)
            assert value == f(x)
            np.testing.assert_allclose(grad, 2 * x if np.sum(x) <= 0 else 3 * x ** 2)


def test_fenced_statements_on_python_values_run_as_python():
    def f(x):
        n = 3
        try:
            k = n * 2
        except ValueError:
            k = 0
        with _Ctx():
            k = k + 1
        del n
        return np.sum(x) * k
    assert llgrad.differentiate(f)(np.ones(3)) == 21.0


def test_llgrad_context_is_allowed():
    def f(x):
        s = np.sum(x ** 2)
        with llgrad.no_grad():
            t = s * 2.0
        return s + t
    assert llgrad.differentiate(f)(np.ones(3)) == 9.0


# ---- loops that must be unrolled -----------------------------------------------------------------
def append_with_traced_trip_count(x):
    n = np.sum(x > 0)
    hs = []
    for i in range(n):
        hs.append(x[i] * 2.0)
    return np.sum(np.stack(hs))


def growing_with_traced_trip_count(x):
    n = np.sum(x > 0)
    h = x[:1]
    for i in range(n):
        h = np.concatenate([h, h[-1:] * x[0]])
    return np.sum(h)


def growing_while(x):
    h = x[:1]
    while np.sum(h) < 10.0:
        h = np.concatenate([h, h])
    return np.sum(h)


def growing_loop_over_rows_of_traced_bound(x):
    k = np.sum(x > 0)
    out = x[:0]
    for i in range(0, k):
        out = np.concatenate([out, x[:1] ** 2])
    return np.sum(out)


@pytest.mark.parametrize("fn, match", [
    (append_with_traced_trip_count, r"must be unrolled \(it appends to the list `hs` and its "
                                    r"trip count is not static \(`.append\(\)` at .*\)\) but "
                                    r"its trip count is traced"),
    (growing_with_traced_trip_count, r"must be unrolled \(it changes the shape/dtype of `h` "
                                     r"from f64\[1\] to f64\[2\] across iterations\) but its "
                                     r"trip count is traced"),
    (growing_loop_over_rows_of_traced_bound, r"must be unrolled .* trip count is traced"),
], ids=["append", "grow", "grow-from-empty"])
def test_unroll_needed_but_trip_count_traced(fn, match):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnrollWarning)
        with pytest.raises(LLGradError, match=match) as info:
            llgrad.differentiate(fn)(np.ones(4))
    assert_at(info.value, fn, "for i in range(")
    assert "preallocate" in str(info.value) and "Python ints" in str(info.value)


def test_while_that_changes_shape():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnrollWarning)
        with pytest.raises(LLGradError, match=r"the while loop at .* must be unrolled \(it "
                                              r"changes the shape/dtype of `h` from f64\[1\] to "
                                              r"f64\[2\] across iterations\) but its trip count "
                                              r"is traced") as info:
            llgrad.differentiate(growing_while)(np.ones(2))
    assert_at(info.value, growing_while, "while np.sum(h)")


# ---- traced values leaking out of a branch -------------------------------------------------------
def append_in_branch(x):
    out = []
    if np.sum(x) > 0:
        out.append(x * 2.0)
    else:
        out.append(x)
    return np.sum(out[0])


def test_list_changed_in_branch_takes_the_dynamic_path():
    # as a boolean mask's result (Note [Boolean masks of data-dependent length])
    with pytest.warns(DynamicPathWarning, match=r"`.append\(\)` on a list under the traced "
                      r"condition of the `if` at .*the list's length or items would depend on "
                      r"the traced condition") as record:
        for x in (np.ones(3), -np.ones(3)):
            value, grad = llgrad.differentiate(append_in_branch).value_and_grad(x)
            assert value == append_in_branch(x)
            np.testing.assert_allclose(grad, np.where(x > 0, 2.0, 1.0))
    assert record[0].lineno == line_of(append_in_branch, "out.append(x * 2.0)")


# ---- traced range step -------------------------------------------------------------------------
def traced_step(x):
    k = np.sum(x > 0)
    s = 0.0
    for i in range(0, 4, k):
        s = s + x[i]
    return s


def test_traced_range_step():
    with pytest.raises(LLGradError, match=r"a traced range step is not supported") as info:
        llgrad.differentiate(traced_step)(np.ones(4))
    assert_at(info.value, traced_step, "for i in range(0, 4, k)")


# ---- integer ops on traced loop indices (Python % and // semantics) ------------------------------
def mod_of_loop_index(x):
    s = 0.0
    for i in range(x.shape[0]):
        if i % 2 == 0:
            s = s + x[i] * (i // 2 + 1)
    return s


def test_mod_of_traced_loop_index():
    x = np.arange(1.0, 6.0)
    d = llgrad.differentiate(mod_of_loop_index)
    assert d(x) == mod_of_loop_index(x)
    np.testing.assert_array_equal(d.grad(x), [1.0, 0.0, 2.0, 0.0, 3.0])


def test_llgrads_own_errors_pass_the_users_handlers(mode):
    """Note [llgrad's exceptions pass user handlers] (tracer/operators.py): an llgrad limit
    raised in a try body is not the program's exception; the handler would give a value
    plain Python never computes."""
    def unsupported(x):
        try:
            s = np.sum(np.unique(x))  # unsupported on traced values
        except Exception:
            s = -1.0
        return s + np.sum(x)

    def concretised(x):
        try:
            n = int(np.sum(x))  # a ConcretizationError is a TypeError: the dynamic path
        except TypeError:
            n = 0
        return np.sum(x) * n

    x = np.array([1.0, 2.0, 2.0])
    with pytest.raises(llgrad.errors.UnsupportedError, match="np.unique is not supported"):
        llgrad.differentiate(unsupported)(x)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", llgrad.PerformanceWarning)
        assert llgrad.differentiate(concretised)(x) == concretised(x) == 25.0
