"""The basic layers: Linear, Identity, Dropout, Flatten (activations: nn/activation.py;
containers: nn/container.py; convolutions and pooling: nn/conv.py).

Default initialisation is PyTorch's (Kaiming-uniform for Linear), drawn from llgrad's global
generator, so `llgrad.manual_seed(s)` makes a model reproducible.
"""
from __future__ import annotations

import math

import numpy as np

from llgrad.runtime import ops
from llgrad.runtime.aval import DEFAULT_FLOAT, to_np
from llgrad.runtime.nn import functional as F
from llgrad.runtime.nn import init
from llgrad.runtime.nn.module import Module
from llgrad.runtime.nn.parameter import Parameter
from llgrad.runtime.tensor import Tensor


class Identity(Module):
    """Returns its input; accepts and ignores any constructor arguments."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__()

    def forward(self, input):
        return input


class Linear(Module):
    """y = x @ weight.T + bias, weight of shape (out_features, in_features).

    weight and bias are drawn from U(-1/sqrt(in_features), 1/sqrt(in_features)), as
    PyTorch's `kaiming_uniform_(weight, a=sqrt(5))` gives.

    Example:
        >>> import llgrad as lg
        >>> fc = lg.nn.Linear(4, 2)
        >>> fc(lg.ones(3, 4)).shape
        (3, 2)
    """

    def __init__(self, in_features: int, out_features: int, bias: bool = True,
                 device=None, dtype=None) -> None:
        super().__init__()
        self.in_features, self.out_features = in_features, out_features
        dt = to_np(dtype) or DEFAULT_FLOAT
        self.weight = Parameter(Tensor._wrap(np.empty((out_features, in_features), dt)))
        if bias:
            self.bias = Parameter(Tensor._wrap(np.empty((out_features,), dt)))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            fan_in = self.in_features
            bound = 1 / math.sqrt(fan_in) if fan_in > 0 else 0
            init.uniform_(self.bias, -bound, bound)

    def forward(self, input: Tensor) -> Tensor:
        return F.linear(input, self.weight, self.bias)

    def extra_repr(self) -> str:
        return (f"in_features={self.in_features}, out_features={self.out_features}, "
                f"bias={self.bias is not None}")


class Dropout(Module):
    """Zeroes elements with probability p and scales the rest by 1/(1-p) while `training`;
    the identity after `eval()`."""

    def __init__(self, p: float = 0.5, inplace: bool = False) -> None:
        super().__init__()
        if p < 0 or p > 1:
            raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
        self.p, self.inplace = p, inplace

    def forward(self, input: Tensor) -> Tensor:
        return F.dropout(input, self.p, self.training, self.inplace)

    def extra_repr(self) -> str:
        return f"p={self.p}, inplace={self.inplace}"


class Flatten(Module):
    def __init__(self, start_dim: int = 1, end_dim: int = -1) -> None:
        super().__init__()
        self.start_dim, self.end_dim = start_dim, end_dim

    def forward(self, input: Tensor) -> Tensor:
        return ops.flatten(input, self.start_dim, self.end_dim)

    def extra_repr(self) -> str:
        return f"start_dim={self.start_dim}, end_dim={self.end_dim}"
