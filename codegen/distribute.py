"""Loop distribution of element updates: a for loop whose body updates array elements in
several statements at indices affine in its counter runs as one loop per statement when that
keeps every memory access in its order (Note [Distributed element loops]).

Input: a for_loop ControlUnit of a plan (plan.py) after storage is decided. Output: `parts`,
the statements in order, each a dict {id(op): scatter positions or None (the whole op)} that
`Ctx.only` takes while one copy of the loop is emitted (lowerings/control.py `_emit_for`);
None when the loop stays whole.
"""
from __future__ import annotations

from llgrad.runtime.ops.control import constant_p, fusion_p
from llgrad.runtime.ops.elementwise import add_p, mul_p, sub_p
from llgrad.runtime.ops.index import getitem_p, index_put_p
from llgrad.transform import control

from .plan import GroupUnit, OpUnit, accumulate_p, skey

# Note [Distributed element loops]
# The reverse sweep of `u_new[i, j] = c * (u[i-1, j] + u[i+1, j] + u[i, j-1] + u[i, j+1]) +
# ...` over j reads g = ct_new[i, j], zeroes it and adds multiples of g into ct_u at (i, j),
# (i, j-1), (i, j+1), (i-1, j) and (i+1, j): read-modify-writes one element apart, which
# LLVM's vectoriser must refuse (and its LoopDistribute pass cannot split: each is a
# dependence cycle of its own), so the sweep ran ~1 ns an element. Each statement alone is a
# vectorisable loop (`ct_u[i, j-1] += c * ct_new[i, j]` for all j). So a long for loop whose
# body only computes scalars, reads elements and updates elements of arrays in place
# (index_put, and each scatter of an in-place `accumulate`) at indices a*k + b (k the
# counter, b a constant plus at most one value fixed during the loop) is emitted once per
# statement (an update, or one scatter), in body order; each copy computes the scalars and
# reads it needs (LLVM drops the rest) and performs its statement only. That reorders the
# accesses: all of statement s's iterations run before statement t's (s before t). It is
# done only when every pair of accesses to one element, from different statements, at least
# one a write, keeps its order: s's access came first in the original loop too (an earlier
# iteration, or the same iteration at an earlier place in the body; the reads a statement
# depends on count as its accesses). Indices must be proved in bounds (codegen/ranges.py),
# so no index check (and no wrap-around of negative indices) is involved, and then the
# values read, hence the results, are exactly those of the loop as written: the additions
# into each element happen in the same order. DISTRIBUTE_MIN_TRIPS keeps short loops (the
# GMM's loops over 10 dimensions) whole.
DISTRIBUTE_MIN_TRIPS = 32


def plan_parts(ctx, u) -> list | None:
    """The statements of for-loop unit `u`, to emit one loop each, or None."""
    body, op = u.blocks[0], u.op
    trips = ctx.ranges.most_trips(op)
    if trips is None or trips < DISTRIBUTE_MIN_TRIPS or body.swaps or body.stage:
        return None
    step = control.bounds(op)[2]
    if step.op is None or step.op.prim is not constant_p:
        return None
    step = int(step.op.params["value"])
    region = control.body(op)
    for r, p in zip(body.results, control.carried(op)):
        if r.aval.shape == () or not ctx.plan.same_storage(r, p):
            return None  # a carried scalar or a copied array would run once per copy
    inside = {id(v) for o in region.walk() for v in o.outputs}
    aff = _Affine(control.counter(op), inside, set(map(id, region.params)))
    made = {}  # id(value) -> the unit computing it
    accesses, statements = [], []  # (pos, key, index forms, write); (op, scatter, accesses)
    for pos, unit in enumerate(body.units):
        found = _unit_accesses(ctx, aff, unit, pos)
        if found is None:
            return None
        loads, stores = found
        for v in unit.writes:
            made[id(v)] = (unit, loads)
        for at, scatter, inputs in stores:
            reads = [a for v in inputs for a in _reads_of(made, v)]
            statements.append((unit.op, scatter, [at] + reads))
    if len(statements) < 2:
        return None
    after = {s: set() for s in range(len(statements))}  # s -> the statements to run first
    for s, (_, _, xs) in enumerate(statements):
        for t in range(s + 1, len(statements)):
            for x in xs:
                for y in statements[t][2]:
                    first = _first(x, y, step, trips)
                    if first == "both":
                        return None
                    if first is not None:
                        after[t if first == "x" else s].add(s if first == "x" else t)
    order = []
    while len(order) < len(statements):  # the body order, as far as the accesses allow
        ready = [s for s in after if s not in order and after[s] <= set(order)]
        if not ready:
            return None
        order.append(ready[0])
    return [{id(statements[s][0]): None if statements[s][1] is None else {statements[s][1]}}
            for s in order]


def _reads_of(made, v) -> list:
    """The element reads value `v` depends on within the body (through scalar units)."""
    got = made.get(id(v))
    if got is None:
        return []
    unit, loads = got
    out = list(loads)
    for w in unit.reads:
        if w is not v and id(w) in made and made[id(w)][0] is not unit:
            out += _reads_of(made, w)
    return out


