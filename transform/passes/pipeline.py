"""The optimisation pipeline: simplify, cse, dce, then (optionally) fuse.

Requires: verified IR. Produces: verified IR computing the same values; with fusion (the IR
codegen receives) also without custom_vjp ops, which only AD reads (unfused IR keeps them).
LLGRAD_PRINT_AFTER=<pass,...> (or `all`) prints the IR after those passes to stderr.
"""
from __future__ import annotations

import os
import sys

from llgrad.transform import ir
from llgrad.transform.passes import Pass, clone_function
from llgrad.transform.passes.cse import cse
from llgrad.transform.passes.custom import strip_custom_vjp
from llgrad.transform.passes.dce import dce
from llgrad.transform.passes.fuse import fuse as fuse_pass
from llgrad.transform.passes.simplify import simplify

PASSES: dict[str, Pass] = {p.name: p for p in (strip_custom_vjp, simplify, cse, dce,
                                                fuse_pass)}


def _print_after() -> set:
    raw = os.environ.get("LLGRAD_PRINT_AFTER", "")
    return {s.strip() for s in raw.split(",") if s.strip()}


def optimize(fn: ir.Function, fuse: bool = True) -> ir.Function:
    """Optimise a copy of `fn` (the input is not modified).

    Example:
        >>> opt = optimize(fn, fuse=False)  # doctest: +SKIP
    """
    fn = clone_function(fn)
    passes = ([strip_custom_vjp] if fuse else []) + [simplify, cse, dce] + \
        ([fuse_pass, dce] if fuse else [])
    show = _print_after()
    for p in passes:
        fn = p(fn)
        if p.name in show or "all" in show:
            print(f"// ----- IR after {p.name} -----\n{fn}", file=sys.stderr)
    return fn
