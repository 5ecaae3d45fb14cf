"""Parse a Python function's source into a gast FunctionDef with the user's real locations.

Invariant of the output: every node's ``lineno``/``end_lineno`` is the line in the user's file
and ``col_offset`` the column in that file (the dedent is undone), so ``SourceLoc`` built from
any node names the user's file:line. Decorators are dropped (the converted function is the
undecorated body).
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
import linecache
import re
import textwrap
import types
import weakref
from typing import Callable

import gast

from .errors import SourceLoc, UnsupportedSyntaxError


@dataclasses.dataclass
class ParsedFunction:
    node: gast.FunctionDef
    filename: str
    firstlineno: int
    qualname: str

    def loc(self, node: gast.AST) -> SourceLoc:
        return SourceLoc(self.filename, getattr(node, "lineno", None) or self.firstlineno,
                         getattr(node, "col_offset", None) or 0, self.qualname)


def parse_function(fn: Callable) -> ParsedFunction:
    """Parse ``fn``'s source; raises ``UnsupportedSyntaxError`` if it has no usable source."""
    code = fn.__code__
    filename = inspect.getsourcefile(fn) or code.co_filename
    try:
        lines, firstlineno = source_lines(fn)
    except (OSError, TypeError) as e:
        raise UnsupportedSyntaxError(
            f"cannot read the source of {fn.__qualname__!r} ({e})",
            SourceLoc(filename, code.co_firstlineno, 0, fn.__qualname__),
            "define the function in a .py file (not in exec/eval or an interactive prompt)",
        ) from None
    if fn.__name__ == "<lambda>":
        node = _lambda_def(code, filename, fn.__qualname__)
        return ParsedFunction(node, filename, node.lineno, fn.__qualname__)
    source = "".join(lines)
    dedented = textwrap.dedent(source)
    indent = _indent(lines[0]) - _indent(dedented.splitlines()[0])
    node = [n for n in gast.parse(dedented).body
            if isinstance(n, (gast.FunctionDef, gast.AsyncFunctionDef))][0]
    for n in gast.walk(node):
        if getattr(n, "lineno", None) is not None:
            n.lineno += firstlineno - 1
            n.col_offset += indent
        if getattr(n, "end_lineno", None) is not None:
            n.end_lineno += firstlineno - 1
            n.end_col_offset += indent
    parsed = ParsedFunction(node, filename, firstlineno, fn.__qualname__)
    if isinstance(node, gast.AsyncFunctionDef):
        raise UnsupportedSyntaxError(
            "async functions cannot be differentiated", parsed.loc(node),
            "make it a plain `def` function")
    node.decorator_list = []
    return parsed


# Note [Converting lambdas]
# A lambda's code object knows where its body is: the positions (line, column, end line, end
# column) of its instructions span the body's expression. That text alone is parsed (inside
# parentheses, so it may span lines), whatever surrounds it: a lambda in a decorator's
# argument list, two lambdas on one line, a lambda in another. Its parameters are the code
# object's; defaults need no source, as the converted function takes the original's
# __defaults__ (compile.py). It is converted as `def <lambda>(params): return body`: a lambda
# has no statements, but its calls must go through converted_call like any other, or the
# functions it calls run unconverted (`differentiate(lambda w: loss(w, X, y))` took the
# dynamic path on loss's `if`, and scipy's Python functions failed on traced values).
def code_span(code: types.CodeType) -> tuple[tuple[int, int], tuple[int, int]] | None:
    """((line, column), (end line, end column)) of the instructions of `code` that have a
    source span (not the zero-width ones of RESUME and the implicit return)."""
    spans = [((l, c), (el, ec)) for l, el, c, ec in code.co_positions()
             if l is not None and c is not None and (el, ec) > (l, c)]
    if not spans:
        return None
    return min(s for s, _ in spans), max(e for _, e in spans)


