"""Batching rules of the region ops and tapes for transform/vmap.py: cond, for_loop,
while_loop (masked when examples take different paths), check, custom_vjp, fusion and the
tapes of staged loops' gradients; and which outputs of a region op come out batched.

Each rule is `rule(self, op, env)` with `self` the transformation (transform/vmap.py's
_Vmap): env maps an old value's id to (new value, batched).
"""
from __future__ import annotations

import numpy as np

from llgrad.runtime import ops
from llgrad.runtime.aval import Aval
from llgrad.runtime.ops.control import (check_p, cond_p, custom_vjp_p, for_loop_p, fusion_p,
                                        tape_get_p, tape_new_p, tape_push_p, while_loop_p)
from llgrad.transform import control

# Note [Which values are batched]
# Region ops need to know before the transformation which of their carried values become
# batched (the params of the new regions take their avals). `_outputs_batched` answers as the
# rules will make them: a plain op's outputs are batched when it reads a batched value; a
# loop's carried positions are a fixed point over its body (`_loop_batched`), all of them when
# a while_loop's predicate is batched or the loop runs masked; a cond's outputs are those a
# branch yields batched, or all under a batched predicate. Tapes are as the walk decided
# (Note [Batched tapes]). A region result left unbatched at a batched position is broadcast.


def batched_ids(self, region, live: set, masked: bool) -> set:
    """`live` plus the ids of the values of `region` that the transformation makes batched
    given that those in `live` are (Note [Which values are batched])."""
    live = set(live)
    for op in region.ops:
        live.update(o.id for o, b in zip(op.outputs, _outputs_batched(self, op, live, masked))
                    if b and o.id not in self.plain_tapes)
    return live


def _outputs_batched(self, op, live: set, masked: bool) -> list[bool]:
    """Which outputs of `op` the transformation makes batched, given the batched ids `live`
    (`masked`: within a branch or loop only some examples run)."""
    n = len(op.outputs)
    if op.prim is tape_new_p:
        return [batched_tape(self, op)]
    reads = any(v.id in live for v in op.inputs) or any(
        v.id in live for r in op.regions for v in r.free_values())
    if op.prim is for_loop_p and not any(v.id in live for v in control.bounds(op)) or \
            op.prim is while_loop_p and not (masked and reads):
        bt = _loop_batched(self, op, live, masked)
        if op.prim is while_loop_p:
            test = control.loop_test(op)
            ids = batched_ids(self, test, live | {p.id for p, b in zip(test.params, bt) if b},
                               masked)
            if test.results[0].id in ids:
                return [True] * n
        return bt
    if op.prim is cond_p and control.pred(op).id not in live:
        out = [False] * n
        for r in control.branches(op):
            ids = batched_ids(self, r, live | {q.id for q, v in zip(r.params, control.state(op))
                                                if v.id in live}, masked)
            out = [o or v.id in ids for o, v in zip(out, r.results)]
        return out
    if not reads and any(o.prim is tape_new_p and batched_tape(self, o)
                         for r in op.regions for o in r.walk()):
        return [True] * n  # a loop of the reverse sweep carrying a batched tape
    return [reads] * n


def tape_groups(region, groups: dict) -> None:
    """Map in `groups` each tape value of `region` (made, pushed, carried, yielded) to the id
    of the tape_new output it flows from: one group per tape."""
    for op in region.ops:
        if op.prim is tape_new_p:
            groups[op.outputs[0].id] = op.outputs[0].id
        elif op.prim is tape_push_p and op.inputs[0].id in groups:
            groups[op.outputs[0].id] = groups[op.inputs[0].id]
        cf = control.CONTROL.get(op.prim)
        if cf is not None and op.prim is not fusion_p:
            for k, v in enumerate(cf.state(op)):
                if v.id in groups:
                    groups[op.outputs[k].id] = groups[v.id]
                    groups.update((ps[k].id, groups[v.id]) for ps in cf.entries(op))
        for r in op.regions:
            tape_groups(r, groups)


