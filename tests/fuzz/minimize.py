"""Shrink a failing program while it keeps failing the same way (greedy delta debugging).

Candidates, tried in this order until none applies (each is kept if the oracle still reports
a failure with the same status and kind, on any engine):
  - drop a helper function nobody calls, an output of `f` (with its `loss` term), an unused
    parameter;
  - delete a statement (the only statement of a block becomes `pass`);
  - replace an `if` by its body or by its `else`, drop an `else`; replace a loop by its body
    (a `for` binds its target to the first element first);
  - replace an expression by one of its operands.
The inputs stay those of the original program (drawn from its seed), so a reduction that
needs other inputs is not found, but every step is checked against plain Python again, and
must be well typed on every path (typecheck.py): a rewrite that leaves nonsense in a branch
plain Python does not take would otherwise "fail" in llgrad, which traces both. Nor may it
exercise a known bug (program.KNOWN_BUGS) the original did not, or the shrinking slides
from the bug at hand to a known one.
"""
from __future__ import annotations

import ast
import copy
import dataclasses
import re
import signal
import time

from tests.fuzz.program import Program
from tests.fuzz.oracle import check
from tests.fuzz.typecheck import TypeFault, check_types
from tests.fuzz.typer import is_module

_EXPR_FIELDS = (ast.BinOp, ast.UnaryOp, ast.Call, ast.IfExp, ast.Subscript, ast.BoolOp,
                ast.Compare, ast.Attribute)


def stmt_lists(tree) -> list:
    """(owner, field) of every statement list, outermost first, in source order."""
    out = []
    for node in ast.walk(tree):
        for fld in ("body", "orelse"):
            if isinstance(getattr(node, fld, None), list) and not isinstance(node, ast.Module):
                out.append((node, fld))
    return out


def _first_value(loop: ast.For) -> ast.expr:
    it = loop.iter
    if isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and it.func.id == "range":
        return it.args[0] if len(it.args) >= 2 else ast.Constant(0)
    return ast.Subscript(it, ast.Constant(0), ast.Load())


def _is_counter_step(st) -> bool:
    return isinstance(st, ast.Assign) and isinstance(st.targets[0], ast.Name) and \
        re.fullmatch(r"w\d+", st.targets[0].id) is not None


def _assigned(stmts) -> set:
    return {n.id for s in stmts for n in ast.walk(s)
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}


def _loaded(node, skip=()) -> set:
    skip_ids = {id(n) for s in skip for n in ast.walk(s)}
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)
            and isinstance(n.ctx, ast.Load) and id(n) not in skip_ids}


def _safe_removal(fn, removed: list, kept: list = ()) -> bool:
    """Removing `removed` (keeping `kept` in their place) leaves no name read that may now be
    unbound on some path: a removed assignment's name is read nowhere else, or is assigned
    again at the top level of the function (Python would raise on that path, llgrad too)."""
    top = _assigned([s for s in fn.body if isinstance(s, (ast.Assign, ast.AugAssign))
                     and not any(s is r for r in removed)])
    for name in _assigned(removed) - _assigned(kept):
        if name in _loaded(fn, removed) and name not in top:
            return False
    return True


def _stmt_candidates(tree):
    owners = {}
    for fn in ast.walk(tree):
        if isinstance(fn, ast.FunctionDef):
            for node in ast.walk(fn):
                owners.setdefault(id(node), fn)
    for li, (owner, fld) in enumerate(stmt_lists(tree)):
        fn = owners[id(owner)]
        if fn.name == "loss":
            continue
        for si, st in enumerate(getattr(owner, fld)):
            if _is_counter_step(st):
                continue  # a while loop without its counter step would never end
            if (not isinstance(st, (ast.Pass, ast.Return)) or owner is not fn) and \
                    _safe_removal(fn, [st]):
                yield ("del", li, si)
            if isinstance(st, ast.If):
                if _safe_removal(fn, st.orelse, st.body):
                    yield ("then", li, si)
                if st.orelse and _safe_removal(fn, st.body, st.orelse):
                    yield ("else", li, si)
                if st.orelse and _safe_removal(fn, st.orelse, st.body):
                    yield ("noelse", li, si)
            if isinstance(st, (ast.For, ast.While)):
                yield ("unloop", li, si)


