"""What the IR proves about the values of integers: `known_range(v)` bounds every element of
an int value, or says nothing (None). Used to leave out index checks that cannot fail
(Note [Index checks] in lowerings/index.py).

It follows constants, `add`/`sub`, `% n`, `fusion` bodies, the counters of `for_loop`s, and the
counters a loop carries (`c = c + k` from a known start, fused or not: the reverse sweep of a
loop runs `range(0, n)` over the forward's iteration count n, and indexes with `n - 1 - k`),
through at most a few ops. Invariant: a returned (lo, hi) holds for every run; lo > hi means the
value has no elements (or its loop never runs).
"""
from __future__ import annotations

import numpy as np

from llgrad.runtime.ops.control import constant_p, for_loop_p, fusion_p
from llgrad.runtime.ops.elementwise import add_p, maximum_p, minimum_p, remainder_p, sub_p
from llgrad.transform import control

_DEPTH = 12


class Ranges:
    """Interval facts about the int values of one function (its for-loop counters indexed
    once)."""

    def __init__(self, fn):
        self._counters = {control.counter(op): op for op in fn.walk()
                          if op.prim is for_loop_p}

    def known_range(self, v, env: dict | None = None, depth: int = 0):
        """(lo, hi) bounding every element of `v`, or None. `env` maps the params of the
        fusion bodies being read to the values they stand for."""
        env = env or {}
        v = env.get(v, v)
        op = v.op
        if depth > _DEPTH:
            return None
        if op is None:
            loop = self._counters.get(v)
            return None if loop is None else self._counter(loop, depth)
        if op.prim is constant_p:
            value = np.asarray(op.params["value"])
            return (int(value.min()), int(value.max())) if value.size else (0, -1)
        if op.prim in (add_p, sub_p) and v.aval.shape == ():
            a, b = (self.known_range(w, env, depth + 1) for w in op.inputs)
            if a is None or b is None:
                return None
            return (a[0] + b[0], a[1] + b[1]) if op.prim is add_p else (a[0] - b[1], a[1] - b[0])
        if op.prim in (maximum_p, minimum_p) and v.aval.shape == ():
            a, b = (self.known_range(w, env, depth + 1) for w in op.inputs)
            if a is None or b is None:
                return None
            pick = max if op.prim is maximum_p else min
            return pick(a[0], b[0]), pick(a[1], b[1])
        if op.prim is remainder_p and v.aval.shape == ():  # Python's %: the divisor's sign
            d = self.known_range(op.inputs[1], env, depth + 1)
            return (0, d[1] - 1) if d is not None and d[0] > 0 else None
        if op.prim is fusion_p:
            body = control.body(op)
            inner = dict(zip(body.params, [env.get(w, w) for w in control.state(op)]))
            return self.known_range(body.results[_position(op.outputs, v)], inner, depth + 1)
        if op.prim is for_loop_p:
            return self._carried_count(op, _position(op.outputs, v), depth)
        return None

    def most_trips(self, loop) -> int | None:
        """The most iterations for_loop `loop` can run, when the IR bounds it."""
        bounds = self._bounds(loop, 0)
        return None if bounds is None else self._trips(*bounds)[1]

    def _bounds(self, loop, depth):
        """Ranges of (start, stop) and the constant step of a for_loop, or None."""
        start, stop, step = (self.known_range(w, None, depth + 1) for w in control.bounds(loop))
        if start is None or stop is None or step is None or step[0] != step[1] or not step[0]:
            return None
        return start, stop, step[0]

    def _counter(self, loop, depth):
        bounds = self._bounds(loop, depth)
        if bounds is None:
            return None
        (start_lo, start_hi), (stop_lo, stop_hi), step = bounds
        return (start_lo, stop_hi - 1) if step > 0 else (stop_lo + 1, start_hi)

    def _carried_count(self, loop, j, depth):
        """A carried value that starts known and grows by a constant per iteration."""
        p, r = control.carried(loop)[j], control.body(loop).results[j]
        prim, ins = _producer(r)
        if prim is not add_p or not any(w is p for w in ins):
            return None
        inc = self.known_range(ins[1 - _position(ins, p)], None, depth + 1)
        init = self.known_range(control.state(loop)[j], None, depth + 1)
        bounds = self._bounds(loop, depth)
        if inc is None or init is None or bounds is None or inc[0] != inc[1] or inc[0] < 0:
            return None
        trips = self._trips(*bounds)
        return init[0] + inc[0] * trips[0], init[1] + inc[0] * trips[1]

    @staticmethod
    def _trips(start, stop, step) -> tuple[int, int]:
        """Fewest and most iterations of range(start, stop, step) over the bounds' ranges."""
        (start_lo, start_hi), (stop_lo, stop_hi) = start, stop
        if step > 0:
            return len(range(start_hi, stop_lo, step)), len(range(start_lo, stop_hi, step))
        return len(range(start_lo, stop_hi, step)), len(range(start_hi, stop_lo, step))


def _producer(v) -> tuple:
    """(primitive, operands) of the op computing `v`, seen through a `fusion` op (its body's
    op, reading the fusion's operands); (None, ()) for a parameter."""
    op = v.op
    if op is not None and op.prim is fusion_p:
        body = control.body(op)
        env = dict(zip(body.params, control.state(op)))
        r = body.results[_position(op.outputs, v)]
        if r in env:
            return _producer(env[r])
        return r.op.prim, [env.get(w, w) for w in r.op.inputs]
    return (None, ()) if op is None else (op.prim, op.inputs)


def _position(values: list, v) -> int:
    """Index of `v` in `values` by identity (IR values compare elementwise)."""
    return next(k for k, w in enumerate(values) if w is v)
