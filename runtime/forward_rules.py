"""Forward-mode tangent rules, one per primitive family, read off the declarations (Note
[Forward mode rules] in transform/jvp.py). Written with `llgrad.runtime.ops`, so the same
rule serves the IR transformation (transform/jvp.py) and eager dual tensors
(runtime/autograd/forward_ad.py); each gives its own rule of last resort, `transpose`."""
from __future__ import annotations

from llgrad.runtime import ops
from llgrad.runtime.ops._util import dtype_of, shape_of


def tangents(prim, ins: list, tins: list, outs: list, params: dict, zeros, transpose) -> list:
    """The tangents of `prim`'s outputs (None where zero) given its inputs `ins`, their
    tangents `tins` (None where zero), its outputs `outs`.

    Args:
        zeros: `zeros(x)`, a zero tangent like value x (for `linear` ops).
        transpose: `transpose(prim, ins, tins, outs, params)`, the tangents computed by
            transposing the VJP rules (primitives with no other rule).
    """
    if prim.jvp is not None:
        return list(prim.jvp(ins, tins, outs, **params))
    if prim.family == "elementwise":
        out, total = outs[0], None
        for i, t in enumerate(tins):
            if t is None:
                continue
            if shape_of(t) != shape_of(out):
                t = ops.broadcast_to(t, shape_of(out))
            if dtype_of(t) != dtype_of(out):
                t = ops.astype(t, dtype_of(out))
            c = prim.vjp_rule(i)(t, out, *ins, **params)
            if c is not None:
                total = c if total is None else ops.add(total, c)
        return [total]
    if prim.linear == "linear":
        args = [t if t is not None else (zeros(x) if dtype_of(x).kind == "f" else x)
                for x, t in zip(ins, tins)]
        out = prim.bind(*args, **params)
        return list(out) if isinstance(out, tuple) else [out]
    if prim.linear == "multilinear":
        total = None
        for i, t in enumerate(tins):
            if t is not None:
                c = prim.bind(*ins[:i], t, *ins[i + 1:], **params)
                total = c if total is None else ops.add(total, c)
        return [total]
    return transpose(prim, ins, tins, outs, params)
