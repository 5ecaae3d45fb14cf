"""einsum and the contractions built like it (tensordot, inner, vdot, kron), plus the
linalg_cross composite (PyTorch's LinalgCrossBackward0).

einsum is written with other ops, so its gradient is the einsum of the cotangent with the
subscripts permuted, itself differentiable, without a rule of its own.
See Note [einsum as ops].
"""
from __future__ import annotations

import numpy as np

from llgrad.runtime.aval import Aval, ShapeError, normalize_axes
from llgrad.runtime.ops import elementwise as ew
from llgrad.runtime.ops._util import operands, shape_of
from llgrad.runtime.prim import Primitive, bind, register

# Note [einsum as ops]
# Each operand first loses its repeated labels ('ii' -> a diagonal) and the labels that no
# other operand nor the output uses (summed). Operands are then contracted left to right: the
# labels both share and still needed later are batch dimensions, the shared ones not needed
# later are contracted, the rest are free. A contraction is one matmul on (batch, M, K) @
# (batch, K, N) after transposes and reshapes (views); with nothing to contract it is a
# broadcast multiply, and with M = N = 1 a multiply and a sum (a batched dot, which fuses).
# Size-1 dimensions broadcast against the label's size elsewhere, as numpy allows. The result
# is transposed to the output's label order.

_LETTERS = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")


def _parse(subscripts: str, shapes):
    """(per-operand label lists, output labels); ellipsis dims get private labels."""
    spec = subscripts.replace(" ", "")
    lhs, arrow, out = spec.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(shapes):
        raise ShapeError(f"einsum: {subscripts!r} names {len(terms)} operands, "
                         f"got {len(shapes)}")
    for t in terms + ([out] if arrow else []):
        if set(t.replace("...", "")) - _LETTERS:
            raise ShapeError(f"einsum: invalid subscripts {subscripts!r}",
                             fix="use letters, ',', '->' and '...'")
    n_ell = 0
    for t, s in zip(terms, shapes):
        plain = len(t.replace("...", ""))
        if "..." in t:
            n_ell = max(n_ell, len(s) - plain)
        elif plain != len(s):
            raise ShapeError(f"einsum: operand of shape {list(s)} has {len(s)} dimensions, "
                             f"but its subscripts {t!r} name {plain}")
    ell = [chr(0x100 + i) for i in range(n_ell)]  # private labels, never user letters
    labels = []
    for t, s in zip(terms, shapes):
        k = len(s) - len(t.replace("...", "")) if "..." in t else 0
        a, _, b = t.partition("...")
        labels.append(list(a) + ell[n_ell - k:] + list(b) if "..." in t else list(t))
    if not arrow:
        counts = {}
        for ls in labels:
            for c in ls:
                counts[c] = counts.get(c, 0) + 1
        output = ell + sorted(c for c, n in counts.items() if n == 1 and c in _LETTERS)
    else:
        if "..." not in out and n_ell and any(
                len(s) > len(t.replace("...", "")) for t, s in zip(terms, shapes)):
            raise ShapeError(f"einsum: {subscripts!r}: the output has no '...' for the "
                             f"broadcast dimensions")
        a, _, b = out.partition("...")
        output = list(a) + (ell if "..." in out else []) + list(b)
        if len(set(output)) != len(output):
            raise ShapeError(f"einsum: output subscripts in {subscripts!r} repeat a label")
        missing = set(output) - {c for ls in labels for c in ls}
        if missing:
            raise ShapeError(f"einsum: output label {sorted(missing)[0]!r} appears in no "
                             f"operand of {subscripts!r}")
    return labels, output


def _sizes(labels, shapes, subscripts):
    size = {}
    for ls, s in zip(labels, shapes):
        for c, d in zip(ls, s):
            if size.get(c, 1) == 1:
                size[c] = d
            elif d not in (1, size[c]):
                raise ShapeError(f"einsum: label {c!r} in {subscripts!r} has sizes "
                                 f"{size[c]} and {d}")
    return size


