"""The trace driver: run a Python function on IR values and record its IR Function.

Arguments become IR parameters (named after the user's parameters); Python values stay
Python. Every op is stamped with the user's file:line (the innermost non-llgrad frame).
"""
from __future__ import annotations

import inspect
import weakref
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from llgrad.runtime.errors import (ConcretizationError, DTypeError, LLGradError,  # noqa: F401
                                   PerformanceWarning, SourceLoc, UnrollWarning,
                                   UnsupportedError)
from llgrad.runtime import pytree
from llgrad.runtime.complex_values import Complex
from llgrad.runtime.padded import Padded
from llgrad.tracer import signature as sig
from llgrad.transform import ir
from llgrad.tracer import captures
from llgrad.tracer.aliasing import check_unaliased
from llgrad.tracer.custom import trace_custom
from llgrad.transform.builder import Builder, ScopeError, Value
from llgrad.transform.passes.dce import check_unread_indices


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
    cuts: list = field(default_factory=list)  # the dynamic path's (what, value, loc) concretised
    catches: tuple = ()  # what `try` statements catch: Note [try on the dynamic path]
    # Captured arrays taken as inputs after the leaves' parameters (captures.Implicit; Note
    # [Captured arrays that change become inputs] in tracer/captures.py); also in `guards`.
    implicit: list = field(default_factory=list)


_SIGNATURES: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def _signature(fn: Callable) -> inspect.Signature:
    """inspect.signature(fn), read once per function (it costs ~20 us a call)."""
    try:
        return _SIGNATURES[fn]
    except (KeyError, TypeError):  # not seen yet, or not weakly referable/hashable
        s = inspect.signature(fn)
        try:
            _SIGNATURES[fn] = s
        except TypeError:
            pass
        return s


def bind_arguments(fn: Callable, args: tuple, kwargs: dict) -> tuple[list[str], list]:
    """Parameter names and values of a call, in the function's parameter order. Keyword-only
    and **kwargs entries are named `*name` so `call_with` passes them by keyword."""
    try:
        s = _signature(fn)
        bound = s.bind(*args, **kwargs)
    except (TypeError, ValueError) as e:
        raise TypeError(f"{getattr(fn, '__name__', fn)}(): {e}") from None
    if not isinstance(fn, np.ufunc):  # a ufunc's defaults (dtype=None and signature=None
        bound.apply_defaults()         # together) are rejected when passed explicitly
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
    """The results of a traced call as IR values and their structure (a pytree whose leaves
    are arrays and numbers; strings, None and bools inside it are returned as they are)."""
    leaves = []

    def rec(x, top=False):
        if isinstance(x, Complex):  # Note [Complex values are pairs]
            name = getattr(fn, "__name__", "a differentiated function")
            raise UnsupportedError(f"{name} returned a complex value ({x.dtype}, of shape "
                                   f"{x.shape}); llgrad differentiates real results of real "
                                   f"arguments (complex intermediates are fine)",
                                   loc=_def_loc(fn), fix="return a real value computed from "
                                   "it: np.abs(z), np.abs(z) ** 2, z.real, z.imag, np.angle(z)")
        nt = pytree.node_type(x)
        if nt is not None:
            children, aux = nt.flatten(x)
            return pytree.Node(nt, aux, tuple(rec(c) for c in children))
        if isinstance(x, ir.Value) or isinstance(x, (np.ndarray, float, int, np.number)) \
                and not isinstance(x, bool):
            v = builder.lift(x)
            builder.check_scope([v])  # a value leaked out of a loop or branch body
            leaves.append(v)
            return sig.Leaf(v.aval.shape, v.aval.dtype, _scalar_type(x))
        if not top and isinstance(x, (str, bool, type(None))):
            return sig.Static(x)
        if isinstance(x, Padded):  # Note [Slices of loop-dependent length]
            raise x.refuse(f"returning it from {getattr(fn, '__name__', 'the function')}",
                           loc=x.loc)
        name = getattr(fn, "__name__", "a differentiated function")
        hint = " (a missing return statement?)" if x is None else ""
        raise UnsupportedError(f"{name} returned a {type(x).__name__}{hint}; a differentiated "
                               f"function returns arrays, numbers, or containers of them "
                               f"(tuples, lists, dicts, namedtuples, dataclasses, classes "
                               f"registered with llgrad.register_pytree)", loc=_def_loc(fn))
    return leaves, rec(out, True)