def _live(self, op, env) -> set:
    """The ids of the batched values op reads (operands and its regions' free values)."""
    return {v.id for v in op.inputs if env[v.id][1]} | {
        v.id for r in op.regions for v in r.free_values() if v.id in env and env[v.id][1]}


# ---- structural and region ops -----------------------------------------------------------------
def check(self, op, env):
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
        ids = batched_ids(self, cf.body(op), live, masked)
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
    if outer is not None:  # examples that do not reach the loop: no trips (no garbage bound)
        trips = ops.where(outer, trips, 0)

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
        return tuple(_select(self, run, x, q, r) for x, q, r in zip(news, state, body.results))
    init = [self.force(*env[v.id], v) for v in control.state(op)]
    outs = control.for_loop(0, ops.amax(trips), 1, step_fn, *init)
    self.bind(env, op.outputs, outs)


def _select(self, pred, a, b, old=None):
    """Per example, batched a where the batched `pred` holds, else b; a itself when the same
    value or a tape (the value of old fn's `old`): a tape is never selected, its pushes
    were masked (Note [Ragged tapes])."""
    if a is b or old is not None and old.id in self.groups:
        return a
    return ops.where(self.expand(pred, len(a.aval.shape) - 1), a, b)


def _any(pred):
    return ops.gt(ops.sum(ops.astype(pred, np.int64)), 0)


