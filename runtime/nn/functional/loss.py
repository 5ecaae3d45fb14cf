"""Losses: mse_loss, l1_loss, smooth_l1_loss, huber_loss, nll_loss, cross_entropy (class
indices or probabilities, label smoothing), binary_cross_entropy(_with_logits), kl_div.

Each has PyTorch's arguments, defaults and graph: one node for the losses PyTorch computes in
one kernel (MseLossBackward0, NllLossBackward0, BinaryCrossEntropyBackward0, ...), the same ops
as PyTorch's Python code for its composites (l1_loss, kl_div).
"""
from __future__ import annotations

import warnings

import numpy as np

from llgrad.runtime import ops
from llgrad.runtime.tensor import Tensor

__all__ = ["mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss", "nll_loss", "cross_entropy",
           "binary_cross_entropy", "binary_cross_entropy_with_logits", "kl_div"]

_REDUCTIONS = ("none", "mean", "sum")


def _legacy(size_average, reduce, reduction: str) -> str:
    """PyTorch's deprecated size_average/reduce arguments, mapped to `reduction`."""
    if size_average is None and reduce is None:
        return reduction
    warnings.warn("size_average and reduce args will be deprecated, please use "
                  "reduction='{}' instead.", stacklevel=3)
    size_average = True if size_average is None else size_average
    reduce = True if reduce is None else reduce
    return ("mean" if size_average else "sum") if reduce else "none"


def _reduce(loss: Tensor, reduction: str) -> Tensor:
    if reduction == "mean":
        return ops.mean(loss)
    if reduction == "sum":
        return ops.sum(loss)
    if reduction == "none":
        return loss
    raise ValueError(f"{reduction} is not a valid value for reduction")


def mse_loss(input: Tensor, target: Tensor, size_average=None, reduce=None,
             reduction: str = "mean") -> Tensor:
    """(input - target)**2, reduced by 'mean' (default), 'sum' or 'none'; one
    `MseLossBackward0` node, as in PyTorch."""
    reduction = _legacy(size_average, reduce, reduction)
    if tuple(input.shape) != tuple(target.shape):
        warnings.warn(f"Using a target size ({list(target.shape)}) that is different to the "
                      f"input size ({list(input.shape)}). This will likely lead to incorrect "
                      "results due to broadcasting. Please ensure they have the same size.",
                      stacklevel=2)
    if reduction not in _REDUCTIONS:
        raise ValueError(f"{reduction} is not a valid value for reduction")
    return ops.mse_loss(input, target, reduction)  # one MseLossBackward0 node, as PyTorch


def nll_loss(input: Tensor, target: Tensor, weight: Tensor | None = None, size_average=None,
             ignore_index: int = -100, reduce=None, reduction: str = "mean") -> Tensor:
    """Negative log likelihood of class indices `target` (int64) under log-probabilities
    `input` of shape (N, C), (C,) or (N, C, d1, ...).

    With 'mean' the sum is divided by the total weight of the non-ignored targets. One
    `NllLossBackward0` node, as in PyTorch (cross_entropy's grad_fn, over LogSoftmaxBackward0).
    """
    reduction = _legacy(size_average, reduce, reduction)
    if reduction not in _REDUCTIONS:
        raise ValueError(f"{reduction} is not a valid value for reduction")
    t = np.asarray(target._data if isinstance(target, Tensor) else target)
    if t.dtype.kind not in "iu":
        raise RuntimeError(f"expected scalar type Long but found {Tensor._wrap(t).dtype} "
                           "(class-index targets must be int64; for class probabilities pass "
                           "a float target of the input's shape to cross_entropy)")
    want = (input.shape[0],) + tuple(input.shape[2:]) if input.ndim > 1 else ()
    if t.shape != want:
        raise ValueError(f"Expected target of shape {list(want)} for input of shape "
                         f"{list(input.shape)}, got {list(t.shape)}")
    c = input.shape[1] if input.ndim > 1 else input.shape[0]
    t = t.reshape(-1)
    keep = t != ignore_index
    bad = t[keep & ((t < 0) | (t >= c))]
    if bad.size:
        raise IndexError(f"Target {int(bad[0])} is out of bounds (number of classes is {c}).")
    safe = np.where(keep, t, 0)
    w = np.asarray(keep, input._np_dtype)
    if weight is not None:
        w = w * np.asarray(weight._data if isinstance(weight, Tensor) else weight)[safe]
        w = w.astype(input._np_dtype)
    # One NllLossBackward0 node, as PyTorch (the rows of the classes-last input, their classes
    # and weights; 'mean' divides by the weights' sum).
    return ops.nll_loss(input, safe, w, reduction, float(w.sum()))


