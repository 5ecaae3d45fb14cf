"""Native threads for large loops: a fused loop over PARALLEL_MIN_ELEMENTS or more elements
runs as row blocks on OpenMP's thread pool (libgomp's `GOMP_parallel`), LLGRAD_NUM_THREADS
threads, with results that do not depend on the thread count (Note [Threads in kernels]).
"""
from __future__ import annotations

import ctypes
import os

import numpy as np
from llvmlite import ir

from . import jit
from .elementwise import Emitter, lltype
from .loops import I64, PTR, element_ptr

I32 = ir.IntType(32)
I8 = ir.IntType(8)
_LIBRARY = "libgomp.so.1"
PARALLEL_MIN_ELEMENTS = 1 << 17

# Note [Threads in kernels]
# An outlined fused loop (codegen/outline.py) over at least PARALLEL_MIN_ELEMENTS elements is
# cut into blocks of rows (axis 0), each an outlined loop of its own static shape called with
# its operands' pointers moved to its first row. A small function run by every thread of a
# `GOMP_parallel` team takes the blocks c = t, t + nt, ... (t its thread number, nt the team's
# size, which libgomp may make smaller than asked), so every block runs once whatever the
# team; without threads the same function runs every block in order.
#   - Elementwise loops and reductions that keep axis 0: T blocks, as even as static shapes
#     allow (rows // T, one more for the first rows % T). Each element of a result is
#     computed by the same code from the same inputs whichever block holds it.
#   - Sums over every axis: blocks fixed by the shape alone (at most MAX_BLOCKS, at least
#     BLOCK_MIN_ELEMENTS each), each summing into its own slot, the slots added in block
#     order, at every thread count, 1 included.
#   - Other reductions (max, min, prod, sums over some axes that reduce axis 0) stay on one
#     thread, as does everything when libgomp is missing.
# So results are identical to the bit at every thread count. T is the thread count when the
# module is compiled: LLGRAD_NUM_THREADS, a number or "auto" (the cores this process may
# use, the default, as JAX's and PyTorch's). On this 2-core machine, quiet: `elementwise`
# 3.53 -> 1.80 ms (1.96x), `gmm` 0.89 -> 0.79 ms (most of it BLAS); loaded by other
# processes, 2 threads measured slower (a team's threads wait for cores): set
# LLGRAD_NUM_THREADS=1 there, or per Dask worker process. T is part of the disk cache's
# compiler environment (llgrad/cache.py). Kernels release the GIL (ctypes), and each call has
# its own blocks, so calls from many Python threads may run at once.


def num_threads() -> int:
    """LLGRAD_NUM_THREADS: a number, or "auto" (the cores this process may use), which is
    also what unset means (Note [Threads in kernels])."""
    env = os.environ.get("LLGRAD_NUM_THREADS", "").strip().lower() or "auto"
    if env == "auto":
        try:
            return max(1, len(os.sched_getaffinity(0)))
        except (AttributeError, OSError):
            return max(1, os.cpu_count() or 1)
    try:
        return max(1, int(env))
    except ValueError:
        raise ValueError(f"LLGRAD_NUM_THREADS={env!r} is not a number of threads (use a "
                         f"positive integer, e.g. LLGRAD_NUM_THREADS=2, or auto)") from None


# Note [Threads after fork]
# libgomp's thread pool does not survive fork(): a child process whose parent had run a
# parallel region can hang in its first one. So kernels read a flag, `llgrad_threads_on`
# (a symbol of this process, as the BLAS entries are: cached object code finds it too),
# before they start a team, and a forked child clears it: there the blocks run in order on
# the calling thread, with the same results.
_FLAG = ctypes.c_int32(1)
_FLAG_SYMBOL = "llgrad_threads_on"
_registered: list = []


def _off_in_child() -> None:
    _FLAG.value = 0


def available() -> bool:
    """Whether OpenMP's runtime can be loaded (then its symbols, and the flag of Note
    [Threads after fork], are visible to JIT code). Its idle threads spin briefly before
    they sleep (GOMP_SPINCOUNT, unless set): on a busy machine a long spin takes the cores
    other processes need."""
    if not _registered:
        import llvmlite.binding as llvm
        llvm.add_symbol(_FLAG_SYMBOL, ctypes.addressof(_FLAG))
        os.register_at_fork(after_in_child=_off_in_child)
        _registered.append(True)
    os.environ.setdefault("GOMP_SPINCOUNT", "10000")
    return jit.load_library(_LIBRARY)


BLOCK_MIN_ELEMENTS = 1 << 14
MAX_BLOCKS = 64


