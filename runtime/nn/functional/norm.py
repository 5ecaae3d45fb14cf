"""Normalisation: batch_norm (updating running statistics in training, as PyTorch's),
layer_norm, group_norm, normalize.

The primitives (runtime/ops/normalization.py) normalise with biased statistics; the running
variance is updated with the unbiased one, n / (n - 1) times larger, as in PyTorch.
"""
from __future__ import annotations

import numpy as np

from llgrad.runtime import ops
from llgrad.runtime.autograd.grad_mode import no_grad
from llgrad.runtime.ops.normalization import batch_norm_p, group_norm_p, layer_norm_p
from llgrad.runtime.prim import bind
from llgrad.runtime.tensor import Tensor

__all__ = ["batch_norm", "layer_norm", "group_norm", "normalize"]


def _affine(t: Tensor | None, dtype, fill: float):
    """The weight or bias operand: the tensor, or a 0-d constant meaning none."""
    return np.asarray(fill, dtype) if t is None else t


def batch_norm(input: Tensor, running_mean: Tensor | None, running_var: Tensor | None,
               weight: Tensor | None = None, bias: Tensor | None = None,
               training: bool = False, momentum: float = 0.1, eps: float = 1e-5) -> Tensor:
    """Normalise each channel (dimension 1) of an (N, C, ...) input by its mean and variance:
    the batch's in training (and then, given running_mean/var, move those towards the batch's
    by `momentum`, in place), the running ones otherwise; then scale by weight, add bias."""
    dt = input._np_dtype
    if training:
        nd = len(input.shape)
        axes = (0,) + tuple(range(2, nd))
        n = int(np.prod(input.shape)) // input.shape[1] if nd > 1 else 0
        if n <= 1:
            raise ValueError(f"Expected more than 1 value per channel when training, got "
                             f"input size {list(input.shape)}")
        if not isinstance(input, Tensor):  # traced (compiled code): statistics as ops
            if running_mean is not None or running_var is not None:
                raise NotImplementedError(
                    "batch_norm in compiled code cannot update running statistics in place: "
                    "pass running_mean=None and running_var=None there")
            mean, var = ops.mean(input, axes), ops.var(input, axes, correction=0)
            return bind(batch_norm_p, input, _affine(weight, dt, 1.0), _affine(bias, dt, 0.0),
                        mean, var, eps=float(eps), training=True)
        mean, var = input._data.mean(axes), input._data.var(axes)
        with no_grad():
            if running_mean is not None:
                running_mean.mul_(1 - momentum).add_(Tensor._wrap(mean), alpha=momentum)
            if running_var is not None:
                running_var.mul_(1 - momentum).add_(Tensor._wrap(var * (n / (n - 1))),
                                                    alpha=momentum)
    else:
        if running_mean is None or running_var is None:
            raise RuntimeError("running_mean and running_var must be defined in evaluation "
                               "mode (pass training=True to normalise by the batch)")
        mean, var = running_mean._data.copy(), running_var._data.copy()
    return bind(batch_norm_p, input, _affine(weight, dt, 1.0), _affine(bias, dt, 0.0), mean, var,
                eps=float(eps), training=bool(training))


def layer_norm(input: Tensor, normalized_shape, weight: Tensor | None = None,
               bias: Tensor | None = None, eps: float = 1e-5) -> Tensor:
    """Normalise over the last len(normalized_shape) dimensions (which must equal
    normalized_shape), then scale by weight and add bias (both of normalized_shape)."""
    shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
    if tuple(input.shape[input.ndim - len(shape):]) != shape:
        raise RuntimeError(f"Given normalized_shape={list(shape)}, expected input with shape "
                           f"[*, {', '.join(map(str, shape))}], but got input of size "
                           f"{list(input.shape)}")
    dt = input._np_dtype
    return bind(layer_norm_p, input, _affine(weight, dt, 1.0), _affine(bias, dt, 0.0),
                nd=len(shape), eps=float(eps))


def group_norm(input: Tensor, num_groups: int, weight: Tensor | None = None,
               bias: Tensor | None = None, eps: float = 1e-5) -> Tensor:
    """Normalise each sample over each group of C/num_groups channels (and all positions),
    then scale and shift per channel."""
    if input.ndim < 2 or input.shape[1] % num_groups:
        raise RuntimeError(f"Expected number of channels in input to be divisible by "
                           f"num_groups, but got input of shape {list(input.shape)} and "
                           f"num_groups={num_groups}")
    dt = input._np_dtype
    return bind(group_norm_p, input, _affine(weight, dt, 1.0), _affine(bias, dt, 0.0),
                groups=int(num_groups), eps=float(eps))


def normalize(input: Tensor, p: float = 2.0, dim: int = 1, eps: float = 1e-12) -> Tensor:
    """input / max(||input||_p over dim, eps)."""
    norm = ops.vector_norm(input, p, dim, keepdim=True)
    return ops.div(input, ops.maximum(norm, eps))
