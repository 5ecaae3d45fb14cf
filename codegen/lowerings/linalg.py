"""matmul: (..., m, k) @ (..., k, n) with equal batch dims, one gemm (BLAS for large products,
a loop nest for small ones; codegen/blas.py) per batch element, batches in a loop.

An operand that is a transposed view of dense memory (`swapaxes(b, -1, -2)` in VJP rules) is
passed to gemm with its transpose flag instead of being copied.
"""
from __future__ import annotations

import numpy as np
from llvmlite import ir

from llgrad.runtime.errors import UnsupportedError
from llgrad.runtime.ops import linalg as L

from .. import blas
from .. import elementwise as ew
from ..layout import Layout
from ..loops import I64, for_range
from ..registry import lowers

_GEMM_DTYPE = {np.dtype(np.float64): "f64", np.dtype(np.float32): "f32"}


def _transposed(lay: Layout) -> bool:
    """Dense memory read with the last two axes swapped (batch axes dense)."""
    if len(lay.shape) < 2:
        return False
    *batch, r, c = lay.shape
    swapped = Layout(lay.root, (*batch, c, r), (*lay.strides[:-2], lay.strides[-1],
                                                 lay.strides[-2]), lay.offset)
    return swapped.contiguous


def _accepts(op, i, lay) -> bool:
    return _transposed(lay)


@lowers(L.matmul_p, accepts=_accepts)
def _lower_matmul(ctx, op) -> None:
    a, b_, out = op.inputs[0], op.inputs[1], op.outputs[0]
    dt = _GEMM_DTYPE.get(np.dtype(out.aval.dtype))
    if dt is None:
        raise UnsupportedError(f"matmul of {out.aval.dtype} arrays is not compiled", loc=op.loc,
                               fix="cast the operands to float64 or float32")
    *batch, m, k = a.aval.shape
    n = b_.aval.shape[-1]
    la, lb = ctx.layout(a), ctx.layout(b_)
    ta, tb = not la.contiguous, not lb.contiguous
    pa, pb, pc = ctx.offset_ptr(la), ctx.offset_ptr(lb), ctx.out(out)
    nb = int(np.prod(batch, dtype=np.int64))
    b = ctx.b
    elem = ew.memtype(out.aval.dtype)
    if m * n == 0:
        return
    if k == 0:
        ew.emit_loops(b, out.aval.shape, [ew.Operand(value=0.0)], [(pc, out.aval.dtype)],
                      lambda em, v: v)
        return
    kinds = set()

    def one(i):
        def at(p, size):
            if i is None:
                return p
            return b.gep(p, [b.mul(i, ir.Constant(I64, size))], inbounds=True,
                         source_etype=elem)
        kinds.add(blas.emit_matmul(b, dt, at(pa, m * k), at(pb, k * n), at(pc, m * n),
                                   m, n, k, trans_a=ta, trans_b=tb))

    if nb == 1:
        one(None)
    else:
        with for_range(b, 0, nb, name="batch") as i:
            one(i)
    for kind in kinds:
        ctx.stats[f"matmul ({kind})"] = ctx.stats.get(f"matmul ({kind})", 0) + 1
