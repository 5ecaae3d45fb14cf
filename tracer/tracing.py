"""The trace driver: run a Python function on IR values and record its IR Function.

Arguments become IR parameters (named after the user's parameters); Python values stay
Python. Every op is stamped with the user's file:line (the innermost non-llgrad frame).
"""
from __future__ import annotations

import inspect
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from llgrad.runtime.errors import (DTypeError, LLGradError, PerformanceWarning,  # noqa: F401
                                   SourceLoc, UnrollWarning, UnsupportedError)
from llgrad.tracer import signature as sig
from llgrad.transform import ir
from llgrad.tracer import captures
from llgrad.tracer.aliasing import check_unaliased
from llgrad.transform.builder import Builder, ScopeError, Value


@dataclass
class Trace:
    """A traced call: the IR and how its parameters/results map to the Python call."""

    fn: ir.Function
    in_struct: Any
    out_struct: Any
    arg_names: list = field(default_factory=list)
    leaf_owner: list = field(default_factory=list)  # leaf index -> top-level argument index
    source_fn: Any = None  # the user's function
    guards: list = field(default_factory=list)  # Note [Captured values are guarded]
    unrolled: list = field(default_factory=list)  # (loc, reason, copies) of unrolled loops


def bind_arguments(fn: Callable, args: tuple, kwargs: dict) -> tuple[list[str], list]:
    """Parameter names and values of a call, in the function's parameter order. Keyword-only
    and **kwargs entries are named `*name` so `call_with` passes them by keyword."""
    try:
        s = inspect.signature(fn)
        bound = s.bind(*args, **kwargs)
    except (TypeError, ValueError) as e:
        raise TypeError(f"{getattr(fn, '__name__', fn)}(): {e}") from None
    bound.apply_defaults()
    names, values = [], []
    for name, value in bound.arguments.items():
        p = s.parameters[name]
        if p.kind is p.VAR_POSITIONAL:
            for i, v in enumerate(value):
                names.append(f"{name}[{i}]")
                values.append(v)
        elif p.kind is p.VAR_KEYWORD:
            for k, v in value.items():
                names.append("*" + k)
                values.append(v)
        elif p.kind is p.KEYWORD_ONLY:
            names.append("*" + name)
            values.append(value)
        else:
            names.append(name)
            values.append(value)
    return names, values


def _flatten_outputs(out, builder: Builder, fn: Callable | None = None):
    leaves = []

    def rec(x):
        if isinstance(x, (tuple, list)):
            return (type(x).__name__, tuple(rec(e) for e in x))
        if isinstance(x, dict):
            return ("dict", tuple((k, rec(x[k])) for k in sorted(x, key=repr)))
        if isinstance(x, ir.Value) or isinstance(x, (np.ndarray, float, int, np.number)) \
                and not isinstance(x, bool):
            v = builder.lift(x)
            leaves.append(v)
            return sig.Leaf(v.aval.shape, v.aval.dtype, not isinstance(x, (ir.Value, np.ndarray))
                            and not v.aval.shape)
        name = getattr(fn, "__name__", "a differentiated function")
        hint = " (a missing return statement?)" if x is None else ""
        raise UnsupportedError(f"{name} returned a {type(x).__name__}{hint}; a differentiated "
                               f"function returns arrays, numbers, or tuples/lists/dicts of "
                               f"them", loc=_def_loc(fn))
    return leaves, rec(out)


def _def_loc(fn) -> SourceLoc | None:
    code = getattr(inspect.unwrap(fn), "__code__", None) if fn is not None else None
    if code is None:
        return None
    return SourceLoc(code.co_filename, code.co_firstlineno, 0, code.co_name)


