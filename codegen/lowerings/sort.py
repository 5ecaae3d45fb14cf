"""argsort: a stable merge sort of (key, index) pairs per line along the axis, emitted once
per module and key type as an LLVM function. See Note [Merge sort]. Lines of RADIX_MIN or
more float64, float32 or int64 keys are radix sorted instead (radix.py, Note [Radix sort]).

The array is seen as (outer, n, inner) around the axis; each line is copied into a key buffer
(with indices 0..n-1), sorted, and its indices written out. Buffers are malloc'd once per op.
"""
from __future__ import annotations

from contextlib import contextmanager

import numpy as np
from llvmlite import ir

from llgrad.runtime.ops.sort import argsort_p

from .. import elementwise as ew
from ..loops import I64, PTR, for_range
from ..registry import lowers
from .control import _libc
from .radix import RADIX_DTYPES, RADIX_MIN, radix_function
from .scan import _geometry

# Note [Merge sort]
# Runs of _RUN elements are insertion-sorted, then merged bottom-up, doubling the width and
# swapping the source and target buffers each pass: O(n log n) compares, each one inline (no
# comparator call, unlike libc's qsort). Stable: an insertion stops at an equal key, and a
# merge takes from the left run unless the right key is strictly before it. "Before" is
# numpy's order with NaN last, or for descending=True PyTorch's with NaN first.
_RUN = 16


@contextmanager
def _while(b, cond):
    """`while cond(): body` with the builder in the body; `cond()` emits the test."""
    fn = b.function
    head, body, done = (fn.append_basic_block(f"while.{s}") for s in ("head", "body", "exit"))
    b.branch(head)
    b.position_at_end(head)
    b.cbranch(cond(), body, done)
    b.position_at_end(body)
    yield
    b.branch(head)
    b.position_at_end(done)


def _before(em, a, c, dtype, descending):
    """Whether key a sorts strictly before key c."""
    if dtype.kind != "f":
        return em.cmp(">" if descending else "<", a, c)
    nan_a, nan_c = em.cmp("!=", a, a), em.cmp("!=", c, c)
    if descending:
        return em.b.or_(em.cmp(">", a, c), em.b.and_(nan_a, em.b.not_(nan_c)))
    return em.b.or_(em.cmp("<", a, c), em.b.and_(nan_c, em.b.not_(nan_a)))


