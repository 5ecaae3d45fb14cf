"""Reductions: reduce_sum/max/min/prod and argmax/argmin primitives; mean, var, std,
logsumexp, softmax and log_softmax composed from them.

Reductions take `axes` (a sorted tuple of non-negative ints) and `keepdims`.
"""
from __future__ import annotations

import numpy as np

from llgrad.runtime.aval import I64, Aval, normalize_axes
from llgrad.runtime.ops import elementwise as ew
from llgrad.runtime.ops._util import dtype_of, operands, shape_of
from llgrad.runtime.prim import Primitive, bind, register


def _reduced_shape(shape, axes, keepdims):
    if keepdims:
        return tuple(1 if i in axes else d for i, d in enumerate(shape))
    return tuple(d for i, d in enumerate(shape) if i not in axes)


def _reduce_shape_rule(x, axes, keepdims, dtype=None):
    return Aval(_reduced_shape(x.shape, axes, keepdims), dtype or x.dtype)


def _expand_back(g, x, axes, keepdims):
    """Broadcast a reduction's cotangent (or output) back to the input's shape."""
    from llgrad.runtime.ops.shape import broadcast_to, reshape
    if not keepdims:
        g = reshape(g, _reduced_shape(shape_of(x), axes, True))
    return broadcast_to(g, shape_of(x))


def _sum_vjp(g, out, x, axes, keepdims):
    return _expand_back(g, x, axes, keepdims)


def _extremum_vjp(g, out, x, axes, keepdims):
    # The gradient goes to the extremal elements, shared evenly among ties (PyTorch's amax).
    mask = ew.astype(ew.eq(x, _expand_back(out, x, axes, keepdims)), dtype_of(x))
    count = reduce_sum(mask, axes, True)
    return ew.mul(_expand_back(g, x, axes, keepdims), ew.div(mask, count))


def _prod_vjp(g, out, x, axes, keepdims):
    # d prod / d x_i = product of the others; exact with zeros (no division by x).
    return ew.mul(_expand_back(g, x, axes, keepdims), _prod_of_others(x, axes))


def _prod_of_others(x, axes):
    from llgrad.runtime.ops.shape import broadcast_to
    # One zero: its slot gets the product of the non-zeros; two or more zeros: all slots 0.
    zero = ew.eq(x, 0)
    nz = ew.where(zero, 1.0, x)
    prod_nz = broadcast_to(reduce_prod(nz, axes, True), shape_of(x))
    nzeros = broadcast_to(reduce_sum(ew.astype(zero, I64), axes, True), shape_of(x))
    others_no_zero = ew.div(prod_nz, nz)
    return ew.where(ew.eq(nzeros, 0), others_no_zero,
                    ew.where(ew.logical_and(ew.eq(nzeros, 1), zero), prod_nz, 0.0))


def _reduction(name, impl, vjp, saves, numpy=(), node_name=None):
    return register(Primitive(name, "reduce", impl, _reduce_shape_rule, (vjp,), saves=saves,
                              numpy=numpy, node_name=node_name))


reduce_sum_p = _reduction(
    "reduce_sum", lambda x, axes, keepdims: np.sum(x, axis=axes, keepdims=keepdims), _sum_vjp,
    saves=(), node_name="SumBackward1")
reduce_max_p = _reduction(
    "reduce_max", lambda x, axes, keepdims: np.max(x, axis=axes, keepdims=keepdims),
    _extremum_vjp, saves=(0, -1), node_name="AmaxBackward0")
reduce_min_p = _reduction(
    "reduce_min", lambda x, axes, keepdims: np.min(x, axis=axes, keepdims=keepdims),
    _extremum_vjp, saves=(0, -1), node_name="AminBackward0")
reduce_prod_p = _reduction(
    "reduce_prod", lambda x, axes, keepdims: np.prod(x, axis=axes, keepdims=keepdims),
    _prod_vjp, saves=(0,), node_name="ProdBackward1")


def _lse_impl(x, axes, keepdims):
    m = np.max(x, axis=axes, keepdims=True)
    m = np.where(np.isfinite(m), m, 0).astype(x.dtype, copy=False)
    with np.errstate(divide="ignore"):  # all -inf: log(0) = -inf, the right answer
        s = np.log(np.sum(np.exp(x - m), axis=axes, keepdims=True)) + m
    return s if keepdims else np.squeeze(s, axis=axes)


def _lse_vjp(g, out, x, axes, keepdims):
    # d lse / dx = softmax(x) = exp(x - lse)
    return ew.mul(_expand_back(g, x, axes, keepdims),
                  ew.exp(ew.sub(x, _expand_back(out, x, axes, keepdims))))


