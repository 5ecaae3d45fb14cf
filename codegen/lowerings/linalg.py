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
from .. import threads
from ..layout import Layout
from ..loops import I64, PTR, for_range
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

    blocks = threads.batches(nb, m * n * k, blas.uses_blas(dt, m, n, k))
    if nb == 1:
        one(None)
    elif blocks is None:
        with for_range(b, 0, nb, name="batch") as i:
            one(i)
    else:  # Note [Threads in kernels]: blocks of whole products on a team
        kinds.add(_batched(ctx, blocks, dt, elem, (pa, pb, pc), (m, n, k), ta, tb))
    for kind in kinds:
        ctx.stats[f"matmul ({kind})"] = ctx.stats.get(f"matmul ({kind})", 0) + 1


def _batched(ctx, blocks, dt, elem, ptrs, mnk, ta, tb) -> str:
    """Run a batch of products (a, b, c pointers `ptrs`) as `blocks` (first, count) of whole
    products, one internal function of the module per count; returns "blas" or "loops"."""
    m, n, k = mnk

    def function(count):
        flags = ("t" if ta else "n") + ("t" if tb else "n")
        name = f"llgrad.mmbatch.{dt}.{m}x{n}x{k}.{flags}.{count}"
        fn = ctx.module.globals.get(name)
        if fn is None:
            fn = ir.Function(ctx.module, ir.FunctionType(ir.VoidType(), [PTR] * 3), name)
            fn.linkage = "internal"
            fn.attributes.add("nounwind")
            for arg in fn.args:
                arg.add_attribute("noalias")
            b = ir.IRBuilder(fn.append_basic_block("entry"))
            with for_range(b, 0, count, name="batch") as i:
                a_i, b_i, c_i = (b.gep(p, [b.mul(i, ir.Constant(I64, size))], inbounds=True,
                                       source_etype=elem)
                                 for p, size in zip(fn.args, (m * k, k * n, m * n)))
                blas.emit_matmul(b, dt, a_i, b_i, c_i, m, n, k, trans_a=ta, trans_b=tb)
            b.ret_void()
        return fn
    item = 8 if dt == "f64" else 4
    threads.run_blocks(ctx, list(ptrs), [m * k * item, k * n * item, m * n * item], [0, 0, 0],
                       blocks, function)
    return "blas" if blas.uses_blas(dt, m, n, k) else "loops"
