"""Checkpointed loops: a staged `for` loop of n iterations rewritten, before AD, as an outer
loop over segments of k iterations around an inner loop over one segment (plus a tail loop
for the n mod k rest), so that reverse mode stores the carried state once per segment and
recomputes a segment's iterations when its reverse sweep needs them (Note [Checkpointed
loops]); recursively for "log" (Note [Logarithmic checkpointing]); while loops by segments
of at most k iterations (Note [Checkpointed while loops]); which loops: Note [Checkpointed
loops per loop].

Requires: a verified function. Produces: a verified function computing the same values, and
the set of ids of the loops transform/ad.py must not stack (the segment loops, and for the
"log" schedule every loop below the top).
"""
from __future__ import annotations

import math

import numpy as np

from llgrad.runtime.aval import BOOL, I64, Aval
from llgrad.runtime.errors import UnsupportedError
from llgrad.runtime.ops.control import constant_p, for_loop_p, while_loop_p
from llgrad.runtime.ops.elementwise import (add_p, astype_p, floor_divide_p, gt_p,
                                            logical_and_p, lt_p, maximum_p, mul_p, sqrt_p,
                                            sub_p)
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
# segments]); fused kernels of another shape may round differently (rtol 1e-13). Loops
# with run-time bounds are left as they are (their trip count is known only while they
# run), and so are while loops unless the schedule is an int (Note [Checkpointed while
# loops]); `inspect().stats` says how many loops were checkpointed.
MIN_TRIPS = 4
LOG_BRANCHES = 4  # segments per level of the "log" schedule (Note [Logarithmic checkpointing])
SCHEDULES = ("sqrt", "log")

# Note [Logarithmic checkpointing]
# checkpoint="log" segments recursively: a loop of n iterations becomes B = LOG_BRANCHES
# segments of k = n // B iterations (plus a rest of n mod B < B), each segment loop is
# segmented the same way, and so on down to loops of fewer than MIN_TRIPS iterations. Every
# loop made below the top is unstacked (Note [Checkpointed loops]), so the reverse sweep of
# one level reruns the level below from its stored entry state. The tapes hold d = log_B(n)
# levels of at most 2B + 1 rows each (the segment loop's states, its exit state, the rest
# loop's rows), all live at once in the deepest recomputation: O(B log_B n) rows;
# each level reruns the forward once more, so the time is O(n log_B n). This is recursive
# bisection (B-section), not Griewank's binomial `revolve` schedule, which for the same
# number of states reruns fewer iterations but needs a schedule decided per iteration at
# run time; here the schedule is a static nest of loops that AD handles as any other.

# Note [Checkpointed while loops]
# A while loop's trip count is known only once it has run, so it is segmented by an int k
# (`checkpoint=k`, or `llgrad.checkpointed(test, schedule=k)` per loop):
#     while test(x):                          # outer: one growing tape row per segment
#         j = 0
#         while j < k and test(x):            # inner: up to k iterations, never stacked
#             x = body(x); j = j + 1
# The outer loop tapes the carried state at the entry of each segment (its tapes grow, as a
# while loop's do), the reverse sweep reruns one segment from it with tapes of at most k
# rows: O(n / k + k) stored states. The inner test reads the same state the plain loop's
# test would (once more per segment: the outer test at its entry), so the iterations, and
# the values, are those of the plain loop. A marked `for` loop with run-time bounds (and a
# constant step) is first rewritten as the while loop `i = start; while i < stop: body;
# i += step` (`_for_as_while`), then segmented so; its trip count n is known when it
# starts, so "sqrt" works there too: k = floor(sqrt(n)) + 1 is computed before the loop.

# Note [Checkpointed loops per loop]
# `for t in llgrad.checkpointed(range(n), schedule)` (tracer/checkpointed.py) marks one loop:
# the tracer records its schedule in fn.meta["checkpoint loops"], keyed by the loop
# statement's place in the source (file, line, column), which its loop op keeps as `loc`
# through every pass. `segment_loops` segments each marked loop wherever it is: at the top,
# in a branch, or in a loop body, where the enclosing loop's AD then stacks the segment
# loop (Note [Stacked inner tapes]) and reruns the unstacked inner one. The option of
# `@differentiate(checkpoint=...)` applies to the top-level loops that are not marked.