def _sort_function(module, dtype, descending) -> ir.Function:
    """`ptr sort(ptr key, ptr idx, ptr tkey, ptr tidx, i64 n)`: sorts the pairs stably and
    returns the buffer holding the sorted indices (idx or tidx)."""
    name = f"llgrad.msort.{dtype.str[1:]}.{'desc' if descending else 'asc'}"
    fn = module.globals.get(name)
    if fn is not None:
        return fn
    fn = ir.Function(module, ir.FunctionType(PTR, [PTR, PTR, PTR, PTR, I64]), name)
    fn.linkage = "internal"
    key, idx, tkey, tidx, n = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    em = ew.Emitter(b, 1)
    i64 = np.dtype(np.int64)
    ld = lambda p, i, t=dtype: ew._load(b, p, i, t, 1)  # noqa: E731
    st = lambda v, p, i, t=dtype: ew._store(b, v, p, i, t)  # noqa: E731

    def var(init, ty=I64):
        slot = b.alloca(ty)
        b.store(init, slot)
        return slot

    def imin(x, y):
        return b.select(b.icmp_signed("<", x, y), x, y)
    one, zero = ir.Constant(I64, 1), ir.Constant(I64, 0)
    run = ir.Constant(I64, _RUN)
    # every slot in the entry block (mem2reg turns them into registers)
    j, width, lo_slot, pi, pj = (var(zero) for _ in range(5))
    src_k, src_i, dst_k, dst_i = var(key, PTR), var(idx, PTR), var(tkey, PTR), var(tidx, PTR)
    # insertion sort of each run of _RUN elements
    with for_range(b, 0, b.udiv(b.add(n, ir.Constant(I64, _RUN - 1)), run), name="run") as r:
        lo = b.mul(r, run)
        hi = imin(b.add(lo, run), n)
        with for_range(b, b.add(lo, one), hi, name="ins") as i:
            kv, iv = ld(key, i), ld(idx, i, i64)
            b.store(i, j)
            head, chk, body, done = (fn.append_basic_block(f"ins.{s}")
                                     for s in ("head", "cmp", "body", "exit"))
            b.branch(head)
            b.position_at_end(head)  # while j > lo and kv is before key[j - 1]: shift right
            jj = b.load(j)
            b.cbranch(b.icmp_signed(">", jj, lo), chk, done)
            b.position_at_end(chk)
            prev = b.sub(jj, one)
            b.cbranch(_before(em, kv, ld(key, prev), dtype, descending), body, done)
            b.position_at_end(body)
            st(ld(key, prev), key, jj)
            st(ld(idx, prev, i64), idx, jj, i64)
            b.store(prev, j)
            b.branch(head)
            b.position_at_end(done)
            jj = b.load(j)
            st(kv, key, jj)
            st(iv, idx, jj, i64)
    # bottom-up merges, ping-ponging between the buffers
    b.store(run, width)
    with _while(b, lambda: b.icmp_signed("<", b.load(width), n)):
        w = b.load(width)
        sk, si, dk, di = (b.load(v, typ=PTR) for v in (src_k, src_i, dst_k, dst_i))
        b.store(zero, lo_slot)
        with _while(b, lambda: b.icmp_signed("<", b.load(lo_slot), n)):
            lo = b.load(lo_slot)
            mid = imin(b.add(lo, w), n)
            hi = imin(b.add(mid, w), n)
            b.store(lo, pi)
            b.store(mid, pj)
            last = b.sub(hi, one)
            with for_range(b, lo, hi, name="merge") as k:
                i_, j_ = b.load(pi), b.load(pj)
                left_ok = b.icmp_signed("<", i_, mid)
                right_ok = b.icmp_signed("<", j_, hi)
                # both heads are read (clamped in bounds); the right one is taken only when
                # it is strictly before the left one, or the left run is done
                ki, kj = ld(sk, imin(i_, last)), ld(sk, imin(j_, last))
                take_right = b.and_(right_ok, b.or_(b.not_(left_ok),
                                                    _before(em, kj, ki, dtype, descending)))
                src = b.select(take_right, j_, i_)
                st(ld(sk, src), dk, k)
                st(ld(si, src, i64), di, k, i64)
                b.store(b.select(take_right, i_, b.add(i_, one)), pi)
                b.store(b.select(take_right, b.add(j_, one), j_), pj)
            b.store(hi, lo_slot)
        for a, c in ((src_k, dst_k), (src_i, dst_i)):
            va, vc = b.load(a, typ=PTR), b.load(c, typ=PTR)
            b.store(vc, a)
            b.store(va, c)
        b.store(b.mul(w, ir.Constant(I64, 2)), width)
    b.ret(b.load(src_i, typ=PTR))
    return fn


@lowers(argsort_p)
def _lower_argsort(ctx, op) -> None:
    b, x, out = ctx.b, op.inputs[0], op.outputs[0]
    dt = np.dtype(x.aval.dtype)
    outer, n, inner = _geometry(x.aval.shape, op.params["axis"])
    if outer * n * inner == 0:
        return
    i64 = np.dtype(np.int64)
    pick = radix_function if dt in RADIX_DTYPES and n >= RADIX_MIN else _sort_function
    sort = pick(b.module, dt, op.params["descending"])  # See Note [Radix sort]
    malloc = _libc(b.module, "malloc", PTR, [I64])
    free = _libc(b.module, "free", ir.VoidType(), [PTR])
    size = n * (dt.itemsize + 8)
    mem = b.call(malloc, [ir.Constant(I64, 2 * size)])
    key = mem
    idx = b.gep(mem, [ir.Constant(I64, n * dt.itemsize)], inbounds=True,
                source_etype=ir.IntType(8))
    tkey = b.gep(mem, [ir.Constant(I64, size)], inbounds=True, source_etype=ir.IntType(8))
    tidx = b.gep(tkey, [ir.Constant(I64, n * dt.itemsize)], inbounds=True,
                 source_etype=ir.IntType(8))
    xp, op_ = ctx.ptr(x), ctx.out(out)
    stride = ir.Constant(I64, inner)
    with for_range(b, 0, outer, name="sort.o") as o:
        with for_range(b, 0, inner, name="sort.j") as j:
            base = b.add(b.mul(o, ir.Constant(I64, n * inner)), j)
            with for_range(b, 0, n, name="sort.in") as k:
                at = b.add(base, b.mul(k, stride))
                ew._store(b, ew._load(b, xp, at, dt, 1), key, k, dt)
                ew._store(b, k, idx, k, i64)
            res = b.call(sort, [key, idx, tkey, tidx, ir.Constant(I64, n)])
            with for_range(b, 0, n, name="sort.out") as k:
                ew._store(b, ew._load(b, res, k, i64, 1), op_, b.add(base, b.mul(k, stride)),
                          i64)
    b.call(free, [mem])
    ctx.stats["sorts"] = ctx.stats.get("sorts", 0) + 1
