"""Batching on the IR: `vmap_function(fn, batched, n)` maps fn over a new leading axis of size n.

Each value of the new function is either unbatched (as in fn) or batched: fn's value for each
of the n examples, stacked on a leading axis 0. There is one rule per primitive family and one
per control-flow op (Note [Batching rules]); ops that read no batched value are copied as they
are. Requires: a verified, unfused function. Produces: a verified function.
"""
from __future__ import annotations

import numpy as np

from llgrad.runtime import ops
from llgrad.runtime.aval import Aval
from llgrad.runtime.errors import UnsupportedError
from llgrad.runtime.ops.control import (check_p, cond_p, constant_p, custom_vjp_p, for_loop_p,
                                        fusion_p, tape_get_p, tape_new_p, tape_push_p,
                                        while_loop_p)
from llgrad.runtime.ops.index import getitem_p, index_put_p, scatter_add_p
from llgrad.runtime.ops.linalg import matmul_p
from llgrad.runtime.ops.shape import broadcast_to_p, concatenate_p, reshape_p, transpose_p
from llgrad.transform import control, ir
from llgrad.transform.builder import Builder

# Note [Batching rules]
# A batched value holds the examples on axis 0. The rules, by primitive family:
#   - elementwise: a batched operand (n, *s) is reshaped to (n, 1, ..., 1, *s) so that numpy
#     broadcasting against the unbatched operands (which keep their shapes) lines up;
#   - reductions, scans and sorts: the operands made batched, their axis parameters shifted;
#   - reshape, transpose, broadcast_to, concatenate: the shape/perm/axis parameters extended;
#   - getitem, scatter_add, index_put: a full slice in front of the key, when the index arrays
#     are unbatched and adjacent (numpy then keeps their axes in place);
#   - matmul: a batched left operand times an unbatched matrix is one (n*rows, k) product;
#     otherwise numpy's batched matmul over the leading axis;
#   - every other op (linear algebra, batched index arrays, loops with batched bounds...):
#     the rule of last resort, one staged loop over the examples running the op on example i
#     and writing its outputs into row i. Always right, not vectorised.
# Control flow: cond with an unbatched predicate keeps one cond (its outputs batched when a
# branch's are); with a batched one, both branches run and a `where` selects per example.
# for_loop carries batched state (the positions found by a fixed point, Note [Which values are
# batched]). A while_loop whose predicate is batched runs until no example's predicate holds:
# each iteration computes the predicate per example and keeps the state of the examples whose
# loop is over (as JAX does). Within a branch or a loop body that only some examples take, a
# mask (self.mask) says which: a `check` fails only for an example inside the mask, a masked
# while_loop stops for examples outside it, and the last-resort loop skips them, so an example
# never raises or hangs in code its own run would not reach.

# Note [Which values are batched]
# Region ops need to know before the transformation which of their carried values become
# batched (the params of the new regions take batched avals). `_batched_ids` propagates
# "reads a batched value" through a region (conservatively: every float or int output of an
# op reading one); a loop's carried positions are the fixed point of that. A region result the
# transformation leaves unbatched at a batched position is broadcast.


def vmap_function(fn: ir.Function, batched: list[bool], n: int,
                  name: str | None = None) -> tuple[ir.Function, list[bool]]:
    """fn mapped over a leading axis of size `n` of the params flagged in `batched`.

    Returns:
        (the batched function, whose params take (n, *aval.shape) where flagged; which of its
        outputs are batched).
    Raises:
        UnsupportedError: a batched value reaches a custom_vjp op or a loop tape.
    """
    return _Vmap(name or f"{fn.name}_vmap", n).run(fn, batched)


