"""Indexing: getitem (basic keys are views; integer-array keys are gathers), scatter_add (its
transpose: zero, then add at the gathered positions, duplicates accumulate as np.add.at),
index_put (copy, then store at the positions; the last duplicate wins), and the windows of
run-time length, dynamic_window and window_update.

Keys follow runtime/ops/index.py. Advanced indexing follows numpy: integers count as advanced
indices when arrays are present, and the broadcast index dimensions replace the advanced
entries in place when those are adjacent, else go first. Negative indices wrap; every index
array is bounds-checked before it is used, as numpy does (Note [Index checks]).
"""
from __future__ import annotations

import numpy as np
from llvmlite import ir

from llgrad.runtime.ops import index as X
from llgrad.runtime.ops import window as W

from .. import elementwise as ew
from ..layout import Layout, contiguous_strides
from ..loops import I64, for_range, loop_nest
from ..registry import lowers, view
from .shape import copy_layout

# Note [Index checks]
# numpy raises IndexError for an index outside -n..n-1 of its axis; compiled code must too,
# and never read or write outside an array (issue 10). Every indexing lowering (getitem,
# scatter_add, index_put, and codegen's accumulate) goes through `_index_map`, whose `_Checks`
# test each index-array operand. A 0-d index (the loop case, `x[i + 1]`) is one unsigned
# compare (`i + n <u 2n`) before the loops. A larger array is tested inside the op's own
# loop, as it is read: a flag collects the result (an OR, vectorised with the loop; LLVM keeps
# its masked gathers) and a bad index is replaced by 0 so the access stays inside the array;
# after the loop, a set flag sends the kernel down a cold pass that finds the first bad
# element and fails there (`ctx.fail_if`, Note [Native errors]). 0-d indices are examined
# first, then arrays in key order, elements in order: the index reported is the one numpy
# names (see `_Checks` for empty results). A separate pass
# before the loop, the other way, cost a read of the whole index array (+24% on a 1e6-element
# gather from a small table; the fused test costs ~9%).
# Checks that cannot fail are not emitted: codegen/ranges.py bounds int values (Note [Integer
# ranges]: constants, loop counters and sums of them, `x[i + 1]` for i in range(n - 1), the
# reverse sweep's `n - 1 - k`, induction counters such as the GMM's `pos += 1`, tapes), and
# an index proven non-negative is not wrapped either (a proven `i >= 0` leaves one unsigned
# compare `i <u n` where a check is needed); LLVM removes more. Nor is a check already made in
# the same or an enclosing region (`ctx.checked`, scoped by _emit_block: the backward's
# scatter at the forward gather's indices), or one of an op AD marked `checked`: the reverse
# sweep's replay of an index the forward checked (Note [Replayed indices] in
# transform/ad.py). `inspect().stats` counts the "index checks" and "index wraps" emitted.
# The windows of run-time length (dynamic_window, window_update) need no check: they are
# total, an entry whose position falls outside the axis is skipped (see their lowerings).


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
    """(out_shape, f, done): f(builder, out_indices) is x's element offset (root-relative);
    call done() after the loops that call f: it stops the kernel if an index was out of
    bounds (Note [Index checks]; `op` names the line the error reports)."""
    entries = _expand(key, len(x_lay.shape))
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
    real = [k for k, e in enumerate(entries) if e[0] != "n"]  # entry -> x axis
    checks = _Checks(ctx, op, [(k, idx_values[e[1]], real.index(k), x_lay.shape[real.index(k)])
                               for k, e in enumerate(entries) if e[0] == "a"],
                     np.prod(bshape) > 0, np.prod(out_shape) > 0)
    ptrs = [ctx.ptr(v) for v in idx_values]

    def offset(b, oidx):
        total = ir.Constant(I64, x_lay.offset)
        bpos = {d[1]: i for d, i in zip(dims, oidx) if d[0] == "b"}
        for d, i in zip(dims, oidx):
            if d[0] == "s":
                pos = b.add(ir.Constant(I64, d[2]), b.mul(i, ir.Constant(I64, d[3])))
                total = b.add(total, b.mul(pos, ir.Constant(I64, x_lay.strides[d[1]])))
        ax = 0
        for k, e in enumerate(entries):
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
                iv = checks.index(k, ew.Emitter(b, 1).cast(iv, np.int64), dim)
                total = b.add(total, b.mul(iv, ir.Constant(I64, stride)))
            ax += 1
        return total

    return out_shape, offset, checks.finish


def _accepts_x(op, i, layout) -> bool:
    return i == 0


