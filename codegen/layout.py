"""Array layouts in generated code: a value's elements as (storage root, offset, strides).

Every IR value that owns memory (a parameter, a constant, an op's result) is contiguous
row-major. View ops (reshape, transpose, broadcast_to, basic getitem) own no memory: their
layout is computed here from their input's layout, so `x.T`, `x[1:-1]` or a broadcast costs
no copy where the consumer can read strides. See Note [Views] in plan.py.
Invariant: offsets and strides are in elements (not bytes) and are Python ints.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np


def contiguous_strides(shape) -> tuple[int, ...]:
    strides, acc = [], 1
    for d in reversed(shape):
        strides.append(acc)
        acc *= d
    return tuple(reversed(strides))


@dataclass(frozen=True)
class Layout:
    """Where a value's elements live: element (i, j, ...) is at root[offset + sum(i*s)]."""

    root: object          # the ir.Value that owns the storage
    shape: tuple
    strides: tuple
    offset: int = 0

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    @property
    def contiguous(self) -> bool:
        """Row-major dense (size-1 axes may have any stride)."""
        return all(d == 1 or s == c for d, s, c in
                   zip(self.shape, self.strides, contiguous_strides(self.shape)))

    def transpose(self, perm) -> "Layout":
        return Layout(self.root, tuple(self.shape[p] for p in perm),
                      tuple(self.strides[p] for p in perm), self.offset)

    def broadcast(self, shape) -> "Layout":
        lead = len(shape) - len(self.shape)
        strides = [0] * lead + [0 if d == 1 and n != 1 else s for d, n, s in
                                zip(self.shape, shape[lead:], self.strides)]
        return Layout(self.root, tuple(shape), tuple(strides), self.offset)

    def reshape(self, shape) -> "Layout | None":
        """The reshaped layout, or None when it is not expressible without a copy."""
        if not self.contiguous:
            return None
        return Layout(self.root, tuple(shape), contiguous_strides(shape), self.offset)

    def index(self, key) -> "Layout":
        """Apply a basic getitem key (entries i/s/n/e, see runtime/ops/index.py)."""
        n_real = sum(1 for e in key if e[0] in "is")
        entries = []
        for e in key:
            if e[0] == "e":
                entries += [("s", None, None, None)] * (len(self.shape) - n_real)
            else:
                entries.append(e)
        entries += [("s", None, None, None)] * (len(self.shape) - sum(
            1 for e in entries if e[0] in "is"))
        offset, shape, strides, axis = self.offset, [], [], 0
        for e in entries:
            if e[0] == "n":
                shape.append(1)
                strides.append(0)
                continue
            d, s = self.shape[axis], self.strides[axis]
            axis += 1
            if e[0] == "i":
                offset += (e[1] % d) * s
            else:
                start, stop, step = slice(*e[1:]).indices(d)
                n = len(range(start, stop, step))
                offset += start * s if n else 0
                shape.append(n)
                strides.append(s * step)
        return Layout(self.root, tuple(shape), tuple(strides), offset)


def collapse(shape, *stride_lists):
    """Merge adjacent axes that every stride list walks densely; drop size-1 axes.

    Returns (shape, [strides, ...]) with at least one axis (a 0-d or all-ones shape gives [1]).
    """
    out: list = []
    for i, d in enumerate(shape):
        if d == 1:
            continue
        ss = [s[i] for s in stride_lists]
        if out and all(p == s * d for p, s in zip(out[-1][1], ss)):
            out[-1] = (out[-1][0] * d, ss)
        else:
            out.append((d, ss))
    if not out:
        out = [(1, [0] * len(stride_lists))]
    return [d for d, _ in out], [[ss[k] for _, ss in out] for k in range(len(stride_lists))]
