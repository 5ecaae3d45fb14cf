"""compile_functions: several IR functions -> one LLVM module -> native entries callable on
numpy arrays (a `CompiledModule`, compiled.py: `m[name](*arrays) -> list[ndarray]`).

Each entry is an `i64(void**)` kernel (abi.py) over [params..., results..., workspace],
returning 0 or the status of a failure (native_errors.py).
Constants are private module globals. Loading cached object code (compiled.load_object) does
not import this module, so the lowering loads only when something is compiled.
"""
from __future__ import annotations

import itertools
import time

import numpy as np
from llvmlite import ir

from llgrad.runtime import config
from llgrad.runtime.ops.control import cond_p, constant_p, for_loop_p
from llgrad.runtime.ops.index import index_put_p, scatter_add_p
from llgrad.runtime.ops.window import dynamic_window_p, window_update_p
from llgrad.transform import control

from . import abi, jit, outline
from .abi import ALIGN
from .compiled import CompiledModule, assemble
from .elementwise import memtype
from .lower import emit_function
from .plan import ControlUnit, FunctionPlan, GroupUnit, OpUnit
from .ranges import Ranges

_MODULE_IDS = itertools.count()


class _Constants:
    """Private globals holding constant arrays, one per IR constant value."""

    def __init__(self, module: ir.Module, prefix: str):
        self.module, self.prefix, self.cache = module, prefix, {}
        self.bytes = 0

    def __call__(self, value) -> ir.Value:
        g = self.cache.get(value)
        if g is None:
            arr = np.ascontiguousarray(value.op.params["value"], dtype=value.aval.dtype)
            data = bytearray(arr.tobytes()) or bytearray(b"\0")
            ty = ir.ArrayType(ir.IntType(8), len(data))
            g = ir.GlobalVariable(self.module, ty, f"{self.prefix}.const{len(self.cache)}")
            g.initializer = ir.Constant(ty, data)
            g.global_constant, g.linkage, g.align = True, "private", ALIGN
            self.cache[value] = g
            self.bytes += len(data)
        return g


def compile_functions(fns: dict, *, symbol_prefix: str | None = None,
                      keep_object: bool = False) -> CompiledModule:
    """Compile IR functions into one native module; `m[name](*arrays)` calls one.

    Args:
        fns: entry name -> ir.Function (e.g. {"forward": f, "joint": f_and_grad}).
        symbol_prefix: a process-independent name for the module's symbols (the disk cache
            uses a content hash); default: a per-process counter.
        keep_object: keep the native object code in `.object_code` (for the disk cache).

    Returns:
        A CompiledModule; each entry returns a list of fresh numpy arrays, one per result.

    Raises:
        UnsupportedError: an op has no lowering (the message names the primitive and line).
    """
    from . import lowerings  # noqa: F401  (registers every lowering)
    j = jit.get_jit()
    t0 = time.perf_counter()
    mid = symbol_prefix or str(next(_MODULE_IDS))
    module = ir.Module(name=f"llgrad{mid}")
    stats: dict = {"ops": {}}
    kernels, plans, workspace = {}, {}, 0
    for name, fn in fns.items():
        plan = FunctionPlan(fn)
        for op in fn.walk():
            stats["ops"][op.prim.name] = stats["ops"].get(op.prim.name, 0) + 1
        symbol = f"llgrad{mid}_{_ident(name)}"
        consts = _Constants(module, symbol)
        n, sites, record, tapes = emit_function(  # Note [Subnormals in gradient code]
            plan, module, symbol, consts, stats, flush_subnormals=name != "forward")
        kernels[name] = (symbol, n, sites, record, tapes)
        plans[name] = plan
        workspace = max(workspace, record + 8)  # the error record ends the workspace
        stats[f"constant bytes ({name})"] = consts.bytes
        stats[f"workspace bytes ({name})"] = plan.workspace
    stats["loops shared"] = outline.finish(module)
    support = {}  # See Note [Support functions in kernel modules] in abi.py
    if keep_object or not abi.support_ready():
        support = abi.define_support(module, f"llgrad{mid}.")
    llvm_ir = str(module)
    t1 = time.perf_counter()
    stats["opt level"] = level = opt_level(plans.values(), llvm_ir.count("\n"),
                                           "llvm.loop.unroll.full" in llvm_ir)
    with jit._lock:  # llvmlite objects are not thread safe (jit.py, Note [One JIT per process])
        mod = j.parse(llvm_ir)
        t2 = time.perf_counter()
        j.optimize(mod, level)
        t3 = time.perf_counter()
        names = [s for s, *_ in kernels.values()] + list(support.values())
        if keep_object:  # one machine-code pass: load the object code the disk cache keeps
            obj = j.target.machine.emit_object(mod)
            addresses = j.add_object(obj, names, check=False)  # LLVM's own output
        else:
            obj, addresses = None, j.add(mod, names)
        t4 = time.perf_counter()
        j.compile_seconds += t4 - t1
    stats.update({"workspace bytes": workspace, "lower seconds": t1 - t0,
                  "parse seconds": t2 - t1, "optimize seconds": t3 - t2,
                  "machine code seconds": t4 - t3, "compile seconds": t4 - t0})
    for v in [v for fn in fns.values() for v in fn.params + fn.outputs]:
        memtype(v.aval.dtype)  # every boundary dtype is supported
    layout = {name: (symbol, n, [(tuple(v.aval.shape), np.dtype(v.aval.dtype))
                                 for v in fns[name].params],
                     [(tuple(v.aval.shape), np.dtype(v.aval.dtype)) for v in fns[name].outputs],
                     sites, record, tapes)
              for name, (symbol, n, sites, record, tapes) in kernels.items()}
    abi.adopt_support({name: addresses[symbol] for name, symbol in support.items()})
    cm = assemble(layout, addresses, llvm_ir, stats, workspace)
    cm.object_code, cm.support = obj, support
    return cm