def cross_entropy(input: Tensor, target: Tensor, weight: Tensor | None = None,
                  size_average=None, ignore_index: int = -100, reduce=None,
                  reduction: str = "mean", label_smoothing: float = 0.0) -> Tensor:
    """log_softmax over the class dimension (1, or 0 for an unbatched input) followed by
    nll_loss; a float `target` of the input's shape is read as class probabilities.

    Example:
        >>> import llgrad as lg
        >>> x = lg.tensor([[2.0, 0.0], [0.0, 2.0]])
        >>> lg.nn.functional.cross_entropy(x, lg.tensor([0, 1]))
        tensor(0.1269)
    """
    reduction = _legacy(size_average, reduce, reduction)
    if not 0.0 <= label_smoothing <= 1.0:
        raise ValueError(f"label_smoothing must be between 0.0 and 1.0. Got: {label_smoothing}")
    cdim = 0 if input.ndim == 1 else 1
    logp = ops.log_softmax(input, cdim)
    c = input.shape[cdim]
    wshape = [1] * input.ndim
    wshape[cdim] = c
    w = None if weight is None else np.asarray(
        weight._data if isinstance(weight, Tensor) else weight, input._np_dtype).reshape(wshape)
    tdata = target._data if isinstance(target, Tensor) else np.asarray(target)
    if tdata.dtype.kind == "f" and tuple(tdata.shape) == tuple(input.shape):  # probabilities
        if label_smoothing:
            target = ops.add(ops.mul(target, 1.0 - label_smoothing), label_smoothing / c)
        prod = ops.mul(logp, target)
        if w is not None:
            prod = ops.mul(prod, w)
        loss = ops.neg(ops.sum(prod, cdim))
        if reduction == "mean":
            return ops.div(ops.sum(loss), float(loss.numel() if input.ndim > 1 else 1))
        return _reduce(loss, reduction)
    nll = nll_loss(logp, target, weight, ignore_index=ignore_index, reduction=reduction)
    if not label_smoothing:
        return nll
    # See PyTorch's cross_entropy: the smoothing term is -sum_c w_c logp_c / C per sample.
    keep = np.asarray(tdata != ignore_index, input._np_dtype)
    smooth = logp if w is None else ops.mul(logp, w)
    smooth = ops.mul(ops.neg(ops.sum(smooth, cdim)), keep)
    if reduction == "mean":
        if w is None:
            smooth = ops.div(ops.sum(smooth), float(keep.sum()))
        else:
            safe = np.where(tdata != ignore_index, tdata, 0)
            denom = float((w.reshape(-1)[safe] * keep).sum())
            smooth = ops.div(ops.sum(smooth), denom)
    elif reduction == "sum":
        smooth = ops.sum(smooth)
    return ops.add(ops.mul(nll, 1.0 - label_smoothing), ops.mul(smooth, label_smoothing / c))


def _check_reduction(reduction: str) -> None:
    if reduction not in _REDUCTIONS:
        raise ValueError(f"{reduction} is not a valid value for reduction")


def _same_size(input: Tensor, target) -> None:
    if tuple(np.shape(target)) != tuple(input.shape):
        warnings.warn(f"Using a target size ({list(np.shape(target))}) that is different to the "
                      f"input size ({list(input.shape)}). This will likely lead to incorrect "
                      "results due to broadcasting. Please ensure they have the same size.",
                      stacklevel=3)


def l1_loss(input: Tensor, target: Tensor, size_average=None, reduce=None,
            reduction: str = "mean") -> Tensor:
    """|input - target|, reduced (AbsBackward0 / MeanBackward0, as PyTorch)."""
    reduction = _legacy(size_average, reduce, reduction)
    _check_reduction(reduction)
    _same_size(input, target)
    return _reduce(ops.abs(ops.sub(input, target)), reduction)