def _while_loop(self, op, env):
    bt = _outputs_batched(self, op, _live(self, op, env), self.mask is not None)
    test, body = control.loop_test(op), control.body(op)
    # examples stop at different iterations: all state is per example
    pred_batched = all(bt) and (self.mask is not None or test.results[0].id in batched_ids(
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
        new.results = [_select(self, pred, x, q, r)
                       for x, q, r in zip(news, params, body.results)]
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
    # a batched predicate: both branches, each masked, then a select per example; a tape
    # goes through the branches in turn (each pushes under its mask), never selected
    saved, latest = self.mask, {}
    branch_outs = []
    for r, m in ((then_r, p), (else_r, ops.logical_not(p))):
        env2 = dict(env)
        for q, v in zip(r.params, state):
            env2[q.id] = latest.get(self.groups.get(q.id), env[v.id])
        self.mask = m if saved is None else ops.logical_and(saved, m)
        try:
            self.ops(r.ops, env2)
        finally:
            self.mask = saved
        for v in r.results:
            if v.id in self.groups:
                latest[self.groups[v.id]] = env2[v.id]
        branch_outs.append([None if v.id in self.groups else self.force(*env2[v.id], v)
                            for v in r.results])
    for o, a, b in zip(op.outputs, *branch_outs):
        if o.id in self.groups:
            self.bind(env, [o], [latest[self.groups[o.id]][0]], latest[self.groups[o.id]][1])
        else:
            self.bind(env, [o], [_select(self, p, a, b)])


# Note [Batched tapes]
# A loop's gradient tape (transform/loop_ad.py) is batched when a batched value is pushed on
# it: its rows then hold (n, *shape), the batch on axis 1 of the tape's aval, which is why
# region params take their operands' avals. Other tapes stay unbatched: jacrev's forward pass
# is not batched (only the cotangent is), so its tapes keep one row per iteration, not n
# copies of it (a tape made batched whatever was pushed cost jacrev of the 100 -> 100 loop
# 100x the tape traffic); an inner loop's integer row counters (Note [Stacked inner tapes])
# keep the reverse sweep's loops unmasked where trip counts are the same for all examples.
# Whether a push is batched is known only when the walk reaches it, after the tape was made
# and carried through loops and branches: the look ahead is a first guess from the
# batched-value analysis (vmap.py `_Tapes`) and a walk again where it missed (below).

# Note [Ragged tapes]
# Where examples take different paths (a while loop's trip count, a for loop's batched
# bounds, a branch under a batched predicate, in a loop or around one), a push runs under a
# mask and each example's tape holds its own number of rows, as its own run would: so the
# tape of such a push is *ragged* (runtime/ops/control.py Tape): a row count per example,
# a push writes the examples of its mask each at its own next row, and a read takes each
# example's row k[e] (the reverse sweep's row indices are batched where the counters are),
# zero where the example holds no such row (the reads of examples outside the mask, whose
# results are not selected). The reverse sweep's loops then run to the largest trip count
# under masks (transform/vmap_control.py's loop rules), each example reading its own rows:
# the same numbers as a loop of llgrad.grad over the examples. When the walk meets a masked
# push onto a tape that is not ragged, or an unbatched tape where a batched value is needed
# (a batched push, a batched row index, carried by a masked loop), `Ragged` names its group
# and vmap_function walks again with the group ragged, or batched (each at most once).
# Tapes are never selected by a mask (`_select`): a batched cond passes each tape from its
# then branch to its else branch, each pushing under its own mask.
# A tape ragged in fn (vmap of vmap of grad) is ragged in each example too, so batching it
# adds a column dim (`ragged_dims`): its counts, masks and row indices are per example and
# column of fn.
class Ragged(Exception):
    """The tape group `group` must be batched, or `ragged` (Note [Ragged tapes]): walk
    again."""

    def __init__(self, group, ragged: bool):
        super().__init__(group)
        self.group, self.ragged = group, ragged


def batched_tape(self, op) -> bool:
    """Whether tape_new `op`'s tape is batched (Note [Batched tapes])."""
    return op.outputs[0].id in self.batched_tapes


def ragged_dims(self, group) -> int:
    """The column dims of tape `group` in the new function: 0 when it is not ragged, one more
    than in fn when batched (a tape ragged in fn is ragged in each example)."""
    inner = self.inner_ragged[group]
    return inner + 1 if group in self.batched_tapes and (inner or group in self.ragged) else 0


def tape_new(self, op, env):
    if not batched_tape(self, op):
        return self.clone(op, env)
    p = dict(op.params, shape=(self.n,) + tuple(op.params["shape"]))
    if ragged_dims(self, op.outputs[0].id):
        p["ragged"] = ragged_dims(self, op.outputs[0].id)
    self.bind(env, op.outputs, self.b.emit(op.prim, [], p, [Aval(
        (p["rows"],) + p["shape"], np.dtype(p["dtype"]))], loc=op.loc))


def _tape_push(self, op, env):
    tape, x, *mask = op.inputs  # a mask: a tape ragged in fn (vmap of vmap)
    group = self.groups[tape.id]
    t, tb = env[tape.id]
    dims = ragged_dims(self, group)
    if dims:
        m = self.force(*env[mask[0].id], mask[0]) if mask else self.mask
        if m is None:
            m = self.b.const(np.ones(self.n, bool))
        elif mask and self.mask is not None:
            m = ops.logical_and(m, self.expand(self.mask, dims - 1))
        out = self.emit(op, [t, self.force(*env[x.id], x), m])
    elif self.mask is not None:
        raise Ragged(group, ragged=True)
    elif not tb and any(env[v.id][1] for v in [x] + mask):
        raise Ragged(group, ragged=False)
    elif not tb:
        return self.clone(op, env)
    else:
        out = self.emit(op, [t, self.force(*env[x.id], x)])
    self.bind(env, op.outputs, out)


def _tape_get(self, op, env):
    tape, k = op.inputs
    (t, tb), (row, kb) = env[tape.id], env[k.id]
    if not tb:
        if kb:
            raise Ragged(self.groups[tape.id], ragged=False)
        return self.clone(op, env)
    dims = ragged_dims(self, self.groups[tape.id])
    if k.aval.shape or kb:  # row indices per column: one per example and column of fn
        row = self.force(row, kb, k)
        if dims > len(row.aval.shape):
            row = ops.broadcast_to(self.expand(row, dims - 1), tuple(t.aval.shape[1:1 + dims]))
    self.bind(env, op.outputs, self.emit(op, [t, row]))


RULES = {check_p: check, fusion_p: _fusion, custom_vjp_p: _custom_vjp, cond_p: _cond,
         for_loop_p: _for_loop, while_loop_p: _while_loop, tape_push_p: _tape_push,
         tape_get_p: _tape_get}
