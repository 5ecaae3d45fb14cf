"""numpy functions on llgrad values: the dispatch table behind `__array_ufunc__` and
`__array_function__`, generated from the primitives' `numpy` field plus numpy-signature
wrappers for composite functions. Anything not listed is an error, never a silent fallback."""
from __future__ import annotations

import math
import sys

import numpy as np

from llgrad.runtime import ops
from llgrad.runtime.aval import normalize_axes
from llgrad.runtime.errors import UnsupportedError, user_loc
from llgrad.runtime.ops._util import dtype_of, shape_of
from llgrad.runtime.prim import REGISTRY


def _axis(x, axis):
    return None if axis is None else normalize_axes(axis, len(shape_of(x)))


def _no_out(out):
    if out is not None:
        raise UnsupportedError("out= is not supported on llgrad values", loc=user_loc(),
                               fix="write `y = f(x)` instead of `f(x, out=y)`")


def _like(fill):
    def impl(a, dtype=None, shape=None, **kw):
        dt = dtype_of(a) if dtype is None else np.dtype(dtype)
        return np.full(shape_of(a) if shape is None else shape, fill, dt)
    return impl


def _transpose(a, axes=None):
    return ops.transpose(a, axes)


def _reshape(a, *args, **kw):
    shape = kw.get("newshape", kw.get("shape", args[0] if args else None))
    return ops.reshape(a, (shape,) if isinstance(shape, int) else shape)


def _clip(a, a_min=None, a_max=None, **kw):
    lo = kw.get("min", a_min)
    hi = kw.get("max", a_max)
    return ops.clip(a, lo, hi)


def _var(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, **kw):
    return ops.var(a, _axis(a, axis), keepdim=keepdims, correction=ddof)


def _std(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, **kw):
    return ops.std(a, _axis(a, axis), keepdim=keepdims, correction=ddof)


def _concat(arrays, axis=0, out=None, **kw):
    _no_out(out)
    return ops.concatenate(list(arrays), axis)


def _stack(arrays, axis=0, out=None, **kw):
    _no_out(out)
    return ops.stack(list(arrays), axis)


def _squeeze(a, axis=None):
    return ops.squeeze(a, axis)


def _expand_dims(a, axis):
    return ops.unsqueeze(a, axis)


def _argreduce(fn):
    def impl(a, axis=None, out=None, keepdims=False):
        return fn(a, axis, keepdims)
    return impl


def _tensordot_free(a, b):
    return ops.dot(a, b)


def _square(x, **kw):
    """np.square keeps bool as bool (ops.square promotes it, as PyTorch does)."""
    return ops.mul(x, x) if dtype_of(x) == np.bool_ else ops.elementwise.square_p.bind(x)


def _ufunc_call(fn):
    def impl(*args, out=None, where=True, **kw):
        _no_out(out)
        if where is not True or kw.get("dtype") is not None:
            raise UnsupportedError("where=/dtype= ufunc arguments are not supported on llgrad "
                                   "values", loc=user_loc(),
                                   fix="use np.where(mask, f(x), y) / .astype(dtype) instead")
        return fn(*args)
    return impl


FUNCTIONS = {
    np.var: _var, np.std: _std,  # np.sum/mean/prod/max/min: runtime/numpy_shape.py
    np.argmax: _argreduce(ops.argmax), np.argmin: _argreduce(ops.argmin),
    np.dot: _tensordot_free, np.matmul: _ufunc_call(ops.matmul), np.outer: ops.outer,
    np.where: ops.where, np.clip: _clip,
    np.concatenate: _concat, np.stack: _stack,
    np.reshape: _reshape, np.transpose: _transpose, np.swapaxes: ops.swapaxes,
    np.squeeze: _squeeze, np.expand_dims: _expand_dims, np.ravel: ops.ravel,
    np.broadcast_to: ops.broadcast_to,
    np.zeros_like: _like(0), np.ones_like: _like(1),
    np.square: _ufunc_call(_square),
    np.shape: shape_of, np.ndim: lambda a: len(shape_of(a)),
    np.size: lambda a: math.prod(shape_of(a)),
}

for _p in REGISTRY.values():
    for _f in _p.numpy:
        if _f is not None and _f not in FUNCTIONS:
            FUNCTIONS[_f] = _ufunc_call(getattr(ops, _p.name))
FUNCTIONS[np.divide] = FUNCTIONS[np.true_divide] = _ufunc_call(ops.div)
FUNCTIONS[np.power] = _ufunc_call(ops.pow)

# ---- reductions, scans, sorting, shape and contraction functions (issue 11, npshape) -------
from llgrad.runtime.numpy_shape import FUNCTIONS as _SHAPE_FUNCTIONS  # noqa: E402

FUNCTIONS.update(_SHAPE_FUNCTIONS)

# ---- numpy.linalg and scipy.linalg (issue 11, linalg) ------------------------------------------
from llgrad.runtime import numpy_linalg  # noqa: E402

FUNCTIONS.update(numpy_linalg.FUNCTIONS)

# Note [Lazily named functions]
# A function of a module runtime must not import (scipy: `import llgrad` stays fast) is named
# by its dotted path in LAZY, with the llgrad function to call instead, and moves to FUNCTIONS
# once its module has been imported by someone: before that, no user code can hold it.
LAZY: dict = dict(numpy_linalg.SCIPY)


def resolve_lazy() -> None:
    """Move the LAZY names of modules imported by now into FUNCTIONS."""
    for name in [n for n in LAZY if n.rpartition(".")[0] in sys.modules]:
        mod, _, attr = name.rpartition(".")
        FUNCTIONS[getattr(sys.modules[mod], attr)] = LAZY.pop(name)


def traced_forms() -> dict:
    """Library callables whose Python implementation cannot run on llgrad values (scipy's
    Python-level functions convert their arguments with np.asarray), each with the llgrad
    function to call."""
    resolve_lazy()
    return {f: fn for f, fn in FUNCTIONS.items() if not isinstance(f, np.ufunc)
            and (getattr(f, "__module__", None) or "").startswith("scipy")}


def numpy_name(func) -> str:
    """How the user wrote `func`: np.exp, np.fft.fft, np.linalg.inv, np.add.reduce."""
    owner = getattr(func, "__self__", None)
    if isinstance(owner, np.ufunc):  # a ufunc method (np.add.reduce)
        return f"{numpy_name(owner)}.{func.__name__}"
    name = getattr(func, "__name__", repr(func))
    mod = getattr(func, "__module__", None) or "numpy"
    if not mod.startswith("numpy"):
        return f"{mod}.{name}"
    # public submodules keep their name (numpy.fft, numpy.linalg._linalg -> np.linalg)
    parts = [p for p in mod.split(".")[1:] if not p.startswith("_")]
    sub = parts[0] if parts and hasattr(np, parts[0]) else None
    return f"np.{sub}.{name}" if sub else f"np.{name}"
