"""Dead-code elimination, including dead loop-carried values, cond and fusion outputs.

Requires: any verified IR. Produces: the same IR without ops whose outputs are unused, and
without carried positions of loops (or outputs of cond/fusion) that nothing live reads; so
the loop tapes of values the reverse sweep never reads disappear too. Ops with an effect
(`check`, Note [Checks]) stay, with the region ops holding them and what they read.
`check_unread_indices` (run by the tracer) replaces unread indexing ops at 0-d indices by
checks of their indices (Note [Unread element reads keep their checks]). A live
custom_vjp op keeps its bwd region and the residuals it reads (AD needs them).
"""
from __future__ import annotations

import numpy as np

from llgrad.runtime.aval import BOOL, Aval
from llgrad.runtime.ops.control import check_p, constant_p, custom_vjp_p
from llgrad.runtime.ops.elementwise import ge_p, logical_or_p, lt_p
from llgrad.runtime.ops.index import scalar_index_axes
from llgrad.transform import ir
from llgrad.transform.control import custom_bwd, describe
from llgrad.transform.passes import Pass


def _effects(region: ir.Region, out: set) -> bool:
    """Add to `out` the ids of ops in `region` that have an effect or hold one; any?"""
    found = False
    for op in region.ops:
        inner = [_effects(r, out) for r in op.regions]  # every region: no short cut
        if op.prim.has_effect(op) or any(inner):
            out.add(id(op))
            found = True
    return found


def _kept(op, live: set, effects: set) -> bool:
    return id(op) in effects or any(o.id in live for o in op.outputs)


def _mark(region: ir.Region, live: set, prune: dict, effects: set) -> None:
    """Add to `live` what the live results of `region` need (region.results must be in live)."""
    for op in reversed(region.ops):
        if not _kept(op, live, effects):
            continue
        cf = describe(op)
        if cf is not None and cf.loop:
            _mark_loop(op, cf, live, prune, effects)
            continue
        if op.prim is custom_vjp_p:  # its bwd region is kept whole, with what it reads
            bwd = custom_bwd(op)
            live.update(v.id for v in bwd.results)
            _mark(bwd, live, prune, effects)
        if cf is not None:
            keep = [k for k, o in enumerate(op.outputs) if o.id in live]
            prune[id(op)] = set(range(len(op.outputs))) - set(keep)
            for r in op.regions:
                live.update(r.results[k].id for k in keep)
                _mark(r, live, prune, effects)
        live.update(v.id for v in op.inputs)


def _mark_loop(op, cf, live, prune, effects) -> None:
    body = cf.body(op)
    heads = cf.entries(op)
    dead = {k for k, o in enumerate(op.outputs) if o.id not in live}
    while True:
        trial = set(live)
        trial.update(body.results[k].id for k in range(len(op.outputs)) if k not in dead)
        for r in op.regions:
            if r is not body:  # a while_loop's test: its one result is always needed
                trial.add(r.results[0].id)
                _mark(r, trial, prune, effects)
        _mark(body, trial, prune, effects)
        needed = {k for k in dead if any(h[k].id in trial for h in heads)}
        if not needed:
            break
        dead -= needed
    prune[id(op)] = dead
    live.update(trial)
    live.update(v.id for k, v in enumerate(cf.state(op)) if k not in dead)
    live.update(v.id for v in cf.lead(op))


def _sweep(region: ir.Region, live: set, prune: dict, effects: set) -> None:
    kept = []
    for op in region.ops:
        if not _kept(op, live, effects):
            continue
        dead = prune.get(id(op))
        if dead:
            describe(op).drop(op, dead)
        for r in op.regions:
            _sweep(r, live, prune, effects)
        kept.append(op)
    region.ops = kept


# Note [Unread element reads keep their checks]
# numpy raises IndexError for `v = x[k]` with k out of range even when v is never used. An
# indexing op whose index arrays may be out of range has an effect (runtime/ops/index.py
# `_checked`), so dce keeps it; one at 0-d indices (`x[k]`, `a[i] = v` in a loop) has none:
# kept, it would read its whole array, holding it live past updates in place and making
# loop AD tape it per iteration. So the tracer, once a trace is complete, puts in the place
# of each such op its program never reads (`check_unread_indices`) a `check` of each 0-d
# index against its axis (k < -n or k >= n: numpy's IndexError), which reads the index
# alone; in a region op nothing reads (a loop or branch computing unused values), the region
# op then stays for its checks. Only the user's program gets them: the reverse sweep's
# recomputed reads that nothing reads are not the user's (the forward already checked them).
def _index_checks(op) -> list:
    """The check ops standing for the unread indexing op `op` (see the Note above)."""
    out = []

    def emit(prim, ins, aval=None, params=None):
        outs = [] if aval is None else [ir.Value(aval)]
        out.append(ir.Op(prim, ins, params or {}, outs, (), op.loc))
        return outs[0] if outs else None

    for k, axis, n in scalar_index_axes(op):
        dt = k.aval.dtype
        lo = emit(constant_p, [], Aval((), dt), {"value": np.asarray(-n, dt)})
        hi = emit(constant_p, [], Aval((), dt), {"value": np.asarray(n, dt)})
        fail = emit(logical_or_p, [emit(lt_p, [k, lo], Aval((), BOOL)),
                                   emit(ge_p, [k, hi], Aval((), BOOL))], Aval((), BOOL))
        emit(check_p, [fail], params={"exc": IndexError, "args": (
            f"index out of bounds for axis {axis} with size {n}",)})
    return out


def _replace_unread(region: ir.Region, live: set, effects: set) -> None:
    ops = []
    for op in region.ops:
        for r in op.regions:
            _replace_unread(r, live, effects)
        if not _kept(op, live, effects):
            ops.extend(_index_checks(op))
        ops.append(op)  # (dce drops it; the results of dead regions may still name it)
    region.ops = ops


def check_unread_indices(fn: ir.Function) -> ir.Function:
    """Put before each indexing op at 0-d indices that nothing reads checks of its indices
    (Note [Unread element reads keep their checks]); the tracer runs it on every trace."""
    live, effects = {v.id for v in fn.outputs}, set()
    _effects(fn.body, effects)
    _mark(fn.body, live, {}, effects)
    _replace_unread(fn.body, live, effects)
    return fn


def _dce(fn: ir.Function) -> ir.Function:
    live = {v.id for v in fn.outputs}
    prune: dict = {}
    effects: set = set()
    _effects(fn.body, effects)
    _mark(fn.body, live, prune, effects)
    _sweep(fn.body, live, prune, effects)
    return fn


dce = Pass("dce", _dce, __doc__)
