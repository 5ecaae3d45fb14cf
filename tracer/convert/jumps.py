"""Jump conversion: ``break``, ``continue`` and ``return`` become flag variables (AutoGraph).

Output invariants: no ``break``/``continue`` remains in any loop of the function (nested defs
are left alone); loops have no ``else`` (it becomes ``if not __lg_break: ...`` after the loop);
if any ``return`` is not the last top-level statement, every ``return v`` becomes
``__lg_do_return = True; __lg_retval = v`` and the function ends with ``return __lg_retval``.
Statements after one that may jump are guarded by ``if not <flag>:`` (or, when an ``if``
branch always jumps and the other never does, moved into that other branch); a guard after a
``return`` has ``else: <flag> = True`` (See Note [Nothing runs after a return]). While tests get
``not <flag> and test``; for loops get ``not <flag>`` in the ``EXTRA_TEST`` annotation.
"""

from __future__ import annotations

from typing import Callable

import gast

from . import anno, templates
from .naming import Namer

_SCOPES = (gast.FunctionDef, gast.AsyncFunctionDef, gast.Lambda, gast.ClassDef)
_LOOPS = (gast.For, gast.While)
_BLOCKS = ("body", "orelse", "finalbody")


def _contains(node, kind: type, through_loops: bool) -> bool:
    stack = list(gast.iter_child_nodes(node))
    while stack:
        n = stack.pop()
        if isinstance(n, kind):
            return True
        if isinstance(n, _SCOPES) or (not through_loops and isinstance(n, _LOOPS)):
            continue
        stack.extend(gast.iter_child_nodes(n))
    return False


# Note [Nothing runs after a return]
# Once `__lg_do_return` is true, no user statement runs: every later statement is guarded by
# `if not __lg_do_return`, every loop tests it. So a variable that is unbound only on paths
# that have returned (`if s > 0: (if x > 1: return x); c = x * 2 else: c = x * 3; return c`)
# is never read unbound. The staged guard cannot see that from its condition, so the guard's
# `else` says it: `__lg_do_return = True` is a no-op in Python, and tells the stager that this
# branch has returned, so a name unbound only there takes the other branch's value
# (staging.stage_if) instead of becoming "assigned only in one branch" and refusing the
# later read.


class _Jump:
    """One kind of jump being rewritten within one region (a loop body or the function)."""

    def __init__(self, kind: type, flag: str, through_loops: bool,
                 replacement: Callable[[gast.stmt], list]):
        self.kind, self.flag, self.through_loops = kind, flag, through_loops
        self.replacement = replacement

    def contains(self, s) -> bool:
        if isinstance(s, self.kind):
            return True
        if isinstance(s, _SCOPES) or (not self.through_loops and isinstance(s, _LOOPS)):
            return False
        return _contains(s, self.kind, self.through_loops)

    def always(self, stmts: list) -> bool:
        if not stmts:
            return False
        last = stmts[-1]
        return isinstance(last, self.kind) or (
            isinstance(last, gast.If) and self.always(last.body) and self.always(last.orelse))

    def block(self, stmts: list) -> list:
        out = []
        for i, s in enumerate(stmts):
            if isinstance(s, self.kind):
                new = self.replacement(s)
                anno.fill_loc(new, s)
                return out + new  # the rest of the block is unreachable
            if not self.contains(s):
                out.append(s)
                continue
            rest = stmts[i + 1:]
            if isinstance(s, gast.If) and rest:
                if self.always(s.body) and not any(map(self.contains, s.orelse)):
                    s.orelse, rest = s.orelse + rest, []
                elif self.always(s.orelse) and not any(map(self.contains, s.body)):
                    s.body, rest = s.body + rest, []
            self.children(s)
            out.append(s)
            if rest:
                # See Note [Nothing runs after a return]: the `else` restates the flag.
                template = "if not flag:\n    rest" + (
                    "\nelse:\n    flag = True" if self.kind is gast.Return else "")
                guard = templates.replace(template, flag=self.flag, rest=self.block(rest))
                anno.fill_loc(guard, rest[0])
                out.extend(guard)
            return out
        return out

    def children(self, s) -> None:
        if isinstance(s, _LOOPS):  # only for `return`: stop the loop once returned
            add_loop_test(s, self.flag)
        for field in _BLOCKS:
            if getattr(s, field, None):
                setattr(s, field, self.block(getattr(s, field)))
        for h in getattr(s, "handlers", []):
            h.body = self.block(h.body)


