"""PyTorch spellings of the scans, sorting, structural and contraction ops: `llgrad.cumsum(x,
dim)`, `llgrad.sort` returning (values, indices), `llgrad.flip(x, dims)`, ... and the same as
Tensor methods (`x.cumsum(0)`), with PyTorch's semantics and argument names."""
from __future__ import annotations

from collections import namedtuple

import numpy as np

from llgrad.runtime import ops
from llgrad.runtime.autograd.graph import MultiNode, PrimNode, node_class
from llgrad.runtime.aval import ShapeError
from llgrad.runtime.ops._util import shape_of
from llgrad.runtime.prim import _DEFAULT

ValuesIndices = namedtuple("ValuesIndices", ["values", "indices"])


def named(t, name: str, src=None):
    """`t`, made from `src` by ops, its node classed as PyTorch names the function that made
    it: x.t() is TBackward0 where the primitive is permute's, torch.stack's node is
    StackBackward0 where ours is a concatenation (see Note [Node classes]). A result that is
    `src` itself, has no node of its own (or is not an eager tensor) is left alone."""
    n = getattr(t, "_grad_fn", None)
    if n is not None and t is not src and n is not getattr(src, "_grad_fn", None) and \
            isinstance(n, PrimNode) and not isinstance(n, MultiNode):
        n.__class__ = node_class(name)
    return t


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


# ---- gather/scatter along a dimension, selection (runtime/ops/torch_index.py) --------------------------
def gather(input, dim, index, *, sparse_grad=False):
    return ops.gather_dim(input, dim, index)


def scatter(input, dim, index, src=None, *, value=None, reduce=None):
    """PyTorch's scatter: src (a tensor) or value (a number, also given as `src`) written at
    `index` along `dim`, in a copy of input."""
    if reduce is not None:
        raise NotImplementedError("scatter(reduce=...) is not supported; use scatter_add for "
                                  "'add', or scatter_reduce semantics written with ops")
    if src is not None and not hasattr(src, "shape"):
        src, value = None, src  # scatter(input, dim, index, 1.5): the value form
    return ops.scatter_dim(input, dim, index, src, value)


def scatter_add(input, dim, index, src):
    return ops.scatter_add_dim(input, dim, index, src)


def index_select(input, dim, index):
    return ops.index_select(input, dim, index)


def index_add(input, dim, index, source, *, alpha=1):
    return ops.index_add_dim(input, dim, index, source, alpha)


def topk(input, k, dim=-1, largest=True, sorted=True):
    return ops.topk(input, k, dim, largest, sorted)


def _condition(c):
    """An eager boolean condition as a copy of its values: it needs no gradient, so PyTorch's
    node has no edge for it (where's next_functions are its operands', masked_fill's the
    input's alone); copied, so changing the mask in place afterwards cannot change the
    gradient."""
    if type(c) is _DEFAULT[0] and c._data.dtype == np.bool_:
        return c._data.copy()
    return c


def where(condition, input, other):
    """`input` where `condition`, else `other` (WhereBackward0 over the two operands)."""
    return ops.where(_condition(condition), input, other)


def masked_fill(input, mask, value):
    """input with `value` where the boolean `mask` (broadcast to input's shape) is True; the
    result keeps input's dtype (a tensor value is cast to it)."""
    if getattr(mask, "dtype", None) != np.bool_:
        raise TypeError(f"masked_fill only supports boolean masks, but got mask with dtype "
                        f"{getattr(mask, 'dtype', type(mask).__name__)}")
    if hasattr(value, "shape"):
        if len(shape_of(value)) != 0:
            raise ValueError(f"masked_fill only supports a 0-dimensional value tensor, but "
                             f"got tensor with {len(shape_of(value))} dimension(s)")
        value = ops.astype(value, input._np_dtype)
    try:
        fits = tuple(np.broadcast_shapes(shape_of(input), shape_of(mask))) == shape_of(input)
    except ValueError:
        fits = False
    if not fits:
        raise ShapeError(f"masked_fill: the mask of shape {list(shape_of(mask))} does not "
                         f"broadcast to the input's shape {list(shape_of(input))}")
    return ops.where(_condition(mask), value, input)


