"""Unsupported statements: static errors and run-time fences, with every message in one table.

Output invariants: a function containing ``yield``/``await`` raises UnsupportedSyntaxError at
conversion. Before each ``try``, ``with`` (other than llgrad's own contexts, np.errstate and
warnings.catch_warnings), ``del`` and each assignment to a ``global``/``nonlocal`` name, the
converter inserts ``__lg.fence(kind, loc, locals(), (names read...))``, which raises
UnsupportedSyntaxError if one of those values is traced (for ``try``, a ConcretizationError:
the call takes the dynamic path) and does nothing otherwise (plain Python keeps working).
"""

from __future__ import annotations

import copy
from typing import Any, Callable

import gast

from llgrad.runtime.errors import ConcretizationError

from . import anno, templates
from .activity import activity
from .errors import SourceLoc, UnsupportedSyntaxError

# kind -> (what, fix); "{names}" is filled with the traced names, "{kind}" with the statement.
MESSAGES: dict[str, tuple[str, str]] = {
    "try": ("a `try` statement reads traced values ({names}): exceptions cannot be caught "
            "inside compiled code (Python runs it on the dynamic path)",
            "move the try/except outside the differentiated function, or test the condition "
            "explicitly (`if`, `np.where`)"),
    "with": ("`with` statement on traced values ({names}): only llgrad's own contexts "
             "(no_grad, enable_grad, ...), np.errstate and warnings.catch_warnings can be "
             "used around traced code",
             "move the `with` block outside the differentiated function"),
    "del": ("`del` of traced values ({names}) cannot be compiled",
            "remove the `del`; rebind the name instead"),
    "global": ("assignment of traced values ({names}) to a `global` variable would leak a "
               "traced value out of the differentiated function",
               "return the value instead of storing it in a global"),
    "nonlocal": ("assignment of traced values ({names}) to a `nonlocal` variable would leak a "
                 "traced value out of the differentiated function",
                 "return the value instead of storing it in an enclosing variable"),
    "global in branch": (
        "assignment to a `global` variable inside a branch of the traced `if` at {branch}: "
        "both branches are traced, so it would happen whichever branch runs",
        "compute the value with the `if` and assign the global after it, or return it"),
    "nonlocal in branch": (
        "assignment to a `nonlocal` variable inside a branch of the traced `if` at {branch}: "
        "both branches are traced, so it would happen whichever branch runs",
        "compute the value with the `if` and assign the variable after it, or return it"),
    "yield": ("generators cannot be differentiated: `yield` in a differentiated function",
              "build a list and return it (or np.stack the values)"),
    "await": ("`await` cannot be used in a differentiated function",
              "call the differentiated function from synchronous code"),
}


def error(kind: str, loc: SourceLoc | None, names: str = "",
          branch: SourceLoc | None = None) -> UnsupportedSyntaxError:
    what, fix = MESSAGES[kind]
    return UnsupportedSyntaxError(what.format(names=names, branch=branch), loc, fix)


_SCOPES = (gast.FunctionDef, gast.AsyncFunctionDef, gast.Lambda, gast.ClassDef)
_BLOCKS = ("body", "orelse", "finalbody")


def check_static(fn: gast.FunctionDef, loc: Callable[[gast.AST], SourceLoc]) -> None:
    stack = list(fn.body)
    while stack:
        n = stack.pop()
        if isinstance(n, (gast.Yield, gast.YieldFrom)):
            raise error("yield", loc(n))
        if isinstance(n, (gast.Await, gast.AsyncFor, gast.AsyncWith)):
            raise error("await", loc(n))
        if not isinstance(n, _SCOPES):
            stack.extend(gast.iter_child_nodes(n))