def segment_length(schedule, n: int) -> int:
    """The segment length k for a loop of n iterations."""
    if schedule == "sqrt":
        return max(1, math.isqrt(n - 1) + 1) if n > 1 else 1
    if schedule == "log":
        return n // LOG_BRANCHES
    return int(schedule)


def check_schedule(schedule, loc=None, what="checkpoint") -> None:
    """Raise for a checkpoint option that is neither None, "sqrt", "log" nor a positive int."""
    if schedule is None or schedule in SCHEDULES or (
            isinstance(schedule, int) and not isinstance(schedule, bool) and schedule > 0):
        return
    raise UnsupportedError(f"{what}={schedule!r} is not a checkpoint schedule", loc=loc,
                           fix='use "sqrt" (segments of sqrt(n) iterations), "log" (nested '
                           "segments: O(log n) stored states) or an int k (segments of k "
                           "iterations)")


def segment_loops(fn: ir.Function, schedule) -> tuple[ir.Function, dict, int]:
    """(a copy of fn with its checkpointed loops segmented, the loops AD must not stack (by
    id), how many loops were segmented). The top-level loops take `schedule` (None: none),
    marked loops anywhere their own (Note [Checkpointed loops per loop])."""
    fn = clone_function(fn)
    seg = _Segmenter(schedule, fn.meta.get("checkpoint loops", {}))
    fn.body.ops = seg.visit(fn.body.ops, top=True)
    return fn, seg.unstacked, seg.count


def loc_key(loc) -> tuple | None:
    """The key of a loop's mark: its statement's place in the source."""
    return None if loc is None else (loc.file, loc.line, loc.column)


class _Segmenter:
    def __init__(self, schedule, marks: dict):
        self.schedule, self.marks = schedule, marks
        self.unstacked: dict = {}  # id -> op (kept: an id is unique while its op lives)
        self.count = 0

    def visit(self, ops: list, top: bool) -> list:
        """`ops` with their checkpointed loops (nested ones included) segmented."""
        out = []
        for op in ops:
            for r in op.regions:
                r.ops = self.visit(r.ops, False)
            sched = self.marks.get(loc_key(op.loc))
            marked = sched is not None
            if not marked and top:
                sched = self.schedule
            new = None
            if sched is not None and op.prim is for_loop_p:
                new = self.split_for(op, sched, False, marked)
            elif sched is not None and op.prim is while_loop_p:
                new = self.split_while(op, sched, marked)
            if new is not None:
                self.count += 1
            out += [op] if new is None else new
        return out

    def split_for(self, op, sched, below: bool, marked: bool):
        """The ops replacing a for loop (None: leave it); `below`: it is a segment or rest
        loop of an enclosing split, never stacked."""
        bounds = _bounds(op)
        if bounds is None or bounds[2] == 0:
            step = _const_value(control.bounds(op)[2])
            if not marked or not step:
                return None
            if sched == "log":
                raise UnsupportedError(
                    'llgrad.checkpointed(..., schedule="log") on a loop whose trip count is '
                    "known only at run time", loc=op.loc,
                    fix='use schedule="sqrt" (segments of sqrt(n) iterations, n counted '
                    "when the loop starts) or an int k")
            pre: list = []
            k = _runtime_sqrt(pre, op, step) if sched == "sqrt" else sched
            if not isinstance(k, ir.Value) and k < 2:
                return None
            return pre + self.split_while(_for_as_while(op, step), k, marked)
        n = len(range(*bounds))
        k = segment_length(sched, n)
        if n < MIN_TRIPS or k < 2 or n // k < 2:
            return None
        top, outer, inner, tail = _split_for(op, bounds, k, self.unstacked)
        self.unstacked[id(inner)] = inner
        if below:
            self.unstacked.update((id(o), o) for o in (outer, tail) if o is not None)
        if sched == "log":
            body = outer.regions[0]
            body.ops = self.split_for(inner, sched, True, False) or body.ops
            if tail is not None:
                top[-1:] = self.split_for(tail, sched, below, False) or [tail]
        return top

    def split_while(self, op, sched, marked: bool):
        """The ops replacing a while loop (Note [Checkpointed while loops]); `sched` may be
        an i64[] value (a segment length computed at run time)."""
        if isinstance(sched, str):
            if not marked:
                return None
            raise UnsupportedError(
                f'llgrad.checkpointed(..., schedule="{sched}") on a while loop (or a loop '
                f"with break): its trip count is known only once it has run", loc=op.loc,
                fix="give a segment length: llgrad.checkpointed(test, schedule=k) stores "
                "the state every k iterations (O(n/k + k) memory)")
        if not isinstance(sched, ir.Value) and sched < 2:
            return None
        outer, inner = _split_while(op, sched, self.unstacked)
        self.unstacked[id(inner)] = inner
        return [outer]


