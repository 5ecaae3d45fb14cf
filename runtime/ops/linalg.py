"""Linear algebra: the matmul primitive on (..., m, k) @ (..., k, n) with equal batch dims, and
matmul/dot/mm/outer for every rank, built on it with reshapes and broadcasts."""
from __future__ import annotations

import numpy as np

from llgrad.runtime.aval import Aval
from llgrad.runtime.errors import ShapeError
from llgrad.runtime.ops._util import operands, shape_of
from llgrad.runtime.ops.shape import broadcast_to, reshape, swapaxes
from llgrad.runtime.prim import Primitive, bind, register


def _matmul_shape(a, b):
    if len(a.shape) < 2 or a.shape[:-2] != b.shape[:-2] or a.shape[-1] != b.shape[-2]:
        raise ShapeError(f"matmul: shapes {list(a.shape)} and {list(b.shape)} do not fit")
    return Aval(a.shape[:-1] + b.shape[-1:], a.dtype)


matmul_p = register(Primitive(
    "matmul", "linalg", np.matmul, _matmul_shape,
    (lambda g, out, a, b: matmul(g, swapaxes(b, -1, -2)),
     lambda g, out, a, b: matmul(swapaxes(a, -1, -2), g)),
    saves=(0, 1), numpy=(), node_name="MmBackward0", linear="multilinear",
    batch=lambda b, s, o, p: (b[0] and not b[1] and len(s[0]) >= 2)
    or (b[1] and len(s[1]) >= 3 and (not b[0] or len(s[0]) >= 3))))


def _fmt(s):
    return str(list(s))


def matmul(a, b):
    """numpy/PyTorch matmul semantics: 1-D promotion and batch broadcasting."""
    (a, b), dt = operands(a, b)
    sa, sb = shape_of(a), shape_of(b)
    if not sa or not sb:
        raise ShapeError(f"matmul: both arguments need at least 1 dimension, got shapes "
                         f"{_fmt(sa)} and {_fmt(sb)}", fix="use * for scalar multiplication")
    a2 = reshape(a, (1,) + sa) if len(sa) == 1 else a
    b2 = reshape(b, sb + (1,)) if len(sb) == 1 else b
    sa2, sb2 = shape_of(a2), shape_of(b2)
    if sa2[-1] != sb2[-2]:
        raise ShapeError(f"matmul: shapes {_fmt(sa)} and {_fmt(sb)} are not aligned "
                         f"({sa2[-1]} != {sb2[-2]})",
                         fix="check the operand order or transpose one operand (.T)")
    try:
        batch = tuple(np.broadcast_shapes(sa2[:-2], sb2[:-2]))
    except ValueError:
        raise ShapeError(f"matmul: batch dimensions of {_fmt(sa)} and {_fmt(sb)} cannot be "
                         f"broadcast") from None
    a2 = broadcast_to(a2, batch + sa2[-2:])
    b2 = broadcast_to(b2, batch + sb2[-2:])
    out = bind(matmul_p, a2, b2)
    shape = batch + ((sa2[-2],) if len(sa) > 1 else ()) + ((sb2[-1],) if len(sb) > 1 else ())
    return reshape(out, shape)


def dot(a, b):
    """numpy.dot for 1-D and 2-D operands (and scalars)."""
    if not shape_of(a) or not shape_of(b):
        from llgrad.runtime.ops.elementwise import mul
        return mul(a, b)
    if len(shape_of(a)) > 2 or len(shape_of(b)) > 2:
        raise ShapeError("dot: operands of more than 2 dimensions are not supported",
                         fix="use matmul (@) or tensordot semantics explicitly")
    return matmul(a, b)


def outer(a, b):
    return matmul(reshape(a, (-1, 1)), reshape(b, (1, -1)))
