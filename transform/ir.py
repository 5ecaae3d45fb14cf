"""The IR: typed SSA values with static shapes, ops referencing runtime primitives, and
regions for structured control flow.

Invariants: every Value has an Aval (shape, numpy dtype) and is defined once, by a Function or
Region parameter or by one Op's outputs; an Op's inputs are defined before it in its region or
in an enclosing one; control-flow ops (cond/for_loop/while_loop) hold Regions whose `results`
are yielded to the op (see the op's docs in transform/builder.py).
"""
from __future__ import annotations

import itertools
from typing import Any, Iterator

import numpy as np

from llgrad.runtime.aval import Aval, aval_str
from llgrad.runtime.errors import SourceLoc

_IDS = itertools.count()


class Value:
    """An SSA value. Behaves like an array while an IR builder is active (see builder.py)."""

    __slots__ = ("aval", "name", "op", "id", "__weakref__")

    def __init__(self, aval: Aval, name: str | None = None, op: "Op | None" = None):
        self.aval, self.name, self.op = aval, name, op
        self.id = next(_IDS)

    @property
    def shape(self) -> tuple:
        return self.aval.shape

    @property
    def _np_dtype(self) -> np.dtype:
        return self.aval.dtype

    def __repr__(self) -> str:
        return f"%{self.name or ''}{self.id}: {aval_str(*self.aval)}"


class Op:
    """One operation: `outputs = prim(*inputs, **params)` with optional regions. `checked`
    (indexing ops only) says its indices were checked by an op that runs before it whenever
    it runs, at the same values and axis sizes (Note [Replayed indices] in transform/ad.py):
    a fact about where the op is, which a pass that moves it must drop."""

    __slots__ = ("prim", "inputs", "params", "outputs", "regions", "loc", "checked")

    def __init__(self, prim, inputs: list, params: dict, outputs: list, regions=(), loc=None,
                 checked: bool = False):
        self.prim, self.inputs, self.params = prim, list(inputs), dict(params)
        self.outputs, self.regions = list(outputs), list(regions)
        self.loc: SourceLoc | None = loc
        self.checked = checked
        for v in self.outputs:
            v.op = self

    @property
    def name(self) -> str:
        return self.prim.name

    def __repr__(self) -> str:
        return f"<Op {self.name} {self.inputs} -> {self.outputs}>"


class Region:
    """A list of ops with parameters (block arguments) and the values it yields."""

    __slots__ = ("params", "ops", "results")

    def __init__(self, params=None, ops=None, results=None):
        self.params: list[Value] = list(params or [])
        self.ops: list[Op] = list(ops or [])
        self.results: list[Value] = list(results or [])

    def walk(self) -> Iterator[Op]:
        """All ops, nested regions included, in program order."""
        for op in self.ops:
            yield op
            for r in op.regions:
                yield from r.walk()

    def free_values(self) -> list[Value]:
        """Values the region (nested regions included) reads but does not define, in first-use
        order: what a region op captures from the enclosing scope."""
        inner, out, seen = set(), [], set()

        def use(v):
            if v.id not in inner and v.id not in seen:
                seen.add(v.id)
                out.append(v)

        def visit(r):
            inner.update(p.id for p in r.params)
            for op in r.ops:
                for v in op.inputs:
                    use(v)
                for sub in op.regions:
                    visit(sub)
                inner.update(v.id for v in op.outputs)
            for v in r.results:
                use(v)

        visit(self)
        return out


class Function:
    """A traced function: parameters, a body region and its outputs (body.results)."""

    def __init__(self, name: str, body: Region, meta: dict | None = None):
        self.name, self.body = name, body
        self.meta: dict[str, Any] = meta or {}

    @property
    def params(self) -> list[Value]:
        return self.body.params

    @property
    def outputs(self) -> list[Value]:
        return self.body.results

    def walk(self) -> Iterator[Op]:
        return self.body.walk()

    def __str__(self) -> str:
        from llgrad.transform.printers.text import print_function
        return print_function(self)
