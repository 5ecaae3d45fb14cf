"""Checkpointed loops: a staged `for` loop of n iterations rewritten, before AD, as an outer
loop over segments of k iterations around an inner loop over one segment (plus a tail loop
for the n mod k rest), so that reverse mode stores the carried state once per segment and
recomputes a segment's iterations when its reverse sweep needs them (Note [Checkpointed
loops]).

Requires: a verified function. Produces: a verified function computing the same values, and
the set of ids of the inner (segment) loops, which transform/ad.py must not stack.
"""
from __future__ import annotations

import math

import numpy as np

from llgrad.runtime.aval import I64, Aval
from llgrad.runtime.errors import UnsupportedError
from llgrad.runtime.ops.control import constant_p, for_loop_p
from llgrad.runtime.ops.elementwise import add_p, mul_p
from llgrad.transform import control, ir
from llgrad.transform.control import CONTROL
from llgrad.transform.builder import Value
from llgrad.transform.passes import clone_function

# Note [Checkpointed loops]
# Reverse mode through a loop of n iterations keeps, per iteration, what its reverse sweep
# reads (Note [Loop tapes]): O(n) memory. With `@differentiate(checkpoint="sqrt")` every
# staged `for` loop at the top of the function with a static trip count n (at least
# `MIN_TRIPS`) becomes
#     for s in range(n // k):                 # outer: tapes its carried state per segment
#         for t in range(k):                  # inner: one segment, never stacked
#             i = start + (s * k + t) * step
#             <body>
#     for t in range(n // k * k, n):          # the rest, a plain loop
#         i = start + t * step
#         <body>
# with k = ceil(sqrt(n)) (or the given int). AD does not stack the inner loop (Note [Stacked
# inner tapes]): the outer forward runs it without tapes, and the outer reverse sweep reruns
# it with tapes of k rows from the segment's entry state, then runs its reverse sweep. So
# the tapes hold n // k rows of carried state plus k rows of one segment (both O(sqrt n) for
# k = sqrt n) instead of n rows of everything, and the forward runs twice: the time is that
# of one more forward sweep (tests/e2e/test_checkpoint.py, benchmarks/checkpointing.py).
# The values are those of the plain loop: the recomputation runs the same operations on the
# same inputs, and cotangents are summed in the same order (Note [Running cotangents of
# segments]); fused kernels of another shape may round differently (rtol 1e-13). Loops with run-time bounds and while loops are left as they are (their trip count
# is known only while they run); `inspect().stats` says how many loops were checkpointed.
MIN_TRIPS = 4


def segment_length(schedule, n: int) -> int:
    """The segment length k for a loop of n iterations."""
    if schedule == "sqrt":
        return max(1, math.isqrt(n - 1) + 1) if n > 1 else 1
    return int(schedule)


def check_schedule(schedule) -> None:
    """Raise for a checkpoint option that is neither None, "sqrt" nor a positive int."""
    if schedule is None or schedule == "sqrt" or (
            isinstance(schedule, int) and not isinstance(schedule, bool) and schedule > 0):
        return
    raise UnsupportedError(f"checkpoint={schedule!r} is not a checkpoint schedule",
                           fix='use checkpoint="sqrt" (segments of sqrt(n) iterations) or an '
                           "int k (segments of k iterations)")


def segment_loops(fn: ir.Function, schedule) -> tuple[ir.Function, set, int]:
    """(a copy of fn with its top-level static for loops segmented, the ids of the inner
    segment loops, how many loops were segmented). See Note [Checkpointed loops]."""
    fn = clone_function(fn)
    inner, ops = set(), []
    for op in fn.body.ops:
        new = _segment(op, schedule) if op.prim is for_loop_p else None
        if new is None:
            ops.append(op)
        else:
            ops += new[0]
            inner.add(id(new[1]))
    fn.body.ops = ops
    return fn, inner, len(inner)


def _const(ops: list, value) -> ir.Value:
    v = Value(Aval((), I64))
    ops.append(ir.Op(constant_p, [], {"value": np.asarray(value, np.int64)}, [v]))
    return v


def _int_op(prim, a, b, out=None) -> ir.Op:
    return ir.Op(prim, [a, b], {}, [out if out is not None else Value(Aval((), I64))])


def _bounds(op):
    vals = []
    for v in control.bounds(op):
        p = v.op
        if p is None or p.prim is not constant_p or p.params["value"].ndim != 0:
            return None
        vals.append(int(p.params["value"]))
    return vals


def _segment(op, schedule):
    """(the ops replacing `op`, the inner loop op), or None to leave it."""
    bounds = _bounds(op)
    if bounds is None or bounds[2] == 0:
        return None
    start, stop, step = bounds
    n = len(range(start, stop, step))
    k = segment_length(schedule, n)
    m = n // k
    if n < MIN_TRIPS or k < 2 or m < 2:
        return None
    cf = CONTROL[for_loop_p]
    body = cf.body(op)
    index, carried = control.counter(op), cf.carried(body)
    avals = [p.aval for p in carried]
    top: list = []
    zero, one, kk, mm, nn = (_const(top, c) for c in (0, 1, k, m, n))
    c_start, c_step = _const(top, start), _const(top, step)

    # the inner loop: the body itself, its index computed from (s, t)
    s, t = Value(Aval((), I64), "s"), Value(Aval((), I64), "t")
    at = [_int_op(mul_p, s, kk)]
    at.append(_int_op(add_p, at[-1].outputs[0], t))
    at.append(_int_op(mul_p, at[-1].outputs[0], c_step))
    at.append(_int_op(add_p, at[-1].outputs[0], c_start, index))
    body.ops[:0] = at
    body.params = [t] + carried
    oc = [Value(a) for a in avals]
    inner_outs = [Value(a) for a in avals]
    inner = ir.Op(for_loop_p, [zero, kk, one] + oc, {}, inner_outs, [body], op.loc)
    outer_body = ir.Region([s] + oc, [inner], inner_outs)
    rest = n - m * k
    outer_outs = list(op.outputs) if rest == 0 else [Value(a) for a in avals]
    top.append(ir.Op(for_loop_p, [zero, mm, one] + cf.state(op), {}, outer_outs,
                     [outer_body], op.loc))
    if rest:
        tail, index2 = _clone_region(body, skip=len(at))
        at2 = [_int_op(mul_p, tail.params[0], c_step)]
        at2.append(_int_op(add_p, at2[-1].outputs[0], c_start, index2))
        tail.ops[:0] = at2
        top.append(ir.Op(for_loop_p, [_const(top, m * k), nn, one] + outer_outs, {},
                         list(op.outputs), [tail], op.loc))
    return top, inner


def _clone_region(body: ir.Region, skip: int) -> tuple[ir.Region, ir.Value]:
    """A copy of the (segmented) body without its first `skip` ops (the index computation),
    and the copy's index value, which the caller defines."""
    env: dict = {}

    def fresh(v):
        n = Value(v.aval, v.name)
        env[v.id] = n
        return n

    def region(r, ops):
        new = ir.Region([fresh(p) for p in r.params])
        for o in ops:
            regions = [region(sub, sub.ops) for sub in o.regions]
            new.ops.append(ir.Op(o.prim, [env.get(v.id, v) for v in o.inputs], o.params,
                                 [fresh(v) for v in o.outputs], regions, o.loc))
        new.results = [env.get(v.id, v) for v in r.results]
        return new

    index = fresh(body.ops[skip - 1].outputs[0])
    return region(body, body.ops[skip:]), index


__all__ = ["segment_loops", "segment_length", "check_schedule", "MIN_TRIPS"]