class _Vmap:
    def __init__(self, name: str, n: int):
        self.n, self.loc, self.mask = n, None, None
        self.int_tapes: set = set()  # ids of fn's integer tapes (Note [Batched tapes])
        self.b = Builder(name, loc=lambda: self.loc)

    def run(self, fn, batched):
        b = self.b
        _tape_ids(fn.body, self.int_tapes)
        with b:
            env = {}
            for p, bt in zip(fn.params, batched):
                env[p.id] = (b.param(self.aval(p.aval) if bt else p.aval, p.name), bt)
            self.ops(fn.body.ops, env)
            self.loc = None
            outs = [env[v.id] for v in fn.outputs]
            b.fn.body.results = [v for v, _ in outs]
        b.fn.meta.update(fn.meta)
        return b.fn, [bt for _, bt in outs]

    # ---- helpers ----------------------------------------------------------------------------
    def aval(self, aval) -> Aval:
        return Aval((self.n,) + tuple(aval.shape), aval.dtype)

    def force(self, x, bt, old):
        """x, the value of `old`, batched (broadcast along a new axis 0 when it is not)."""
        if bt:
            return x
        if old.id in self.int_tapes:
            raise _differs(self.loc)
        return ops.broadcast_to(x, (self.n,) + tuple(old.aval.shape))

    def expand(self, x, rank: int):
        """A batched x (n, *s) as (n, 1, ..., 1, *s) with len(s) raised to `rank`."""
        s = tuple(x.aval.shape[1:])
        if len(s) >= rank:
            return x
        return ops.reshape(x, (self.n,) + (1,) * (rank - len(s)) + s)

    def bind(self, env, olds, news, batched=True) -> None:
        for o, v in zip(olds, news):
            if getattr(o, "name", None) and isinstance(v, ir.Value) and v.name is None:
                v.name = o.name
            env[o.id] = (v, batched)

    def emit(self, op, ins, params=None, batched=True) -> list:
        """op's primitive on `ins` (avals by its shape rule), bound batched in the caller."""
        out = op.prim.bind(*ins, **(op.params if params is None else params))
        return list(out) if isinstance(out, tuple) else [out]

    def free_batched(self, op, env) -> bool:
        """Whether op reads a batched value (or its regions make a tape, always batched)."""
        return any(env[v.id][1] for v in op.inputs) or any(
            env[v.id][1] for r in op.regions for v in r.free_values() if v.id in env) or any(
            o.prim is tape_new_p and np.dtype(o.params["dtype"]).kind == "f"
            for r in op.regions for o in r.walk())

    # ---- the walk ---------------------------------------------------------------------------
    def ops(self, op_list, env) -> None:
        for op in op_list:
            self.loc = op.loc
            if op.prim is check_p and self.mask is not None:
                _check(self, op, env)
            elif op.prim is tape_new_p:
                _tape_new(self, op, env)
            elif not self.free_batched(op, env):
                self.clone(op, env)
            else:
                rule = _RULES.get(op.prim) or _FAMILY.get(op.prim.family, _per_example)
                rule(self, op, env)

    def clone_region(self, r, env) -> ir.Region:
        params = [self.b.new_value(p.aval, p.name) for p in r.params]
        env2 = dict(env)
        self.bind(env2, r.params, params, False)
        with self.b.open_region(params) as new:
            self.ops(r.ops, env2)
            new.results = [self.unbatched(env2, v) for v in r.results]
        return new

    def unbatched(self, env, v):
        x, bt = env[v.id]
        if bt:  # a masked check made a copied region's value batched: cannot happen
            raise AssertionError(f"vmap: unbatched region yields batched {v!r}")
        return x

    def clone(self, op, env) -> None:
        regions = [self.clone_region(r, env) for r in op.regions]
        outs = self.b.emit(op.prim, [env[v.id][0] for v in op.inputs], op.params,
                           [v.aval for v in op.outputs], regions, loc=op.loc)
        self.bind(env, op.outputs, outs, False)

    def region(self, r, env, avals, params_batched: list[bool], yields: list[bool] | None):
        """A batched copy of region `r` (its params of `avals`, batched where flagged)
        yielding its results batched at the positions flagged in `yields` (None: as they
        come). The avals come from the operands (a batched tape has its batch on axis 1)."""
        params = [self.b.new_value(a, p.name) for p, a in zip(r.params, avals)]
        env2 = dict(env)
        for p, q, bt in zip(r.params, params, params_batched):
            self.bind(env2, [p], [q], bt)
        with self.b.open_region(params) as new:
            self.ops(r.ops, env2)
            new.results = self.results(env2, r.results, yields)
        return new

    def results(self, env, vs, yields):
        out = []
        for k, v in enumerate(vs):
            x, bt = env[v.id]
            if yields is not None and yields[k]:
                x = self.force(x, bt, v)
            elif bt and yields is not None:
                raise AssertionError(f"vmap: value {v!r} batched at an unbatched position")
            out.append(x)
        return out


