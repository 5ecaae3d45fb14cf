"""Loop distribution of element updates: a for loop whose body updates array elements in
several statements at indices affine in its counter runs as several loops, one per group of
statements, when that keeps every memory access in its order (Note [Distributed element
loops]).

Input: a for_loop ControlUnit of a plan (plan.py) after storage is decided. Output: the
groups in order, each a dict {id(op): scatter positions or None (the whole op)} that
`Ctx.only` holds while one copy of the loop is emitted (lowerings/control.py `_emit_for`);
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
# (index_put, and each scatter of an in-place `accumulate`) at indices affine in its counter
# k (`_Affine`: a*k + c + terms fixed during the loop, such as an outer counter) is emitted
# as several loops, each running a group of the statements (an update, or one scatter) in
# body order; each copy computes the scalars and reads its statements need (LLVM drops the
# rest). That reorders accesses: every statement of one group runs all its iterations before
# the next group's. The order of the groups keeps, for every pair of accesses to one element
# from different statements, at least one a write, the order they had in the loop as
# written (an earlier iteration, or the same iteration at an earlier place in the body; the
# reads a statement depends on count as its accesses): a topological order of these
# constraints, the body order where they allow; the loop stays whole when they form a cycle
# or when two accesses may meet at any distance (indices not comparable). A statement joins
# the previous one's group unless they touch an element NEAR iterations apart or closer (what
# stops the vectoriser), so the stencil's sweep runs 3 loops, not 6. Indices must be proved
# in bounds (codegen/ranges.py), so no index check (and no wrap-around of negative indices)
# is involved, and the values read, hence the results, are those of the loop as written, to
# the bit: the additions into each element happen in the same order. DISTRIBUTE_MIN_TRIPS
# keeps short loops (the GMM's loops over 10 dimensions) whole: it is the trip count from
# which codegen/compile.py counts a loop's element accesses towards optimising the module
# at O2, the level whose vectoriser the split loops are for (LONG_LOOP, Note [Choosing the
# optimisation level]).
DISTRIBUTE_MIN_TRIPS, NEAR = 64, 64  # (compile.LONG_LOOP)


def plan_parts(ctx, u) -> list | None:
    """The groups of statements of for-loop unit `u` to emit one loop each, or None."""
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
    made = {}  # id(value) -> (the values it is computed from, the element read giving it)
    statements = []  # (op, scatter position or None, its accesses)
    for pos, unit in enumerate(body.units):
        found = _unit_accesses(ctx, aff, unit, pos)
        if found is None:
            return None
        load, stores = found
        for o in unit.ops if isinstance(unit, GroupUnit) else [unit.op]:
            inputs = o.inputs[1:] if load is not None else o.inputs
            for v in o.outputs:
                if v.aval.shape == ():
                    made[id(v)] = (inputs, load)
        for at, scatter, inputs in stores:
            statements.append((unit.op, scatter, [at] + _reads_of(made, inputs)))
    if len(statements) < 2:
        return None
    near, after = set(), {s: set() for s in range(len(statements))}  # s -> to run before s
    for s, (_, _, xs) in enumerate(statements):
        for t in range(s + 1, len(statements)):
            for x in xs:
                for y in statements[t][2]:
                    ahead = _meet(x, y, step, trips)
                    if ahead == "any":
                        return None
                    if ahead is None:
                        continue
                    x_first = ahead > 0 or (ahead == 0 and x[0] < y[0])
                    after[t if x_first else s].add(s if x_first else t)
                    if ahead and abs(ahead) < NEAR:
                        near.add((s, t))
    order = []
    while len(order) < len(statements):  # the body order, as far as the accesses allow
        ready = [s for s in after if s not in order and after[s] <= set(order)]
        if not ready:
            return None
        order.append(ready[0])
    groups = [[order[0]]]
    for t in order[1:]:
        if any((min(s, t), max(s, t)) in near for s in groups[-1]):
            groups.append([t])
        else:
            groups[-1].append(t)
    if len(groups) < 2:
        return None
    parts = []
    for group in groups:
        part = {}
        for s in group:
            op, scatter, _ = statements[s]
            if scatter is None:
                part[id(op)] = None
            else:
                part.setdefault(id(op), set()).add(scatter)
        parts.append(part)
    return parts


def _reads_of(made, values) -> list:
    """The element reads the scalars `values` are computed from within the body."""
    out, seen, todo = [], set(), list(values)
    while todo:
        v = todo.pop()
        if id(v) in seen or id(v) not in made:
            continue
        seen.add(id(v))
        inputs, load = made[id(v)]
        if load is not None:
            out.append(load)
        todo.extend(inputs)
    return out


def _unit_accesses(ctx, aff, unit, pos):
    """(read, stores) of one body unit: an access is (place in the body, (storage key, the
    shape it is indexed as), index forms, whether it writes); the read is a getitem's, else None; a store is (access,
    scatter position or None, the values it writes from: the value and the indices). None:
    the unit keeps the loop whole."""
    if isinstance(unit, GroupUnit):
        if unit.reds or any(v.aval.shape != () for v in unit.writes):
            return None
        return None, []
    if not isinstance(unit, OpUnit) or unit.op is None:
        return None
    op = unit.op
    if op.prim is getitem_p and op.outputs[0].aval.shape == ():
        at = _access(ctx, aff, (pos, 0), op.inputs[0], op.params["key"], op.inputs[1:], False)
        return None if at is None else (at, [])
    if op.prim is index_put_p and op.inputs[1].aval.shape == () \
            and ctx.plan.same_storage(op.inputs[0], op.outputs[0]):
        at = _access(ctx, aff, (pos, 0), op.inputs[0], op.params["key"], op.inputs[2:], True)
        return None if at is None else (None, [(at, None, op.inputs[1:])])
    if op.prim is accumulate_p and op.params["nbases"] == 1 \
            and ctx.plan.same_storage(op.inputs[0], op.outputs[0]):
        stores, k = [], 1
        for n, (key, n_idx, _) in enumerate(op.params["scatters"]):
            g, idx = op.inputs[k], op.inputs[k + 1:k + 1 + n_idx]
            k += 1 + n_idx
            at = _access(ctx, aff, (pos, n), op.inputs[0], key, idx, True)
            if at is None or g.aval.shape != ():
                return None
            stores.append((at, n, [g, *idx]))
        return None, stores
    if op.prim.family == "elementwise" and all(v.aval.shape == () for v in op.outputs):
        return None, []
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
    return (pos, (skey(ctx.plan.storage[root]), tuple(shape)), forms, write)


def _meet(x, y, step: int, trips: int):
    """Where accesses x and y (of two statements) touch one element, one of them writing:
    the number of iterations from x's to y's (one number: indices are affine in the counter
    with equal slopes), None when they never do (or only read), "any" when they may at any
    distance (indices not comparable, or one element at every iteration)."""
    (_, (kx, sx), fx, wx), (_, (ky, sy), fy, wy) = x, y
    if kx != ky or not (wx or wy):
        return None
    if sx != sy:
        return "any"  # one buffer seen with two shapes (a reshape): not compared
    delta = None  # y's counter minus x's, when they meet
    for f, f2 in zip(fx, fy):
        a, a2, c, c2 = f.get("k", 0), f2.get("k", 0), f.get(None, 0), f2.get(None, 0)
        if a != a2 or _fixed(f) != _fixed(f2):
            return "any"
        if a == 0:
            if c != c2:
                return None  # never the same element
            continue
        d, rem = divmod(c - c2, a)
        if rem or (delta is not None and d != delta):
            return None
        delta = d
    if delta is None:
        return "any"
    ahead, rem = divmod(delta, step)
    return None if rem or abs(ahead) >= trips else ahead


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
