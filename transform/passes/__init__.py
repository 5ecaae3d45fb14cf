"""Optimisation passes over the IR. Each is a `Pass` with a `name` (used by
LLGRAD_PRINT_AFTER), mutates the function it is given and returns it; `pipeline.optimize`
clones first. Each module's docstring states the IR it requires and produces."""
from __future__ import annotations

from typing import Callable

from llgrad.transform import ir


class Pass:
    """A named transformation `fn -> fn` (in place)."""

    def __init__(self, name: str, run: Callable[[ir.Function], ir.Function], doc: str = ""):
        self.name, self.run, self.__doc__ = name, run, doc

    def __call__(self, fn: ir.Function) -> ir.Function:
        return self.run(fn) or fn

    def __repr__(self) -> str:
        return f"<pass {self.name}>"


def substitute(region: ir.Region, subst: dict) -> None:
    """Rewrite every use (inputs, yields, nested regions) of value id k to subst[k]."""
    if not subst:
        return
    for op in region.ops:
        op.inputs = [subst.get(v.id, v) for v in op.inputs]
        for r in op.regions:
            substitute(r, subst)
    region.results = [subst.get(v.id, v) for v in region.results]


def clone_function(fn: ir.Function, name: str | None = None) -> ir.Function:
    """A deep copy with fresh Values (same names, locs, params and `checked` marks)."""
    env: dict[int, ir.Value] = {}

    def fresh(v):
        n = type(v)(v.aval, v.name)
        env[v.id] = n
        return n

    def region(r):
        new = ir.Region([fresh(p) for p in r.params])
        for op in r.ops:
            regions = [region(s) for s in op.regions]
            new.ops.append(ir.Op(op.prim, [env[v.id] for v in op.inputs], op.params,
                                 [fresh(v) for v in op.outputs], regions, op.loc, op.checked))
        new.results = [env[v.id] for v in r.results]
        return new

    return ir.Function(name or fn.name, region(fn.body), dict(fn.meta))
