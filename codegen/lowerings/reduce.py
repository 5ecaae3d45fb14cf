"""Reductions (reduce_sum/prod/max/min over any axes, keepdims; argmax/argmin) and the group
lowering that runs fused elementwise ops and their reductions as one loop nest.

reduce_* ops are planned into GroupUnits (plan.py): alone, or inside the group computing their
input, so `sum(exp(x) * y)` never stores `exp(x) * y`. Keepdims only changes the shape, not the
dense memory of the result. argmax/argmin are scalar loops (first extremum, NaN wins, as numpy).
"""
from __future__ import annotations

import numpy as np
from llvmlite import ir

from llgrad.runtime.ops import reduce as R

from .. import elementwise as ew
from ..registry import lowers
from ..loops import I64, for_range
from ..outline import emit_group_loops

KIND = {R.reduce_sum_p: "sum", R.reduce_prod_p: "prod", R.reduce_max_p: "max",
        R.reduce_min_p: "min"}


def emit_group(ctx, g) -> None:
    """Emit a GroupUnit: its elementwise ops and reductions in one loop over `g.shape`."""
    ins = list(g.reads)
    red_outs = {op.outputs[0] for op in g.reds}
    stored = [v for v in g.writes if v not in red_outs]
    outs = [(ctx.out(v), v.aval.dtype) for v in stored]
    reductions = [(KIND[op.prim], ctx.out(op.outputs[0]), op.outputs[0].aval.dtype)
                  for op in g.reds]

    def compute(em, vals):
        env = dict(zip(ins, vals))
        for op in g.ops:
            em.hint = ew.lltype(op.outputs[0].aval.dtype)
            env[op.outputs[0]] = op.prim.scalar(em, *[env[v] for v in op.inputs], **op.params)
        return [env[v] for v in stored] + [env[op.inputs[0]] for op in g.reds]

    emit_group_loops(ctx, g, ins, [ctx.operand(v) for v in ins], outs, reductions, stored,
                     compute)  # inline, or one function per distinct loop (outline.py)
    ctx.stats["loops"] = ctx.stats.get("loops", 0) + 1
    if len(g.ops) + len(g.reds) > 1:
        ctx.stats["fused ops"] = ctx.stats.get("fused ops", 0) + len(g.ops) + len(g.reds)


def lower_elementwise(ctx, op) -> None:
    """The generic elementwise lowering (the planner normally batches ops into groups)."""
    from ..plan import GroupUnit
    g = GroupUnit(op, shape=op.outputs[0].aval.shape, ops=[op], open=False)
    g.reads, g.writes = list(dict.fromkeys(op.inputs)), list(op.outputs)
    emit_group(ctx, g)


def _lower_reduction(ctx, op) -> None:
    from ..plan import GroupUnit
    g = GroupUnit(op, shape=op.inputs[0].aval.shape, reds=[op], open=False,
                  red_axes=tuple(op.params["axes"]))
    g.reads, g.writes = [op.inputs[0]], list(op.outputs)
    emit_group(ctx, g)


for _p in KIND:
    lowers(_p, family="reduce")(_lower_reduction)


def _lower_arg(better: str):
    def lower(ctx, op) -> None:
        b, (x,), out = ctx.b, op.inputs, op.outputs[0]
        axis = op.params["axis"]
        shape = x.aval.shape
        if axis is None:
            outer, n, inner = 1, int(np.prod(shape, dtype=np.int64)), 1
        else:
            outer = int(np.prod(shape[:axis], dtype=np.int64))
            n, inner = shape[axis], int(np.prod(shape[axis + 1:], dtype=np.int64))
        dt, xp, op_ = x.aval.dtype, ctx.ptr(x), ctx.out(out)
        em = ew.Emitter(b, 1)
        with b.goto_entry_block():
            best, where = b.alloca(ew.lltype(dt)), b.alloca(I64)
        with for_range(b, 0, outer, name="o") as o:
            with for_range(b, 0, inner, name="j") as j:
                base = b.add(b.mul(o, ir.Constant(I64, n * inner)), j)
                b.store(ew._load(b, xp, base, dt, 1), best)
                b.store(ir.Constant(I64, 0), where)
                with for_range(b, 1, n, name="k") as k:
                    v = ew._load(b, xp, b.add(base, b.mul(k, ir.Constant(I64, inner))), dt, 1)
                    cur = b.load(best)
                    take = em.cmp(better, v, cur)
                    if dt.kind == "f":  # the first NaN wins, as in numpy
                        take = b.or_(take, b.and_(em.cmp("!=", v, v), em.cmp("==", cur, cur)))
                    b.store(b.select(take, v, cur), best)
                    b.store(b.select(take, k, b.load(where)), where)
                ew._store(b, b.load(where), op_, b.add(b.mul(o, ir.Constant(I64, inner)), j),
                          np.dtype(np.int64))
    return lower


lowers(R.argmax_p)(_lower_arg(">"))
lowers(R.argmin_p)(_lower_arg("<"))
