"""What the IR proves about the values of integers: `known_range(v)` bounds every element of
an int value over every run, or says nothing (None). Used to leave out the index checks and
negative-index wraps that cannot be needed (Note [Index checks] in lowerings/index.py), to
bound trip counts (`most_trips`) and to distribute loops (distribute.py).

Invariant: a returned (lo, hi) holds for every element of every run (an unknown int gets
its dtype's range); lo > hi means the value has no elements (or the code computing it never
runs). How: Note [Integer ranges].
"""
from __future__ import annotations

import numpy as np

from llgrad.runtime.ops import elementwise as E
from llgrad.runtime.ops.control import (cond_p, constant_p, for_loop_p, fusion_p, tape_get_p,
                                        tape_new_p, tape_push_p)
from llgrad.runtime.ops.index import getitem_p, index_put_p
from llgrad.runtime.ops.shape import broadcast_to_p, reshape_p
from llgrad.transform import control
from llgrad.transform.control import describe

from .sums import RING, Sums, arith, fits, full_range, position, shift, union

# Note [Integer ranges]
# Interval arithmetic over constants and integer elementwise ops (add, sub, mul, neg,
# maximum, minimum, clip, where, // and % by positive divisors, int casts), elements read
# from arrays (`perm[i]` is in perm's range), seen through fusion bodies and cond branches
# (a region param is the operand it receives). An unknown int (a parameter, a value of a
# while loop) is in its dtype's range, and so is a result whose interval leaves it:
# compiled integer arithmetic wraps around. Three additions make it precise enough for
# Numba-style loops and their reverse sweeps:
# - Counters relate to their bounds (`_affine_bound`): a scalar sum of terms (add, sub, neg,
#   mul by a constant) is bounded by replacing each counter, innermost first, with its
#   loop's first or last value as the term's sign asks; so `n - 1 - k` for k in range(n)
#   (a reverse sweep's iteration) is in 0..n-1 whatever n is, where intervals give -n..n-1.
#   These ops are exact modulo 2**64, so the value computed equals the sum whenever the
#   sum's bounds fit the dtype, even if a partial sum wrapped; a loop bound replaced must
#   not have wrapped itself (`_exact`), for the counter is below the bound computed.
# - Induction counters (`pos = d` before a nest, `pos += 1` inside it, maybe under an `if`;
#   `_carried`): a for_loop's carried int whose next value is itself plus amounts the IR
#   bounds (constants, what inner loops add in all) is bounded at each iteration's entry by
#   what the earlier iterations added. A loop of at most ENUMERATE iterations whose bounds
#   are known exactly is walked iteration by iteration; when its bounds depend on the
#   counter of an enclosing loop (`range(c + 1, d)`), each iteration of that loop is taken
#   apart. So the GMM's walk over a triangle, `pos = d; for c in range(d): for r in
#   range(c + 1, d): icf[j, pos]; pos += 1`, is proven to stay in d..d*(d+1)/2 - 1, icf's
#   triangle columns. Otherwise the amount per iteration times the trip count bounds it.
# - Tapes hold what was pushed on them (Note [Loop tapes]): a tape_get is in the union of
#   the ranges of the values pushed on its tape, and 0 if the tape is ragged or batched (a
#   column's missing rows read 0, Note [Ragged tapes]); a reverse sweep reads only rows its
#   forward pushed.
# Each query has a budget of steps (BUDGET); past it the answer is None, so a check stays.
ENUMERATE, BUDGET = 256, 20_000

_IDENTITY = (broadcast_to_p, reshape_p, E.copy_p, E.stop_gradient_p, E.astype_p)


class _OutOfBudget(Exception):
    pass


