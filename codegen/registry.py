"""The codegen registry: one lowering per primitive, keyed by the primitive object.

`@lowers(prim)` registers the code emitter of a primitive, `@view(prim)` additionally lets it
be a strided view of its input; elementwise primitives share one generic lowering driven by
their scalar rule. A primitive without a lowering is an `UnsupportedError` naming it and the
op's source line (never a silent fallback).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from llgrad.runtime.errors import UnsupportedError
from llgrad.runtime.prim import Primitive


@dataclass
class Lowering:
    fn: Callable | None = None       # fn(ctx, op): emit code for op
    accepts: Callable | None = None  # accepts(op, i, layout) -> bool: reads a strided view
    view: Callable | None = None     # view(op, layouts) -> Layout | None (None: run fn)
    family: str = "op"               # "op", "elementwise" or "reduce"
    scratch: Callable | None = None  # scratch(op) -> [(shape, dtype)]: temporaries of one call
    updates: Callable | int | None = None  # operand whose storage the result may take, or
    #                                        updates(op) -> it (inplace.py)


LOWERINGS: dict[Primitive, Lowering] = {}


def lowers(prim: Primitive, *, accepts: Callable | None = None, family: str = "op",
           scratch: Callable | None = None, updates: Callable | int | None = None):
    """Register the lowering of `prim`: `fn(ctx, op)` emits its code with `ctx.b`; buffers
    `scratch(op)` asks for (workspace, live during the op only) are `ctx.scratch(op)`; with
    `updates=k` the result may share operand k's storage when that operand is dead after the
    op (Note [Updates in place] in inplace.py): `fn` then finds it there already."""
    def deco(fn):
        entry = LOWERINGS.setdefault(prim, Lowering())
        entry.fn, entry.accepts, entry.family, entry.scratch = fn, accepts, family, scratch
        entry.updates = updates
        return fn
    return deco


def view(prim: Primitive):
    """Register `fn(op, layouts) -> Layout | None` making `prim` a view where possible."""
    def deco(fn):
        LOWERINGS.setdefault(prim, Lowering()).view = fn
        return fn
    return deco


def lowering_of(op) -> Lowering:
    entry = LOWERINGS.get(op.prim)
    if entry is None and op.prim.family == "elementwise" and op.prim.scalar is not None:
        # one generic lowering serves every elementwise primitive, those declared after
        # the lowerings were imported too: a new one needs only its declaration
        from .lowerings.reduce import lower_elementwise
        lowers(op.prim, family="elementwise")(lower_elementwise)
        entry = LOWERINGS[op.prim]
    if entry is None or (entry.fn is None and entry.view is None):
        raise UnsupportedError(
            f"codegen has no lowering for primitive '{op.prim.name}'", loc=op.loc,
            fix="register one with @lowers in codegen/lowerings/, or run with "
                "LLGRAD_DISABLE_JIT=1 to use the reference interpreter")
    return entry