def _unit_accesses(ctx, aff, unit, pos):
    """(reads, stores) of one body unit: an access is (place in the body, storage key, index
    forms, whether it writes); a store is (access, scatter position or None, the values it
    writes from). None: the unit keeps the loop whole."""
    if isinstance(unit, GroupUnit):
        if unit.reds or any(v.aval.shape != () for v in unit.writes):
            return None
        return [], []
    if not isinstance(unit, OpUnit) or unit.op is None:
        return None
    op = unit.op
    if op.prim is getitem_p and op.outputs[0].aval.shape == ():
        at = _access(ctx, aff, (pos, 0), op.inputs[0], op.params["key"], op.inputs[1:], False)
        return None if at is None else ([at], [])
    if op.prim is index_put_p and op.inputs[1].aval.shape == () \
            and ctx.plan.same_storage(op.inputs[0], op.outputs[0]):
        at = _access(ctx, aff, (pos, 0), op.inputs[0], op.params["key"], op.inputs[2:], True)
        return None if at is None else ([], [(at, None, [op.inputs[1]])])
    if op.prim is accumulate_p and op.params["nbases"] == 1 \
            and ctx.plan.same_storage(op.inputs[0], op.outputs[0]):
        stores, k = [], 1
        for n, (key, n_idx, _) in enumerate(op.params["scatters"]):
            g, idx = op.inputs[k], op.inputs[k + 1:k + 1 + n_idx]
            k += 1 + n_idx
            at = _access(ctx, aff, (pos, n), op.inputs[0], key, idx, True)
            if at is None or g.aval.shape != ():
                return None
            stores.append((at, n, [g]))
        return [], stores
    if op.prim.family == "elementwise" and all(v.aval.shape == () for v in op.outputs):
        return [], []
    return None


def _access(ctx, aff, pos, array, key, idx, write):
    """One element access array[idx] (every axis indexed by a scalar), or None."""
    shape = array.aval.shape
    if len(idx) != len(shape) or tuple(key) != tuple(("a", d) for d in range(len(shape))) \
            or any(v.aval.shape != () for v in idx):
        return None
    lay = ctx.plan.layout[array]
    if array not in ctx.plan.storage and (lay.offset or lay.shape != tuple(shape)
                                          or not lay.contiguous):
        return None
    root = lay.root
    if root not in ctx.plan.storage:
        return None
    forms = []
    for v, n in zip(idx, shape):
        r = ctx.ranges.known_range(v)
        f = aff(v)
        if r is None or r[0] < 0 or r[1] >= n or f is None:
            return None
        forms.append(f)
    return (pos, skey(ctx.plan.storage[root]), forms, write)


def _first(x, y, step: int, trips: int) -> str | None:
    """Which of accesses x and y (of two statements) comes first in the loop as written
    (counter step `step`) wherever they touch one element, one of them writing: "x", "y",
    None when they never do (or only read), "both" when either may."""
    (px, kx, fx, wx), (py, ky, fy, wy) = x, y
    if kx != ky or not (wx or wy):
        return None
    delta = None  # y's counter minus x's, when they meet
    for f, f2 in zip(fx, fy):
        a, a2, c, c2 = f.get("k", 0), f2.get("k", 0), f.get(None, 0), f2.get(None, 0)
        if a != a2 or _fixed(f) != _fixed(f2):
            return "both"  # not comparable: assume they meet in any order
        if a == 0:
            if c != c2:
                return None  # never the same element
            continue
        d, rem = divmod(c - c2, a)
        if rem or (delta is not None and d != delta):
            return None
        delta = d
    if delta is None:
        return "both"  # the same element at every iteration
    ahead, rem = divmod(delta, step)  # iterations from x's to y's
    if rem or abs(ahead) >= trips:
        return None
    return "x" if ahead > 0 or (ahead == 0 and px < py) else "y"


def _fixed(form: dict) -> dict:
    return {t: c for t, c in form.items() if t not in ("k", None)}


class _Affine:
    """An int value of a loop body as a linear form {term: coefficient}: the term "k" is the
    loop's counter, None the constant, any other an id of a value fixed during the loop (an
    enclosing loop's counter, an opaque value computed before the loop); None when the
    value is not one (it depends on the body otherwise)."""

    def __init__(self, counter, inside: set, params: set):
        self.counter, self.inside, self.params = counter, inside, params

    def __call__(self, v, env=None, depth=0):
        env = env or {}
        v = env.get(v, v)
        if depth > 12:
            return None
        if v is self.counter:
            return {"k": 1}
        op = v.op
        if op is None:
            return None if id(v) in self.params else {id(v): 1}
        if op.prim is constant_p and op.params["value"].ndim == 0:
            return {None: int(op.params["value"])}
        if op.prim is fusion_p:
            body = control.body(op)
            inner = dict(zip(body.params, [env.get(w, w) for w in control.state(op)]))
            k = next(i for i, w in enumerate(op.outputs) if w is v)
            return self(body.results[k], inner, depth + 1)
        if op.prim in (add_p, sub_p, mul_p) and v.aval.shape == ():
            x, y = (self(w, env, depth + 1) for w in op.inputs)
            if x is not None and y is not None:
                if op.prim is not mul_p:
                    sign = 1 if op.prim is add_p else -1
                    out = dict(x)
                    for t, c in y.items():
                        out[t] = out.get(t, 0) + sign * c
                    return {t: c for t, c in out.items() if c}
                if set(x) <= {None}:
                    x, y = y, x
                if set(y) <= {None}:
                    return {t: c * y.get(None, 0) for t, c in x.items() if c * y.get(None, 0)}
        return None if id(v) in self.inside else {id(v): 1}