def opt_level(plans, ir_lines: int, unrolled: bool = False) -> int:
    """The LLVM optimisation level of a module of `ir_lines` lines of LLVM IR (Note [Choosing
    the optimisation level]); LLGRAD_OPT_LEVEL (or config opt_level) overrides it."""
    forced = config.opt_level()
    if forced is not None:
        return forced
    if any(_windows_in_loops(p.top) for p in plans):
        return 2  # Note [Loops over windows of run-time length]
    plans = [(p, _Trips(p)) for p in plans]
    if sum(_estimate(p.top, _vectorizer_work, t) for p, t in plans) >= VECTORIZER_WORK:
        return 2
    light = ir_lines >= LIGHT_MIN_LINES and \
        max([_estimate(p.top, _touched, t) for p, t in plans] or [0]) < LIGHT_WORK * ir_lines
    return 0 if light else 2 if unrolled else 1


# Note [Choosing the optimisation level]
# Most of our loops are vectorised by hand (Note [Explicit vector loops]) and small matmuls
# are register-blocked (Note [Rows in registers]), so what O2 adds to O1 (LLVM's loop and
# SLP vectorisers, runtime unrolling, more inlining and value numbering) changes nothing
# measurable on them, while it costs 30-100% more LLVM time: on the benchmark workloads O1
# runs within 3% of O2 and O3 (interleaved runs, one process). The exceptions are lowerings
# written as scalar loops that LLVM's vectoriser speeds up: gathers and scatters (1.6x at
# 10^6 elements; not the slab copies of scalar indices, x[t] and x[t] = v), scans (2x),
# sorts, argmax, and reductions over a middle axis (1.3x). A module whose such units handle
# VECTORIZER_WORK elements or more per call (a unit in a loop counts once per iteration, as
# `_Trips` counts them: a reverse sweep, whose count is the forward loop's, as often as the
# static loop before it or the longest loop at its depth, so a hand-written Cholesky's
# nested sweeps at n = 10 count 10 trips, not LOOP_GUESS) is optimised at O2.
# A module whose entries each touch fewer than LIGHT_WORK array elements a call per line of
# its LLVM IR (every operand and result of every unit, a slice for indexing and tapes, a
# unit in a loop once per iteration, counted as for VECTORIZER_WORK) runs in at most a few
# hundred us: its first call costs as much as thousands of calls, so it gets the light
# pipeline (level 0; jit.py, Note [The light pipeline]), which takes a quarter off its first
# call and costs up to ~15% a call (tanh RNN, hidden 16, batch 8: T=5 touches 3*10^4
# elements, 8.7 -> 9.3 us a call; T=40 2.1*10^5, 39 -> 44 us; T=80 4.2*10^5, 76 -> 84 us;
# an LSTM at T=8, 1.6*10^5, and softmax regression: 1-3%). Per line, because what the light
# pipeline saves grows with the IR (LLVM's time) and what it costs with the work: the calls
# it takes to win back the time saved. A flat bound made the RNN (1469 lines) switch to O1
# between T = 40 and 80, its staged loop's IR the same, and its first call grow 1.34x
# (CPU, 132 -> 172 ms) for one doubling of T; per line, the switch comes at T ~ 110, and
# the MLP (1032 lines, 4*10^5 elements) stays at O1. Unless
# the module is small (under LIGHT_MIN_LINES lines of LLVM IR): O1 then costs only a few ms
# more, and loops whose scalar state stays in memory without LICM run ~20% slower (the
# benchmark's 100-op chain: 6.8 -> 8.3 us a call). The benchmark workloads touch 4*10^5
# (MLP) to 10^10 elements. Every other module is optimised at O1.
# A staged loop of LONG_LOOP or more iterations whose body reads or writes array elements
# (`u_new[i, j] = c * (u[i - 1, j] + ...)`, Numba-style code) is such a scalar loop too: each
# element access counts 8 per iteration. At O2 the 128x128 stencil of
# benchmarks/workloads/numba_style.py runs its forward 1.8x faster, its gradient 1.15x (CPU
# time); the GMM of scalar loops, whose loops run 10 and 25 times, would gain 5% for 50%
# more LLVM time, and stays at O1 (issue 13). Loops over windows of run-time length are
# O2 at every size (Note [Loops over windows of run-time length]). A module that asks LLVM
# to unroll small loops (codegen/unroll.py, Note [Unrolled small loops]) and is not light
# is O2: its unrolled scalar code gains from the SLP vectoriser and O2's scalar passes
# (gmm_loops' value and gradient 1.50 -> 1.17 ms, forward 0.39 -> 0.34 ms; LLVM time about
# the same, the unrolled code coming out smaller).