class Ranges(Sums):
    """Interval facts about the int values of one function (its region structure indexed
    once, results memoised)."""

    def __init__(self, fn):
        self._role = {}   # region param id -> (for_loop op, k): k = -1 its counter, else carried
        self._alias = {}  # fusion and cond region param id -> the operand it receives
        self._outer = {}  # id(for_loop) -> the for_loop around it, or None
        self._depth = {}  # id(for_loop) -> how many for_loops enclose it
        self._memo, self._busy, self._steps = {}, set(), 0
        self._tape_of, pushes, self._batched = {}, [], []
        self._visit(fn.body, None, 0, pushes)
        self._pushed = {}  # tape root -> the values pushed on it
        for t, v in pushes:
            self._pushed.setdefault(self._root(t), []).append(v)
        self._zeros = {self._root(t) for t in self._batched}  # tapes read past their rows

    def _visit(self, region, loop, depth, pushes) -> None:
        for op in region.ops:
            cf = describe(op)
            if op.prim is tape_push_p:
                self._join(op.outputs[0], op.inputs[0])
                pushes.append((op.inputs[0], op.inputs[1]))
            elif op.prim is tape_new_p and op.params.get("ragged") or \
                    op.prim is tape_get_p and op.inputs[1].aval.shape:
                self._batched.append(op.outputs[0] if op.prim is tape_new_p else op.inputs[0])
            elif cf is not None and op.prim is not fusion_p:  # a tape may be state
                for ps in cf.entries(op):
                    for a, p in zip(cf.state(op), ps):
                        self._join(p, a)
                    if cf.loop:
                        for r, p in zip(cf.body(op).results, ps):
                            self._join(r, p)
                for r in cf.yielding(op):
                    for res, o in zip(r.results, op.outputs):
                        self._join(o, res)
            if op.prim is for_loop_p:
                self._outer[id(op)], self._depth[id(op)] = loop, depth
                body = control.body(op)
                for k, p in enumerate(body.params):
                    self._role[p.id] = (op, k - 1)
                self._visit(body, op, depth + 1, pushes)
                continue
            if cf is not None and not cf.loop:  # fusion, cond: params are their operands
                for ps in cf.entries(op):
                    for p, a in zip(ps, cf.state(op)):
                        self._alias[p.id] = a
            for r in op.regions:
                self._visit(r, loop, depth, pushes)

    def _root(self, v):
        """The id of the class of values (a tape through pushes and loops) `v` is in."""
        while v.id in self._tape_of:
            v = self._tape_of[v.id]
        return v.id

    def _join(self, a, b) -> None:
        """Put a's class into b's."""
        ra, rb = self._root(a), self._root(b)
        if ra != rb:
            self._tape_of[ra] = b

    # ---- queries ------------------------------------------------------------------------
    def known_range(self, v):
        """(lo, hi) bounding every element of `v` (the dtype's range if nothing is known), or
        None (not an integer, or past the budget)."""
        self._steps = 0
        try:
            return self._range(v, {})
        except _OutOfBudget:
            return None

    def most_trips(self, loop) -> int | None:
        """The most iterations for_loop `loop` can run, when the IR bounds it."""
        self._steps = 0
        try:
            bounds = self._bounds(loop, {})
        except _OutOfBudget:
            return None
        most = None if bounds is None else _trips(*bounds)[1]
        return most if most is not None and most < 2 ** 31 else None

    # ---- ranges -------------------------------------------------------------------------
    def _range(self, v, ctx):
        """(lo, hi) of an int value, its dtype's whole range when unknown; None for others."""
        while v.id in self._alias:
            v = self._alias[v.id]
        key = (v.id, _frozen(ctx))
        if key in self._memo:
            return self._memo[key]
        integer = v.aval.dtype.kind in "iu"
        full = full_range(v) if integer else None
        if key in self._busy:  # a value that depends on itself (a carried value)
            return full
        self._steps += 1
        if self._steps > BUDGET:
            raise _OutOfBudget
        self._busy.add(key)
        try:
            r = self._compute(v, ctx)
        finally:
            self._busy.discard(key)
        if integer and (r is None or not fits(r, full)):  # compiled arithmetic wraps around
            r = full
        self._memo[key] = r
        return r

    def _compute(self, v, ctx):
        op = v.op
        if v.aval.dtype.kind not in "iu":
            return None
        if op is None:
            role = self._role.get(v.id)
            if role is None:
                return None
            loop, k = role
            return self._counter(loop, ctx) if k < 0 else self._carried(loop, k, ctx)
        prim = op.prim
        if prim is constant_p:
            value = np.asarray(op.params["value"])
            return (int(value.min()), int(value.max())) if value.size else (0, -1)
        if prim is fusion_p:
            return self._range(control.body(op).results[position(op.outputs, v)], ctx)
        if prim is cond_p:
            k = position(op.outputs, v)
            return union([self._range(r.results[k], ctx) for r in op.regions])
        if prim is for_loop_p:
            return self._loop_output(op, position(op.outputs, v), ctx)
        if prim is tape_get_p:
            return self._tape(op.inputs[0])
        if prim in (getitem_p, index_put_p):  # elements of its array (or of the value put)
            return union([self._range(w, ctx) for w in op.inputs[:1 + (prim is index_put_p)]])
        if prim in _IDENTITY:
            src = op.inputs[0]
            return self._range(src, ctx) if src.aval.dtype.kind in "iu" else None
        if prim is E.remainder_p:  # Python's %: the divisor's sign, whatever the dividend
            d = self._range(op.inputs[1], ctx)
            return (0, d[1] - 1) if d is not None and d[0] > 0 else None
        ins = op.inputs[1:] if prim is E.where_p else op.inputs
        rs = [self._range(w, ctx) for w in ins]
        if any(r is None for r in rs):
            return None
        if any(r[0] > r[1] for r in rs):
            return (0, -1)
        r = arith(prim, rs)
        if prim in RING and not v.aval.shape:
            a = tuple(self._affine_bound(v, ctx, upper) for upper in (False, True))
            if None not in a and fits(a, full_range(v)):  # Note [Integer ranges]: either holds
                r = (max(r[0], a[0]), min(r[1], a[1])) if fits(r, full_range(v)) else a
        return r

    def _tape(self, tape):
        root = self._root(tape)
        rs = [self._range(v, {}) for v in self._pushed.get(root, [])]
        return union(rs + [(0, 0)] * (root in self._zeros))

    # ---- loop counters and carried values --------------------------------------------------
    def _bounds(self, loop, ctx):
        """Ranges of (start, stop) and the constant step of a for_loop, or None."""
        start, stop, step = (self._range(w, ctx) for w in control.bounds(loop))
        if start is None or stop is None or step is None or step[0] != step[1] or not step[0]:
            return None
        return start, stop, step[0]

    def _counter(self, loop, ctx):
        c = control.counter(loop)
        if c.id in ctx:
            return ctx[c.id]
        bounds = self._bounds(loop, ctx)
        if bounds is None:
            return None
        (start_lo, start_hi), (stop_lo, stop_hi), step = bounds
        return (start_lo, stop_hi - 1) if step > 0 else (stop_lo + 1, start_hi)

    def _iterations(self, loop, ctx) -> range | None:
        """The counter's values when the bounds are known exactly and few, else None."""
        bounds = self._bounds(loop, ctx)
        if bounds is None or bounds[0][0] != bounds[0][1] or bounds[1][0] != bounds[1][1]:
            return None
        its = range(bounds[0][0], bounds[1][0], bounds[2])
        return its if len(its) <= ENUMERATE else None

    def _walk(self, loop, k, ctx):
        """(iterations, sums) of a loop `_iterations` enumerates, None otherwise: sums are the
        ranges of what carried value k gained by each iteration's entry and after the last,
        a list, or ("step", d) when every iteration adds d."""
        c = control.counter(loop)
        ctx = {i: r for i, r in ctx.items() if i != c.id}
        key = ("walk", id(loop), k, _frozen(ctx))
        if key in self._memo:
            return self._memo[key]
        its, out = self._iterations(loop, ctx), None
        if its is not None:
            body, sums = control.body(loop), [(0, 0)]
            res, p = body.results[k], body.params[k + 1]
            same = self._delta(res, p, {**ctx, c.id: (min(its), max(its))}) if its else None
            if same is not None and same[0] == same[1]:
                out = (its, ("step", same[0]))
            else:
                for i in its:
                    d = self._delta(res, p, {**ctx, c.id: (i, i)})
                    if d is None or d[0] > d[1]:
                        break
                    sums.append((sums[-1][0] + d[0], sums[-1][1] + d[1]))
                else:
                    out = (its, sums)
        self._memo[key] = out
        return out

    def _carried(self, loop, k, ctx):
        """Carried value k of `loop` at the entry of its iterations (in ctx)."""
        init = self._range(control.state(loop)[k], ctx)
        if init is None:
            return None
        c = control.counter(loop)
        walked = self._walk(loop, k, ctx)
        if walked is not None:
            its = walked[0]
            lo, hi = ctx.get(c.id, (min(its, default=0), max(its, default=-1)))
            return shift(init, _entries(*walked, lo, hi))
        outer = self._outer[id(loop)]
        while outer is not None and control.counter(outer).id in ctx:
            outer = self._outer[id(outer)]
        if outer is not None:  # bounds that depend on an enclosing counter: take it apart
            oc = control.counter(outer)
            its = self._iterations(outer, ctx)
            if its and self._iterations(loop, {**ctx, oc.id: (its[0], its[0])}) is not None:
                return union([self._carried(loop, k, {**ctx, oc.id: (i, i)}) for i in its])
        d, t = self._per_iteration(loop, k, ctx)
        if d is None:
            return None
        if t[1] <= 0:
            return (0, -1)
        return shift(init, (min(0, (t[1] - 1) * d[0]), max(0, (t[1] - 1) * d[1])))

    def _per_iteration(self, loop, k, ctx):
        """(range of what one iteration adds to carried k, range of the trip count)."""
        bounds, counter = self._bounds(loop, ctx), self._counter(loop, ctx)
        if bounds is None or counter is None:
            return None, None
        body = control.body(loop)
        inner = {**ctx, control.counter(loop).id: counter}
        return self._delta(body.results[k], body.params[k + 1], inner), _trips(*bounds)

    def _loop_output(self, loop, k, ctx):
        init = self._range(control.state(loop)[k], ctx)
        total = self._total(loop, k, ctx)
        return None if init is None or total is None else shift(init, total)

    def _total(self, loop, k, ctx):
        """What a run of `loop` adds to its carried value k in all."""
        walked = self._walk(loop, k, ctx)
        if walked is not None:
            its, sums = walked
            return sums[-1] if isinstance(sums, list) else (len(its) * sums[1],) * 2
        d, t = self._per_iteration(loop, k, ctx)
        if d is None:
            return None
        ends = [n * e for n in t for e in d]
        return (min(ends + [0]), max(ends + [0]))

    def _delta(self, v, p, ctx):
        """The range of v - p, where v is computed from p by adding amounts the IR bounds,
        or None."""
        while v.id in self._alias:
            v = self._alias[v.id]
        if v is p:
            return (0, 0)
        op = v.op
        if op is None:
            return None
        if op.prim is fusion_p:
            return self._delta(control.body(op).results[position(op.outputs, v)], p, ctx)
        if op.prim is for_loop_p:  # an inner loop carrying p on: what it adds in all
            k = position(op.outputs, v)
            before, total = self._delta(control.state(op)[k], p, ctx), None
            if before is not None:
                total = self._total(op, k, ctx)
            return None if total is None else shift(before, total)
        if op.prim in (E.add_p, E.sub_p):
            for j in (0, 1) if op.prim is E.add_p else (0,):
                d = self._delta(op.inputs[j], p, ctx)
                if d is not None:
                    other = self._range(op.inputs[1 - j], ctx)
                    if other is None:
                        return None
                    return shift(d, other if op.prim is E.add_p else (-other[1], -other[0]))
            return None
        if op.prim is E.where_p:
            return union([self._delta(w, p, ctx) for w in op.inputs[1:]])
        if op.prim is cond_p:  # `if ...: pos += 1`
            k = position(op.outputs, v)
            return union([self._delta(r.results[k], p, ctx) for r in op.regions])
        return None


def _trips(start, stop, step) -> tuple[int, int]:
    """Fewest and most iterations of range(start, stop, step) over the bounds' ranges."""
    (start_lo, start_hi), (stop_lo, stop_hi) = start, stop

    def count(a, z):  # len(range(a, z, step)), for numbers of any size
        span = z - a if step > 0 else a - z
        return max(0, -(-span // abs(step)))
    if step > 0:
        return count(start_hi, stop_lo), count(start_lo, stop_hi)
    return count(start_lo, stop_hi), count(start_hi, stop_lo)


def _entries(its: range, sums, lo: int, hi: int):
    """The union of `sums` (see Ranges._walk) at the entries of the iterations whose counter
    is in lo..hi."""
    step = its.step
    first = -((its.start - lo) // step) if step > 0 else -((hi - its.start) // -step)
    last = (hi - its.start) // step if step > 0 else (its.start - lo) // -step
    first, last = max(first, 0), min(last, len(its) - 1)
    if first > last:
        return (0, -1)
    if isinstance(sums, list):
        return union(sums[first:last + 1])
    d = sums[1]
    return min(first * d, last * d), max(first * d, last * d)


def _frozen(ctx: dict) -> tuple:
    return tuple(sorted(ctx.items())) if ctx else ()
