"""Check a program's types on every path, not only the path plain Python takes.

llgrad traces both branches of a traced `if` and a loop body whatever its trip count, so a
program whose untaken branch indexes a float or reads an unbound name is not a valid test
even though plain Python runs it. The minimiser's rewrites make such programs easily, so
each candidate must pass this check: an abstract run of `f` (and the helpers it calls) that
types every expression node by node (typer.py), runs both branches of every `if` and every
loop body twice (the types of names bound before it must not change in it, up to Python vs
numpy scalars), and keeps after control flow only the names bound with one type on all
paths. It also returns the KNOWN_BUGS features the program exercises (typer.rules, plus the
statement-level ones: in-place casts, `raise`, reading in one branch a name another branch
rebinds, in-place updates of a name that may share its value with another).
"""
from __future__ import annotations

import ast
import warnings

import numpy as np

from tests.fuzz.ftypes import NAMESPACE, E, Ty, typeof
from tests.fuzz.typer import TypeFault, is_module, literal, merge_or_tag, type_expr

__all__ = ["TypeFault", "check_types"]


def _join(envs: list[dict], needs: set) -> dict:
    names = set.intersection(*[set(e) for e in envs])
    out = {}
    for n in names:
        t = envs[0][n].ty
        for e in envs[1:]:
            t = t and merge_or_tag(t, e[n].ty, needs)
        if t is not None:
            out[n] = E(n, t, frozenset(), any(e[n].counter for e in envs),
                       any(e[n].const for e in envs))
    return out


def traced(env: dict, rebound: set) -> dict:
    """`env` after a traced `if` or in a staged loop that rebinds `rebound`: llgrad traces
    those names, so an int may be a traced int64 (`counter`), and a Python float a strong
    float64 (weakness unknown)."""
    out = {}
    for n, e in env.items():
        t = e.ty
        if n in rebound and t.weak is True and t.kind == "f":
            t = Ty(t.dtype, t.shape, None)
        out[n] = E(n, t, frozenset(), e.counter or (n in rebound and t.kind in "ib"), e.const)
    return out


def _names(nodes, ctx) -> set:
    return {n.id for s in nodes for n in ast.walk(s)
            if isinstance(n, ast.Name) and isinstance(n.ctx, ctx)}


def _updated(nodes, bound: bool = True) -> set:
    """Names updated in place (`y[i] = v`, `y += v`) in `nodes`, and bound if `bound`."""
    out = _names(nodes, ast.Store) if bound else set()
    for s in nodes:
        for n in ast.walk(s):
            t = n.targets[0] if isinstance(n, ast.Assign) and \
                isinstance(n.targets[0], ast.Subscript) else \
                n.target if isinstance(n, ast.AugAssign) else None
            while isinstance(t, ast.Subscript):
                t = t.value
            if isinstance(t, ast.Name):
                out.add(t.id)
    return out


VIEWS = ("reshape", "transpose", "expand_dims", "ravel", "T", "squeeze", "swapaxes")


def _alias_sources(v: ast.expr, copies) -> set:
    """Names whose value `v` may share memory with: `s`, `a if c else b`, `x[1:]`, `X[0]`,
    `x.T`, `np.reshape(x, ...)`; not a subscript for which `copies(v)` (an index array, a
    scalar element)."""
    if isinstance(v, ast.Name):
        return {v.id}
    if isinstance(v, ast.IfExp):
        return _alias_sources(v.body, copies) | _alias_sources(v.orelse, copies)
    if isinstance(v, ast.Subscript) and not copies(v) or \
            isinstance(v, ast.Attribute) and v.attr in VIEWS:
        return _alias_sources(v.value, copies)
    if isinstance(v, ast.Call) and isinstance(v.func, ast.Attribute) and v.func.attr in VIEWS:
        base = v.args[0] if is_module(v.func.value) and v.args else v.func.value
        return _alias_sources(base, copies)
    return set()


def _aliases(nodes) -> set:
    """Names bound to another name (`t = s`, `t = a if c else b`) in `nodes`, both sides."""
    out = set()
    for s in nodes:
        for n in ast.walk(s):
            if isinstance(n, ast.Assign) and isinstance(n.targets[0], ast.Name):
                v = n.value
                alts = [v.body, v.orelse] if isinstance(v, ast.IfExp) else [v]
                src = {a.id for a in alts if isinstance(a, ast.Name)}
                if src:
                    out |= src | {n.targets[0].id}
    return out