def trace(fn: Callable, args: tuple, kwargs: dict) -> Trace:
    """Trace `fn(*args, **kwargs)` through its gast-converted form (control flow staged).

    A loop that must be unrolled (See Note [Unrolled loops] in staging.py) restarts the
    trace; the loops unrolled are listed in `Trace.unrolled` as (loc, reason, copies of the
    body) for the caller to report (llgrad/diagnostics.py: one warning each, with its cost).
    """
    from llgrad.tracer import staging
    converted = _convertible(fn)
    stager = staging.STAGER
    saved, saved_copies = set(stager.unroll), stager.copies
    stager.unroll = set()
    unrolled: list = []
    try:
        for _ in range(64):
            stager.copies = {}
            try:
                tr = _trace_once(fn, args, kwargs, converted)
            except staging.Unroll as e:
                unrolled.append((e.loc, e.reason))
                continue
            except ScopeError as e:
                kind, loc = stager.region_locs.get(id(e.region), (None, None))
                if kind != "loop":
                    raise LLGradError(
                        "a value computed inside a traced `if` branch is used outside it "
                        "(for example appended to a Python list)", loc=loc,
                        fix="assign it to a variable on both branches instead") from None
                reason = "its body stores traced values in a Python container"
                stager.unroll.add((loc, reason))
                unrolled.append((loc, reason))
                continue
            tr.unrolled = [(loc, reason, stager.copies.get((loc.file, loc.line), 0))
                           for loc, reason in unrolled]
            return tr
        raise LLGradError("too many loops had to be unrolled while tracing")
    finally:
        stager.unroll, stager.copies = saved, saved_copies
        stager.region_locs.clear()


def _convertible(fn: Callable) -> Callable:
    """The gast-converted function; lambdas and callable objects run as they are (a lambda
    holds no statements to convert, so tracing it directly is exact)."""
    import types
    from llgrad.tracer.convert import convert, source_lines
    target = fn.__func__ if isinstance(fn, types.MethodType) else fn
    if not isinstance(target, types.FunctionType) or target.__name__ == "<lambda>":
        return fn
    try:
        source_lines(target)  # read once: convert() below reuses it
    except (OSError, TypeError):
        # No source (a REPL, exec): trace as written; Python control flow on traced values
        # then takes the dynamic path, which is exact but re-traces per call.
        warnings.warn(f"llgrad: the source of {target.__qualname__} is not available; its "
                      f"control flow cannot be compiled (define it in a .py file)",
                      PerformanceWarning, stacklevel=4)
        return fn
    return convert(fn)


def _trace_once(fn: Callable, args: tuple, kwargs: dict, call: Callable) -> Trace:
    names, values = bind_arguments(fn, args, kwargs)
    leaves, struct = sig.flatten(tuple(values))
    builder = Builder(getattr(fn, "__name__", "f"))
    builder.on_inplace = check_unaliased
    owner = []
    for i, v in enumerate(values):
        n = len(sig.flatten(v)[0])
        owner += [i] * n
    specs = sig.leaf_specs(struct)
    rec = captures.recording()
    try:
        rec.add_function(fn)
        with builder:
            params = [builder.param((s.shape, s.dtype), _leaf_name(names, owner, k))
                      for k, s in enumerate(specs)]
            traced = sig.unflatten(struct, params)
            out = call_with(call, names, traced)
            out_leaves, out_struct = _flatten_outputs(out, builder, fn)
            builder.fn.body.results = out_leaves
    finally:
        captures.stop(rec)
    return Trace(builder.fn, struct, out_struct, names, owner, fn, rec.guards)


def _leaf_name(names, owner, k):
    base = names[owner[k]].lstrip("*")
    same = [j for j, o in enumerate(owner) if o == owner[k]]
    return base if len(same) == 1 else f"{base}.{same.index(k)}"


def call_with(fn: Callable, names: list, values) -> Any:
    """Call `fn` with values bound by `bind_arguments` (keyword entries start with `*`)."""
    pos = [v for n, v in zip(names, values) if not n.startswith("*")]
    kw = {n[1:]: v for n, v in zip(names, values) if n.startswith("*")}
    return fn(*pos, **kw)


__all__ = ["Trace", "trace", "bind_arguments", "DTypeError", "LLGradError", "Value"]
