"""convert(fn): the conversion pipeline, its cache, and ConvertedFunction.

Pipeline (each pass states its output invariants in its module docstring): parse with real
locations -> static checks and run-time fences (fence) -> break/continue/return to flags
(jumps) -> list comprehensions to loops (comprehensions) -> calls, range loops, element
updates (calls) -> marks on nested defs (cells) -> and/or/not/ternary/chained comparisons
(logical) -> liveness/definedness annotations (liveness) -> if/for/while to operator calls
(control_flow) -> compile with the original globals and closure (compile).
"""

from __future__ import annotations

import ast
import dataclasses
import linecache
import sysconfig
import types
import warnings
import weakref
from typing import Any, Callable

import gast
import numpy as np

from . import (calls, cells, compile as compile_, comprehensions, fence, jumps, liveness,
               logical, stored)
from .activity import declared_names, local_names
from .control_flow import convert_control_flow
from .errors import SourceMap, UnsupportedSyntaxError
from .naming import Namer
from .parsing import parse_function, source_lines

MARK = "__lg_converted__"


@dataclasses.dataclass
class ConvertedFunction:
    """A converted function: call it like the original; ``source`` is the converted code."""

    held: Any  # the original: a weakref to a plain function (Note [Conversions die with their function])
    fn: Callable
    source: str
    filename: str
    firstlineno: int

    @property
    def original(self) -> Callable:
        h = self.held
        return h() if type(h) is weakref.ref else h

    def __call__(self, *args, **kwargs):
        return self.fn(*args, **kwargs)

    def __repr__(self) -> str:
        return f"<ConvertedFunction {self.original.__qualname__} from {self.filename}>"


# Note [Conversions die with their function]
# _CACHE maps a function to its conversion weakly, and a conversion refers to its original
# only through a weakref: a strong reference from the value would keep the key alive, so every
# function ever traced (a closure made per call, a model's loss redefined in a notebook) and
# its conversion stayed in memory for the life of the process.
_CACHE: "weakref.WeakKeyDictionary[Callable, ConvertedFunction]" = weakref.WeakKeyDictionary()
_FAILED: "weakref.WeakKeyDictionary[Callable, bool]" = weakref.WeakKeyDictionary()


def convert(fn: Callable) -> ConvertedFunction:
    """Convert ``fn``'s control flow to operator calls (cached per function object).

    Args:
        fn: a Python function (or bound method) defined in a source file.
    Returns:
        A ConvertedFunction, equal to ``fn`` on plain values and staged on traced ones.
    Raises:
        UnsupportedSyntaxError: the function uses a construct that cannot be converted
            (generators, async, source unavailable), with the user's file:line.

    Example:
        >>> def f(x):
        ...     return x if x > 0 else -x
        >>> convert(f)(-2)  # doctest: +SKIP
        2
    """
    if isinstance(fn, types.MethodType):
        inner = convert(fn.__func__)
        return dataclasses.replace(inner, held=fn, fn=types.MethodType(inner.fn, fn.__self__))
    if isinstance(fn, ConvertedFunction):
        return fn
    cached = _CACHE.get(fn)
    if cached is None:
        cached = _CACHE[fn] = _convert(fn)
    return cached


def try_convert(fn: types.FunctionType, library: bool = False) -> Callable | None:
    """The converted callable for a user function, or None to call ``fn`` as it is.

    Library code, already converted code (and the lambdas it makes) and functions whose
    source cannot be converted (e.g. helper generators) are called unconverted: that is
    exactly Python. With ``library`` (a call passing traced values), the functions of the
    libraries in calls.CONVERTED_LIBRARIES are converted too (See Note [Library code on
    traced values]).
    """
    if getattr(fn, MARK, False) or _FAILED.get(fn) or not (
            _is_user_function(fn) or library and calls.is_converted_library(fn)):
        if library and not _FAILED.get(fn) and _no_source(fn):
            _FAILED[fn] = True
            warn_no_source(fn)
        return None
    try:
        return convert(fn).fn
    except UnsupportedSyntaxError:
        _FAILED[fn] = True
        return None


_LIBRARY_DIRS = tuple({sysconfig.get_paths()[k] for k in ("stdlib", "purelib", "platlib")})


def _is_user_function(fn: types.FunctionType) -> bool:
    """Not library code nor a lambda made by converted code (whose calls are converted
    already); a `<...>` file counts when linecache has its lines (an IPython cell, or code
    exec'd with its source registered: Note [Code without a source file])."""
    if calls.is_library_object(fn) or fn.__name__ == "<lambda>" and \
            compile_.FACTORY in fn.__qualname__:
        return False
    filename = fn.__code__.co_filename
    if filename.startswith("<"):
        return bool(linecache.getlines(filename))
    return not filename.startswith(_LIBRARY_DIRS)


def _no_source(fn) -> bool:
    """A user's function (not a lambda) whose source linecache cannot give."""
    filename = getattr(getattr(fn, "__code__", None), "co_filename", "")
    return filename.startswith("<") and fn.__name__ != "<lambda>" and \
        not linecache.getlines(filename) and not calls.is_library_object(fn)