class Checker:
    def __init__(self, module: ast.Module):
        self.fns = {f.name: f for f in module.body if isinstance(f, ast.FunctionDef)}
        self.cache: dict = {}
        self.returns: list = []
        self.needs: set = set()
        self.aliased: set = set()  # names that may share a value (_alias_sources)
        self.helpers = {name: self._abstract(name) for name in self.fns if name != "loss"}

    def _abstract(self, name: str):
        def call(*args):
            return self.function(name, [typeof(a) for a in args]).dummies()[0]
        return call

    def function(self, name: str, params: list[Ty], counters: bool = True) -> Ty:
        """The return type of `name` called with `params` (`counters`: a helper's, which may
        be traced or constants; else f's, whose Python ints are static)."""
        key = (name, tuple(params))
        if key not in self.cache:
            fn = self.fns[name]
            if len(fn.args.args) != len(params) or None in params:
                raise TypeFault(f"call of {name} with {len(params)} arguments")
            self.cache[key] = None  # recursion: not generated
            outer, self.returns = self.returns, []
            # f's Python ints are static (constants); a helper's parameters may be traced
            # (`counter`: so is an int made from one, np.argmin(p)) or constants
            env = {a.arg: E(a.arg, t, frozenset(), counters, counters or t.weak is True)
                   for a, t in zip(fn.args.args, params)}
            self.block(fn.body, env)
            returns, self.returns = self.returns, outer
            t = returns[0] if returns else None
            for r in returns[1:]:
                both = zip(t, r) if isinstance(t, tuple) and isinstance(r, tuple) and \
                    len(t) == len(r) else [(t, r)]
                if t is not None and any(not isinstance(a, Ty) or not isinstance(b, Ty) or
                                         merge_or_tag(a, b, self.needs) is None
                                         for a, b in both):
                    t = None
            if t is None:
                raise TypeFault(f"{name} returns different types (or nothing)")
            self.cache[key] = t
        if self.cache[key] is None:
            raise TypeFault(f"recursive call of {name}")
        return self.cache[key]

    def ev(self, node, env) -> E:
        return type_expr(node, env, self.helpers, self.needs, lenient=True)

    def block(self, stmts: list, env: dict) -> dict:
        for st in stmts:
            env = self.stmt(st, env)
        return env

    def stmt(self, st: ast.stmt, env: dict) -> dict:
        if isinstance(st, ast.Assign) and isinstance(st.targets[0], ast.Name):
            name, v = st.targets[0].id, st.value

            def copies(sub):  # an element, or indexed by an array: not a view
                idx = sub.slice.elts if isinstance(sub.slice, ast.Tuple) else [sub.slice]
                return not self.ev(sub, env).ty.shape or any(
                    not isinstance(i, ast.Slice) and not literal(i) and self.ev(i, env).ty.shape
                    for i in idx)
            sources = _alias_sources(v, copies)
            self.aliased -= {name}
            if sources:
                self.aliased |= sources | {name}
            e = self.ev(v, env)
            return {**env, name: E(name, e.ty, frozenset(), e.counter, e.const)}
        if isinstance(st, (ast.Assign, ast.AugAssign)):
            return self.update(st, env)
        if isinstance(st, ast.If):
            self.truth(st.test, env)
            if any(isinstance(r, ast.Return) and isinstance(r.value, ast.Tuple)
                   for r in ast.walk(st)):
                self.needs.add("early_return_tuple")
            if _updated(st.body) & (_names(st.orelse, ast.Load) | _updated(st.orelse, False)):
                self.needs.add("cross_branch_reads")  # (`y += 1`, `y[i] = 1` read y too)
            if _aliases(st.body) & _updated(st.orelse, False) or \
                    _aliases(st.orelse) & _updated(st.body, False):
                self.needs.add("branch_alias")
            before = set(self.aliased)  # each path starts from the aliases before the if,
            body = self.block(st.body, dict(env))  # and any path's hold after it
            self.aliased, after_body = before, self.aliased
            out = _join([body, self.block(st.orelse, dict(env))], self.needs)
            self.aliased |= after_body
            return traced(out, _names(st.body + st.orelse, ast.Store))
        if isinstance(st, (ast.For, ast.While)):
            return self.loop(st, env)
        if isinstance(st, ast.Return):
            v = st.value
            self.returns.append(tuple(self.ev(e, env).ty for e in v.elts)
                                if isinstance(v, ast.Tuple) else self.ev(v, env).ty)
            return env
        if isinstance(st, ast.Raise):
            self.needs.add("raise")
        elif isinstance(st, ast.Expr):
            self.ev(st.value, env)
        return env  # pass, break, continue

    def loop(self, st, env: dict) -> dict:
        if any(isinstance(n, ast.Return) for n in ast.walk(st)):
            self.needs.add("return_in_loop")
        inner = traced(env, _names(st.body, ast.Store))
        if isinstance(st, ast.For):
            it = st.iter
            if isinstance(it, ast.Call) and getattr(it.func, "id", "") == "range":
                for a in it.args:
                    if self.ev(a, env).ty.kind != "i":
                        raise TypeFault(f"range over {ast.unparse(a)}")
                elem = E("i", Ty("int64", (), True), frozenset(), True, True)
            else:
                t = self.ev(it, env).ty
                if not t.shape:
                    raise TypeFault(f"iterating over the scalar `{ast.unparse(it)}`")
                elem = E("r", Ty(t.dtype, t.shape[1:], False))
                sources = _alias_sources(it, lambda v: False)  # the rows are views of it
                if sources:
                    self.aliased |= sources | {st.target.id}
            inner[st.target.id] = elem
        else:
            self.truth(st.test, env)
        before = set(self.aliased)  # the body may run zero times: its aliases join those
        first = self.block(st.body, dict(inner))
        again = self.block(st.body, {**inner, **{n: e for n, e in first.items() if n in inner}})
        self.aliased |= before
        for n in env:  # (llgrad cannot unroll a loop with a traced trip count)
            if any(n in e and merge_or_tag(env[n].ty, e[n].ty, self.needs) is None
                   for e in (first, again)):
                raise TypeFault(f"`{n}` changes type in the loop at line {st.lineno}")
        return _join([env, {n: e for n, e in again.items() if n in env}], self.needs)

    def truth(self, test: ast.expr, env: dict) -> None:
        if self.ev(test, env).ty.shape:
            raise TypeFault(f"the truth value of array `{ast.unparse(test)}`")

    def update(self, st, env: dict) -> dict:
        """`y[i] = v`, `y[i] += v`, `y += v`: run it on dummies; the name keeps its type if
        it is an array (numpy stores in place), else takes the result's."""
        target = st.targets[0] if isinstance(st, ast.Assign) else st.target
        base = target
        while isinstance(base, ast.Subscript):
            base = base.value
        if not isinstance(base, ast.Name) or base.id not in env:
            raise TypeFault(f"assignment to {ast.unparse(target)}")
        value = self.ev(st.value, env)
        stored = value.ty
        if isinstance(st, ast.AugAssign):  # typed as `target op value`, for typer.rules
            stored = self.ev(ast.BinOp(target, st.op, st.value), env).ty
        elif isinstance(target, ast.Subscript):
            self.ev(target, env)
        old = env[base.id].ty
        if old.shape and stored.weak is False and stored.dtype != old.dtype:
            self.needs.add("inplace_cast")  # numpy casts to the array's dtype
        if base.id in self.aliased and (old.shape or isinstance(st, ast.AugAssign)):
            self.needs.add("alias_inplace" if old.shape else "scalar_alias_aug")
        names = sorted({n.id for n in ast.walk(st) if isinstance(n, ast.Name)} & set(env))
        src, result = ast.unparse(st), None
        for combo in _combos([env[n].ty for n in names]):
            scope = {n: (np.copy(v) if isinstance(v, np.ndarray) else v)
                     for n, v in zip(names, combo)}
            scope.update(self.helpers)
            try:
                with np.errstate(all="ignore"), warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    exec(src, NAMESPACE, scope)  # noqa: S102 - our own program
            except TypeFault:
                raise
            except Exception as e:  # noqa: BLE001
                raise TypeFault(f"`{src}`: {type(e).__name__}: {e}") from None
            t = typeof(scope[base.id])
            result = t if result is None else result and merge_or_tag(result, t, self.needs)
        if result is None:
            raise TypeFault(f"`{src}` gives different types")
        return {**env, base.id: E(base.id, result, frozenset(),
                                  env[base.id].counter or value.counter,
                                  env[base.id].const and value.const)}


def _combos(tys: list):
    if not tys:
        yield []
        return
    for rest in _combos(tys[1:]):
        for d in tys[0].dummies():
            yield [d] + rest


def check_types(source: str, params: dict) -> set:
    """The KNOWN_BUGS features `f` exercises; raises TypeFault unless it is well typed on
    all paths (with argument types `params`)."""
    c = Checker(ast.parse(source))
    f = c.fns["f"]
    c.function("f", [params[a.arg] for a in f.args.args], counters=False)
    return c.needs