def _lse_decompose(x, axes, keepdims):
    # The same computation with primitives: max-shifted (the shift carries no gradient).
    m = ew.stop_gradient(bind(reduce_max_p, x, axes=axes, keepdims=True))
    m = ew.where(ew.logical_and(ew.gt(m, -np.inf), ew.lt(m, np.inf)), m, 0.0)
    s = ew.add(ew.log(reduce_sum(ew.exp(ew.sub(x, m)), axes, True)), m)
    if not keepdims:
        from llgrad.runtime.ops.shape import reshape
        s = reshape(s, _reduced_shape(shape_of(x), axes, False))
    return s


logsumexp_p = register(Primitive(
    "logsumexp", "reduce", _lse_impl, _reduce_shape_rule, (_lse_vjp,), saves=(0, -1),
    decompose=_lse_decompose, node_name="LogsumexpBackward0"))


def _arg_impl(fn):
    def impl(x, axis, keepdims):
        r = fn(x, axis=axis, keepdims=keepdims) if axis is not None else fn(x)
        return np.asarray(r, dtype=np.int64)
    return impl


def _arg_shape(x, axis, keepdims):
    axes = tuple(range(len(x.shape))) if axis is None else (axis,)
    return Aval(_reduced_shape(x.shape, axes, keepdims and axis is not None), I64)


argmax_p = register(Primitive("argmax", "reduce", _arg_impl(np.argmax), _arg_shape, nondiff=True,
                              numpy=np.argmax))
argmin_p = register(Primitive("argmin", "reduce", _arg_impl(np.argmin), _arg_shape, nondiff=True,
                              numpy=np.argmin))


# ---- the ops API ------------------------------------------------------------------------------
def _axes(x, dim):
    return normalize_axes(dim, len(shape_of(x)))


def reduce_sum(x, axes, keepdims=False):
    return bind(reduce_sum_p, x, axes=axes, keepdims=keepdims)


def reduce_prod(x, axes, keepdims=False):
    return bind(reduce_prod_p, x, axes=axes, keepdims=keepdims)


def sum(x, dim=None, keepdim=False, dtype=None):
    (x,), dt = operands(x)
    if dtype is not None:
        x = ew.astype(x, dtype)
    elif dt.kind in "bi":
        x = ew.astype(x, I64)
    return reduce_sum(x, _axes(x, dim), keepdim)


def prod(x, dim=None, keepdim=False):
    (x,), _ = operands(x)
    return reduce_prod(x, _axes(x, dim), keepdim)


def amax(x, dim=None, keepdim=False):
    (x,), _ = operands(x)
    return bind(reduce_max_p, x, axes=_axes(x, dim), keepdims=keepdim)


def amin(x, dim=None, keepdim=False):
    (x,), _ = operands(x)
    return bind(reduce_min_p, x, axes=_axes(x, dim), keepdims=keepdim)


def argmax(x, dim=None, keepdim=False):
    return bind(argmax_p, x, axis=None if dim is None else _axes(x, dim)[0], keepdims=keepdim)


def argmin(x, dim=None, keepdim=False):
    return bind(argmin_p, x, axis=None if dim is None else _axes(x, dim)[0], keepdims=keepdim)


def _count(x, axes):
    n = 1
    for a in axes:
        n *= shape_of(x)[a]
    return n


def mean(x, dim=None, keepdim=False):
    (x,), dt = operands(x)
    if dt.kind != "f":
        x = ew.astype(x, np.float32)
    axes = _axes(x, dim)
    return ew.div(reduce_sum(x, axes, keepdim), float(_count(x, axes)))


def var(x, dim=None, unbiased=True, keepdim=False, correction=None):
    (x,), _ = operands(x)
    axes = _axes(x, dim)
    ddof = (1 if unbiased else 0) if correction is None else correction
    centred = ew.sub(x, mean(x, axes, keepdim=True))
    ss = reduce_sum(ew.mul(centred, centred), axes, keepdim)
    return ew.div(ss, float(max(_count(x, axes) - ddof, 0)))


def std(x, dim=None, unbiased=True, keepdim=False, correction=None):
    return ew.sqrt(var(x, dim, unbiased, keepdim, correction))


def logsumexp(x, dim=None, keepdim=False):
    """log(sum(exp(x))) over `dim`, stable for large and -inf inputs (one primitive)."""
    (x,), dt = operands(x)
    if dt.kind != "f":
        x = ew.astype(x, np.float32)
    return bind(logsumexp_p, x, axes=_axes(x, dim), keepdims=keepdim)


def log_softmax(x, dim=-1):
    return ew.sub(x, logsumexp(x, dim, keepdim=True))


def softmax(x, dim=-1):
    return ew.exp(log_softmax(x, dim))
