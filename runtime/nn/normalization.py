"""Normalisation modules: BatchNorm1d, BatchNorm2d (running statistics, momentum or a
cumulative average with momentum=None, train()/eval(), affine, track_running_stats),
LayerNorm, GroupNorm; and Embedding. Buffers and parameters are named as PyTorch's, so
state dicts carry over.
"""
from __future__ import annotations

import numpy as np

from llgrad.runtime.aval import DEFAULT_FLOAT, to_np
from llgrad.runtime.autograd.grad_mode import no_grad
from llgrad.runtime.nn import functional as F
from llgrad.runtime.nn import init
from llgrad.runtime.nn.module import Module
from llgrad.runtime.nn.parameter import Parameter
from llgrad.runtime.tensor import Tensor


def _param(shape, dtype, fill) -> Parameter:
    return Parameter(Tensor._wrap(np.full(shape, fill, to_np(dtype) or DEFAULT_FLOAT)))


class _BatchNorm(Module):
    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float | None = 0.1,
                 affine: bool = True, track_running_stats: bool = True, device=None,
                 dtype=None) -> None:
        super().__init__()
        self.num_features, self.eps, self.momentum = num_features, eps, momentum
        self.affine, self.track_running_stats = affine, track_running_stats
        if affine:
            self.weight = _param((num_features,), dtype, 1.0)
            self.bias = _param((num_features,), dtype, 0.0)
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)
        if track_running_stats:
            dt = to_np(dtype) or DEFAULT_FLOAT
            self.register_buffer("running_mean", Tensor._wrap(np.zeros(num_features, dt)))
            self.register_buffer("running_var", Tensor._wrap(np.ones(num_features, dt)))
            self.register_buffer("num_batches_tracked", Tensor._wrap(np.zeros((), np.int64)))
        else:
            for name in ("running_mean", "running_var", "num_batches_tracked"):
                self.register_buffer(name, None)

    def reset_running_stats(self) -> None:
        if self.track_running_stats:
            with no_grad():
                self.running_mean.zero_()
                self.running_var.fill_(1.0)
                self.num_batches_tracked.zero_()

    def reset_parameters(self) -> None:
        self.reset_running_stats()
        if self.affine:
            init.ones_(self.weight)
            init.zeros_(self.bias)

    def _check_input_dim(self, input: Tensor) -> None:
        raise NotImplementedError

    def forward(self, input: Tensor) -> Tensor:
        self._check_input_dim(input)
        factor = 0.0 if self.momentum is None else self.momentum
        if self.training and self.track_running_stats and self.num_batches_tracked is not None:
            with no_grad():
                self.num_batches_tracked.add_(1)
            if self.momentum is None:  # a cumulative moving average
                factor = 1.0 / float(self.num_batches_tracked.item())
        batch_stats = self.training or (self.running_mean is None and self.running_var is None)
        use_running = not self.training or self.track_running_stats
        return F.batch_norm(input, self.running_mean if use_running else None,
                            self.running_var if use_running else None, self.weight, self.bias,
                            batch_stats, factor, self.eps)

    def extra_repr(self) -> str:
        return (f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, "
                f"affine={self.affine}, track_running_stats={self.track_running_stats}")


class BatchNorm1d(_BatchNorm):
    """Batch normalisation over (N, C) or (N, C, L) inputs, per channel C.

    In training, normalises by the batch's mean and (biased) variance and moves the running
    averages towards them (running = (1 - momentum) running + momentum batch, with the
    unbiased variance); in eval mode, normalises by the running averages.
    """

    def _check_input_dim(self, input: Tensor) -> None:
        if input.ndim not in (2, 3):
            raise ValueError(f"expected 2D or 3D input (got {input.ndim}D input)")


class BatchNorm2d(_BatchNorm):
    """Batch normalisation over (N, C, H, W) inputs, per channel C (see BatchNorm1d).

    Example:
        >>> import llgrad as lg
        >>> bn = lg.nn.BatchNorm2d(3)
        >>> y = bn(lg.randn(4, 3, 5, 5))
        >>> int(bn.num_batches_tracked)
        1
    """

    def _check_input_dim(self, input: Tensor) -> None:
        if input.ndim != 4:
            raise ValueError(f"expected 4D input (got {input.ndim}D input)")