def _batched_ids(self, region, live: set, masked: bool) -> set:
    """`live` plus the ids of the values of `region` that the transformation makes batched
    given that those in `live` are (Note [Which values are batched])."""
    live = set(live)
    for op in region.ops:
        live.update(o.id for o, b in zip(op.outputs, _outputs_batched(self, op, live, masked))
                    if b and o.id not in self.int_tapes)
    return live


def _outputs_batched(self, op, live: set, masked: bool) -> list[bool]:
    """Which outputs of `op` the transformation makes batched, given the batched ids `live`
    (`masked`: within a branch or loop only some examples run)."""
    n = len(op.outputs)
    if op.prim is tape_new_p:
        return [op.outputs[0].aval.dtype.kind == "f"]
    reads = any(v.id in live for v in op.inputs) or any(
        v.id in live for r in op.regions for v in r.free_values())
    if op.prim is for_loop_p and not any(v.id in live for v in control.bounds(op)) or \
            op.prim is while_loop_p and not (masked and reads):
        bt = _loop_batched(self, op, live, masked)
        if op.prim is while_loop_p:
            test = control.loop_test(op)
            ids = _batched_ids(self, test, live | {p.id for p, b in zip(test.params, bt) if b},
                               masked)
            if test.results[0].id in ids:
                return [True] * n
        return bt
    if op.prim is cond_p and control.pred(op).id not in live:
        out = [False] * n
        for r in control.branches(op):
            ids = _batched_ids(self, r, live | {q.id for q, v in zip(r.params, control.state(op))
                                                if v.id in live}, masked)
            out = [o or v.id in ids for o, v in zip(out, r.results)]
        return out
    if not reads and any(o.prim is tape_new_p and o.outputs[0].aval.dtype.kind == "f"
                         for r in op.regions for o in r.walk()):
        return [True] * n  # a loop of the reverse sweep carrying a float tape
    return [reads] * n


def _tape_ids(region, ids: set) -> None:
    """Add to `ids` the values of `region` that are integer tapes (made, pushed, carried)."""
    for op in region.ops:
        if op.prim is tape_new_p and op.outputs[0].aval.dtype.kind != "f" or \
                op.prim is tape_push_p and op.inputs[0].id in ids:
            ids.add(op.outputs[0].id)
        cf = control.CONTROL.get(op.prim)
        if cf is not None and op.prim is not fusion_p:
            for k, v in enumerate(cf.state(op)):
                if v.id in ids:
                    ids.add(op.outputs[k].id)
                    ids.update(ps[k].id for ps in cf.entries(op))
        for r in op.regions:
            _tape_ids(r, ids)


def _live(self, op, env) -> set:
    """The ids of the batched values op reads (operands and its regions' free values)."""
    return {v.id for v in op.inputs if env[v.id][1]} | {
        v.id for r in op.regions for v in r.free_values() if v.id in env and env[v.id][1]}


# ---- primitive families ------------------------------------------------------------------------
def _elementwise(self, op, env):
    rank = len(op.outputs[0].aval.shape)
    ins = [self.expand(x, rank) if bt else x for x, bt in (env[v.id] for v in op.inputs)]
    self.bind(env, op.outputs, self.emit(op, ins))


def _axis(a, rank):
    return None if a is None else (a % rank if rank else a) + 1


