"""Common-subexpression elimination, keyed by (primitive, inputs, params); constants by value.

Requires: any verified IR. Produces: the same IR where no two pure ops in scope compute the same
thing (an op in a nested region reuses an equal op of an enclosing region). Region ops,
tapes (which are linear buffers) and scatter_adds are never merged: the reverse sweep adds
one scatter into each of several cotangents (`a[j]` and `b[j]` read with one cotangent), and
codegen adds each in place into its sum only when the scatter has no other use (Note [In-place
accumulation] in codegen/plan.py); shared, it was a zeroed array and a whole add per sum. Leaves the dropped ops' users rewired; run
dce afterwards only to clean up nothing (cse removes the duplicates itself).
"""
from __future__ import annotations

import numpy as np

from llgrad.runtime.ops.control import constant_p
from llgrad.runtime.ops.index import scatter_add_p
from llgrad.transform import ir
from llgrad.transform.passes import Pass


def freeze(v):
    """A hashable key for an op parameter."""
    if isinstance(v, np.ndarray):
        return ("nd", v.dtype.str, v.shape, v.tobytes())
    if isinstance(v, np.dtype):
        return ("dt", v.str)
    if isinstance(v, (tuple, list)):
        return (type(v).__name__,) + tuple(freeze(x) for x in v)
    if isinstance(v, dict):
        return tuple(sorted((k, freeze(x)) for k, x in v.items()))
    if isinstance(v, (float, np.floating)):
        return ("f", np.float64(v).tobytes())  # -0.0 != 0.0, nan == nan
    return v


def key(op: ir.Op):
    if op.prim is constant_p:
        return ("constant", freeze(op.params["value"]))
    return (op.prim.name, tuple(v.id for v in op.inputs), freeze(op.params))


def _region(region: ir.Region, avail: dict, subst: dict) -> None:
    avail = dict(avail)
    kept = []
    for op in region.ops:
        op.inputs = [subst.get(v.id, v) for v in op.inputs]
        if op.regions:
            for r in op.regions:
                _region(r, avail, subst)
        elif op.prim.family != "tape" and op.prim is not scatter_add_p:
            k = key(op)
            prev = avail.get(k)
            if prev is not None:
                for o, p in zip(op.outputs, prev):
                    subst[o.id] = p
                continue
            avail[k] = op.outputs
        kept.append(op)
    region.ops = kept
    region.results = [subst.get(v.id, v) for v in region.results]


def _cse(fn: ir.Function) -> ir.Function:
    _region(fn.body, {}, {})
    return fn


cse = Pass("cse", _cse, __doc__)