def _scalar_type(x) -> type | None:
    """What a returned value is in Python: a Python number (a constant, or a weak value,
    which stands for one), a numpy scalar (a 0-d traced value), or an array (None)."""
    if isinstance(x, ir.Value):
        if x.aval.shape:
            return None
        kind = x.aval.dtype.kind
        if getattr(x, "_lg_weak", False):
            return bool if kind == "b" else int if kind in "iu" else float
        return x.aval.dtype.type
    if isinstance(x, np.ndarray):
        return None
    return type(x) if isinstance(x, np.generic) else float if isinstance(x, float) else int


def _def_loc(fn) -> SourceLoc | None:
    code = getattr(inspect.unwrap(fn), "__code__", None) if fn is not None else None
    if code is None:
        return None
    return SourceLoc(code.co_filename, code.co_firstlineno, 0, code.co_name)


def trace(fn: Callable, args: tuple, kwargs: dict, implicit=()) -> Trace:
    """Trace `fn(*args, **kwargs)` through its gast-converted form (control flow staged).

    `implicit`: captures (a globals dict or a cell, and the name) read as inputs after the
    arguments (Note [Captured arrays that change become inputs] in tracer/captures.py).

    A loop that must be unrolled (See Note [Unrolled loops] in staging.py) restarts the
    trace; the loops unrolled are listed in `Trace.unrolled` as (loc, reason, copies of the
    body) for the caller to report (llgrad/diagnostics.py: one warning each, with its cost).
    """
    from llgrad.tracer import staging
    converted = _convertible(fn)
    stager = staging.STAGER
    saved, saved_copies, promoted = set(stager.unroll), stager.copies, stager.promoted
    stager.unroll, stager.promoted = set(), {}
    unrolled: list = []
    try:
        for _ in range(64):
            stager.copies = {}
            try:
                tr = _trace_once(fn, args, kwargs, converted, implicit)
            except staging.Unroll as e:
                unrolled.append((e.loc, e.reason))
                continue
            except ConcretizationError as e:
                loc = stager.promoted_by(getattr(e, "value", None))
                if loc is None:
                    raise
                # See Note [Values a static loop made traced]
                reason = ("a value it changes (e.g. its counter) is used after it as a Python "
                          "value (a shape, a list index)")
                stager.unroll.add((loc, reason))
                unrolled.append((loc, reason))
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
        stager.promoted = promoted


def _convertible(fn: Callable) -> Callable:
    """The gast-converted function (lambdas too: Note [Converting lambdas]; the function of a
    functools.partial, with its arguments); other callable objects run as they are."""
    import functools
    import types
    from llgrad.tracer.convert import convert, source_lines
    if type(fn) is functools.partial:  # `llgrad.grad(partial(loss, X=X))`: its control flow
        inner = _convertible(fn.func)  # ran as Python (a traced `if`: the dynamic path)
        return fn if inner is fn.func else functools.partial(inner, *fn.args, **fn.keywords)
    target = fn.__func__ if isinstance(fn, types.MethodType) else fn
    if not isinstance(target, types.FunctionType):
        return fn
    try:
        source_lines(target)  # read once: convert() below reuses it
    except (OSError, TypeError):
        # No source (exec, `python -c`): trace as written (Note [Code without a source file];
        # a lambda typed at a prompt has no statements of its own: no warning)
        if target.__name__ != "<lambda>":
            from llgrad.tracer.convert.api import warn_no_source
            warn_no_source(target)
        return fn
    if target.__name__ == "<lambda>":
        from llgrad.tracer.convert import UnsupportedSyntaxError
        try:
            return convert(fn)
        except UnsupportedSyntaxError:  # (a body its code's positions do not locate)
            return fn
    return convert(fn)