def _apply_expr(tree, cand):
    r = _Replace(cand[1], cand[2])
    tree = r.visit(tree)
    return tree if r.done else None


def _apply_stmt(tree, cand):
    what, li, si = cand
    owner, fld = stmt_lists(tree)[li]
    stmts = getattr(owner, fld)
    st = stmts[si]
    if what == "del":
        new = []
    elif what == "then":
        new = st.body
    elif what == "else":
        new = st.orelse
    elif what == "noelse":
        st.orelse = []
        return tree
    else:  # unloop
        new = st.body
        if isinstance(st, ast.For):
            new = [ast.Assign([st.target], _first_value(st))] + new
    stmts[si:si + 1] = new
    if not stmts:
        stmts.append(ast.Pass())
    return tree


class _Replace(ast.NodeTransformer):
    """Replace expression node number `k` (walk order) by its child number `c`."""

    def __init__(self, k: int, c: int):
        self.k, self.c, self.n, self.done = k, c, 0, False

    def visit(self, node):
        if _is_counter_step(node) or getattr(node, "name", None) == "loss":
            return node  # keep while loops finite, and the loss as generated
        if isinstance(node, ast.While):
            node.body = [self.visit(s) for s in node.body]
            return node
        if isinstance(node, _EXPR_FIELDS):
            if self.n == self.k:
                self.n += 1
                kids = [ch for fld, val in ast.iter_fields(node) if fld != "func"
                        for ch in (val if isinstance(val, list) else [val])
                        if isinstance(ch, ast.expr) and not is_module(ch)]
                if self.c < len(kids):
                    self.done = True
                    return kids[self.c]
                return node
            self.n += 1
        return self.generic_visit(node)


def _expr_candidates(tree):
    counter = _Replace(-1, 0)
    counter.visit(copy.deepcopy(tree))
    n = counter.n
    for k in range(n):
        for c in range(3):
            yield ("expr", k, c)


def _functions(tree) -> dict:
    return {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}


def _drop_output(tree, j: int) -> bool:
    fns = _functions(tree)
    ret = fns["f"].body[-1]
    if not (isinstance(ret, ast.Return) and isinstance(ret.value, ast.Tuple)) or \
            len(ret.value.elts) <= 1 or j >= len(ret.value.elts):
        return False
    del ret.value.elts[j]
    loss_ret = fns["loss"].body[-1]
    terms = []

    def collect(e):
        if isinstance(e, ast.BinOp) and isinstance(e.op, ast.Add):
            collect(e.left)
            collect(e.right)
        else:
            terms.append(e)
    collect(loss_ret.value)
    kept = []
    for t in terms:
        idx = [s for s in ast.walk(t) if isinstance(s, ast.Subscript)
               and isinstance(s.slice, ast.Constant) and isinstance(s.value, ast.Name)
               and s.value.id == "r"]
        if idx and idx[0].slice.value == j:
            continue
        for s in idx:
            if s.slice.value > j:
                s.slice = ast.Constant(s.slice.value - 1)
        kept.append(t)
    value = kept[0] if kept else ast.Constant(0.0)
    for t in kept[1:]:
        value = ast.BinOp(value, ast.Add(), t)
    loss_ret.value = value
    return True


def _used_names(tree) -> set:
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}


CANDIDATE_TIMEOUT = 60


class _Timeout(BaseException):  # not caught by the oracle's `except Exception`
    pass


def check_with_timeout(program: Program, engines, fd: bool, seconds: int):
    """`check`, or None if it takes longer than `seconds` (a rewrite made a loop endless)."""
    def expire(signum, frame):
        raise _Timeout()
    old = signal.signal(signal.SIGALRM, expire)
    signal.alarm(seconds)
    try:
        return check(program, engines, fd=fd)
    except _Timeout:
        return None
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


