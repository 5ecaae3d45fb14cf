"""Shape primitives: reshape, transpose and broadcast_to are views (no code, see Note [Views]
in plan.py) and become strided copies only when a consumer needs dense memory; concatenate
copies each input into its slab of the result.
"""
from __future__ import annotations

from llgrad.runtime.ops import shape as S

import numpy as np
from llvmlite import ir

from .. import elementwise as ew
from ..layout import Layout, collapse, contiguous_strides
from ..loops import I64, PTR, const
from ..outline import emit_loops
from ..registry import lowers, view


def copy_layout(ctx, src: Layout, dst, dtype, dst_strides=None) -> None:
    """Copy the elements of `src` (any strides) to `dst` (dense, or `dst_strides`): one
    memcpy when both are dense in the same order, else a loop (outline.py: one function per
    distinct strided copy of the module)."""
    if src.size == 0:
        return
    strides = contiguous_strides(src.shape) if dst_strides is None else dst_strides
    dims, (s_src, s_dst) = collapse(src.shape, src.strides, strides)
    if len(dims) == 1 and s_src == s_dst == [1]:
        size = ir.Constant(I64, dims[0] * np.dtype(dtype).itemsize)
        memcpy = ctx.module.declare_intrinsic("llvm.memcpy", [PTR, PTR, I64])
        ctx.b.call(memcpy, [dst, ctx.offset_ptr(src), size, ir.Constant(ir.IntType(1), 0)])
        return
    operand = ew.Operand(ptr=ctx.offset_ptr(src), strides=src.strides, dtype=dtype)
    emit_loops(ctx, src.shape, [operand], [(dst, dtype, strides)], lambda em, vals: vals)


def _lower_copy(ctx, op) -> None:
    """A view op whose result must be dense (reshape of a strided view)."""
    x, out = op.inputs[0], op.outputs[0]
    copy_layout(ctx, ctx.layout(x), ctx.out(out), out.aval.dtype)


def _accepts_all(op, i, layout) -> bool:
    return True


@view(S.reshape_p)
def _reshape_view(op, layouts):
    return layouts[0].reshape(op.params["shape"])


@view(S.transpose_p)
def _transpose_view(op, layouts):
    return layouts[0].transpose(op.params["perm"])


@view(S.broadcast_to_p)
def _broadcast_view(op, layouts):
    return layouts[0].broadcast(op.params["shape"])


# A reshape that is not a view copies in the input's row-major order: the same elements.
lowers(S.reshape_p, accepts=_accepts_all)(_lower_copy)


@lowers(S.concatenate_p, accepts=_accepts_all)
def _lower_concatenate(ctx, op) -> None:
    out, axis = op.outputs[0], op.params["axis"]
    dst_strides = contiguous_strides(out.aval.shape)
    start = 0
    for x in op.inputs:
        lay = ctx.layout(x)
        if lay.size:
            dst = ctx.b.gep(ctx.out(out), [const(start * dst_strides[axis])],
                            inbounds=True, source_etype=ew.memtype(out.aval.dtype))
            copy_layout(ctx, lay, dst, out.aval.dtype, dst_strides)
        start += x.aval.shape[axis]
