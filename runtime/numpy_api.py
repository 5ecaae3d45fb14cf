"""numpy functions on llgrad values: the dispatch table behind `__array_ufunc__` and
`__array_function__`, generated from the primitives' `numpy` field plus numpy-signature
wrappers for composite functions. Anything not listed is an error, never a silent fallback."""
from __future__ import annotations

import math
import sys
import types

import numpy as np

from llgrad.runtime import ops
from llgrad.runtime.arraylike import as_array, booleans
from llgrad.runtime.aval import normalize_axes
from llgrad.runtime.conversions import array_from, numpy_operands, stand_in
from llgrad.runtime.errors import UnsupportedError, user_loc
from llgrad.runtime.ops import stats
from llgrad.runtime.ops._util import dtype_of, shape_of
from llgrad.runtime.prim import REGISTRY, is_value
from llgrad.runtime.promotion import all_weak, coerce, numpy_call, strong


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
    return as_array(ops.reshape(a, (shape,) if isinstance(shape, int) else shape))


def _where(condition, *xy):
    if len(xy) != 2:
        if xy:
            raise ValueError("either both or neither of x and y should be given")
        raise UnsupportedError(
            "np.where(condition) with one argument is not supported on llgrad values: it "
            "gives the indices where the condition holds, arrays of data-dependent length",
            loc=user_loc(),
            fix="select with the mask itself, x[condition], or choose elementwise with "
            "np.where(condition, x, y)")
    return ops.where(condition, *xy)


def _isclose(a, b, rtol=1e-05, atol=1e-08, equal_nan=False):
    """numpy's formula: |a - b| <= atol + rtol |b| where b is finite, or a == b (infinities);
    with equal_nan, NaN is close to NaN."""
    close = ops.logical_or(ops.logical_and(
        ops.le(ops.abs(ops.sub(a, b)), ops.add(atol, ops.mul(rtol, ops.abs(b)))),
        ops.isfinite(b)), ops.eq(a, b))
    return ops.logical_or(close, ops.logical_and(ops.isnan(a), ops.isnan(b))) if equal_nan \
        else close


def _clip(a, a_min=None, a_max=None, **kw):
    lo = kw.get("min", a_min)
    hi = kw.get("max", a_max)
    return ops.clip(strong(a), lo, hi)  # numpy makes `a` an array: np.clip(1.5, 0, f32) is f64


def _var(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, **kw):
    return ops.var(a, _axis(a, axis), keepdim=keepdims, correction=ddof)


def _std(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, **kw):
    return ops.std(a, _axis(a, axis), keepdim=keepdims, correction=ddof)


def _concat(arrays, axis=0, out=None, **kw):
    _no_out(out)
    return ops.concatenate(numpy_operands(np.concatenate, arrays, axis=axis), axis)


def _append(arr, values, axis=None):
    if axis is None:
        arr, values, axis = ops.ravel(array_from(arr)), ops.ravel(array_from(values)), 0
    return _concat((arr, values), axis)


def _bincount(x, weights=None, minlength=0):
    """np.bincount of constant indices with traced weights: their sums per index (one
    scatter-add), numpy's length max(x) + 1 or minlength. Traced indices would make the
    length depend on their values: refused, naming what to write instead."""
    if is_value(x):
        raise UnsupportedError("np.bincount of traced indices: the length of its result "
                               "depends on their values", loc=user_loc(),
                               fix="pass the indices as a numpy array, or add into an array of "
                               "a length you choose: out = np.zeros(n); np.add.at(out, idx, w)")
    idx = np.asarray(x)
    if weights is None:
        return np.bincount(idx, minlength=minlength)
    counts = np.bincount(idx, minlength=minlength)  # numpy's checks, and its length
    w = as_array(weights)
    if shape_of(w) != idx.shape:
        raise ValueError("The weights and list don't have the same length.")
    if dtype_of(w).kind != "f":
        w = ops.astype(w, np.float64)
    return ops.index_add(np.zeros(counts.shape[0], dtype_of(w)), (idx,), w)


