"""How the values a variable holds on the two paths of a traced `if`, or before and after a
staged loop body, become one IR value: the aval they take, whether it is weak, and lifting.

Invariant: a merged value is weak (stands for a Python number; See Note [Two promotion
rules] in runtime/promotion.py) only when it is a Python number or a weak value on every path.
A Python number meeting an array takes the dtype numpy would give the two combined
(`np.result_type`), so no value is rounded or truncated by the merge.
"""
from __future__ import annotations

import numpy as np

from llgrad.runtime import ops
from llgrad.runtime.aval import BOOL, F64, I64, Aval, aval_str
from llgrad.runtime.errors import LLGradError, ShapeError
from llgrad.runtime.padded import Padded
from llgrad.tracer.operators import Undefined
from llgrad.transform import ir
from llgrad.transform.builder import ScopeError

_DEFAULT = {bool: BOOL, int: I64, float: F64}
_STAND_IN = {"b": False, "i": 0, "u": 0, "f": 0.0}  # a weak number of a dtype's kind


def scalar_aval(v) -> Aval | None:
    """The aval of a Python number (numpy's default dtype) or numpy scalar, else None."""
    t = _DEFAULT.get(type(v))
    if t is not None:
        return Aval((), t)
    if isinstance(v, (np.bool_, np.integer, np.floating)):
        return Aval((), v.dtype)
    return None


def is_weak(v) -> bool:
    """A Python number or a value standing for one (None: a placeholder, neutral)."""
    return v is None or type(v) in _DEFAULT or getattr(v, "_lg_weak", False)


def target(v) -> tuple[Aval, bool] | None:
    """(aval, weak) of a value, number or numeric numpy array (a constant: `np.where` of
    constants) a variable holds; None for other objects."""
    if isinstance(v, ir.Value):
        return v.aval, is_weak(v)
    if isinstance(v, np.ndarray) and v.dtype.kind in "biuf":
        return Aval(v.shape, v.dtype), False
    a = scalar_aval(v)
    return None if a is None else (a, type(v) in _DEFAULT)


def with_weak(strong: Aval, weak: Aval) -> Aval:
    """The aval of a strong value combined with a Python number of `weak`'s dtype (NEP 50)."""
    return Aval(strong.shape, np.result_type(strong.dtype, _STAND_IN[weak.dtype.kind]))


def lift(b, value, aval: Aval, region: ir.Region | None = None) -> ir.Value:
    """`value` as a Value of `aval`, emitted into `region` (or the current one). A value
    defined in a closed region cannot be used here: ScopeError (Note [Unrolled loops])."""
    if isinstance(value, ir.Value):
        if region is None:
            b.check_scope([value])
        else:
            home = b.home.get(value.id)
            if home is not None and home is not region and not any(home is r for r in b.regions):
                raise ScopeError(value, home)
    if region is not None:
        b.regions.append(region)
    try:
        if isinstance(value, ir.Value):
            if value.aval.dtype != aval.dtype:
                value = ops.astype(value, aval.dtype)
            if value.aval.shape != aval.shape:
                value = ops.broadcast_to(value, aval.shape)
            return value
        if value is None or isinstance(value, Undefined):  # a placeholder (e.g. __lg_retval)
            return b.const(np.zeros(aval.shape, aval.dtype))
        return b.const(np.broadcast_to(np.asarray(value, aval.dtype), aval.shape).copy())
    finally:
        if region is not None:
            b.regions.pop()


def merge(name, a, c, loc) -> tuple[Aval, bool] | None:
    """(aval, weak) both branch values take, or None when they can stay one Python value."""
    what = ("the value of a conditional expression (`a if c else b`, or `and`/`or` on a "
            "traced operand)") if name == "(value)" else f"`{name}`" if not \
        name.isidentifier() else f"variable `{name}`"
    weak = is_weak(a) and is_weak(c)
    if a is not c and Padded in (type(a), type(c)):  # Note [Slices of loop-dependent length]
        padded = a if type(a) is Padded else c
        raise padded.refuse(f"merging {what} over the paths of a traced `if`", shape=False,
                            loc=loc)
    if not isinstance(a, ir.Value) and not isinstance(c, ir.Value):
        if a is c:
            return None
        if isinstance(a, np.ndarray) and isinstance(c, np.ndarray):
            aa, ac = Aval(a.shape, a.dtype), Aval(c.shape, c.dtype)
            if aa != ac:
                raise _mismatch(what, aa, ac, loc)
            return aa, False
        ta, tc = target(a), target(c)
        if ta is not None and tc is not None:
            if type(a) is type(c) and a == c:
                return None
            return _join(ta, tc), weak
        if (a is None or c is None) and name.startswith("__lg_"):
            return None
        raise LLGradError(f"{what} holds different Python objects on the two paths "
                          f"of a traced condition ({type(a).__name__} and {type(c).__name__})",
                          loc=loc, fix="make it an array on both paths, or compute it outside "
                          "the condition")
    v, other = (a, c) if isinstance(a, ir.Value) else (c, a)
    if other is None:
        return v.aval, weak
    if isinstance(other, np.ndarray):  # e.g. a buffer written on one path only
        other = Aval(other.shape, other.dtype)
        if other != v.aval:
            raise _mismatch(what, v.aval, other, loc)
        return v.aval, False
    to = target(other)
    if to is None:
        raise LLGradError(f"{what} is an array on one path of a traced condition and a "
                          f"{type(other).__name__} on the other", loc=loc,
                          fix="assign an array of the same shape on both paths")
    if isinstance(other, ir.Value) and v.aval != other.aval and not (is_weak(v) or to[1]):
        raise _mismatch(what, v.aval, other.aval, loc)
    if v is other:
        return None
    return _join((v.aval, is_weak(v)), to), weak


def _join(ta, tc) -> Aval:
    """One aval for two values: weak meets strong as numpy combines them; otherwise numpy's
    result_type (two Python numbers: the wider Python kind)."""
    (a, wa), (c, wc) = ta, tc
    if a == c:
        return a
    if wa != wc:
        return with_weak(c, a) if wa else with_weak(a, c)
    return Aval(np.broadcast_shapes(a.shape, c.shape), np.result_type(a.dtype, c.dtype))


def _mismatch(what, a: Aval, c: Aval, loc) -> ShapeError:
    e = ShapeError(f"{what} is {aval_str(*a)} on one path of a traced condition but "
                   f"{aval_str(*c)} on the other", loc=loc,
                   fix="give both branches the same shape and dtype (cast with .astype or "
                   "broadcast explicitly)")
    e.of_branches = True  # llgrad's limit, not an answer about values (tracer/library.py)
    return e
