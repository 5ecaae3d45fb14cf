"""Loop tapes in codegen (tape_new/push/get): growable buffers behind a header in the
kernel's tape area, ragged ones with a row count per example (Note [Tapes in codegen] in
plan.py, Note [Ragged tapes] in transform/vmap_control.py), set up and kept or freed around a
call (`init_tapes`, `keep_tapes`)."""
from __future__ import annotations

from collections.abc import Callable

import numpy as np
from llvmlite import ir

from llgrad.runtime.ops.control import tape_get_p, tape_new_p, tape_push_p

from .. import elementwise as ew
from ..abi import TAPE_HEADER
from ..layout import contiguous_strides
from ..loops import I64, PTR, for_range, load, store
from ..registry import lowers
from .control import I1, _copy, _libc

_DYNAMIC_ROWS = 16


def _realloc(b):
    return _libc(b.module, "realloc", PTR, [PTR, I64])


def _header(ctx, at: int, k: int) -> tuple[ir.Value, ir.Value]:
    """Pointers to tape class k's {data, capacity} in the workspace (Note [Tapes in codegen])."""
    b, ws = ctx.b, ctx.buffers[-1]
    return tuple(b.gep(ws, [ir.Constant(I64, at + TAPE_HEADER * k + 8 * j)], inbounds=True,
                       source_etype=ir.IntType(8)) for j in (0, 1))


def init_tapes(ctx, at: int) -> None:
    """Allocas {data, rows, capacity} for every tape class: the buffer and capacity the
    previous call left in the workspace's tape headers at `at` (zero at first), no rows."""
    b = ctx.b
    for i, k in enumerate(sorted(ctx.plan.tape_rows)):
        data, n, cap = b.alloca(PTR, name=f"tape{k}.data"), b.alloca(I64, name=f"tape{k}.n"), \
            b.alloca(I64, name=f"tape{k}.cap")
        kept_data, kept_cap = _header(ctx, at, i)
        b.store(b.load(kept_data, typ=PTR), data)
        b.store(ir.Constant(I64, 0), n)
        b.store(b.load(kept_cap, typ=I64), cap)
        ctx.tapes[k] = (data, n, cap)
        if k in ctx.plan.tape_ragged:  # a row count per column (Note [Ragged tapes])
            cols = _columns(ctx.plan.tape_rows[k][0], ctx.plan.tape_ragged[k])
            ctx.tape_counts[k] = b.alloca(I64, size=max(cols, 1), name=f"tape{k}.counts")


def _columns(row_shape, dims: int) -> int:
    return int(np.prod(row_shape[:dims], dtype=np.int64))


# A tape buffer larger than this is freed when the call returns rather than kept for the next.
KEEP_BYTES = 64 << 20