def smooth_l1_loss(input: Tensor, target: Tensor, size_average=None, reduce=None,
                   reduction: str = "mean", beta: float = 1.0) -> Tensor:
    """0.5 d^2 / beta where |d| < beta, else |d| - 0.5 beta, for d = input - target."""
    reduction = _legacy(size_average, reduce, reduction)
    _check_reduction(reduction)
    if beta < 0:
        raise RuntimeError("smooth_l1_loss does not support negative values for beta.")
    _same_size(input, target)
    if beta == 0.0:  # PyTorch computes l1_loss then
        return l1_loss(input, target, reduction=reduction)
    return ops.smooth_l1_loss(input, target, reduction, beta)


def huber_loss(input: Tensor, target: Tensor, reduction: str = "mean",
               delta: float = 1.0) -> Tensor:
    """0.5 d^2 where |d| < delta, else delta (|d| - 0.5 delta), for d = input - target."""
    _check_reduction(reduction)
    if delta <= 0:
        raise RuntimeError("huber_loss does not support non-positive values for delta.")
    _same_size(input, target)
    return ops.huber_loss(input, target, reduction, delta)


def _constant(w, dtype):
    """A weight argument as a constant array (it gets no gradient), or None."""
    if w is None:
        return None
    return np.asarray(w._data if isinstance(w, Tensor) else w, dtype)


def binary_cross_entropy(input: Tensor, target: Tensor, weight: Tensor | None = None,
                         size_average=None, reduce=None, reduction: str = "mean") -> Tensor:
    """-weight (target log(input) + (1 - target) log(1 - input)), each log clamped at
    -100, for probabilities `input` in [0, 1]. `weight` gets no gradient."""
    reduction = _legacy(size_average, reduce, reduction)
    _check_reduction(reduction)
    if tuple(np.shape(target)) != tuple(input.shape):
        raise ValueError(f"Using a target size ({list(np.shape(target))}) that is different "
                         f"to the input size ({list(input.shape)}) is deprecated. Please "
                         "ensure they have the same size.")
    x = input._data
    if np.any((x < 0) | (x > 1)):
        raise RuntimeError("all elements of input should be between 0 and 1")
    return ops.binary_cross_entropy(input, target, _constant(weight, x.dtype), reduction)


def binary_cross_entropy_with_logits(input: Tensor, target: Tensor,
                                     weight: Tensor | None = None, size_average=None,
                                     reduce=None, reduction: str = "mean",
                                     pos_weight: Tensor | None = None) -> Tensor:
    """binary_cross_entropy(sigmoid(input), target), computed stably from the logits;
    pos_weight (per class, broadcast over the last dimension) weights the positive term.
    `weight` and `pos_weight` get no gradient."""
    reduction = _legacy(size_average, reduce, reduction)
    _check_reduction(reduction)
    if tuple(np.shape(target)) != tuple(input.shape):
        raise ValueError(f"Target size ({list(np.shape(target))}) must be the same as input "
                         f"size ({list(input.shape)})")
    dt = input._np_dtype
    return ops.binary_cross_entropy_with_logits(input, target, _constant(weight, dt),
                                                _constant(pos_weight, dt), reduction)


def kl_div(input: Tensor, target: Tensor, size_average=None, reduce=None,
           reduction: str = "mean", log_target: bool = False) -> Tensor:
    """KL(target || exp(input)) per element: target (log target - input), or with
    log_target=True exp(target) (target - input); reduction 'batchmean' divides the sum by
    the batch size (the KL divergence's definition), 'mean' by the number of elements."""
    reduction = _legacy(size_average, reduce, reduction)
    if reduction not in _REDUCTIONS + ("batchmean",):
        raise ValueError(f"{reduction} is not a valid value for reduction")
    if reduction == "mean":
        warnings.warn("reduction: 'mean' divides the total loss by both the batch size and the "
                      "support size.'batchmean' divides only by the batch size, and aligns with "
                      "the KL div math definition.'mean' will be changed to behave the same as "
                      "'batchmean' in the next major release.", stacklevel=2)
    if log_target:
        loss = ops.mul(ops.exp(target), ops.sub(target, input))
    else:
        loss = ops.sub(ops.xlogy(target, target), ops.mul(target, input))
    if reduction == "batchmean":
        return ops.div(ops.sum(loss), input.shape[0] if input.ndim else 1)
    return _reduce(loss, reduction)
