"""Scans along one axis (cumsum, linrec, iir, cumargmax/cumargmin): one pass over the elements.

The array is seen as (outer, n, inner) around the scanned axis. For each outer index the first
row (of `inner` elements) is initialised, then each later row k is computed from row k-1 and
the inputs at row k, so the innermost loop runs over contiguous `inner` elements (vectorisable
by LLVM) and every element is read and written once. `reverse` walks the rows from the end.
Inputs are dense (the planner materialises views).
"""
from __future__ import annotations

import numpy as np
from llvmlite import ir

from llgrad.runtime.ops import scan as S

from .. import elementwise as ew
from ..loops import I64, for_range
from ..registry import lowers


def _geometry(shape, axis):
    outer = int(np.prod(shape[:axis], dtype=np.int64))
    inner = int(np.prod(shape[axis + 1:], dtype=np.int64))
    return outer, shape[axis], inner


def _scan(ctx, op, first, step) -> None:
    """Drive the scan: first(at) stores row 0's element at flat offset `at`; step(at, prev, k)
    stores the element at `at` (row k along the axis) from the one at `prev` (the row
    before it in scan order)."""
    b = ctx.b
    shape, axis = op.inputs[0].aval.shape, op.params["axis"]
    reverse = op.params.get("reverse", False)
    outer, n, inner = _geometry(shape, axis)
    if outer * n * inner == 0:
        return
    row = ir.Constant(I64, inner)
    with for_range(b, 0, outer, name="scan.o") as o:
        base = b.mul(o, ir.Constant(I64, n * inner))
        start = b.add(base, ir.Constant(I64, (n - 1) * inner)) if reverse else base
        with for_range(b, 0, inner, name="scan.j0") as j:
            first(b.add(start, j))
        if n > 1:
            with for_range(b, 1, n, name="scan.k") as k:
                kk = b.sub(ir.Constant(I64, n - 1), k) if reverse else k
                cur = b.add(base, b.mul(kk, row))
                prev = b.add(cur, row) if reverse else b.sub(cur, row)
                with for_range(b, 0, inner, name="scan.j") as j:
                    step(b.add(cur, j), b.add(prev, j), kk)


@lowers(S.cumsum_p)
def _lower_cumsum(ctx, op) -> None:
    b, x, out = ctx.b, op.inputs[0], op.outputs[0]
    dt, xp, yp = out.aval.dtype, ctx.ptr(x), ctx.out(out)
    em = ew.Emitter(b, 1)

    def first(at):
        ew._store(b, ew._load(b, xp, at, dt, 1), yp, at, dt)

    def step(at, prev, k):
        ew._store(b, em.add(ew._load(b, yp, prev, dt, 1), ew._load(b, xp, at, dt, 1)),
                  yp, at, dt)
    _scan(ctx, op, first, step)


@lowers(S.linrec_p)
def _lower_linrec(ctx, op) -> None:
    b, out = ctx.b, op.outputs[0]
    dt, ap, bp, yp = out.aval.dtype, ctx.ptr(op.inputs[0]), ctx.ptr(op.inputs[1]), ctx.out(out)
    em = ew.Emitter(b, 1)
    reverse = op.params["reverse"]

    def first(at):
        ew._store(b, ew._load(b, bp, at, dt, 1), yp, at, dt)

    def step(at, prev, k):
        # the multiplier sits at the later index of the step (see Note [Scan gradients])
        a = ew._load(b, ap, prev if reverse else at, dt, 1)
        y = em.add(em.mul(a, ew._load(b, yp, prev, dt, 1)), ew._load(b, bp, at, dt, 1))
        ew._store(b, y, yp, at, dt)
    _scan(ctx, op, first, step)


@lowers(S.iir_p)
def _lower_iir(ctx, op) -> None:
    # y[k] = v[k], then minus a[m-1] y[k-m] for m = 1 .. min(rows done, p), in the numpy
    # impl's order (Note [All-pole filters])
    b, out = ctx.b, op.outputs[0]
    v, a = op.inputs
    dt, vp, ap, yp = out.aval.dtype, ctx.ptr(v), ctx.ptr(a), ctx.out(out)
    em = ew.Emitter(b, 1)
    reverse, axis, p = op.params["reverse"], op.params["axis"], a.aval.shape[0]
    n, row = v.aval.shape[axis], ir.Constant(I64, _geometry(v.aval.shape, axis)[2])
    one, cap = ir.Constant(I64, 1), ir.Constant(I64, p)

    def first(at):
        ew._store(b, ew._load(b, vp, at, dt, 1), yp, at, dt)

    def step(at, prev, k):
        first(at)
        done = b.sub(ir.Constant(I64, n - 1), k) if reverse else k
        end = b.add(b.select(b.icmp_signed("<", done, cap), done, cap), one)
        with for_range(b, 1, end, name="iir.m") as m:
            off = b.mul(m, row)
            earlier = b.add(at, off) if reverse else b.sub(at, off)
            t = em.mul(ew._load(b, ap, b.sub(m, one), dt, 1), ew._load(b, yp, earlier, dt, 1))
            ew._store(b, em.sub(ew._load(b, yp, at, dt, 1), t), yp, at, dt)
    _scan(ctx, op, first, step)


def _lower_cumarg(better: str):
    def lower(ctx, op) -> None:
        b, x, out = ctx.b, op.inputs[0], op.outputs[0]
        dt, xp, ip = x.aval.dtype, ctx.ptr(x), ctx.out(out)
        i64 = np.dtype(np.int64)
        em = ew.Emitter(b, 1)
        row = ir.Constant(I64, _geometry(x.aval.shape, op.params["axis"])[2])

        def first(at):
            ew._store(b, ir.Constant(I64, 0), ip, at, i64)

        def step(at, prev, k):
            # the running extremum is re-read where the previous index points
            best_idx = ew._load(b, ip, prev, i64, 1)
            best = ew._load(b, xp, b.sub(at, b.mul(b.sub(k, best_idx), row)), dt, 1)
            v = ew._load(b, xp, at, dt, 1)
            take = em.cmp(better, v, best)  # ties: the later index, as PyTorch's cummax
            if dt.kind == "f":  # a NaN wins and stays (PyTorch; numpy's accumulate)
                take = b.or_(em.cmp("!=", v, v), b.and_(take, em.cmp("==", best, best)))
            ew._store(b, b.select(take, k, best_idx), ip, at, i64)
        _scan(ctx, op, first, step)
    return lower


lowers(S.cumargmax_p)(_lower_cumarg(">="))
lowers(S.cumargmin_p)(_lower_cumarg("<="))