def keep_tapes(ctx, at: int, failed: bool = False) -> None:
    """At the kernel's exits: each tape's buffer and capacity back to the workspace's header,
    or, after a failure or for a buffer over KEEP_BYTES, freed and the header emptied."""
    b = ctx.b
    free = _libc(b.module, "free", ir.VoidType(), [PTR])
    for i, k in enumerate(sorted(ctx.tapes)):
        kept_data, kept_cap = _header(ctx, at, i)
        data, cap = b.load(ctx.tapes[k][0], typ=PTR), b.load(ctx.tapes[k][2], typ=I64)
        shape, dtype = ctx.plan.tape_rows[k]
        row_bytes = max(int(np.prod(shape, dtype=np.int64)) * dtype.itemsize, 1)
        drop = ir.Constant(ir.IntType(1), 1) if failed else \
            b.icmp_signed(">", cap, ir.Constant(I64, KEEP_BYTES // row_bytes))
        with b.if_then(drop, likely=failed):
            b.call(free, [data])
        b.store(b.select(drop, ir.Constant(PTR, None), data), kept_data)
        b.store(b.select(drop, ir.Constant(I64, 0), cap), kept_cap)


def _row(ctx, v):
    shape, dtype = ctx.plan.tape_rows[ctx.plan.storage[v][1]]
    elems = int(np.prod(shape, dtype=np.int64))
    return shape, dtype, elems, max(elems * dtype.itemsize, 1)


def _ensure(ctx, op, v, want: ir.Value, grow: Callable[[ir.Value], ir.Value]) -> None:
    """If the tape holds fewer than `want` rows, realloc it to `grow(rows held)` rows (computed
    only then); a size that overflows or a failed realloc stops the kernel with a MemoryError
    (the old buffer stays in the header, and the failure exit frees it: Note [Native
    errors])."""
    b = ctx.b
    data, _, cap = ctx.tape(v)
    _, _, _, row_bytes = _row(ctx, v)
    have = b.load(cap, typ=I64)
    with b.if_then(b.icmp_signed("<", have, want), likely=False):
        grow_to = grow(have)
        largest = ir.Constant(I64, 2 ** 63 - 1)
        over = b.icmp_unsigned(">", grow_to, ir.Constant(I64, (2 ** 63 - 1) // row_bytes))
        size = b.select(over, largest, b.mul(grow_to, ir.Constant(I64, row_bytes)))
        what = ("a loop tape (what the gradient needs from each iteration)",)
        ctx.fail_if(over, "memory", op, what, size)
        new = b.call(_realloc(b), [b.load(data, typ=PTR), size])
        ctx.fail_if(b.icmp_unsigned("==", new, ir.Constant(PTR, None)), "memory", op, what,
                    size)
        b.store(new, data)
        b.store(grow_to, cap)


@lowers(tape_new_p)
def _lower_tape_new(ctx, op) -> None:
    out = op.outputs[0]
    rows = op.params["rows"]
    want = ir.Constant(I64, max(int(rows), 1) if rows is not None else _DYNAMIC_ROWS)
    _ensure(ctx, op, out, want, lambda have: want)
    ctx.b.store(ir.Constant(I64, 0), ctx.tape(out)[1])
    counts = _counts(ctx, out)
    if counts is not None:
        with for_range(ctx.b, 0, _columns(out.aval.shape[1:], op.params["ragged"]),
                       name="col") as e:
            store(ctx.b, ir.Constant(I64, 0), counts, e)


def _counts(ctx, v):
    """The row counts of ragged tape `v`'s columns (an alloca of i64), or None."""
    return ctx.tape_counts.get(ctx.plan.storage[v][1])


def _grow(b):
    def grow(have):
        doubled = b.mul(have, ir.Constant(I64, 2))
        return b.select(b.icmp_signed("<", doubled, ir.Constant(I64, _DYNAMIC_ROWS)),
                        ir.Constant(I64, _DYNAMIC_ROWS), doubled)
    return grow


@lowers(tape_push_p, accepts=lambda op, i, layout: i == 0 or len(op.inputs) == 2)
def _lower_tape_push(ctx, op) -> None:
    b = ctx.b
    t, x = op.inputs[:2]
    data, n_ptr, _ = ctx.tape(t)
    shape, dtype, elems, _ = _row(ctx, t)
    n = b.load(n_ptr, typ=I64)
    _ensure(ctx, op, t, b.add(n, ir.Constant(I64, 1)), _grow(b))
    if len(op.inputs) == 3:
        return _push_ragged(ctx, op, n)
    row = b.gep(b.load(data, typ=PTR), [b.mul(n, ir.Constant(I64, elems))], inbounds=True,
                source_etype=ew.memtype(dtype))
    if x.aval.shape == ():
        ew._store(b, ctx.load_scalar(x), row, ir.Constant(I64, 0), dtype)
    else:
        _copy(ctx, x, row)
    b.store(b.add(n, ir.Constant(I64, 1)), n_ptr)


def _push_ragged(ctx, op, n) -> None:
    """Column e of x, where the mask holds, to column e's next row (Note [Ragged tapes]);
    the header's row count becomes the largest column's."""
    b = ctx.b
    t, x, mask = op.inputs
    data, n_ptr, _ = ctx.tape(t)
    shape, dtype, elems, _ = _row(ctx, t)
    cols = _columns(shape, len(mask.aval.shape))
    sub, mem = elems // cols, ew.memtype(dtype)
    size = ir.Constant(I64, sub * dtype.itemsize)
    counts, base = _counts(ctx, t), b.load(data, typ=PTR)
    xs, ms = ctx.ptr(x), ctx.ptr(mask)
    memcpy = ctx.module.declare_intrinsic("llvm.memcpy", [PTR, PTR, I64])
    with for_range(b, 0, cols, name="col") as e:
        with b.if_then(ew._load(b, ms, e, np.bool_, 1)):
            c = load(b, counts, e, I64)
            at = b.add(b.mul(c, ir.Constant(I64, elems)), b.mul(e, ir.Constant(I64, sub)))
            b.call(memcpy, [b.gep(base, [at], inbounds=True, source_etype=mem),
                            b.gep(xs, [b.mul(e, ir.Constant(I64, sub))], inbounds=True,
                                  source_etype=mem), size, ir.Constant(I1, 0)])
            c1 = b.add(c, ir.Constant(I64, 1))
            store(b, c1, counts, e)
            held = b.load(n_ptr, typ=I64)
            b.store(b.select(b.icmp_signed(">", c1, held), c1, held), n_ptr)


@lowers(tape_get_p)
def _lower_tape_get(ctx, op) -> None:
    b = ctx.b
    t, k = op.inputs
    out = op.outputs[0]
    data = ctx.tape(t)[0]
    shape, dtype, elems, _ = _row(ctx, t)
    counts = _counts(ctx, t)
    if k.aval.shape or counts is not None:
        return _gather(ctx, op, counts)
    row = b.gep(b.load(data, typ=PTR), [b.mul(ctx.load_scalar(k), ir.Constant(I64, elems))],
                inbounds=True, source_etype=ew.memtype(dtype))
    if out.aval.shape == ():
        ctx.store_scalar(ew._load(b, row, ir.Constant(I64, 0), dtype, 1), out)
    else:
        ew.emit_loops(b, shape, [ew.Operand(ptr=row, strides=contiguous_strides(shape),
                                            dtype=dtype)],
                      [(ctx.out(out), dtype)], lambda em, vals: vals)


def _gather(ctx, op, counts) -> None:
    """Column e of row k[e] (k 0-d: of row k) of a batched tape, zero where column e holds
    no such row: its count (a ragged tape) or the tape's rows (Note [Ragged tapes]). The
    columns are the leading k.ndim dims of a row (k 0-d: the ragged tape's)."""
    b = ctx.b
    t, k = op.inputs
    data, n_ptr, _ = ctx.tape(t)
    shape, dtype, elems, _ = _row(ctx, t)
    dims = len(k.aval.shape) or ctx.plan.tape_ragged[ctx.plan.storage[t][1]]
    cols = _columns(shape, dims)
    sub = elems // cols
    base, dst = b.load(data, typ=PTR), ctx.out(op.outputs[0])
    ks = ctx.ptr(k) if k.aval.shape else None
    row = ctx.load_scalar(k) if ks is None else None
    rows = b.load(n_ptr, typ=I64)
    zero = ir.Constant(ew.lltype(dtype), 0 if dtype.kind != "f" else 0.0)
    with for_range(b, 0, cols, name="col") as e:
        r = row if ks is None else load(b, ks, e, I64)
        held = rows if counts is None else load(b, counts, e, I64)
        ok = b.and_(b.icmp_signed(">=", r, ir.Constant(I64, 0)), b.icmp_signed("<", r, held))
        at = b.add(b.mul(b.select(ok, r, ir.Constant(I64, 0)), ir.Constant(I64, elems)),
                   b.mul(e, ir.Constant(I64, sub)))
        with for_range(b, 0, sub, name="el") as j:
            src = b.add(at, j)
            v = ew._load(b, base, src, dtype, 1)
            ew._store(b, b.select(ok, v, zero), dst,
                      b.add(b.mul(e, ir.Constant(I64, sub)), j), dtype)


# ---- accumulate (Note [In-place accumulation]) --------------------------------------------