VECTORIZER_WORK = 1 << 14
LONG_LOOP = 64
LIGHT_WORK = 320  # elements per line of LLVM IR
LIGHT_MIN_LINES = 500
LOOP_GUESS = 1000


# Note [Loops over windows of run-time length]
# A staged loop over slices whose length is a loop variable (`L[i, :j]`, `x[:i] @ y[:i]`:
# runtime/padded.py) is the hand-written linear algebra of issue 12: a Cholesky
# factorisation, triangular solves, Gram-Schmidt. Its windows (dynamic_window,
# window_update) and their gradients' scatters are scalar loops LLVM's vectoriser speeds up,
# each as long as the padded extent (n), run n^2 times by the nest, so the estimate above
# passes VECTORIZER_WORK as n grows, between n = 10 and 25 for the benchmark's Cholesky +
# solve: its IR, and the cost of each level, stay the same at every n, but its first call
# jumped 2.5x (CPU 200 ms at the light level, 540 ms at O2) where the level switched. What
# grew with n was the estimate of the work, not the program. Such modules are therefore
# optimised at O2 whatever their size: the first call costs the same at n = 10, 25 and 50
# (0.53, 0.61, 0.62 s CPU on a loaded machine) and the calls keep O2's gain (n = 25: 83 us
# against O1's 97 and the light level's 108; n = 50: 2.1 ms against 2.5 and 3.2 ms). Small
# sizes pay for it: at n = 10 the light level took 0.2 s, and its calls were as fast
# (6-6.5 us at every level).
def _windows_in_loops(block, in_loop: bool = False) -> bool:
    """Whether a window of run-time length (dynamic_window, window_update) is read or
    written inside a for or while loop of `block`."""
    for u in block.units:
        if isinstance(u, ControlUnit):
            loop = in_loop or u.op.prim is not cond_p
            if any(_windows_in_loops(b, loop) for b in u.blocks):
                return True
        elif in_loop and isinstance(u, OpUnit) and u.op is not None and \
                u.op.prim in _WINDOWS:
            return True
    return False


class _Trips:
    """Trip counts of a plan's loops for the estimates above: static, or the most the IR
    allows (codegen/ranges.py: `range(j + 1, n)`); a loop with neither (a reverse sweep) runs
    as often as the static loop before it in its block, else as the most any loop at its
    depth runs, else LOOP_GUESS times; a while loop LOOP_GUESS times."""

    def __init__(self, plan):
        self.ranges, self.by_depth = Ranges(plan.fn), {}
        self._scan(plan.top, 0)

    def _scan(self, block, depth: int) -> None:
        for u in block.units:
            if isinstance(u, ControlUnit):
                loop = u.op.prim is not cond_p
                n = _trips(u.op, self.ranges) if loop else None
                if n is not None:
                    self.by_depth[depth] = max(self.by_depth.get(depth, 0), n)
                for blk in u.blocks:
                    self._scan(blk, depth + loop)