def _select(condlist, choicelist, default=0):
    """The first choice whose condition holds, elementwise: np.where from the last one."""
    if len(condlist) != len(choicelist):
        raise ValueError("list of cases must be same length as list of conditions")
    out = default
    for cond, choice in zip(condlist[::-1], choicelist[::-1]):
        out = ops.where(cond, choice, out)
    return strong(out)


def concatenated_items(key, columns: bool):
    """np.r_[a, b, ...] (np.c_ when `columns`) of arrays and numbers: numbers become one
    element; np.c_ makes each item at least 2-D, a vector a column, and joins the last axis.
    Slices and directive strings are refused (np.concatenate says it plainly)."""
    name = "np.c_" if columns else "np.r_"
    items = key if type(key) is tuple else (key,)
    if any(isinstance(k, (slice, str)) for k in items):
        raise UnsupportedError(f"{name}[...] with a slice or a string among traced values is "
                               f"not supported", loc=user_loc(),
                               fix="build the pieces and join them with np.concatenate")
    arrays = []
    for k in items:
        a = array_from(k)
        nd = len(shape_of(a))
        if columns:
            a = ops.reshape(a, (1, 1) if nd == 0 else (-1, 1) if nd == 1 else shape_of(a))
        elif nd == 0:
            a = ops.reshape(a, (1,))
        arrays.append(a)
    return _concat(arrays, -1 if columns else 0)


def _stack(arrays, axis=0, out=None, **kw):
    _no_out(out)
    return ops.stack(numpy_operands(np.stack, arrays, axis=axis), axis)


def _squeeze(a, axis=None):
    return as_array(ops.squeeze(a, axis))


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
    np.var: _var, np.std: _std,  # np.sum/mean/prod/max/min: runtime/numpy_shape.py
    np.argmax: _argreduce(ops.argmax), np.argmin: _argreduce(ops.argmin),
    np.dot: _tensordot_free, np.matmul: _ufunc_call(ops.matmul), np.outer: ops.outer,
    np.where: _numpy_call(_where), np.clip: _numpy_call(_clip),
    np.concatenate: _concat, np.stack: _stack, np.append: _append, np.select: _select,
    np.bincount: _bincount,
    np.reshape: _reshape, np.transpose: _transpose, np.swapaxes: ops.swapaxes,
    np.squeeze: _squeeze, np.expand_dims: _expand_dims, np.ravel: ops.ravel,
    np.broadcast_to: ops.broadcast_to,
    np.zeros_like: _like(0), np.ones_like: _like(1),
    np.fabs: _ufunc_call(_fabs),
    np.shape: shape_of, np.ndim: lambda a: len(shape_of(a)),
    np.size: lambda a: math.prod(shape_of(a)),
}



# ---- elementwise math, scipy.special, conversions ---------------------------------------------
def _on_booleans(name: str, op):
    """np.bitwise_and/or/xor and np.invert, which compute logically on booleans (masks):
    on integers they are bitwise, which llgrad does not compute (an error, as for `&`)."""
    return _ufunc_call(lambda *xs: op(*booleans(f"np.{name}", "computes it", *xs)))


def _logical_xor(a, b):
    """np.logical_xor: a and b taken as truth values (nonzero is true), then !=."""
    return ops.ne(*(x if dtype_of(x) == np.bool_ else ops.ne(x, 0) for x in (a, b)))


def _round(a, decimals=0, out=None):
    _no_out(out)
    return ops.round(a, decimals)


def _reciprocal(x, **kw):
    if dtype_of(x).kind != "f":  # numpy's integer reciprocal truncates: 1 / 2 -> 0
        raise UnsupportedError("np.reciprocal of an integer array is not supported on llgrad "
                               "values", loc=user_loc(), fix="write 1 / x for a float result")
    return ops.reciprocal(x)


