"""Replace each custom_vjp op by its values (the forward of a custom derivative rule).

Requires: any verified IR. Produces: the same IR without custom_vjp ops (uses of their outputs
read the values they yield); their bwd regions go with them, and dce drops the residuals
nothing else reads. Run where no AD follows: pipeline.optimize with fusion, the codegen form.
"""
from __future__ import annotations

from llgrad.runtime.ops.control import custom_vjp_p
from llgrad.transform import ir
from llgrad.transform.control import custom_parts
from llgrad.transform.passes import Pass


def _region(region: ir.Region, subst: dict) -> None:
    kept = []
    for op in region.ops:
        op.inputs = [subst.get(v.id, v) for v in op.inputs]
        if op.prim is custom_vjp_p:
            values = custom_parts(op)[2]
            subst.update((o.id, v) for o, v in zip(op.outputs, values))
            continue
        for r in op.regions:
            _region(r, subst)
        kept.append(op)
    region.ops = kept
    region.results = [subst.get(v.id, v) for v in region.results]


def _strip(fn: ir.Function) -> ir.Function:
    _region(fn.body, {})
    return fn


strip_custom_vjp = Pass("strip_custom_vjp", _strip, __doc__)