def _axes(self, op, env):
    """Reductions, scans, sorts: operands batched, axis parameters shifted by one."""
    rank = len(op.inputs[0].aval.shape)
    params = dict(op.params)
    if "axes" in params:
        params["axes"] = tuple(_axis(a, rank) for a in params["axes"])
    if "axis" in params:
        if params["axis"] is None:  # over the flattened array: per example
            return _per_example(self, op, env)
        params["axis"] = _axis(params["axis"], rank)
    ins = [self.force(*env[v.id], v) for v in op.inputs]
    self.bind(env, op.outputs, self.emit(op, ins, params))


def _reshape(self, op, env):
    x, _ = env[op.inputs[0].id]
    self.bind(env, op.outputs, self.emit(op, [x], {"shape": (self.n,) + tuple(op.params["shape"])}))


def _transpose(self, op, env):
    x, _ = env[op.inputs[0].id]
    perm = (0,) + tuple(p + 1 for p in op.params["perm"])
    self.bind(env, op.outputs, self.emit(op, [x], {"perm": perm}))


def _broadcast_to(self, op, env):
    shape = tuple(op.params["shape"])
    x = self.expand(env[op.inputs[0].id][0], len(shape))
    self.bind(env, op.outputs, self.emit(op, [x], {"shape": (self.n,) + shape}))


def _concatenate(self, op, env):
    rank = len(op.outputs[0].aval.shape)
    ins = [self.force(*env[v.id], v) for v in op.inputs]
    self.bind(env, op.outputs, self.emit(op, ins, {"axis": _axis(op.params["axis"], rank)}))


def _indexing(self, op, env, data: int):
    """getitem (data operands: x), index_put (x, v), scatter_add (g): the key gets a full
    slice in front when its index arrays are unbatched and adjacent."""
    key = op.params["key"]
    arrays = any(e[0] == "a" for e in key)  # then integers index as arrays do (numpy)
    pos = [k for k, e in enumerate(key) if e[0] == "a" or (arrays and e[0] == "i")]
    adjacent = not pos or pos[-1] - pos[0] == len(pos) - 1
    if any(env[v.id][1] for v in op.inputs[data:]):
        if op.prim is getitem_p and adjacent and pos[0] == 0:
            return _gather(self, op, env)
        return _per_example(self, op, env)
    if not adjacent:
        return _per_example(self, op, env)
    params = dict(op.params, key=(("s", None, None, None),) + tuple(key))
    if "shape" in params:
        params["shape"] = (self.n,) + tuple(params["shape"])
    ins = [self.force(*env[v.id], v) for v in op.inputs[:data]] + \
        [env[v.id][0] for v in op.inputs[data:]]
    self.bind(env, op.outputs, self.emit(op, ins, params))


def _gather(self, op, env):
    """getitem with batched index arrays, leading the key: example e's row of the data is
    picked by one more index array, arange(n), in front (broadcast against the others)."""
    rank = max(len(v.aval.shape) for v in op.inputs[1:])
    idx = [self.expand(x, rank) if bt else x for x, bt in (env[v.id] for v in op.inputs[1:])]
    rows = self.b.const(np.arange(self.n, dtype=np.int64).reshape((self.n,) + (1,) * rank))
    key = (("a", len(idx)),) + tuple(op.params["key"])
    x = self.force(*env[op.inputs[0].id], op.inputs[0])
    self.bind(env, op.outputs, self.emit(op, [x] + idx + [rows], {"key": key}))


def _matmul(self, op, env):
    (a, ba), (b, bb) = (env[v.id] for v in op.inputs)
    sa = op.inputs[0].aval.shape
    if ba and not bb and len(sa) == 2:  # (n, r, k) @ (k, m) as one (n*r, k) @ (k, m)
        out = ops.matmul(ops.reshape(a, (self.n * sa[0], sa[1])), b)
        self.bind(env, op.outputs, [ops.reshape(out, (self.n,) + tuple(op.outputs[0].aval.shape))])
        return
    ins = [self.force(x, bt, v) for (x, bt), v in zip(((a, ba), (b, bb)), op.inputs)]
    self.bind(env, op.outputs, self.emit(op, ins))


