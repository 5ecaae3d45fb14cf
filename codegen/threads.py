"""Native threads for large loops: a fused loop over PARALLEL_MIN_ELEMENTS or more elements,
and a batch of matrix products, runs as blocks on OpenMP's thread pool (libgomp's
`GOMP_parallel`), LLGRAD_NUM_THREADS threads, with results that do not depend on the thread
count (Note [Threads in kernels]).
"""
from __future__ import annotations

import ctypes
import math
import os
from dataclasses import dataclass

import numpy as np
from llvmlite import ir

from . import jit
from .elementwise import REDUCERS, Emitter, lltype
from .layout import contiguous_strides
from .loops import I64, PTR, element_ptr

I32 = ir.IntType(32)
I8 = ir.IntType(8)
_LIBRARY = "libgomp.so.1"
PARALLEL_MIN_ELEMENTS = 1 << 17
# An exp or a sin costs about as much as this many additions of a loop that streams memory:
# a loop computing one is split from PARALLEL_MIN_ELEMENTS / (1 + 8) elements on.
EXPENSIVE_WEIGHT = 8

# Note [Threads in kernels]
# An outlined fused loop (codegen/outline.py) over at least PARALLEL_MIN_ELEMENTS elements
# (fewer when it computes exp, log, sin, ...: EXPENSIVE_WEIGHT) is cut into blocks along one
# axis, each an outlined loop of its own static shape called with its operands' pointers
# moved to its first index. A small function run by every thread of a `GOMP_parallel` team
# takes blocks from a shared counter until none is left (Note [Blocks taken in turn]), so
# every block runs once whatever the team (libgomp may make it smaller than asked); without
# threads the same blocks run in order.
#   - Elementwise loops and reductions that keep an axis: T blocks along the first kept
#     axis (axis 0 for elementwise loops), as even as Note [Blocks on vector boundaries]
#     allows. Each element of a result is computed by the same code from the same inputs,
#     in the same order, whichever block holds it.
#   - Reductions over every axis (sum, prod, max, min): blocks of axis 0 fixed by the shape
#     alone (at most MAX_BLOCKS, at least BLOCK_MIN_ELEMENTS each), each reducing into its own
#     slot, the slots combined in block order, at every thread count, 1 included.
#   - A batch of matrix products (codegen/lowerings/linalg.py): T blocks of whole products,
#     each product computed as on one thread. Products large enough for BLAS to thread
#     itself (BLAS_OWN_THREADS_FLOPS) keep BLAS's own threads instead, so the two pools
#     never nest.
#   - Reductions of axis 0 whose kept axes are too short to split stay on one thread, as
#     does everything when libgomp is missing.
# So results are identical to the bit at every thread count. T is the thread count when the
# module is compiled: LLGRAD_NUM_THREADS, a number or "auto" (the cores this process may
# use, the default, as JAX's and PyTorch's). BLAS calls run on BLAS's own threads
# (OPENBLAS_NUM_THREADS, default the cores: Note [One BLAS, one thread pool]). On this
# 2-core machine, quiet: `elementwise` 3.53 -> 1.80 ms (1.96x); on a busy machine teams
# give way to the calling thread (Note [Teams on a busy machine]). T is part of the disk
# cache's compiler environment (llgrad/cache.py). Kernels release the GIL (ctypes), and each
# call has its own blocks, so calls from many Python threads may run at once.

# Note [Blocks on vector boundaries]
# A loop runs its innermost (collapsed) axis in vectors of `width` lanes from the start of
# the run, then the remainder one element at a time, and libmvec's vector exp or sin differs
# from libm's scalar one in the last bit for many arguments. A block that started in the
# middle of a vector of the one-thread loop would compute the elements at its start and end
# with the other function. So a block along axis `ax` starts at an index whose offset into
# the collapsed run, index * prod(shape[ax+1:]), is a multiple of ALIGN elements (a
# multiple of every vector width), and the same lanes meet the same functions.
ALIGN = 16


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

# Note [Teams on a busy machine]
# A team's call returns only when each of its threads has finished, and on a machine whose
# cores other processes keep busy a thread may wait milliseconds for a core, before or in
# the middle of its block: `gmm`'s 13 teams per call took it from 6 ms on one thread to
# 26 ms on two (load average 13 on 2 cores). So the calling thread times its own blocks and
# the whole team (cycle counter); when it waited for the others longer than it worked (plus
# SLACK_CYCLES), the next teams of the process run in order on the calling thread instead:
# one after the first such wait, and twice as many after each further one in a row (up to
# MAX_BACKOFF); a team that did not wait resets the count. The blocks, and so the results,
# are the same either way. `_BACKOFF` is [teams left to skip, next skip].
_BACKOFF = (ctypes.c_int32 * 2)(0, 1)
_BACKOFF_SYMBOL = "llgrad_threads_backoff"
MAX_BACKOFF = 1024
SLACK_CYCLES = 100_000  # ~40 us: a sleeping thread's wake-up on a quiet machine is far less


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
        llvm.add_symbol(_BACKOFF_SYMBOL, ctypes.addressof(_BACKOFF))
        os.register_at_fork(after_in_child=_off_in_child)
        _registered.append(True)
    os.environ.setdefault("GOMP_SPINCOUNT", "10000")
    return jit.load_library(_LIBRARY)