def _modf(x, out=None, **kw):
    """(fractional part, integral part), both with x's sign, as numpy's modf."""
    _no_out(out)
    whole = ops.trunc(x)
    return ops.sub(x, whole), whole


def _nan_to_num(x, copy=True, nan=0.0, posinf=None, neginf=None):
    return ops.nan_to_num(x, copy, nan, posinf, neginf)


def _sp_logsumexp(a, axis=None, b=None, keepdims=False, return_sign=False):
    """scipy.special.logsumexp: log(sum(b * exp(a))) over `axis`, with optional weights b."""
    if return_sign:
        raise UnsupportedError("scipy.special.logsumexp(return_sign=True) is not supported on "
                               "llgrad values", loc=user_loc())
    a = array_from(a)
    if b is None:
        return ops.logsumexp(a, _axis(a, axis), keepdims)
    b = array_from(b)
    a = ops.broadcast_to(a, np.broadcast_shapes(shape_of(a), shape_of(b)))
    axes = _axis(a, axis)
    m = ops.stop_gradient(ops.amax(a, axes, True))  # its gradient cancels exactly
    m = ops.where(ops.isfinite(m), m, 0.0)
    total = ops.sum(ops.mul(b, ops.exp(ops.sub(a, m))), axes, keepdims)
    return ops.add(ops.log(total), m if keepdims else ops.reshape(m, shape_of(total)))


def _sp_polygamma(n, x):
    """scipy.special.polygamma(n, x) for a constant order n (0: digamma, 1: trigamma)."""
    if is_value(n) or np.ndim(n) or n not in (0, 1):
        raise UnsupportedError(f"scipy.special.polygamma(n, x) on llgrad values needs a constant "
                               f"order n of 0 or 1, not {n!r}", loc=user_loc(),
                               fix="pass n as a Python int (0: digamma, 1: trigamma)")
    return ops.polygamma(int(n), array_from(x))


def _sp_comb(N, k, *, exact=False, repetition=False):
    """scipy.special.comb(N, k) with exact=False: binom(N, k) where 0 <= k <= N (else 0); with
    repetition, comb(N + k - 1, k)."""
    if exact:
        raise UnsupportedError("scipy.special.comb(exact=True) is not supported on traced "
                               "values: it computes with Python integers", loc=user_loc(),
                               fix="use exact=False (floats, differentiable)")
    if repetition:
        N = ops.sub(ops.add(N, k), 1)
    ok = ops.logical_and(ops.logical_and(ops.le(k, N), ops.ge(N, 0)), ops.ge(k, 0))
    return ops.where(ok, ops.binom(ops.where(ok, N, 1.0), ops.where(ok, k, 1.0)), 0.0)


def _sp_softmax(fn):
    def impl(x, axis=None):
        x = array_from(x)
        return fn(x, _axis(x, axis))
    return impl


def _as_type(dtype):
    def impl(x=0):
        return array_from(x, dtype)
    return impl


def _asarray(a, dtype=None, order=None, *, copy=None, **kw):
    out = array_from(a, dtype)
    return ops.copy(out) if _copies(copy) and out is a else out


def _copies(copy) -> bool:
    """numpy's copy=: True, False, None or a np._CopyMode (scipy's array-API layer passes
    _CopyMode.IF_NEEDED, whose bool() raises)."""
    mode = getattr(np, "_CopyMode", None)
    if mode is not None and isinstance(copy, mode):
        return copy is mode.ALWAYS
    return bool(copy)


def _array(obj, dtype=None, *, copy=True, order="K", subok=False, ndmin=0, **kw):
    out = _asarray(obj, dtype, copy=copy)
    extra = ndmin - len(shape_of(out))
    return ops.reshape(out, (1,) * extra + shape_of(out)) if extra > 0 else out