def _lambda_def(code: types.CodeType, filename: str, qualname: str) -> gast.FunctionDef:
    """The lambda of `code` as a FunctionDef (Note [Converting lambdas])."""
    span, lines = code_span(code), linecache.getlines(filename)
    try:
        (l0, c0), (l1, c1) = span
        raw = [line.encode() for line in lines[l0 - 1:l1]]  # columns count UTF-8 bytes
        text = raw[0][c0:c1] if l0 == l1 else raw[0][c0:] + b"".join(raw[1:-1]) + raw[-1][:c1]
        body = gast.parse("(" + text.decode() + ")", mode="eval").body
    except (TypeError, ValueError, IndexError, SyntaxError):
        raise UnsupportedSyntaxError(
            "cannot find this lambda's body in its source",
            SourceLoc(filename, code.co_firstlineno, 0, qualname), "use a `def` function",
        ) from None
    for n in gast.walk(body):
        for line, col in (("lineno", "col_offset"), ("end_lineno", "end_col_offset")):
            if getattr(n, line, None) is not None:
                if getattr(n, line) == 1:
                    setattr(n, col, getattr(n, col) + c0 - 1)  # (after the "(")
                setattr(n, line, getattr(n, line) + l0 - 1)
    names = code.co_varnames

    def param(k):
        return gast.Name(id=names[k], ctx=gast.Param(), annotation=None, type_comment=None)
    n_pos, n_args, n_kw = code.co_posonlyargcount, code.co_argcount, code.co_kwonlyargcount
    k = n_args + n_kw
    vararg = param(k) if code.co_flags & inspect.CO_VARARGS else None
    kwarg = param(k + (vararg is not None)) if code.co_flags & inspect.CO_VARKEYWORDS else None
    args = gast.arguments(
        args=[param(i) for i in range(n_pos, n_args)],
        posonlyargs=[param(i) for i in range(n_pos)], vararg=vararg,
        kwonlyargs=[param(i) for i in range(n_args, k)], kw_defaults=[None] * n_kw,
        kwarg=kwarg, defaults=[])
    ret = gast.copy_location(gast.Return(value=body), body)
    node = gast.FunctionDef(name="__lg_lambda", args=args, body=[ret], decorator_list=[],
                            returns=None, type_comment=None, type_params=[])
    return gast.copy_location(node, body)


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def source_lines(fn: Callable) -> tuple[list[str], int]:
    """``inspect.getsourcelines(fn)``, read once per code object (Note [Finding the source]).

    Raises what ``inspect.getsourcelines`` raises when there is no source (OSError, TypeError).
    The list is shared: do not modify it.
    """
    # Not inspect.unwrap(fn), as inspect.getsourcelines does: a function made by a decorator
    # with functools.wraps has the wrapped function as __wrapped__, and converting that in
    # its place dropped the wrapper (`2.0 * fn(x)` gave fn(x)). The wrapper's own code is what
    # runs; its call of the wrapped function is converted in turn.
    code = getattr(fn, "__code__", None)
    if not isinstance(code, types.CodeType):
        return inspect.getsourcelines(fn)
    found = _SOURCES.get(code)
    if found is None:
        lines, lnum = inspect.findsource(fn)
        block = None if code.co_name == "<lambda>" else _def_block(lines, lnum, code.co_name)
        found = _SOURCES[code] = (block or inspect.getblock(lines[lnum:]), lnum + 1)
    return found


_SOURCES: "weakref.WeakKeyDictionary[types.CodeType, tuple[list[str], int]]" = \
    weakref.WeakKeyDictionary()
_DEF = re.compile(r"(async\s+)?def\s")


def _def_block(lines: list[str], start: int, name: str) -> list[str] | None:
    """The lines of the ``def`` of `name` (decorators included) at ``lines[start]``, found by
    indentation; None when that is not certain (then inspect's tokenizer decides)."""
    base = _indent(lines[start])
    i = start
    while i < len(lines) and not (_indent(lines[i]) == base and _DEF.match(lines[i].lstrip())):
        i += 1  # decorators
    end = len(lines)
    for j in range(i + 1, len(lines)):
        text = lines[j].lstrip()
        if text and not text.startswith("#") and _indent(lines[j]) <= base:
            end = j  # the first statement after the body
            break
    while end > i + 1 and lines[end - 1].lstrip()[:1] in ("", "#"):
        end -= 1  # trailing blank and comment lines
    block = lines[start:end]
    if any(line.strip() and line[:_indent(line)].strip(" ") for line in block):
        return None  # a tab or form feed in an indentation: columns are not characters
    try:
        tree = ast.parse(textwrap.dedent("".join(block)))
    except SyntaxError:
        return None  # cut inside a string, bracket or continuation line
    if len(tree.body) != 1 or not isinstance(tree.body[0], (ast.FunctionDef,
                                                            ast.AsyncFunctionDef)):
        return None
    node = tree.body[0]
    first = min([node.lineno] + [d.lineno for d in node.decorator_list])
    return block if node.name == name and first == 1 else None


# Note [Finding the source]
# `inspect.getsourcelines` finds a function's first line from `co_firstlineno` (its first
# decorator, or the `def`) and its last by tokenizing from there (`inspect.getblock`); the first
# tokenize of a process compiles tokenize's large regular expressions (~11 ms, issue 6). For a
# `def` the end is also where indentation says: the first statement after the `def` line that
# is indented no deeper than the `def` (blank and comment lines do not count). That cut is
# certain when the lines before it parse as exactly this one `def`: had the cut fallen inside a
# string, a bracket or a continued line, that prefix would not parse. So `_def_block` cuts by
# indentation and checks with `ast.parse`; when the check fails (a tab in an indentation, a
# lambda, an odd layout) `inspect.getblock` decides, as before. Both give the same first line,
# so every file:line is unchanged; the block may end before trailing comments, which carry no
# code. The result is kept per code object: tracing asks for it twice (tracing._convertible,
# then parse_function), and it stays the text the code was compiled from even if the file is
# edited while the process runs.
