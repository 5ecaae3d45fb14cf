"""`raise` under a traced condition (issue 10, item 4): compiled to a run-time check that raises
the user's exception (same type, same arguments) when, and only when, Python would; gradients
are unchanged where nothing is raised. See Note [Raise under a traced condition].
Native code raises through the kernels' error status (Note [Native errors]).
"""
from __future__ import annotations

import inspect

import numpy as np
import pytest

import llgrad
from llgrad.runtime.errors import UnsupportedError
from tests.e2e.conftest import finite_differences



class NotConverged(RuntimeError):
    pass


class Coded(Exception):
    def __init__(self, code):
        super().__init__(f"failed with code {code}")


# ---- the programs ------------------------------------------------------------------------
def validated(x):  # the issue's reproduction
    if x[0] < 0:
        raise ValueError("x[0] must be non-negative")
    return np.sum(x * x)


def piecewise_or_fail(x, s):
    if s < 0.0:
        y = x * 2.0
    elif s < 1.0:
        y = x * x
    else:
        raise ArithmeticError("s out of range")
    return np.sum(y)


def newton_sqrt2(x, tol):
    k = 0
    while abs(x * x - 2.0) > tol:
        x = x - (x * x - 2.0) / (2.0 * x)
        k = k + 1
        if k > 30:
            raise NotConverged("no convergence after 30 steps")
    return x


def static_message(x):
    if np.sum(x) > 10.0:
        raise OverflowError(f"the sum of {x.shape[0]} values exceeds 10")
    return np.sum(np.sin(x))


def bare_class(x):
    if x[1] > x[0]:
        raise OverflowError
    return x[0] - x[1]


def nested_both(x, s):
    if s > 0.0:
        if x > 1.0:
            raise ValueError("big", 1)
        else:
            raise KeyError("small")
    return x * 2.0


def _check_positive(v):
    if v <= 0.0:
        raise ValueError("must be positive")
    return np.log(v)


def in_helper(x, s):
    if s > 0.0:
        r = _check_positive(x)
    else:
        r = x * 1.0
    return r


def traced_message(x):
    if x[0] < 0:
        raise ValueError(f"x[0] = {x[0]} is negative")
    return np.sum(x * x)


def both_top_level(x):
    if x > 0.0:
        raise ValueError("positive")
    else:
        raise KeyError("not positive")


# ---- helpers -------------------------------------------------------------------------------
def _line(fn, text: str) -> int:
    lines, first = inspect.getsourcelines(fn)
    return first + next(k for k, s in enumerate(lines) if text in s)


def _raises(fn, args, exc, exc_args, text, wrt=0):
    """Python raises exc(*exc_args); so does the compiled function, naming the line."""
    with pytest.raises(exc) as plain:
        fn(*args)
    assert plain.value.args == exc_args
    d = llgrad.differentiate(fn, wrt=wrt)
    for call in (d, d.grad):
        with pytest.raises(exc) as info:
            call(*args)
        assert type(info.value) is exc and info.value.args == exc_args
        note = f"raised by compiled code at {__file__}:{_line(fn, text)}"
        assert any(n.startswith(note) for n in getattr(info.value, "__notes__", [])), \
            getattr(info.value, "__notes__", None)


def _runs(fn, args, wrt=0):
    """No raise: value as Python, gradient as finite differences."""
    d = llgrad.differentiate(fn, wrt=wrt)
    value, grad = d.value_and_grad(*args)
    np.testing.assert_allclose(value, fn(*args), rtol=1e-12)
    wrt_t = wrt if isinstance(wrt, tuple) else (wrt,)
    grads = grad if isinstance(wrt, tuple) else (grad,)
    for g, n in zip(grads, finite_differences(fn, args, wrt_t)):
        np.testing.assert_allclose(g, n, rtol=1e-6, atol=1e-8)


# ---- tests ---------------------------------------------------------------------------------
def test_issue_reproduction(mode):
    """The `raise` fired at trace time, whatever the condition."""
    _runs(validated, (np.array([0.5, 2.0]),))
    _raises(validated, (np.array([-0.5, 2.0]),), ValueError, ("x[0] must be non-negative",),
            "raise ValueError")
    assert "check" in str(llgrad.differentiate(validated).inspect(np.ones(2)).forward_ir)


def test_raise_in_else_of_elif(mode):
    for s in (-1.0, 0.5):
        _runs(piecewise_or_fail, (np.array([0.3, -1.2]), s))
    _raises(piecewise_or_fail, (np.array([0.3, -1.2]), 2.0), ArithmeticError,
            ("s out of range",), "raise Arith")


def test_raise_in_a_staged_while_loop(mode):
    _runs(newton_sqrt2, (1.0, 1e-10))
    _raises(newton_sqrt2, (1.0, -1.0), NotConverged, ("no convergence after 30 steps",),
            "raise NotConverged")


def test_message_from_static_values_and_bare_class(mode):
    _runs(static_message, (np.array([1.0, 2.0, 3.0]),))
    _raises(static_message, (np.array([5.0, 6.0, 3.0]),), OverflowError,
            ("the sum of 3 values exceeds 10",), "raise Overflow")
    _runs(bare_class, (np.array([2.0, 1.0]),))
    _raises(bare_class, (np.array([1.0, 2.0]),), OverflowError, (), "raise Overflow")


