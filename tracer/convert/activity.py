"""Activity analysis: which plain names a statement (or expression) reads and binds.

Nested scopes (def, lambda, class, comprehensions) contribute their free reads and, for
def/class, their own name as a binding; names bound inside them stay inside. Plain names are
tracked, and attributes of plain names as composite names ``s.pos`` (a store to ``s.pos``
writes ``s.pos`` and reads ``s``; Note [Attributes in control-flow state]); ``y[i] = v`` reads
``y`` and ``i`` (the slices pass has already turned element updates of local arrays into
``y = __lg.setitem(...)``, a binding of ``y``).
"""

from __future__ import annotations

import dataclasses

import gast


@dataclasses.dataclass
class Activity:
    reads: set[str] = dataclasses.field(default_factory=set)
    writes: set[str] = dataclasses.field(default_factory=set)


_SCOPES = (gast.FunctionDef, gast.AsyncFunctionDef, gast.Lambda, gast.ClassDef)
_COMPS = (gast.ListComp, gast.SetComp, gast.DictComp, gast.GeneratorExp)


class _Visitor(gast.NodeVisitor):
    def __init__(self):
        self.act = Activity()

    def visit_Name(self, node):
        if isinstance(node.ctx, gast.Load):
            self.act.reads.add(node.id)
        elif isinstance(node.ctx, gast.Del):
            self.act.reads.add(node.id)
            self.act.writes.add(node.id)
        elif isinstance(node.ctx, (gast.Store, gast.Param)):
            self.act.writes.add(node.id)
        if node.annotation is not None:
            self.visit(node.annotation)

    def visit_AugAssign(self, node):
        if isinstance(node.target, gast.Name):
            self.act.reads.add(node.target.id)
        elif composite(node.target) is not None:
            self.act.reads.add(composite(node.target))
        self.generic_visit(node)

    def visit_Attribute(self, node):
        name = composite(node)
        if name is not None:
            (self.act.reads if isinstance(node.ctx, gast.Load) else self.act.writes).add(name)
        self.generic_visit(node)

    def visit_Import(self, node):
        for alias in node.names:
            self.act.writes.add(alias.asname or alias.name.split(".")[0])

    visit_ImportFrom = visit_Import

    def visit_ExceptHandler(self, node):
        if node.name is not None:
            self.visit(node.name)
        if node.type is not None:
            self.visit(node.type)
        for s in node.body:
            self.visit(s)

    def _nested(self, node):
        inner = scope_activity(node)
        self.act.reads |= inner.reads

    def visit_FunctionDef(self, node):
        self.act.writes.add(node.name)
        for d in node.decorator_list + node.args.defaults + [
            d for d in node.args.kw_defaults if d is not None
        ]:
            self.visit(d)
        self._nested(node)

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_ClassDef(self, node):
        self.act.writes.add(node.name)
        for d in node.decorator_list + node.bases + [k.value for k in node.keywords]:
            self.visit(d)
        self._nested(node)

    def visit_Lambda(self, node):
        for d in node.args.defaults + [d for d in node.args.kw_defaults if d is not None]:
            self.visit(d)
        self._nested(node)

    def _comp(self, node):
        self._nested(node)

    visit_ListComp = visit_SetComp = visit_DictComp = visit_GeneratorExp = _comp


def composite(node) -> str | None:
    """`s.pos` for an attribute of a plain name (Note [Attributes in control-flow state])."""
    if isinstance(node, gast.Attribute) and isinstance(node.value, gast.Name):
        return f"{node.value.id}.{node.attr}"
    return None


def is_composite(name: str) -> bool:
    return "." in name


def base_name(name: str) -> str:
    return name.split(".", 1)[0]


def activity(nodes) -> Activity:
    """Reads and bindings of a node or list of nodes, in the enclosing scope."""
    v = _Visitor()
    for n in nodes if isinstance(nodes, list) else [nodes]:
        v.visit(n)
    return v.act


def scope_activity(node) -> Activity:
    """Free reads of a nested scope (def/lambda/class/comprehension); writes are its locals."""
    v = _Visitor()
    declared: set[str] = set()
    if isinstance(node, (gast.FunctionDef, gast.AsyncFunctionDef, gast.Lambda)):
        v.visit(node.args)
        body = node.body if isinstance(node.body, list) else [node.body]
        for s in body:
            v.visit(s)
        for n in gast.walk(node):
            if isinstance(n, (gast.Global, gast.Nonlocal)):
                declared |= set(n.names)
    elif isinstance(node, gast.ClassDef):
        for s in node.body:
            v.visit(s)
    else:  # comprehension
        for gen in node.generators:
            v.visit(gen)
        for f in ("elt", "key", "value"):
            if getattr(node, f, None) is not None:
                v.visit(getattr(node, f))
    local = v.act.writes - declared
    return Activity(reads=v.act.reads - local, writes=local)


def declared_names(fn: gast.FunctionDef) -> tuple[set[str], set[str]]:
    """(global, nonlocal) names declared in ``fn`` itself (not in nested scopes)."""
    glob, nonloc = set(), set()
    stack = list(fn.body)
    while stack:
        n = stack.pop()
        if isinstance(n, gast.Global):
            glob |= set(n.names)
        elif isinstance(n, gast.Nonlocal):
            nonloc |= set(n.names)
        elif not isinstance(n, _SCOPES + _COMPS):
            stack.extend(gast.iter_child_nodes(n))
    return glob, nonloc


def local_names(fn: gast.FunctionDef) -> set[str]:
    """Names local to ``fn``: parameters and every name it binds, minus global/nonlocal."""
    act = activity(fn.args)
    for s in fn.body:
        act.writes |= activity(s).writes
    glob, nonloc = declared_names(fn)
    return {n for n in act.writes if not is_composite(n)} - glob - nonloc
