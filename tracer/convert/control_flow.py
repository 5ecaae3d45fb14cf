"""if/for/while -> calls of the run-time operators, with state passed through closures.

Requires: jump conversion done (no break/continue in loops, no loop else) and liveness
annotations (liveness.annotate). Output invariants, per statement (AutoGraph's layout):
- ``x = __lg.Undefined('x')`` first, for each name the statement binds that is certainly
  unbound on entry (so every ``nonlocal x`` below has a binding);
- ``__lg_get_state()`` returns the state tuple and ``__lg_set_state(vars)`` rebinds it. For
  loops the state is the names the statement binds that are live at the loop head
  (loop-carried or read after the loop). For ``if`` it is every name the branches bind, the
  first ``nouts`` of them (those live afterwards) its outputs, the rest only reset before the
  second branch (See Note [Each branch starts from the state before the if]);
- body functions declare ``nonlocal`` for *every* name the statement binds, so running them
  as Python has exactly the original effect;
- then one call ``__lg.if_stmt/for_stmt/while_stmt(...)`` carrying ``__lg_src.loc(line, col)``;
- ``raise X`` becomes ``raise __lg.raising(lambda: X, loc)``: under a traced condition the
  stager compiles it to a run-time check (Note [Raise under a traced condition]); the body
  of a ``try`` with handlers runs under ``with __lg.catching((types...)):``.
"""

from __future__ import annotations

import gast

from . import anno, logical, templates
from .activity import activity, base_name, is_composite
from .naming import Namer


