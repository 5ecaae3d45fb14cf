"""Operand helpers shared by the op families: shapes/dtypes of values and constants."""
from __future__ import annotations

import numpy as np

from llgrad.runtime.aval import promote, scalar_dtype
from llgrad.runtime.prim import is_value

SCALARS = (bool, int, float, np.bool_, np.integer, np.floating)


def dtype_of(x) -> np.dtype:
    return x._np_dtype if is_value(x) else x.dtype


def shape_of(x) -> tuple:
    return tuple(x.shape)


def as_operand(x, like=None):
    """Values pass through; Python scalars become 0-d arrays of the weak dtype; rest -> ndarray."""
    if is_value(x) or isinstance(x, np.ndarray):
        return x
    if isinstance(x, SCALARS):
        if isinstance(x, (np.bool_, np.integer, np.floating)):
            x = x.item()
        return np.asarray(x, dtype=scalar_dtype(x, None if like is None else dtype_of(like)))
    return np.asarray(x)


def operands(*xs):
    """Coerce operands of an elementwise op: scalars are weak, the rest promote PyTorch-style."""
    if len(xs) == 2:  # fast path for the common binary cases (eager per-op overhead)
        a, b = xs
        if is_value(a):
            da = a._np_dtype
            if is_value(b):
                if b._np_dtype == da:
                    return [a, b], da
            elif type(b) is float and da.kind == "f" or type(b) is int and da.kind in "fi":
                return [a, np.asarray(b, da)], da
        elif is_value(b):
            db = b._np_dtype
            if type(a) is float and db.kind == "f" or type(a) is int and db.kind in "fi":
                return [np.asarray(a, db), b], db
    anchor = next((x for x in xs if is_value(x) or isinstance(x, np.ndarray)), None)
    xs = [as_operand(x, anchor) for x in xs]
    dt = xs[0].dtype if not is_value(xs[0]) else xs[0]._np_dtype
    for x in xs[1:]:
        dt = promote(dt, dtype_of(x))
    return [x if dtype_of(x) == dt else cast(x, dt) for x in xs], dt


def cast(x, dt):
    from llgrad.runtime.ops.elementwise import astype
    return astype(x, dt)
