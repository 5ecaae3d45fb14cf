"""Call signatures: flattening argument pytrees (tuples, lists, dicts of arrays and scalars)
into leaves, and the cache key of a call (shapes, dtypes, scalar types, static values).

Arrays, Python floats and numpy float scalars are traced; Python ints, bools and anything
else are static: their value is part of the key, so a new value means a new trace (as JAX's
static arguments).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from llgrad.runtime.aval import aval_str
from llgrad.runtime.errors import DTypeError

TRACED_DTYPES = (np.dtype(np.float32), np.dtype(np.float64), np.dtype(np.int64),
                 np.dtype(np.bool_))


@dataclass(frozen=True)
class Leaf:
    """One traced leaf: an array, or a scalar of type `scalar`: a Python number (traced as a
    weak 0-d value; See Note [Two promotion rules]) or a numpy scalar (np.float32(2.0):
    as strong as an array). Gradients and results come back as that type."""

    shape: tuple
    dtype: np.dtype
    scalar: type | None = None

    @property
    def is_python_scalar(self) -> bool:
        return self.scalar in (float, int, bool)

    def __str__(self) -> str:
        if self.is_python_scalar:
            return self.scalar.__name__
        return aval_str(self.shape, self.dtype) + (" scalar" if self.scalar else "")

    def to_python(self, a):
        """An output or gradient array as this leaf's type. Numpy scalars come back as
        numpy scalars, except float64 ones, which are Python floats (the same number)."""
        if self.scalar is None:
            return np.asarray(a)
        if self.is_python_scalar:
            return self.scalar(a)
        return float(a) if self.dtype == np.float64 else np.asarray(a)[()]


@dataclass(frozen=True)
class Static:
    value: Any


def _static_key(v):
    try:
        hash(v)
        return v
    except TypeError:
        return ("<unhashable>", id(v))


def flatten(tree) -> tuple[list, Any]:
    """Leaves (arrays/floats) and a hashable structure with Static entries for the rest."""
    leaves: list = []

    def rec(x):
        if isinstance(x, (tuple, list)):
            return (type(x).__name__, tuple(rec(e) for e in x))
        if isinstance(x, dict):
            keys = sorted(x, key=repr)
            return ("dict", tuple((k, rec(x[k])) for k in keys))
        aval = getattr(x, "aval", None)
        if aval is not None and hasattr(type(x), "_lg_level"):  # an IR value (nested tracing)
            leaves.append(x)
            return Leaf(tuple(aval.shape), aval.dtype)
        if isinstance(x, np.ndarray) or (hasattr(x, "_data") and isinstance(x._data, np.ndarray)):
            arr = x if isinstance(x, np.ndarray) else x._data
            if arr.dtype not in TRACED_DTYPES:
                if arr.dtype.kind == "i":
                    arr = arr.astype(np.int64)
                elif arr.dtype.kind == "f":
                    raise DTypeError(f"unsupported dtype {arr.dtype} for an array argument",
                                     fix="use float64 or float32 arrays")
            leaves.append(arr)
            return Leaf(arr.shape, arr.dtype)
        if isinstance(x, float) and not isinstance(x, np.floating):
            leaves.append(np.asarray(float(x), dtype=np.float64))
            return Leaf((), np.dtype(np.float64), float)
        if isinstance(x, np.floating):
            if x.dtype not in TRACED_DTYPES:
                raise DTypeError(f"unsupported dtype {x.dtype} for a scalar argument",
                                 fix="use np.float64 or np.float32 scalars")
            leaves.append(np.asarray(x))
            return Leaf((), x.dtype, type(x))
        return Static(_static_key(x))

    return leaves, rec(tree)


def unflatten(struct, leaves) -> Any:
    it = iter(leaves)

    def rec(s):
        if isinstance(s, Leaf):
            return next(it)
        if isinstance(s, Static):
            return s.value
        kind, items = s
        if kind == "dict":
            return {k: rec(v) for k, v in items}
        seq = [rec(e) for e in items]
        return tuple(seq) if kind == "tuple" else seq
    return rec(struct)


def leaf_specs(struct) -> list[Leaf]:
    out: list[Leaf] = []

    def rec(s):
        if isinstance(s, Leaf):
            out.append(s)
        elif isinstance(s, tuple) and len(s) == 2 and isinstance(s[1], tuple) and \
                s[0] in ("tuple", "list", "dict"):
            for e in s[1]:
                rec(e[1] if s[0] == "dict" else e)
    rec(struct)
    return out


def describe(struct) -> str:
    """A short human form of a signature, for inspect() and error messages."""
    def rec(s):
        if isinstance(s, Leaf):
            return str(s)
        if isinstance(s, Static):
            return f"static {s.value!r}"
        kind, items = s
        if kind == "dict":
            return "{" + ", ".join(f"{k!r}: {rec(v)}" for k, v in items) + "}"
        inner = ", ".join(rec(e) for e in items)
        return f"({inner})" if kind == "tuple" else f"[{inner}]"
    return rec(struct)