def add_loop_test(loop, flag: str) -> None:
    if isinstance(loop, gast.While):
        test = templates.replace_expr("not flag", flag=flag)
        loop.test = gast.BoolOp(op=gast.And(), values=[test, loop.test])
        anno.fill_loc(loop.test, loop)
    else:  # the logical pass does not see annotations: write the operator call directly
        test = templates.replace_expr("__lg.not_(flag)", flag=flag)
        anno.fill_loc(test, loop)
        anno.set_(loop, anno.Key.EXTRA_TEST, anno.get(loop, anno.Key.EXTRA_TEST, []) + [test])


def _flag_set(flag: str):
    return lambda s: templates.replace("flag = True", flag=flag)


class _Loops(gast.NodeTransformer):
    """Rewrites break and continue, innermost loops first."""

    def __init__(self, namer: Namer):
        self.namer = namer

    def _skip(self, node):
        return node  # nested scopes keep their own jumps (converted when called)

    visit_FunctionDef = visit_AsyncFunctionDef = visit_Lambda = visit_ClassDef = _skip

    def _loop(self, node):
        self.generic_visit(node)
        before, after = [], []
        if any(_Jump(gast.Continue, "", False, None).contains(s) for s in node.body):
            flag = self.namer.new("continue")
            jump = _Jump(gast.Continue, flag, False, _flag_set(flag))
            node.body = templates.replace("flag = False", flag=flag) + jump.block(node.body)
        if any(_Jump(gast.Break, "", False, None).contains(s) for s in node.body):
            flag = self.namer.new("break")
            node.body = _Jump(gast.Break, flag, False, _flag_set(flag)).block(node.body)
            before = templates.replace("flag = False", flag=flag)
            add_loop_test(node, flag)
            if node.orelse:
                after = templates.replace("if not flag:\n    orelse", flag=flag, orelse=node.orelse)
        elif node.orelse:
            after = node.orelse
        node.orelse = []
        anno.fill_loc(before + after, node)
        anno.fill_loc(node.body, node)
        return before + [node] + after

    visit_For = visit_While = _loop


def convert_jumps(fn: gast.FunctionDef, namer: Namer) -> None:
    """Rewrite break/continue in every loop and returns in the function (in place)."""
    fn.body = [r for s in fn.body for r in _as_list(_Loops(namer).visit(s))]
    body = fn.body
    doc = body[:1] if body and _is_docstring(body[0]) else []
    rest = body[len(doc):]
    nested = any(_Jump(gast.Return, "", True, None).contains(s) for s in rest[:-1]) or (
        rest and not isinstance(rest[-1], gast.Return)
        and _Jump(gast.Return, "", True, None).contains(rest[-1]))
    if not nested:
        return
    flag, retval = namer.new("do_return"), namer.new("retval")

    def ret(s):
        value = s.value if s.value is not None else templates.const(None)
        return templates.replace("flag = True\nretval = value", flag=flag, retval=retval,
                                 value=value)

    new = _Jump(gast.Return, flag, True, ret).block(rest)
    head = templates.replace("flag = False\nretval = None", flag=flag, retval=retval)
    tail = templates.replace("return retval", retval=retval)
    anno.fill_loc(head, rest[0])
    anno.fill_loc(tail, rest[-1])
    fn.body = doc + head + new + tail


def _as_list(x):
    return x if isinstance(x, list) else [x]


def _is_docstring(s) -> bool:
    return isinstance(s, gast.Expr) and isinstance(s.value, gast.Constant) and isinstance(
        s.value.value, str)
