"""Indexing: getitem (basic keys are views; integer-array keys are gathers), scatter_add (its
transpose: zero, then add at the gathered positions, duplicates accumulate as np.add.at) and
index_put (copy, then store at the positions; the last duplicate wins).

Keys follow runtime/ops/index.py. Advanced indexing follows numpy: integers count as advanced
indices when arrays are present, and the broadcast index dimensions replace the advanced
entries in place when those are adjacent, else go first. Negative indices wrap; every index
array is bounds-checked before it is used, as numpy does (Note [Index checks]).
"""
from __future__ import annotations

import numpy as np
from llvmlite import ir

from llgrad.runtime.ops import index as X
from llgrad.runtime.ops.control import constant_p, for_loop_p
from llgrad.runtime.ops.elementwise import add_p, sub_p

from .. import elementwise as ew
from ..layout import Layout, contiguous_strides
from ..loops import I64, for_range, loop_nest
from ..plan import ControlUnit
from ..registry import lowers, view
from .shape import copy_layout

# Note [Index checks]
# numpy raises IndexError for an index outside -n..n-1 of its axis; compiled code must too,
# never read or write outside the array (issue 10). `_index_map`, which every indexing
# lowering (getitem, scatter_add, index_put, and codegen's accumulate) goes through, checks
# each index-array operand once, before the loops that use it, in numpy's order (array by
# array, elements in order, so the first offending index is the one numpy names): a 0-d index
# is one unsigned compare (`i + n <u 2n`); a larger array is a branch-free OR over its
# elements (vectorised by LLVM) and, only when that finds one, a second pass that stops at the
# first bad element. A failed check leaves through `ctx.fail_if` (Note [Native errors]).
# Checks that cannot fail are not emitted: `_known_range` follows constants, the counters of
# for-loops with constant bounds, and constant offsets from them (`x[i + 1]` for i in
# range(n - 1)); LLVM removes more (a counter compared with its own loop bound).


@view(X.getitem_p)
def _getitem_view(op, layouts):
    key = op.params["key"]
    return None if X.has_arrays(key) else layouts[0].index(key)


def _expand(key, ndim):
    n_real = sum(1 for e in key if e[0] in "isa")
    out = []
    for e in key:
        out += [("s", None, None, None)] * (ndim - n_real) if e[0] == "e" else [e]
    return out + [("s", None, None, None)] * (ndim - sum(1 for e in out if e[0] in "isa"))


