"""Traced counterparts of `math.*` and builtins (`max`, `min`, `float`, `int`), used by
`operators.converted_call` when an argument is traced: as written they would concretise it.

They keep Python's types: `math.sin(x)` is a Python float whatever x's dtype (a weak float64
value), `float(i)` of a loop counter is the same number as a Python float (See Note [Two
promotion rules] in runtime/promotion.py).
"""
from __future__ import annotations

from typing import Callable

from llgrad.runtime.prim import is_value


def _traced_builtins() -> dict:
    """`math.*` and builtins that need a traced counterpart (they would concretise)."""
    import math

    from llgrad.runtime import ops
    table = {getattr(math, n): _math(getattr(ops, m)) for n, m in [
        ("exp", "exp"), ("log", "log"), ("log1p", "log1p"), ("expm1", "expm1"), ("sin", "sin"),
        ("cos", "cos"), ("tan", "tan"), ("tanh", "tanh"), ("sqrt", "sqrt"), ("fabs", "abs"),
        ("pow", "pow")]}
    # Python's max(a, b): a unless b > a (a Python number if both are)
    table[max] = lambda a, b: ops.where(b > a, b, a)
    table[min] = lambda a, b: ops.where(b < a, b, a)
    table[float] = _number(float)
    table[int] = _number(int)
    return table


def _weak(v):
    v._lg_weak = True  # See Note [Two promotion rules] in runtime/promotion.py
    return v


def _math(op: Callable) -> Callable:
    """math.f: a Python float, computed in float64 whatever the argument's dtype."""
    def call(*args):
        return _weak(op(*(_float(a) for a in args)))
    return call


def _float(a):
    from llgrad.runtime import ops
    if not is_value(a):
        return float(a)
    if a.shape != ():
        raise TypeError("only 0-dimensional arrays can be converted to Python scalars")
    return ops.astype(a, "float64")


def _number(kind: type) -> Callable:
    """float(i) / int(i) of a value standing for a Python int or bool (a loop counter): the
    same number, still traced (it carries no gradient). Of any other traced value (a float
    argument, an array element): concretisation, as documented for float(t)."""
    def call(v, *rest):
        from llgrad.runtime import ops
        if rest or not getattr(v, "_lg_weak", False) or v.dtype.kind not in "biu":
            return kind(v, *rest)
        if kind is int and v.dtype.kind != "b":
            return v
        return _weak(ops.astype(v, "float64" if kind is float else "int64"))
    return call


_TRACED_BUILTINS: dict = {}
_LAZY_LEFT = [-1]  # how many of numpy_api.LAZY were unresolved when the table was built


def traced_builtins() -> dict:
    """Library callables with a traced counterpart (see _converted_target): math.*, max/min,
    float/int, numpy's conversions (np.asarray, np.array, ...) and scipy's Python-level
    functions, the latter known once scipy is imported (Note [Lazily named functions] in
    runtime/numpy_api.py)."""
    from llgrad.runtime import numpy_api
    numpy_api.resolve_lazy()
    if len(numpy_api.LAZY) != _LAZY_LEFT[0]:
        _TRACED_BUILTINS.update(_traced_builtins())
        _TRACED_BUILTINS.update(numpy_api.traced_forms())
        _LAZY_LEFT[0] = len(numpy_api.LAZY)
    return _TRACED_BUILTINS
