"""Shape primitives (reshape, transpose, broadcast_to, concatenate) and the ops built on them
(squeeze, unsqueeze, flatten, expand, stack, split, repeat, sum_to, movedim)."""
from __future__ import annotations

import math

import numpy as np

from llgrad.runtime.aval import Aval, ShapeError, normalize_axes
from llgrad.runtime.ops._util import as_operand, shape_of
from llgrad.runtime.prim import Primitive, bind, is_value, register
from llgrad.runtime.promotion import coerce, strong


def _reshape_shape(x, shape):
    if math.prod(x.shape) != math.prod(shape):
        raise ShapeError(f"cannot reshape {list(x.shape)} into {list(shape)}: element counts "
                         f"differ", fix="check the target shape (use -1 for one inferred size)")
    return Aval(tuple(shape), x.dtype)


reshape_p = register(Primitive(
    "reshape", "shape", lambda x, shape: np.reshape(x, shape), _reshape_shape,
    (lambda g, out, x, shape: reshape(g, shape_of(x)),), saves=(),
    node_name="ViewBackward0", linear="linear", batch=lambda b, s, o, p: s[0][0] == o[0][0]))


def _inverse_perm(perm):
    return tuple(int(i) for i in np.argsort(perm))


transpose_p = register(Primitive(
    "transpose", "shape", lambda x, perm: np.transpose(x, perm),
    lambda x, perm: Aval(tuple(x.shape[p] for p in perm), x.dtype),
    (lambda g, out, x, perm: transpose(g, _inverse_perm(perm)),), saves=(),
    node_name="PermuteBackward0", linear="linear", batch=lambda b, s, o, p: p["perm"][0] == 0))


def _broadcast_shape(x, shape):
    try:
        np.broadcast_shapes(x.shape, shape)
    except ValueError:
        raise ShapeError(f"cannot broadcast shape {list(x.shape)} to {list(shape)}") from None
    return Aval(tuple(shape), x.dtype)


broadcast_to_p = register(Primitive(
    "broadcast_to", "shape", lambda x, shape: np.broadcast_to(x, shape), _broadcast_shape,
    (lambda g, out, x, shape: sum_to(g, shape_of(x)),), saves=(),
    node_name="ExpandBackward0", linear="linear",
    batch=lambda b, s, o, p: len(s[0]) == len(p["shape"])))


def _concat_shape(*xs, axis):
    base = list(xs[0].shape)
    for x in xs[1:]:
        if len(x.shape) != len(base) or any(
                a != b for i, (a, b) in enumerate(zip(x.shape, base)) if i != axis):
            raise ShapeError(f"concatenate: shapes {[list(x.shape) for x in xs]} differ outside "
                             f"axis {axis}")
    base[axis] = sum(x.shape[axis] for x in xs)
    return Aval(tuple(base), xs[0].dtype)


def _concat_vjp(i, g, out, *xs, axis):
    from llgrad.runtime.ops.index import slice_axis
    start = sum(shape_of(x)[axis] for x in xs[:i])
    return slice_axis(g, axis, start, start + shape_of(xs[i])[axis])


concatenate_p = register(Primitive(
    "concatenate", "shape", lambda *xs, axis: np.concatenate(xs, axis=axis), _concat_shape,
    _concat_vjp, saves=(), numpy=(), node_name="CatBackward0", linear="linear",
    batch=lambda b, s, o, p: all(b) and p["axis"] % len(o[0]) != 0))


# ---- the ops API ------------------------------------------------------------------------------
def _resolve_shape(shape, size):
    shape = list(shape)
    if shape.count(-1) > 1:
        raise ShapeError(f"only one dimension can be inferred in shape {shape}")
    if -1 in shape:
        known = math.prod(d for d in shape if d != -1)
        if known == 0 or size % known:
            raise ShapeError(f"cannot reshape {size} elements into {shape}")
        shape[shape.index(-1)] = size // known
    return tuple(int(d) for d in shape)


def reshape(x, *shape):
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        shape = shape[0]
    x = as_operand(x)
    old = shape_of(x)
    new = _resolve_shape(shape, math.prod(old))
    if new == old:
        return x
    if not is_value(x):
        return np.reshape(x, new)
    return bind(reshape_p, x, shape=new)


def transpose(x, perm=None):
    x = as_operand(x)
    nd = len(shape_of(x))
    perm = tuple(range(nd))[::-1] if perm is None else tuple(int(p) % max(nd, 1) for p in perm)
    if sorted(perm) != list(range(nd)):
        raise ShapeError(f"transpose: {list(perm)} is not a permutation of {nd} dimensions")
    if perm == tuple(range(nd)):
        return x
    return bind(transpose_p, x, perm=perm)


def swapaxes(x, a, b):
    nd = len(shape_of(x))
    perm = list(range(nd))
    a, b = a % nd, b % nd
    perm[a], perm[b] = perm[b], perm[a]
    return transpose(x, perm)


