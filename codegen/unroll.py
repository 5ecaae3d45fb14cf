"""Which counted loops LLVM is asked to unroll fully, and the loop options that say so
(Note [Unrolled small loops]); used by the for-loop lowering (lowerings/control.py)."""
from __future__ import annotations

from llvmlite import ir

from llgrad.runtime.ops.control import constant_p, for_loop_p, fusion_p, while_loop_p
from llgrad.runtime.ops.elementwise import add_p, maximum_p, minimum_p, mul_p, neg_p, sub_p
from llgrad.transform import control

from .plan import ControlUnit, GroupUnit

# Note [Unrolled small loops]
# A for-loop that writes few elements in all (it does not poll: Note [Where loops poll] in
# lowerings/control.py), runs at most UNROLL_TRIPS iterations and at most UNROLL_OPS ops with
# its inner loops unrolled (`unrolled_ops`, by the trip counts codegen/ranges.py proves), and
# whose bounds are constants once the loops around it are unrolled (`fixed_bounds`), asks LLVM
# to unroll it fully (`llvm.loop.unroll.full`): the loops over d = 10 dimensions and the
# triangle of a 10x10 matrix (`for c in range(d): for r in range(c + 1, d)`) of a Numba-style
# GMM, forward and reverse. LLVM unrolls such a loop at every level, the inner loops of an
# unrolled loop once their bounds are constants. Unrolled, the small work arrays those loops
# update element by element are read and written at constant offsets, and SROA keeps them in
# registers (Note [Small arrays on the stack] in plan.py); the short inner loops' exits,
# mispredicted each time their trip count changes (9, 8, ..., 1), disappear; the products
# of the triangle's columns are vectorised by the SLP vectoriser. A loop around an unrolled
# loop is not vectorised (`llvm.loop.vectorize.enable` false): LLVM's loop vectoriser ran the
# unrolled bodies of 8 iterations of gmm_loops' loop over components side by side, reading
# their elements with gathers (forward 0.34 -> 0.49 ms). A module with unrolled loops is
# optimised at O2 (codegen/compile.py, Note [Choosing the optimisation level]).
# A loop whose iterations write more than UNROLL_ELEMENTS elements in all is not marked either:
# its body runs array ops, whose own element loops LLVM then unrolls fully in every copy (a
# Gaussian blur's 5x5 loop over kernel offsets, each adding an 8x8 window: 25 x 64 elements
# straight-line; the first value_and_grad took 1.5 s of CPU, 0.35 s rolled; a Sobel filter's
# 7x7 loop over output pixels, 3x3 patches, 1.0 -> 0.13 s), while scalar loops, which are
# what unrolling is for, write a few elements an op (the largest marked in the numba-style
# tests writes 1775).
# Bounds LLVM cannot see as constants after unrolling are not marked: LLVM warns on stderr
# about every loop it was asked to unroll and could not (it unrolled loops of 5600 ops).
# gmm_loops (d=10, k=25, n=1000; CPU time, load ~3-5, with the small arrays on the stack):
# forward 0.94 -> 0.35 ms, value and gradient 2.65 -> 1.2 ms; the first value_and_grad
# call's CPU time 0.33 -> 0.50 s (LLVM 210 -> 430 ms). With UNROLL_OPS = 700 the reverse
# sweep's triangle stays rolled (1.64 ms); unrolling nothing: 2.43 ms.
UNROLL_TRIPS, UNROLL_OPS, UNROLL_ELEMENTS = 16, 1200, 2048
_FIXED_OPS = (add_p, sub_p, mul_p, neg_p, maximum_p, minimum_p)


def wanted(ctx, loop, body, trips: int, work: int) -> bool:
    """Whether for-loop `loop`, which does not poll and runs `body` (writing `work` elements
    a run) at most `trips` times, is to be unrolled."""
    if trips > UNROLL_TRIPS or not fixed_bounds(ctx, loop):
        return False
    ops = unrolled_ops(ctx, [body])
    return ops is not None and trips * ops <= UNROLL_OPS and trips * work <= UNROLL_ELEMENTS


def unrolled_ops(ctx, blocks) -> int | None:
    """Ops `blocks` run with their inner for-loops unrolled; None when a loop is unbounded."""
    total = 0
    for u in (u for blk in blocks for u in blk.units):
        if isinstance(u, ControlUnit):
            trips = ctx.ranges.most_trips(u.op) if u.op.prim is for_loop_p else 1
            inner = unrolled_ops(ctx, u.blocks) if u.op.prim is not while_loop_p else None
            if trips is None or inner is None:
                return None
            total += 1 + max(trips, 0) * inner
        else:
            total += len(u.ops) + len(u.reds) if isinstance(u, GroupUnit) else 1
    return total


def fixed_bounds(ctx, loop) -> bool:
    """Whether for-loop `loop`'s bounds are constants once the loops around it that LLVM is
    asked to unroll are: computed by `_FIXED_OPS` from constants and those loops' counters
    (`ctx.fixed`)."""
    def fixed(v, env, depth=0) -> bool:
        v = env.get(v, v)
        if v.op is None:
            return v in ctx.fixed
        if depth > 12:
            return False
        if v.op.prim is constant_p:
            return True
        if v.op.prim is fusion_p:
            body = control.body(v.op)
            inner = dict(zip(body.params, [env.get(w, w) for w in control.state(v.op)]))
            k = next(k for k, w in enumerate(v.op.outputs) if w is v)
            return fixed(body.results[k], inner, depth + 1)
        return v.op.prim in _FIXED_OPS and v.aval.shape == () and \
            all(fixed(w, env, depth + 1) for w in v.op.inputs)
    return all(fixed(v, {}) for v in control.bounds(loop))


def loop_options(ctx, loop, unroll: bool):
    """The options of for-loop `loop`, asked at its back edge once its body is emitted:
    unroll fully, or, when loops inside it are unrolled, do not vectorise."""
    inner = ctx.unrolled
    if unroll:
        ctx.fixed.add(control.counter(loop))

    def options() -> list[str]:
        if unroll:
            ctx.unrolled += 1
            return ["llvm.loop.unroll.full"]
        return ["llvm.loop.vectorize.enable"] if ctx.unrolled > inner else []
    return options


def set_loop_options(b: ir.IRBuilder, latch, options: list[str]) -> None:
    """Give the loop whose back edge is `latch` `options` (a loop ID is a metadata node whose
    first operand is itself; "llvm.loop.vectorize.enable" is set to false)."""
    m = b.module
    ops = [m.add_metadata([ir.MetaDataString(m, name)] +
                          ([ir.Constant(ir.IntType(1), 0)] if name.endswith(".enable") else []))
           for name in options]
    loop_id = ir.values.MDValue(m, [], name=str(len(m.metadata)))
    loop_id.operands = (loop_id, *ops)
    latch.set_metadata("llvm.loop", loop_id)
