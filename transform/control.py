"""Structured control flow in the IR: the operand/region conventions of `cond`, `for_loop`,
`while_loop` and `fusion`, and builder helpers that emit them (used by the tracer and tests).

Every helper runs inside an active Builder (`with builder:`) and returns a tuple of Values.
"""
from __future__ import annotations

import numpy as np

from llgrad.runtime.aval import I64, BOOL, Aval, aval_str
from llgrad.runtime.errors import ShapeError
from llgrad.runtime.ops.control import cond_p, for_loop_p, fusion_p, while_loop_p
from llgrad.transform import ir
from llgrad.transform.builder import current

# Note [Control-flow ops]
# Regions may read values of enclosing regions directly (they are closures); everything a
# region yields is listed in `region.results`.
#
#   outs = cond(pred, *operands)                 regions [then, else]
#       pred: bool[] (a scalar). Each region has params with the operands' avals and yields
#       the outputs (same avals in both branches). Only the taken branch runs.
#   outs = for_loop(start, stop, step, *init)    regions [body]
#       start/stop/step: i64[] scalars, step != 0, Python `range` semantics (trip count
#       max(0, ceil((stop - start) / step))). body params (i: i64[], *carried) with carried
#       avals == init avals; body yields the next carried values. outs = the final carried
#       values (== init when the loop runs zero times).
#   outs = while_loop(*init)                     regions [cond, body]
#       cond params (*carried) yields one bool[]; body params (*carried) yields the next
#       carried values. outs = the carried values when cond first yields False.
#   outs = fusion(*inputs)                       regions [body]
#       body params mirror the inputs; the body holds only elementwise ops, broadcast_to and
#       constants; it yields the outputs. Made by passes/fuse.py; codegen emits one loop.
#   outs = custom_vjp(*xs, *closed, *values)     regions [bwd]     params {"name": str}
#       a custom derivative rule (runtime/custom.py): outs are `values` (as many as outs, the
#       outputs its forward computed before it); bwd params are the cotangents of outs, its
#       results the cotangents of xs (same avals; as many as xs), computed from values it
#       reads from the enclosing region (the residuals). `closed` are the float values the
#       forward read from outside its arguments: the rule gives no derivative for them, so
#       AD refuses one that needs it. transform/ad.py runs bwd where the reverse sweep
#       reaches the op; optimize() with fusion (the codegen pipeline) replaces it by its
#       values (passes/custom.py). `name` is the rule's, for printing.
# Op params are {} for the first four; nothing else is hidden in them.


def _as_value(b, x, dtype=None):
    if isinstance(x, ir.Value):
        return x
    return b.const(np.asarray(x, dtype=dtype))


def _check_same(what, got, want, loc=None):
    for k, (g, w) in enumerate(zip(got, want)):
        if g.aval.shape != w.shape or g.aval.dtype != w.dtype:
            raise ShapeError(f"{what}: value {k} is {aval_str(*g.aval)} but must stay "
                             f"{aval_str(*w)}", loc=loc,
                             fix="keep the shape and dtype of loop-carried and branch values "
                             "unchanged (cast explicitly with .astype)")
    if len(got) != len(want):
        raise ShapeError(f"{what}: {len(got)} values yielded, {len(want)} expected")


def _results(b, res, avals=None):
    """A body's return value -> list of Values (Python scalars take the expected dtype)."""
    res = list(res) if isinstance(res, (tuple, list)) else [res]
    return [_as_value(b, r, avals[k].dtype if avals and k < len(avals) else None)
            for k, r in enumerate(res)]


def for_loop(start, stop, step, body, *init) -> tuple:
    """Emit `for i in range(start, stop, step): carried = body(i, *carried)`."""
    b = current()
    bounds = [_as_value(b, v, I64) for v in (start, stop, step)]
    init = [_as_value(b, v) for v in init]
    avals = [v.aval for v in init]
    params = [b.new_value(((), I64), "i")] + [b.new_value(a) for a in avals]
    with b.open_region(params) as r:
        r.results = _results(b, body(*params), avals)
    _check_same("for-loop carried values", r.results, avals)
    return tuple(b.emit(for_loop_p, bounds + init, {}, avals, regions=[r]))


def while_loop(cond, body, *init) -> tuple:
    """Emit `while cond(*carried): carried = body(*carried)`."""
    b = current()
    init = [_as_value(b, v) for v in init]
    avals = [v.aval for v in init]
    cparams = [b.new_value(a) for a in avals]
    with b.open_region(cparams) as rc:
        rc.results = _results(b, cond(*cparams), [Aval((), BOOL)])
    _check_same("while-loop condition", rc.results, [Aval((), BOOL)])
    bparams = [b.new_value(a) for a in avals]
    with b.open_region(bparams) as rb:
        rb.results = _results(b, body(*bparams), avals)
    _check_same("while-loop carried values", rb.results, avals)
    return tuple(b.emit(while_loop_p, init, {}, avals, regions=[rc, rb]))


