"""Lazily evaluated logical expressions, ternaries and chained comparisons.

Output invariants: ``a and b`` -> ``__lg.and_(lambda: a, lambda: b)`` (same for ``or``,
variadic for longer chains), ``not a`` -> ``__lg.not_(a)``, ``a if c else b`` ->
``__lg.if_exp(c, lambda: a, lambda: b, loc)``, ``a < b <= c`` ->
``__lg.compare_chain(a, '<', lambda: b, '<=', lambda: c)``, ``a in b`` -> ``__lg.in_(a, b)``
(and ``not_in``: a traced number in a set is found by value, operators.in_); each operand is
still evaluated at most once and in Python's order. ``assert t, m`` -> ``if not t: raise
AssertionError(m)`` (no statement under ``python -O``), so a traced ``t`` becomes a run-time
check (Note [Raise under a traced condition]). Operands holding ``:=``, ``yield`` or
``await`` are left as written (a lambda would change their scope). Nested def/class bodies
are not rewritten.
"""

from __future__ import annotations

import gast

from . import anno, templates

_CMP = {gast.Eq: "==", gast.NotEq: "!=", gast.Lt: "<", gast.LtE: "<=", gast.Gt: ">",
        gast.GtE: ">=", gast.Is: "is", gast.IsNot: "is not", gast.In: "in",
        gast.NotIn: "not in"}
_NO_LAMBDA = (gast.NamedExpr, gast.Yield, gast.YieldFrom, gast.Await)


def _lambda(body: gast.expr) -> gast.Lambda:
    args = gast.arguments(args=[], posonlyargs=[], vararg=None, kwonlyargs=[], kw_defaults=[],
                          kwarg=None, defaults=[])
    lam = gast.Lambda(args=args, body=body)
    anno.fill_loc(lam, body)
    return lam


def _lambda_safe(*nodes) -> bool:
    return not any(isinstance(n, _NO_LAMBDA) for node in nodes for n in gast.walk(node))


def _call(func: str, args: list, origin) -> gast.Call:
    call = templates.replace_expr(f"__lg.{func}()")
    call.args = args
    anno.fill_loc(call, origin)
    return call


def and_call(exprs: list, origin) -> gast.Call:
    """``__lg.and_(lambda: e1, lambda: e2, ...)``."""
    return _call("and_", [_lambda(e) for e in exprs], origin)


class _Logical(gast.NodeTransformer):
    def _skip(self, node):
        return node

    visit_FunctionDef = visit_AsyncFunctionDef = visit_ClassDef = _skip

    def visit_Assert(self, node):
        if not __debug__:  # python -O: asserts are not run
            return None
        exc = "AssertionError(msg)" if node.msg is not None else "AssertionError"
        stmt = templates.replace(f"if not test:\n    raise {exc}", test=node.test,
                                 msg=node.msg)[0]
        anno.fill_loc(stmt, node)
        return self.visit(stmt)

    def visit_BoolOp(self, node):
        self.generic_visit(node)
        if not _lambda_safe(*node.values):
            return node
        func = "and_" if isinstance(node.op, gast.And) else "or_"
        return _call(func, [_lambda(v) for v in node.values], node)

    def visit_UnaryOp(self, node):
        self.generic_visit(node)
        if isinstance(node.op, gast.Not):
            return _call("not_", [node.operand], node)
        return node

    def visit_IfExp(self, node):
        self.generic_visit(node)
        if not _lambda_safe(node.body, node.orelse):
            return node
        return _call("if_exp", [node.test, _lambda(node.body), _lambda(node.orelse),
                                templates.loc_expr(node)], node)

    def visit_Compare(self, node):
        self.generic_visit(node)
        if len(node.ops) == 1 and isinstance(node.ops[0], (gast.In, gast.NotIn)):
            name = "in_" if isinstance(node.ops[0], gast.In) else "not_in"
            return _call(name, [node.left, node.comparators[0]], node)
        if len(node.ops) == 1 or not _lambda_safe(*node.comparators):
            return node
        args = [node.left]
        for op, right in zip(node.ops, node.comparators):
            args += [templates.const(_CMP[type(op)]), _lambda(right)]
        return _call("compare_chain", args, node)


def convert_logical(fn: gast.FunctionDef) -> None:
    t = _Logical()
    fn.body = [s for s in map(t.visit, fn.body) if s is not None] or [gast.Pass()]