def _per_example(self, op, env):
    """The rule of last resort: a staged loop over the examples, each running op on its own
    inputs (masked ones skipped) and writing its outputs into row i."""
    n, mask = self.n, self.mask
    reads = {v.id: v for v in op.inputs}
    reads.update((v.id, v) for r in op.regions for v in r.free_values() if v.id in env)

    def body(i, *accs):
        env2 = dict(env)
        for vid in reads:
            x, bt = env[vid]
            if bt:
                env2[vid] = (ops.getitem(x, i), False)

        def run():
            self.clone(op, env2)
            return tuple(env2[o.id][0] for o in op.outputs)

        self.mask = None
        try:
            if mask is None:
                outs = run()
            else:
                outs = control.cond(ops.getitem(mask, i), lambda: run(),
                                    lambda: tuple(_zeros(self, o.aval) for o in op.outputs))
        finally:
            self.mask = mask
        return tuple(ops.setitem(a, i, o) for a, o in zip(accs, outs))
    accs = control.for_loop(0, n, 1, body, *[_zeros(self, self.aval(o.aval)) for o in op.outputs])
    self.bind(env, op.outputs, accs)


def _zeros(self, aval):
    z = self.b.const(np.zeros((), aval.dtype))
    return ops.broadcast_to(z, tuple(aval.shape)) if aval.shape else z


# ---- structural and region ops -----------------------------------------------------------------
def _check(self, op, env):
    """check: fails when it fails for an example (inside the mask)."""
    fail, bt = env[control.check_fail(op).id]
    if self.mask is not None:
        fail = ops.logical_and(fail, self.mask)
        bt = True
    if bt:
        fail = _any(fail)
    self.b.emit(op.prim, [fail] + [env[v.id][0] for v in op.inputs[1:]], op.params,
                [], loc=op.loc)


def _custom_vjp(self, op, env):
    """custom_vjp: its operands batched, its rule (bwd) batched over the cotangents."""
    ins = [self.force(*env[v.id], v) for v in op.inputs]
    bwd = control.custom_bwd(op)
    region = self.region(bwd, env, [self.aval(p.aval) for p in bwd.params],
                         [True] * len(bwd.params), [True] * len(bwd.results))
    outs = self.b.emit(op.prim, ins, op.params, [self.aval(o.aval) for o in op.outputs],
                       [region], loc=op.loc)
    self.bind(env, op.outputs, outs)


def _fusion(self, op, env):
    body = control.body(op)
    env2 = dict(env)
    for p, v in zip(body.params, control.state(op)):
        env2[p.id] = env[v.id]
    self.ops(body.ops, env2)
    for o, r in zip(op.outputs, body.results):
        env[o.id] = env2[r.id]


def _loop_batched(self, op, outer: set, masked: bool) -> list[bool]:
    """The carried positions of a loop that become batched, given the batched ids `outer`
    (Note [Which values are batched])."""
    cf = control.CONTROL[op.prim]
    act = {k for k, v in enumerate(cf.state(op)) if v.id in outer}
    while True:
        live = outer | {ps[k].id for ps in cf.entries(op) for k in act}
        ids = _batched_ids(self, cf.body(op), live, masked)
        new = act | {k for k, v in enumerate(cf.body(op).results) if v.id in ids}
        if new == act:
            return [k in act for k in range(len(op.outputs))]
        act = new


def _for_loop(self, op, env):
    if any(env[v.id][1] for v in control.bounds(op)):
        return _for_masked(self, op, env)
    bt = _outputs_batched(self, op, _live(self, op, env), self.mask is not None)
    body = control.body(op)
    init = [self.force(*env[v.id], v) if b else env[v.id][0]
            for v, b in zip(control.state(op), bt)]
    avals = [x.aval for x in init]
    region = self.region(body, env, [control.counter(op).aval] + avals, [False] + bt, bt)
    ins = [env[v.id][0] for v in control.bounds(op)] + init
    outs = self.b.emit(op.prim, ins, {}, avals, [region], loc=op.loc)
    for o, v, b in zip(op.outputs, outs, bt):
        self.bind(env, [o], [v], b)


