"""Type promotion, in one place, for llgrad's two languages: PyTorch's rules for eager
Tensors, numpy's (NEP 50) for the compiler's traced values. See Note [Two promotion rules].

A value class names its rules in `_lg_promotion` (TORCH or NUMPY); an operation follows the
rules of its highest-level operand, the class `bind` dispatches it to (PyTorch's when no
operand is a value). Everything else in llgrad asks `coerce` / `float_of` and never decides
a dtype itself. The four dtypes llgrad computes in are `aval.SUPPORTED`; a rule that would
need another (numpy's float16 for `np.sin` of a bool array, int8 for `bool // bool`) raises
a DTypeError instead of computing in a different dtype than numpy.
"""
from __future__ import annotations

import threading

import numpy as np

from llgrad.runtime.aval import BOOL, DEFAULT_FLOAT, F64, I64, SUPPORTED, aval_str
from llgrad.runtime.errors import DTypeError, user_loc
from llgrad.runtime.prim import _level, is_value

# Note [Two promotion rules]
# Eager Tensors are PyTorch: a Python scalar is "weak" (it takes the tensor's dtype within
# its category; an int tensor times a Python float gives the default float, float32), float
# functions of ints (sin, /, mean) give float32, and among tensors the higher category, then
# the wider type, wins. A function under `@differentiate` is numpy code, and its compiled
# result must have the dtype numpy gives (NEP 50, numpy >= 2): `int64_array * 0.1` and
# `np.sin(int64_array)` are float64, `int64_array + float32_array` is float64, a numpy
# scalar (np.float64(2.0)) is as strong as an array, and the computation dtypes of a
# primitive are numpy's own `ufunc.resolve_dtypes` for the ufunc the primitive declares
# (`Primitive.numpy`), so llgrad follows the installed numpy exactly.
#
# Traced values also stand in for Python numbers: the loop counter of `for i in range(n)`,
# a Python float argument, a Python scalar carried through a staged loop or merged across a
# traced `if`. These values are *weak* (`_lg_weak`), as the Python number they replace:
# `x_f32[i] * (i * 0.1)` is float32 in Python, so `i * 0.1` must be a weak float64, not a
# float64 array. An operation whose operands are all weak follows Python's arithmetic
# (bool + bool is an int, int / int a float, int ** -1 a float) and gives a weak value; a
# numpy function of only weak operands gives a numpy scalar, which is strong (`numpy_call`).

_PY_KIND = {"b": bool, "i": int, "u": int, "f": float}
_DEFAULT = {bool: BOOL, int: I64, float: F64}
_STAND_IN = {bool: False, int: 0, float: 0.0}  # weak scalars for np.result_type
# Python's arithmetic on bools gives ints (True + True == 2); numpy's keeps bools.
_INT_ARITHMETIC = frozenset(getattr(np, n) for n in (
    "add", "subtract", "multiply", "true_divide", "floor_divide", "remainder", "power",
    "negative", "absolute"))
_NUMPY_CALL = threading.local()


def _dtype(x) -> np.dtype:
    return x._np_dtype if is_value(x) else x.dtype


_ASTYPE: list = []  # ops.astype, bound on first use (the ops modules import this one)


def _cast(x, dt):
    if _dtype(x) == dt:
        return x
    if not _ASTYPE:
        from llgrad.runtime.ops.elementwise import astype
        _ASTYPE.append(astype)
    return _ASTYPE[0](x, dt)


class TorchRules:
    """PyTorch's promotion (eager Tensors): unchanged from PyTorch, including its float32."""

    name = "torch"

    def coerce(self, prim, xs, floating: bool = False):
        """Operands cast to one dtype (the default float for `floating` ops on ints), that
        dtype, and False (Tensors are never weak)."""
        xs, dt = _torch_operands(xs)
        if floating and dt.kind != "f":
            xs, dt = [_cast(x, DEFAULT_FLOAT) for x in xs], DEFAULT_FLOAT
        return xs, dt, False

    def float_of(self, dt):
        """The dtype float-only computations (mean, var, softmax) of `dt` run in."""
        return dt if dt.kind == "f" else DEFAULT_FLOAT


