"""The fuzzer's static types: dtype, shape and weakness of every generated expression.

Note [Types by evaluation]
Rather than re-implementing numpy's promotion and shape rules (NEP 50 weak Python scalars,
`np.sin(int64) -> float64`, `np.sum(bool) -> int64`, ...), the generator evaluates every
expression it builds on *dummy* values of its operands' types, with numpy itself, and reads
the result's type off the value. An expression numpy rejects (a broadcast error, `-bool`) or
whose dtype llgrad does not have (`np.sin(bool) -> float16`) is dropped and another is drawn.
A Python scalar (weak in numpy's promotion) has `weak=True`; a name that holds a Python scalar
on one path and a numpy scalar on another (`s = 0.0`, then `s = x[0]` in a branch) has
`weak=None`, and is evaluated both ways: an expression is kept only if both give the same
dtype and shape, so the program's types never depend on which path ran.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

DTYPES = ("float64", "float32", "int64", "bool")
_DUMMY = {"float64": 0.75, "float32": 0.75, "int64": 1, "bool": True}


@dataclass(frozen=True)
class Ty:
    dtype: str            # one of DTYPES
    shape: tuple = ()
    weak: bool | None = False  # a Python scalar; None: a Python or a numpy scalar by path

    @property
    def kind(self) -> str:
        return np.dtype(self.dtype).kind  # 'f', 'i' or 'b'

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def dummies(self) -> list:
        v = _DUMMY[self.dtype]
        if self.shape:
            return [np.full(self.shape, v, dtype=self.dtype)]
        strong = np.dtype(self.dtype).type(v)
        py = {"float64": float, "int64": int, "bool": bool}.get(self.dtype)
        if self.weak is True:
            return [py(v)]
        if self.weak is None:
            return [py(v), strong]
        return [strong]

    def same_up_to_weakness(self, other: "Ty") -> bool:
        return (self.dtype, self.shape) == (other.dtype, other.shape)

    def __str__(self) -> str:
        w = {True: "py", None: "py|np", False: ""}[self.weak]
        return f"{w}{self.dtype}{list(self.shape)}"


def merge(a: Ty, b: Ty) -> Ty | None:
    """The type of a name bound to `a` on one path and `b` on another, or None if they differ."""
    if a == b:
        return a
    if a.same_up_to_weakness(b) and not a.shape:
        return Ty(a.dtype, (), None)
    return None


def typeof(v) -> Ty | None:
    if isinstance(v, (np.ndarray, np.generic)):  # first: np.float64 is a Python float too
        return Ty(v.dtype.name, tuple(v.shape), False) if v.dtype.name in DTYPES else None
    if isinstance(v, bool):
        return Ty("bool", (), True)
    if isinstance(v, int):
        return Ty("int64", (), True)
    if isinstance(v, float):
        return Ty("float64", (), True)
    return None


NAMESPACE = {"np": np, "math": math}


class OutOfScope(Exception):
    """numpy computed a float16 (`np.sin(bool)`), which llgrad computes in float32."""


def check_value(v):
    """`v`, unless it is a float16 (the reference checks every call's result with this)."""
    if isinstance(v, (np.ndarray, np.generic)) and v.dtype.kind == "f" and \
            v.dtype.name not in DTYPES:
        raise OutOfScope(f"numpy computed a {v.dtype.name} value")
    return v


@dataclass(frozen=True)
class E:
    """A generated expression: its source, type, and the names whose arrays it may alias
    (Note [Fresh arrays] in gen.py)."""
    src: str
    ty: Ty
    views: frozenset = field(default_factory=frozenset)
    # Note [Trace-time constants]: llgrad gets some promotions wrong only for traced
    # integers, others only for numpy constants computed while tracing (typer.rules), and
    # whether a value is traced can depend on whether a loop is staged; so both flags are
    # "may be": a loop counter, or an int rebound in a loop, is `counter` and `const`.
    counter: bool = False  # may be a traced int64 (a Python int in plain Python)
    const: bool = False    # may be a constant at trace time (no argument value in it)
