"""The staging protocol: traced values route control flow to the registered stager."""

import contextlib

import convert_staging_cases as cases
import numpy as np
import pytest

from llgrad.runtime.errors import ConcretizationError
from fake_tracer import Fake, FakeStager, unwrap

from llgrad.tracer import operators as lg
from llgrad.tracer.convert import UnsupportedSyntaxError, convert


@pytest.fixture
def stager():
    s = FakeStager()
    lg.register_stager(Fake, s)
    yield s
    lg.unregister_stager(Fake)


def _line(fn, text):
    import inspect
    lines, first = inspect.getsourcelines(fn)
    return first + next(i for i, ln in enumerate(lines) if text in ln)


def test_plain_values_never_reach_the_stager(stager):
    assert convert(cases.branch)(3.0) == 6.0
    assert stager.log == []


@pytest.mark.parametrize("x", [2.0, -3.0])
def test_if_is_staged_with_live_names(stager, x):
    assert unwrap(convert(cases.branch)(Fake(x))) == cases.branch(x)
    assert stager.log == [("if", ("y",), _line(cases.branch, "if x > 0"))]


def test_traced_range_bound(stager):
    out = convert(cases.range_loop)(Fake(2.0), Fake(3))
    assert unwrap(out) == cases.range_loop(2.0, 3)
    assert stager.log == [("for", ("s",), _line(cases.range_loop, "for i"))]


def test_python_range_with_traced_state_is_staged(stager):
    # See Note [Static loops over traced state]: traced state at entry stages the whole loop.
    assert unwrap(convert(cases.range_loop)(Fake(2.0), 3)) == 6.0
    assert stager.log == [("for", ("s",), 16)]


def test_while_is_staged(stager):
    assert unwrap(convert(cases.while_halving)(Fake(10.0))) == cases.while_halving(10.0)
    assert stager.log == [("while", ("steps", "x"), _line(cases.while_halving, "while x > 1"))]


def test_return_in_staged_if_carries_flags(stager):
    assert unwrap(convert(cases.early_return)(Fake(-4.0))) == 4.0
    # `if c: return a` + rest: the rest moves into the else branch, so both branches define
    # the return value and the flag is dead afterwards.
    assert stager.log == [("if", ("__lg_retval",), _line(cases.early_return, "if x > 0"))]


def test_traced_break_flag_guards_remaining_iterations(stager):
    x = np.array([1.0, 3.0, 1.0, 1.0])
    assert unwrap(convert(cases.break_on_traced)(Fake(x))) == cases.break_on_traced(x)
    ifs = [e for e in stager.log if e[0] == "if"]
    assert len(ifs) > 1 and all("__lg_break" in names for _, names, _ in ifs)


def test_undefined_in_one_branch_gives_clear_error(stager):
    with pytest.raises(UnboundLocalError, match=r"'z' is assigned only in the true branch"):
        convert(cases.one_branch_only)(Fake(1.0))


def test_element_update_on_traced_value_is_functional(stager):
    out = convert(cases.element_update)(Fake(2.0))
    np.testing.assert_array_equal(unwrap(out), [0.0, 2.0, 4.0])
    # The first iteration runs as Python; once `y` is traced the rest is one staged loop.
    assert [k for k, _, _ in stager.log] == ["setitem", "for", "setitem", "setitem"]


def test_logical_operators_are_staged(stager):
    got = convert(cases.logic)(Fake(3.0))
    assert tuple(map(unwrap, got)) == cases.logic(3.0)
    assert {k for k, _, _ in stager.log} == {"if_exp", "not"}


# -- unsupported statements: every message, pointing at the user's file and line ------------
FENCES = [
    (cases.unsupported_with, (contextlib.nullcontext(),), "with cm",
     r"`with` statement on traced values \(x\)"),
    (cases.unsupported_del, (), "del x", r"`del` of traced values \(x\)"),
    (cases.unsupported_global, (), "G = x", r"traced values \(x\) to a `global` variable"),
]


@pytest.mark.parametrize("fn, extra, text, match", FENCES, ids=lambda v: getattr(v, "__name__", ""))
def test_fence_messages(stager, fn, extra, text, match):
    converted = convert(fn)
    converted(1.0, *extra)  # plain values: runs as Python
    with pytest.raises(UnsupportedSyntaxError, match=match) as info:
        converted(Fake(1.0), *extra)
    e = info.value
    assert e.filename == cases.__file__ and e.lineno == _line(fn, text)
    assert text in e.text and "Fix:" in str(e.msg)


def test_try_on_traced_values_asks_for_the_dynamic_path(stager):
    # Note [try on the dynamic path] (convert/fence.py)
    converted = convert(cases.unsupported_try)
    assert converted(1.0) == 2.0  # plain values: runs as Python
    with pytest.raises(ConcretizationError, match=r"a `try` statement reads traced values "
                                                  r"\(x\)") as info:
        converted(Fake(1.0))
    assert info.value.loc.line == _line(cases.unsupported_try, "try:")


def test_nonlocal_write_in_helper_stays_inside(stager):
    # Note [Nonlocal variables of converted functions]: the variable is the converted
    # function's own, so the traced value does not leak (leaks: tests/e2e/test_python_idioms)
    assert unwrap(convert(cases.nonlocal_in_helper)(Fake(1.0))) == 2.0


def test_yield_is_a_static_error():
    with pytest.raises(UnsupportedSyntaxError, match="generators cannot be differentiated") as info:
        convert(cases.unsupported_yield)
    assert info.value.filename == cases.__file__
    assert info.value.lineno == _line(cases.unsupported_yield, "yield x")
    assert info.value.offset == 5  # 1-based column of `yield`


def _twice(v):
    return v * 2


def test_each_lambda_of_a_line_is_converted_from_its_own_body():
    """Note [Converting lambdas]: two lambdas of one line, and a lambda inside another, each
    convert to their own body; their calls go through converted_call."""
    f, g = (lambda v: _twice(v) + 1, lambda v: (lambda u: _twice(u) - v)(v)
            + 10)
    cf, cg = convert(f), convert(g)
    assert cf(3.0) == 7.0 and cg(3.0) == 13.0
    assert "converted_call" in cf.source and "return" in cf.source
    assert "+ 1" in cf.source and "- v" not in cf.source
    assert "+ 10" in cg.source and "lambda u" in cg.source