def _const(ops: list, value) -> ir.Value:
    v = Value(Aval((), I64))
    ops.append(ir.Op(constant_p, [], {"value": np.asarray(value, np.int64)}, [v]))
    return v


def _int_op(prim, a, b, out=None) -> ir.Op:
    return ir.Op(prim, [a, b], {}, [out if out is not None else Value(Aval((), I64))])


def _const_value(v):
    p = v.op
    if p is None or p.prim is not constant_p or p.params["value"].ndim != 0:
        return None
    return int(p.params["value"])


def _bounds(op):
    vals = [_const_value(v) for v in control.bounds(op)]
    return None if None in vals else vals


def _for_as_while(op, step: int) -> ir.Op:
    """The while loop `i = start; while i < stop (> for a negative step): body; i += step`
    equal to a for loop with run-time bounds and a constant step."""
    start, stop, _ = control.bounds(op)
    body = control.body(op)
    i = Value(Aval((), I64), "i")
    c = [Value(p.aval, p.name) for p in body.params[1:]]
    more = ir.Op(lt_p if step > 0 else gt_p, [i, stop], {}, [Value(Aval((), BOOL))])
    test = ir.Region([i] + c, [more], more.outputs)
    nxt = _int_op(add_p, body.params[0], _const(body.ops, step))
    body.ops.insert(0, body.ops.pop())
    body.ops.append(nxt)
    body.results.insert(0, nxt.outputs[0])
    return ir.Op(while_loop_p, [start] + control.state(op),
                 {}, [Value(Aval((), I64))] + list(op.outputs), [test, body], op.loc)


def _split_for(op, bounds, k: int, unstacked: dict):
    """(the ops replacing `op`, the outer loop, the inner segment loop, the rest loop or
    None) for segments of k iterations (Note [Checkpointed loops])."""
    start, stop, step = bounds
    n = len(range(start, stop, step))
    m = n // k
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
    outer = ir.Op(for_loop_p, [zero, mm, one] + cf.state(op), {}, outer_outs, [outer_body],
                  op.loc)
    top.append(outer)
    tail = None
    if rest:
        tbody, index2 = _clone_region(body, len(at), unstacked)
        at2 = [_int_op(mul_p, tbody.params[0], c_step)]
        at2.append(_int_op(add_p, at2[-1].outputs[0], c_start, index2))
        tbody.ops[:0] = at2
        tail = ir.Op(for_loop_p, [_const(top, m * k), nn, one] + outer_outs, {},
                     list(op.outputs), [tbody], op.loc)
        top.append(tail)
    return top, outer, inner, tail


