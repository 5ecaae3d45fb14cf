"""A stable LSD radix argsort for long lines of float64, float32 and int64 keys, emitted once
per module and key type as an LLVM function with the merge sort's signature (sort.py). See
Note [Radix sort].
"""
from __future__ import annotations

import numpy as np
from llvmlite import ir

from ..loops import I64, PTR, for_range

# Note [Radix sort]
# The merge sort (Note [Merge sort]) makes log2(n / 16) passes of unpredictable compares: at
# 10^5 float64 it took 23 ms, numpy's stable argsort 16 ms. Long lines of the common key
# types are sorted by radix instead, which compares nothing: each key becomes an unsigned
# integer of its width whose order is the sort's ("before" of Note [Merge sort]): a float
# has its NaNs made one positive quiet NaN (so all sort last, as numpy's) and -0.0 made
# +0.0 (equal keys keep their order, as numpy's compares them equal), then its bits are
# flipped (negative) or given the sign bit (positive); an int64 has its sign bit flipped;
# descending sorts complement the result (NaN first, as PyTorch's). One pass counts all 8-bit
# digits, then each digit, low to high, is a stable counting scatter of (key, index) pairs
# between the two buffers; a digit every key shares is skipped (the high bytes of keys of
# one sign and magnitude). RADIX_MIN: below it the merge sort's fewer passes win.
RADIX_MIN = 512
RADIX_DTYPES = frozenset({np.dtype(np.float64), np.dtype(np.float32), np.dtype(np.int64)})


def radix_function(module: ir.Module, dtype: np.dtype, descending: bool) -> ir.Function:
    """`ptr sort(ptr key, ptr idx, ptr tkey, ptr tidx, i64 n)`: sorts the pairs stably (key
    is overwritten) and returns the buffer holding the sorted indices (idx or tidx)."""
    name = f"llgrad.rsort.{dtype.str[1:]}.{'desc' if descending else 'asc'}"
    fn = module.globals.get(name)
    if fn is not None:
        return fn
    fn = ir.Function(module, ir.FunctionType(PTR, [PTR, PTR, PTR, PTR, I64]), name)
    fn.linkage = "internal"
    key, idx, tkey, tidx, n = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    bits = dtype.itemsize * 8
    uint = ir.IntType(bits)
    digits = bits // 8
    c = lambda v, t=I64: ir.Constant(t, v)  # noqa: E731
    counts = b.alloca(I64, size=c(256 * digits), name="counts")
    b.call(_memset(module), [counts, c(0, ir.IntType(8)), c(8 * 256 * digits),
                             c(0, ir.IntType(1))])
    src_k, src_i, dst_k, dst_i = (b.alloca(PTR) for _ in range(4))
    acc = b.alloca(I64, name="acc")
    for slot, v in ((src_k, key), (src_i, idx), (dst_k, tkey), (dst_i, tidx)):
        b.store(v, slot)
    sign = c(1 << (bits - 1), uint)

    def at(base, i, ty):
        return b.gep(base, [i], inbounds=True, source_etype=ty)

    def slot(d, digit):
        return at(counts, b.add(c(256 * d), digit), I64)

    def digit_of(u, d):
        return b.zext(b.and_(b.lshr(u, c(8 * d, uint)), c(255, uint)), I64)

    # keys -> ordered unsigned integers (in place), and every digit counted
    with for_range(b, 0, n, name="rkey") as i:
        if dtype.kind == "f":
            ft = ir.DoubleType() if bits == 64 else ir.FloatType()
            x = b.load(at(key, i, ft), typ=ft)
            x = b.fadd(x, ir.Constant(ft, 0.0))  # -0.0 -> +0.0
            x = b.select(b.fcmp_unordered("uno", x, x), ir.Constant(ft, float("nan")), x)
            u = b.bitcast(x, uint)
            u = b.xor(u, b.or_(b.ashr(u, c(bits - 1, uint)), sign))
        else:
            u = b.xor(b.load(at(key, i, uint), typ=uint), sign)
        if descending:
            u = b.not_(u)
        b.store(u, at(key, i, uint))
        for d in range(digits):
            p = slot(d, digit_of(u, d))
            b.store(b.add(b.load(p, typ=I64), c(1)), p)
    for d in range(digits):
        sk, si, dk, di = (b.load(s, typ=PTR) for s in (src_k, src_i, dst_k, dst_i))
        first = b.load(at(sk, c(0), uint), typ=uint)
        shared = b.icmp_signed("==", b.load(slot(d, digit_of(first, d)), typ=I64), n)
        with b.if_then(b.not_(shared)):
            # exclusive prefix sums of this digit's counts: the first slot of each bucket
            b.store(c(0), acc)
            with for_range(b, 0, 256, name=f"rsum{d}") as k:
                p = slot(d, k)
                v = b.load(p, typ=I64)
                b.store(b.load(acc, typ=I64), p)
                b.store(b.add(b.load(acc, typ=I64), v), acc)
            with for_range(b, 0, n, name=f"rscatter{d}") as i:
                u = b.load(at(sk, i, uint), typ=uint)
                p = slot(d, digit_of(u, d))
                pos = b.load(p, typ=I64)
                b.store(b.add(pos, c(1)), p)
                b.store(u, at(dk, pos, uint))
                b.store(b.load(at(si, i, I64), typ=I64), at(di, pos, I64))
            for a, o in ((src_k, dk), (src_i, di), (dst_k, sk), (dst_i, si)):
                b.store(o, a)
    b.ret(b.load(src_i, typ=PTR))
    return fn


def _memset(module: ir.Module) -> ir.Function:
    name = "llvm.memset.p0.i64"
    fn = module.globals.get(name)
    if fn is None:
        fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [PTR, ir.IntType(8), I64,
                                                                  ir.IntType(1)]), name)
    return fn
