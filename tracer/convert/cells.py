"""Variables of converted functions that their nested functions read or rebind (``nonlocal``).

Output invariants: each ``def`` nested in a converted function (run by its frame) carries,
as its innermost decorator, ``__lg.owns_cells(names)``: its free variables (read, or
declared ``nonlocal`` in it or a function nested in it) that are variables of a converted
frame (the enclosing function's locals, or names that function owns in turn). See Note
[Nonlocal variables of converted functions].
"""

from __future__ import annotations

import gast

from . import anno, templates
from .activity import _COMPS, _SCOPES, scope_activity

OWNED = "__lg_owned_cells__"

# Note [Nonlocal variables of converted functions]
# `nonlocal total` in a helper nested in the differentiated function rebinds a variable of
# a frame that runs while tracing (converted code runs only then): a traced value stored
# there stays inside the trace, as a local would. The enclosing function's conversion marks
# each nested def with the names it owns (cells.mark_nested); converting the nested function
# then treats those like its own locals (no fence, and state of its traced `if`s and staged
# loops, live everywhere since the enclosing frame reads them later). On the enclosing side
# (`shared`), every if/for/while whose body calls something counts those names as bound by
# it, since a call may run the helper: a staged loop carries them and a traced `if` merges
# them. A `nonlocal` of a frame outside the trace (the differentiated function's own
# `nonlocal`, or a helper defined outside it) keeps its fence: the value would leak.
# The variables a nested function only reads are marked too: they are no captured constants
# (Note [Captured values are guarded] in tracer/captures.py), since every call makes them
# anew; guarding them retraced at every call once the frame had changed them after the read.


def nested_nonlocals(node) -> set[str]:
    """Names declared ``nonlocal`` in the scopes nested in ``node``, at any depth."""
    return {name for n in gast.walk(node) if n is not node and isinstance(n, gast.Nonlocal)
            for name in n.names}


def frame_names(node: gast.FunctionDef, fn, locals_: set[str],
                nonlocals: set[str]) -> tuple[set[str], set[str]]:
    """(names of converted frames that ``fn`` sees, its nonlocal names). A free variable of
    ``fn`` that only functions nested in it rebind is declared ``nonlocal`` in ``fn`` too
    (the same variable), so its if/for/while carry it and never bind it to Undefined."""
    free = getattr(fn, OWNED, frozenset()) & set(fn.__code__.co_freevars)
    passing = sorted(nested_nonlocals(node) & free - nonlocals)
    if passing:
        decl = gast.Nonlocal(names=passing)
        anno.fill_loc(decl, node.body[0])
        node.body.insert(0, decl)
    return locals_ | free, nonlocals | set(passing)


def _nested_defs(stmts):
    """The defs (and async defs) a function's own frame runs: not those inside nested
    scopes."""
    stack = list(stmts)
    while stack:
        n = stack.pop()
        if isinstance(n, (gast.FunctionDef, gast.AsyncFunctionDef)):
            yield n
        if not isinstance(n, _SCOPES + _COMPS):
            stack.extend(gast.iter_child_nodes(n))


def mark_nested(fn: gast.FunctionDef, frame: set[str]) -> None:
    """Decorate each def nested in ``fn`` with the free variables (read or ``nonlocal``) it
    shares with ``frame`` (the variables of ``fn``'s frame and those ``fn`` owns)."""
    for d in _nested_defs(fn.body):
        names = sorted((scope_activity(d).reads | nested_nonlocals(d)) & frame)
        if names:
            mark = templates.replace_expr("__lg.owns_cells(names)",
                                          names=templates.str_tuple(names))
            anno.fill_loc(mark, d)
            d.decorator_list.append(mark)
