"""`llgrad.nn.functional`: stateless layers and losses (relu, softmax, dropout, avg_pool2d,
mse_loss, cross_entropy, ...), written with the ops API so they differentiate like any op.

Constants built from non-differentiable data (dropout masks, class-index selections) enter
the graph as numpy arrays, so they get no edge in `next_functions`.
"""
from __future__ import annotations

import warnings

import numpy as np

from llgrad.runtime import ops
from llgrad.runtime import torch_shape as _ts
from llgrad.runtime.creation import _rng
from llgrad.runtime.tensor import Tensor

_REDUCTIONS = ("none", "mean", "sum")


# -- activations -------------------------------------------------------------------------------
def relu(input: Tensor, inplace: bool = False) -> Tensor:
    """max(input, 0) elementwise."""
    return input.relu_() if inplace else ops.relu(input)


def sigmoid(input: Tensor) -> Tensor:
    return ops.sigmoid(input)


def tanh(input: Tensor) -> Tensor:
    return ops.tanh(input)


def leaky_relu(input: Tensor, negative_slope: float = 0.01, inplace: bool = False) -> Tensor:
    out = ops.where(ops.gt(input, 0), input, ops.mul(input, negative_slope))
    return input.copy_(out) if inplace else out


def _softmax_dim(name: str, ndim: int, dim):
    if dim is not None:
        return dim
    warnings.warn(f"Implicit dimension choice for {name} has been deprecated. Change the call "
                  "to include dim=X as an argument.", stacklevel=3)
    return 0 if ndim in (0, 1, 3) else 1


def softmax(input: Tensor, dim=None, dtype=None) -> Tensor:
    """exp(x) / sum(exp(x)) along `dim` (computed stably)."""
    if dtype is not None:
        input = ops.astype(input, dtype)
    return ops.softmax(input, _softmax_dim("softmax", input.ndim, dim))


def log_softmax(input: Tensor, dim=None, dtype=None) -> Tensor:
    """x - logsumexp(x) along `dim`."""
    if dtype is not None:
        input = ops.astype(input, dtype)
    return ops.log_softmax(input, _softmax_dim("log_softmax", input.ndim, dim))


