"""numpy functions on llgrad values: the dispatch table behind `__array_ufunc__` and
`__array_function__`, generated from the primitives' `numpy` field plus numpy-signature
wrappers for composite functions. Anything not listed is an error, never a silent fallback."""
from __future__ import annotations

import math

import numpy as np

from llgrad.runtime import ops
from llgrad.runtime.aval import normalize_axes
from llgrad.runtime.errors import UnsupportedError, user_loc
from llgrad.runtime.ops._util import dtype_of, shape_of
from llgrad.runtime.prim import REGISTRY
from llgrad.runtime.promotion import all_weak, coerce, numpy_call, strong


def _axis(x, axis):
    return None if axis is None else normalize_axes(axis, len(shape_of(x)))


def _reducer(fn):
    def impl(a, axis=None, dtype=None, out=None, keepdims=False, **kw):
        _no_out(out)
        r = fn(a, _axis(a, axis), keepdims)
        return r if dtype is None else ops.astype(r, dtype)
    return impl


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
    return ops.clip(strong(a), lo, hi)  # numpy makes `a` an array: np.clip(1.5, 0, f32) is f64


def _sum(a, axis, keepdims):
    return ops.sum(a, axis, keepdims)


def _var(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, **kw):
    return ops.var(a, _axis(a, axis), keepdim=keepdims, correction=ddof)


def _std(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, **kw):
    return ops.std(a, _axis(a, axis), keepdim=keepdims, correction=ddof)


def _linalg_norm(x, ord=None, axis=None, keepdims=False):
    """np.linalg.norm's vector norms and the Frobenius norm (vector_norm over the axes);
    matrix norms (spectral, nuclear, induced 1/inf) are not supported."""
    if axis is None:
        if ord is None:  # the 2-norm of the flattened array
            return ops.vector_norm(x, 2.0, None, keepdims)
        axis = tuple(range(len(shape_of(x))))
    axes = (axis,) if isinstance(axis, int) else tuple(axis)
    if len(axes) == 1 and not isinstance(ord, str):
        return ops.vector_norm(x, 2.0 if ord is None else ord, axes, keepdims)
    if len(axes) == 2 and ord in (None, "fro"):
        return ops.vector_norm(x, 2.0, axes, keepdims)
    raise UnsupportedError(
        f"np.linalg.norm(ord={ord!r}) over {len(axes)} axes: only vector norms and the "
        f"Frobenius norm are supported on llgrad values", loc=user_loc(),
        fix="use a vector norm over one axis, or ord=None / 'fro' over two axes")


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


def _fabs(x):
    """np.fabs computes in a float (numpy's loop for the operand's dtype)."""
    (x,), _, _ = coerce(np.fabs, (x,))
    return ops.abs(x)


def _numpy_call(fn):
    """A numpy function: its result is strong even from Python numbers (promotion.py)."""
    def impl(*args, **kw):
        with numpy_call:
            return fn(*args, **kw)
    return impl


def _ufunc_call(fn):
    def impl(*args, out=None, where=True, **kw):
        _no_out(out)
        if where is not True or kw.get("dtype") is not None:
            raise UnsupportedError("where=/dtype= ufunc arguments are not supported on llgrad "
                                   "values", loc=user_loc(),
                                   fix="use np.where(mask, f(x), y) / .astype(dtype) instead")
        if not all_weak(args):
            return fn(*args)
        with numpy_call:
            return fn(*args)
    return impl


FUNCTIONS = {
    np.sum: _reducer(_sum),
    np.mean: _reducer(lambda a, ax, k: ops.mean(a, ax, k)),
    np.prod: _reducer(lambda a, ax, k: ops.prod(a, ax, k)),
    np.max: _reducer(lambda a, ax, k: ops.amax(a, ax, k)),
    np.amax: _reducer(lambda a, ax, k: ops.amax(a, ax, k)),
    np.min: _reducer(lambda a, ax, k: ops.amin(a, ax, k)),
    np.amin: _reducer(lambda a, ax, k: ops.amin(a, ax, k)),
    np.var: _var, np.std: _std,
    np.argmax: _argreduce(ops.argmax), np.argmin: _argreduce(ops.argmin),
    np.dot: _tensordot_free, np.matmul: _ufunc_call(ops.matmul), np.outer: ops.outer,
    np.where: _numpy_call(ops.where), np.clip: _numpy_call(_clip),
    np.concatenate: _concat, np.stack: _stack,
    np.reshape: _reshape, np.transpose: _transpose, np.swapaxes: ops.swapaxes,
    np.squeeze: _squeeze, np.expand_dims: _expand_dims, np.ravel: ops.ravel,
    np.broadcast_to: ops.broadcast_to,
    np.zeros_like: _like(0), np.ones_like: _like(1),
    np.fabs: _ufunc_call(_fabs), np.linalg.norm: _linalg_norm,
    np.shape: shape_of, np.ndim: lambda a: len(shape_of(a)),
    np.size: lambda a: math.prod(shape_of(a)),
}

for _p in REGISTRY.values():
    for _f in _p.numpy:
        if _f is not None and _f not in FUNCTIONS:
            FUNCTIONS[_f] = _ufunc_call(getattr(ops, _p.name))
FUNCTIONS[np.divide] = FUNCTIONS[np.true_divide] = _ufunc_call(ops.div)
FUNCTIONS[np.power] = _ufunc_call(ops.pow)


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