def threaded() -> bool:
    """Whether modules compiled now start thread teams."""
    return num_threads() > 1 and available()


BLOCK_MIN_ELEMENTS = 1 << 14
MAX_BLOCKS = 64


@dataclass(frozen=True)
class Split:
    """A loop cut along `axis` into `blocks`, (first index, extent) each; `partial`: each
    block reduces into its own slot, combined in block order (a reduction over every axis)."""
    axis: int
    blocks: tuple
    partial: bool


def blocks_of(extent: int, parts: int, unit: int = 1) -> tuple:
    """(first, extent) of `parts` consecutive blocks covering [0, extent), as even as possible
    with every block but the last a multiple of `unit` long."""
    units, rest = divmod(extent, unit)
    parts = max(1, min(parts, units))
    q, r = divmod(units, parts)
    out, first = [], 0
    for c in range(parts):
        size = (q + (c < r)) * unit + (rest if c == parts - 1 else 0)
        out.append((first, size))
        first += size
    return tuple(out)


def plan(shape, reductions, red_axes, expensive: int = 0) -> Split | None:
    """How to cut a loop over `shape` computing `expensive` costly functions (exp, sin, ...)
    per element (None: the plain loop). See Note [Threads in kernels]."""
    shape = tuple(int(d) for d in shape)
    n = int(np.prod(shape, dtype=np.int64))
    if len(shape) == 0 or n * (1 + EXPENSIVE_WEIGHT * expensive) < PARALLEL_MIN_ELEMENTS:
        return None
    red = set(red_axes) if reductions else set()
    if len(red) == len(shape):  # blocks fixed by the shape, at every thread count
        parts = max(1, min(MAX_BLOCKS, shape[0], n // BLOCK_MIN_ELEMENTS))
        return Split(0, blocks_of(shape[0], parts), True) if parts > 1 else None
    axis = min(set(range(len(shape))) - red)  # the axes before it are all reduced
    if not threaded():
        return None
    inner = int(np.prod(shape[axis + 1:], dtype=np.int64))
    blocks = blocks_of(shape[axis], num_threads(), ALIGN // math.gcd(ALIGN, inner))
    return Split(axis, blocks, False) if len(blocks) > 1 else None


# A batch of products with fewer multiply-adds than this stays on one thread.
PARALLEL_MIN_FLOPS = 1 << 17
# OpenBLAS runs a gemm of m*n*k below 65536 * GEMM_MULTITHREAD_THRESHOLD (4) on the calling
# thread; bigger ones on its own threads, which a team of ours must not multiply.
BLAS_OWN_THREADS_FLOPS = 1 << 18


def batches(count: int, flops: int, blas: bool) -> tuple | None:
    """Blocks of a batch of `count` products of `flops` multiply-adds each (`blas`: gemm
    calls), or None: in order on one thread (Note [Threads in kernels])."""
    if count < 2 or count * flops < PARALLEL_MIN_FLOPS or not threaded():
        return None
    return None if blas and flops >= BLAS_OWN_THREADS_FLOPS else blocks_of(count, num_threads())


def emit_parallel(ctx, shape, operands, outs, reductions, red_axes, split: Split,
                  function) -> None:
    """Run the loop over `shape` as `split`'s blocks (on a thread team when there are
    threads). `function(shape)` gives the outlined loop of one block (ptr arguments: memory
    operands, outputs, reductions). With `split.partial`, each block reduces into its own
    slot and the slots are combined here in block order."""
    b, ax = ctx.b, split.axis
    shape = tuple(int(d) for d in shape)

    def nbytes(stride, dt):
        return int(stride) * np.dtype(dt).itemsize
    ptrs = [o.ptr for o in operands if o.ptr is not None] + [o[0] for o in outs]
    steps = [nbytes(o.strides[ax], o.dtype) for o in operands if o.ptr is not None]
    steps += [nbytes(o[2][ax] if len(o) > 2 else contiguous_strides(shape)[ax], o[1])
              for o in outs]
    slot_bytes = [0] * len(ptrs)
    slots = []
    nblocks = len(split.blocks)
    for kind, ptr, dt in reductions:
        if split.partial:
            with b.goto_entry_block():
                slot = b.alloca(lltype(dt), size=nblocks, name="par.slots")
            slots.append((kind, slot, ptr, dt))
            ptrs.append(slot)
            steps.append(0)
            slot_bytes.append(np.dtype(dt).itemsize)
        else:  # the block's part of the result, dense over the kept axes, `ax` the first
            kept = [d for k, d in enumerate(shape) if k not in set(red_axes)]
            ptrs.append(ptr)
            steps.append(nbytes(contiguous_strides(kept)[0], dt))
            slot_bytes.append(0)

    def block_function(extent):
        return function(shape[:ax] + (extent,) + shape[ax + 1:])
    run_blocks(ctx, ptrs, steps, slot_bytes, split.blocks, block_function)
    em = Emitter(b, 1)
    for kind, slot, ptr, dt in slots:
        t = lltype(dt)
        total = b.load(element_ptr(b, slot, 0, t), typ=t)
        for c in range(1, nblocks):
            total = getattr(em, REDUCERS[kind][0])(total, b.load(element_ptr(b, slot, c, t),
                                                                 typ=t))
        b.store(total, ptr)


def run_blocks(ctx, ptrs, steps, slot_bytes, blocks, function) -> None:
    """Call `function(extent)` (a function of ptr arguments) once per block (first, extent)
    with each pointer moved by first * step + c * slot bytes (block c): on a thread team when
    there are threads (in order in a forked child, or while the machine is busy), else in
    order here."""
    module, b = ctx.module, ctx.b
    fns = {size: function(size) for size in sorted({e for _, e in blocks})}
    calls = [(fns[e], [f * s + c * sb for s, sb in zip(steps, slot_bytes)])
             for c, (f, e) in enumerate(blocks)]
    with b.goto_entry_block():
        data = b.alloca(PTR, size=len(ptrs) + 1, name="par.args")
        sync = b.alloca(I64, size=2, name="par.sync")  # next block, whether others helped
    for k, p in enumerate(ptrs + [sync]):
        b.store(p, element_ptr(b, data, k, PTR))
    if not threaded():
        b.call(_team_function(module, calls, False), [data])
        return
    flag = _global(module, _FLAG_SYMBOL, I32)
    backoff = _global(module, _BACKOFF_SYMBOL, ir.ArrayType(I32, 2))
    skip_ptr = b.gep(backoff, [ir.Constant(I32, 0), ir.Constant(I32, 0)], inbounds=True)
    next_ptr = b.gep(backoff, [ir.Constant(I32, 0), ir.Constant(I32, 1)], inbounds=True)
    skip = _load(b, skip_ptr)
    zero = ir.Constant(I32, 0)
    on = b.and_(b.icmp_signed("!=", b.load(flag, typ=I32), zero),  # Note [Threads after fork]
                b.icmp_signed("<=", skip, zero))
    team = _team_function(module, calls, True)  # also run alone: its blocks in order
    b.store(ir.Constant(I64, 0), element_ptr(b, sync, 0, I64))
    b.store(ir.Constant(I64, 0), element_ptr(b, sync, 1, I64))
    with b.if_else(on) as (then, otherwise):
        with then:
            par = _declare(module, "GOMP_parallel", ir.VoidType(), [PTR, PTR, I32, I32])
            start = _cycles(b)
            b.call(par, [team, data, ir.Constant(I32, min(len(blocks), num_threads())), zero])
            busy = b.load(element_ptr(b, sync, 1, I64), typ=I64)  # the caller's own blocks
            waited = b.sub(b.sub(_cycles(b), start), busy)
            helped = b.icmp_signed("<=", waited, b.add(busy, ir.Constant(I64, SLACK_CYCLES)))
            nxt = _load(b, next_ptr)  # Note [Teams on a busy machine]
            _store(b, b.select(helped, zero, nxt), skip_ptr)
            doubled = b.select(b.icmp_signed("<", nxt, ir.Constant(I32, MAX_BACKOFF)),
                               b.mul(nxt, ir.Constant(I32, 2)), nxt)
            _store(b, b.select(helped, ir.Constant(I32, 1), doubled), next_ptr)
        with otherwise:
            _store(b, b.select(b.icmp_signed(">", skip, zero), b.sub(skip, ir.Constant(I32, 1)),
                               skip), skip_ptr)
            b.call(team, [data])


def _cycles(b):
    """The CPU's cycle counter (rdtsc)."""
    return b.call(_declare(b.module, "llvm.readcyclecounter", I64, []), [])


def _load(b, ptr):
    """An atomic (relaxed) read of the i32 at `ptr`: other threads' kernels write it too."""
    return b.atomic_rmw("or", ptr, ir.Constant(I32, 0), "monotonic")


def _store(b, value, ptr) -> None:
    """An atomic (relaxed) write (llvmlite's store_atomic needs typed pointers)."""
    b.atomic_rmw("xchg", ptr, value, "monotonic")


def _global(module, name, ty):
    """The process global `name` (registered with LLVM by `available`)."""
    return module.globals.get(name) or ir.GlobalVariable(module, ty, name)


def _table(module, name, values) -> ir.GlobalVariable:
    """A constant array of i64 `values` in `module`."""
    ty = ir.ArrayType(I64, len(values))
    g = ir.GlobalVariable(module, ty, name)
    g.initializer = ir.Constant(ty, [int(v) for v in values])
    g.global_constant = True
    g.linkage = "internal"
    return g


def _declare(module, name, ret, args):
    fn = module.globals.get(name)
    if fn is None:
        fn = ir.Function(module, ir.FunctionType(ret, args), name)
    return fn


# Note [Blocks taken in turn]
# The threads of a team take the next block from a shared counter (an atomic add) rather
# than a fixed share each: a thread that starts late, because the machine is busy, leaves
# its blocks to those already running instead of making them wait for it. Which thread
# computes a block changes nothing in the block's results.
def _team_function(module, calls, shared) -> ir.Function:
    """void f(ptr args): block c the call calls[c] = (function, byte offset of each pointer),
    for c = 0, 1, ... in order, or (`shared`) for each c this thread takes from the counter
    after the pointers (Note [Blocks taken in turn]; called outside a team, the same order).
    One function serves the team and the calling thread alone, so each block's loop is
    emitted once."""
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [PTR]),
                     f"llgrad.team{sum(1 for g in module.globals if g.startswith('llgrad.team'))}")
    fn.linkage = "internal"
    fn.attributes.add("nounwind")
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    n = len(calls[0][1])
    ptrs = [b.load(element_ptr(b, fn.args[0], k, PTR), typ=PTR) for k in range(n)]
    sync = b.load(element_ptr(b, fn.args[0], n, PTR), typ=PTR)
    counter, busy = element_ptr(b, sync, 0, I64), element_ptr(b, sync, 1, I64)
    if shared:  # Note [Teams on a busy machine]: the caller's thread times its blocks
        caller = b.icmp_signed("==", b.call(_declare(module, "omp_get_thread_num", I32, []), []),
                               ir.Constant(I32, 0))
    head, body, nxt, done = (fn.append_basic_block(x) for x in ("head", "body", "next", "done"))
    entry = b.block
    b.branch(head)
    b.position_at_end(head)
    if shared:
        c = b.atomic_rmw("add", counter, ir.Constant(I64, 1), "monotonic")
    else:
        c = b.phi(I64, "c")
        c.add_incoming(ir.Constant(I64, 0), entry)
    b.cbranch(b.icmp_signed("<", c, ir.Constant(I64, len(calls))), body, done)
    b.position_at_end(body)
    # The blocks' pointer offsets and loops come from tables indexed by c, so each distinct
    # loop has one call site: one inlined copy, not one per block (61 copies of a vectorised
    # exp/sin loop took `elementwise`'s first call from ~0.1 to ~0.3 s).
    callees = list(dict.fromkeys(callee for callee, _ in calls))
    offsets = _table(module, fn.name + ".offsets", [o for _, offs in calls for o in offs])
    args = [b.gep(p, [b.load(b.gep(offsets, [b.add(b.mul(c, ir.Constant(I64, n)),
                                                    ir.Constant(I64, k))], inbounds=True,
                                        source_etype=I64), typ=I64)],
                  inbounds=True, source_etype=I8) for k, p in enumerate(ptrs)]
    start = _cycles(b) if shared else None
    if len(callees) == 1:
        b.call(callees[0], args)
    else:
        which = _table(module, fn.name + ".loops", [callees.index(f) for f, _ in calls])
        k = b.load(b.gep(which, [c], inbounds=True, source_etype=I64), typ=I64)
        after = fn.append_basic_block("called")
        switch = b.switch(k, after)
        for j, callee in enumerate(callees):
            case = fn.append_basic_block(f"loop{j}")
            switch.add_case(ir.Constant(I64, j), case)
            b.position_at_end(case)
            b.call(callee, args)
            b.branch(after)
        b.position_at_end(after)
    if shared:
        with b.if_then(caller):
            b.store(b.add(b.load(busy, typ=I64), b.sub(_cycles(b), start)), busy)
    b.branch(nxt)
    b.position_at_end(nxt)
    if not shared:
        c.add_incoming(b.add(c, ir.Constant(I64, 1)), nxt)
    b.branch(head)
    b.position_at_end(done)
    b.ret_void()
    return fn


__all__ = ["num_threads", "available", "threaded", "plan", "batches", "emit_parallel",
           "run_blocks", "blocks_of", "Split", "PARALLEL_MIN_ELEMENTS"]
