"""Liveness and definedness of local names, annotated on every if/for/while.

Runs on the structured AST after jump conversion (no break/continue/return inside loops
remain, only flag variables), so a backward pass over nested blocks with a fixpoint per loop
is exact enough; anything it cannot see precisely (try, with, reads by closures) is
over-approximated, which costs an extra state variable, never a wrong result. Annotations
(anno.Key):
  LIVE_OUT on if/for/while: names read after the statement before being rebound;
  HEAD_LIVE on for/while: names live at the loop head (read by the test, the next iteration,
    or after the loop), so loop-carried = modified & HEAD_LIVE;
  DEFINED_IN / DEFINITELY_IN on if/for/while/return/assign: names possibly / certainly bound
    on entry.
"""

from __future__ import annotations

import gast

from . import anno
from .activity import activity, scope_activity

_LOOPS = (gast.For, gast.While)


def annotate(fn: gast.FunctionDef, cells: set[str] = frozenset()) -> None:
    """Annotate ``fn``; ``cells`` (see closure_reads) count as live everywhere."""
    _Liveness(set(cells)).block(fn.body, set())
    params = activity(fn.args).writes
    _Defined().block(fn.body, set(params), set(params))


def _reads(node) -> set[str]:
    return activity(node).reads if node is not None else set()


def closure_reads(fn: gast.FunctionDef) -> set[str]:
    """Names that functions, lambdas, classes and generator expressions nested in ``fn`` read
    from it: such a closure may run (and read them) after any statement, so liveness cannot
    place its reads; they count as live everywhere. Call on the user's code, before the
    converter adds lambdas of its own."""
    out: set[str] = set()
    stack = list(fn.body)
    while stack:
        n = stack.pop()
        if isinstance(n, (gast.FunctionDef, gast.AsyncFunctionDef, gast.Lambda, gast.ClassDef,
                          gast.GeneratorExp)):
            out |= scope_activity(n).reads
        stack.extend(gast.iter_child_nodes(n))
    return out


class _Liveness:
    def __init__(self, cells: set[str]):
        self.cells = cells

    def block(self, stmts: list, live: set[str]) -> set[str]:
        for s in reversed(stmts):
            live = self.stmt(s, live | self.cells)
        return live

    def stmt(self, s, live: set[str]) -> set[str]:
        if isinstance(s, gast.If):
            anno.set_(s, anno.Key.LIVE_OUT, set(live))
            return _reads(s.test) | self.block(s.body, live) | self.block(s.orelse, live)
        if isinstance(s, _LOOPS):
            return self._loop(s, live)
        if isinstance(s, (gast.Try, gast.With, gast.AsyncWith)) or type(s).__name__ == "TryStar":
            everything = live | activity(s).reads
            for field in ("body", "orelse", "finalbody"):
                self.block(getattr(s, field, []) or [], everything)
            for h in getattr(s, "handlers", []):
                self.block(h.body, everything)
            return everything
        act = activity(s)
        return (live - act.writes) | act.reads

    def _loop(self, s, live: set[str]) -> set[str]:
        after = live | self.block(s.orelse, live)
        head = after | _reads(s.test if isinstance(s, gast.While) else None)
        head |= set().union(*(_reads(t) for t in anno.get(s, anno.Key.EXTRA_TEST, [])))
        target = activity(s.target) if isinstance(s, gast.For) else None
        while True:
            body_in = self.block(s.body, head)
            if target is not None:
                body_in = (body_in - target.writes) | target.reads
            if body_in <= head:
                break
            head = head | body_in
        anno.set_(s, anno.Key.LIVE_OUT, set(live))
        anno.set_(s, anno.Key.HEAD_LIVE, head)
        return head | _reads(s.iter if isinstance(s, gast.For) else None)


class _Defined:
    """Forward pass: (possibly, certainly) bound names."""

    def block(self, stmts: list, maybe: set[str], sure: set[str]):
        for s in stmts:
            maybe, sure = self.stmt(s, maybe, sure)
        return maybe, sure

    def stmt(self, s, maybe: set[str], sure: set[str]):
        if isinstance(s, (gast.If, gast.For, gast.While, gast.Return, gast.Assign)):
            anno.set_(s, anno.Key.DEFINED_IN, set(maybe))
            anno.set_(s, anno.Key.DEFINITELY_IN, set(sure))
        if isinstance(s, gast.If):
            m1, s1 = self.block(s.body, maybe, sure)
            m2, s2 = self.block(s.orelse, maybe, sure)
            return m1 | m2, s1 & s2
        writes = activity(s).writes
        if isinstance(s, _LOOPS):
            tgt = activity(s.target).writes if isinstance(s, gast.For) else set()
            self.block(s.body, maybe | writes, sure | tgt)
            self.block(s.orelse, maybe | writes, sure)
            return maybe | writes, sure
        if isinstance(s, (gast.Try, gast.With, gast.AsyncWith)) or type(s).__name__ == "TryStar":
            self._blocks(s, maybe, sure)
            return maybe | writes, sure
        return maybe | writes, sure | writes

    def _blocks(self, s, maybe: set[str], sure: set[str]) -> None:
        """The blocks of a try/with. Each starts from the names bound before it, not every
        name the statement binds: one bound only later is unbound there, and the control-flow
        conversion must bind it to Undefined before a nested statement that declares it
        nonlocal. A handler may follow a raise anywhere in the body."""
        items = getattr(s, "items", [])
        after = self.block(s.body, maybe | activity(items).writes, sure)[0]
        orelse, handlers = getattr(s, "orelse", []) or [], getattr(s, "handlers", [])
        self.block(orelse, after, sure)
        for h in handlers:
            self.block(h.body, after | ({h.name.id} if h.name else set()), sure)
        self.block(getattr(s, "finalbody", []) or [],
                   maybe | activity(s.body + orelse + handlers).writes, sure)
