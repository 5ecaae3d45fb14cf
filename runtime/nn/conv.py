"""Convolution and pooling modules: Conv1d, Conv2d, ConvTranspose1d, ConvTranspose2d,
MaxPool1d, MaxPool2d, AvgPool1d, AvgPool2d, AdaptiveAvgPool1d, AdaptiveAvgPool2d.

Parameters are initialised as PyTorch's: weight kaiming_uniform_(a=sqrt(5)), i.e.
U(-1/sqrt(fan_in), 1/sqrt(fan_in)) with fan_in = in_channels/groups * prod(kernel_size), and
bias from the same range, drawn from llgrad's global generator (`llgrad.manual_seed`).
"""
from __future__ import annotations

import math

import numpy as np

from llgrad.runtime.aval import DEFAULT_FLOAT, to_np
from llgrad.runtime.nn import functional as F
from llgrad.runtime.nn import init
from llgrad.runtime.nn.functional.conv import _ntuple
from llgrad.runtime.nn.module import Module
from llgrad.runtime.nn.parameter import Parameter
from llgrad.runtime.tensor import Tensor

_PAD_MODES = {"zeros", "reflect", "replicate", "circular"}


class _ConvNd(Module):
    _k = 2
    _transposed = False

    def __init__(self, in_channels: int, out_channels: int, kernel_size, stride=1, padding=0,
                 dilation=1, groups: int = 1, bias: bool = True, padding_mode: str = "zeros",
                 device=None, dtype=None, output_padding=0) -> None:
        super().__init__()
        k = self._k
        if groups <= 0 or in_channels % groups or out_channels % groups:
            raise ValueError("in_channels and out_channels must be divisible by groups "
                             f"(got {in_channels}, {out_channels} and groups={groups})")
        if padding_mode not in _PAD_MODES:
            raise ValueError(f"padding_mode must be one of {sorted(_PAD_MODES)}, but got "
                             f"padding_mode='{padding_mode}'")
        if isinstance(padding, str):
            if padding not in ("same", "valid"):
                raise ValueError(f"Invalid padding string {padding!r}, should be one of "
                                 "{'valid', 'same'}")
            if padding == "same" and any(s != 1 for s in _ntuple(stride, k)):
                raise ValueError("padding='same' is not supported for strided convolutions")
        self.in_channels, self.out_channels, self.groups = in_channels, out_channels, groups
        self.kernel_size = _ntuple(kernel_size, k)
        self.stride, self.dilation = _ntuple(stride, k), _ntuple(dilation, k)
        self.padding = padding if isinstance(padding, str) else _ntuple(padding, k)
        self.output_padding = _ntuple(output_padding, k)
        self.padding_mode, self.transposed = padding_mode, self._transposed
        dt = to_np(dtype) or DEFAULT_FLOAT
        shape = ((in_channels, out_channels // groups) if self._transposed
                 else (out_channels, in_channels // groups)) + self.kernel_size
        self.weight = Parameter(Tensor._wrap(np.empty(shape, dt)))
        if bias:
            self.bias = Parameter(Tensor._wrap(np.empty((out_channels,), dt)))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            fan_in, _ = init._calculate_fan_in_and_fan_out(self.weight)
            if fan_in:
                bound = 1 / math.sqrt(fan_in)
                init.uniform_(self.bias, -bound, bound)

    def _padded_input(self, input: Tensor):
        """(input, padding for the convolution): padding modes other than 'zeros' pad here."""
        if self.padding_mode == "zeros":
            return input, self.padding
        if self.padding == "valid":
            return input, 0
        if self.padding == "same":  # the extra pad of an even kernel goes after, as PyTorch
            totals = [d * (k - 1) for d, k in zip(self.dilation, self.kernel_size)]
            pad = [p for t in reversed(totals) for p in (t // 2, t - t // 2)]
        else:
            pad = [p for p in reversed(self.padding) for _ in range(2)]
        return F.pad(input, pad, mode=self.padding_mode), 0

    def extra_repr(self) -> str:
        s = f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, " \
            f"stride={self.stride}"
        if self.padding != (0,) * self._k:
            s += f", padding={self.padding!r}" if isinstance(self.padding, str) else \
                f", padding={self.padding}"
        if self.dilation != (1,) * self._k:
            s += f", dilation={self.dilation}"
        if self.output_padding != (0,) * self._k:
            s += f", output_padding={self.output_padding}"
        if self.groups != 1:
            s += f", groups={self.groups}"
        if self.bias is None:
            s += ", bias=False"
        if self.padding_mode != "zeros":
            s += f", padding_mode={self.padding_mode}"
        return s


class Conv1d(_ConvNd):
    """1-d convolution (cross-correlation) over (N, C_in, L) inputs; weight (C_out,
    C_in/groups, kernel_size)."""

    _k = 1

    def forward(self, input: Tensor) -> Tensor:
        x, pad = self._padded_input(input)
        return F.conv1d(x, self.weight, self.bias, self.stride, pad, self.dilation, self.groups)


class Conv2d(_ConvNd):
    """2-d convolution (cross-correlation) over (N, C_in, H, W) inputs; weight (C_out,
    C_in/groups, kH, kW).

    Example:
        >>> import llgrad as lg
        >>> conv = lg.nn.Conv2d(1, 4, 3, padding=1)
        >>> conv(lg.zeros(2, 1, 8, 8)).shape
        (2, 4, 8, 8)
    """

    def forward(self, input: Tensor) -> Tensor:
        x, pad = self._padded_input(input)
        return F.conv2d(x, self.weight, self.bias, self.stride, pad, self.dilation, self.groups)


class _ConvTransposeNd(_ConvNd):
    _transposed = True

    def __init__(self, in_channels: int, out_channels: int, kernel_size, stride=1, padding=0,
                 output_padding=0, groups: int = 1, bias: bool = True, dilation=1,
                 padding_mode: str = "zeros", device=None, dtype=None) -> None:
        if padding_mode != "zeros":
            raise ValueError(f'Only "zeros" padding mode is supported for '
                             f"{type(self).__name__}")
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation,
                         groups, bias, padding_mode, device, dtype, output_padding)

    def _output_padding(self, input: Tensor, output_size):
        if output_size is None:
            return self.output_padding
        k = self._k
        size = tuple(output_size)[-k:]
        low = tuple((n - 1) * s - 2 * p + d * (kk - 1) + 1 for n, s, p, d, kk in zip(
            input.shape[-k:], self.stride, self.padding, self.dilation, self.kernel_size))
        return tuple(o - m for o, m in zip(size, low))


class ConvTranspose1d(_ConvTransposeNd):
    """The transpose of Conv1d (its gradient with respect to the input)."""

    _k = 1

    def forward(self, input: Tensor, output_size=None) -> Tensor:
        return F.conv_transpose1d(input, self.weight, self.bias, self.stride, self.padding,
                                  self._output_padding(input, output_size), self.groups,
                                  self.dilation)


class ConvTranspose2d(_ConvTransposeNd):
    """The transpose of Conv2d (its gradient with respect to the input)."""

    def forward(self, input: Tensor, output_size=None) -> Tensor:
        return F.conv_transpose2d(input, self.weight, self.bias, self.stride, self.padding,
                                  self._output_padding(input, output_size), self.groups,
                                  self.dilation)


# ---- pooling ------------------------------------------------------------------------------------
class _MaxPoolNd(Module):
    def __init__(self, kernel_size, stride=None, padding=0, dilation=1,
                 return_indices: bool = False, ceil_mode: bool = False) -> None:
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = stride if stride is not None else kernel_size
        self.padding, self.dilation = padding, dilation
        self.return_indices, self.ceil_mode = return_indices, ceil_mode

    def extra_repr(self) -> str:
        return (f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}, "
                f"dilation={self.dilation}, ceil_mode={self.ceil_mode}")


class MaxPool1d(_MaxPoolNd):
    def forward(self, input: Tensor):
        return F.max_pool1d(input, self.kernel_size, self.stride, self.padding, self.dilation,
                            self.ceil_mode, self.return_indices)


class MaxPool2d(_MaxPoolNd):
    """The maximum over kernel_size windows of (N, C, H, W) inputs."""

    def forward(self, input: Tensor):
        return F.max_pool2d(input, self.kernel_size, self.stride, self.padding, self.dilation,
                            self.ceil_mode, self.return_indices)


class _AvgPoolNd(Module):
    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode: bool = False,
                 count_include_pad: bool = True) -> None:
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = stride if stride is not None else kernel_size
        self.padding, self.ceil_mode = padding, ceil_mode
        self.count_include_pad = count_include_pad

    def extra_repr(self) -> str:
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class AvgPool1d(_AvgPoolNd):
    def forward(self, input: Tensor) -> Tensor:
        return F.avg_pool1d(input, self.kernel_size, self.stride, self.padding, self.ceil_mode,
                            self.count_include_pad)


class AvgPool2d(_AvgPoolNd):
    """The mean over kernel_size windows of (N, C, H, W) inputs."""

    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode: bool = False,
                 count_include_pad: bool = True, divisor_override=None) -> None:
        super().__init__(kernel_size, stride, padding, ceil_mode, count_include_pad)
        self.divisor_override = divisor_override

    def forward(self, input: Tensor) -> Tensor:
        return F.avg_pool2d(input, self.kernel_size, self.stride, self.padding, self.ceil_mode,
                            self.count_include_pad, self.divisor_override)


class AdaptiveAvgPool1d(Module):
    def __init__(self, output_size) -> None:
        super().__init__()
        self.output_size = output_size

    def forward(self, input: Tensor) -> Tensor:
        return F.adaptive_avg_pool1d(input, self.output_size)

    def extra_repr(self) -> str:
        return f"output_size={self.output_size}"


class AdaptiveAvgPool2d(AdaptiveAvgPool1d):
    """Averages over windows that tile the input into output_size (OH, OW) cells."""

    def forward(self, input: Tensor) -> Tensor:
        return F.adaptive_avg_pool2d(input, self.output_size)
