"""Inlining: splice a traced Function into the function being built, with its parameters
bound to the caller's values. How a differentiated function called inside another one (and
`grad` of `grad`) becomes part of the caller's IR, so AD and codegen see one function."""
from __future__ import annotations

from llgrad.transform import ir
from llgrad.transform.builder import current
from llgrad.transform.passes import clone_function, substitute


def inline(fn: ir.Function, args: list) -> list:
    """Emit `fn`'s ops into the current region; returns the values of its results."""
    b = current()
    copy = clone_function(fn)
    args = [b.lift(a) for a in args]
    for p, a in zip(copy.params, args):
        if p.aval != a.aval:
            raise ValueError(f"inline: argument {a!r} does not match parameter {p!r}")
    subst = {p.id: a for p, a in zip(copy.params, args)}
    substitute(copy.body, subst)
    nested = len(b.regions) > 1
    for op in copy.body.ops:
        b.region.ops.append(op)
        if nested:
            for v in op.outputs:
                b.home[v.id] = b.region
    return list(copy.body.results)
