"""Errors raised by the source converter and the operators it calls.

Every error carries the user's real file:line (never a generated name), so Python's own
traceback printer draws the caret under the user's source line.
"""

from __future__ import annotations

import linecache

# One SourceLoc for the whole compiler: the tracer's locations end up on IR ops and in
# LLGradErrors, which call `loc.describe()`.
from llgrad.runtime.errors import SourceLoc
from llgrad.runtime.errors import UnsupportedSyntaxError as _BaseUnsupportedSyntaxError


class UnsupportedSyntaxError(_BaseUnsupportedSyntaxError):
    """A Python construct llgrad cannot compile, at a line of the user's function.

    A SyntaxError subclass carrying the real filename, lineno, offset and source text, so
    Python's traceback shows the user's line with a caret. ``what`` says what is unsupported,
    ``fix`` says what to write instead.
    """

    def __init__(self, what: str, loc: SourceLoc | None = None, fix: str | None = None):
        self.what, self.loc, self.fix = what, loc, fix
        msg = what if fix is None else f"{what}\n  Fix: {fix}"
        if loc is None:
            SyntaxError.__init__(self, msg)
            return
        text = linecache.getline(loc.file, loc.line) or None
        SyntaxError.__init__(self, msg, (loc.file, loc.line, loc.column + 1, text))


class SourceMap:
    """Locations in one converted function; converted code calls ``__lg_src.loc(line, col)``."""

    def __init__(self, file: str, function: str):
        self.file, self.function = file, function
        self._cache: dict[tuple[int, int], SourceLoc] = {}

    def loc(self, line: int, column: int = 0) -> SourceLoc:
        key = (line, column)
        if key not in self._cache:
            self._cache[key] = SourceLoc(self.file, line, column, self.function)
        return self._cache[key]
