"""Element updates on numpy arrays that involve traced values: `y[i] op= v` and the statement
`np.add.at(y, i, v)` (convert/calls.py rewrites both to rebind `y`). Called by converted code
as `__lg.iadd`, `__lg.item`, `__lg.ufunc_at`, ... (re-exported by operators.py)."""
from __future__ import annotations

import operator
import sys
from typing import Any, Callable

import numpy as np

from llgrad.runtime.errors import ConcretizationError, user_loc

from .operators import _STAGERS, _region_stager, is_traced, stager_of
from .rebind import check_sole, held_by_locals


def _augmented(name: str, op: Callable, iop: Callable) -> Callable:
    def augmented(a, b, whole: str | None = None):
        """`a op= b`: on the element view `a` of an update `y[i] op= b`, or (`whole`, the
        name written) on a name `a` (convert/calls.py). numpy cannot write a traced `b` into a
        numpy `a`, so the new value is computed instead and the name (or, around this call,
        `y[i]`) rebound to it, as numpy would see it -- for a whole array, only where nothing
        else refers to it (Note [Traced values added into numpy arrays])."""
        padded = getattr(type(b), "_lg_padded", False)  # a slice of run-time length
        if type(a) is np.ndarray and (is_traced(b) or padded):
            if whole is not None:
                seen = held_by_locals(a)
                refs = sys.getrefcount(a)
                check_sole(a, refs - seen, whole, name)
            out = np.result_type(a, getattr(b, "dtype", type(b)))
            if not np.can_cast(out, a.dtype, casting="same_kind"):
                raise TypeError(f"Cannot cast ufunc '{name}' output from {out!r} to "
                                f"{a.dtype!r} with casting rule 'same_kind'")
            return op(a, b)
        return iop(a, b)
    augmented.__name__ = f"i{name}"
    return augmented


iadd = _augmented("add", operator.add, operator.iadd)
isub = _augmented("subtract", operator.sub, operator.isub)
imul = _augmented("multiply", operator.mul, operator.imul)
itruediv = _augmented("divide", operator.truediv, operator.itruediv)
ifloordiv = _augmented("floor_divide", operator.floordiv, operator.ifloordiv)
imod = _augmented("remainder", operator.mod, operator.imod)
ipow = _augmented("power", operator.pow, operator.ipow)
imatmul = _augmented("matmul", operator.matmul, operator.imatmul)


def item(y, i) -> Any:
    """`y[i]`, the element an update `y[i] op= v` reads (convert/calls.py). A numpy `y`
    indexed by a traced `i` (`h[idx[t]] += w[t]` in a staged loop, before `h` is traced) is
    read as a constant: numpy cannot take a traced index."""
    if type(y) is np.ndarray:
        stager = next((s for s in map(stager_of, _flat_index((i,))) if s), None)
        stage = getattr(stager, "stage_getitem", None)
        if stage is not None:
            return stage(y, i)
    elif type(y) in (list, tuple) and y and is_traced(i) and i.aval.shape == () and \
            i.aval.dtype.kind in "iu":  # Note [Lists indexed by a traced index] (staging.py)
        stage = getattr(stager_of(i), "stage_list_item", None)
        if stage is not None and not stager_of(i).eager():
            item = stage(y, i)
            if item is not None:
                return item
    elif type(y) is list and type(i) is int:  # `xs[0]` (Note [Containers in staged loops])
        read = getattr(_region_stager(), "list_item", None)
        item = read(y, i) if read is not None else None
        if item is not None:
            return item
    elif (y is np.r_ or y is np.c_) and any(map(is_traced, _flat_index((i,)))):
        from llgrad.runtime.numpy_api import concatenated_items  # np.r_[0.0, x]
        return concatenated_items(i, columns=y is np.c_)
    return y[i]


def ufunc_at(f: Callable, args: tuple) -> Any:
    """The statement `f(x, ...)` for `f` a `.at` method (`np.add.at(x, idx, v)`), returning
    the new `x` (convert/calls.py rebinds it). numpy updates `x` in place; a traced `x`, index
    or value, or a write inside a traced region, makes it a functional update instead (Note
    [In-place updates are by value]), as for `x[idx] += v` (but accumulating repeated
    indices, as np.add.at does)."""
    x, rest = args[0], args[1:]
    ufunc = getattr(f, "__self__", None)
    if isinstance(ufunc, np.ufunc) and getattr(f, "__name__", None) == "at" and rest:
        stager = stager_of(x) or next((s for s in map(stager_of, _flat_index(rest)) if s),
                                      None)
        if stager is None and _STAGERS and type(x) is np.ndarray:
            stager = _region_stager()
        stage = getattr(stager, "stage_ufunc_at", None)
        if stager is not None and stage is None:
            raise ConcretizationError(f"np.{ufunc.__name__}.at on traced values",
                                      loc=user_loc())
        if stage is not None:
            from .aliasing import check_unaliased
            check_unaliased(x, f"np.{ufunc.__name__}.at", rest[0])
            return stage(ufunc, x, *rest)
    f(*args)
    return x


def diagonal_index(a, wrap=False) -> tuple:
    """The index the statement np.fill_diagonal(a, v, wrap) writes (convert/calls.py makes it
    `a[index] = v`): numpy's flat positions 0, step, 2 step, ... (a tall matrix's diagonal
    starts again below itself with wrap), as an index array per axis. A `v` that is neither a
    scalar nor one value per position is an error (numpy would repeat it cyclically)."""
    shape = tuple(a.shape)
    if len(shape) < 2:
        raise ValueError("array must be at least 2-d")
    if len(shape) == 2:
        step, end = shape[1] + 1, None if wrap else shape[1] * shape[1]
    else:
        if len(set(shape)) != 1:
            raise ValueError("All dimensions of input must be of equal length")
        step, end = 1 + int(np.cumprod(shape[:-1]).sum()), None
    return np.unravel_index(np.arange(int(np.prod(shape)))[:end:step], shape)


def _flat_index(values):
    """The entries of index keys, tuples and slices looked into (`x[i, :n]` gives i and n)."""
    for v in values:
        for k in v if type(v) is tuple else (v,):
            if type(k) is slice:
                yield from (k.start, k.stop, k.step)
            else:
                yield k


__all__ = ["diagonal_index", "iadd", "isub", "imul", "itruediv", "ifloordiv", "imod", "ipow",
           "imatmul", "item", "ufunc_at"]
