"""Activations: relu, relu6, sigmoid, tanh, leaky_relu, gelu, silu, elu, selu, celu, softplus,
hardtanh, logsigmoid, softmax, log_softmax (PyTorch's argument names and defaults).

`inplace=True` writes the result into the input (an in-place op: its version counter moves,
so a graph that saved the old values raises at backward, as in PyTorch).
"""
from __future__ import annotations

import warnings

from llgrad.runtime import ops
from llgrad.runtime.tensor import Tensor

__all__ = ["relu", "relu_", "relu6", "sigmoid", "tanh", "leaky_relu", "gelu", "silu", "elu",
           "selu", "celu", "softplus", "hardtanh", "logsigmoid", "softmax", "log_softmax"]

_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946


def _out(input: Tensor, out: Tensor, inplace: bool) -> Tensor:
    return input.copy_(out) if inplace else out


def relu(input: Tensor, inplace: bool = False) -> Tensor:
    """max(input, 0) elementwise."""
    return input.relu_() if inplace else ops.relu(input)


def relu_(input: Tensor) -> Tensor:
    return input.relu_()


def relu6(input: Tensor, inplace: bool = False) -> Tensor:
    """min(max(input, 0), 6): hardtanh(input, 0, 6), as PyTorch (HardtanhBackward0)."""
    return hardtanh(input, 0.0, 6.0, inplace)


def sigmoid(input: Tensor) -> Tensor:
    return ops.sigmoid(input)


def tanh(input: Tensor) -> Tensor:
    return ops.tanh(input)


def leaky_relu(input: Tensor, negative_slope: float = 0.01, inplace: bool = False) -> Tensor:
    """input where positive, else negative_slope * input."""
    return _out(input, ops.leaky_relu(input, negative_slope), inplace)


def gelu(input: Tensor, approximate: str = "none") -> Tensor:
    """x * Phi(x) with Phi the standard normal CDF; approximate='tanh' uses
    0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))."""
    return ops.gelu(input, approximate)


def silu(input: Tensor, inplace: bool = False) -> Tensor:
    """x * sigmoid(x) (also called swish)."""
    return _out(input, ops.silu(input), inplace)


def elu(input: Tensor, alpha: float = 1.0, inplace: bool = False) -> Tensor:
    """x for x > 0, else alpha * (exp(x) - 1)."""
    return _out(input, ops.elu(input, alpha), inplace)


def selu(input: Tensor, inplace: bool = False) -> Tensor:
    """scale * elu(x, alpha) with the self-normalising constants (EluBackward0, as PyTorch)."""
    return _out(input, ops.elu(input, _SELU_ALPHA, _SELU_SCALE), inplace)


def celu(input: Tensor, alpha: float = 1.0, inplace: bool = False) -> Tensor:
    """max(0, x) + min(0, alpha * (exp(x / alpha) - 1))."""
    if alpha == 0:
        raise RuntimeError("ZeroDivisionError: alpha of celu must not be 0")
    return _out(input, ops.elu(input, alpha, 1.0, 1.0 / alpha), inplace)


def softplus(input: Tensor, beta: float = 1.0, threshold: float = 20.0) -> Tensor:
    """log(1 + exp(beta x)) / beta, and x itself where beta x > threshold."""
    return ops.softplus(input, beta, threshold)


def hardtanh(input: Tensor, min_val: float = -1.0, max_val: float = 1.0,
             inplace: bool = False) -> Tensor:
    """input clamped to [min_val, max_val]; the gradient is 0 at and beyond the bounds."""
    return _out(input, ops.hardtanh(input, min_val, max_val), inplace)


def logsigmoid(input: Tensor) -> Tensor:
    """log(sigmoid(x)) = -softplus(-x), computed stably."""
    return ops.neg(ops.softplus(ops.neg(input)))


def _softmax_dim(name: str, ndim: int, dim):
    if dim is not None:
        return dim
    warnings.warn(f"Implicit dimension choice for {name} has been deprecated. Change the call "
                  "to include dim=X as an argument.", stacklevel=3)
    return 0 if ndim in (0, 1, 3) else 1


def softmax(input: Tensor, dim=None, _stacklevel: int = 3, dtype=None) -> Tensor:
    """exp(x) / sum(exp(x)) along `dim` (computed stably)."""
    if dtype is not None:
        input = ops.astype(input, dtype)
    return ops.softmax(input, _softmax_dim("softmax", input.ndim, dim))


def log_softmax(input: Tensor, dim=None, _stacklevel: int = 3, dtype=None) -> Tensor:
    """x - logsumexp(x) along `dim`."""
    if dtype is not None:
        input = ops.astype(input, dtype)
    return ops.log_softmax(input, _softmax_dim("log_softmax", input.ndim, dim))
