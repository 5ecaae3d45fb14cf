"""Structured control flow in the IR: the operand/region conventions of `cond`, `for_loop`,
`while_loop` and `fusion`, and builder helpers that emit them (used by the tracer and tests).

Every helper runs inside an active Builder (`with builder:`) and returns a tuple of Values.
"""
from __future__ import annotations

import numpy as np

from llgrad.runtime.aval import I64, BOOL, Aval, aval_str
from llgrad.runtime.errors import ShapeError
from llgrad.runtime.ops.control import cond_p, for_loop_p, while_loop_p
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


def custom_parts(op) -> tuple[list, list, list]:
    """(xs, closed, values) of a custom_vjp op (Note [Control-flow ops])."""
    n_x, n = len(op.regions[0].results), len(op.inputs) - len(op.outputs)
    return op.inputs[:n_x], op.inputs[n_x:n], op.inputs[n:]