def _torch_operands(xs):
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
    dt = _dtype(xs[0])
    for x in xs[1:]:
        dt = promote(dt, _dtype(x))
    return [_cast(x, dt) for x in xs], dt


SCALARS = (bool, int, float, np.bool_, np.integer, np.floating)


def as_operand(x, like=None):
    """PyTorch: values pass through; Python and numpy scalars become 0-d arrays of the weak
    dtype they take next to `like`; the rest -> ndarray."""
    if is_value(x) or isinstance(x, np.ndarray):
        return x
    if isinstance(x, SCALARS):
        if isinstance(x, (np.bool_, np.integer, np.floating)):
            x = x.item()
        return np.asarray(x, dtype=scalar_dtype(x, None if like is None else _dtype(like)))
    return np.asarray(x)


_CATEGORY = {"b": 0, "u": 1, "i": 1, "f": 2, "c": 3}


def promote(a: np.dtype, b: np.dtype) -> np.dtype:
    """PyTorch's rule for two tensors: the higher category wins; within one, the wider type."""
    if a == b:
        return a
    ca, cb = _CATEGORY[a.kind], _CATEGORY[b.kind]
    if ca != cb:
        return a if ca > cb else b
    return a if a.itemsize >= b.itemsize else b


def scalar_dtype(value, other: np.dtype | None) -> np.dtype:
    """PyTorch: the dtype a Python scalar takes next to a tensor of dtype `other` (weak)."""
    if isinstance(value, bool):
        kind = 0
    elif isinstance(value, int):
        kind = 1
    elif isinstance(value, float):
        kind = 2
    else:
        raise DTypeError(f"unsupported scalar type {type(value).__name__}")
    if other is None or kind > _CATEGORY[other.kind]:
        return (BOOL, I64, DEFAULT_FLOAT)[kind]
    return other


class NumpyRules:
    """numpy's promotion (NEP 50) for traced values; see Note [Two promotion rules]."""

    name = "numpy"

    def coerce(self, prim, xs, floating: bool = False):
        """Operands cast to the dtypes `prim` computes in (numpy's loop for its ufunc, else
        numpy's result_type, a float for `floating` ops), that dtype, and whether the result
        is weak. A list of values and numbers is one array (`x * [a, 2.0]`: numpy's
        operators convert it with np.asarray; Note [Lists of traced values])."""
        if any(type(x) in (list, tuple) for x in xs):
            from llgrad.runtime.conversions import array_from, holds_value
            xs = [array_from(x) if type(x) in (list, tuple) and holds_value(x) else x
                  for x in xs]
        specs = [_spec(x) for x in xs]
        weak = all(type(s) is type for s in specs)
        ufunc = _ufunc(prim)
        if weak:
            if getattr(_NUMPY_CALL, "depth", 0):  # np.f(python numbers): numpy scalars
                weak = False
            elif ufunc in _INT_ARITHMETIC:
                specs = [int if s is bool else s for s in specs]
            specs = [_DEFAULT[s] for s in specs]
            if ufunc is np.power and weak and specs[1] == I64 and specs[0] == I64:
                specs = _python_int_power(xs)
        dts = _resolve(prim, ufunc, tuple(specs), floating)
        return [x if isinstance(x, np.ndarray) and x.dtype == d else _as(x, d)
                for x, d in zip(xs, dts)], dts[0], weak

    def float_of(self, dt):
        """numpy's mean/var/std and linalg.norm compute ints and bools in float64."""
        return dt if dt.kind == "f" else F64


def _spec(x):
    """An operand as numpy's promotion sees it: a dtype, or a Python type when weak."""
    t = type(x)
    if t is bool or t is int or t is float:
        return t
    if is_value(x):
        dt = x._np_dtype
        return _PY_KIND[dt.kind] if getattr(x, "_lg_weak", False) else dt
    if isinstance(x, (np.ndarray, np.generic)):
        return x.dtype
    return np.asarray(x).dtype


def _as(x, dt):
    if is_value(x):
        return _cast(x, dt)
    return np.asarray(x).astype(dt, copy=False)