def _for_masked(self, op, env):
    """A for_loop whose bounds differ across the batch: k counts up to the largest trip
    count; example e runs iteration k (counter start + k * step) while k < its trip count,
    the others keep their state."""
    start, stop, step = (self.force(*env[v.id], v) for v in control.bounds(op))
    trips = ops.maximum(ops.floor_divide(
        ops.sub(ops.add(ops.sub(stop, start), step), ops.sign(step)), step), 0)
    body, outer = control.body(op), self.mask

    def step_fn(k, *state):
        run = ops.lt(k, trips)
        run = run if outer is None else ops.logical_and(run, outer)
        env2 = dict(env)
        self.bind(env2, body.params, [ops.add(start, ops.mul(k, step))] + list(state), True)
        self.mask = run
        try:
            self.ops(body.ops, env2)
            news = self.results(env2, body.results, [True] * len(state))
        finally:
            self.mask = outer
        return tuple(_select(self, run, x, q) for x, q in zip(news, state))
    init = [self.force(*env[v.id], v) for v in control.state(op)]
    outs = control.for_loop(0, ops.amax(trips), 1, step_fn, *init)
    self.bind(env, op.outputs, outs)


def _select(self, pred, a, b):
    """Per example, batched a where the batched `pred` holds, else b (a itself when the same
    value: a tape passed through unchanged is never selected)."""
    return a if a is b else ops.where(self.expand(pred, len(a.aval.shape) - 1), a, b)


def _any(pred):
    return ops.gt(ops.sum(ops.astype(pred, np.int64)), 0)


def _while_loop(self, op, env):
    bt = _outputs_batched(self, op, _live(self, op, env), self.mask is not None)
    test, body = control.loop_test(op), control.body(op)
    # examples stop at different iterations: all state is per example
    pred_batched = all(bt) and (self.mask is not None or test.results[0].id in _batched_ids(
        self, test, _live(self, op, env) | {p.id for p in test.params}, False))
    ins = [self.force(*env[v.id], v) if b else env[v.id][0]
           for v, b in zip(control.state(op), bt)]
    avals = [x.aval for x in ins]
    if pred_batched:
        regions = [_masked_region(self, test, env, avals, None),
                   _masked_region(self, test, env, avals, body)]
    else:
        regions = [self.region(test, env, avals, bt, [False]),
                   self.region(body, env, avals, bt, bt)]
    outs = self.b.emit(op.prim, ins, {}, avals, regions, loc=op.loc)
    for o, v, b in zip(op.outputs, outs, bt):
        self.bind(env, [o], [v], b)


def _masked_region(self, test, env, avals, body):
    """A region of a while_loop with a batched predicate, params `avals`: the predicate of
    `test` per example (within the mask); then whether any example runs (body None), or one
    iteration of `body` for the examples that run, the others keeping their state."""
    params = [self.b.new_value(a) for a in avals]
    env2 = dict(env)
    self.bind(env2, test.params, params, True)
    with self.b.open_region(params) as new:
        self.ops(test.ops, env2)
        pred = self.force(*env2[test.results[0].id], test.results[0])
        if self.mask is not None:
            pred = ops.logical_and(pred, self.mask)
        if body is None:
            new.results = [_any(pred)]
            return new
        env3 = dict(env)
        self.bind(env3, body.params, params, True)
        saved, self.mask = self.mask, pred
        try:
            self.ops(body.ops, env3)
            news = self.results(env3, body.results, [True] * len(params))
        finally:
            self.mask = saved
        new.results = [_select(self, pred, x, q) for x, q in zip(news, params)]
    return new


