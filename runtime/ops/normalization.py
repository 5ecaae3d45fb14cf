"""Normalisation layers as primitives, one eager node each with PyTorch's names:
batch_norm (NativeBatchNormBackward0), layer_norm (NativeLayerNormBackward0) and group_norm
(NativeGroupNormBackward0). Their VJPs are written with ops (mean, var, rsqrt, ...) computed
from the input, so second derivatives include the statistics' dependence on the input.

`weight` and `bias` of shape () stand for "no affine transform" (PyTorch's None): they are
1 and 0 and get no gradient. Statistics are biased (divide by the count), as PyTorch
normalises; the unbiased running variance is the module's business (llgrad.nn).
"""
from __future__ import annotations

import numpy as np

from llgrad.runtime.aval import Aval, ShapeError
from llgrad.runtime.ops import elementwise as ew
from llgrad.runtime.ops._util import dtype_of, shape_of
from llgrad.runtime.prim import Primitive, register


def _stats_ops(x, axes, eps):
    """(mean, 1/sqrt(var + eps)) of x over axes (kept), with ops: differentiable."""
    from llgrad.runtime.ops.reduce import mean, var
    mu = mean(x, axes, keepdim=True)
    return mu, ew.rsqrt(ew.add(var(x, axes, correction=0, keepdim=True), eps))


def _normalize_vjp(dxhat, x, axes, eps):
    """d/dx of xhat = (x - mean) * invstd applied to dxhat (the chain through the statistics):
    invstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat))."""
    from llgrad.runtime.ops.reduce import mean
    mu, invstd = _stats_ops(x, axes, eps)
    xhat = ew.mul(ew.sub(x, mu), invstd)
    inner = ew.sub(ew.sub(dxhat, mean(dxhat, axes, keepdim=True)),
                   ew.mul(xhat, mean(ew.mul(dxhat, xhat), axes, keepdim=True)))
    return ew.mul(invstd, inner)


def _affine_np(xhat, w, b, shape):
    if w.ndim:
        xhat = xhat * w.reshape(shape)
    if b.ndim:
        xhat = xhat + b.reshape(shape)
    return xhat


def _affine_ops(xhat, w, b, shape):
    from llgrad.runtime.ops.shape import reshape
    if shape_of(w):
        xhat = ew.mul(xhat, reshape(w, shape))
    if shape_of(b):
        xhat = ew.add(xhat, reshape(b, shape))
    return xhat


def _param_grad(i, g, xhat, w, b, axes):
    """The gradient of weight (i = 0: sum of g * xhat) or bias (i = 1: sum of g) over axes."""
    from llgrad.runtime.ops.reduce import sum
    from llgrad.runtime.ops.shape import reshape
    p = (w, b)[i]
    if not shape_of(p):
        return None
    return reshape(sum(ew.mul(g, xhat) if i == 0 else g, axes), shape_of(p))


# ---- batch_norm: x (N, C, *), statistics per channel ------------------------------------------
# `mean` and `var` are the batch statistics (training, computed by the caller, who also needs
# them for the running averages) or the running ones (eval); neither gets a gradient. In
# training the VJP recomputes them from x with ops (they are functions of x).
def _bn_axes(x):
    return (0,) + tuple(range(2, len(shape_of(x))))


def _bn_shape_of(x):
    return (1, shape_of(x)[1]) + (1,) * (len(shape_of(x)) - 2)


def _bn_impl(x, w, b, mean, var, eps, training):
    shape = (1, x.shape[1]) + (1,) * (x.ndim - 2)
    invstd = 1.0 / np.sqrt(var.astype(x.dtype) + np.asarray(eps, x.dtype))
    alpha = invstd * (w if w.ndim else np.ones((), x.dtype))
    beta = (b if b.ndim else np.zeros((), x.dtype)) - mean.astype(x.dtype) * alpha
    return x * alpha.reshape(shape) + beta.reshape(shape)


def _bn_xhat(x, mean, var, eps, training):
    from llgrad.runtime.ops.shape import reshape
    if training:
        mu, invstd = _stats_ops(x, _bn_axes(x), eps)
    else:
        shape, dt = _bn_shape_of(x), dtype_of(x)
        mu = reshape(ew.astype(mean, dt), shape)
        invstd = reshape(ew.rsqrt(ew.add(ew.astype(var, dt), eps)), shape)
    return ew.mul(ew.sub(x, mu), invstd), invstd


def _bn_vjp_x(g, out, x, w, b, mean, var, eps, training):
    from llgrad.runtime.ops.shape import reshape
    dxhat = ew.mul(g, reshape(w, _bn_shape_of(x))) if shape_of(w) else g
    if training:
        return _normalize_vjp(dxhat, x, _bn_axes(x), eps)
    return ew.mul(dxhat, _bn_xhat(x, mean, var, eps, False)[1])


def _bn_vjp_params(i):
    def rule(g, out, x, w, b, mean, var, eps, training):
        xhat = _bn_xhat(x, mean, var, eps, training)[0] if i == 0 else None
        return _param_grad(i, g, xhat, w, b, _bn_axes(x))
    return rule


def _bn_decompose(x, w, b, mean, var, eps, training):
    return _affine_ops(_bn_xhat(x, mean, var, eps, training)[0], w, b, _bn_shape_of(x))


def _no_grad(g, out, *args, **params):
    return None  # running statistics get no gradient (PyTorch's need none either)


