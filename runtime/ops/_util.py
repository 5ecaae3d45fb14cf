"""Operand helpers shared by the op families: shapes/dtypes of values and constants.
Promotion itself lives in runtime/promotion.py."""
from __future__ import annotations

import numpy as np

from llgrad.runtime.prim import is_value
from llgrad.runtime.promotion import as_operand, coerce  # noqa: F401  (as_operand: re-exported)


def dtype_of(x) -> np.dtype:
    return x._np_dtype if is_value(x) else x.dtype


def shape_of(x) -> tuple:
    return tuple(x.shape)


def operands(*xs):
    """Operands of one common dtype, under the rules of their values (promotion.py)."""
    xs, dt, _ = coerce(None, xs)
    return xs, dt