def linear(input: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """input @ weight.T + bias (one AddmmBackward0 node, as PyTorch: torch_shape.linear)."""
    return _ts.linear(input, weight, bias)


# -- dropout -----------------------------------------------------------------------------------
def dropout(input: Tensor, p: float = 0.5, training: bool = True, inplace: bool = False) -> Tensor:
    """Zero each element with probability `p` and scale the rest by 1/(1-p), in training only.

    The mask is drawn from llgrad's global generator (`llgrad.manual_seed`). Whether a graph is
    recorded is decided by grad mode, not by `training`.
    """
    if p < 0.0 or p > 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    if not training or p == 0.0:
        return input
    dt = input._np_dtype
    if p == 1.0:
        mask = np.zeros(input.shape, dt)
    else:
        mask = (_rng().random(input.shape) >= p).astype(dt) * np.asarray(1.0 / (1.0 - p), dt)
    out = ops.mul(input, mask)
    return input.copy_(out) if inplace else out


def pad(input: Tensor, pad, mode: str = "constant", value=None) -> Tensor:
    """Pad `input`: `pad` lists (left, right) pairs from the LAST dimension backwards, as
    PyTorch's F.pad; modes 'constant' (with `value`), 'reflect', 'replicate', 'circular'."""
    return ops.torch_pad(input, pad, mode, value)


# -- pooling -----------------------------------------------------------------------------------
def _pair(v) -> tuple[int, int]:
    return (int(v), int(v)) if isinstance(v, (int, np.integer)) else (int(v[0]), int(v[1]))


def _zero_pad(x: Tensor, ph: int, pw: int) -> Tensor:
    n, c, h, w = x.shape
    if ph:
        z = np.zeros((n, c, ph, w), x._np_dtype)
        x = ops.concatenate([z, x, z], 2)
    if pw:
        z = np.zeros((n, c, h + 2 * ph, pw), x._np_dtype)
        x = ops.concatenate([z, x, z], 3)
    return x


def avg_pool2d(input: Tensor, kernel_size, stride=None, padding=0, ceil_mode: bool = False,
               count_include_pad: bool = True, divisor_override=None) -> Tensor:
    """Average over kH x kW windows of an (N, C, H, W) or (C, H, W) input.

    Padding is zeros and counts towards the divisor (count_include_pad=True); ceil_mode is
    not supported. Non-overlapping windows that tile the input use one reshape and mean;
    other strides sum kH*kW strided slices.
    """
    if ceil_mode or not count_include_pad:
        raise NotImplementedError("avg_pool2d: only ceil_mode=False, count_include_pad=True "
                                  "are supported")
    if input.ndim not in (3, 4):
        raise ValueError(f"avg_pool2d: expected a 3D or 4D input (C, H, W) or (N, C, H, W), "
                         f"got shape {list(input.shape)}")
    squeeze = input.ndim == 3
    x = ops.unsqueeze(input, 0) if squeeze else input
    kh, kw = _pair(kernel_size)
    sh, sw = _pair(kernel_size if stride is None or stride == [] else stride)
    ph, pw = _pair(padding)
    if ph > kh // 2 or pw > kw // 2:
        raise ValueError(f"pad should be at most half of effective kernel size, but got "
                         f"pad={padding}, kernel_size={kernel_size}")
    x = _zero_pad(x, ph, pw)
    n, c, h, w = x.shape
    oh, ow = (h - kh) // sh + 1, (w - kw) // sw + 1
    if oh <= 0 or ow <= 0:
        raise ValueError(f"avg_pool2d: output size is too small (input {list(input.shape)}, "
                         f"kernel {kh}x{kw})")
    div = float(divisor_override or kh * kw)
    if (kh, kw) == (sh, sw) and h == oh * kh and w == ow * kw:
        out = ops.div(ops.sum(ops.reshape(x, (n, c, oh, kh, ow, kw)), (3, 5)), div)
    else:
        out = None
        for i in range(kh):
            for j in range(kw):
                win = x[:, :, i:i + sh * (oh - 1) + 1:sh, j:j + sw * (ow - 1) + 1:sw]
                out = win if out is None else ops.add(out, win)
        out = ops.div(out, div)
    return ops.squeeze(out, 0) if squeeze else out


# -- losses ------------------------------------------------------------------------------------
def _reduce(loss: Tensor, reduction: str) -> Tensor:
    if reduction == "mean":
        return ops.mean(loss)
    if reduction == "sum":
        return ops.sum(loss)
    if reduction == "none":
        return loss
    raise ValueError(f"{reduction} is not a valid value for reduction")


def mse_loss(input: Tensor, target: Tensor, reduction: str = "mean") -> Tensor:
    """(input - target)**2, reduced by 'mean' (default), 'sum' or 'none'; one
    `MseLossBackward0` node, as in PyTorch."""
    if tuple(input.shape) != tuple(target.shape):
        warnings.warn(f"Using a target size ({list(target.shape)}) that is different to the "
                      f"input size ({list(input.shape)}). This will likely lead to incorrect "
                      "results due to broadcasting. Please ensure they have the same size.",
                      stacklevel=2)
    if reduction not in _REDUCTIONS:
        raise ValueError(f"{reduction} is not a valid value for reduction")
    return ops.mse_loss(input, target, reduction)  # one MseLossBackward0 node, as PyTorch


def nll_loss(input: Tensor, target: Tensor, weight: Tensor | None = None,
             ignore_index: int = -100, reduction: str = "mean") -> Tensor:
    """Negative log likelihood of class indices `target` (int64) under log-probabilities
    `input` of shape (N, C), (C,) or (N, C, d1, ...).

    With 'mean' the sum is divided by the total weight of the non-ignored targets. One
    `NllLossBackward0` node, as in PyTorch (cross_entropy's grad_fn, over LogSoftmaxBackward0).
    """
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
                  ignore_index: int = -100, reduction: str = "mean",
                  label_smoothing: float = 0.0) -> Tensor:
    """log_softmax over the class dimension (1, or 0 for an unbatched input) followed by
    nll_loss; a float `target` of the input's shape is read as class probabilities.

    Example:
        >>> import llgrad as lg
        >>> x = lg.tensor([[2.0, 0.0], [0.0, 2.0]])
        >>> lg.nn.functional.cross_entropy(x, lg.tensor([0, 1]))
        tensor(0.1269)
    """
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
    nll = nll_loss(logp, target, weight, ignore_index, reduction)
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