def _runtime_sqrt(ops: list, op, step: int) -> ir.Value:
    """ceil(sqrt(n)) for the trip count n of a for loop with run-time bounds, computed (into
    `ops`) before it runs: n = max(0, (stop - start + step - 1) // step) for step > 0."""
    start, stop, _ = control.bounds(op)
    ends = (start, stop) if step < 0 else (stop, start)
    span = _int_op(sub_p, *ends)
    ops.append(span)
    ops.append(_int_op(add_p, span.outputs[0], _const(ops, abs(step) - 1)))
    ops.append(_int_op(floor_divide_p, ops[-1].outputs[0], _const(ops, abs(step))))
    ops.append(_int_op(maximum_p, ops[-1].outputs[0], _const(ops, 0)))
    f64 = Aval((), np.dtype(np.float64))
    ops.append(ir.Op(astype_p, [ops[-1].outputs[0]], {"dtype": f64.dtype}, [Value(f64)]))
    ops.append(ir.Op(sqrt_p, [ops[-1].outputs[0]], {}, [Value(f64)]))
    ops.append(ir.Op(astype_p, [ops[-1].outputs[0]], {"dtype": np.dtype(np.int64)},
                     [Value(Aval((), I64))]))
    ops.append(_int_op(add_p, ops[-1].outputs[0], _const(ops, 1)))
    return ops[-1].outputs[0]


def _split_while(op, k, unstacked: dict):
    """(the outer loop replacing a while loop, its inner segment loop) for segments of at
    most k iterations (an int, or an i64[] value computed before the loop: Note
    [Checkpointed while loops])."""
    test, body = control.loop_test(op), control.body(op)
    avals = [p.aval for p in body.params]
    j = Value(Aval((), I64), "j")
    itest, _ = _clone_region(test, 0, unstacked)
    if isinstance(k, ir.Value):
        kk = k
    else:
        kk = _const(itest.ops, k)
        itest.ops.insert(0, itest.ops.pop())
    below = ir.Op(lt_p, [j, kk], {}, [Value(Aval((), BOOL))])
    both = ir.Op(logical_and_p, [below.outputs[0], itest.results[0]], {},
                 [Value(Aval((), BOOL))])
    itest.ops += [below, both]
    itest.params.insert(0, j)
    itest.results = [both.outputs[0]]
    j2 = Value(Aval((), I64), "j")
    step = _int_op(add_p, j2, _const(body.ops, 1))
    body.ops.insert(0, body.ops.pop())
    body.ops.append(step)
    body.params.insert(0, j2)
    body.results.insert(0, step.outputs[0])
    q = [Value(a) for a in avals]
    start: list = []
    zero = _const(start, 0)
    inner_outs = [Value(Aval((), I64))] + [Value(a) for a in avals]
    inner = ir.Op(while_loop_p, [zero] + q, {}, inner_outs, [itest, body], op.loc)
    outer_body = ir.Region(q, start + [inner], inner_outs[1:])
    outer = ir.Op(while_loop_p, list(op.inputs), {}, list(op.outputs), [test, outer_body],
                  op.loc)
    return outer, inner


def _clone_region(body: ir.Region, skip: int, unstacked: dict) -> tuple[ir.Region, ir.Value]:
    """A copy of `body` without its first `skip` ops (for a segmented body: the index
    computation) and, for skip > 0, the copy's index value, which the caller defines. Copies
    of unstacked loops are unstacked."""
    env: dict = {}

    def fresh(v):
        n = Value(v.aval, v.name)
        env[v.id] = n
        return n

    def region(r, ops):
        new = ir.Region([fresh(p) for p in r.params])
        for o in ops:
            regions = [region(sub, sub.ops) for sub in o.regions]
            c = ir.Op(o.prim, [env.get(v.id, v) for v in o.inputs], o.params,
                      [fresh(v) for v in o.outputs], regions, o.loc)
            if id(o) in unstacked:
                unstacked[id(c)] = c
            new.ops.append(c)
        new.results = [env.get(v.id, v) for v in r.results]
        return new

    index = fresh(body.ops[skip - 1].outputs[0]) if skip else None
    return region(body, body.ops[skip:]), index


__all__ = ["segment_loops", "segment_length", "check_schedule", "loc_key", "MIN_TRIPS",
           "SCHEDULES"]
