"""Calls of library (scipy) functions that run converted on traced values: their failures as
one clear error (Note [Unsupported library functions])."""
from __future__ import annotations

import threading
import types
from typing import Callable

from llgrad.runtime.errors import ConcretizationError, UnsupportedError, user_loc


# Note [Unsupported library functions]
# A scipy function llgrad has no traced form for runs converted (Note [Library code on traced
# values]); most of scipy then fails somewhere deep inside: an attribute an ndarray has
# (`a.flags`), scipy's array-API check ("not a supported array type"), a `try` statement, a
# conversion to a numpy array, code the converter cannot compile. Such a failure, raised by
# the outermost library function the user called, becomes one UnsupportedError naming that
# function, the user's line and what to write instead. A ConcretizationError while tracing
# the staged path is left alone: it moves the function to the dynamic path, where library
# code that branches on values runs; ValueErrors and linalg errors are the library's own
# answers about the values, and stay as they are.
_IN_LIBRARY = threading.local()


def library_call(f: types.FunctionType, converted: Callable, stagers: dict) -> Callable:
    """`converted` (the converted library function `f`), its failures on traced values one
    UnsupportedError naming `f` (Note [Unsupported library functions])."""
    if getattr(_IN_LIBRARY, "depth", 0):
        return converted

    def call(*args, **kwargs):
        _IN_LIBRARY.depth = getattr(_IN_LIBRARY, "depth", 0) + 1
        try:
            return converted(*args, **kwargs)
        except (TypeError, AttributeError, SyntaxError, UnsupportedError) as e:
            if isinstance(e, ConcretizationError) and not any(
                    getattr(s, "eager", bool)() for s in stagers.values()):
                raise
            from llgrad.runtime.numpy_api import library_alternative, numpy_name
            name = numpy_name(f)
            raise UnsupportedError(
                f"{name} is not supported on traced values: llgrad has no version of it, and "
                f"its own Python code fails on them ({type(e).__name__}: "
                f"{str(e).splitlines()[0]})", loc=user_loc(),
                fix=library_alternative(name)) from None
        finally:
            _IN_LIBRARY.depth -= 1
    return call