def _prepare(x, ls, size, needed):
    """Take diagonals of repeated labels, broadcast size-1 dims, sum labels not `needed`."""
    from llgrad.runtime.ops.reduce import reduce_sum
    from llgrad.runtime.ops.shape import broadcast_to
    from llgrad.runtime.ops.structure import diagonal
    ls = list(ls)
    while len(set(ls)) != len(ls):
        c = next(c for c in ls if ls.count(c) > 1)
        i = ls.index(c)
        j = ls.index(c, i + 1)
        if shape_of(x)[i] != shape_of(x)[j]:
            raise ShapeError(f"einsum: repeated label {c!r} on dimensions of sizes "
                             f"{shape_of(x)[i]} and {shape_of(x)[j]}")
        x = diagonal(x, 0, i, j)
        ls = [d for k, d in enumerate(ls) if k not in (i, j)] + [c]
    x = broadcast_to(x, tuple(size[c] for c in ls))
    drop = tuple(k for k, c in enumerate(ls) if c not in needed)
    if drop:
        x = reduce_sum(x, drop)
        ls = [c for k, c in enumerate(ls) if k not in drop]
    return x, ls


def _arrange(x, ls, order, shape):
    from llgrad.runtime.ops.shape import reshape, transpose
    return reshape(transpose(x, [ls.index(c) for c in order]), shape)


def _contract(a, la, b, lb, keep, size):
    from llgrad.runtime.ops.linalg import matmul
    from llgrad.runtime.ops.reduce import reduce_sum
    batch = [c for c in la if c in lb and c in keep]
    summed = [c for c in la if c in lb and c not in keep]
    fa = [c for c in la if c not in lb]
    fb = [c for c in lb if c not in la]
    sz = lambda cs: tuple(size[c] for c in cs)  # noqa: E731
    n = lambda cs: int(np.prod(sz(cs), dtype=np.int64))  # noqa: E731
    if not summed or (not fa and not fb):  # a broadcast product (and a sum)
        a2 = _arrange(a, la, batch + fa + summed, sz(batch + fa) + (1,) * len(fb) + sz(summed))
        b2 = _arrange(b, lb, batch + fb + summed, sz(batch) + (1,) * len(fa) + sz(fb + summed))
        r = ew.mul(a2, b2)
        if summed:
            nb = len(batch + fa + fb)
            r = reduce_sum(r, tuple(range(nb, nb + len(summed))))
        return r, batch + fa + fb
    lead = (n(batch),) if batch else ()
    a2 = _arrange(a, la, batch + fa + summed, lead + (n(fa), n(summed)))
    b2 = _arrange(b, lb, batch + summed + fb, lead + (n(summed), n(fb)))
    from llgrad.runtime.ops.shape import reshape
    return reshape(matmul(a2, b2), sz(batch + fa + fb)), batch + fa + fb


def einsum(subscripts: str, *xs):
    """numpy's einsum: any subscripts numpy accepts (implicit output, '...', repeated labels
    such as 'ii->i' and 'ii'); the sublist form is not supported."""
    if not isinstance(subscripts, str):
        raise NotImplementedError("einsum: the sublist form einsum(a, [0, 1], ...) is not "
                                  "supported; write the subscripts as a string")
    if len(xs) == 1 and isinstance(xs[0], (list, tuple)):
        xs = tuple(xs[0])  # PyTorch's einsum(eq, [a, b])
    xs, _ = operands(*xs)
    shapes = [shape_of(x) for x in xs]
    labels, output = _parse(subscripts, shapes)
    size = _sizes(labels, shapes, subscripts)
    prepared = []
    for k, (x, ls) in enumerate(zip(xs, labels)):
        later = {c for m, other in enumerate(labels) if m != k for c in other}
        prepared.append(_prepare(x, ls, size, later | set(output)))
    acc, la = prepared[0]
    for k in range(1, len(prepared)):
        keep = set(output) | {c for _, ls in prepared[k + 1:] for c in ls}
        b, lb = prepared[k]
        acc, la = _contract(acc, la, b, lb, keep, size)
    from llgrad.runtime.ops.shape import transpose
    return transpose(acc, [la.index(c) for c in output])


# ---- contractions written as einsums ---------------------------------------------------------
def _labels(n, start=0):
    return "".join(chr(ord("a") + start + i) if start + i < 26 else chr(ord("A") + start + i - 26)
                   for i in range(n))


