"""The llgrad error hierarchy and source locations; the base layer every other layer uses.

Every error says what went wrong, where in the user's source (`SourceLoc`), and how to fix it.
"""
from __future__ import annotations

import linecache
import os
import sys
from dataclasses import dataclass
from types import FrameType

_PKG_DIRS = tuple(
    os.path.dirname(os.path.abspath(__file__)).rsplit(os.sep, 1)[0] + os.sep + d + os.sep
    for d in ("runtime", "tracer", "transform", "codegen", "llgrad")
)


@dataclass(frozen=True)
class SourceLoc:
    """A place in the user's source: file, line, column and enclosing function."""

    file: str
    line: int
    column: int = 0
    function: str = ""

    def __str__(self) -> str:
        return f"{self.file}:{self.line}"

    @property
    def source_line(self) -> str:
        return linecache.getline(self.file, self.line).strip()

    def describe(self) -> str:
        """`file:line (in fn)` plus the source line, for error messages."""
        text = f"{self.file}:{self.line}" + (f" (in {self.function})" if self.function else "")
        src = self.source_line
        return text + (f"\n    {src}" if src else "")


def is_internal_file(filename: str) -> bool:
    return filename.startswith(_PKG_DIRS)


_INTERNAL_FILE: dict = {}  # filename -> is it llgrad's own (hashing a str is cached; a code's is not)


def user_frame(depth: int = 1) -> FrameType | None:
    """The innermost frame outside llgrad's own packages (cheap: cached per file name)."""
    f = sys._getframe(depth)
    cache = _INTERNAL_FILE
    while f is not None:
        fn = f.f_code.co_filename
        internal = cache.get(fn)
        if internal is None:
            internal = cache[fn] = fn.startswith(_PKG_DIRS)
        if not internal:
            return f
        f = f.f_back
    return None


def user_loc(depth: int = 2) -> SourceLoc | None:
    f = user_frame(depth)
    if f is None:
        return None
    return SourceLoc(f.f_code.co_filename, f.f_lineno, 0, f.f_code.co_name)


def _compose(what: str, loc: SourceLoc | None, fix: str | None) -> str:
    msg = what
    if loc is not None:
        msg += f"\n  at {loc.describe()}"
    if fix:
        msg += f"\n  How to fix: {fix}"
    return msg


class LLGradError(Exception):
    """Base of llgrad's errors: `what`, optional `loc` (SourceLoc) and `fix`."""

    def __init__(self, what: str, loc: SourceLoc | None = None, fix: str | None = None):
        self.what, self.loc, self.fix = what, loc, fix
        super().__init__(_compose(what, loc, fix))


class ShapeError(LLGradError, ValueError):
    """Operand shapes that do not fit the operation."""


class DTypeError(LLGradError, TypeError):
    """Operand dtypes that do not fit the operation."""


class ConcretizationError(LLGradError, TypeError):
    """A traced value was used where a concrete Python value is needed."""


class UnsupportedError(LLGradError, NotImplementedError):
    """An operation or construct llgrad does not support (never silently wrong)."""


class AutogradError(LLGradError, RuntimeError):
    """Misuse of the autograd engine: freed graphs, in-place versions, bad gradients."""


class InternalError(LLGradError, RuntimeError):
    """A bug in llgrad itself."""

    def __init__(self, what: str, loc: SourceLoc | None = None, fix: str | None = None):
        super().__init__(
            what + "\n  this is an llgrad bug; rerun with LLGRAD_DUMP=dir, report", loc, fix
        )


class PerformanceWarning(UserWarning):
    """Compiled code costs much more than it could: the message names the user's line, the
    reason, the cost and the rewrite that avoids it. Each is issued once per function;
    silence them with `warnings.filterwarnings("ignore", category=llgrad.PerformanceWarning)`.
    """


class UnrollWarning(PerformanceWarning):
    """A loop was unrolled at trace time: one compiled copy of its body per iteration."""


class DynamicPathWarning(PerformanceWarning):
    """A function takes the dynamic path: it is traced again on every call."""


class RetraceWarning(PerformanceWarning):
    """A function is traced again on (almost) every call: its call signature, or a global it
    reads, keeps changing."""


class UnsupportedSyntaxError(SyntaxError):
    """A Python construct the compiler cannot convert; carries the real filename for the caret."""

    def __init__(self, what: str, loc: SourceLoc | None = None, fix: str | None = None):
        self.what, self.loc, self.fix = what, loc, fix
        msg = what + (f"\n  How to fix: {fix}" if fix else "")
        if loc is not None:
            text = linecache.getline(loc.file, loc.line)
            super().__init__(msg, (loc.file, loc.line, loc.column + 1, text))
        else:
            super().__init__(msg)
