"""Convolutions and pooling: conv1d, conv2d, conv_transpose1d, conv_transpose2d, max_pool1d,
max_pool2d, avg_pool1d, avg_pool2d, adaptive_avg_pool1d, adaptive_avg_pool2d (PyTorch's
argument names, defaults and output sizes).

Inputs are batched (N, C, [H,] W) or unbatched (C, [H,] W). The work is done by the
primitives of runtime/ops/conv.py and runtime/ops/pool.py (ConvolutionBackward0,
MaxPool2DWithIndicesBackward0, AvgPool2DBackward0, AdaptiveAvgPool2DBackward0); 1-d pools
run the 2-d ones on a height of 1, as PyTorch does.
"""
from __future__ import annotations

import numpy as np

from llgrad.runtime import ops
from llgrad.runtime.errors import DTypeError
from llgrad.runtime.ops import pool
from llgrad.runtime.prim import bind
from llgrad.runtime.tensor import Tensor

__all__ = ["conv1d", "conv2d", "conv_transpose1d", "conv_transpose2d", "max_pool1d",
           "max_pool2d", "avg_pool1d", "avg_pool2d", "adaptive_avg_pool1d",
           "adaptive_avg_pool2d"]


def _ntuple(v, k: int, what: str = "kernel_size") -> tuple:
    if isinstance(v, (int, np.integer)):
        return (int(v),) * k
    v = tuple(int(e) for e in v)
    if len(v) == 1:
        return v * k
    if len(v) != k:
        raise ValueError(f"{what} must be an int or a tuple of {k} ints, got {v}")
    return v


def _batched(input: Tensor, k: int, what: str):
    """(input with a batch dimension, whether one was added)."""
    if input.ndim == k + 1:
        return ops.unsqueeze(input, 0), True
    if input.ndim != k + 2:
        raise ValueError(f"{what}: expected a {k + 1}-d (unbatched) or {k + 2}-d (batched) "
                         f"input, got shape {list(input.shape)}")
    return input, False


def _unbatch(out: Tensor, added: bool) -> Tensor:
    return ops.squeeze(out, 0) if added else out


def _conv_padding(padding, k, kernel, stride, dilation):
    if not isinstance(padding, str):
        return padding
    if padding == "valid":
        return 0
    if padding != "same":
        raise ValueError(f"Invalid padding string {padding!r}, should be one of "
                         "{'valid', 'same'}")
    if any(s != 1 for s in _ntuple(stride, k, "stride")):
        raise ValueError("padding='same' is not supported for strided convolutions")
    total = [d * (n - 1) for d, n in zip(_ntuple(dilation, k, "dilation"), kernel)]
    return tuple((t // 2, t - t // 2) for t in total)


def _conv(input, weight, bias, stride, padding, dilation, groups, k, name):
    for t, what in ((weight, "weight"), (bias, "bias")):
        if t is not None and t.dtype != input.dtype:
            raise DTypeError(f"{name}: input type ({input.dtype}) and {what} type ({t.dtype}) "
                             "should be the same", fix="convert the input with .to(weight.dtype)")
    x, added = _batched(input, k, name)
    padding = _conv_padding(padding, k, weight.shape[2:], stride, dilation)
    return _unbatch(ops.conv(x, weight, bias, stride, padding, dilation, groups), added)


def conv1d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride=1, padding=0,
           dilation=1, groups: int = 1) -> Tensor:
    """1-d cross-correlation: input (N, C_in, L), weight (C_out, C_in/groups, kL); padding
    may be an int, a 1-tuple, 'valid' or 'same'."""
    return _conv(input, weight, bias, stride, padding, dilation, groups, 1, "conv1d")


def conv2d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride=1, padding=0,
           dilation=1, groups: int = 1) -> Tensor:
    """2-d cross-correlation: input (N, C_in, H, W), weight (C_out, C_in/groups, kH, kW);
    padding may be an int, a pair, 'valid' or 'same' (even kernels pad more after).

    Example:
        >>> import llgrad as lg
        >>> lg.nn.functional.conv2d(lg.ones(1, 1, 3, 3), lg.ones(1, 1, 2, 2))
        tensor([[[[4., 4.],
                  [4., 4.]]]])
    """
    return _conv(input, weight, bias, stride, padding, dilation, groups, 2, "conv2d")


def _conv_transpose(input, weight, bias, stride, padding, output_padding, groups, dilation, k,
                    name):
    x, added = _batched(input, k, name)
    stride_t, pad_t = _ntuple(stride, k, "stride"), _ntuple(padding, k, "padding")
    dil_t, extra = _ntuple(dilation, k, "dilation"), _ntuple(output_padding, k, "output_padding")
    if any(e >= max(s, d) for e, s, d in zip(extra, stride_t, dil_t)):
        raise ValueError(f"{name}: output padding must be smaller than either stride or "
                         f"dilation, got output_padding={extra}, stride={stride_t}, "
                         f"dilation={dil_t}")
    size = tuple((n - 1) * s - 2 * p + d * (kk - 1) + e + 1 for n, s, p, d, kk, e in zip(
        x.shape[2:], stride_t, pad_t, dil_t, weight.shape[2:], extra))
    out = ops.conv_transpose(x, weight, stride_t, pad_t, dil_t, groups, size)
    if bias is not None:
        out = ops.add(out, ops.reshape(bias, (-1,) + (1,) * k))
    return _unbatch(out, added)