def cond(pred, then_fn, else_fn, *operands) -> tuple:
    """Emit `then_fn(*operands) if pred else else_fn(*operands)` (both branches traced)."""
    b = current()
    pred = _as_value(b, pred, BOOL)
    if pred.aval != Aval((), BOOL):
        raise ShapeError(f"cond: the predicate must be bool[], got {aval_str(*pred.aval)}")
    operands = [_as_value(b, v) for v in operands]
    regions = []
    for fn in (then_fn, else_fn):
        params = [b.new_value(v.aval) for v in operands]
        with b.open_region(params) as r:
            r.results = _results(b, fn(*params),
                                 [v.aval for v in regions[0].results] if regions else None)
        regions.append(r)
    then_r, else_r = regions
    _check_same("cond branches", else_r.results, [v.aval for v in then_r.results])
    return tuple(b.emit(cond_p, [pred] + operands, {}, [v.aval for v in then_r.results],
                        regions=regions))


# ---- the one description of each region op -------------------------------------------------
class ControlOp:
    """How one region op lays out its operands, regions and results (Note [Control-flow ops]).

    Every pass reads region ops through these accessors (or the functions below, which pick
    the op's layout), never by slicing `op.inputs` or `region.params`:
        lead(op)          the leading operands: cond's predicate, for_loop's (start, stop, step)
        state(op)         the operands that enter the regions as params: a loop's initial
                          carried values, cond's branch operands, fusion's inputs
        body(op)          the last region: a loop's body (cond's else branch)
        entries(op)       each region's params that receive the state (for_loop's body without
                          its counter; both regions of a while_loop and of a cond)
        yielding(op)      the regions whose results are the outputs (both branches of a cond)
    `n_regions` is the number of regions; `loop` says the body's results flow back into
    `entries` (for_loop, while_loop) and an op that runs zero times yields `state(op)`;
    `counter` that the body's param 0 is the iteration index (for_loop).
    """

    __slots__ = ("prim", "n_lead", "loop", "counter", "n_regions")

    def __init__(self, prim, n_lead: int, n_regions: int, *, loop=False, counter=False):
        self.prim, self.n_lead, self.n_regions = prim, n_lead, n_regions
        self.loop, self.counter = loop, counter

    def lead(self, op) -> list:
        return op.inputs[:self.n_lead]

    def state(self, op) -> list:
        return op.inputs[self.n_lead:]

    def body(self, op) -> ir.Region:
        return op.regions[-1]

    def carried(self, region) -> list:
        """`region`'s params that receive the state (the body's without its counter)."""
        return region.params[1:] if self.counter and region.params else region.params

    def entries(self, op) -> list[list]:
        return [self.carried(r) for r in op.regions]

    def yielding(self, op) -> list:
        return list(op.regions) if self.prim is cond_p else [op.regions[-1]]

    def drop(self, op, dead: set) -> None:
        """Remove the outputs in `dead` (dead-code elimination): with the results that yield
        them and, for a loop, the carried state (operands and params) behind them."""
        keep = lambda xs, off=0: [x for k, x in enumerate(xs) if k - off not in dead]
        if self.loop:
            op.inputs = op.inputs[:self.n_lead] + keep(self.state(op))
            for r in op.regions:
                r.params = keep(r.params, 1 if self.counter else 0)
        for r in self.yielding(op):
            r.results = keep(r.results)
        op.outputs = keep(op.outputs)


CONTROL: dict = {
    cond_p: ControlOp(cond_p, 1, 2),
    for_loop_p: ControlOp(for_loop_p, 3, 1, loop=True, counter=True),
    while_loop_p: ControlOp(while_loop_p, 0, 2, loop=True),
    fusion_p: ControlOp(fusion_p, 0, 1),
}


def describe(op) -> "ControlOp | None":
    """The layout of a region op that carries state (None for other ops)."""
    return CONTROL.get(op.prim)


# Named accessors (each checks nothing: the verifier checks layouts)
def pred(op):
    """cond's predicate."""
    return op.inputs[0]


def branches(op) -> tuple:
    """cond's (then, else) regions."""
    return op.regions[0], op.regions[1]


def bounds(op) -> list:
    """for_loop's [start, stop, step]."""
    return op.inputs[:3]


def counter(op) -> ir.Value:
    """for_loop's iteration index (the body's param 0)."""
    return op.regions[0].params[0]


def loop_test(op) -> ir.Region:
    """while_loop's condition region (params: the carried values; yields one bool[])."""
    return op.regions[0]


def state(op) -> list:
    return CONTROL[op.prim].state(op)


def body(op) -> ir.Region:
    return op.regions[-1]


def carried(op) -> list:
    """A loop body's params that receive the carried values."""
    return CONTROL[op.prim].carried(op.regions[-1])


def custom_parts(op) -> tuple[list, list, list]:
    """(xs, closed, values) of a custom_vjp op (Note [Control-flow ops])."""
    n_x, n = len(op.regions[0].results), len(op.inputs) - len(op.outputs)
    return op.inputs[:n_x], op.inputs[n_x:n], op.inputs[n:]


def custom_bwd(op) -> ir.Region:
    """custom_vjp's backward region (params: the outputs' cotangents; yields the xs')."""
    return op.regions[0]


def check_fail(op) -> ir.Value:
    """check's failure flag (bool[])."""
    return op.inputs[0]
