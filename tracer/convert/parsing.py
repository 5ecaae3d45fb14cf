"""Parse a Python function's source into a gast FunctionDef with the user's real locations.

Invariant of the output: every node's ``lineno``/``end_lineno`` is the line in the user's file
and ``col_offset`` the column in that file (the dedent is undone), so ``SourceLoc`` built from
any node names the user's file:line. Decorators are dropped (the converted function is the
undecorated body).
"""

from __future__ import annotations

import dataclasses
import inspect
import textwrap
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
        lines, firstlineno = inspect.getsourcelines(fn)
    except (OSError, TypeError) as e:
        raise UnsupportedSyntaxError(
            f"cannot read the source of {fn.__qualname__!r} ({e})",
            SourceLoc(filename, code.co_firstlineno, 0, fn.__qualname__),
            "define the function in a .py file (not in exec/eval or an interactive prompt)",
        ) from None
    source = "".join(lines)
    dedented = textwrap.dedent(source)
    indent = _indent(lines[0]) - _indent(dedented.splitlines()[0])
    if fn.__name__ == "<lambda>":
        raise UnsupportedSyntaxError(
            "lambda functions cannot be converted",
            SourceLoc(filename, firstlineno, indent, fn.__qualname__),
            "use a `def` function",
        )
    module = gast.parse(dedented)
    defs = [n for n in module.body if isinstance(n, (gast.FunctionDef, gast.AsyncFunctionDef))]
    node = defs[0]
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


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())