FUNCTIONS.update({
    np.round: _round, np.around: _round, np.reciprocal: _ufunc_call(_reciprocal),
    np.positive: _ufunc_call(ops.positive), np.sinc: ops.sinc,
    np.divmod: _ufunc_call(ops.divmod),
    np.deg2rad: _ufunc_call(ops.deg2rad), np.radians: _ufunc_call(ops.deg2rad),
    np.rad2deg: _ufunc_call(ops.rad2deg), np.degrees: _ufunc_call(ops.rad2deg),
    np.isnan: _ufunc_call(ops.isnan), np.isinf: _ufunc_call(ops.isinf),
    np.isfinite: _ufunc_call(ops.isfinite), np.signbit: _ufunc_call(ops.signbit),
    np.heaviside: _ufunc_call(ops.heaviside), np.nan_to_num: _nan_to_num,
    np.isclose: _isclose, np.allclose: lambda *a, **kw: stats.all(_isclose(*a, **kw)),
    np.copy: lambda a, order="K", subok=False: ops.copy(a),
    np.logical_xor: _ufunc_call(_logical_xor),
    np.bitwise_and: _on_booleans("bitwise_and", ops.logical_and),
    np.bitwise_or: _on_booleans("bitwise_or", ops.logical_or),
    np.bitwise_xor: _on_booleans("bitwise_xor", ops.ne),
    np.invert: _on_booleans("invert", ops.logical_not),
    np.result_type: lambda *a: np.result_type(*stand_in(list(a))),
    np.isposinf: lambda x, out=None: ops.logical_and(ops.isinf(x), ops.gt(x, 0)),
    np.isneginf: lambda x, out=None: ops.logical_and(ops.isinf(x), ops.lt(x, 0)),
    np.isreal: lambda x: np.ones(shape_of(x), np.bool_),  # (complex values are refused)
    np.iscomplex: lambda x: np.zeros(shape_of(x), np.bool_),
    np.real_if_close: lambda a, tol=100: a,
    np.modf: _modf,
})

# numpy's conversions are no __array_function__ overrides (they would call `__array__`): the
# tracer calls these instead where a converted function passes them a value (traced_forms).
CONVERSIONS = {
    np.asarray: _asarray, np.asanyarray: _asarray, np.ascontiguousarray: _asarray,
    np.asfortranarray: _asarray, np.array: _array,
    np.require: lambda a, dtype=None, requirements=None, *, like=None: _asarray(a, dtype),
    np.float64: _as_type(np.float64), np.float32: _as_type(np.float32),
}

for _p in REGISTRY.values():
    for _f in _p.numpy:
        if _f is not None and _f not in FUNCTIONS:
            FUNCTIONS[_f] = _ufunc_call(getattr(ops, _p.name))
FUNCTIONS[np.divide] = FUNCTIONS[np.true_divide] = _ufunc_call(ops.div)
FUNCTIONS[np.power] = _ufunc_call(ops.pow)


def _ufunc_outer(fn):
    """ufunc.outer(a, b): fn of a, its shape extended by one axis per axis of b, and b."""
    def impl(a, b, **kw):
        a = a if is_value(a) else np.asarray(a)
        return fn(ops.reshape(a, shape_of(a) + (1,) * np.ndim(b)), b, **kw)
    return impl


# the arithmetic and comparison ufuncs' .outer (np.subtract.outer: pairwise differences)
FUNCTIONS.update({f.outer: _ufunc_outer(FUNCTIONS[f]) for f in (
    np.add, np.subtract, np.multiply, np.divide, np.power, np.maximum, np.minimum,
    np.logaddexp, np.hypot, np.arctan2, np.equal, np.not_equal, np.less, np.less_equal,
    np.greater, np.greater_equal)})

# ---- reductions, scans, sorting, shape and contraction functions (issue 11, npshape) -------
from llgrad.runtime.numpy_shape import FUNCTIONS as _SHAPE_FUNCTIONS  # noqa: E402

FUNCTIONS.update(_SHAPE_FUNCTIONS)

# ---- numpy.linalg and scipy.linalg (issue 11, linalg) ------------------------------------------
from llgrad.runtime import (numpy_calculus, numpy_linalg, numpy_poly,  # noqa: E402
                            scipy_interpolation, scipy_linalg, scipy_moments, scipy_ndimage,
                            scipy_signal, scipy_spatial, scipy_spectral, scipy_stats)

