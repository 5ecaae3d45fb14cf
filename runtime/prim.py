"""Primitives: the one registry of differentiable operations, and `bind`.

A `Primitive` is declared once (in `runtime/ops/<family>.py`) with its numpy implementation,
its shape/dtype rule and its VJP rules written with `llgrad.runtime.ops` calls. `bind` sends a
call to the interpretation of its highest-level operand: eager `Tensor` (level 0), IR values
(transform), tracing values (tracer). See Note [Broadcasting at primitives].
"""
from __future__ import annotations

import dis
from typing import Any, Callable

import numpy as np

# Note [Broadcasting at primitives]
# Elementwise primitives accept operands of broadcast-compatible shapes (numpy rules) and of one
# dtype (the ops layer promotes). The gradient for an operand is reduced to that operand's
# shape (`sum_to`) and cast to its dtype in one central place: the eager engine's PrimNode and
# the IR AD pass. So no VJP rule ever un-broadcasts. The IR builder additionally makes
# broadcasting explicit (`broadcast_to` ops), so codegen only ever sees equal shapes.


class Primitive:
    """One operation: impl (numpy), shape rule, VJP rules (one per input), codegen hints.

    Attributes:
        name: lowercase name printed in IR (`exp`, `reduce_sum`).
        family: `elementwise`, `reduce`, `shape`, `linalg`, `index`, `control`, ...
        impl: `impl(*ndarrays, **params) -> ndarray | tuple[ndarray, ...]`.
        shape: `shape(*avals, **params) -> Aval | tuple[Aval, ...]`; raises ShapeError.
        vjp: tuple with one rule per input, `rule(g, out, *inputs, **params) -> cotangent`,
            or None for an input without gradient (integer indices); `None` when `nondiff`.
            Variadic primitives give one function `vjp(i, g, out, *inputs, **params)`.
        nondiff: comparisons and integer ops: outputs carry no gradient.
        saves: which values the VJP rules read (input indices; -1 = the output), so the eager
            engine saves only those (and checks only their in-place versions). Derived from
            each rule's bytecode when not given; a callable `saves(n_inputs)` for variadic ones.
        scalar: elementwise only: how one element is computed, as data for codegen
            (an LLVM intrinsic `"llvm.exp"`, a libm/libmvec name, or a formula tuple).
        numpy: the numpy callables this primitive stands for (dispatch of `np.exp` on values).
        multiple_results: impl returns a tuple.
        node_name: the eager graph node's name (`MulBackward0`), or for primitives whose
            PyTorch name depends on the call (`SumBackward0` / `SumBackward1`) a function
            `node_name(out_shape, **params) -> str`, or for PyTorch's Scalar/Tensor overloads
            (`x ** 2` PowBackward0, `x ** y` PowBackward1, `2 ** x` PowBackward2) a dict from
            which operands are constants (a tuple of bools) to the name.
        decompose: for composite primitives, `decompose(*inputs, **params)` written with other
            ops: the compiler's IR builder emits that instead (so AD, passes and codegen never
            see this primitive), while eager mode runs `impl` as one graph node.
        effect: the op acts beyond its outputs (`check` raises the user's exception): passes
            keep it, and the region ops around it, even when nothing reads its outputs. A
            function of the op says it per op (`has_effect`): indexing with index arrays
            raises IndexError for an index out of range, read or not, as numpy does.
        expensive: a loop's forward sweep tapes the op's output (and its VJP's residuals)
            rather than the reverse sweep recomputing it (Note [Loop tapes]); reductions and
            linear algebra always are.
        batch: `batch(batched, shapes, out_shapes, params) -> bool`, whether the op keeps the
            examples of a batch (axis 0 of the operands flagged in `batched`) apart, so one
            backward of a batched call gives per-example gradients
            (runtime/autograd/vectorized.py; elementwise ops are judged there by family).
        linear: forward mode's rule in one word (transform/jvp.py): "linear" when the outputs
            are linear in the differentiable inputs jointly (reshape, sum, getitem: the
            tangent is the op applied to the tangents), "multilinear" when linear in each
            one (matmul: the sum over inputs of the op with that input's tangent).
        jvp: a hand-written forward-mode rule `jvp(primals, tangents, outs, **params)` -> one
            tangent per output (tangents None where zero). Elementwise primitives derive
            theirs from their VJP rules, `linear` ones from the flag; the rest transpose
            their VJP rules in the IR (transform/jvp.py, Note [Forward mode rules]).
        np_name: the numpy function the Python printer calls (`np.<np_name>(*inputs)`),
            derived: the name of `impl` when impl is numpy's own callable of that name.
    """

    __slots__ = (
        "name", "family", "impl", "shape", "vjp", "nondiff", "saves", "scalar", "numpy",
        "multiple_results", "node_name", "reads", "decompose", "effect", "expensive", "np_name",
        "batch", "linear", "jvp",
        "__weakref__",
    )

    def __init__(self, name: str, family: str, impl: Callable, shape: Callable, vjp=None, *,
                 nondiff: bool = False, saves=None, scalar=None, numpy=(),
                 multiple_results: bool = False, node_name: str | Callable | None = None,
                 decompose: Callable | None = None, effect: bool | Callable = False,
                 expensive: bool = False, batch: Callable | None = None,
                 linear: str | None = None, jvp: Callable | None = None):
        if not nondiff and vjp is None:
            raise ValueError(f"primitive {name}: give vjp rules or nondiff=True")
        self.name, self.family, self.impl, self.shape = name, family, impl, shape
        self.vjp = tuple(vjp) if isinstance(vjp, (tuple, list)) else vjp
        self.nondiff = nondiff
        self.saves = saves
        self.reads = _rule_reads(self.vjp) if saves is None and isinstance(self.vjp, tuple) else None
        self.scalar, self.multiple_results = scalar, multiple_results
        self.decompose, self.effect = decompose, effect
        self.expensive = expensive or (family in ("reduce", "linalg") and not nondiff)
        self.np_name = _numpy_name(impl)
        self.batch = batch
        if linear not in (None, "linear", "multilinear"):
            raise ValueError(f"primitive {name}: linear must be 'linear' or 'multilinear'")
        self.linear, self.jvp = linear, jvp
        self.numpy = tuple(numpy) if isinstance(numpy, (tuple, list)) else (numpy,)
        self.node_name = node_name or (
            "".join(p.capitalize() for p in name.split("_")) + "Backward0")

    def has_effect(self, op) -> bool:
        """Whether `op`, an op of this primitive, must be kept unread (`effect`)."""
        return self.effect(op) if callable(self.effect) else self.effect

    def vjp_rule(self, i: int):
        """The VJP rule for input `i` (None: no gradient flows to it)."""
        if isinstance(self.vjp, tuple):
            return self.vjp[i]
        return lambda *a, **p: self.vjp(i, *a, **p)  # variadic primitives (concatenate)

    def bind(self, *args, **params):
        return bind(self, *args, **params)

    def __repr__(self) -> str:
        return f"<primitive {self.name}>"

    def __reduce__(self):
        return (_lookup, (self.name,))  # pickled by name: IR in the disk cache


