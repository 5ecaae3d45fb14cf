"""scipy.linalg's special matrices on llgrad values, with scipy's signatures: block_diag,
toeplitz and circulant. Each is a gather of its inputs at constant positions (or a
concatenation of padded blocks), so gradients are the primitives'. `SCIPY` joins
runtime/numpy_api.LAZY (Note [Lazily named functions] there)."""
from __future__ import annotations

import numpy as np

from llgrad.runtime import ops
from llgrad.runtime.conversions import array_from
from llgrad.runtime.errors import UnsupportedError, user_loc
from llgrad.runtime.ops._util import dtype_of, shape_of


def block_diag(*arrs):
    """scipy.linalg.block_diag: the arrays (0-d and 1-d ones as one row) on the diagonal of a
    matrix of zeros."""
    if not arrs:
        return np.empty((1, 0))
    blocks = []
    for a in arrs:
        a = array_from(a)
        nd = len(shape_of(a))
        if nd > 2:
            raise ValueError(f"arguments in the following positions have dimension greater "
                             f"than 2: {[i for i, x in enumerate(arrs) if np.ndim(x) > 2]}")
        blocks.append(ops.reshape(a, (1, -1)) if nd < 2 else a)
    dt = np.result_type(*[dtype_of(b) for b in blocks])
    width = sum(shape_of(b)[1] for b in blocks)
    rows, col = [], 0
    for b in blocks:
        c = shape_of(b)[1]
        rows.append(ops.pad(ops.astype(b, dt), ((0, 0), (col, width - col - c))))
        col += c
    return ops.concatenate(rows, 0)


def _along_last(v, idx):
    """v[..., idx] for a constant integer matrix idx."""
    return ops.getitem(v, (Ellipsis, idx))


def toeplitz(c, r=None):
    """scipy.linalg.toeplitz: T[..., i, j] = c[..., i - j] below the diagonal and r[..., j - i]
    above it (r defaults to c; r[0] is ignored); leading axes are a batch."""
    c = array_from(c)
    if dtype_of(c).kind == "c":
        raise UnsupportedError("scipy.linalg.toeplitz of complex values is not supported on "
                               "traced values", loc=user_loc())
    r = c if r is None else array_from(r)
    nd = max(len(shape_of(c)), len(shape_of(r)), 1)
    c, r = (ops.reshape(v, (1,) * (nd - len(shape_of(v))) + shape_of(v)) for v in (c, r))
    batch = np.broadcast_shapes(shape_of(c)[:-1], shape_of(r)[:-1])
    m, n = shape_of(c)[-1], shape_of(r)[-1]
    c = ops.broadcast_to(c, batch + (m,))
    r = ops.broadcast_to(r, batch + (n,))
    vals = ops.concatenate([ops.flip(c, (-1,)), ops.slice_axis(r, -1, 1, n)], -1)
    idx = (m - 1) - np.arange(m)[:, None] + np.arange(n)[None, :]
    return _along_last(vals, idx)


def circulant(c):
    """scipy.linalg.circulant: C[..., i, j] = c[..., (i - j) mod n]; leading axes a batch."""
    c = array_from(c)
    if len(shape_of(c)) == 0:
        c = ops.reshape(c, (1,))
    n = shape_of(c)[-1]
    idx = (np.arange(n)[:, None] - np.arange(n)[None, :]) % n
    return _along_last(c, idx)


SCIPY = {f"scipy.linalg.{f.__name__}": f for f in (block_diag, toeplitz, circulant)}