def _python_int_power(xs):
    """Python's int ** int: an int, or a float for a negative exponent."""
    y = xs[1]
    if is_value(y):
        if getattr(y, "_lg_nonnegative", bool)():
            return [I64, I64]
        raise DTypeError(
            "** of two Python ints computed while tracing (loop counters): Python gives an "
            "int or a float depending on the exponent's sign, which is not known here",
            loc=user_loc(), fix="write float(i) ** j, or i ** float(j)")
    return [F64, F64] if np.any(np.asarray(y) < 0) else [I64, I64]


_UFUNCS: dict = {}


def _ufunc(prim):
    """The numpy ufunc a primitive declares (its first `numpy` entry), or None; a ufunc
    stands for itself (np.fabs, which no primitive declares)."""
    if prim is None or isinstance(prim, np.ufunc):
        return prim
    u = _UFUNCS.get(prim, False)
    if u is False:
        u = _UFUNCS[prim] = next((f for f in prim.numpy if isinstance(f, np.ufunc)), None)
    return u


def _resolve(prim, ufunc, specs, floating):
    if ufunc is not None:
        try:  # (a Python bool promotes as numpy's bool: it has no weak form)
            dts = ufunc.resolve_dtypes(tuple(BOOL if s is bool else s for s in specs) +
                                       (None,) * ufunc.nout)
        except (TypeError, ValueError) as e:
            raise DTypeError(f"np.{ufunc.__name__} is not defined for {_describe(specs)}: "
                             f"{e}", loc=user_loc(), fix="cast the operands with .astype "
                             "to the dtype you mean") from None
        ins, outs = dts[:ufunc.nin], dts[ufunc.nin:]
    else:
        dt = np.result_type(*(_STAND_IN.get(s, s) for s in specs))
        if floating and dt.kind != "f":
            dt = F64
        ins, outs = (dt,) * len(specs), (dt,)
    bad = next((d for d in ins + outs if d not in SUPPORTED), None)
    if bad is not None:
        what = f"np.{ufunc.__name__}" if ufunc is not None else getattr(prim, "name", "this")
        raise DTypeError(f"{what} of {_describe(specs)} computes in {bad} (numpy's rule), "
                         f"which llgrad does not support (float64, float32, int64, bool)",
                         loc=user_loc(), fix="cast the operands first, e.g. "
                         "x.astype(np.float64)")
    return ins


def _describe(specs):
    return ", ".join(f"a Python {s.__name__}" if type(s) is type else aval_str((), s)[:-2]
                     for s in specs)


def all_weak(xs) -> bool:
    """Whether every operand is a Python number or a weak value (then a numpy function needs
    `numpy_call`; with a strong operand its result is strong anyway)."""
    for x in xs:
        t = type(x)
        if t not in _DEFAULT and not (getattr(t, "_lg_promotion", None) is NUMPY
                                      and x._lg_weak):
            return False
    return True


class _NumpyCall:
    """`with numpy_call:` while a numpy function runs: its result is strong even when every
    operand is weak (np.sin(i) is a numpy scalar, where i * 1.0 is a Python float)."""

    def __enter__(self):
        _NUMPY_CALL.depth = getattr(_NUMPY_CALL, "depth", 0) + 1

    def __exit__(self, *exc):
        _NUMPY_CALL.depth -= 1


numpy_call = _NumpyCall()
TORCH, NUMPY = TorchRules(), NumpyRules()


def rules_of(*xs):
    """The rules of the highest-level value among `xs` (PyTorch's when there is none)."""
    top, level = TORCH, -1
    for x in xs:
        t = type(x)
        lv = _level(t)
        if lv > level:
            top, level = getattr(t, "_lg_promotion", TORCH), lv
    return top


def coerce(prim, xs, floating: bool = False):
    """`(operands, dtype, weak)` for `prim` under the rules of its operands."""
    return rules_of(*xs).coerce(prim, xs, floating)


def strong(x):
    """`x` as numpy makes an argument an array (np.stack, np.clip's first argument): a
    Python number gets its default dtype, a weak value becomes a strong copy."""
    if type(x) in _DEFAULT:
        return np.asarray(x)
    if getattr(x, "_lg_weak", False):
        from llgrad.runtime.ops.elementwise import copy
        return copy(x)
    return x


def float_of(x):
    """The float dtype float-only computations of `x` run in, under its rules."""
    dt = x._np_dtype if is_value(x) else np.asarray(x).dtype
    return rules_of(x).float_of(dt)