class Shrinker:
    """Greedy reduction of one program; `attempt` keeps a candidate that still fails."""

    def __init__(self, program: Program, status: str, kind: str, engines, budget: float,
                 max_tries: int):
        self.status, self.kind = status, kind
        self.engines, self.budget, self.max_tries = engines, budget, max_tries
        self.best, self.tree = program, ast.parse(program.source)
        self.known = set(program.known_bugs())
        self.t0, self.tries = time.perf_counter(), 0

    def left(self) -> bool:
        return time.perf_counter() - self.t0 < self.budget and self.tries < self.max_tries

    def attempt(self, tree, args=None) -> bool:
        self.tries += 1
        try:
            src = ast.unparse(ast.fix_missing_locations(tree)) + "\n"
            compile(src, "<candidate>", "exec")
        except Exception:  # noqa: BLE001 - an invalid rewrite (`a[i] % 4 += 1`)
            return False
        if src == self.best.source:
            return False
        args = args if args is not None else self.best.args
        cand = dataclasses.replace(self.best, source=src, args=args,
                                   wrt=[w for w in self.best.wrt if any(a.name == w for a in args)])
        if self.kind != "missing_error":  # (out-of-range indices fail the check on dummies)
            try:  # well typed on all paths, and no known bug the original did not have
                check_types(src, cand.param_types())
            except TypeFault:
                return False
            if set(cand.known_bugs()) - self.known:
                return False
        out = check_with_timeout(cand, self.engines, self.kind == "grad", CANDIDATE_TIMEOUT)
        if out is None:
            return False
        if any(f.status == self.status and f.kind == self.kind for f in out.failures):
            self.best, self.tree = cand, tree
            return True
        return False

    def run(self) -> Program:
        changed = True
        while changed and self.left():
            changed = self.helpers() | self.outputs() | self.rewrites() | self.params()
        return self.best

    def helpers(self) -> bool:
        changed = False
        for name in list(_functions(self.tree)):
            if name not in ("f", "loss") and name not in _used_names(self.tree):
                t = copy.deepcopy(self.tree)
                t.body = [n for n in t.body if getattr(n, "name", None) != name]
                changed |= self.attempt(t)
        return changed

    def outputs(self) -> bool:
        changed, j = False, 0
        while self.left():
            t = copy.deepcopy(self.tree)
            if not _drop_output(t, j):
                break
            if self.attempt(t):
                changed = True
            else:
                j += 1
        return changed

    def rewrites(self) -> bool:
        changed = False
        for gen, apply in ((_stmt_candidates, _apply_stmt), (_expr_candidates, _apply_expr)):
            progress = True
            while progress and self.left():
                progress = False
                for cand in list(gen(self.tree)):
                    if not self.left():
                        break
                    t = copy.deepcopy(self.tree)
                    t = apply(t, cand)
                    if t is not None and self.attempt(t):
                        progress = changed = True
                        break
        return changed

    def params(self) -> bool:
        changed = False
        for p in [a.arg for a in _functions(self.tree)["f"].args.args]:
            f = _functions(self.tree)["f"]
            if p in {n.id for s in f.body for n in ast.walk(s) if isinstance(n, ast.Name)}:
                continue
            t = copy.deepcopy(self.tree)
            for fn in _functions(t).values():
                if fn.name in ("f", "loss"):
                    fn.args.args = [a for a in fn.args.args if a.arg != p]
            for call in ast.walk(_functions(t)["loss"]):
                if isinstance(call, ast.Call) and getattr(call.func, "id", None) == "f":
                    call.args = [a for a in call.args if getattr(a, "id", None) != p]
            changed |= self.attempt(t, [a for a in self.best.args if a.name != p])
        return changed


def minimize(program: Program, failure, engines=("interp", "native"),
             budget: float = 180.0, max_tries: int = 600) -> tuple[Program, int]:
    """The smallest program found that still fails like `failure` (an oracle.Failure: same
    status and kind, any engine), and the number of candidates tried."""
    s = Shrinker(program, failure.status, failure.kind, engines, budget, max_tries)
    return s.run(), s.tries