def _estimate(block, unit_work, trips: _Trips, scale: int = 1, depth: int = 0,
              inner: int = 1) -> int:
    """The sum of `unit_work(unit, inner)` over the units `block` runs, each loop body's as
    often as the loop runs; `inner` is the trip count of the innermost enclosing for loop
    (0 for a while loop or an unknown count)."""
    work, guess = 0, None
    for u in block.units:
        if isinstance(u, ControlUnit):
            loop = u.op.prim is not cond_p
            n = _trips(u.op, trips.ranges) if loop else 1
            body_trips = inner if not loop else (n or 0) if u.op.prim is for_loop_p else 0
            if n is None:
                n = guess if guess is not None else trips.by_depth.get(depth, LOOP_GUESS)
            elif loop:
                guess = n
            work += sum(_estimate(blk, unit_work, trips, scale * n, depth + loop, body_trips)
                        for blk in u.blocks)
        else:
            work += scale * unit_work(u, inner)
    return work


def _vectorizer_work(u, inner: int) -> int:
    """Elements a unit handles in a scalar loop LLVM's vectoriser speeds up (`inner`: the
    enclosing for loop's trip count)."""
    if isinstance(u, GroupUnit):
        axes = set(u.red_axes or ())
        if u.reds and len(u.shape) >= 3 and any(
                a in axes and a + 1 not in axes for a in range(len(u.shape) - 1)):
            return _elements(u.shape)
    elif isinstance(u, OpUnit):
        arrays = _SCALAR_LOOPS.get(u.op.prim.family, lambda op: ())(u.op)
        n = max([_elements(v.aval.shape) for v in arrays if None not in v.aval.shape] or [0])
        if not n and inner >= LONG_LOOP and u.op.prim.family == "index":
            n = 8  # an element access in a long staged loop: that is the scalar loop
        return n if n >= 8 else 0  # fewer elements than a vector: nothing to gain
    return 0


def _touched(u, inner: int = 1) -> int:
    """Array elements a unit reads and writes (see LIGHT_WORK)."""
    if isinstance(u, GroupUnit):
        return _elements(u.shape) * max(1, len(u.ops))
    if u.op is None:
        return 0
    sizes = [_elements(v.aval.shape) for v in (*u.op.inputs, *u.op.outputs)
             if v.aval.shape and None not in v.aval.shape]
    if u.op.prim.family in _SLICING:  # touches a slice of its largest operand
        sizes = sorted(sizes)[:1]
    return sum(sizes)


_WINDOWS = frozenset({dynamic_window_p, window_update_p})
_SLICING = frozenset({"index", "tape", "codegen"})  # (codegen: plan.py's accumulate)


def _trips(op, ranges) -> int | None:
    """A for_loop's static trip count, or the most it can run when the IR bounds its range
    (codegen/ranges.py: `range(j + 1, n)`, a reverse sweep over a bounded count); None when
    unknown; LOOP_GUESS for a while loop."""
    if op.prim is not for_loop_p:
        return LOOP_GUESS
    bounds = []
    for v in control.bounds(op):
        if v.op is None or v.op.prim is not constant_p:
            return ranges.most_trips(op)
        bounds.append(int(v.op.params["value"]))
    return len(range(*bounds))


def _scattered(op) -> list:
    """The values an `accumulate` (plan.py) scatters: after its bases, each g and its indices."""
    out, pos = [], op.params["nbases"]
    for _, n_idx, _ in op.params["scatters"]:
        out.append(op.inputs[pos])
        pos += 1 + n_idx
    return out


def _indexed(op) -> list:
    if op.prim is scatter_add_p:
        return op.inputs[:1]  # the updates
    indices = op.inputs[2:] if op.prim is index_put_p else op.inputs[1:]
    if all(v.aval.shape == () for v in indices):
        return []  # x[i] (= v) with scalar indices: a slab copy at a computed offset
    return op.inputs[1:2] if op.prim is index_put_p else op.outputs  # a scatter, a gather


# The lowerings written as scalar loops, by primitive family: the arrays whose size is the
# number of elements they handle per run (a gather's result, a scatter's updates, a scan's
# or a sort's input).
_SCALAR_LOOPS = {
    "index": _indexed,
    "codegen": _scattered,  # plan.py's accumulate
    "scan": lambda op: op.inputs[:1], "sort": lambda op: op.inputs[:1],
    "reduce": lambda op: op.inputs[:1],  # argmax, argmin (reductions are GroupUnits)
}


def _elements(shape) -> int:
    return int(np.prod(shape, dtype=np.int64))


def _ident(name: str) -> str:
    return "".join(c if c.isalnum() else "_" for c in name)
