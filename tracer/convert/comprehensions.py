"""List comprehensions to loops the stager can stage (Note [Comprehensions as loops]).

Output invariants:
- ``[elt for tgt in it]`` (one ``for`` clause, no ``if`` clause, not async; ``tgt`` a name or
  a tuple/list of names, nested, none repeated; no ``:=``, ``yield`` or ``await`` in ``elt``)
  becomes ``__lg.list_comp(it, lambda <names of tgt>: elt, pattern, loc)``, where ``pattern``
  is ``None`` for a name and a tuple of the same nesting as ``tgt`` (of ``None``) otherwise;
- a generator expression of that form given as the first argument of a call to a consumer
  that reads it whole (the builtins sum, max, min, list, tuple, sorted; math.fsum,
  math.prod) is rewritten the same way;
- every other comprehension (``if`` clauses, several ``for`` clauses, set and dict
  comprehensions, other generator expressions) is left as written.
Inner comprehensions are rewritten first (an inner one is part of the outer element). Lambdas
are rewritten inside; nested def/class bodies are not (they are converted when called). Run
after liveness.closure_reads (generated lambdas are called at once, not kept) and before
calls.convert_calls (which converts the calls in the generated lambdas and the iterable).
"""

from __future__ import annotations

import builtins
import math
from typing import Any, Callable

import gast

from . import anno, templates
from .activity import scope_activity

# Note [Comprehensions as loops]
# Python runs a comprehension as a loop in a nested scope. Left as written, a comprehension
# over a traced array (or a list of traced values) runs at trace time: one copy of the
# element expression per item (200 rows: 1400 ops, over a second to the first gradient). It
# is rewritten here to `__lg.list_comp`, which runs the loop through `for_stmt` with a body
# appending to a fresh list: the existing machinery then stages it as one loop when the
# iterable is traced, a stackable list of traced values, a zip/enumerate of them, or a numpy
# array or range whose element expression reads traced values (Note [Loops over numpy arrays]
# in staging.py), with the list becoming one carried buffer (Note [Containers in staged
# loops] in effects.py), and runs it as Python otherwise. Scoping is kept: the iterable is
# evaluated where the comprehension stood (an argument of the call), the targets are the
# lambda's parameters (they do not leak), and the element reads enclosing names through the
# lambda's closure at each iteration, as the comprehension's scope does. A generator
# expression is lazy: only one read whole and at once by its consumer may become a list
# first (`any`/`all`/`next`/`zip` stop early or interleave; numpy's functions treat a
# generator differently from a list: np.array(gen) is an object array, np.sum(gen) is
# Python's sum but np.sum(list) sums over all axes).
_CONSUMERS = (builtins.sum, builtins.max, builtins.min, builtins.list, builtins.tuple,
              builtins.sorted, math.fsum, math.prod)
_UNSAFE = (gast.NamedExpr, gast.Yield, gast.YieldFrom, gast.Await)
CALL = "list_comp"  # the operator: tracer/operators.py list_comp


def is_list_comp(node: gast.AST) -> bool:
    """A list comprehension, as written or rewritten here (calls.py: a name bound to it holds
    a list)."""
    return isinstance(node, gast.ListComp) or isinstance(node, gast.Call) and \
        isinstance(node.func, gast.Attribute) and node.func.attr == CALL and \
        isinstance(node.func.value, gast.Name) and node.func.value.id == "__lg"


def _pattern(target: gast.expr, names: list[str]) -> gast.expr | None:
    """The unpacking pattern of a comprehension target, appending its names to ``names``;
    None when the target is not a name or a (nested) tuple/list of names."""
    if isinstance(target, gast.Name):
        names.append(target.id)
        return templates.const(None)
    if isinstance(target, (gast.Tuple, gast.List)) and target.elts:
        parts = [_pattern(e, names) for e in target.elts]
        if any(p is None for p in parts):
            return None
        return gast.Tuple(elts=parts, ctx=gast.Load())
    return None


def _keeps_targets(comp: gast.ListComp | gast.GeneratorExp) -> bool:
    """Whether a lambda or generator expression in the element reads a target: it would see
    the comprehension's one variable, which ends at the last item (`[lambda: i for i in
    range(3)]` makes three functions returning 2), not one variable per item."""
    targets = {n.id for g in comp.generators for n in gast.walk(g.target)
               if isinstance(n, gast.Name)}
    return any(isinstance(n, (gast.Lambda, gast.GeneratorExp)) and
               scope_activity(n).reads & targets for n in gast.walk(comp.elt))


def _rewrite(comp: gast.ListComp | gast.GeneratorExp) -> gast.expr | None:
    if len(comp.generators) != 1:
        return None
    gen = comp.generators[0]
    if gen.ifs or gen.is_async or any(isinstance(n, _UNSAFE) for n in gast.walk(comp.elt)):
        return None
    names: list[str] = []
    pattern = _pattern(gen.target, names)
    if pattern is None or len(set(names)) != len(names):
        return None
    params = [gast.Name(id=n, ctx=gast.Param(), annotation=None, type_comment=None)
              for n in names]
    args = gast.arguments(args=params, posonlyargs=[], vararg=None, kwonlyargs=[],
                          kw_defaults=[], kwarg=None, defaults=[])
    new = templates.replace_expr(
        f"__lg.{CALL}(it, elt, pattern, loc)", it=gen.iter,
        elt=gast.Lambda(args=args, body=comp.elt), pattern=pattern,
        loc=templates.loc_expr(comp))
    anno.fill_loc(new, comp)
    return new


class _Comprehensions(gast.NodeTransformer):
    def __init__(self, locals_: set[str], resolve: Callable[..., Any]):
        self.locals, self.resolve = locals_, resolve

    def _skip(self, node):
        return node

    visit_FunctionDef = visit_AsyncFunctionDef = visit_ClassDef = _skip

    def visit_ListComp(self, node):
        keeps = _keeps_targets(node)
        self.generic_visit(node)
        return node if keeps else _rewrite(node) or node

    def visit_Call(self, node):
        gen = node.args[0] if node.args and isinstance(node.args[0], gast.GeneratorExp) and \
            not _keeps_targets(node.args[0]) and self._consumer(node) else None
        self.generic_visit(node)
        if gen is not None:
            node.args[0] = _rewrite(node.args[0]) or node.args[0]
        return node

    def _consumer(self, call: gast.Call) -> bool:
        """Whether the callee is, now, one of _CONSUMERS (not a local name)."""
        func, chain = call.func, []
        while isinstance(func, gast.Attribute):
            chain.append(func.attr)
            func = func.value
        if not isinstance(func, gast.Name) or func.id in self.locals:
            return False
        value = self.resolve(func.id, tuple(reversed(chain)))
        return any(value is c for c in _CONSUMERS)


def convert_comprehensions(fn: gast.FunctionDef, locals_: set[str],
                           resolve: Callable[..., Any]) -> None:
    """Rewrite the list comprehensions in ``fn``'s body (in place), per the module docstring."""
    t = _Comprehensions(locals_, resolve)
    fn.body = [t.visit(s) for s in fn.body]
