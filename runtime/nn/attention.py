"""MultiheadAttention, as torch.nn.MultiheadAttention: packed in_proj_weight/in_proj_bias
(or separate q/k/v weights when kdim/vdim differ), out_proj, batch_first, attn_mask and
key_padding_mask (bool: True masks out; float: added), dropout on the attention weights,
need_weights with average_attn_weights. Written with ops (matmul, softmax, ...).
"""
from __future__ import annotations

import math

import numpy as np

from llgrad.runtime import ops
from llgrad.runtime.aval import DEFAULT_FLOAT, to_np
from llgrad.runtime.nn import functional as F
from llgrad.runtime.nn import init
from llgrad.runtime.nn.layers import Linear
from llgrad.runtime.nn.module import Module
from llgrad.runtime.nn.parameter import Parameter
from llgrad.runtime.tensor import Tensor


def _additive(mask, dtype):
    """A mask as numbers to add to the scores: bool True -> -inf."""
    m = np.asarray(mask._data if isinstance(mask, Tensor) else mask)
    if m.dtype == np.bool_:
        return np.where(m, -np.inf, 0.0).astype(dtype)
    return m.astype(dtype, copy=False)


class MultiheadAttention(Module):
    """softmax(Q K^T / sqrt(head_dim) + mask) V per head, heads concatenated and projected.

    forward(query, key, value, key_padding_mask=None, need_weights=True, attn_mask=None,
    average_attn_weights=True, is_causal=False) returns (output, weights): output (L, N, E)
    ((N, L, E) with batch_first), weights (N, L, S) averaged over heads (or (N, heads, L, S)),
    None with need_weights=False.
    """

    def __init__(self, embed_dim: int, num_heads: int, dropout: float = 0.0, bias: bool = True,
                 add_bias_kv: bool = False, add_zero_attn: bool = False, kdim=None, vdim=None,
                 batch_first: bool = False, device=None, dtype=None) -> None:
        super().__init__()
        if embed_dim % num_heads:
            raise AssertionError("embed_dim must be divisible by num_heads")
        if add_bias_kv or add_zero_attn:
            raise NotImplementedError("MultiheadAttention: add_bias_kv and add_zero_attn are "
                                      "not supported")
        self.embed_dim, self.num_heads, self.dropout = embed_dim, num_heads, dropout
        self.kdim, self.vdim = kdim or embed_dim, vdim or embed_dim
        self._qkv_same_embed_dim = self.kdim == embed_dim and self.vdim == embed_dim
        self.head_dim, self.batch_first = embed_dim // num_heads, batch_first
        dt = to_np(dtype) or DEFAULT_FLOAT

        def param(*shape):
            return Parameter(Tensor._wrap(np.empty(shape, dt)))
        if self._qkv_same_embed_dim:
            self.in_proj_weight = param(3 * embed_dim, embed_dim)
            for name in ("q_proj_weight", "k_proj_weight", "v_proj_weight"):
                self.register_parameter(name, None)
        else:
            self.q_proj_weight = param(embed_dim, embed_dim)
            self.k_proj_weight = param(embed_dim, self.kdim)
            self.v_proj_weight = param(embed_dim, self.vdim)
            self.register_parameter("in_proj_weight", None)
        if bias:
            self.in_proj_bias = param(3 * embed_dim)
        else:
            self.register_parameter("in_proj_bias", None)
        self.out_proj = Linear(embed_dim, embed_dim, bias=bias, dtype=dtype)
        self._reset_parameters()

    def _reset_parameters(self) -> None:
        if self._qkv_same_embed_dim:
            init.xavier_uniform_(self.in_proj_weight)
        else:
            for w in (self.q_proj_weight, self.k_proj_weight, self.v_proj_weight):
                init.xavier_uniform_(w)
        if self.in_proj_bias is not None:
            init.constant_(self.in_proj_bias, 0.0)
            init.constant_(self.out_proj.bias, 0.0)

    def _projections(self, query, key, value):
        e = self.embed_dim
        b = self.in_proj_bias
        bq, bk, bv = (None, None, None) if b is None else (b[:e], b[e:2 * e], b[2 * e:])
        if self._qkv_same_embed_dim:
            w = self.in_proj_weight
            wq, wk, wv = w[:e], w[e:2 * e], w[2 * e:]
        else:
            wq, wk, wv = self.q_proj_weight, self.k_proj_weight, self.v_proj_weight
        return F.linear(query, wq, bq), F.linear(key, wk, bk), F.linear(value, wv, bv)

    def forward(self, query: Tensor, key: Tensor, value: Tensor, key_padding_mask=None,
                need_weights: bool = True, attn_mask=None, average_attn_weights: bool = True,
                is_causal: bool = False):
        batched = query.ndim == 3
        if not batched:
            query, key, value = (ops.unsqueeze(t, 1) for t in (query, key, value))
        elif self.batch_first:
            query, key, value = (ops.swapaxes(t, 0, 1) for t in (query, key, value))
        L, N, E = query.shape
        S, h, d = key.shape[0], self.num_heads, self.head_dim
        q, k, v = self._projections(query, key, value)

        def heads(t, n):  # (n, N, E) -> (N, h, n, d)
            return ops.transpose(ops.reshape(t, (n, N, h, d)), (1, 2, 0, 3))
        q, k, v = heads(q, L), heads(k, S), heads(v, S)
        scores = ops.matmul(ops.mul(q, 1.0 / math.sqrt(d)), ops.swapaxes(k, -1, -2))
        dt = scores._np_dtype
        if is_causal and attn_mask is None:
            attn_mask = np.triu(np.ones((L, S), bool), 1)
        if attn_mask is not None:
            m = _additive(attn_mask, dt)
            scores = ops.add(scores, m.reshape(N, h, L, S) if m.ndim == 3 else m)
        if key_padding_mask is not None:
            m = _additive(key_padding_mask, dt)
            scores = ops.add(scores, m.reshape((N, 1, 1, S) if batched else (1, 1, 1, S)))
        weights = ops.softmax(scores, -1)
        if self.dropout > 0.0 and self.training:
            weights = F.dropout(weights, self.dropout, True)
        out = ops.reshape(ops.transpose(ops.matmul(weights, v), (2, 0, 1, 3)), (L, N, E))
        out = self.out_proj(out)
        if not batched:
            out = ops.squeeze(out, 1)
        elif self.batch_first:
            out = ops.swapaxes(out, 0, 1)
        if not need_weights:
            return out, None
        w = ops.mean(weights, 1) if average_attn_weights else weights
        return out, (w if batched else ops.squeeze(w, 0))