class LayerNorm(Module):
    """Normalises over the last len(normalized_shape) dimensions, then applies an
    elementwise affine transform (weight ones, bias zeros at first)."""

    def __init__(self, normalized_shape, eps: float = 1e-5, elementwise_affine: bool = True,
                 bias: bool = True, device=None, dtype=None) -> None:
        super().__init__()
        shape = (normalized_shape,) if isinstance(normalized_shape, int) else \
            tuple(normalized_shape)
        self.normalized_shape, self.eps = shape, eps
        self.elementwise_affine = elementwise_affine
        if elementwise_affine:
            self.weight = _param(shape, dtype, 1.0)
            if bias:
                self.bias = _param(shape, dtype, 0.0)
            else:
                self.register_parameter("bias", None)
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)

    def forward(self, input: Tensor) -> Tensor:
        return F.layer_norm(input, self.normalized_shape, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return (f"{self.normalized_shape}, eps={self.eps}, "
                f"elementwise_affine={self.elementwise_affine}")


class GroupNorm(Module):
    """Normalises each sample over groups of num_channels/num_groups channels, then scales
    and shifts per channel."""

    def __init__(self, num_groups: int, num_channels: int, eps: float = 1e-5,
                 affine: bool = True, device=None, dtype=None) -> None:
        super().__init__()
        if num_channels % num_groups:
            raise ValueError("num_channels must be divisible by num_groups")
        self.num_groups, self.num_channels, self.eps, self.affine = (
            num_groups, num_channels, eps, affine)
        if affine:
            self.weight = _param((num_channels,), dtype, 1.0)
            self.bias = _param((num_channels,), dtype, 0.0)
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)

    def forward(self, input: Tensor) -> Tensor:
        return F.group_norm(input, self.num_groups, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return f"{self.num_groups}, {self.num_channels}, eps={self.eps}, affine={self.affine}"


class Embedding(Module):
    """A lookup table: rows of `weight` (num_embeddings, embedding_dim), initialised from
    N(0, 1) (the padding_idx row zeroed: it gets no gradient either).

    Example:
        >>> import llgrad as lg
        >>> emb = lg.nn.Embedding(10, 3, padding_idx=0)
        >>> emb(lg.tensor([[0, 2], [4, 9]])).shape
        (2, 2, 3)
    """

    def __init__(self, num_embeddings: int, embedding_dim: int, padding_idx: int | None = None,
                 max_norm=None, norm_type: float = 2.0, scale_grad_by_freq: bool = False,
                 sparse: bool = False, _weight: Tensor | None = None, _freeze: bool = False,
                 device=None, dtype=None) -> None:
        super().__init__()
        if padding_idx is not None:
            if not -num_embeddings <= padding_idx < num_embeddings:
                raise AssertionError("Padding_idx must be within num_embeddings")
            padding_idx %= num_embeddings
        self.num_embeddings, self.embedding_dim = num_embeddings, embedding_dim
        self.padding_idx, self.max_norm, self.norm_type = padding_idx, max_norm, norm_type
        self.scale_grad_by_freq, self.sparse = scale_grad_by_freq, sparse
        if _weight is None:
            self.weight = _param((num_embeddings, embedding_dim), dtype, 0.0)
            self.reset_parameters()
        else:
            if tuple(_weight.shape) != (num_embeddings, embedding_dim):
                raise AssertionError("Shape of weight does not match num_embeddings and "
                                     "embedding_dim")
            self.weight = Parameter(_weight, requires_grad=not _freeze)

    def reset_parameters(self) -> None:
        init.normal_(self.weight)
        if self.padding_idx is not None:
            with no_grad():
                self.weight[self.padding_idx].fill_(0)

    def forward(self, input: Tensor) -> Tensor:
        return F.embedding(input, self.weight, self.padding_idx, self.max_norm, self.norm_type,
                           self.scale_grad_by_freq, self.sparse)

    @classmethod
    def from_pretrained(cls, embeddings: Tensor, freeze: bool = True, padding_idx=None,
                        max_norm=None, norm_type: float = 2.0, scale_grad_by_freq: bool = False,
                        sparse: bool = False) -> "Embedding":
        """An Embedding whose weight is `embeddings` (frozen unless freeze=False)."""
        rows, cols = embeddings.shape
        return cls(rows, cols, padding_idx, max_norm, norm_type, scale_grad_by_freq, sparse,
                   _weight=embeddings, _freeze=freeze)

    def extra_repr(self) -> str:
        s = f"{self.num_embeddings}, {self.embedding_dim}"
        if self.padding_idx is not None:
            s += f", padding_idx={self.padding_idx}"
        return s
