"""Readable code templates: Python source with placeholder names, filled with gast nodes.

``replace(template, **subs)`` parses ``template`` and substitutes each placeholder name:
a str renames (variables, function names, parameters, nonlocal lists); a gast expression is
copied in (with Store context where the placeholder is assigned to); a list of statements is
spliced where the placeholder stands alone as a statement. An empty ``nonlocal`` list drops
the statement. Template nodes carry no location; callers give them the location of the user
statement they replace (anno.fill_loc).
"""

from __future__ import annotations

import copy
import textwrap
from typing import Any

import gast

from . import anno


class _Replacer(gast.NodeTransformer):
    def __init__(self, subs: dict[str, Any]):
        self.subs = subs

    def _rename(self, name: str) -> str:
        value = self.subs.get(name, name)
        return value if isinstance(value, str) else name

    def visit_Expr(self, node):
        if isinstance(node.value, gast.Name) and isinstance(self.subs.get(node.value.id), list):
            return self.subs[node.value.id]
        return self.generic_visit(node)

    def visit_Name(self, node):
        value = self.subs.get(node.id)
        if value is None:
            return node
        if isinstance(value, str):
            node.id = value
            return node
        new = copy.deepcopy(value)
        if not isinstance(node.ctx, gast.Load):
            _set_ctx(new, node.ctx)
        return new

    def visit_FunctionDef(self, node):
        node.name = self._rename(node.name)
        return self.generic_visit(node)

    def visit_Nonlocal(self, node):
        names = []
        for n in node.names:
            value = self.subs.get(n, n)
            names.extend(value if isinstance(value, (list, tuple)) else [value])
        if not names:
            return None
        node.names = names
        return node


def _set_ctx(node: gast.AST, ctx: gast.AST) -> None:
    if isinstance(node, (gast.Name, gast.Subscript, gast.Attribute)):
        node.ctx = ctx
    if isinstance(node, (gast.Tuple, gast.List)):
        node.ctx = ctx
        for e in node.elts:
            _set_ctx(e, ctx)
    if isinstance(node, gast.Starred):
        node.ctx = ctx
        _set_ctx(node.value, ctx)


def replace(template: str, **subs: Any) -> list[gast.stmt]:
    """Statements of ``template`` with placeholders substituted (see module docstring)."""
    module = gast.parse(textwrap.dedent(template))
    anno.strip_loc(module)
    module = _Replacer(subs).visit(module)
    return module.body


def replace_expr(template: str, **subs: Any) -> gast.expr:
    stmts = replace(template, **subs)
    return stmts[0].value


def name(id_: str, ctx: str = "load") -> gast.Name:
    ctx_node = {"load": gast.Load, "store": gast.Store}[ctx]()
    return gast.Name(id=id_, ctx=ctx_node, annotation=None, type_comment=None)


def const(value: Any) -> gast.Constant:
    return gast.Constant(value=value, kind=None)


def str_tuple(names: list[str]) -> gast.Tuple:
    return gast.Tuple(elts=[const(n) for n in names], ctx=gast.Load())


def names_tuple(names: list[str], ctx: str = "load") -> gast.Tuple:
    ctx_node = {"load": gast.Load, "store": gast.Store}[ctx]()
    return gast.Tuple(elts=[name(n, ctx) for n in names], ctx=ctx_node)


SRC = "__lg_src"  # the converted function's SourceMap, a free variable like ``__lg``


def loc_expr(node: gast.AST) -> gast.expr:
    """``__lg_src.loc(line, col)``: the user's location of ``node``, as an operator argument."""
    return replace_expr(f"{SRC}.loc(line, col)", line=const(node.lineno),
                        col=const(node.col_offset))
