"""The llgrad error hierarchy and source locations; the base layer every other layer uses.

Every error says what went wrong, where in the user's source (`SourceLoc`), and how to fix it.
"""
from __future__ import annotations

import linecache
import os
import sys
from dataclasses import dataclass
from types import FrameType

import numpy as np


def _library_dirs() -> tuple:
    """numpy's and scipy's package directories (scipy's found beside numpy's, not imported):
    where numpy calls back into a value (`np.sum([a, b])` converting its list), the user's
    line is the call, not a frame inside numpy."""
    base = os.path.dirname(os.path.abspath(np.__file__))
    return base + os.sep, os.path.join(os.path.dirname(base), "scipy") + os.sep


# Frames in these directories are never the user's: llgrad's own packages and the libraries
# above.
_OWN_DIRS = tuple(
    os.path.dirname(os.path.abspath(__file__)).rsplit(os.sep, 1)[0] + os.sep + d + os.sep
    for d in ("runtime", "tracer", "transform", "codegen", "llgrad"))
_PKG_DIRS = _OWN_DIRS + _library_dirs()


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


def is_own_file(filename: str) -> bool:
    """Whether a file is llgrad's own (is_internal_file also counts numpy's and scipy's)."""
    return filename.startswith(_OWN_DIRS)


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


class IndexingError(LLGradError, IndexError):
    """An index numpy would reject (out of bounds for its axis, too many indices), found while
    tracing, interpreting or running compiled code."""

    @classmethod
    def out_of_bounds(cls, what: str, loc: SourceLoc | None) -> "IndexingError":
        """`what` is numpy's sentence ("index 5 is out of bounds for axis 0 with size 5")."""
        return cls(what, loc, "an axis of size n takes indices -n..n-1 (negative ones count "
                              "from the end); check how the index is computed, e.g. a loop "
                              "that runs one step too far")


class OutOfMemoryError(LLGradError, MemoryError):
    """Compiled code could not allocate memory it needs (a loop tape that outgrew memory)."""


class LinAlgError(LLGradError, np.linalg.LinAlgError):
    """numpy's LinAlgError at the user's line: a matrix that is singular, not positive
    definite, or whose decomposition did not converge (eager, interpreted or compiled)."""

    @classmethod
    def numpy(cls, message: str, loc: SourceLoc | None) -> "LinAlgError":
        """The error numpy/scipy raise with `message`, with advice for the usual causes."""
        fix = next((f for key, f in _LINALG_FIXES if message.lower().startswith(key)), None)
        return cls(message, loc, fix)


_LINALG_FIXES = (
    ("matrix is not positive definite",
     "a Cholesky factor exists only for a symmetric positive definite matrix: check how the "
     "matrix is built, or add a small multiple of the identity to its diagonal (jitter)"),
    ("singular matrix",
     "the matrix has no inverse (linearly dependent rows or columns, or a zero on the "
     "diagonal of a triangular matrix): check how it is built, regularise it (A + eps * I), "
     "or use np.linalg.pinv"),
    ("", "check the matrix for inf or nan values"),
)


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