def _index_map(ctx, op, x_lay: Layout, key, idx_values):
    """(out_shape, f) where f(builder, out_indices) is x's element offset (root-relative).
    Emits the bounds checks of the index arrays first (Note [Index checks]; `op` names the
    line an error reports)."""
    entries = _expand(key, len(x_lay.shape))
    ax = 0
    for e in entries:
        if e[0] == "a":
            _check_indices(ctx, op, idx_values[e[1]], ax, x_lay.shape[ax])
        ax += e[0] != "n"
    bshape = tuple(np.broadcast_shapes(*(v.aval.shape for v in idx_values))) \
        if idx_values else ()
    adv_pos = [k for k, e in enumerate(entries) if e[0] in "ia"]
    adjacent = adv_pos == list(range(adv_pos[0], adv_pos[-1] + 1)) if adv_pos else True
    dims, axis = [], 0   # per output dim: ("s", x_axis, start, step, n) | ("n",) | ("b", j)
    block = [("b", j) for j in range(len(bshape))]
    if not adjacent:
        dims += block
    for k, e in enumerate(entries):
        if e[0] == "n":
            dims.append(("n",))
            continue
        if e[0] == "s":
            start, stop, step = slice(*e[1:]).indices(x_lay.shape[axis])
            dims.append(("s", axis, start, step, len(range(start, stop, step))))
        elif adjacent and k == adv_pos[0]:
            dims += block
        axis += 1
    out_shape = tuple(d[4] if d[0] == "s" else 1 if d[0] == "n" else bshape[d[1]]
                      for d in dims)
    ptrs = [ctx.ptr(v) for v in idx_values]

    def offset(b, oidx):
        total = ir.Constant(I64, x_lay.offset)
        bpos = {d[1]: i for d, i in zip(dims, oidx) if d[0] == "b"}
        for d, i in zip(dims, oidx):
            if d[0] == "s":
                pos = b.add(ir.Constant(I64, d[2]), b.mul(i, ir.Constant(I64, d[3])))
                total = b.add(total, b.mul(pos, ir.Constant(I64, x_lay.strides[d[1]])))
        ax = 0
        for e in entries:
            if e[0] == "n":
                continue
            dim, stride = x_lay.shape[ax], x_lay.strides[ax]
            if e[0] == "i":
                total = b.add(total, ir.Constant(I64, (e[1] % dim) * stride))
            elif e[0] == "a":
                v = idx_values[e[1]]
                ishape = v.aval.shape
                lead = len(bshape) - len(ishape)
                flat = ir.Constant(I64, 0)
                for j, (n, s) in enumerate(zip(ishape, contiguous_strides(ishape))):
                    if n != 1:
                        flat = b.add(flat, b.mul(bpos[lead + j],
                                                 ir.Constant(I64, s)))
                iv = ew._load(b, ptrs[e[1]], flat, v.aval.dtype, 1)
                iv = ew.Emitter(b, 1).cast(iv, np.int64)
                neg = b.icmp_signed("<", iv, ir.Constant(I64, 0))
                iv = b.select(neg, b.add(iv, ir.Constant(I64, dim)), iv)
                total = b.add(total, b.mul(iv, ir.Constant(I64, stride)))
            ax += 1
        return total

    return out_shape, offset


def _accepts_x(op, i, layout) -> bool:
    return i == 0


@lowers(X.getitem_p, accepts=_accepts_x)
def _lower_getitem(ctx, op) -> None:
    x, out = op.inputs[0], op.outputs[0]
    lay = ctx.layout(x)
    shape, offset = _index_map(ctx, op, lay, op.params["key"], op.inputs[1:])
    b, dt = ctx.b, out.aval.dtype
    src, dst = ctx.offset_ptr(Layout(lay.root, lay.shape, lay.strides, 0)), ctx.out(out)
    with loop_nest(b, shape, name="g") as idx:
        flat = _flat(b, idx, shape)
        ew._store(b, ew._load(b, src, offset(b, idx), dt, 1), dst, flat, dt)


def _flat(b, idx, shape):
    flat = ir.Constant(I64, 0)
    for i, s in zip(idx, contiguous_strides(shape)):
        flat = b.add(flat, b.mul(i, ir.Constant(I64, s)))
    return flat


def _fill_zero(ctx, ptr, shape, dtype) -> None:
    ew.emit_loops(ctx.b, shape, [ew.Operand(value=0)], [(ptr, dtype)], lambda em, v: v)


def _put(ctx, op, dst_value, dst_shape, src, key, idx, accumulate: bool) -> None:
    b, dt = ctx.b, src.aval.dtype
    dst = ctx.out(dst_value)
    dense = Layout(dst_value, tuple(dst_shape), contiguous_strides(dst_shape))
    if not idx:  # basic key: unique positions, a strided copy into the view
        target = dense.index(key)
        base = b.gep(dst, [ir.Constant(I64, target.offset)], inbounds=True,
                     source_etype=ew.memtype(dt))
        copy_layout(ctx, ctx.layout(src), base, dt, target.strides)
        return
    shape, offset = _index_map(ctx, op, dense, key, idx)
    sp = ctx.ptr(src)
    em = ew.Emitter(b, 1)
    with loop_nest(b, shape, name="s") as oi:
        at = offset(b, oi)
        v = ew._load(b, sp, _flat(b, oi, shape), dt, 1)
        if accumulate:
            v = em.add(ew._load(b, dst, at, dt, 1), v)
        ew._store(b, v, dst, at, dt)


