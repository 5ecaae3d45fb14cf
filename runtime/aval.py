"""Abstract values (shape + dtype) and the four dtypes (promotion: runtime/promotion.py).

Internally a dtype is a `numpy.dtype`; `DType` objects (`llgrad.float32`, ...) are the public face.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from llgrad.runtime.errors import ShapeError


class DType:
    """A tensor element type, printed like PyTorch's (`llgrad.float32`)."""

    __slots__ = ("name", "np", "is_floating_point")

    def __init__(self, name: str, npdtype: np.dtype):
        self.name, self.np = name, np.dtype(npdtype)
        self.is_floating_point = self.np.kind == "f"

    def __repr__(self) -> str:
        return f"llgrad.{self.name}"

    def __eq__(self, other) -> bool:
        if isinstance(other, DType):
            return self.np == other.np
        try:
            return self.np == np.dtype(other)
        except TypeError:
            return False

    def __hash__(self) -> int:
        return hash(self.np)


float32 = DType("float32", np.float32)
float64 = DType("float64", np.float64)
int64 = DType("int64", np.int64)
bool_ = DType("bool", np.bool_)
int32 = DType("int32", np.int32)
float16 = DType("float16", np.float16)

F32, F64, I64, BOOL = float32.np, float64.np, int64.np, bool_.np
_BY_NP = {d.np: d for d in (float32, float64, int64, bool_, int32, float16)}
DEFAULT_FLOAT = F32
SUPPORTED = (F32, F64, I64, BOOL)


def to_dtype(d) -> DType:
    return d if isinstance(d, DType) else _BY_NP[np.dtype(d)]


def to_np(d) -> np.dtype:
    """Accepts DType, numpy dtypes, dtype names and Python types (float -> float64 as numpy does)."""
    if d is None:
        return None
    if isinstance(d, DType):
        return d.np
    if d is float:
        return F64
    if d is int:
        return I64
    if d is bool:
        return BOOL
    return np.dtype(d)


class Aval(NamedTuple):
    """Shape and dtype of an array value."""

    shape: tuple
    dtype: np.dtype

    def __str__(self) -> str:
        return aval_str(self.shape, self.dtype)


_SHORT = {"float32": "f32", "float64": "f64", "int64": "i64", "bool": "bool", "int32": "i32"}


def aval_str(shape, dtype) -> str:
    """`f64[3,4]`: the one way shapes and dtypes are written in messages and IR."""
    return f"{_SHORT.get(np.dtype(dtype).name, np.dtype(dtype).name)}[{','.join(map(str, shape))}]"


def broadcast_shapes(*shapes: tuple, op: str = "operation") -> tuple:
    try:
        return tuple(np.broadcast_shapes(*shapes))
    except ValueError:
        raise ShapeError(
            f"{op}: shapes {' and '.join(str(list(s)) for s in shapes)} cannot be broadcast together",
            fix="make trailing dimensions equal or 1 (insert a dimension with x[:, None] or reshape)",
        ) from None


def normalize_axes(axis, ndim: int) -> tuple:
    """`None`, an int or a sequence of ints -> a sorted tuple of non-negative axes."""
    if axis is None:
        return tuple(range(ndim))
    if isinstance(axis, (int, np.integer)):
        axis = (axis,)
    out = []
    for a in axis:
        a = int(a)
        if not -max(ndim, 1) <= a < max(ndim, 1):
            raise ShapeError(f"dimension {a} out of range for a {ndim}-d value")
        out.append(a % max(ndim, 1) if ndim else 0)
    return tuple(sorted(set(out)))
