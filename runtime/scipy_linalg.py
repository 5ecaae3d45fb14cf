"""scipy.linalg's special matrices on llgrad values, with scipy's signatures: block_diag,
toeplitz and circulant (each a gather of its inputs at constant positions, or a
concatenation of padded blocks, so gradients are the primitives'); sqrtm (Note [sqrtm by
Denman-Beavers iterations]); lu_factor and lu_solve (partial pivoting written out). `SCIPY`
joins runtime/numpy_api.LAZY (Note [Lazily named functions] there)."""
from __future__ import annotations

import numpy as np

from llgrad.runtime import ops
from llgrad.runtime.conversions import array_from
from llgrad.runtime.errors import UnsupportedError, user_loc
from llgrad.runtime.ops._util import dtype_of, shape_of
from llgrad.runtime.ops.linalg_solve import triangular_solve


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


# Note [sqrtm by Denman-Beavers iterations]
# The principal square root of a real matrix without eigenvalues on the closed negative real
# axis (the matrices whose square root scipy returns real): the product form of the
# Denman-Beavers iteration with determinant scaling (Higham, Functions of Matrices, 6.29),
# M0 = Y0 = A, mu = |det M|^(-1/2n), Y <- mu Y (I + mu^-2 M^-1) / 2, M <- (I + (mu^2 M +
# mu^-2 M^-1) / 2) / 2. Y^2 M^-1 = A holds at every step whatever mu is, and M -> I
# quadratically, so Y -> sqrt(A); mu is a constant to the gradient (stop_gradient), so the
# gradient is the derivative of the iterates, which converges with them (the iterations after
# convergence leave Y alone). A fixed number of steps (a loop over them, unrolled: few) is
# checked at run time: where M is not I to 1e-10, the matrix has no real principal root (or is
# too badly conditioned), an error; a general (complex) result is not computed.
_SQRTM_STEPS = 10  # (with the scaling, 7 reach M = I to 1e-12 at condition numbers to 1e14)


def sqrtm(A, disp=True, blocksize=64):
    """scipy.linalg.sqrtm of a real matrix with a real principal square root."""
    from llgrad.runtime.ops.control import check_p
    from llgrad.runtime.prim import bind
    a = array_from(A)
    if dtype_of(a).kind != "f":
        a = ops.astype(a, np.float64)
    if len(shape_of(a)) < 2 or shape_of(a)[-1] != shape_of(a)[-2]:
        raise ValueError("The input array must be at least two-dimensional and square.")
    n = shape_of(a)[-1]
    eye = np.eye(n, dtype=dtype_of(a))
    y = m = a
    for _ in range(_SQRTM_STEPS):
        m_inv = ops.inv(m)
        _, logdet = ops.slogdet(ops.stop_gradient(m))
        mu = ops.unsqueeze(ops.unsqueeze(ops.exp(ops.mul(logdet, -0.5 / n)), -1), -1)
        mu2 = ops.mul(mu, mu)
        y = ops.mul(mu, ops.matmul(y, ops.mul(ops.add(eye, ops.div(m_inv, mu2)), 0.5)))
        m = ops.mul(ops.add(eye, ops.mul(ops.add(ops.mul(mu2, m), ops.div(m_inv, mu2)), 0.5)),
                    0.5)
    off = ops.amax(ops.abs(ops.sub(ops.stop_gradient(m), eye)))
    bind(check_p, ops.logical_not(ops.le(off, 1e-10)), exc=UnsupportedError, args=(
        "scipy.linalg.sqrtm: the matrix has no real principal square root (an eigenvalue on "
        "the closed negative real axis: scipy's result is complex), or is too badly "
        "conditioned for llgrad's iteration", user_loc(),
        "shift or regularise the matrix (e.g. A + eps I), or use np.linalg.eigh for a "
        "symmetric positive definite one"))
    return y


def lu_factor(a, overwrite_a=False, check_finite=True):
    """scipy.linalg.lu_factor: (lu, piv), LAPACK's getrf written out: at step k the row of the
    largest |a[i, k]|, i >= k (the first one on a tie, as LAPACK), is swapped into row k
    (piv[k], a traced integer: int64, where scipy gives int32), then eliminated below it. The
    gradient flows through the elimination (the pivots are piecewise constant). An unrolled
    loop of min(m, n) steps: meant for the small matrices people differentiate."""
    a = array_from(a)
    if dtype_of(a).kind != "f":
        a = ops.astype(a, np.float64)
    if len(shape_of(a)) != 2:
        raise ValueError("expected a 2-D array")
    m, n = shape_of(a)
    rows = np.arange(m)
    pivots = []
    for k in range(min(m, n)):
        p = ops.add(ops.argmax(ops.stop_gradient(ops.abs(a[k:, k]))), k)
        a = ops.take(a, ops.where(ops.eq(rows, k), p, ops.where(ops.eq(rows, p), k, rows)), 0)
        pivots.append(p)
        if k + 1 < m:
            below = ops.div(a[k + 1:, k:k + 1], a[k, k])
            rest = ops.sub(a[k + 1:, k + 1:], ops.mul(below, a[k:k + 1, k + 1:]))
            a = ops.concatenate([a[:k + 1], ops.concatenate([a[k + 1:, :k], below, rest], 1)],
                                0)
    return a, ops.stack(pivots, 0) if pivots else np.zeros(0, np.int64)


def lu_solve(lu_and_piv, b, trans=0, overwrite_b=False, check_finite=True):
    """scipy.linalg.lu_solve (trans=0): x with A x = b from lu_factor's (lu, piv): b's rows
    swapped as piv says, then the unit lower and the upper triangular solves."""
    lu, piv = lu_and_piv
    if trans not in (0, "N"):
        raise UnsupportedError("scipy.linalg.lu_solve(trans=1 or 2) is not supported on traced "
                               "values", loc=user_loc(), fix="solve with a.T directly: "
                               "np.linalg.solve(a.T, b)")
    lu, b = array_from(lu), array_from(b)
    m = shape_of(lu)[0]
    if shape_of(b)[0] != m:
        raise ValueError(f"Shapes of lu {tuple(shape_of(lu))} and b {tuple(shape_of(b))} are "
                         f"incompatible")
    rows = np.arange(m)
    order = rows
    for i in range(shape_of(piv)[0]):
        p = piv[i]
        at_p, at_i = ops.take(order, p), order[i]
        order = ops.where(ops.eq(rows, i), at_p, ops.where(ops.eq(rows, p), at_i, order))
    vector = len(shape_of(b)) == 1
    rhs = ops.take(ops.reshape(b, (m, -1)), order, 0)
    dt = np.result_type(dtype_of(lu), dtype_of(rhs))
    lu, rhs = ops.astype(lu, dt), ops.astype(rhs, dt)
    x = triangular_solve(lu, triangular_solve(lu, rhs, lower=True, unit_diagonal=True),
                         lower=False)
    return ops.reshape(x, (m,)) if vector else x


SCIPY = {f"scipy.linalg.{f.__name__}": f for f in (block_diag, toeplitz, circulant, sqrtm,
                                                   lu_factor, lu_solve)}