def _numpy_name(impl) -> str | None:
    name = getattr(impl, "__name__", None)
    return name if name and getattr(np, name, None) is impl else None


def _rule_reads(rules):
    """Per VJP rule, the positions it reads: -1 the output, i >= 0 input i (from bytecode)."""
    out = []
    for rule in rules:
        if rule is None:
            out.append(())
            continue
        code = rule.__code__
        names = code.co_varnames[:code.co_argcount]
        if code.co_flags & 0x04:  # *args: conservatively everything
            out.append(None)
            continue
        used = {ins.argval for ins in dis.get_instructions(code)
                if ins.opname in ("LOAD_FAST", "LOAD_FAST_CHECK", "LOAD_FAST_AND_CLEAR",
                                  "LOAD_DEREF", "LOAD_CLOSURE", "LOAD_FAST_LOAD_FAST")}
        used |= set(code.co_cellvars)
        out.append(tuple(i - 2 for i, n in enumerate(names)
                         if i >= 1 and n in used and n not in ("g",)))
    return tuple(out)


REGISTRY: dict[str, Primitive] = {}
NUMPY_TABLE: dict[Any, Primitive] = {}


def _lookup(name: str) -> "Primitive":
    return REGISTRY[name]


def register(p: Primitive) -> Primitive:
    if p.name in REGISTRY:
        raise ValueError(f"primitive {p.name} declared twice")
    REGISTRY[p.name] = p
    return p


_DEFAULT: list = [None]  # the eager Tensor class, set by runtime/tensor.py


def set_default_interpretation(cls) -> None:
    _DEFAULT[0] = cls


# type -> its `_lg_level`, or -2 when it has none (a constant); a failed getattr is slow
_LEVELS: dict = {}


def _level(t) -> int:
    lv = _LEVELS.get(t)
    if lv is None:
        lv = _LEVELS[t] = getattr(t, "_lg_level", -2)
    return lv


def is_value(x) -> bool:
    """True for array values of any interpretation (Tensor, IR value, traced value)."""
    t = type(x)
    lv = _LEVELS.get(t)
    return (lv if lv is not None else _level(t)) != -2


def bind(prim: Primitive, *args, **params):
    """Apply `prim` in the interpretation of the highest-level operand (eager by default)."""
    top, level = _DEFAULT[0], -1
    levels = _LEVELS
    for a in args:
        t = type(a)
        lv = levels.get(t)
        if lv is None:
            lv = _level(t)
        if lv > level:
            top, level = t, lv
    return top._lg_process(prim, args, params)


def as_array(x) -> np.ndarray:
    return x if isinstance(x, np.ndarray) else np.asarray(x)
