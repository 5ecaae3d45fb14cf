"""`llgrad.nn.utils`: gradient clipping (clip_grad_norm_, clip_grad_value_) and flattening
parameters to one vector and back, with PyTorch's arithmetic (so clipped gradients round as
PyTorch's do).
"""
from __future__ import annotations

import math

import numpy as np

from llgrad.runtime import ops
from llgrad.runtime.autograd.grad_mode import no_grad
from llgrad.runtime.tensor import Tensor

__all__ = ["clip_grad_norm_", "clip_grad_value_", "get_total_norm", "parameters_to_vector",
           "vector_to_parameters"]


def _grads(parameters) -> list:
    if isinstance(parameters, Tensor):
        parameters = [parameters]
    return [p.grad for p in parameters if p.grad is not None]


def get_total_norm(tensors, norm_type: float = 2.0, error_if_nonfinite: bool = False,
                   foreach=None) -> Tensor:
    """The norm of the norms of `tensors` (the norm of their concatenation)."""
    tensors = [tensors] if isinstance(tensors, Tensor) else list(tensors)
    norm_type = float(norm_type)
    if not tensors:
        return Tensor._wrap(np.zeros((), np.float32))
    with no_grad():
        norms = [ops.vector_norm(t, norm_type) for t in tensors]
        total = ops.vector_norm(ops.stack(norms), norm_type)
    if error_if_nonfinite and not math.isfinite(total.item()):
        raise RuntimeError(f"The total norm of order {norm_type} for gradients from "
                           "`parameters` is non-finite, so it cannot be clipped. To disable "
                           "this error and scale the gradients by the non-finite norm anyway, "
                           "set `error_if_nonfinite=False`")
    return total


def clip_grad_norm_(parameters, max_norm: float, norm_type: float = 2.0,
                    error_if_nonfinite: bool = False, foreach=None) -> Tensor:
    """Scale the gradients of `parameters` in place so that their total norm (the norm of
    all of them together) is at most `max_norm`; returns the total norm before clipping.

    As PyTorch: the scale is min(max_norm / (total + 1e-6), 1), applied to every gradient.

    Example:
        >>> import llgrad as lg
        >>> w = lg.tensor([3.0, 4.0], requires_grad=True)
        >>> (w * w).sum().backward()
        >>> lg.nn.utils.clip_grad_norm_([w], 1.0)
        tensor(10.)
    """
    grads = _grads(parameters)
    total = get_total_norm(grads, norm_type, error_if_nonfinite)
    if grads:
        with no_grad():
            coef = ops.clip(ops.div(float(max_norm), ops.add(total, 1e-6)), None, 1.0)
            for g in grads:
                g.mul_(coef)
    return total


def clip_grad_value_(parameters, clip_value: float, foreach=None) -> None:
    """Clamp every gradient of `parameters` into [-clip_value, clip_value], in place."""
    clip_value = float(clip_value)
    with no_grad():
        for g in _grads(parameters):
            g.clamp_(-clip_value, clip_value)


def parameters_to_vector(parameters) -> Tensor:
    """The parameters flattened and concatenated into one vector."""
    return ops.concatenate([ops.reshape(p, (-1,)) for p in parameters])


def vector_to_parameters(vec: Tensor, parameters) -> None:
    """Make consecutive slices of `vec` the parameters' data (views of vec, as PyTorch)."""
    if not isinstance(vec, Tensor):
        raise TypeError(f"expected Tensor, but got: {type(vec).__name__}")
    start = 0
    for p in parameters:
        n = p.numel()
        p.data = Tensor._wrap(vec._data[start:start + n].reshape(p.shape))
        start += n