FUNCTIONS.update(numpy_linalg.FUNCTIONS)
FUNCTIONS.update(numpy_calculus.FUNCTIONS)  # np.gradient, np.nanmax, ...
FUNCTIONS.update(numpy_poly.FUNCTIONS)  # np.vander, np.polyfit

# ---- complex intermediates and np.fft (Note [Complex values are pairs]) ------------------------
from llgrad.runtime import complex_values, numpy_fft  # noqa: E402

FUNCTIONS.update(complex_values.REAL_AND_COMPLEX)
FUNCTIONS.update(numpy_fft.FUNCTIONS)

# Note [Lazily named functions]
# A primitive's `numpy` entry may name a function of a module runtime must not import (scipy:
# `numpy="scipy.special.erf"`), so `import llgrad` stays fast. Such names wait in LAZY (with
# FUNCTIONS-style wrappers, or an adapter to the library's signature) and move to FUNCTIONS
# once their module has been imported by someone: before that, no user code can hold one.
# "module:object.method" names a method of an object of the module (scipy.stats.norm.cdf: a
# bound method, equal and of equal hash each time `norm.cdf` is read).
LAZY = {f: FUNCTIONS.pop(f) for f in [f for f in FUNCTIONS if isinstance(f, str)]}
LAZY.update({
    "scipy.special.logsumexp": _sp_logsumexp,
    "scipy.special.softmax": _sp_softmax(ops.softmax),
    "scipy.special.log_softmax": _sp_softmax(ops.log_softmax),
    "scipy.special.betaln": ops.betaln, "scipy.special.beta": ops.beta,
    "scipy.special.log_expit": ops.log_expit, "scipy.special.polygamma": _sp_polygamma,
    "scipy.special.comb": _sp_comb,
})
LAZY.update({f"scipy.special.{f.__name__}": f for f in (
    ops.special.entr, ops.special.rel_entr, ops.special.kl_div, ops.special.huber,
    ops.special.pseudo_huber)})
LAZY.update(numpy_linalg.SCIPY)  # scipy.linalg's functions
LAZY.update(scipy_linalg.SCIPY)  # scipy.linalg's special matrices, sqrtm, lu_factor/solve
LAZY.update(numpy_calculus.SCIPY)  # scipy.integrate's
LAZY.update(numpy_poly.LAZY)  # numpy.polynomial.polynomial's polyfit, polyval, polyvander
LAZY.update(scipy_ndimage.SCIPY)  # scipy.ndimage's filters
LAZY.update(scipy_interpolation.SCIPY)  # scipy.ndimage's shift, zoom, map_coordinates
LAZY.update(scipy_signal.SCIPY)  # scipy.signal's filters and convolutions
LAZY.update(scipy_spectral.SCIPY)  # scipy.signal's hilbert, welch
LAZY.update(scipy_spatial.SCIPY)  # scipy.spatial.distance's cdist, pdist, squareform
LAZY.update(scipy_moments.SCIPY)  # scipy.stats' moment, skew, kurtosis, zscore
LAZY.update(scipy_stats.SCIPY)  # "module:object.method": scipy.stats's distributions


def _module_and_path(name: str) -> tuple[str, list[str]]:
    """"scipy.special.erf" -> ("scipy.special", ["erf"]); "scipy.stats:norm.cdf" ->
    ("scipy.stats", ["norm", "cdf"]) (a method of an object of the module)."""
    mod, sep, path = name.partition(":")
    if not sep:
        mod, _, path = name.rpartition(".")
    return mod, path.split(".")


