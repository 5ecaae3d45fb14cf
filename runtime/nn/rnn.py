"""Recurrent modules: RNN, LSTM, GRU (num_layers, bidirectional, batch_first, dropout between
layers, initial states) and the single-step cells RNNCell, LSTMCell, GRUCell.

Parameters are PyTorch's (weight_ih_l0, weight_hh_l0, bias_ih_l0, bias_hh_l0, ..._reverse),
with its gate order (LSTM: input, forget, cell, output; GRU: reset, update, new) and its
initialisation U(-1/sqrt(hidden_size), 1/sqrt(hidden_size)). Each layer and direction is one
primitive over the whole sequence (runtime/ops/rnn.py); the input projection for all steps is
one matmul.
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

_GATES = {"RNN_TANH": 1, "RNN_RELU": 1, "LSTM": 4, "GRU": 3}


def _layer(mode: str, x, h0, c0, w_ih, w_hh, b_ih, b_hh):
    """One layer and direction over x (T, N, I): (hidden states (T, N, H), cell states)."""
    if mode == "GRU":
        gx = F.linear(x, w_ih, b_ih)
        b = b_hh if b_hh is not None else np.zeros(w_hh.shape[0], w_hh._np_dtype)
        return ops.gru_layer(gx, h0, w_hh, b), None
    # both biases added once, outside the loop
    gx = F.linear(x, w_ih, None if b_ih is None else ops.add(b_ih, b_hh))
    if mode == "LSTM":
        return ops.lstm_layer(gx, h0, c0, w_hh)
    return ops.rnn_layer(gx, h0, w_hh, "tanh" if mode == "RNN_TANH" else "relu"), None


class RNNBase(Module):
    """The common machinery of RNN, LSTM and GRU (see their docstrings)."""

    def __init__(self, mode: str, input_size: int, hidden_size: int, num_layers: int = 1,
                 bias: bool = True, batch_first: bool = False, dropout: float = 0.0,
                 bidirectional: bool = False, proj_size: int = 0, device=None,
                 dtype=None) -> None:
        super().__init__()
        if not 0 <= dropout <= 1 or isinstance(dropout, bool):
            raise ValueError("dropout should be a number in range [0, 1] representing the "
                             "probability of an element being zeroed")
        if proj_size:
            raise NotImplementedError("LSTM with proj_size is not supported")
        if hidden_size <= 0 or num_layers <= 0:
            raise ValueError("hidden_size and num_layers must be positive")
        self.mode, self.input_size, self.hidden_size = mode, input_size, hidden_size
        self.num_layers, self.bias, self.batch_first = num_layers, bias, batch_first
        self.dropout, self.bidirectional, self.proj_size = float(dropout), bidirectional, 0
        dirs = 2 if bidirectional else 1
        gh = _GATES[mode] * hidden_size
        dt = to_np(dtype) or DEFAULT_FLOAT
        self._flat_weights_names = []
        for layer in range(num_layers):
            for d in range(dirs):
                suffix = f"_l{layer}" + ("_reverse" if d else "")
                size_in = input_size if layer == 0 else hidden_size * dirs
                shapes = [("weight_ih", (gh, size_in)), ("weight_hh", (gh, hidden_size))]
                if bias:
                    shapes += [("bias_ih", (gh,)), ("bias_hh", (gh,))]
                for name, shape in shapes:
                    setattr(self, name + suffix, Parameter(Tensor._wrap(np.empty(shape, dt))))
                    self._flat_weights_names.append(name + suffix)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        stdv = 1.0 / math.sqrt(self.hidden_size)
        for w in self.parameters():
            init.uniform_(w, -stdv, stdv)

    @property
    def all_weights(self) -> list:
        n = 4 if self.bias else 2
        names = self._flat_weights_names
        return [[getattr(self, k) for k in names[i:i + n]] for i in range(0, len(names), n)]

    def _weights(self, layer: int, d: int):
        suffix = f"_l{layer}" + ("_reverse" if d else "")
        get = (lambda k: getattr(self, k + suffix)) if self.bias else (
            lambda k: getattr(self, k + suffix) if k.startswith("weight") else None)
        return get("weight_ih"), get("weight_hh"), get("bias_ih"), get("bias_hh")

    def _initial(self, hx, n: int, batched: bool, dt):
        shape = (self.num_layers * (2 if self.bidirectional else 1), n, self.hidden_size)
        if hx is None:
            return Tensor._wrap(np.zeros(shape, dt))
        if not batched:
            hx = ops.unsqueeze(hx, 1)
        if tuple(hx.shape) != shape:
            raise RuntimeError(f"Expected hidden size {tuple(shape)}, got "
                               f"{list(hx.shape if batched else hx.shape[:1] + hx.shape[2:])}")
        return hx

    def _run(self, input: Tensor, h0, c0):
        """(output, h_n, c_n) for a batched time-major input (T, N, I)."""
        dirs = 2 if self.bidirectional else 1
        x, hn, cn = input, [], []
        for layer in range(self.num_layers):
            outs = []
            for d in range(dirs):
                k = layer * dirs + d
                seq = ops.flip(x, 0) if d else x
                hs, cs = _layer(self.mode, seq, h0[k], None if c0 is None else c0[k],
                                *self._weights(layer, d))
                hn.append(hs[-1])
                if cs is not None:
                    cn.append(cs[-1])
                outs.append(ops.flip(hs, 0) if d else hs)
            x = outs[0] if dirs == 1 else ops.concatenate(outs, -1)
            if self.dropout and self.training and layer < self.num_layers - 1:
                x = F.dropout(x, self.dropout, True)
        return x, ops.stack(hn, 0), (ops.stack(cn, 0) if cn else None)

    def forward(self, input: Tensor, hx=None):
        if input.ndim not in (2, 3):
            raise ValueError(f"{type(self).__name__}: Expected input to be 2D or 3D, got "
                             f"{input.ndim}D instead")
        if input.shape[-1] != self.input_size:
            raise RuntimeError(f"input.size(-1) must be equal to input_size. Expected "
                               f"{self.input_size}, got {input.shape[-1]}")
        batched = input.ndim == 3
        x = input if batched else ops.unsqueeze(input, 1)
        if batched and self.batch_first:
            x = ops.swapaxes(x, 0, 1)
        n, dt = x.shape[1], input._np_dtype
        lstm = self.mode == "LSTM"
        h0 = self._initial(hx[0] if lstm and hx is not None else hx, n, batched, dt)
        c0 = self._initial(hx[1] if hx is not None else None, n, batched, dt) if lstm else None
        out, hn, cn = self._run(x, h0, c0)
        if batched and self.batch_first:
            out = ops.swapaxes(out, 0, 1)
        if not batched:
            out, hn = ops.squeeze(out, 1), ops.squeeze(hn, 1)
            cn = None if cn is None else ops.squeeze(cn, 1)
        return (out, (hn, cn)) if lstm else (out, hn)

    def extra_repr(self) -> str:
        s = f"{self.input_size}, {self.hidden_size}"
        if self.num_layers != 1:
            s += f", num_layers={self.num_layers}"
        if not self.bias:
            s += ", bias=False"
        if self.batch_first:
            s += ", batch_first=True"
        if self.dropout:
            s += f", dropout={self.dropout}"
        if self.bidirectional:
            s += ", bidirectional=True"
        return s


class RNN(RNNBase):
    """Elman RNN: h_t = tanh(x_t W_ih^T + b_ih + h_{t-1} W_hh^T + b_hh) (or relu).

    Returns (output, h_n): output (T, N, D*H) (batch first with batch_first=True), h_n
    (D*num_layers, N, H).
    """

    def __init__(self, *args, nonlinearity: str = "tanh", **kwargs) -> None:
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(f"Unknown nonlinearity '{nonlinearity}'. Select from 'tanh' or "
                             "'relu'.")
        self.nonlinearity = nonlinearity
        super().__init__("RNN_TANH" if nonlinearity == "tanh" else "RNN_RELU", *args, **kwargs)

    def extra_repr(self) -> str:
        s = super().extra_repr()
        return s + (", nonlinearity='relu'" if self.nonlinearity == "relu" else "")


class LSTM(RNNBase):
    """Long short-term memory: gates (i, f, g, o) = (sigmoid, sigmoid, tanh, sigmoid) of
    x_t W_ih^T + b_ih + h_{t-1} W_hh^T + b_hh; c_t = f c_{t-1} + i g; h_t = o tanh(c_t).

    Returns (output, (h_n, c_n)).

    Example:
        >>> import llgrad as lg
        >>> lstm = lg.nn.LSTM(4, 8, batch_first=True)
        >>> out, (h, c) = lstm(lg.randn(2, 5, 4))
        >>> out.shape, h.shape
        ((2, 5, 8), (1, 2, 8))
    """

    def __init__(self, *args, **kwargs) -> None:
        super().__init__("LSTM", *args, **kwargs)


class GRU(RNNBase):
    """Gated recurrent unit: r, z = sigmoid(...), n = tanh(x W_in^T + b_in + r (h W_hn^T +
    b_hn)), h_t = (1 - z) n + z h_{t-1}. Returns (output, h_n)."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__("GRU", *args, **kwargs)


