"""Converted AST -> function object, with the original globals, defaults and closure cells.

As AutoGraph's loader does, the converted def is compiled inside a factory whose parameters
are the original free variables plus the injected names (``__lg``, ``__lg_src``), so they
become free variables of the converted code; the factory is never run. The function is built
directly from the code object with the *original* cells (closure updates stay shared both
ways) and fresh cells for injected names. It is compiled under the user's filename and line
numbers, so tracebacks point at the user's source.
"""

from __future__ import annotations

import ast
import copy
import types
from typing import Any, Callable

FACTORY, INNER = "__lg_factory", "__lg_converted"


def instantiate(node: ast.FunctionDef, original: Callable, injected: dict[str, Any],
                filename: str) -> tuple[types.FunctionType, types.CodeType]:
    """The converted function, and the module code it came from (what
    `from_module_code` builds it from again: Note [Converted code on disk] in stored.py)."""
    module_code = compile_factory(node, original, injected, filename)
    return from_module_code(module_code, original, injected), module_code


def compile_factory(node: ast.FunctionDef, original: Callable, injected: dict[str, Any],
                    filename: str) -> types.CodeType:
    """The code of a module defining the factory of the converted `node`."""
    code = original.__code__
    # Compiled under a reserved name: the factory must not bind the user's name, which the
    # body may use to reach the (global or enclosing) original, e.g. in recursion.
    node = copy.copy(node)
    node.name = INNER
    params = list(code.co_freevars) + [n for n in injected if n not in code.co_freevars]
    args = ast.arguments(posonlyargs=[], args=[ast.arg(arg=p) for p in params], vararg=None,
                         kwonlyargs=[], kw_defaults=[], kwarg=None, defaults=[])
    factory = ast.FunctionDef(name=FACTORY, args=args,
                              body=[node, ast.Return(ast.Name(node.name, ast.Load()))],
                              decorator_list=[], returns=None, type_params=[])
    for n in ast.walk(factory):
        if "lineno" in n._attributes and getattr(n, "lineno", None) is None:
            n.lineno, n.col_offset = node.lineno, 0
            n.end_lineno, n.end_col_offset = node.lineno, 0
    module = ast.fix_missing_locations(ast.Module(body=[factory], type_ignores=[]))
    return compile(module, filename, "exec", dont_inherit=True)


def from_module_code(module_code: types.CodeType, original: Callable,
                     injected: dict[str, Any]) -> types.FunctionType:
    """The converted function in `module_code` (from `compile_factory`), with `original`'s
    globals, closure cells, defaults and names. Raises LookupError or KeyError when the
    code is not such a module for `original`."""
    code = original.__code__
    factory_code = _const_code(module_code, FACTORY)
    fn_code = _renamed(_const_code(factory_code, INNER), original.__name__,
                       original.__qualname__)

    cells = dict(zip(code.co_freevars, original.__closure__ or ()))
    closure = []
    for name in fn_code.co_freevars:
        if name in injected:
            closure.append(types.CellType(injected[name]))
        else:
            closure.append(cells[name])
    fn = types.FunctionType(fn_code, original.__globals__, original.__name__,
                            original.__defaults__, tuple(closure))
    fn.__kwdefaults__ = original.__kwdefaults__
    fn.__qualname__ = original.__qualname__
    fn.__doc__ = original.__doc__
    fn.__module__ = original.__module__
    fn.__annotations__ = getattr(original, "__annotations__", {})
    fn.__dict__.update(original.__dict__)
    return fn


def _renamed(code: types.CodeType, name: str, qualname: str) -> types.CodeType:
    """``code`` named as the user's function, and so are the generated functions nested in
    it (``__lg_loop_body``, ``__lg_if_body``, ...): frames of converted code, which error
    locations and tracebacks report, name the user's function, not llgrad's helpers."""
    consts = tuple(_renamed(c, name, qualname)
                   if isinstance(c, types.CodeType) and c.co_name.startswith("__lg_") else c
                   for c in code.co_consts)
    code = code.replace(co_name=name, co_consts=consts)
    if hasattr(code, "co_qualname"):
        code = code.replace(co_qualname=qualname)
    return code


def _const_code(code: types.CodeType, name: str) -> types.CodeType:
    for c in code.co_consts:
        if isinstance(c, types.CodeType) and c.co_name == name:
            return c
    raise LookupError(f"no code object {name!r} in {code.co_name}")  # an llgrad bug
