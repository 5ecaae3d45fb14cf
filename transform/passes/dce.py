"""Dead-code elimination, including dead loop-carried values, cond and fusion outputs.

Requires: any verified IR. Produces: the same IR without ops whose outputs are unused, and
without carried positions of loops (or outputs of cond/fusion) that nothing live reads; so
the loop tapes of values the reverse sweep never reads disappear too. Ops with an effect
(`check`, Note [Checks]) stay, with the region ops holding them and what they read. A live
custom_vjp op keeps its bwd region and the residuals it reads (AD needs them).
"""
from __future__ import annotations

from llgrad.runtime.ops.control import custom_vjp_p
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


def _dce(fn: ir.Function) -> ir.Function:
    live = {v.id for v in fn.outputs}
    prune: dict = {}
    effects: set = set()
    _effects(fn.body, effects)
    _mark(fn.body, live, prune, effects)
    _sweep(fn.body, live, prune, effects)
    return fn


dce = Pass("dce", _dce, __doc__)
