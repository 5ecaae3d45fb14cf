"""Calls of library functions on traced values (scipy's run converted, the standard
library's and other packages' as they are): their failures as one clear error (Note
[Unsupported library functions]); and calls of compiled (C, Cython) library functions with
traced arguments (Note [Compiled library code on traced values])."""
from __future__ import annotations

import sys
import threading
import types
from typing import Callable

from llgrad.runtime.errors import (ConcretizationError, InternalError, LinAlgError, LLGradError,
                                   UnsupportedError, is_own_file, user_loc)


# Note [Unsupported library functions]
# A scipy function llgrad has no traced form for runs converted (Note [Library code on traced
# values]); most of scipy then fails somewhere deep inside: an attribute an ndarray has
# (`a.flags`), scipy's array-API check ("not a supported array type"), a `try` statement, a
# conversion to a numpy array, code the converter cannot compile. Such a failure, raised by
# the outermost library function the user called, becomes one UnsupportedError naming that
# function, the user's line and what to write instead. A ConcretizationError while tracing
# the staged path is left alone: it moves the function to the dynamic path, where library
# code that branches on values runs; ValueErrors and linalg errors are the library's own
# answers about the values, and stay as they are (as do llgrad's ShapeError, IndexingError
# and LinAlgError, its answers about them, and an InternalError). llgrad's other errors about
# the library's code (a variable of scipy's holding different objects on the two paths of a
# traced condition, or of two dtypes there: scipy's logm making A complex on one path) and
# a NotImplementedError from inside it become the
# one UnsupportedError too. On the dynamic path, a library that turns a traced float into a
# number (`float(x)`: scipy.integrate.quad's C code on what the integrand
# returns) is refused (`library_number`): the user did not ask for a constant, and the
# gradient through it would be lost: a wrong gradient, not PyTorch's documented float(t).
# A Python function of the standard library or another package that llgrad does not convert
# (statistics.mean) gets the same translation of its failures (a TypeError from deep inside
# it named no line of the user's).
_IN_LIBRARY = threading.local()


def library_number(what: str) -> None:
    """Raise if library code, not the user's, is converting a traced float to a number
    (`what`: float(), .item(), .tolist()) on the dynamic path (Note [Unsupported library
    functions])."""
    from .convert.calls import LIBRARY_ROOTS
    f = sys._getframe(1)
    while f is not None and is_own_file(f.f_code.co_filename):
        f = f.f_back  # (to who asked for the number: numpy, scipy, the user)
    module = f.f_globals.get("__name__", "") if f is not None else ""
    if module.split(".")[0] not in LIBRARY_ROOTS:
        return
    raise UnsupportedError(
        f"{module} converts a traced float to a Python number ({what}), which would lose "
        f"its gradient (a library llgrad has no version of, called with a function or "
        f"values of yours)", loc=user_loc(),
        fix="write the computation with numpy functions llgrad supports (docs/numpy_"
        "support.md), e.g. an integral as np.trapezoid on a grid; or call the library "
        "outside the differentiated function if no gradient flows through it")


def library_call(f: types.FunctionType, converted: Callable, stagers: dict) -> Callable:
    """`converted` (the converted library function `f`), its failures on traced values one
    UnsupportedError naming `f` (Note [Unsupported library functions])."""
    if getattr(_IN_LIBRARY, "depth", 0):
        return converted

    def call(*args, **kwargs):
        _IN_LIBRARY.depth = getattr(_IN_LIBRARY, "depth", 0) + 1
        try:
            return converted(*args, **kwargs)
        except (TypeError, AttributeError, SyntaxError, NotImplementedError, LLGradError) as e:
            if isinstance(e, ConcretizationError) and not any(
                    getattr(s, "eager", bool)() for s in stagers.values()):
                raise
            if isinstance(e, (InternalError, LinAlgError, ValueError, IndexError)) and not \
                    getattr(e, "of_branches", False) or getattr(e, "_lg_signal", False):
                raise  # (the library's answer about the values; a signal of the stager)
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


# Note [Compiled library code on traced values]
# A function written in C or Cython outside numpy and Python's own modules cannot take a
# traced value: it converts its arguments with numpy's C API, and may report the failure of
# that conversion (the ConcretizationError of `__array__`) as an error of its own, which
# reads like a mistake of the user's ("could not convert b, a, and x to a common type", from
# scipy.signal's _linear_filter). Called with traced arguments, such a function's TypeError
# or ValueError becomes an UnsupportedError naming it; inside a library function, that one
# then names the function the user called (Note [Unsupported library functions]).
_PYTHONS_OWN = frozenset({"builtins", "math", "cmath", "operator", "_operator", "functools",
                          "itertools", "numpy", "copy", "_functools", "collections"})


def is_compiled_library(f) -> bool:
    """True for a C or Cython function of a module other than numpy and Python's own."""
    if not (isinstance(f, types.BuiltinFunctionType) or "cython_function" in type(f).__name__):
        return False
    mod = getattr(f, "__module__", None)
    return bool(mod) and isinstance(mod, str) and mod.split(".")[0] not in _PYTHONS_OWN


def compiled_library_call(f: Callable) -> Callable:
    """`f`, a compiled library function given traced arguments, its failures on them one
    UnsupportedError (Note [Compiled library code on traced values])."""
    def call(*args, **kwargs):
        try:
            return f(*args, **kwargs)
        except (TypeError, ValueError) as e:
            if isinstance(e, (ConcretizationError, UnsupportedError)):
                raise
            name = f"{f.__module__}.{getattr(f, '__name__', '?')}"
            raise UnsupportedError(
                f"{name} is compiled code, which cannot take traced values ("
                f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''})",
                loc=user_loc(), fix="call it outside the differentiated function on plain "
                "arrays (no gradient flows through it), or write it with the numpy functions "
                "llgrad supports (docs/numpy_support.md)") from None
    return call