class _ControlFlow(gast.NodeTransformer):
    def __init__(self, namer: Namer, globals_: set[str], nonlocals: set[str], locals_: set[str],
                 owned: set[str] = frozenset(), shared: set[str] = frozenset()):
        self.namer, self.globals, self.locals = namer, globals_, locals_
        # nonlocal names that are no state (Note [Nonlocal variables of converted functions]):
        # all of them are bound outside, so none gets an Undefined here
        self.nonlocals, self.declared, self.shared = nonlocals - owned, nonlocals, shared
        self.initialised: set[str] = set()  # Undefined already bound by an enclosing statement

    def _skip(self, node):
        return node

    visit_FunctionDef = visit_AsyncFunctionDef = visit_ClassDef = _skip

    # -- shared pieces -------------------------------------------------------------------
    def _modified(self, nodes) -> set[str]:
        """Names the statements bind, and the `shared` ones when they call something."""
        calls = self.shared and any(isinstance(n, gast.Call) for s in _as_list(nodes)
                                    for n in gast.walk(s))
        return (activity(nodes).writes | (self.shared if calls else set())) - self.globals

    def _declare(self, fn_stmts: list, modified: set[str]) -> None:
        """Prepend nonlocal/global declarations to the body of the (single) def in fn_stmts."""
        fn = fn_stmts[0]
        decls = []
        nonlocal_ = sorted(n for n in modified if not is_composite(n))
        if nonlocal_:
            decls.append(gast.Nonlocal(names=nonlocal_))
        glob = sorted(activity(fn.body).writes & self.globals)
        if glob:
            decls.append(gast.Global(names=glob))
        fn.body = decls + fn.body

    def _inits(self, node, modified: set[str]) -> set[str]:
        maybe = anno.get(node, anno.Key.DEFINED_IN, set())
        return {n for n in modified if not is_composite(n)} - maybe - self.declared - \
            self.initialised

    def _visit_children(self, node, modified: set[str]) -> None:
        """Convert nested statements, which need no Undefined for names bound out here."""
        saved = self.initialised
        self.initialised = saved | self._inits(node, modified)
        self.generic_visit(node)
        self.initialised = saved

    def _names(self, *hints: str) -> list[str]:
        """Fresh names, taken before converting nested statements so outer ones come first."""
        return [self.namer.new(h) for h in ("get_state", "set_state", "vars") + hints]

    def _state(self, node, state: list[str], modified: set[str], names: list[str],
               deleted: set[str] = frozenset()) -> list:
        """Prelude statements: Undefined initialisations, get_state and set_state (``deleted``:
        names a ``del`` inside the statement may unbind)."""
        maybe = anno.get(node, anno.Key.DEFINED_IN, set())
        sure = anno.get(node, anno.Key.DEFINITELY_IN, set())
        prelude = []
        for n in sorted(self._inits(node, modified)):
            prelude += templates.replace("x = __lg.Undefined(name)", x=n, name=templates.const(n))
        get_name, set_name, vars_ = names[:3]
        elts = []
        for n in state:
            if is_composite(n):  # See Note [Attributes in control-flow state]
                elts.append(templates.replace_expr("__lg.ldu(lambda: x, name)",
                                                   x=_attribute(n), name=templates.const(n)))
            elif n in deleted or (n in maybe and n not in sure):
                elts.append(templates.replace_expr("__lg.ldu(lambda: x, name)", x=n,
                                                   name=templates.const(n)))
            else:
                elts.append(templates.name(n))
        prelude += templates.replace("def get_state():\n    return state", get_state=get_name,
                                     state=gast.Tuple(elts=elts, ctx=gast.Load()))
        if state:
            plain = [n for n in state if not is_composite(n)]
            targets = [n if not is_composite(n) else self.namer.new("attr") for n in state]
            prelude += templates.replace(
                "def set_state(vars_):\n    nonlocal names\n    targets = vars_\n    attrs",
                set_state=set_name, vars_=vars_, names=plain,
                targets=templates.names_tuple(targets, "store"),
                attrs=[s for n, t in zip(state, targets) if is_composite(n)
                       for s in templates.replace(
                           "__lg.setattr_(obj, attr, value)", obj=base_name(n),
                           attr=templates.const(n.split(".", 1)[1]), value=t)])
        else:
            prelude += templates.replace("def set_state(vars_):\n    pass", set_state=set_name,
                                         vars_=vars_)
        return prelude

    def _live(self, modified: set[str], live: set[str]) -> list[str]:
        """The state: names modified and live after, and attributes of a live name."""
        return sorted(n for n in modified if n not in self.nonlocals and (
            n in live or is_composite(n) and base_name(n) in live))

    def _finish(self, node, stmts: list) -> list:
        anno.fill_loc(stmts, node)
        return stmts

    # -- returned values -----------------------------------------------------------------
    def _maybe_undefined(self, node, value) -> bool:
        sure = anno.get(node, anno.Key.DEFINITELY_IN)
        return sure is not None and bool((activity(value).reads & self.locals) - sure)

    def visit_Return(self, node):
        """``return v`` -> ``return __lg.retval(v)`` when ``v`` may read an unbound name."""
        if node.value is not None and self._maybe_undefined(node, node.value):
            node.value = templates.replace_expr("__lg.retval(v)", v=node.value)
            anno.fill_loc(node.value, node)
        return node

    def visit_Try(self, node):
        """The body of a `try` that catches runs under ``__lg.catching(types)``: a raise the
        handlers catch stays a Python raise (Note [Raise under a traced condition]); each
        handler starts with ``__lg.reraise_own()`` (Note [llgrad's exceptions pass user
        handlers] in operators.py)."""
        self.generic_visit(node)
        for h in node.handlers:
            first = templates.replace("__lg.reraise_own()")
            anno.fill_loc(first, h)
            h.body = first + h.body
        if node.handlers:
            types = [h.type if h.type is not None else templates.name("BaseException")
                     for h in node.handlers]
            node.body = templates.replace("with __lg.catching(types):\n    body",
                                          types=gast.Tuple(elts=types, ctx=gast.Load()),
                                          body=node.body)
            anno.fill_loc(node.body, node)
        return node

    visit_TryStar = visit_Try

    def visit_Raise(self, node):
        if node.exc is not None:
            node.exc = templates.replace_expr("__lg.raising(lambda: exc, loc)", exc=node.exc,
                                              loc=templates.loc_expr(node))
            anno.fill_loc(node.exc, node)
        return node

    def visit_Assign(self, node):
        target = node.targets[0]
        if (isinstance(target, gast.Name) and target.id.startswith("__lg_retval")
                and self._maybe_undefined(node, node.value)):
            node.value = templates.replace_expr("__lg.retval(v)", v=node.value)
            anno.fill_loc(node.value, node)
        return node

    # -- statements ----------------------------------------------------------------------
    # Note [Each branch starts from the state before the if]
    # A traced `if` runs both branch functions, one after the other, so every name the first
    # branch binds is reset before the second runs: the state is all of them, not only those
    # used after the `if` (the name `v` in `v = lo; r = v * 3` / `r = v * 5` must read the
    # value from before the `if` in the second branch). Only the first `nouts` entries, the
    # names live after the `if`, are outputs the stager merges; the others hold no value after
    # a traced `if` (Undefined, unless both branches left the same object). Names that nested
    # functions read count as live everywhere (liveness.closure_reads). Attributes and items
    # of objects that branches store are undone and merged by the stager from a log
    # (operators.note_store).
    def visit_If(self, node):
        modified = self._modified(node.body + node.orelse)
        names = self._names("if_body", "else_body")
        get_state, set_state, _, body_name, else_name = names
        deleted = {n.id for s in node.body + node.orelse for n in gast.walk(s)
                   if isinstance(n, gast.Name) and isinstance(n.ctx, gast.Del)}
        self._visit_children(node, modified)
        live = anno.get(node, anno.Key.LIVE_OUT, set())
        # attributes are not state here: the store log undoes and merges them (Note [Stores in
        # traced branches])
        bound = sorted(n for n in modified if n not in self.nonlocals and not is_composite(n))
        outs = [n for n in bound if n in live]
        state = outs + [n for n in bound if n not in live]
        prelude = self._state(node, state, modified, names, deleted)
        body = templates.replace("def body_name():\n    body", body_name=body_name,
                                 body=node.body)
        self._declare(body, modified)
        orelse = []
        if not node.orelse:
            else_name = templates.const(None)
        else:
            orelse = templates.replace("def else_name():\n    body", else_name=else_name,
                                       body=node.orelse)
            self._declare(orelse, modified)
        call = templates.replace(
            "__lg.if_stmt(test, if_body, else_body, get_state, set_state, names, nouts, loc)",
            test=node.test, if_body=body_name, else_body=else_name, get_state=get_state,
            set_state=set_state, names=templates.str_tuple(state),
            nouts=templates.const(len(outs)), loc=templates.loc_expr(node))
        return self._finish(node, prelude + body + orelse + call)

    def visit_For(self, node):
        modified = self._modified([node.target] + node.body)
        names = self._names("loop_body", "itr", "extra_test")
        get_state, set_state, _, body_name, itr, extra_name = names
        self._visit_children(node, modified)
        state = self._live(modified, anno.get(node, anno.Key.HEAD_LIVE, set()))
        prelude = self._state(node, state, modified, names)
        body = templates.replace("def body_name(itr):\n    target = itr\n    body",
                                 body_name=body_name, itr=itr, target=node.target,
                                 body=node.body)
        self._declare(body, modified)
        tests = anno.get(node, anno.Key.EXTRA_TEST, [])
        extra = []
        if not tests:
            extra_name = templates.const(None)
        else:
            test = tests[0] if len(tests) == 1 else logical.and_call(tests, node)
            extra = templates.replace("def extra_name():\n    return test",
                                      extra_name=extra_name, test=test)
        call = templates.replace(
            "__lg.for_stmt(iter_, extra_test, loop_body, get_state, set_state, names, loc)",
            iter_=node.iter, extra_test=extra_name, loop_body=body_name, get_state=get_state,
            set_state=set_state, names=templates.str_tuple(state), loc=templates.loc_expr(node))
        return self._finish(node, prelude + body + extra + call)

    def visit_While(self, node):
        modified = self._modified([node.test] + node.body)
        names = self._names("loop_test", "loop_body")
        get_state, set_state, _, test_name, body_name = names
        self._visit_children(node, modified)
        state = self._live(modified, anno.get(node, anno.Key.HEAD_LIVE, set()))
        prelude = self._state(node, state, modified, names)
        test = templates.replace("def test_name():\n    return test", test_name=test_name,
                                 test=node.test)
        test_writes = self._modified(node.test)
        if test_writes:  # `while (x := f()):` binds x in the function, not in the test
            test[0].body.insert(0, gast.Nonlocal(names=sorted(test_writes)))
        body = templates.replace("def body_name():\n    body", body_name=body_name,
                                 body=node.body)
        self._declare(body, modified)
        call = templates.replace(
            "__lg.while_stmt(loop_test, loop_body, get_state, set_state, names, loc)",
            loop_test=test_name, loop_body=body_name, get_state=get_state, set_state=set_state,
            names=templates.str_tuple(state), loc=templates.loc_expr(node))
        return self._finish(node, prelude + test + body + call)