def _bn_shape(x, w, b, mean, var, eps, training):
    if len(x.shape) < 2:
        raise ShapeError(f"batch_norm: expected an input of 2 or more dimensions (N, C, ...), "
                         f"got {list(x.shape)}")
    c = x.shape[1]
    for name, a in (("weight", w), ("bias", b), ("running_mean", mean), ("running_var", var)):
        if tuple(a.shape) not in ((), (c,)):
            raise ShapeError(f"batch_norm: {name} of shape {list(a.shape)} for an input with "
                             f"{c} channels (shape {list(x.shape)})")
    return Aval(tuple(x.shape), x.dtype)


batch_norm_p = register(Primitive(
    "batch_norm", "norm", _bn_impl, _bn_shape,
    (_bn_vjp_x, _bn_vjp_params(0), _bn_vjp_params(1), _no_grad, _no_grad),
    saves=(0, 1, 3, 4), decompose=_bn_decompose, node_name="NativeBatchNormBackward0"))


# ---- layer_norm: statistics over the last `nd` dimensions ---------------------------------------
def _last(x, nd):
    n = len(shape_of(x))
    return tuple(range(n - nd, n))


def _ln_impl(x, w, b, nd, eps):
    axes = tuple(range(x.ndim - nd, x.ndim))
    mu = x.mean(axes, keepdims=True)
    d = x - mu
    var = np.mean(d * d, axes, keepdims=True)
    xhat = d * (1.0 / np.sqrt(var + np.asarray(eps, x.dtype)))
    return _affine_np(xhat, w, b, x.shape[x.ndim - nd:])


def _ln_xhat(x, nd, eps):
    mu, invstd = _stats_ops(x, _last(x, nd), eps)
    return ew.mul(ew.sub(x, mu), invstd)


def _ln_vjp_x(g, out, x, w, b, nd, eps):
    dxhat = ew.mul(g, w) if shape_of(w) else g
    return _normalize_vjp(dxhat, x, _last(x, nd), eps)


def _ln_vjp_params(i):
    def rule(g, out, x, w, b, nd, eps):
        lead = tuple(range(len(shape_of(x)) - nd))
        return _param_grad(i, g, _ln_xhat(x, nd, eps) if i == 0 else None, w, b, lead)
    return rule


def _ln_shape(x, w, b, nd, eps):
    norm = tuple(x.shape[len(x.shape) - nd:])
    if nd > len(x.shape) or any(tuple(a.shape) not in ((), norm) for a in (w, b)):
        raise ShapeError(f"layer_norm: input of shape {list(x.shape)} cannot be normalised over "
                         f"its last {nd} dimensions with weight {list(w.shape)} and bias "
                         f"{list(b.shape)}")
    return Aval(tuple(x.shape), x.dtype)


layer_norm_p = register(Primitive(
    "layer_norm", "norm", _ln_impl, _ln_shape, (_ln_vjp_x, _ln_vjp_params(0), _ln_vjp_params(1)),
    saves=(0, 1), decompose=lambda x, w, b, nd, eps: _affine_ops(
        _ln_xhat(x, nd, eps), w, b, shape_of(x)[len(shape_of(x)) - nd:]),
    node_name="NativeLayerNormBackward0"))


# ---- group_norm: x (N, C, *), statistics per sample over each group of C/G channels ------------
def _grouped(x, groups):
    from llgrad.runtime.ops.shape import reshape
    return reshape(x, (shape_of(x)[0], groups, -1))


def _gn_impl(x, w, b, groups, eps):
    xg = x.reshape(x.shape[0], groups, -1)
    xhat = _ln_impl(xg, np.ones((), x.dtype), np.zeros((), x.dtype), 1, eps).reshape(x.shape)
    return _affine_np(xhat, w, b, (x.shape[1],) + (1,) * (x.ndim - 2))


def _gn_xhat(x, groups, eps):
    from llgrad.runtime.ops.shape import reshape
    return reshape(_ln_xhat(_grouped(x, groups), 1, eps), shape_of(x))


def _gn_vjp_x(g, out, x, w, b, groups, eps):
    from llgrad.runtime.ops.shape import reshape
    shape = (shape_of(x)[1],) + (1,) * (len(shape_of(x)) - 2)
    dxhat = ew.mul(g, reshape(w, shape)) if shape_of(w) else g
    dx = _normalize_vjp(_grouped(dxhat, groups), _grouped(x, groups), (2,), eps)
    return reshape(dx, shape_of(x))


def _gn_vjp_params(i):
    def rule(g, out, x, w, b, groups, eps):
        axes = (0,) + tuple(range(2, len(shape_of(x))))
        return _param_grad(i, g, _gn_xhat(x, groups, eps) if i == 0 else None, w, b, axes)
    return rule


def _gn_shape(x, w, b, groups, eps):
    if len(x.shape) < 2 or x.shape[1] % groups:
        raise ShapeError(f"group_norm: expected an input (N, C, ...) with C divisible by "
                         f"num_groups={groups}, got shape {list(x.shape)}")
    if any(tuple(a.shape) not in ((), (x.shape[1],)) for a in (w, b)):
        raise ShapeError(f"group_norm: weight {list(w.shape)} and bias {list(b.shape)} must "
                         f"have one entry per channel ({x.shape[1]})")
    return Aval(tuple(x.shape), x.dtype)


group_norm_p = register(Primitive(
    "group_norm", "norm", _gn_impl, _gn_shape, (_gn_vjp_x, _gn_vjp_params(0), _gn_vjp_params(1)),
    saves=(0, 1), decompose=lambda x, w, b, groups, eps: _affine_ops(
        _gn_xhat(x, groups, eps), w, b, (shape_of(x)[1],) + (1,) * (len(shape_of(x)) - 2)),
    node_name="NativeGroupNormBackward0"))