def tensordot(a, b, axes=2):
    """numpy's tensordot: sum over the last `axes` dims of a and the first of b, or over the
    pairs of axes given as two lists."""
    na, nb = len(shape_of(a)), len(shape_of(b))
    if isinstance(axes, (int, np.integer)):
        ax_a, ax_b = list(range(na - axes, na)), list(range(axes))
    else:
        ax_a, ax_b = ([x] if isinstance(x, (int, np.integer)) else list(x) for x in axes)
    ax_a = [normalize_axes(x, na)[0] for x in ax_a]
    ax_b = [normalize_axes(x, nb)[0] for x in ax_b]
    if len(ax_a) != len(ax_b):
        raise ShapeError("tensordot: the two axis lists differ in length")
    la, lb = list(_labels(na)), list(_labels(nb, na))
    for i, j in zip(ax_a, ax_b):
        if shape_of(a)[i] != shape_of(b)[j]:
            raise ShapeError(f"tensordot: shape mismatch for sum: {list(shape_of(a))} axis "
                             f"{i} and {list(shape_of(b))} axis {j}")
        lb[j] = la[i]
    out = [c for k, c in enumerate(la) if k not in ax_a] + \
        [c for k, c in enumerate(lb) if k not in ax_b]
    return einsum(f"{''.join(la)},{''.join(lb)}->{''.join(out)}", a, b)


def inner(a, b):
    """numpy's inner: a sum over the last axes (a product when either is 0-d)."""
    if not shape_of(a) or not shape_of(b):
        return ew.mul(a, b)
    return tensordot(a, b, ([-1], [-1]))


def vdot(a, b):
    """numpy's vdot on real arrays: the dot product of the flattened arrays."""
    from llgrad.runtime.ops.shape import reshape
    return einsum("i,i", reshape(a, (-1,)), reshape(b, (-1,)))


def kron(a, b):
    """numpy's kron: blocks a[i, j] * b, for any ranks (the shorter shape padded with 1s)."""
    from llgrad.runtime.ops.shape import reshape
    (a, b), _ = operands(a, b)
    nd = max(len(shape_of(a)), len(shape_of(b)))
    sa = (1,) * (nd - len(shape_of(a))) + shape_of(a)
    sb = (1,) * (nd - len(shape_of(b))) + shape_of(b)
    a2 = reshape(a, tuple(v for d in sa for v in (d, 1)))
    b2 = reshape(b, tuple(v for d in sb for v in (1, d)))
    return reshape(ew.mul(a2, b2), tuple(x * y for x, y in zip(sa, sb)))


# ---- cross product ---------------------------------------------------------------------------
def _cross_parts(a, b, axis):
    from llgrad.runtime.ops.index import slice_axis
    from llgrad.runtime.ops.shape import concatenate
    c = [slice_axis(a, axis, i, i + 1) for i in range(3)]
    d = [slice_axis(b, axis, i, i + 1) for i in range(3)]
    parts = [ew.sub(ew.mul(c[(i + 1) % 3], d[(i + 2) % 3]), ew.mul(c[(i + 2) % 3], d[(i + 1) % 3]))
             for i in range(3)]
    return concatenate(parts, axis)


def _cross_shape(a, b, axis):
    if a.shape != b.shape or a.shape[axis] != 3:
        raise ShapeError(f"cross: shapes {list(a.shape)} and {list(b.shape)} need size 3 on "
                         f"axis {axis}")
    return Aval(a.shape, a.dtype)


linalg_cross_p = register(Primitive(
    "linalg_cross", "linalg", lambda a, b, axis: np.cross(a, b, axis=axis), _cross_shape,
    (lambda g, out, a, b, axis: bind(linalg_cross_p, b, g, axis=axis),
     lambda g, out, a, b, axis: bind(linalg_cross_p, g, a, axis=axis)),
    saves=(0, 1), decompose=_cross_parts, node_name="LinalgCrossBackward0"))


def cross(a, b, axis=-1):
    """The cross product of 3-vectors along `axis` (a and b broadcast against each other)."""
    from llgrad.runtime.ops.shape import broadcast_to
    (a, b), _ = operands(a, b)
    shape = tuple(np.broadcast_shapes(shape_of(a), shape_of(b)))
    axis = normalize_axes(axis, len(shape))[0]
    if shape[axis] != 3:
        raise ShapeError(f"cross: the vectors need 3 components along axis {axis}, got "
                         f"shapes {list(shape_of(a))} and {list(shape_of(b))}",
                         fix="2-d vectors: compute a[0] * b[1] - a[1] * b[0] directly")
    return bind(linalg_cross_p, broadcast_to(a, shape), broadcast_to(b, shape), axis=axis)