def _as_list(x) -> list:
    return x if isinstance(x, list) else [x]


def _attribute(name: str) -> gast.Attribute:
    base, attr = name.split(".", 1)
    return gast.Attribute(value=templates.name(base), attr=attr, ctx=gast.Load())


# Note [Attributes in control-flow state]
# An attribute of a local name assigned in a branch or loop body (`s.t = s.t + dt` on a
# mutable dataclass, `self.n += 1`) is state like a variable, named `s.t`: get_state reads
# it, set_state writes it back on the object (`__lg.setattr_`), so a traced `if` or a staged
# loop carries it instead of tracing the body's write once. It is state when `s` (or `s.t`)
# is read afterwards. Only one level (`s.a.b = ...` is not tracked).


def convert_control_flow(fn: gast.FunctionDef, namer: Namer, globals_: set[str],
                         nonlocals: set[str], locals_: set[str], owned: set[str] = frozenset(),
                         shared: set[str] = frozenset()) -> None:
    """Convert ``fn``'s if/for/while; ``owned``: its nonlocal names that are variables of a
    converted frame, ``shared``: its variables that nested functions rebind (Note [Nonlocal
    variables of converted functions])."""
    t = _ControlFlow(namer, globals_, nonlocals, locals_, owned, shared)
    out = []
    for s in fn.body:
        r = t.visit(s)
        out.extend(r if isinstance(r, list) else [r])
    fn.body = out