def _trace_once(fn: Callable, args: tuple, kwargs: dict, call: Callable,
                implicit=()) -> Trace:
    a = Arguments(fn, args, kwargs)
    builder = Builder(getattr(fn, "__name__", "f"))
    builder.on_inplace, builder.on_custom_vjp = check_unaliased, trace_custom
    builder.catches = []  # Note [try on the dynamic path] (convert/fence.py)
    rec = captures.recording()
    try:
        with builder:
            params = a.params(builder)
            with captures.substituted(builder, implicit) as inputs:
                rec.guards += inputs
                rec.add_function(fn)
                traced = sig.unflatten(a.struct, params)
                out = call_with(call, a.names, traced)
            a.check_unchanged(traced, params, fn)
            out_leaves, out_struct = _flatten_outputs(out, builder, fn)
            builder.fn.body.results = out_leaves
    finally:
        captures.stop(rec)
    check_unread_indices(builder.fn)  # Note [Unread element reads keep their checks]
    return Trace(builder.fn, a.struct, out_struct, a.names, a.owner, fn, rec.guards,
                 catches=tuple(builder.catches), implicit=inputs)


class Arguments:
    """A call's arguments as the trace sees them: names, values, leaves, structure, the
    argument each leaf belongs to and its path (`state.pos`)."""

    def __init__(self, fn: Callable, args: tuple, kwargs: dict):
        self.names, self.values = bind_arguments(fn, args, kwargs)
        self.paths: list[str] = []
        self.leaves, self.struct = sig.flatten(tuple(self.values), self.names, self.paths)
        self.specs = sig.leaf_specs(self.struct)
        self.owner = [i for i, c in enumerate(self.struct.children)
                      for _ in sig.leaf_specs(c)]

    def params(self, builder: Builder) -> list:
        """One IR parameter per leaf. Array arguments are recorded on the builder, so an
        in-place write into one is refused (Note [Writes into arguments])."""
        params = [builder.param((s.shape, s.dtype), _leaf_name(self.names, self.owner, k),
                                weak=s.is_python_scalar)  # Note [Two promotion rules]
                  for k, s in enumerate(self.specs)]
        builder.arguments = {p.id: path for p, s, path in zip(params, self.specs, self.paths)
                             if s.scalar is None}  # scalars are immutable: `a += 1` rebinds
        return params

    def check_unchanged(self, traced, params, fn, statics: bool = True) -> None:
        """Raise if the call changed an argument: a container it was passed (a list, dict,
        dataclass or registered object, which it received as a copy), or with `statics`, a
        static object (Note [Writes into arguments])."""
        it = iter(params)
        for name, value, s in zip(self.names, traced, self.struct.children):
            changed = _changed(value, s, it, statics)
            if changed is None:
                continue
            name, fname = name.lstrip("*"), getattr(fn, "__name__", "the function")
            if type(changed) is sig.Static:
                raise UnsupportedError(
                    f"{fname} changes its static argument `{name}` "
                    f"({type(changed.value).__name__}) while it runs: a compiled function "
                    f"runs once per call signature, so later calls would not change it",
                    loc=_def_loc(fn), fix="return the new state instead of storing it, or "
                    "keep such state outside the differentiated function")
            raise UnsupportedError(
                f"{fname} changes its argument `{name}` ({type(value).__name__}) in place: "
                f"Python would change the caller's object, while a compiled function works "
                f"on a copy of its containers", loc=_def_loc(fn),
                fix=f"copy it first (`{name} = copy.copy({name})`, "
                f"`dataclasses.replace({name})`) or return the new value instead")


def _changed(x, s, it, statics: bool):
    """None if `x` still is what unflatten built from structure `s` (leaves from `it`); else
    the part that changed (a Static whose contents changed, or True)."""
    if type(s) is pytree.Node:
        if pytree.node_type(x) is not s.type:
            return True
        children, aux = s.type.flatten(x)
        key = None if aux is None else sig.static_key(aux)
        if len(children) != len(s.children) or key != s.key:
            return True
        for c, cs in zip(children, s.children):
            inner = _changed(c, cs, it, statics)
            if inner is not None:
                return inner
        return None
    if type(s) is sig.Static:
        if x is not s.value:
            return True
        return s if statics and sig.static_key(x) != s.key else None
    return None if x is next(it) else True


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
