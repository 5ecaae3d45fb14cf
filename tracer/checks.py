"""`raise` under a traced condition, compiled to a `check` op (Note [Checks] in
runtime/ops/control.py); used by the stager (staging.py) and operators.raising.

Invariant: an exception the user's code raises while a branch or loop body is traced is
raised by the compiled code exactly when Python would raise it, never at trace time (so is
an IndexError for an index found out of range while tracing).
"""
from __future__ import annotations

import numpy as np

from llgrad.runtime.errors import (ConcretizationError, IndexingError, LLGradError,
                                   UnsupportedError)
from llgrad.runtime.ops.control import check_p, constant_p
from llgrad.tracer import operators
from llgrad.transform import ir
from llgrad.transform.builder import current

# Note [Raise under a traced condition]
# Both branches of a traced `if` are traced; a `raise` in one of them must fire when that
# branch runs, not while it is traced. Converted code evaluates `raise X` as
# `raise __lg.raising(lambda: X, loc)`, and `stage_raise` decides: outside any traced region
# (or on the dynamic path) X is raised at once, as Python does. Inside a branch or loop body,
# X becomes a `check` op that fails unconditionally where it stands (in the branch's region,
# which runs only when the condition selects it), and BranchRaises ends the tracing of the
# branch, as the raise ends it in Python. stage_if merges only the branches that go on (a
# raising branch yields placeholders nobody reads); a branch that does nothing but raise
# becomes `check(cond)` next to the `cond` op. If both branches raise, the `if` raises:
# BranchRaises goes on to the enclosing branch or loop body; at the top of the function every
# call raises, which exception depending on values, so the function takes the dynamic path
# (traced per call, the `if` decided in Python). A loop body that raises is traced up to the
# raise (its first iteration raises at run time). An exception a `try` around it catches
# (operators.catching) is raised at once, for its handler, as before.
# The exception is rebuilt at run time as `cls(*args)`, so its arguments must be constants and
# rebuilding must give the same exception. A message formatted from traced values
# (f"x = {x[0]}") needs their values: like float(x), that is a concretisation, so the
# function takes the dynamic path, where each call formats the message from its own values
# (Value._formatted in transform/builder.py).


class BranchRaises(BaseException):
    """The tracing of a branch or loop body stopped at a compiled `raise` (not an Exception,
    so `except Exception:` in the user's code lets it pass, as the raise itself would end
    the branch)."""

    _lg_signal = True  # (a bare `except:` too: Note [llgrad's exceptions pass user handlers])


def stage_raise(make, loc):
    """The exception `make()` builds, to raise now; or, inside a traced branch or loop body,
    a check op and BranchRaises (Note [Raise under a traced condition])."""
    try:
        b = current()
    except LLGradError:
        return make()
    b.format_concrete, saved = True, b.format_concrete
    try:
        exc = make()
    finally:
        b.format_concrete = saved
    if getattr(b, "eager", False) or len(b.regions) == 1:
        return exc
    if isinstance(exc, type) and issubclass(exc, BaseException):
        exc = exc()  # `raise ValueError` instantiates the class, as Python does
    if not isinstance(exc, BaseException):
        return exc  # Python raises its TypeError at once, as it would here
    if operators.caught(exc):  # a `try` catches it: only a call that raises it runs as
        caught = getattr(b, "catches", None)  # Python (Note [try on the dynamic path])
        if caught is None:
            raise ConcretizationError(f"a {type(exc).__name__} raised under a traced "
                                      f"condition inside a `try` that catches it", loc=loc)
        caught.append(type(exc))
    b.emit(check_p, [b.const(np.bool_(True))], {"exc": type(exc), "args": _args(exc, loc)},
           [], loc=loc)
    raise BranchRaises()


def _static(a) -> bool:
    if a is None or isinstance(a, (str, bytes, bool, int, float, complex, np.generic)):
        return True
    return isinstance(a, tuple) and all(map(_static, a))


def _args(exc: BaseException, loc) -> tuple:
    """exc.args, checked to be constants that rebuild the same exception."""
    name = type(exc).__name__
    args = []
    for a in exc.args:
        if isinstance(a, ir.Value):
            a = a._concretize(f"an argument of the {name} raised")  # dynamic path
        if not _static(a):
            raise UnsupportedError(
                f"the {name} raised here under a traced condition has an argument of type "
                f"{type(a).__name__}: compiled code raises it again at run time from constant "
                f"arguments (strings, numbers)", loc=loc,
                fix="pass a message string (and numbers) to the exception")
        args.append(a)
    args = tuple(args)
    try:
        again = type(exc)(*args)
    except Exception:  # noqa: BLE001 - any failure means it cannot be rebuilt
        again = None
    if again is None or type(again) is not type(exc) or again.args != args or \
            str(again) != str(exc):
        raise UnsupportedError(
            f"the {name} raised here under a traced condition cannot be raised again from "
            f"compiled code: {name}(*args) does not rebuild it (its __init__ takes other "
            f"arguments than it passes to Exception)", loc=loc,
            fix=f"give {name}.__init__ the arguments it stores in .args, or raise a built-in "
            "exception")
    return args


def trace_branch(fn, *args) -> bool:
    """Run `fn` (tracing a branch or loop body); True if it stopped at a compiled raise. An
    index numpy rejects, found while tracing (`x[5]` of 3 elements), is such a raise: Python
    raises its IndexError only if the branch runs."""
    try:
        fn(*args)
    except BranchRaises:
        return True
    except IndexingError as e:
        b = current()
        if getattr(b, "eager", False) or len(b.regions) == 1:
            raise
        b.emit(check_p, [b.const(np.bool_(True))], {"exc": IndexError, "args": (e.what,)}, [],
               loc=e.loc)
        return True
    return False


def hoist(b, region: ir.Region, fail) -> None:
    """A region that only raises (`constant true; check`) becomes `check(fail)` emitted in
    the enclosing region, `fail` the branch's condition (a thunk: emitted only if needed)."""
    if len(region.ops) != 2 or region.ops[0].prim is not constant_p or \
            region.ops[1].prim is not check_p:
        return
    check = region.ops[1]
    region.ops = []
    b.emit(check_p, [fail()], check.params, [], loc=check.loc)


def both_raise(b, loc) -> None:
    """After a traced `if` whose branches both raise: the `if` raises."""
    if len(b.regions) > 1:
        raise BranchRaises()
    e = ConcretizationError(
        f"both branches of the traced `if` at {loc} raise: every call raises one of the two "
        f"exceptions, which one depends on values", loc=loc,
        fix="this function runs on the dynamic path (each call traced, the `if` decided in "
        "Python); to compile it, raise in one branch only")
    raise e