def test_both_branches_of_an_inner_if_raise(mode):
    _runs(nested_both, (2.0, -1.0))
    _raises(nested_both, (2.0, 1.0), ValueError, ("big", 1), "raise ValueError")
    _raises(nested_both, (0.5, 1.0), KeyError, ("small",), "raise KeyError")


def test_raise_in_a_helper_called_by_a_branch(mode):
    for args in ((2.0, 1.0), (-2.0, -1.0)):
        _runs(in_helper, args)
    with pytest.raises(ValueError, match="must be positive") as info:
        llgrad.differentiate(in_helper)(-2.0, 1.0)
    assert f"{__file__}:{_line(_check_positive, 'raise ValueError')}" in \
        "".join(info.value.__notes__)


def test_message_from_traced_values_takes_the_dynamic_path(mode):
    """Formatting a traced value is a concretisation: each call formats its own values."""
    d = llgrad.differentiate(traced_message)
    for x0 in (-0.5, -2.0):
        with pytest.raises(ValueError, match=rf"^x\[0\] = {x0} is negative$"):
            d(np.array([x0, 1.0]))
    value, grad = d.value_and_grad(np.array([0.5, 1.0]))
    assert value == 1.25 and grad.tolist() == [1.0, 2.0]
    assert "dynamic" in str(d.inspect(np.array([0.5, 1.0])).path)


def test_both_branches_raising_at_the_top_takes_the_dynamic_path(mode):
    d = llgrad.differentiate(both_top_level)
    with pytest.raises(ValueError, match="positive"):
        d(1.0)
    with pytest.raises(KeyError, match="not positive"):
        d(-1.0)


def unrebuildable(x):
    if x < 0.0:
        raise Coded(7)
    return x


def object_argument(x):
    if x < 0.0:
        raise ValueError("bad", [1, 2])
    return x


@pytest.mark.parametrize("fn, match", [
    (unrebuildable, r"the Coded raised here under a traced condition cannot be raised again "
                    r"from compiled code"),
    (object_argument, r"the ValueError raised here under a traced condition has an argument "
                      r"of type list"),
], ids=["unrebuildable", "object_argument"])
def test_exceptions_compiled_code_cannot_rebuild_are_refused(fn, match):
    with pytest.raises(UnsupportedError, match=match) as info:
        llgrad.differentiate(fn)(1.0)
    assert f"{__file__}:{_line(fn, 'raise')}" in str(info.value)
    assert "How to fix" in str(info.value)


def caught_by_try(x, s):
    y = x * 1.0
    if s > 0.0:
        n = 0
        try:
            if n == 0:
                raise ValueError("handled")
        except ValueError:
            n = 2
        y = x * n
    return y


def not_caught_by_try(x, s):
    if s > 0.0:
        try:
            raise KeyError("not handled")
        except ValueError:
            pass
    return x * 1.0


def test_exception_caught_by_a_try_is_handled(mode):
    """Inside a `try` that catches it, a raise stays a Python raise (for the handler); one
    the handlers do not catch is still a run-time check."""
    for args in ((2.0, 1.0), (2.0, -1.0)):
        _runs(caught_by_try, args)
    _runs(not_caught_by_try, (2.0, -1.0))
    _raises(not_caught_by_try, (2.0, 1.0), KeyError, ("not handled",), "raise KeyError")


# ---- assert on traced values: a check, like `if not t: raise AssertionError(m)` -------------
def asserted(x):
    assert np.sum(x) > 0, "the sum must be positive"
    return np.sum(x * x)


def asserted_in_loop(x, n):
    s = 0.0
    for i in range(n):
        assert x[i] < 10.0
        s = s + np.sin(x[i]) * s + x[i]
    return s


@pytest.mark.parametrize("fn,args,bad,message", [
    (asserted, (np.array([0.5, 1.0]),), (np.array([-0.5, -1.0]),), ("the sum must be positive",)),
    (asserted_in_loop, (np.array([0.5, 1.0, 2.0]), 3), (np.array([0.5, 11.0, 2.0]), 3), ()),
], ids=["straight", "loop"])
def test_assert_on_a_traced_value_is_a_compiled_check(fn, args, bad, message, mode):
    # (pytest rewrites this module's asserts, so Python's own message is written out here)
    d = llgrad.differentiate(fn)
    value, grad = d.value_and_grad(*args)
    assert value == pytest.approx(fn(*args), rel=1e-14)
    np.testing.assert_allclose(grad, finite_differences(fn, args, (0,))[0], atol=1e-8)
    assert d.inspect(*args).path == "staged"  # not the dynamic path
    with pytest.raises(AssertionError):
        fn(*bad)
    for call in (d, d.grad):
        with pytest.raises(AssertionError) as e:
            call(*bad)
        assert e.value.args == message
        line = inspect.getsource(fn).splitlines()[1 if fn is asserted else 3].strip()
        assert line in "".join(e.value.__notes__)
    assert d.cache_info()["traces"] == 1
