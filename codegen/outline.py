"""Outlined loops: a fused elementwise/reduction loop (a GroupUnit) over an array becomes an
internal function of the module, one per distinct loop, called with the unit's pointers.

Two units share a function exactly when everything their code is made of is equal: the
loop shape, reduction axes, each operand's strides and dtype (or immediate value), result
dtypes, and the ops (primitive, parameters, operand wiring, dtypes); only pointers differ,
and they are the arguments. See Note [Outlined loops].
"""
from __future__ import annotations

import weakref

import numpy as np
from llvmlite import ir

from . import elementwise as ew
from . import threads
from .layout import contiguous_strides
from .loops import PTR

# A loop over fewer elements stays inline (LLVM keeps small values in registers there),
# unless the function is big: BIG_PLAN units or more.
OUTLINE_MIN_ELEMENTS = 64
BIG_PLAN = 256
# Nor is a loop reading more arrays than this outlined: passing them costs more than the
# loop (the gradient of a weight used at every step of an unrolled loop adds one product
# per step, all in one loop).
OUTLINE_MAX_ARGS = 32

# Note [Outlined loops]
# A loop unrolled at trace time repeats the same fused loops once per iteration (a tanh RNN
# over 40 steps: 40 identical `tanh(a + b + c)` loops, and as many in the gradient), and
# LLVM's cost grows faster than the function it optimises (induction-variable
# simplification over many loops, dead-store elimination, value numbering, scheduling). So
# each distinct loop over OUTLINE_MIN_ELEMENTS or more is one internal function (its
# pointers as arguments, without `noalias`: an in-place update reads and writes one buffer,
# Note [In-place accumulation]): `noinline` when called from two or more places, so LLVM
# optimises it once, and `alwaysinline` when called once, which gives back exactly the
# inline loop. The key is built from the same data the loop's code is emitted from, so
# equal keys emit equal code. A call costs a few nanoseconds next to a loop of 64 elements.
# A big function (BIG_PLAN units: a long unrolled or straight-line program) outlines every
# loop over two or more elements and inlines none of them, so no LLVM function grows with
# the program: 4400 traced ops on vectors of 16 compiled in 0.7 s instead of 5.5 s, and
# ran 7% slower for the calls.

_FUNCTIONS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # module -> _Outlined
_BIG: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # plan -> bool


class _Outlined:
    """A module's outlined loops: key -> [function, calls], and whether a big plan uses them."""

    def __init__(self):
        self.functions: dict = {}
        self.big = False


def _is_big(plan) -> bool:
    big = _BIG.get(plan)
    if big is None:
        big = _BIG[plan] = sum(1 for _ in plan.all_units()) >= BIG_PLAN
    return big


def emit_group_loops(ctx, g, ins: list, operands: list, outs: list, reductions: list,
                     stored: list, compute) -> None:
    """Emit GroupUnit `g`'s loop (ew.emit_loops over its parts), inline or as a call."""
    emit_loops(ctx, g.shape, operands, outs, compute, reductions, g.red_axes or (),
               _code_key(g, ins, stored), sum(1 for op in g.ops if op.prim.expensive))


def emit_loops(ctx, shape, operands: list, outs: list, compute, reductions=(), red_axes=(),
               code=("copy",), expensive: int = 0) -> None:
    """`ew.emit_loops(ctx.b, ...)`, inline for small loops, else a call of the module's
    function for this loop (made on first use), on several threads when it is large
    (codegen/threads.py). `code` identifies what `compute` emits (the default: it returns
    its operands, a copy), which computes `expensive` transcendental functions or the like
    per element."""
    big = _is_big(ctx.plan)
    n_args = sum(o.ptr is not None for o in operands) + len(outs) + len(reductions)
    if int(np.prod(shape, dtype=np.int64)) < (2 if big else OUTLINE_MIN_ELEMENTS) or \
            n_args > OUTLINE_MAX_ARGS:
        ew.emit_loops(ctx.b, shape, operands, outs, compute, reductions, red_axes)
        return
    outlined = _FUNCTIONS.setdefault(ctx.module, _Outlined())
    outlined.big |= big
    # strides of the whole loop's results: a block of a split loop has a shape of its own
    outs = [o if len(o) > 2 else (*o, contiguous_strides(shape)) for o in outs]

    def function(shape):
        key = (code, tuple(shape), tuple(red_axes),
               tuple(_freeze(o.value) if o.ptr is None else (o.strides, np.dtype(o.dtype).str)
                     for o in operands),
               tuple((np.dtype(o[1]).str, *(tuple(x) for x in o[2:])) for o in outs),
               tuple((kind, np.dtype(dt).str) for kind, _, dt in reductions))
        table = outlined.functions
        entry = table.get(key)
        if entry is None:
            fn = ir.Function(ctx.module, ir.FunctionType(ir.VoidType(), [PTR] * n_args),
                             f"llgrad.loop{len(table)}")
            fn.linkage = "internal"
            fn.attributes.add("nounwind")
            args = iter(fn.args)
            f_ops = [o if o.ptr is None else ew.Operand(ptr=next(args), strides=o.strides,
                                                        dtype=o.dtype) for o in operands]
            f_outs = [(next(args), *o[1:]) for o in outs]
            f_reds = [(kind, next(args), dt) for kind, _, dt in reductions]
            b = ir.IRBuilder(fn.append_basic_block("entry"))
            ew.emit_loops(b, shape, f_ops, f_outs, compute, f_reds, red_axes)
            b.ret_void()
            entry = table[key] = [fn, 0]
        entry[1] += 1
        return entry[0]

    split = threads.plan(shape, reductions, red_axes, expensive)
    if split is not None:  # Note [Threads in kernels]
        threads.emit_parallel(ctx, shape, operands, outs, reductions, red_axes, split,
                              function)
        return
    ctx.b.call(function(shape), [o.ptr for o in operands if o.ptr is not None]
               + [o[0] for o in outs] + [r[1] for r in reductions])


def finish(module: ir.Module) -> int:
    """Mark each outlined function of `module` by its number of callers (see the Note);
    returns how many loops were shared."""
    shared = 0
    outlined = _FUNCTIONS.pop(module, None) or _Outlined()
    for fn, calls in outlined.functions.values():
        fn.attributes.add("noinline" if calls > 1 or outlined.big else "alwaysinline")
        shared += calls - 1
    return shared


def _code_key(g, ins, stored) -> tuple:
    """What a GroupUnit's `compute` emits: its ops (primitive, parameters, dtype, wiring)."""
    index = {v: ("in", k) for k, v in enumerate(ins)}
    ops = []
    for k, op in enumerate(g.ops):
        ops.append((op.prim, _freeze(op.params), np.dtype(op.outputs[0].aval.dtype).str,
                    tuple(index[v] for v in op.inputs)))
        index[op.outputs[0]] = ("op", k)
    return ("group", tuple(ops), tuple(index[v] for v in stored),
            tuple((op.prim, index[op.inputs[0]]) for op in g.reds))


def _freeze(x):
    """A hashable form of `x` that tells apart what emits different code (-0.0 and 0.0, 1
    and 1.0 and True: equal in Python, not in a kernel)."""
    if isinstance(x, dict):
        return tuple(sorted((k, _freeze(v)) for k, v in x.items()))
    if isinstance(x, (list, tuple)):
        return (type(x).__name__, tuple(_freeze(v) for v in x))
    if isinstance(x, np.ndarray):
        return ("ndarray", x.shape, x.dtype.str, x.tobytes())
    if isinstance(x, np.dtype):
        return ("dtype", x.str)
    return (type(x).__name__, repr(x))
