"""Losses: mse_loss and nll_loss, composites like mean and softmax (runtime/ops/reduce.py): one
eager node each with PyTorch's name (MseLossBackward0, NllLossBackward0), and for the compiler
a `decompose` into exactly the ops `llgrad.nn.functional` used to be made of, so IR, goldens
and compiled results do not depend on them. `impl` computes what the decomposition computes
(bit for bit); the VJP rules are PyTorch's (mse_loss_backward, nll_loss_backward).

Reductions are 'mean', 'sum' or 'none' (validated by `llgrad.nn.functional`).
"""
from __future__ import annotations

import math

import numpy as np

from llgrad.runtime.aval import Aval, ShapeError, broadcast_shapes
from llgrad.runtime.ops import elementwise as ew
from llgrad.runtime.ops._util import dtype_of, operands, shape_of
from llgrad.runtime.ops.reduce import _mean_impl, mean, sum
from llgrad.runtime.prim import Primitive, bind, register


# ---- mse_loss: (input - target)**2, reduced ----------------------------------------------------
def _mse_impl(x, t, reduction):
    d = np.subtract(x, t)
    loss = np.multiply(d, d)
    if reduction == "none":
        return loss
    axes = tuple(range(loss.ndim))
    if reduction == "sum":
        return np.sum(loss, axis=axes, keepdims=False)
    return _mean_impl(loss, axes, False)


def _mse_shape(x, t, reduction):
    shape = broadcast_shapes(x.shape, t.shape, op="mse_loss")
    return Aval(shape if reduction == "none" else (), x.dtype)


def _mse_decompose(x, t, reduction):
    d = ew.sub(x, t)
    loss = ew.mul(d, d)
    if reduction == "mean":
        return mean(loss)
    return sum(loss) if reduction == "sum" else loss


def _mse_grad(g, x, t, reduction):
    # PyTorch's mse_loss_backward: norm * (input - target) * grad, norm = 2 (/ numel for mean)
    norm = 2.0
    if reduction == "mean":
        norm /= math.prod(np.broadcast_shapes(shape_of(x), shape_of(t)))
    return ew.mul(ew.mul(ew.sub(x, t), norm), g)


mse_loss_p = register(Primitive(
    "mse_loss", "loss", _mse_impl, _mse_shape,
    (lambda g, out, x, t, reduction: _mse_grad(g, x, t, reduction),
     lambda g, out, x, t, reduction: ew.neg(_mse_grad(g, x, t, reduction))),
    saves=(0, 1), decompose=_mse_decompose, node_name="MseLossBackward0"))


# ---- nll_loss: -weight[i] * input[i, target[i]], reduced ---------------------------------------
# Inputs: the log-probabilities x of shape (C,), (N, C) or (N, C, d1, ...); `target`, the class
# of each of the M = N*d1*... rows (int64, shape (M,), ignored rows pointing at class 0); and
# `weight`, each row's weight (shape (M,), 0 for ignored rows). `total_weight` (a float, the sum
# of `weight`) divides the sum for 'mean'. See llgrad.nn.functional.nll_loss.
def _nll_out_shape(xshape):
    return () if len(xshape) == 1 else (xshape[0],) + tuple(xshape[2:])


def _classes_last(x):
    """(N, C, d1, ...) -> (N*d1*..., C); (C,) -> (1, C)."""
    from llgrad.runtime.ops.shape import movedim, reshape
    s = shape_of(x)
    if len(s) == 1:
        return reshape(x, (1, s[0]))
    if len(s) > 2:
        x = movedim(x, 1, -1)
    return reshape(x, (-1, s[1]))


def _classes_back(rows, xshape):
    """The inverse of `_classes_last`: (M, C) -> x's shape."""
    from llgrad.runtime.ops.shape import movedim, reshape
    if len(xshape) <= 2:
        return reshape(rows, xshape)
    return movedim(reshape(rows, _nll_out_shape(xshape) + (xshape[1],)), -1, 1)