# ---- cells: one step --------------------------------------------------------------------------
class _Cell(Module):
    _mode = "RNN_TANH"

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True, device=None,
                 dtype=None) -> None:
        super().__init__()
        self.input_size, self.hidden_size, self.bias = input_size, hidden_size, bias
        gh = _GATES[self._mode] * hidden_size
        dt = to_np(dtype) or DEFAULT_FLOAT
        self.weight_ih = Parameter(Tensor._wrap(np.empty((gh, input_size), dt)))
        self.weight_hh = Parameter(Tensor._wrap(np.empty((gh, hidden_size), dt)))
        if bias:
            self.bias_ih = Parameter(Tensor._wrap(np.empty((gh,), dt)))
            self.bias_hh = Parameter(Tensor._wrap(np.empty((gh,), dt)))
        else:
            self.register_parameter("bias_ih", None)
            self.register_parameter("bias_hh", None)
        RNNBase.reset_parameters(self)

    def _step(self, input: Tensor, hx, cx=None):
        batched = input.ndim == 2
        x = input if batched else ops.unsqueeze(input, 0)
        zeros = Tensor._wrap(np.zeros((x.shape[0], self.hidden_size), input._np_dtype))
        h = zeros if hx is None else (hx if batched else ops.unsqueeze(hx, 0))
        c = None if self._mode != "LSTM" else zeros if cx is None else (
            cx if batched else ops.unsqueeze(cx, 0))
        hs, cs = _layer(self._mode, ops.unsqueeze(x, 0), h, c, self.weight_ih, self.weight_hh,
                        self.bias_ih, self.bias_hh)
        out = [hs[0]] + ([cs[0]] if cs is not None else [])
        return [o if batched else ops.squeeze(o, 0) for o in out]

    def extra_repr(self) -> str:
        return f"{self.input_size}, {self.hidden_size}" + ("" if self.bias else ", bias=False")


class RNNCell(_Cell):
    """One step of RNN: h' = tanh(x W_ih^T + b_ih + h W_hh^T + b_hh) (or relu)."""

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True,
                 nonlinearity: str = "tanh", device=None, dtype=None) -> None:
        self._mode = "RNN_TANH" if nonlinearity == "tanh" else "RNN_RELU"
        self.nonlinearity = nonlinearity
        super().__init__(input_size, hidden_size, bias, device, dtype)

    def forward(self, input: Tensor, hx=None) -> Tensor:
        return self._step(input, hx)[0]


class LSTMCell(_Cell):
    """One step of LSTM: returns (h', c')."""

    _mode = "LSTM"

    def forward(self, input: Tensor, hx=None):
        h, c = (None, None) if hx is None else hx
        return tuple(self._step(input, h, c))


class GRUCell(_Cell):
    """One step of GRU: returns h'."""

    _mode = "GRU"

    def forward(self, input: Tensor, hx=None) -> Tensor:
        return self._step(input, hx)[0]