def chunk(input, chunks, dim=0):
    """At most `chunks` pieces of equal size (the last smaller) along `dim`."""
    if chunks <= 0:
        raise ValueError(f"chunk expects `chunks` to be greater than 0, got: {chunks}")
    n = shape_of(input)[dim]
    return split(input, max(-(-n // chunks), 1), dim)


def split(tensor, split_size_or_sections, dim=0):
    """Pieces of `split_size_or_sections` along `dim` (the last smaller), or of the sizes in a
    list; each a view (SplitBackward0 / SplitWithSizesBackward0 by name)."""
    name = "SplitBackward0" if isinstance(split_size_or_sections, int) else \
        "SplitWithSizesBackward0"
    return tuple(named(p, name, tensor) for p in ops.split(tensor, split_size_or_sections, dim))


def unbind(input, dim=0):
    """The slices along `dim`, that dimension removed."""
    n = shape_of(input)[dim]
    return tuple(named(select(input, dim, i), "UnbindBackward0", input) for i in range(n))


def stack(tensors, dim=0):
    """The tensors (of one shape) joined along a new dimension `dim` (StackBackward0)."""
    return named(ops.stack(tensors, dim), "StackBackward0")


def repeat(input, *sizes):
    """`input` tiled `sizes` times along each dimension (RepeatBackward0)."""
    return named(ops.repeat(input, *sizes), "RepeatBackward0", input)


def reciprocal(input):
    return named(ops.reciprocal(input), "ReciprocalBackward0", input)


def bmm(input, mat2):
    """Batched matrix product of (b, n, m) and (b, m, p) tensors (BmmBackward0); no
    broadcasting, as PyTorch's."""
    sa, sb = shape_of(input), shape_of(mat2)
    if len(sa) != 3 or len(sb) != 3:
        raise ShapeError(f"bmm: batch1 and batch2 must be 3D tensors, got shapes {list(sa)} "
                         f"and {list(sb)}", fix="use matmul (@) for other ranks")
    if sa[0] != sb[0] or sa[2] != sb[1]:
        raise ShapeError(f"bmm: shapes {list(sa)} and {list(sb)} do not fit (batch sizes "
                         f"must be equal and {sa[2]} must equal {sb[1]})")
    return named(ops.matmul(input, mat2), "BmmBackward0", input)


def select(input, dim, index):
    nd = len(shape_of(input))
    dim = dim % nd if nd else dim
    return ops.getitem(input, (slice(None),) * dim + (int(index),))


def narrow(input, dim, start, length):
    n = shape_of(input)[dim]
    start = int(start) + (n if start < 0 else 0)
    if not (0 <= start and start + length <= n):
        raise IndexError(f"start ({start}) + length ({length}) exceeds dimension size ({n}).")
    return ops.slice_axis(input, dim, start, start + length)


def clone(input, *, memory_format=None):
    return ops.copy(input)


def addmm(input, mat1, mat2, *, beta=1, alpha=1):
    """beta * input + alpha * (mat1 @ mat2), one node (AddmmBackward0)."""
    return ops.addmm(input, mat1, mat2, beta, alpha)


def linear(input, weight, bias=None):
    """input @ weight.T + bias as PyTorch's F.linear: AddmmBackward0 over weight.t()'s
    TBackward0 (runtime/ops/linalg.py `affine`)."""
    wt = weight.t() if hasattr(weight, "t") else ops.transpose(weight)
    return ops.affine(input, wt, bias)


__all__ = ["where", "split", "stack", "repeat", "reciprocal", "bmm", "cumsum", "cumprod", "cummax", "cummin", "sort", "argsort", "flip", "roll", "tril",
           "triu", "diag", "diagonal", "trace", "diff", "tile", "repeat_interleave",
           "take_along_dim", "tensordot", "einsum", "kron", "cross", "meshgrid",
           "gather", "scatter", "scatter_add", "index_select", "index_add", "topk",
           "masked_fill", "chunk", "unbind", "select", "narrow", "clone", "addmm"]