def _cond(self, op, env):
    p, pb = env[control.pred(op).id]
    state = control.state(op)
    then_r, else_r = control.branches(op)
    if not pb:
        pbt = [env[v.id][1] for v in state]
        bt = _outputs_batched(self, op, _live(self, op, env), self.mask is not None)
        ins = [env[v.id][0] for v in state]
        regions = [self.region(r, env, [x.aval for x in ins], pbt, bt)
                   for r in (then_r, else_r)]
        outs = self.b.emit(op.prim, [p] + ins, {}, [v.aval for v in regions[0].results],
                           regions, loc=op.loc)
        for o, v, b in zip(op.outputs, outs, bt):
            self.bind(env, [o], [v], b)
        return
    # a batched predicate: both branches, each masked, then a select per example
    saved = self.mask
    branch_outs = []
    for r, m in ((then_r, p), (else_r, ops.logical_not(p))):
        env2 = dict(env)
        for q, v in zip(r.params, state):
            env2[q.id] = env[v.id]
        self.mask = m if saved is None else ops.logical_and(saved, m)
        try:
            self.ops(r.ops, env2)
        finally:
            self.mask = saved
        branch_outs.append([self.force(*env2[v.id], v) for v in r.results])
    for o, a, b in zip(op.outputs, *branch_outs):
        self.bind(env, [o], [_select(self, p, a, b)])


# Note [Batched tapes]
# A loop's float gradient tape (transform/loop_ad.py) is made batched whatever is pushed on it
# (the values pushed are broadcast): whether a push is batched is known only later, and tapes are
# carried through loops and branches, so a per-tape decision would need a look ahead. Its
# rows then hold (n, *shape), the batch on axis 1 of the tape's aval, which is why region
# params take their operands' avals. A push under a mask (a branch taken by some examples, a
# loop run by some) would write rows for the others too and misalign the reverse sweep's
# reads, and a read at a batched row has no rule: both are errors. Integer tapes (trip counts,
# branches taken) stay unbatched, so loops whose trip counts are the same for all examples
# stay unmasked in the reverse sweep; a batched push on one is an error.
def _differs(loc) -> UnsupportedError:
    return UnsupportedError(
        "vmap: the gradient of a staged loop whose trip count, or a branch taken in or around "
        "it, differs across the batch (its tape would be read at rows that differ)", loc=loc,
        fix="make the loop bounds and branch conditions the same for all examples, or loop "
        "over the examples")


def _tape_new(self, op, env):
    if np.dtype(op.params["dtype"]).kind != "f":
        return self.clone(op, env)
    p = dict(op.params, shape=(self.n,) + tuple(op.params["shape"]))
    self.bind(env, op.outputs, self.b.emit(op.prim, [], p, [Aval(
        (p["rows"],) + p["shape"], np.dtype(p["dtype"]))], loc=op.loc))


def _tape_push(self, op, env):
    if self.mask is not None:
        raise _differs(op.loc)
    tape, x = op.inputs
    if not env[tape.id][1]:  # an integer tape: trip counts, branches taken
        raise _differs(op.loc)
    self.bind(env, op.outputs, self.emit(op, [env[tape.id][0], self.force(*env[x.id], x)]))


def _tape_get(self, op, env):
    tape, k = op.inputs
    if env[k.id][1]:
        raise _differs(op.loc)
    self.bind(env, op.outputs, self.emit(op, [env[tape.id][0], env[k.id][0]]))


_RULES = {
    constant_p: lambda self, op, env: self.clone(op, env),
    check_p: _check, fusion_p: _fusion,
    cond_p: _cond, for_loop_p: _for_loop, while_loop_p: _while_loop,
    reshape_p: _reshape, transpose_p: _transpose, broadcast_to_p: _broadcast_to,
    concatenate_p: _concatenate, matmul_p: _matmul,
    getitem_p: lambda self, op, env: _indexing(self, op, env, 1),
    index_put_p: lambda self, op, env: _indexing(self, op, env, 2),
    scatter_add_p: lambda self, op, env: _indexing(self, op, env, 1),
    custom_vjp_p: _custom_vjp,
    tape_push_p: _tape_push, tape_get_p: _tape_get,
}

_FAMILY = {"elementwise": _elementwise, "reduce": _axes, "scan": _axes, "sort": _axes}
