"""Linear algebra: the matmul primitive on (..., m, k) @ (..., k, n) with equal batch dims, and
matmul/dot/mm/outer for every rank, built on it with reshapes and broadcasts; addmm (bias +
a @ b, PyTorch's AddmmBackward0, the node of a Linear layer) as a composite primitive."""
from __future__ import annotations

import numpy as np

from llgrad.runtime.aval import Aval
from llgrad.runtime.complex_values import cmul, is_complex
from llgrad.runtime.errors import ShapeError
from llgrad.runtime.ops._util import dtype_of, operands, shape_of
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


def _addmm_impl(bias, a, b, beta, alpha):
    out = np.matmul(a, b)
    if alpha != 1:
        out = np.multiply(out, np.asarray(alpha, out.dtype))
    return np.add(out, bias if beta == 1 else np.multiply(bias, np.asarray(beta, out.dtype)))


def _addmm_shape(bias, a, b, beta, alpha):
    if len(a.shape) != 2 or len(b.shape) != 2 or a.shape[1] != b.shape[0]:
        raise ShapeError(f"addmm: mat1 and mat2 shapes cannot be multiplied "
                         f"({a.shape[0] if a.shape else 1}x{a.shape[-1] if a.shape else 1} and "
                         f"{b.shape[0] if b.shape else 1}x{b.shape[-1] if b.shape else 1})")
    out = (a.shape[0], b.shape[1])
    try:
        fits = np.broadcast_shapes(tuple(bias.shape), out) == out
    except ValueError:
        fits = False
    if not fits:
        raise ShapeError(f"addmm: the bias of shape {list(bias.shape)} does not broadcast to "
                         f"the product's shape {list(out)}")
    return Aval(out, a.dtype)


def _addmm_decompose(bias, a, b, beta, alpha):
    from llgrad.runtime.ops.elementwise import add, mul
    out = matmul(a, b)
    return add(out if alpha == 1 else mul(out, alpha), bias if beta == 1 else mul(bias, beta))


def _scaled(g, s):
    from llgrad.runtime.ops.elementwise import mul
    return g if s == 1 else mul(g, s)


addmm_p = register(Primitive(
    "addmm", "linalg", _addmm_impl, _addmm_shape,
    (lambda g, out, bias, a, b, beta, alpha: _scaled(g, beta),
     lambda g, out, bias, a, b, beta, alpha: _scaled(matmul(g, swapaxes(b, -1, -2)), alpha),
     lambda g, out, bias, a, b, beta, alpha: _scaled(matmul(swapaxes(a, -1, -2), g), alpha)),
    decompose=_addmm_decompose, node_name="AddmmBackward0"))


def addmm(bias, a, b, beta=1, alpha=1):
    """beta * bias + alpha * (a @ b) for matrices a (m, k) and b (k, n), bias broadcasting to
    (m, n): one node (AddmmBackward0), as PyTorch's addmm."""
    (bias, a, b), dt = operands(bias, a, b)
    if dt.kind != "f":
        return _addmm_decompose(bias, a, b, beta, alpha)
    return bind(addmm_p, bias, a, b, beta=beta, alpha=alpha)


def affine(x, wt, bias=None):
    """x @ wt + bias (F.linear, given the weight's transpose wt), as PyTorch computes it: with
    a bias and operands of one dtype, one AddmmBackward0 node, on x viewed as a matrix when
    it is not one (and the result viewed back: ViewBackward0 over AddmmBackward0)."""
    from llgrad.runtime.ops.elementwise import add
    sx = shape_of(x)
    if bias is None or len(shape_of(wt)) != 2 or not sx or \
            len({dtype_of(v) for v in (x, wt, bias)}) != 1:
        out = matmul(x, wt)
        return out if bias is None else add(out, bias)
    if len(sx) == 2:
        return addmm(bias, x, wt)
    out = addmm(bias, reshape(x, (-1, sx[-1])), wt)
    return reshape(out, sx[:-1] + shape_of(wt)[-1:])


def _fmt(s):
    return str(list(s))


def matmul(a, b):
    """numpy/PyTorch matmul semantics: 1-D promotion and batch broadcasting."""
    if is_complex(a) or is_complex(b):  # Note [Complex values are pairs]
        return cmul(a, b, matmul)
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
