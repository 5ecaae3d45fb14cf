"""linear, dropout, pad, embedding and one_hot (PyTorch's argument names and defaults).

Constants built from non-differentiable data (dropout masks, index arrays) enter the graph as
numpy arrays, so they get no edge in `next_functions`.
"""
from __future__ import annotations

import numpy as np

from llgrad.runtime import ops
from llgrad.runtime import torch_shape as _ts
from llgrad.runtime.creation import _rng
from llgrad.runtime.tensor import Tensor

__all__ = ["linear", "dropout", "pad", "embedding", "one_hot"]


def linear(input: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """input @ weight.T + bias: one AddmmBackward0 node as PyTorch's, on the input viewed as a
    matrix (ViewBackward0 over it) when it has more than two dimensions (torch_shape.linear)."""
    return _ts.linear(input, weight, bias)


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


def _indices(t) -> np.ndarray:
    a = np.asarray(t._data if isinstance(t, Tensor) else t)
    if a.dtype.kind not in "iu":
        raise RuntimeError(f"Expected tensor for argument #1 'indices' to have one of the "
                           f"following scalar types: Long, Int; but got {Tensor._wrap(a).dtype} "
                           "instead")
    return a


def embedding(input: Tensor, weight: Tensor, padding_idx: int | None = None, max_norm=None,
              norm_type: float = 2.0, scale_grad_by_freq: bool = False,
              sparse: bool = False) -> Tensor:
    """Rows of `weight` (num_embeddings, embedding_dim) at the int64 indices `input`; the row
    `padding_idx` (negative counts from the end) gets no gradient."""
    if max_norm is not None or scale_grad_by_freq or sparse:
        raise NotImplementedError("embedding: max_norm, scale_grad_by_freq and sparse are not "
                                  "supported")
    n = weight.shape[0]
    if padding_idx is not None:
        if not -n <= padding_idx < n:
            raise AssertionError("Padding_idx must be within num_embeddings")
        padding_idx = padding_idx % n
    return ops.embedding(weight, _indices(input), padding_idx)


def one_hot(tensor: Tensor, num_classes: int = -1) -> Tensor:
    """int64 (..., num_classes) with a 1 at each index (num_classes=-1: max index + 1)."""
    idx = _indices(tensor)
    if idx.size and idx.min() < 0:
        raise RuntimeError("Class values must be non-negative.")
    if num_classes == -1:
        num_classes = int(idx.max()) + 1 if idx.size else 0
    elif idx.size and idx.max() >= num_classes:
        raise RuntimeError("Class values must be smaller than num_classes.")
    return Tensor._wrap((idx[..., None] == np.arange(num_classes)).astype(np.int64))