def resolve_lazy() -> None:
    """Move the LAZY names of modules imported by now into FUNCTIONS."""
    for name in list(LAZY):
        mod, path = _module_and_path(name)
        if mod not in sys.modules:
            continue
        f, fn = sys.modules[mod], LAZY.pop(name)
        for attr in path:
            f = getattr(f, attr)
        FUNCTIONS[f] = _typed_like(f, fn) if isinstance(f, np.ufunc) else fn
        if ":" in name:  # (numpy_name: the object's own names say scipy.stats.cdf)
            _OBJECT_NAMES[f] = name.replace(":", ".")


_OBJECT_NAMES: dict = {}


def _typed_like(ufunc, fn):
    """`fn` with its operands cast to the dtype `ufunc` itself resolves to: scipy's ufuncs
    compute a float32 array with a Python float (or an int64 array) in float64."""
    def impl(*args, **kw):
        probe = [np.zeros((), dtype_of(a)) if is_value(a) or isinstance(a, np.ndarray) else a
                 for a in args]
        with np.errstate(all="ignore"):
            dt = np.asarray(ufunc(*probe)).dtype
        return fn(*[ops.astype(a, dt) if is_value(a) else np.asarray(a, dt) for a in args],
                  **kw)
    return impl


def traced_forms() -> dict:
    """Library callables whose Python implementation cannot run on llgrad values (numpy's
    conversions, scipy's and numpy.polynomial's Python-level functions), each with the llgrad
    function to call."""
    resolve_lazy()
    out = dict(CONVERSIONS)
    out.update((f, fn) for f, fn in FUNCTIONS.items() if not isinstance(f, np.ufunc) and (
        getattr(f, "__module__", None) or "").startswith(("scipy", "numpy.polynomial")))
    # methods of library objects also by (class, name): a copy of the object has them too
    out.update(((type(f.__self__), f.__name__), fn) for f, fn in list(out.items())
               if isinstance(f, types.MethodType)
               and not isinstance(f.__self__, (type, types.ModuleType)))
    return out


# What to write instead of a library function llgrad does not support on traced values
# (Note [Unsupported library functions] in tracer/operators.py), by the name the user wrote.
_ALTERNATIVES = {
    "scipy.ndimage.rank_filter": "np.sort(np.lib.stride_tricks.sliding_window_view(np.pad(a, "
    "size // 2, mode='symmetric'), (size, size)).reshape(*a.shape, -1), axis=-1)[..., rank] "
    "(ndimage's mode='reflect')",
}


def library_alternative(name: str) -> str:
    """How to fix a call of the library function `name` on traced values."""
    return _ALTERNATIVES.get(name, "") + ("; or " if name in _ALTERNATIVES else "") + (
        "write it with the numpy functions llgrad supports (docs/numpy_support.md), or call "
        "it outside the differentiated function on plain arrays (no gradient flows through it)")


def numpy_name(func) -> str:
    """How the user wrote `func`: np.exp, np.fft.fft, np.linalg.inv, np.add.reduce."""
    try:
        if func in _OBJECT_NAMES:  # scipy.stats.norm.cdf
            return _OBJECT_NAMES[func]
    except TypeError:  # (unhashable)
        pass
    owner = getattr(func, "__self__", None)
    if isinstance(owner, np.ufunc):  # a ufunc method (np.add.reduce)
        return f"{numpy_name(owner)}.{func.__name__}"
    name = getattr(func, "__name__", repr(func))
    special = sys.modules.get("scipy.special")
    if isinstance(func, np.ufunc) and getattr(special, name, None) is func:
        return f"scipy.special.{name}"
    mod = getattr(func, "__module__", None) or "numpy"
    if not mod.startswith("numpy"):  # scipy.special._logsumexp -> scipy.special
        return ".".join([p for p in mod.split(".") if not p.startswith("_")] + [name])
    # public submodules keep their name (numpy.fft, numpy.linalg._linalg -> np.linalg)
    parts = [p for p in mod.split(".")[1:] if not p.startswith("_")]
    if parts and hasattr(np, parts[0]):  # (np.lib.stride_tricks.sliding_window_view)
        return ".".join(["np", *parts, name])
    return f"np.{name}"