@lowers(X.scatter_add_p)
def _lower_scatter_add(ctx, op) -> None:
    g, out = op.inputs[0], op.outputs[0]
    _fill_zero(ctx, ctx.out(out), out.aval.shape, out.aval.dtype)
    _put(ctx, op, out, out.aval.shape, g, op.params["key"], op.inputs[1:], accumulate=True)


@lowers(X.index_put_p, accepts=lambda op, i, layout: i == 0)
def _lower_index_put(ctx, op) -> None:
    x, v, out = op.inputs[0], op.inputs[1], op.outputs[0]
    copy_layout(ctx, ctx.layout(x), ctx.out(out), out.aval.dtype)
    _put(ctx, op, out, out.aval.shape, v, op.params["key"], op.inputs[2:], accumulate=False)


# ---- bounds checks (Note [Index checks]) ---------------------------------------------------
def _check_indices(ctx, op, v, axis: int, n: int) -> None:
    """Stop the kernel with numpy's IndexError unless every element of index array `v` lies
    in -n..n-1."""
    if v.aval.dtype == np.bool_:
        return
    known = _known_range(ctx, v)
    if known is not None and (known[0] > known[1] or -n <= known[0] and known[1] < n):
        return
    b, dt, size = ctx.b, v.aval.dtype, int(np.prod(v.aval.shape))
    ptr, em = ctx.ptr(v), ew.Emitter(ctx.b, 1)

    def element(j):
        return em.cast(ew._load(b, ptr, j, dt, 1), np.int64)

    def bad(i):
        return b.icmp_unsigned(">=", b.add(i, ir.Constant(I64, n)), ir.Constant(I64, 2 * n))

    if size == 1:
        i = element(ir.Constant(I64, 0))
        ctx.fail_if(bad(i), "index", op, (axis, n), i)
        return
    i1 = ir.IntType(1)
    with b.goto_entry_block():
        found = b.alloca(i1, name="index.bad")
    b.store(ir.Constant(i1, 0), found)
    with for_range(b, 0, size, name="chk") as j:
        b.store(b.or_(b.load(found, typ=i1), bad(element(j))), found)
    with b.if_then(b.load(found, typ=i1), likely=False):
        with for_range(b, 0, size, name="chk.first") as j:
            i = element(j)
            ctx.fail_if(bad(i), "index", op, (axis, n), i)


def _known_range(ctx, v, depth: int = 0):
    """(lo, hi) bounding every element of int value `v`, when the IR shows it; else None."""
    op = v.op
    if op is not None and op.prim is constant_p:
        value = np.asarray(op.params["value"])
        return (int(value.min()), int(value.max())) if value.size else (0, -1)
    if op is None:
        return _counter_range(ctx, v)
    if depth < 4 and op.prim in (add_p, sub_p) and v.aval.shape == ():
        a, c = (_known_range(ctx, w, depth + 1) for w in op.inputs)
        if a is None or c is None:
            return None
        if op.prim is add_p:
            return a[0] + c[0], a[1] + c[1]
        return a[0] - c[1], a[1] - c[0]
    return None


def _counter_range(ctx, v):
    loops = getattr(ctx, "_counters", None)
    if loops is None:
        loops = ctx._counters = {u.blocks[0].params[0]: u.op for u in ctx.plan.all_units()
                                 if isinstance(u, ControlUnit) and u.op.prim is for_loop_p}
    op = loops.get(v)
    if op is None:
        return None
    from .control import _const_int
    start, stop, step = (_const_int(w) for w in op.inputs[:3])
    if None in (start, stop, step):
        return None
    steps = range(start, stop, step)
    return (min(steps[0], steps[-1]), max(steps[0], steps[-1])) if steps else (0, -1)
