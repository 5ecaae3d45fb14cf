"""The scalar-rule vocabulary on numpy arrays, and the libm functions it names.

An elementwise primitive's `scalar` rule (`scalar(s, *xs)`, docs/ARCHITECTURE.md) is written
against an abstract emitter `s`; codegen implements it on LLVM values. `NUMPY` implements it
on ndarrays, so a primitive defined by a formula (digamma, logit, ...) uses that one formula as
its numpy `impl` too: eager mode, the interpreter and native code compute the same thing.
`LIBM` maps the libm names `s.call(name, ...)` accepts to numpy (or scipy.special) functions.
"""
from __future__ import annotations

import numpy as np


def _special(name: str):
    """scipy.special's ufunc `name`, imported on first use (so `import llgrad` stays light)."""
    def fn(*xs):
        import scipy.special
        return getattr(scipy.special, name)(*xs)
    fn.__name__ = name
    return fn


# libm name -> numpy function (the same function, to a few ulp).
LIBM = {
    "sinh": np.sinh, "cosh": np.cosh, "asin": np.arcsin, "acos": np.arccos, "atan": np.arctan,
    "asinh": np.arcsinh, "acosh": np.arccosh, "atanh": np.arctanh, "exp2": np.exp2,
    "log2": np.log2, "log10": np.log10, "cbrt": np.cbrt, "ceil": np.ceil, "trunc": np.trunc,
    "rint": np.rint, "fabs": np.fabs, "atan2": np.arctan2, "hypot": np.hypot,
    "copysign": np.copysign, "erf": _special("erf"), "erfc": _special("erfc"),
    "lgamma": _special("gammaln"),  # scipy's: at -inf, -inf (C's lgamma: +inf)
    "tgamma": _special("gamma"),
}

# scipy.special functions a scalar rule may call, with their number of operands: generated code
# calls scipy's own C function (codegen/special.py, Note [scipy.special's C functions]), the
# numpy rule its ufunc; both compute in float64.
SCIPY_SPECIAL = {"i0": 1, "i0e": 1, "i1": 1, "i1e": 1, "ndtri": 1, "erfcx": 1, "dawsn": 1,
                 "exprel": 1, "gammainc": 2, "gammaincc": 2, "kv": 2, "kve": 2, "jv": 2,
                 "binom": 2, "betainc": 3}
LIBM.update({name: _special(name) for name in SCIPY_SPECIAL})


def libm_rule(name: str):
    """The scalar rule of a primitive that is one libm function: `s.call(name, *xs)`."""
    return lambda s, *xs: s.call(name, *xs)


class NumpyScalar:
    """The scalar-rule emitter on ndarrays (Python numbers stay weak, as in the rules)."""

    add, sub, mul, div = np.add, np.subtract, np.multiply, np.true_divide
    neg, pow, exp, log, log1p, expm1 = np.negative, np.power, np.exp, np.log, np.log1p, np.expm1
    sin, cos, tan, tanh, sqrt, abs = np.sin, np.cos, np.tan, np.tanh, np.sqrt, np.abs
    sign, max, min, floor = np.sign, np.maximum, np.minimum, np.floor
    floordiv, mod, fmod = np.floor_divide, np.remainder, np.fmod
    and_, or_, not_ = np.logical_and, np.logical_or, np.logical_not

    @staticmethod
    def call(name, *xs):
        return LIBM[name](*xs)

    @staticmethod
    def zero(x):
        return np.zeros_like(x)

    @staticmethod
    def select(c, a, b):
        out = np.where(c, a, b)
        dt = next((v.dtype for v in (a, b) if isinstance(v, np.ndarray)), None)
        return out if dt is None else out.astype(dt, copy=False)

    @staticmethod
    def cmp(sym, x, y):
        return _CMP[sym](x, y)

    @staticmethod
    def cast(x, dtype):
        return np.asarray(x).astype(dtype)

    @staticmethod
    def dtype(x):
        return np.asarray(x).dtype


_CMP = {"<": np.less, "<=": np.less_equal, ">": np.greater, ">=": np.greater_equal,
        "==": np.equal, "!=": np.not_equal}
NUMPY = NumpyScalar()


def formula_impl(rule):
    """A numpy impl that evaluates the scalar rule `rule` on arrays (warnings off: the rules
    compute both sides of a select, as vector code does)."""
    def impl(*xs):
        with np.errstate(all="ignore"):
            out = rule(NUMPY, *xs)
        return np.asarray(out, dtype=xs[-1].dtype)
    return impl
