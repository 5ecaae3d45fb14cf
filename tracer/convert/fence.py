"""Unsupported statements: static errors and run-time fences, with every message in one table.

Output invariants: a function containing ``yield``/``await`` raises UnsupportedSyntaxError at
conversion. Before each ``try``, ``with`` (other than llgrad's own contexts, np.errstate and
warnings.catch_warnings), ``del`` and each assignment to a ``global``/``nonlocal`` name, the
converter inserts ``__lg.fence(kind, loc, locals(), (names read...))``, which raises
UnsupportedSyntaxError if one of those values is traced (for ``try``, a ConcretizationError:
the call takes the dynamic path) and does nothing otherwise (plain Python keeps working).
"""

from __future__ import annotations

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
                fence = templates.replace("__lg.fence(kind, loc, locals(), names)",
                                          kind=templates.const(kind),
                                          loc=templates.loc_expr(s),
                                          names=templates.str_tuple(names))
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


def insert_fences(fn: gast.FunctionDef, locals_: set[str], globals_: set[str],
                  nonlocals: set[str], is_llgrad: Callable[[gast.expr], bool]) -> None:
    fn.body = _Fences(locals_, globals_, nonlocals, is_llgrad).block(fn.body)


def check_fence(kind: str, loc: SourceLoc, values: dict[str, Any], names: tuple,
                is_traced: Callable[[Any], bool], branch: SourceLoc | None = None) -> None:
    """Raise if a value read is traced, or (global/nonlocal) inside the traced `if` branch
    ``branch``: that assignment cannot be undone for the other branch (See Note [Stores in
    traced branches] in tracer/stores.py)."""
    if branch is not None and kind in ("global", "nonlocal"):
        raise error(f"{kind} in branch", loc, branch=branch)
    traced = [n for n in names if n in values and is_traced(values[n])]
    if traced and kind == "try":  # Note [try on the dynamic path]
        what, fix = MESSAGES[kind]
        raise ConcretizationError(what.format(names=", ".join(traced)), loc=loc, fix=fix)
    if traced:
        raise error(kind, loc, ", ".join(traced))


# Note [try on the dynamic path]
# `try: L = np.linalg.cholesky(K) except np.linalg.LinAlgError: L = ...` (a jitter retry, a
# fallback solver) cannot be one compiled function: native code does not unwind into an
# `except`. It was refused; it now sends the call to the dynamic path (a ConcretizationError,
# with its warning), where the function runs as Python on concrete values and each call's
# graph, whichever block ran, is differentiated (tracer/dynamic.py). There the fence lets the
# statement run. `with`, `del` and stores to globals stay refused: they are not about values.