def plan(shape, reductions, red_axes) -> tuple[int, bool]:
    """(blocks, partial sums) for a loop over `shape`: blocks < 2 is the plain loop.

    Rows are independent when axis 0 is kept (or nothing is reduced): then as many blocks as
    threads. A sum over every axis is summed per block and the blocks' sums added in order:
    then the blocks depend on the shape alone, so the result does not depend on the threads.
    """
    shape = tuple(int(d) for d in shape)
    n = int(np.prod(shape, dtype=np.int64))
    if len(shape) == 0 or n < PARALLEL_MIN_ELEMENTS:
        return 1, False
    if not reductions or 0 not in set(red_axes):
        t = min(num_threads(), shape[0])
        return (t, False) if t >= 2 and available() else (1, False)
    if set(red_axes) == set(range(len(shape))) and all(k == "sum" for k, _, _ in reductions):
        return max(1, min(MAX_BLOCKS, shape[0], n // BLOCK_MIN_ELEMENTS)), True
    return 1, False


def emit_parallel(ctx, shape, operands, outs, reductions, red_axes, blocks: int,
                  partial: bool, function) -> None:
    """Run the loop over `shape` as `blocks` row blocks (on a thread team when there are
    threads). `function(shape)` gives the outlined loop of one block (ptr arguments: memory
    operands, outputs, reductions). With `partial`, each block sums into its own slot and
    the slots are added here in block order."""
    module, b = ctx.module, ctx.b
    rows, rest = int(shape[0]), tuple(int(d) for d in shape[1:])
    q, r = divmod(rows, blocks)
    fns = [function((q,) + rest)] + ([function((q + 1,) + rest)] if r else [])
    row_bytes = [o.strides[0] * np.dtype(o.dtype).itemsize for o in operands if o.ptr is not None]
    row_bytes += [(o[2][0] if len(o) > 2 else int(np.prod(rest, dtype=np.int64)))
                  * np.dtype(o[1]).itemsize for o in outs]
    ptrs = [o.ptr for o in operands if o.ptr is not None] + [o[0] for o in outs]
    block_bytes = [0] * len(ptrs)
    slots = []
    if partial:
        for kind, ptr, dt in reductions:
            with b.goto_entry_block():
                slot = b.alloca(lltype(dt), size=blocks, name="par.sums")
            slots.append((slot, ptr, dt))
            ptrs.append(slot)
            row_bytes.append(0)
            block_bytes.append(np.dtype(dt).itemsize)
    else:
        kept = [d for k, d in enumerate(shape) if k not in set(red_axes)]
        for kind, ptr, dt in reductions:  # axis 0 is kept: a block's rows of the result
            ptrs.append(ptr)
            row_bytes.append(int(np.prod(kept[1:], dtype=np.int64)) * np.dtype(dt).itemsize)
            block_bytes.append(0)
    threaded = num_threads() > 1 and available()
    body = _team_function(module, fns, row_bytes, block_bytes, q, r, blocks, threaded)
    with b.goto_entry_block():
        data = b.alloca(PTR, size=len(ptrs), name="par.args")
    for k, p in enumerate(ptrs):
        b.store(p, element_ptr(b, data, k, PTR))
    if threaded:  # Note [Threads after fork]: in order in a forked child
        flag = module.globals.get(_FLAG_SYMBOL) or ir.GlobalVariable(module, I32, _FLAG_SYMBOL)
        on = b.icmp_signed("!=", b.load(flag, typ=I32), ir.Constant(I32, 0))
        serial = _team_function(module, fns, row_bytes, block_bytes, q, r, blocks, False)
        with b.if_else(on) as (then, otherwise):
            with then:
                par = _declare(module, "GOMP_parallel", ir.VoidType(), [PTR, PTR, I32, I32])
                b.call(par, [body, data, ir.Constant(I32, min(blocks, num_threads())),
                             ir.Constant(I32, 0)])
            with otherwise:
                b.call(serial, [data])
    else:
        b.call(body, [data])
    em = Emitter(b, 1)
    for slot, ptr, dt in slots:
        t = lltype(dt)
        item = [b.load(element_ptr(b, slot, c, t), typ=t) for c in range(blocks)]
        total = item[0]
        for v in item[1:]:
            total = em.add(total, v)
        b.store(total, ptr)


def _declare(module, name, ret, args):
    fn = module.globals.get(name)
    if fn is None:
        fn = ir.Function(module, ir.FunctionType(ret, args), name)
    return fn


def _team_function(module, fns, row_bytes, block_bytes, q, r, blocks,
                   threaded) -> ir.Function:
    """void f(ptr args): this thread's blocks c = t, t + nt, ... < blocks (every block when
    not `threaded`), each the call of its block's loop with every pointer moved to row
    c * q + min(c, r) (and by c slots, for a block's partial sum)."""
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [PTR]),
                     f"llgrad.team{sum(1 for g in module.globals if g.startswith('llgrad.team'))}")
    fn.linkage = "internal"
    fn.attributes.add("nounwind")
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    if threaded:
        nt = b.sext(b.call(_declare(module, "omp_get_num_threads", I32, []), []), I64)
        t = b.sext(b.call(_declare(module, "omp_get_thread_num", I32, []), []), I64)
    else:
        nt, t = ir.Constant(I64, 1), ir.Constant(I64, 0)
    n = len(row_bytes)
    ptrs = [b.load(element_ptr(b, fn.args[0], k, PTR), typ=PTR) for k in range(n)]
    head, loop, done = (fn.append_basic_block(x) for x in ("head", "loop", "done"))
    entry = b.block
    b.branch(head)
    b.position_at_end(head)
    c = b.phi(I64, "c")
    c.add_incoming(t, entry)
    b.cbranch(b.icmp_signed("<", c, ir.Constant(I64, blocks)), loop, done)
    b.position_at_end(loop)
    big = b.icmp_signed("<", c, ir.Constant(I64, r))
    first = b.add(b.mul(c, ir.Constant(I64, q)),
                  b.select(big, c, ir.Constant(I64, r)))
    moved = [b.gep(p, [b.add(b.mul(first, ir.Constant(I64, rb)),
                             b.mul(c, ir.Constant(I64, bb)))], inbounds=True, source_etype=I8)
             for p, rb, bb in zip(ptrs, row_bytes, block_bytes)]
    if len(fns) == 1:
        b.call(fns[0], moved)
    else:
        with b.if_else(big) as (then, otherwise):
            with then:
                b.call(fns[1], moved)
            with otherwise:
                b.call(fns[0], moved)
    nxt = b.add(c, nt)
    c.add_incoming(nxt, b.block)
    b.branch(head)
    b.position_at_end(done)
    b.ret_void()
    return fn


__all__ = ["num_threads", "available", "plan", "emit_parallel", "PARALLEL_MIN_ELEMENTS"]
