"""Losses: mse_loss, nll_loss, binary_cross_entropy(_with_logits), smooth_l1/huber_loss,
composites like mean and softmax (runtime/ops/reduce.py): one eager node each with PyTorch's
name (MseLossBackward0, NllLossBackward0, ...), and for the compiler
a `decompose` into exactly the ops `llgrad.nn.functional` used to be made of, so IR, goldens
and compiled results do not depend on them. `impl` computes what the decomposition computes
(mse_loss and nll_loss bit for bit); the VJP rules are PyTorch's (mse_loss_backward, ...).

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


# ---- pointwise losses with PyTorch's own backward formulas --------------------------------------
# binary_cross_entropy, binary_cross_entropy_with_logits, smooth_l1_loss and huber_loss are one
# node each (BinaryCrossEntropyBackward0, ...). Their VJPs are PyTorch's formulas, which differ
# from the derivative of the decomposition where the forward clamps (bce's log at -100).
# `weight` and `pos_weight` are constants (arrays; 0-d 1.0 for none): they get no gradient.
def _reduce_np(loss, reduction):
    if reduction == "none":
        return loss
    axes = tuple(range(loss.ndim))
    if reduction == "sum":
        return np.sum(loss, axis=axes, keepdims=False)
    return _mean_impl(loss, axes, False)


def _reduce_ops(loss, reduction):
    return loss if reduction == "none" else mean(loss) if reduction == "mean" else sum(loss)


def _scaled(g, x, reduction):
    """The output gradient per element: g (broadcast), divided by numel for 'mean'."""
    return ew.div(g, float(math.prod(shape_of(x)))) if reduction == "mean" else g


def _pointwise_shape(x, t, *consts, reduction, **_):
    shape = broadcast_shapes(x.shape, t.shape, *(c.shape for c in consts), op="loss")
    if shape != tuple(x.shape):
        raise ShapeError(f"loss: target {list(t.shape)} (and weights) must broadcast to the "
                         f"input's shape {list(x.shape)}")
    return Aval(tuple(x.shape) if reduction == "none" else (), x.dtype)


def _bce_terms(x, t, w):
    """-w * (t * log(x) + (1 - t) * log(1 - x)), the logs clamped at -100, as PyTorch."""
    from llgrad.runtime.ops.elementwise import clip
    log_x, log_1mx = clip(ew.log(x), -100.0), clip(ew.log1p(ew.neg(x)), -100.0)
    return ew.mul(ew.neg(w), ew.add(ew.mul(t, log_x), ew.mul(ew.sub(1.0, t), log_1mx)))


def _bce_impl(x, t, w, reduction):
    with np.errstate(divide="ignore"):
        lx, l1x = np.maximum(np.log(x), -100), np.maximum(np.log1p(-x), -100)
    return _reduce_np(-w * (t * lx + (1 - t) * l1x), reduction)


def _bce_vjp_x(g, out, x, t, w, reduction):
    # PyTorch's binary_cross_entropy_backward: g * w * (x - t) / max((1 - x) x, 1e-12)
    denom = ew.maximum(ew.mul(ew.sub(1.0, x), x), 1e-12)
    return ew.div(ew.mul(ew.mul(_scaled(g, x, reduction), w), ew.sub(x, t)), denom)


def _bce_vjp_t(g, out, x, t, w, reduction):
    from llgrad.runtime.ops.elementwise import clip
    diff = ew.sub(clip(ew.log1p(ew.neg(x)), -100.0), clip(ew.log(x), -100.0))
    return ew.mul(ew.mul(_scaled(g, x, reduction), w), diff)


binary_cross_entropy_p = register(Primitive(
    "binary_cross_entropy", "loss", _bce_impl, _pointwise_shape,
    (_bce_vjp_x, _bce_vjp_t, None), saves=(0, 1, 2),
    decompose=lambda x, t, w, reduction: _reduce_ops(_bce_terms(x, t, w), reduction),
    node_name="BinaryCrossEntropyBackward0"))


def _bce_logits_terms(x, t, w, pw):
    """w * ((1 - t) x - (1 + (pw - 1) t) log_sigmoid(x)), log_sigmoid(x) = min(x, 0) -
    log1p(exp(-|x|)), as PyTorch."""
    log_sig = ew.sub(ew.minimum(x, 0.0), ew.log1p(ew.exp(ew.neg(ew.abs(x)))))
    lw = ew.add(ew.mul(ew.sub(pw, 1.0), t), 1.0)
    return ew.mul(w, ew.sub(ew.mul(ew.sub(1.0, t), x), ew.mul(lw, log_sig)))


def _bce_logits_impl(x, t, w, pw, reduction):
    log_sig = np.minimum(x, 0) - np.log1p(np.exp(-np.abs(x)))
    return _reduce_np(w * ((1 - t) * x - ((pw - 1) * t + 1) * log_sig), reduction)


def _bce_logits_vjp_x(g, out, x, t, w, pw, reduction):
    # ((pw - 1) t + 1) sigmoid(x) - pw t, times w
    lw = ew.add(ew.mul(ew.sub(pw, 1.0), t), 1.0)
    d = ew.sub(ew.mul(lw, ew.sigmoid(x)), ew.mul(pw, t))
    return ew.mul(ew.mul(_scaled(g, x, reduction), w), d)


def _bce_logits_vjp_t(g, out, x, t, w, pw, reduction):
    # -x - (pw - 1) log_sigmoid(x), times w
    log_sig = ew.sub(ew.minimum(x, 0.0), ew.log1p(ew.exp(ew.neg(ew.abs(x)))))
    d = ew.neg(ew.add(x, ew.mul(ew.sub(pw, 1.0), log_sig)))
    return ew.mul(ew.mul(_scaled(g, x, reduction), w), d)


binary_cross_entropy_with_logits_p = register(Primitive(
    "binary_cross_entropy_with_logits", "loss", _bce_logits_impl, _pointwise_shape,
    (_bce_logits_vjp_x, _bce_logits_vjp_t, None, None), saves=(0, 1, 2, 3),
    decompose=lambda x, t, w, pw, reduction: _reduce_ops(_bce_logits_terms(x, t, w, pw),
                                                         reduction),
    node_name="BinaryCrossEntropyWithLogitsBackward0"))


def _huber_terms(d, delta, smooth):
    """Per element, for d = x - t: smooth_l1 (0.5 d^2 / delta inside, |d| - 0.5 delta outside)
    or huber (0.5 d^2 inside, delta (|d| - 0.5 delta) outside); |d| < delta is inside."""
    a = ew.abs(d)
    quad = ew.mul(ew.mul(d, d), 0.5 / delta if smooth else 0.5)
    lin = ew.sub(a, 0.5 * delta) if smooth else ew.mul(ew.sub(a, 0.5 * delta), delta)
    return ew.where(ew.lt(a, delta), quad, lin)


def _huber_impl(x, t, reduction, delta, smooth):
    d = x - t
    a = np.abs(d)
    if smooth:
        loss = a - 0.5 * delta if delta == 0 else np.where(a < delta, 0.5 * d * d / delta,
                                                           a - 0.5 * delta)
    else:
        loss = np.where(a < delta, 0.5 * d * d, delta * (a - 0.5 * delta))
    return _reduce_np(loss.astype(x.dtype, copy=False), reduction)


def _huber_grad(g, x, t, reduction, delta, smooth):
    # PyTorch's smooth_l1_loss_backward / huber_loss_backward: d / delta (resp. d) inside,
    # sign(d) (resp. delta sign(d)) outside; smooth_l1 with delta=0 is l1: sign(d).
    d = ew.sub(x, t)
    edge = 1.0 if smooth else delta
    if smooth and delta == 0:
        inside = ew.sign(d)
    else:
        inside = ew.div(d, delta) if smooth else d
    out = ew.where(ew.gt(d, delta), edge, ew.where(ew.lt(d, -delta), -edge, inside))
    return ew.mul(_scaled(g, x, reduction), out)


def _huber_decompose(x, t, reduction, delta, smooth):
    d = ew.sub(x, t)
    per = ew.abs(d) if smooth and delta == 0 else _huber_terms(d, delta, smooth)
    return _reduce_ops(per, reduction)


def _huber_family(name, smooth, node_name):
    return register(Primitive(
        name, "loss", lambda x, t, **p: _huber_impl(x, t, smooth=smooth, **p), _pointwise_shape,
        (lambda g, out, x, t, **p: _huber_grad(g, x, t, smooth=smooth, **p),
         lambda g, out, x, t, **p: ew.neg(_huber_grad(g, x, t, smooth=smooth, **p))),
        saves=(0, 1), decompose=lambda x, t, **p: _huber_decompose(x, t, smooth=smooth, **p),
        node_name=node_name))


huber_loss_p = _huber_family("huber_loss", False, "HuberLossBackward0")
smooth_l1_loss_p = _huber_family("smooth_l1_loss", True, "SmoothL1LossBackward0")


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


def _loss_operands(input, target, *consts):
    (x, t), dt = operands(input, target)
    return x, t, [np.asarray(1.0 if c is None else c, dt) for c in consts]


def binary_cross_entropy(input, target, weight=None, reduction="mean"):
    """-weight (t log x + (1 - t) log(1 - x)), the logs clamped at -100, reduced."""
    x, t, (w,) = _loss_operands(input, target, weight)
    return bind(binary_cross_entropy_p, x, t, w, reduction=reduction)


def binary_cross_entropy_with_logits(input, target, weight=None, pos_weight=None,
                                     reduction="mean"):
    """binary_cross_entropy(sigmoid(input), target) computed stably, positives weighted by
    pos_weight."""
    x, t, (w, pw) = _loss_operands(input, target, weight, pos_weight)
    return bind(binary_cross_entropy_with_logits_p, x, t, w, pw, reduction=reduction)


def huber_loss(input, target, reduction="mean", delta=1.0):
    """0.5 d^2 where |d| < delta, else delta (|d| - 0.5 delta), for d = input - target."""
    x, t, _ = _loss_operands(input, target)
    return bind(huber_loss_p, x, t, reduction=reduction, delta=float(delta))


def smooth_l1_loss(input, target, reduction="mean", beta=1.0):
    """0.5 d^2 / beta where |d| < beta, else |d| - 0.5 beta (|d| when beta = 0)."""
    x, t, _ = _loss_operands(input, target)
    return bind(smooth_l1_loss_p, x, t, reduction=reduction, delta=float(beta))