class _Fences:
    def __init__(self, locals_: set[str], globals_: set[str], nonlocals: set[str],
                 is_llgrad: Callable[[gast.expr], bool]):
        self.locals, self.globals, self.nonlocals = locals_, globals_, nonlocals
        self.is_llgrad = is_llgrad

    def kind(self, s) -> str | None:
        if isinstance(s, gast.Try) or type(s).__name__ == "TryStar":
            return "try"
        if isinstance(s, gast.With):
            return None if all(self.is_llgrad(i.context_expr) for i in s.items) else "with"
        if isinstance(s, gast.Delete):
            return "del"
        if isinstance(s, (gast.Assign, gast.AugAssign, gast.AnnAssign)):
            writes = activity(s.targets if isinstance(s, gast.Assign) else s.target).writes
            if writes & self.globals:
                return "global"
            if writes & self.nonlocals:
                return "nonlocal"
        return None

    def block(self, stmts: list) -> list:
        out = []
        for s in stmts:
            kind = self.kind(s)
            if kind is not None:
                names = sorted(activity(s).reads & self.locals)
                fence = templates.replace("__lg.fence(kind, loc, locals(), names, catches)",
                                          kind=templates.const(kind),
                                          loc=templates.loc_expr(s),
                                          names=templates.str_tuple(names),
                                          catches=_catches(s) if kind == "try" else
                                          templates.const(None))
                anno.fill_loc(fence, s)
                out.extend(fence)
            if not isinstance(s, _SCOPES):
                for field in _BLOCKS:
                    if getattr(s, field, None):
                        setattr(s, field, self.block(getattr(s, field)))
                for h in getattr(s, "handlers", []):
                    h.body = self.block(h.body)
            out.append(s)
        return out


def _catches(s) -> gast.expr:
    """`lambda: (T1, T2, ...)`, the classes the `except` clauses of try statement `s` name
    (None for a bare `except:`), evaluated by the fence (Note [try on the dynamic path])."""
    types = [copy.deepcopy(h.type) if h.type is not None else templates.const(None)
             for h in s.handlers]
    return templates.replace_expr("lambda: t", t=gast.Tuple(elts=types, ctx=gast.Load()))


def insert_fences(fn: gast.FunctionDef, locals_: set[str], globals_: set[str],
                  nonlocals: set[str], is_llgrad: Callable[[gast.expr], bool]) -> None:
    fn.body = _Fences(locals_, globals_, nonlocals, is_llgrad).block(fn.body)


def check_fence(kind: str, loc: SourceLoc, values: dict[str, Any], names: tuple,
                is_traced: Callable[[Any], bool], branch: SourceLoc | None = None,
                catches: Callable[[], tuple] | None = None,
                note_catches: Callable[[tuple], None] | None = None) -> None:
    """Raise if a value read is traced, or (global/nonlocal) inside the traced `if` branch
    ``branch``: that assignment cannot be undone for the other branch (See Note [Stores in
    traced branches] in tracer/stores.py). A `try` reading traced values instead gives
    `note_catches` the exception classes its handlers catch (Note [try on the dynamic
    path])."""
    if branch is not None and kind in ("global", "nonlocal"):
        raise error(f"{kind} in branch", loc, branch=branch)
    traced = [n for n in names if n in values and is_traced(values[n])]
    if traced and kind == "try":
        classes = _classes(catches)
        if classes is not None and note_catches is not None:
            note_catches(classes)
            return
        what, fix = MESSAGES[kind]
        raise ConcretizationError(what.format(names=", ".join(traced)), loc=loc, fix=fix)
    if traced:
        raise error(kind, loc, ", ".join(traced))


def _classes(catches) -> tuple | None:
    """The exception classes `catches()` names (BaseException for a bare `except:`), or None
    when they cannot be known before an exception is raised."""
    try:
        named = catches() if catches is not None else ()
    except Exception:  # noqa: BLE001 - a name bound later: decided when it is raised
        return None
    out = []
    for t in named:
        for c in (t if isinstance(t, tuple) else (t,)):
            if c is None:
                c = BaseException
            if not (isinstance(c, type) and issubclass(c, BaseException)):
                return None
            out.append(c)
    return tuple(out)


# Note [try on the dynamic path]
# `try: L = np.linalg.cholesky(K) except np.linalg.LinAlgError: L = ...` (a jitter retry, a
# fallback solver) around traced values: native code cannot unwind into an `except`. So the
# try body is traced as code that runs (what happens at almost every call), and the classes
# its handlers catch are kept with the trace (Trace.catches). A compiled call that raises
# an instance of one of them (LinAlgError from a failed factorisation, IndexError from an
# index check) runs again on the dynamic path (tracer/dynamic.py), where the function runs
# as Python on concrete values: the `except` block runs if the exception came from the try
# body, and the error propagates if it came from elsewhere, as in Python; the gradient is
# that of the block that ran. An exception raised while tracing is Python's (the handler
# runs while tracing, as it would at every call). Handlers whose classes cannot be known
# before an exception (a name bound later) send every call to the dynamic path.