# Note [Code without a source file]
# The converter reads a function's source through inspect (so linecache): a function made by
# `exec(string)`, `python -c` or a prompt that keeps no source has none. It then runs as
# written: Python control flow on traced values runs as Python, so each loop over traced
# state is unrolled at trace time (one copy of the body per iteration: a 40-step LSTM took
# over four minutes to its first gradient) and a traced condition sends the signature to the
# per-call dynamic path. llgrad warns once per function. IPython registers its cells in
# linecache, so they convert; code run by exec converts when its source is registered first
# (`linecache.cache[name] = (len(src), None, src.splitlines(True), name)`, then
# `exec(compile(src, name, "exec"))`). Reading loops back from bytecode is not attempted.
def warn_no_source(fn) -> None:
    """The warning of Note [Code without a source file], naming `fn`, at the user's line."""
    from llgrad.runtime.errors import PerformanceWarning, user_loc
    name = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", repr(fn))
    loc = user_loc()
    warnings.warn_explicit(
        f"llgrad: the source of {name} is not available (a function made by exec, "
        f"`python -c` or a prompt that keeps no source), so its control flow is not "
        f"converted: each loop over traced values is unrolled at trace time, one copy of the "
        f"body per iteration (compile time grows with the trip count), and a traced "
        f"condition takes the per-call dynamic path. Define it in a .py file, or register "
        f"its source before exec: linecache.cache[name] = (len(src), None, "
        f"src.splitlines(True), name); exec(compile(src, name, 'exec'))", PerformanceWarning,
        loc.file if loc else "<unknown>", loc.line if loc else 0)


def _is_llgrad_context(resolve: Callable[..., Any], locals_: set[str]):
    """Whether a `with` item may stand around traced code: llgrad's own contexts, and the
    numpy and warnings contexts that only set how floating-point errors and warnings are
    reported (`with np.errstate(invalid="ignore"):`): compiled code reports none."""
    def check(expr: gast.expr) -> bool:
        if isinstance(expr, gast.Call):
            expr = expr.func
        attrs = []
        while isinstance(expr, (gast.Call, gast.Attribute)):
            if isinstance(expr, gast.Attribute):
                attrs.append(expr.attr)
            expr = expr.func if isinstance(expr, gast.Call) else expr.value
        if not isinstance(expr, gast.Name) or expr.id in locals_:
            return False
        target = resolve(expr.id, tuple(reversed(attrs)))
        if any(target is c for c in _REPORTING_CONTEXTS):
            return True
        value = resolve(expr.id)
        name = value.__name__ if isinstance(value, types.ModuleType) else getattr(
            value, "__module__", "") or ""
        return name == "llgrad" or name.startswith("llgrad.")

    return check


_REPORTING_CONTEXTS = (np.errstate, warnings.catch_warnings)


def _convert(fn: Callable) -> ConvertedFunction:
    from .. import operators
    k = None
    if stored.current() is not None:  # Note [Converted code on disk] (stored.py)
        try:
            k = stored.key(fn, *source_lines(fn))
        except (OSError, TypeError):
            k = None  # no source: parse_function says so
    if k is not None:
        hit = stored.load(k, fn)
        if hit is not None:
            module_code, source, filename, firstlineno = hit
            injected = {"__lg": operators, "__lg_src": SourceMap(filename, fn.__qualname__)}
            try:
                new_fn = compile_.from_module_code(module_code, fn, injected)
            except (LookupError, KeyError):
                pass  # not this function's code: convert it again (and overwrite the entry)
            else:
                setattr(new_fn, MARK, True)
                return ConvertedFunction(weakref.ref(fn), new_fn, source, filename, firstlineno)
    parsed = parse_function(fn)
    node = parsed.node
    fence.check_static(node, parsed.loc)
    namer = Namer.for_function(node)
    globals_, nonlocals = declared_names(node)
    locals_ = local_names(node)
    frame, nonlocals = cells.frame_names(node, fn, locals_, nonlocals)
    owned, shared = nonlocals & frame, cells.nested_nonlocals(node) & frame
    live = liveness.closure_reads(node) & locals_ | owned
    resolve = stored.Lookups(fn)
    fence.insert_fences(node, locals_ | set(fn.__code__.co_freevars), globals_,
                        nonlocals - owned, _is_llgrad_context(resolve, locals_))
    jumps.convert_jumps(node, namer)
    comprehensions.convert_comprehensions(node, locals_, resolve)
    calls.convert_calls(node, locals_, locals_, resolve, namer)
    cells.mark_nested(node, frame)
    logical.convert_logical(node)
    liveness.annotate(node, live)
    convert_control_flow(node, namer, globals_, nonlocals, locals_, owned, shared)

    py_node = gast.gast_to_ast(node)
    source = ast.unparse(py_node)
    injected = {"__lg": operators, "__lg_src": SourceMap(parsed.filename, parsed.qualname)}
    new_fn, module_code = compile_.instantiate(py_node, fn, injected, parsed.filename)
    setattr(new_fn, MARK, True)
    if k is not None:
        stored.save(k, resolve, module_code, source, parsed.filename, parsed.firstlineno)
    return ConvertedFunction(weakref.ref(fn), new_fn, source, parsed.filename, parsed.firstlineno)
