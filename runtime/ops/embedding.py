"""embedding: rows of a weight matrix picked by integer indices, one eager node with
PyTorch's name (EmbeddingBackward0). The row `padding_idx` gets no gradient, as in PyTorch.

The VJP is a scatter-add of the output gradient into the rows (scatter_add, whose own VJP is
the gather: gradients of any order); the compiler sees the gather (getitem).
"""
from __future__ import annotations

import numpy as np

from llgrad.runtime.aval import Aval, ShapeError
from llgrad.runtime.ops import elementwise as ew
from llgrad.runtime.ops._util import dtype_of, shape_of
from llgrad.runtime.prim import Primitive, bind, register


def _embedding_vjp(g, out, weight, idx, padding_idx):
    from llgrad.runtime.ops.index import scatter_add_p
    from llgrad.runtime.ops.shape import reshape
    v, d = shape_of(weight)
    flat = np.asarray(idx).reshape(-1)
    rows = reshape(g, (flat.size, d))
    if padding_idx is not None:
        rows = ew.mul(rows, (flat != padding_idx).astype(dtype_of(g))[:, None])
    return bind(scatter_add_p, rows, flat, key=(("a", 0),), shape=(v, d))


def _embedding_shape(weight, idx, padding_idx):
    if len(weight.shape) != 2:
        raise ShapeError(f"embedding: weight must be 2-d (num_embeddings, embedding_dim), got "
                         f"shape {list(weight.shape)}")
    if idx.dtype.kind not in "iu":
        raise ShapeError(f"embedding: indices must be integers (int64), got {idx.dtype}",
                         fix="convert them with .long()")
    return Aval(tuple(idx.shape) + (weight.shape[1],), weight.dtype)


embedding_p = register(Primitive(
    "embedding", "index", lambda weight, idx, padding_idx: weight[idx], _embedding_shape,
    (_embedding_vjp, None), saves=(1,), node_name="EmbeddingBackward0",
    decompose=lambda weight, idx, padding_idx: weight[idx]))


def embedding(weight, indices, padding_idx=None):
    """weight[indices] for int64 indices in [0, num_embeddings) (checked)."""
    idx = indices._data if getattr(type(indices), "_lg_level", None) == 0 else indices
    idx = np.asarray(idx) if not hasattr(idx, "_lg_level") else idx
    n = shape_of(weight)[0]
    if isinstance(idx, np.ndarray) and idx.size and (idx.min() < 0 or idx.max() >= n):
        bad = idx[(idx < 0) | (idx >= n)].flat[0]
        raise IndexError(f"index out of range in self: embedding index {int(bad)} for a table "
                         f"of {n} rows")
    return bind(embedding_p, weight, idx, padding_idx=padding_idx)