def movedim(x, source, destination):
    nd = len(shape_of(x))
    order = [d for d in range(nd) if d != source % nd]
    order.insert(destination % nd, source % nd)
    return transpose(x, order)


def broadcast_to(x, shape):
    x = as_operand(x)
    shape = tuple(int(d) for d in shape)
    if shape_of(x) == shape:
        return x
    if not is_value(x):
        return np.broadcast_to(x, shape)
    return bind(broadcast_to_p, x, shape=shape)


def expand(x, *sizes):
    if len(sizes) == 1 and isinstance(sizes[0], (tuple, list)):
        sizes = sizes[0]
    old = shape_of(x)
    lead = len(sizes) - len(old)
    shape = [s if s != -1 else old[i - lead] for i, s in enumerate(sizes)]
    return broadcast_to(x, shape)


def sum_to(g, shape):
    """Sum `g` down to `shape` (the reverse of broadcasting)."""
    from llgrad.runtime.ops.reduce import reduce_sum
    gs = shape_of(g)
    if gs == tuple(shape):
        return g
    lead = len(gs) - len(shape)
    inner = tuple(lead + i for i, d in enumerate(shape) if d == 1 and gs[lead + i] != 1)
    if not inner:  # only leading axes: one reduction gives the shape (the bias-add case)
        return reduce_sum(g, tuple(range(lead)), keepdims=False) if lead else g
    g = reduce_sum(g, tuple(range(lead)) + inner, keepdims=True)
    return reshape(g, shape)


def squeeze(x, dim=None):
    old = shape_of(x)
    if dim is None:
        new = tuple(d for d in old if d != 1)
    else:
        dims = normalize_axes(dim, len(old))
        new = tuple(d for i, d in enumerate(old) if not (i in dims and d == 1))
    return reshape(x, new)


def unsqueeze(x, dim):
    old = list(shape_of(x))
    dim = dim % (len(old) + 1)
    old.insert(dim, 1)
    return reshape(x, old)


def flatten(x, start_dim=0, end_dim=-1):
    old = shape_of(x)
    if not old:
        return reshape(x, (1,))
    s, e = start_dim % len(old), end_dim % len(old)
    return reshape(x, old[:s] + (math.prod(old[s:e + 1]),) + old[e + 1:])


def concatenate(xs, axis=0):
    xs, _, _ = coerce(None, [strong(x) for x in xs])
    nd = len(shape_of(xs[0]))
    if any(len(shape_of(x)) != nd for x in xs):
        raise ShapeError(f"concatenate: all inputs need the same number of dimensions, got "
                         f"shapes {[list(shape_of(x)) for x in xs]}")
    axis = axis % max(nd, 1)
    if len(xs) == 1:
        return xs[0]
    if not any(is_value(x) for x in xs):
        return np.concatenate(xs, axis=axis)
    return bind(concatenate_p, *xs, axis=axis)


def stack(xs, axis=0):
    xs = [strong(x) for x in xs]  # numpy makes its arguments arrays first
    shapes = {shape_of(x) for x in xs}
    if len(shapes) > 1:
        raise ShapeError(f"stack expects each input to have the same shape, got "
                         f"{[list(shape_of(x)) for x in xs]}")
    nd = len(shapes.pop()) + 1
    return concatenate([unsqueeze(x, axis % nd) for x in xs], axis % nd)


def split(x, split_size_or_sections, dim=0):
    """PyTorch's split: chunks of a given size, or a list of section sizes."""
    from llgrad.runtime.ops.index import slice_axis
    n = shape_of(x)[dim]
    if isinstance(split_size_or_sections, int):
        sizes = [split_size_or_sections] * (n // split_size_or_sections)
        if n % split_size_or_sections:
            sizes.append(n % split_size_or_sections)
    else:
        sizes = list(split_size_or_sections)
        if sum(sizes) != n:
            raise ShapeError(f"split sizes {sizes} do not sum to dimension size {n}")
    out, start = [], 0
    for s in sizes:
        out.append(slice_axis(x, dim, start, start + s))
        start += s
    return tuple(out)


def repeat(x, *reps):
    """PyTorch's repeat (numpy's tile): broadcast an interleaved shape, then merge."""
    if len(reps) == 1 and isinstance(reps[0], (tuple, list)):
        reps = tuple(reps[0])
    old = shape_of(x)
    if len(reps) < len(old):
        raise ShapeError("repeat: number of repeat dims can not be smaller than number of "
                         "tensor dims")
    old = (1,) * (len(reps) - len(old)) + old
    x = reshape(x, tuple(v for d in old for v in (1, d)))
    x = broadcast_to(x, tuple(v for r, d in zip(reps, old) for v in (r, d)))
    return reshape(x, tuple(r * d for r, d in zip(reps, old)))


def ravel(x):
    return reshape(x, (-1,))

