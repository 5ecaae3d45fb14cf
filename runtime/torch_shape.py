"""PyTorch spellings of the scans, sorting, structural and contraction ops: `llgrad.cumsum(x,
dim)`, `llgrad.sort` returning (values, indices), `llgrad.flip(x, dims)`, ... and the same as
Tensor methods (`x.cumsum(0)`), with PyTorch's semantics and argument names."""
from __future__ import annotations

from collections import namedtuple

import numpy as np

from llgrad.runtime import ops
from llgrad.runtime.ops._util import shape_of

ValuesIndices = namedtuple("ValuesIndices", ["values", "indices"])


def _concrete_ints(v):
    """Repeat counts given as a tensor: their values (the output shape depends on them)."""
    data = getattr(v, "_data", None)
    return data if isinstance(data, np.ndarray) else v


def cumsum(input, dim, *, dtype=None):
    return ops.cumsum(input, dim, dtype)


def cumprod(input, dim, *, dtype=None):
    return ops.cumprod(input, dim, dtype)


def cummax(input, dim):
    return ValuesIndices(*ops.cummax(input, dim))


def cummin(input, dim):
    return ValuesIndices(*ops.cummin(input, dim))


def sort(input, dim=-1, descending=False, stable=False):
    """(values, indices), stable always (a valid choice for stable=False too)."""
    return ValuesIndices(ops.sort(input, dim, descending), ops.argsort(input, dim, descending))


def argsort(input, dim=-1, descending=False, stable=False):
    return ops.argsort(input, dim, descending)


def flip(input, dims):
    return ops.flip(input, (dims,) if isinstance(dims, int) else tuple(dims))


def roll(input, shifts, dims=None):
    return ops.roll(input, shifts, dims)


def tril(input, diagonal=0):
    return ops.tril(input, diagonal)


def triu(input, diagonal=0):
    return ops.triu(input, diagonal)


def diag(input, diagonal=0):
    return ops.diag(input, diagonal)


def diagonal(input, offset=0, dim1=0, dim2=1):
    return ops.diagonal(input, offset, dim1, dim2)


def trace(input):
    if len(shape_of(input)) != 2:
        raise RuntimeError(f"trace: expected a matrix, but got tensor with dim "
                           f"{len(shape_of(input))}")
    return ops.trace(input)


def diff(input, n=1, dim=-1, prepend=None, append=None):
    return ops.diff(input, n, dim, prepend, append)


def tile(input, dims):
    return ops.tile(input, dims)


def repeat_interleave(input, repeats, dim=None, *, output_size=None):
    return ops.repeat_interleave(input, _concrete_ints(repeats), dim)


def take_along_dim(input, indices, dim=None):
    return ops.take_along_axis(input, indices, dim)


def tensordot(a, b, dims=2):
    return ops.tensordot(a, b, dims)


def einsum(equation, *operands):
    return ops.einsum(equation, *operands)


def kron(input, other):
    return ops.kron(input, other)


def cross(input, other, dim=None):
    """torch.cross: along `dim`, or (deprecated default) the first dimension of size 3."""
    if dim is None:
        shape = np.broadcast_shapes(shape_of(input), shape_of(other))
        dim = next((d for d, n in enumerate(shape) if n == 3), -1)
    return ops.cross(input, other, dim)


def meshgrid(*tensors, indexing="ij"):
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        tensors = tuple(tensors[0])
    return tuple(ops.meshgrid(*tensors, indexing=indexing))


__all__ = ["cumsum", "cumprod", "cummax", "cummin", "sort", "argsort", "flip", "roll", "tril",
           "triu", "diag", "diagonal", "trace", "diff", "tile", "repeat_interleave",
           "take_along_dim", "tensordot", "einsum", "kron", "cross", "meshgrid"]