def conv_transpose1d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride=1,
                     padding=0, output_padding=0, groups: int = 1, dilation=1) -> Tensor:
    """The transpose of conv1d: weight (C_in, C_out/groups, kL)."""
    return _conv_transpose(input, weight, bias, stride, padding, output_padding, groups,
                           dilation, 1, "conv_transpose1d")


def conv_transpose2d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride=1,
                     padding=0, output_padding=0, groups: int = 1, dilation=1) -> Tensor:
    """The transpose of conv2d (its gradient with respect to the input): weight (C_in,
    C_out/groups, kH, kW); output (H-1)*stride - 2*padding + dilation*(kH-1) +
    output_padding + 1 high (likewise wide)."""
    return _conv_transpose(input, weight, bias, stride, padding, output_padding, groups,
                           dilation, 2, "conv_transpose2d")


# ---- pooling ------------------------------------------------------------------------------------
def _pool_params(kernel_size, stride, padding, dilation, ceil_mode):
    kernel = _ntuple(kernel_size, 2)
    stride = kernel if stride is None or (not isinstance(stride, int) and len(stride) == 0) \
        else _ntuple(stride, 2, "stride")
    return dict(kernel=kernel, stride=stride, padding=_ntuple(padding, 2, "padding"),
                dilation=_ntuple(dilation, 2, "dilation"), ceil_mode=bool(ceil_mode))


def max_pool2d(input: Tensor, kernel_size, stride=None, padding=0, dilation=1,
               ceil_mode: bool = False, return_indices: bool = False):
    """The maximum over each kH x kW window (padding counts as -inf); with
    return_indices=True also the int64 flat indices into H*W of the maxima."""
    x, added = _batched(input, 2, "max_pool2d")
    params = _pool_params(kernel_size, stride, padding, dilation, ceil_mode)
    out = _unbatch(bind(pool.max_pool2d_p, x, **params), added)
    if not return_indices:
        return out
    return out, _unbatch(bind(pool.max_pool2d_indices_p, x, **params), added)


def _pool1d(fn, input, kernel_size, stride, padding, *args, **kwargs):
    """A 1-d pool as the 2-d one over (..., 1, L), as PyTorch computes it."""
    def row(v):
        return (1,) + _ntuple(v, 1)
    stride = None if stride is None or (not isinstance(stride, int) and len(stride) == 0) \
        else row(stride)
    out = fn(ops.unsqueeze(input, -2), row(kernel_size), stride, (0,) + _ntuple(padding, 1),
             *args, **kwargs)
    if isinstance(out, tuple):
        return tuple(ops.squeeze(o, -2) for o in out)
    return ops.squeeze(out, -2)


def max_pool1d(input: Tensor, kernel_size, stride=None, padding=0, dilation=1,
               ceil_mode: bool = False, return_indices: bool = False):
    """max_pool2d over windows of one row: input (N, C, L) or (C, L)."""
    return _pool1d(max_pool2d, input, kernel_size, stride, padding, (1,) + _ntuple(dilation, 1),
                   ceil_mode, return_indices)


def avg_pool2d(input: Tensor, kernel_size, stride=None, padding=0, ceil_mode: bool = False,
               count_include_pad: bool = True, divisor_override=None) -> Tensor:
    """The mean over each kH x kW window; padding is zeros and counts towards the divisor
    unless count_include_pad=False; divisor_override replaces the divisor."""
    x, added = _batched(input, 2, "avg_pool2d")
    params = _pool_params(kernel_size, stride, padding, 1, ceil_mode)
    del params["dilation"]
    if divisor_override is not None and divisor_override == 0:
        raise RuntimeError("divisor must be not zero")
    out = bind(pool.avg_pool2d_p, x, count_include_pad=bool(count_include_pad),
               divisor_override=divisor_override, **params)
    return _unbatch(out, added)


def avg_pool1d(input: Tensor, kernel_size, stride=None, padding=0, ceil_mode: bool = False,
               count_include_pad: bool = True) -> Tensor:
    """avg_pool2d over windows of one row: input (N, C, L) or (C, L)."""
    return _pool1d(avg_pool2d, input, kernel_size, stride, padding, ceil_mode,
                   count_include_pad)


def _adaptive_size(output_size, shape):
    size = _ntuple(output_size, 2, "output_size") if not (
        isinstance(output_size, (tuple, list)) and None in output_size) else tuple(
        shape[i] if s is None else int(s) for i, s in enumerate(output_size))
    return size


def adaptive_avg_pool2d(input: Tensor, output_size) -> Tensor:
    """Averages over output_size (OH, OW) windows that tile the input: window i spans
    [floor(i*H/OH), ceil((i+1)*H/OH)); None keeps that dimension's size."""
    x, added = _batched(input, 2, "adaptive_avg_pool2d")
    size = _adaptive_size(output_size, x.shape[2:])
    if size == (1, 1):  # PyTorch's special case: a mean (MeanBackward1)
        return _unbatch(ops.mean(x, (-2, -1), keepdim=True), added)
    return _unbatch(bind(pool.adaptive_avg_pool2d_p, x, size=size), added)


def adaptive_avg_pool1d(input: Tensor, output_size) -> Tensor:
    """adaptive_avg_pool2d over one row: input (N, C, L) or (C, L)."""
    size = output_size if isinstance(output_size, (int, np.integer)) else output_size[0]
    return ops.squeeze(adaptive_avg_pool2d(ops.unsqueeze(input, -2), (1, size)), -2)
