"""Operand helpers shared by the op families: shapes/dtypes of values and constants.
Promotion itself lives in runtime/promotion.py."""
from __future__ import annotations

import numpy as np

from llgrad.runtime.prim import is_value
from llgrad.runtime.promotion import coerce, scalar_dtype

SCALARS = (bool, int, float, np.bool_, np.integer, np.floating)


def dtype_of(x) -> np.dtype:
    return x._np_dtype if is_value(x) else x.dtype


def shape_of(x) -> tuple:
    return tuple(x.shape)


def as_operand(x, like=None):
    """Values pass through; Python scalars become 0-d arrays of PyTorch's weak dtype next to
    `like`; the rest -> ndarray."""
    if is_value(x) or isinstance(x, np.ndarray):
        return x
    if isinstance(x, SCALARS):
        if isinstance(x, (np.bool_, np.integer, np.floating)):
            x = x.item()
        return np.asarray(x, dtype=scalar_dtype(x, None if like is None else dtype_of(like)))
    return np.asarray(x)


def operands(*xs):
    """Operands of one common dtype, under the rules of their values (promotion.py)."""
    xs, dt, _ = coerce(None, xs)
    return xs, dt