@lowers(X.getitem_p, accepts=_accepts_x)
def _lower_getitem(ctx, op) -> None:
    x, out = op.inputs[0], op.outputs[0]
    lay = ctx.layout(x)
    shape, offset, done = _index_map(ctx, op, lay, op.params["key"], op.inputs[1:])
    b, dt = ctx.b, out.aval.dtype
    src, dst = ctx.offset_ptr(Layout(lay.root, lay.shape, lay.strides, 0)), ctx.out(out)
    with loop_nest(b, shape, name="g") as idx:
        flat = _flat(b, idx, shape)
        ew._store(b, ew._load(b, src, offset(b, idx), dt, 1), dst, flat, dt)
    done()


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
    shape, offset, done = _index_map(ctx, op, dense, key, idx)
    sp = ctx.ptr(src)
    em = ew.Emitter(b, 1)
    with loop_nest(b, shape, name="s") as oi:
        at = offset(b, oi)
        v = ew._load(b, sp, _flat(b, oi, shape), dt, 1)
        if accumulate:
            v = em.add(ew._load(b, dst, at, dt, 1), v)
        ew._store(b, v, dst, at, dt)
    done()


@lowers(X.scatter_add_p)
def _lower_scatter_add(ctx, op) -> None:
    g, out = op.inputs[0], op.outputs[0]
    _fill_zero(ctx, ctx.out(out), out.aval.shape, out.aval.dtype)
    _put(ctx, op, out, out.aval.shape, g, op.params["key"], op.inputs[1:], accumulate=True)


@lowers(X.index_put_p, accepts=lambda op, i, layout: i == 0, updates=0)
def _lower_index_put(ctx, op) -> None:
    x, v, out = op.inputs[0], op.inputs[1], op.outputs[0]
    if not ctx.plan.same_storage(x, out):  # else in place: Note [Updates in place]
        copy_layout(ctx, ctx.layout(x), ctx.out(out), out.aval.dtype)
        ctx.copied()
    _put(ctx, op, out, out.aval.shape, v, op.params["key"], op.inputs[2:], accumulate=False)


# ---- windows of run-time length (runtime/ops/window.py) ------------------------------------
# Both are total, as their impls: an entry outside the length or the axis is skipped (reads
# give 0), so any start and length stay inside the arrays without a check (Note [Index
# checks]).
def _window_entry(ctx, lay: Layout, idx, axis: int, start, length, stride: int):
    """(inside, element offset in lay's root) of window entry `idx` (idx[axis] is k): inside
    when k < length and start + k * stride is in the axis; the offset is clamped into it."""
    b = ctx.b
    k = idx[axis]
    pos = b.add(start, b.mul(k, ir.Constant(I64, stride)))
    inside = b.and_(b.icmp_signed("<", k, length),
                    b.icmp_unsigned("<", pos, ir.Constant(I64, lay.shape[axis])))
    pos = b.select(inside, pos, ir.Constant(I64, 0))
    at = ir.Constant(I64, lay.offset)
    for d, (i, st) in enumerate(zip(idx, lay.strides)):
        at = b.add(at, b.mul(pos if d == axis else i, ir.Constant(I64, st)))
    return inside, at


@lowers(W.dynamic_window_p, accepts=_accepts_x)
def _lower_dynamic_window(ctx, op) -> None:
    x, start, length = op.inputs
    out, axis, stride = op.outputs[0], op.params["axis"], op.params["stride"]
    lay, shape, dt = ctx.layout(x), op.outputs[0].aval.shape, op.outputs[0].aval.dtype
    if lay.shape[axis] == 0:
        _fill_zero(ctx, ctx.out(out), shape, dt)
        return
    b, dst = ctx.b, ctx.out(out)
    src = ctx.offset_ptr(Layout(lay.root, lay.shape, lay.strides, 0))
    s0, n = ctx.load_scalar(start), ctx.load_scalar(length)
    em = ew.Emitter(b, 1)
    with loop_nest(b, shape, name="w") as idx:
        inside, at = _window_entry(ctx, lay, idx, axis, s0, n, stride)
        v = ew._load(b, src, at, dt, 1)
        ew._store(b, em.select(inside, v, em.zero(v)), dst, _flat(b, idx, shape), dt)


@lowers(W.window_update_p, accepts=lambda op, i, layout: i in (0, 1), updates=0)
def _lower_window_update(ctx, op) -> None:
    x, v, start, length = op.inputs
    out, axis, stride = op.outputs[0], op.params["axis"], op.params["stride"]
    dt = out.aval.dtype
    if not ctx.plan.same_storage(x, out):  # else in place: Note [Updates in place]
        copy_layout(ctx, ctx.layout(x), ctx.out(out), dt)
        ctx.copied()
    if out.aval.shape[axis] == 0:
        return
    b, vl = ctx.b, ctx.layout(v)
    dense = Layout(out, out.aval.shape, contiguous_strides(out.aval.shape))
    src = ctx.offset_ptr(Layout(vl.root, vl.shape, vl.strides, 0))
    s0, n = ctx.load_scalar(start), ctx.load_scalar(length)
    with loop_nest(b, vl.shape, name="u") as idx:
        inside, at = _window_entry(ctx, dense, idx, axis, s0, n, stride)
        with b.if_then(inside):
            from_v = ir.Constant(I64, vl.offset)
            for i, st in zip(idx, vl.strides):
                from_v = b.add(from_v, b.mul(i, ir.Constant(I64, st)))
            ew._store(b, ew._load(b, src, from_v, dt, 1), ctx.out(out), at, dt)