def _nll_impl(x, target, weight, reduction, total_weight):
    logp = x.reshape(1, -1) if x.ndim == 1 else (
        np.moveaxis(x, 1, -1) if x.ndim > 2 else x).reshape(-1, x.shape[1])
    loss = np.negative(np.multiply(logp[np.arange(logp.shape[0]), target], weight))
    if reduction == "none":
        return loss.reshape(_nll_out_shape(x.shape))
    total = np.sum(loss, axis=(0,), keepdims=False)
    if reduction == "sum":
        return total
    return np.true_divide(total, np.asarray(total_weight, x.dtype))


def _nll_shape(x, target, weight, reduction, total_weight):
    if len(x.shape) == 0:
        raise ShapeError("nll_loss: input must have at least 1 dimension (the classes)")
    rows = math.prod(_nll_out_shape(x.shape))
    if tuple(target.shape) != (rows,) or tuple(weight.shape) != (rows,):
        raise ShapeError(f"nll_loss: target and weight must have shape [{rows}] for input of "
                         f"shape {list(x.shape)}, got {list(target.shape)} and "
                         f"{list(weight.shape)}")
    return Aval(_nll_out_shape(x.shape) if reduction == "none" else (), x.dtype)


def _nll_decompose(x, target, weight, reduction, total_weight):
    from llgrad.runtime.ops.index import getitem
    from llgrad.runtime.ops.shape import reshape
    logp = _classes_last(x)
    picked = getitem(logp, (np.arange(shape_of(logp)[0]), target))
    loss = ew.neg(ew.mul(picked, weight))
    if reduction == "none":
        return reshape(loss, _nll_out_shape(shape_of(x)))
    total = sum(loss)
    return total if reduction == "sum" else ew.div(total, total_weight)


def _nll_vjp(g, out, x, target, weight, reduction, total_weight):
    # PyTorch's nll_loss_backward: -weight[i] * grad (/ total_weight for 'mean') at
    # (i, target[i]), zero elsewhere (a scatter, the transpose of the forward's gather).
    from llgrad.runtime.ops.index import scatter_add_p
    from llgrad.runtime.ops.shape import reshape
    xshape = shape_of(x)
    rows = math.prod(_nll_out_shape(xshape))
    if reduction == "none":
        g = reshape(g, (rows,))
    elif reduction == "mean":
        g = ew.div(g, total_weight)
    g = ew.mul(ew.neg(g), weight)  # (rows,): a 0-d 'mean'/'sum' gradient broadcasts
    scattered = bind(scatter_add_p, g, np.arange(rows), target, key=(("a", 0), ("a", 1)),
                     shape=(rows, xshape[0] if len(xshape) == 1 else xshape[1]))
    return _classes_back(scattered, xshape)


nll_loss_p = register(Primitive(
    "nll_loss", "loss", _nll_impl, _nll_shape, (_nll_vjp, None, None), saves=(1, 2),
    decompose=_nll_decompose, node_name="NllLossBackward0"))


# ---- the ops API ------------------------------------------------------------------------------
def mse_loss(input, target, reduction="mean"):
    """(input - target)**2 (broadcast), reduced by 'mean', 'sum' or 'none'."""
    (x, t), dt = operands(input, target)
    if dt.kind != "f":  # integers: the plain ops (mean gives float32; no gradient anyway)
        return _mse_decompose(x, t, reduction)
    return bind(mse_loss_p, x, t, reduction=reduction)


def nll_loss(input, target, weight, reduction="mean", total_weight=None):
    """-weight * input[row, target] per row of the classes-last input, reduced by 'mean' (the
    sum over `total_weight`, by default weight's sum), 'sum' or 'none'. `target` (int64) and
    `weight` have one entry per row (see `_nll_out_shape`); llgrad.nn.functional.nll_loss
    makes them from class indices, ignore_index and per-class weights."""
    if total_weight is None:
        total_weight = float(np.sum(weight))
    params = dict(reduction=reduction, total_weight=float(total_weight))
    if dtype_of(input).kind != "f":  # integer log-probabilities: the plain ops, as before
        return _nll_decompose(input, target, weight, **params)
    return bind(nll_loss_p, input, target, weight, **params)
