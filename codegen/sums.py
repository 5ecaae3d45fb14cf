"""Interval arithmetic and sums of terms for codegen/ranges.py: intervals (lo, hi) of Python
ints, empty when lo > hi; an int scalar written as constant + sum of coefficient * term
over add, sub, neg and mul by a constant, bounded with the loop counters among its terms
replaced by their loops' bounds (Note [Integer ranges] in ranges.py)."""
from __future__ import annotations

import numpy as np

from llgrad.runtime.ops import elementwise as E
from llgrad.runtime.ops.control import constant_p, fusion_p
from llgrad.transform import control

RING = (E.add_p, E.sub_p, E.neg_p, E.mul_p)  # exact modulo 2**64
I64 = (-2 ** 63, 2 ** 63 - 1)


class Sums:
    """Mixed into ranges.Ranges, whose `_range`, `_role`, `_depth` and `_alias` it reads."""

    def _affine(self, v, depth=0):
        """v as (constant, {value id: [value, coefficient]}) over add/sub/neg/mul by a
        constant, or None."""
        while v.id in self._alias:
            v = self._alias[v.id]
        op = v.op
        if depth > 24 or v.aval.shape or v.aval.dtype.kind not in "iub":
            return None
        if op is not None and op.prim is fusion_p:
            return self._affine(control.body(op).results[position(op.outputs, v)], depth + 1)
        if op is not None and op.prim is constant_p:
            return int(op.params["value"]), {}
        if op is None or op.prim not in RING:
            return 0, {v.id: [v, 1]}
        forms = [self._affine(w, depth + 1) for w in op.inputs]
        if any(f is None for f in forms):
            return None
        if op.prim is E.neg_p:
            return _scaled(forms[0], -1)
        if op.prim is E.mul_p:
            a, b = forms
            if not a[1]:
                return _scaled(b, a[0])
            return _scaled(a, b[0]) if not b[1] else (0, {v.id: [v, 1]})
        return _plus(forms[0], _scaled(forms[1], 1 if op.prim is E.add_p else -1))

    def _affine_bound(self, v, ctx, upper: bool):
        """The least (or greatest) value of v's sum of terms, its counters replaced by their
        bounds, innermost first (Note [Integer ranges]); None when unknown."""
        form = self._affine(v)
        if form is None:
            return None
        const, terms = form[0], dict(form[1])
        for _ in range(16):
            loops = [(self._depth[id(self._role[i][0])], i) for i in terms
                     if self._role.get(i, (None, 0))[1] == -1 and terms[i][1]]
            if not loops:
                break
            _, i = max(loops)
            loop, (_, coeff) = self._role[i][0], terms.pop(i)
            start, stop, step = control.bounds(loop)
            s = self._range(step, ctx)
            if s is None or s[0] != s[1] or not s[0]:
                return None
            first, last = self._affine(start), self._affine(stop)
            if not (self._exact(first, ctx) and self._exact(last, ctx)):
                return None  # a bound that may have wrapped around: no relation to the counter
            last = _plus(last, (-1 if s[0] > 0 else 1, {}))
            lo, hi = (first, last) if s[0] > 0 else (last, first)
            const, terms = _plus((const, terms), _scaled(hi if (coeff > 0) == upper else lo,
                                                         coeff))
        return self._extreme((const, terms), ctx, upper)

    def _extreme(self, form, ctx, upper: bool):
        """The greatest (or least) value of a sum of terms over its terms' ranges."""
        total = form[0]
        for w, coeff in form[1].values():
            if coeff:
                r = self._range(w, ctx)
                if r is None:
                    return None
                total += coeff * (r[1] if (coeff > 0) == upper else r[0])
        return total

    def _exact(self, form, ctx) -> bool:
        """A sum of i64 terms that cannot have wrapped around: its value as computed."""
        if form is None:
            return False
        r = tuple(self._extreme(form, ctx, upper) for upper in (False, True))
        return None not in r and fits(r, I64)


def _plus(f, g):
    terms = {i: list(t) for i, t in f[1].items()}
    for i, (w, c) in g[1].items():
        terms.setdefault(i, [w, 0])[1] += c
    return f[0] + g[0], terms


def _scaled(f, c):
    return f[0] * c, {i: [w, k * c] for i, (w, k) in f[1].items()}


def fits(r, full) -> bool:
    """Interval r (empty, or) inside `full`."""
    return r[0] > r[1] or full[0] <= r[0] and r[1] <= full[1]


def position(values: list, v) -> int:
    """Index of `v` in `values` by identity (IR values compare elementwise)."""
    return next(k for k, w in enumerate(values) if w is v)


def arith(prim, rs):
    """The interval of an integer elementwise op's result from its operands' intervals."""
    if prim is E.add_p:
        (a, b), (c, d) = rs
        return a + c, b + d
    if prim is E.sub_p:
        (a, b), (c, d) = rs
        return a - d, b - c
    if prim is E.neg_p:
        return -rs[0][1], -rs[0][0]
    if prim is E.mul_p:
        ends = [x * y for x in rs[0] for y in rs[1]]
        return min(ends), max(ends)
    if prim in (E.maximum_p, E.clip_p):  # clip(x, lo, hi) is min(max(x, lo), hi)
        rs = [(max(rs[0][0], rs[1][0]), max(rs[0][1], rs[1][1]))] + rs[2:]
        if prim is E.maximum_p:
            return rs[0]
    if prim in (E.minimum_p, E.clip_p):
        return min(rs[0][0], rs[1][0]), min(rs[0][1], rs[1][1])
    if prim is E.where_p:
        return union(rs)
    if prim is E.floor_divide_p and rs[1][0] > 0:
        ends = [x // y for x in rs[0] for y in rs[1]]
        return min(ends), max(ends)
    return None


def union(rs):
    """The smallest interval holding every one of `rs` (empty ones, lo > hi, add nothing);
    None if one is unknown."""
    if any(r is None for r in rs):
        return None
    rs = [r for r in rs if r[0] <= r[1]]
    return (min(r[0] for r in rs), max(r[1] for r in rs)) if rs else (0, -1)


def shift(a, b):
    """The interval of x + y for x in a, y in b (empty when either is)."""
    if a is None or b is None:
        return None
    return (0, -1) if a[0] > a[1] or b[0] > b[1] else (a[0] + b[0], a[1] + b[1])


def full_range(v) -> tuple[int, int]:
    """The range of v's integer dtype."""
    info = np.iinfo(v.aval.dtype)
    return int(info.min), int(info.max)