# ---- bounds checks (Note [Index checks]) ---------------------------------------------------
class _Checks:
    """The bounds checks of one indexing op, in numpy's order: `arrays` lists (entry, index
    array, x axis, axis size) in key order. 0-d indices come first (numpy takes them as
    integers), each one compare before the op's loops. Then the arrays, unless they broadcast
    to nothing (`indexed` false: numpy checks nothing): each gets a flag, set while the loops
    read it (`index`), and `finish` names the first bad index of the first flagged array;
    when the loops would not read them all (`visited` false: an empty slice beside them, and
    numpy still checks), they are checked before the loops instead."""

    def __init__(self, ctx, op, arrays, indexed: bool, visited: bool):
        self.ctx, self.op, self.flags = ctx, op, {}
        b, i1 = ctx.b, ir.IntType(1)
        self.todo, self.natural = [], set()  # natural: entries proven non-negative (no wrap)
        need = []
        for k, v, axis, n in arrays:
            known = ctx.ranges.known_range(v)
            if known is not None and (known[0] > known[1] or known[0] >= 0):
                self.natural.add(k)
            if v.aval.dtype == np.bool_ or (id(v), n) in ctx.checked or op.checked \
                    or known is not None and (known[0] > known[1] or -n <= known[0]
                                              and known[1] < n):
                continue
            if v.aval.shape and not indexed:
                continue
            ctx.checked.add((id(v), n))
            need.append((k, v, axis, n))
        ctx.stats["index checks"] = ctx.stats.get("index checks", 0) + len(need)
        wraps = sum(1 for k, v, _, _ in arrays
                    if k not in self.natural and v.aval.dtype != np.bool_)
        ctx.stats["index wraps"] = ctx.stats.get("index wraps", 0) + wraps
        for k, v, axis, n in sorted(need, key=lambda c: bool(c[1].aval.shape)):  # stable
            if not v.aval.shape or not visited or n == 0:  # n == 0: no stand-in index
                self._first_bad(v, axis, n)
                continue
            with b.goto_entry_block():
                flag = self.flags[k] = b.alloca(i1, name="index.bad")
            b.store(ir.Constant(i1, 0), flag)
            self.todo.append((flag, v, axis, n))

    def index(self, k: int, i: ir.Value, n: int) -> ir.Value:
        """Index `i` of entry `k` (an axis of size n) made non-negative (unless proven so);
        a bad one is flagged and replaced by 0, so the access stays inside the array."""
        b = self.ctx.b
        natural = k in self.natural
        wrapped = i if natural else b.select(b.icmp_signed("<", i, ir.Constant(I64, 0)),
                                             b.add(i, ir.Constant(I64, n)), i)
        flag = self.flags.get(k)
        if flag is None:
            return wrapped
        bad = b.icmp_unsigned(">=", i, ir.Constant(I64, n)) if natural else _bad(b, i, n)
        b.store(b.or_(b.load(flag, typ=ir.IntType(1)), bad), flag)
        return b.select(bad, ir.Constant(I64, 0), wrapped)

    def finish(self) -> None:
        b = self.ctx.b
        for flag, v, axis, n in self.todo:
            with b.if_then(b.load(flag, typ=ir.IntType(1)), likely=False):
                self._first_bad(v, axis, n)

    def _first_bad(self, v, axis: int, n: int) -> None:
        """Stop at the first element of `v` outside -n..n-1, with numpy's IndexError."""
        b, ptr, em = self.ctx.b, self.ctx.ptr(v), ew.Emitter(self.ctx.b, 1)
        with for_range(b, 0, int(np.prod(v.aval.shape)), name="index.first") as j:
            i = em.cast(ew._load(b, ptr, j, v.aval.dtype, 1), np.int64)
            self.ctx.fail_if(_bad(b, i, n), "index", self.op, (axis, n), i)


def _bad(b, i: ir.Value, n: int) -> ir.Value:
    """i outside -n..n-1: one unsigned compare."""
    return b.icmp_unsigned(">=", b.add(i, ir.Constant(I64, n)), ir.Constant(I64, 2 * n))
