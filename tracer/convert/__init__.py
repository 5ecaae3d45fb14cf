"""AutoGraph-style source conversion of Python control flow (gast).

``convert(fn) -> ConvertedFunction`` rewrites ``if``/``for``/``while``, ``and``/``or``/``not``,
ternaries, chained comparisons, break/continue/return, element updates and calls into calls of
``llgrad.tracer.operators``, which run plain Python or stage into IR at run time.
"""

from .api import ConvertedFunction, convert
from .errors import SourceLoc, UnsupportedSyntaxError
from .parsing import source_lines

__all__ = ["ConvertedFunction", "SourceLoc", "UnsupportedSyntaxError", "convert", "source_lines"]
