"""numpy.linalg and scipy.linalg on llgrad values, with their signatures and conventions.

`FUNCTIONS` (numpy callables -> llgrad functions) joins runtime/numpy_api.py's dispatch table
(`__array_function__`). scipy's functions do not dispatch (they convert their arguments with
np.asarray first), so `SCIPY` names them by their dotted path: runtime/numpy_api.py resolves
the names once scipy is imported (Note [Lazily named functions]), and the tracer calls the
llgrad function where a call passes them a traced value (tracer/operators.py). Anything not
listed here is an error, never a silent fallback.
"""
from __future__ import annotations

import numpy as np

from llgrad.runtime import ops
from llgrad.runtime.aval import normalize_axes
from llgrad.runtime.errors import LinAlgError, UnsupportedError, user_loc
from llgrad.runtime.ops import elementwise as ew, stats
from llgrad.runtime.ops._util import dtype_of, shape_of
from llgrad.runtime.ops.control import check_p
from llgrad.runtime.ops.linalg_solve import (
    _matrices, _rhs, cholesky_solve_p, mT, need_square, solve_p, triangular_solve,
)
from llgrad.runtime.ops.linalg_spectral import SVDResult
from llgrad.runtime.ops.structure import tril, triu
from llgrad.runtime.prim import bind


# ---- norms --------------------------------------------------------------------------------------
def _axes(x, axis):
    return None if axis is None else normalize_axes(axis, len(shape_of(x)))


def norm(x, ord=None, dim=None, keepdim=False):
    """A vector norm over one axis (or all of a 1-D x), a matrix norm over two (or a 2-D x);
    the 2-norm of the flattened x when both `ord` and `dim` are None (numpy's np.linalg.norm
    and torch.linalg.norm)."""
    x, = _matrices("norm", x)
    if dim is None:
        if ord is None:
            return ops.vector_norm(x, 2.0, None, keepdim)
        dim = tuple(range(len(shape_of(x))))
        if len(dim) not in (1, 2):
            raise ValueError(f"norm: ord={ord!r} needs 1-D or 2-D input (or axis=), got "
                             f"shape {list(shape_of(x))}")
    axes = _axes(x, dim)
    if len(axes) == 1:
        if isinstance(ord, str):
            raise ValueError(f"Invalid norm order {ord!r} for vectors")
        return ops.vector_norm(x, 2.0 if ord is None else ord, axes, keepdim)
    if len(axes) == 2:
        return ops.matrix_norm(x, "fro" if ord is None else ord, axes, keepdim)
    raise ValueError(f"norm: improper number of dimensions to norm: {len(axes)}")


# ---- numpy.linalg -------------------------------------------------------------------------------
def _np_solve(a, b):
    """numpy 2's rule: b is a (stack of) vector(s) only when b.ndim == 1."""
    a, b = _matrices("solve", a, b)
    return _rhs("solve", a, b, len(shape_of(b)) == 1, lambda a, b: bind(solve_p, a, b))


def _np_svd(a, full_matrices=True, compute_uv=True, hermitian=False):
    if hermitian:
        raise UnsupportedError("np.linalg.svd(hermitian=True) is not supported on llgrad "
                               "values", loc=user_loc(), fix="leave hermitian=False")
    if not compute_uv:
        return ops.svdvals(a)
    return SVDResult(*ops.svd(a, full_matrices))


def _np_pinv(a, rcond=None, hermitian=False, *, rtol=np._NoValue):
    if rcond is None:  # numpy 2's defaults: rcond 1e-15, or rtol (None: max(m, n) * eps)
        rcond = 1e-15 if rtol is np._NoValue else rtol
    return ops.pinv(a, rcond, hermitian)


def _np_lstsq(a, b, rcond=None):
    """np.linalg.lstsq for a matrix of full rank: the least-squares solution of a tall (or
    square) system from the QR factors of a, the least-norm one of a wide system from those of
    a^T; the same numbers numpy's SVD gives, with the QR's gradient (stable however the
    singular values lie). The rank, numpy's count of singular values above rcond times the
    largest, is checked when the function runs: rank-deficient is an error (not the SVD's
    answer, whose gradient does not exist where the rank changes)."""
    a, b = _matrices("lstsq", a, b)
    if len(shape_of(a)) != 2 or len(shape_of(b)) not in (1, 2):
        raise LinAlgError(f"lstsq: a must be 2-D and b 1-D or 2-D, got shapes "
                          f"{shape_of(a)} and {shape_of(b)}", loc=user_loc())
    (m, n), vector = shape_of(a), len(shape_of(b)) == 1
    if shape_of(b)[0] != m:
        raise LinAlgError("Incompatible dimensions", loc=user_loc())
    rhs = ops.reshape(b, (m, 1)) if vector else b
    sv = ops.svdvals(a)
    eps = np.finfo(dtype_of(sv)).eps  # numpy's cut-offs: None, a negative rcond, rcond
    cut = eps * max(m, n) if rcond is None else eps if rcond < 0 else rcond
    kept = ops.sum(ops.astype(ops.gt(ops.stop_gradient(sv), ops.mul(
        ops.stop_gradient(sv[0]), cut)), np.int64))
    loc = user_loc()
    bind(check_p, ops.lt(kept, min(m, n)), exc=LinAlgError, args=(
        "np.linalg.lstsq of a rank-deficient matrix is not supported on llgrad values (its "
        "least-norm solution has no gradient where the rank changes)", loc,
        "make the columns (rows, for a wide matrix) independent, or use np.linalg.pinv(a, "
        "rcond) @ b, numpy's answer for any rank"))
    if m >= n:
        q, r = ops.qr(a)
        x = triangular_solve(r, ops.matmul(mT(q), rhs), lower=False)
    else:
        q, r = ops.qr(mT(a))
        x = ops.matmul(q, triangular_solve(r, rhs, lower=False, trans=True))
    if m > n:
        res = ops.sum(ops.square(ops.sub(ops.matmul(a, x), rhs)), 0)
    else:
        res = np.zeros((0,), dtype_of(x))
    return (ops.reshape(x, (n,)) if vector else x), res, np.int32(min(m, n)), sv


def _multi_dot(arrays, *, out=None):
    """np.linalg.multi_dot: the chained product (left to right; numpy's cheaper order gives
    the same numbers up to rounding); a 1-D first (last) array is a row (column)."""
    if out is not None:
        raise UnsupportedError("np.linalg.multi_dot(out=...) is not supported on llgrad values",
                               loc=user_loc(), fix="use the returned array")
    if len(arrays) < 2:
        raise ValueError("Expecting at least two arrays.")
    result = arrays[0]
    for a in arrays[1:]:
        result = ops.matmul(result, a)
    return result


def _cond(x, p=None):
    """np.linalg.cond: the ratio of the extreme singular values (p None, 2, -2), else
    norm(x, p) * norm(inv(x), p)."""
    if p is None or p in (2, -2):
        s = ops.svdvals(x)
        hi, lo = s[..., 0], s[..., -1]
        return ops.div(lo, hi) if p == -2 else ops.div(hi, lo)
    return ops.mul(norm(x, p, (-2, -1)), norm(ops.inv(x), p, (-2, -1)))


def _matrix_rank(A, tol=None, hermitian=False, *, rtol=None):
    """np.linalg.matrix_rank: the count of singular values above tol (an integer, no
    gradient; numpy's default tol S.max() * max(M, N) * eps)."""
    A = ops.stop_gradient(ops.astype(A, np.float64) if dtype_of(A).kind != "f" else A)
    if len(shape_of(A)) < 2:
        return ops.astype(ops.logical_not(ops.amin(ops.eq(A, 0.0), None)), np.int64)
    s = ops.svdvals(A)
    if tol is None:
        m, n = shape_of(A)[-2:]
        eps = np.finfo(dtype_of(s)).eps
        tol = ops.mul(ops.amax(s, -1, True), max(m, n) * eps if rtol is None else rtol)
    else:
        tol = np.asarray(tol)[..., None]
    return ops.sum(ops.astype(ops.gt(s, tol), np.int64), -1)


def _refused_eig(name: str):
    """np.linalg.eig/eigvals: complex in general, which llgrad does not compute."""
    def refuse(a, *args, **kwargs):
        raise UnsupportedError(f"np.linalg.{name} is not supported on llgrad values: the "
                               f"eigenvalues of a general real matrix are complex",
                               loc=user_loc(), fix=f"for a symmetric matrix use np.linalg."
                               f"{name}h (real eigenvalues, in ascending order)")
    refuse.refused = True  # (docs/gen_numpy_support.py lists what is supported)
    return refuse


FUNCTIONS = {
    np.linalg.lstsq: _np_lstsq,
    np.linalg.eigvals: _refused_eig("eigvals"), np.linalg.eig: _refused_eig("eig"),
    np.linalg.cholesky: lambda a, upper=False: ops.cholesky(a, upper),
    np.linalg.solve: _np_solve, np.linalg.inv: ops.inv, np.linalg.det: ops.det,
    np.linalg.slogdet: ops.slogdet, np.linalg.eigh: ops.eigh, np.linalg.eigvalsh: ops.eigvalsh,
    np.linalg.svd: _np_svd, np.linalg.qr: ops.qr, np.linalg.matrix_power: ops.matrix_power,
    np.linalg.pinv: _np_pinv, np.linalg.multi_dot: _multi_dot, np.linalg.cond: _cond,
    np.linalg.matrix_rank: _matrix_rank,
    np.linalg.norm: lambda x, ord=None, axis=None, keepdims=False: norm(x, ord, axis, keepdims),
}
if hasattr(np.linalg, "matrix_norm"):  # numpy >= 2
    FUNCTIONS.update({
        np.linalg.svdvals: ops.svdvals,
        np.linalg.matrix_norm: lambda x, *, keepdims=False, ord="fro": ops.matrix_norm(
            x, ord, (-2, -1), keepdims),
        np.linalg.vector_norm: lambda x, *, axis=None, keepdims=False, ord=2: ops.vector_norm(
            x, ord, _axes(x, axis), keepdims),
    })


# ---- scipy.linalg -------------------------------------------------------------------------------
_TRANS = {0: False, "N": False, 1: True, "T": True, 2: True, "C": True}


def _sp_solve_triangular(a, b, trans=0, lower=False, unit_diagonal=False, overwrite_b=False,
                         check_finite=True):
    a, b = _matrices("solve_triangular", a, b)
    return _rhs("solve_triangular", a, b, len(shape_of(b)) == 1,
                lambda a, b: triangular_solve(a, b, lower, _TRANS[trans], unit_diagonal))


def _sp_cholesky(a, lower=False, overwrite_a=False, check_finite=True):
    return ops.cholesky(a, upper=not lower)


def _sp_cho_factor(a, lower=False, overwrite_a=False, check_finite=True):
    """(c, lower): the factor in one triangle, `a`'s entries in the other (as scipy's)."""
    a, = _matrices("cho_factor", a)
    if lower:
        return ew.add(ops.cholesky(a), triu(a, 1)), lower
    return ew.add(ops.cholesky(a, upper=True), tril(a, -1)), lower


def _sp_cho_solve(c_and_lower, b, overwrite_b=False, check_finite=True):
    c, lower = c_and_lower
    c, b = _matrices("cho_solve", c, b)
    return _rhs("cho_solve", c, b, len(shape_of(b)) == 1,
                lambda c, b: bind(cholesky_solve_p, b, c, upper=not lower))


_SOLVERS = {None: "gen", "gen": "gen", "general": "gen", "sym": "sym", "symmetric": "sym",
            "her": "sym", "hermitian": "sym", "pos": "pos", "positive definite": "pos",
            "lower triangular": "lower", "upper triangular": "upper"}


def _sp_solve(a, b, lower=False, overwrite_a=False, overwrite_b=False, check_finite=True,
              assume_a=None, transposed=False):
    """scipy.linalg.solve: LU for general matrices, Cholesky for assume_a='pos'; symmetric
    and positive definite matrices are read from one triangle (`lower`), as scipy does."""
    kind = _SOLVERS.get(assume_a)
    if kind is None:
        raise UnsupportedError(f"scipy.linalg.solve(assume_a={assume_a!r}) is not supported on "
                               f"llgrad values", loc=user_loc(),
                               fix="use assume_a='gen', 'sym', 'pos' or a triangular kind")
    a, b = _matrices("solve", a, b)
    if transposed:
        a = mT(a)
    vector = len(shape_of(b)) == 1
    if kind == "pos":
        return _rhs("solve", a, b, vector, lambda a, b: bind(
            cholesky_solve_p, b, ops.cholesky(a, upper=not lower), upper=not lower))
    if kind in ("lower", "upper"):
        return _rhs("solve", a, b, vector, lambda a, b: triangular_solve(a, b, kind == "lower"))
    if kind == "sym":  # the symmetric matrix of one triangle
        a = ew.add(tril(a), mT(tril(a, -1))) if lower else ew.add(triu(a), mT(triu(a, 1)))
    return _rhs("solve", a, b, vector, lambda a, b: bind(solve_p, a, b))


# Note [expm by scaling and squaring]
# scipy.linalg.expm(A) as Higham's (2005) algorithm, written with ops: s = ceil(log2(|A|_1 /
# theta_13)) halvings (none for a small norm), the degree-13 Pade approximant of exp(A / 2^s)
# (one solve), then s squarings. s is known only when the function runs, so there are
# _MAX_SQUARINGS squarings, each taking effect only while its index is below s; a larger
# norm (above 9e7, where exp overflows unless A is special) is an error when the function
# runs. The gradient is that of the approximant, the Frechet derivative of the algorithm:
# the same s and degree make it as accurate as the value (Al-Mohy and Higham, 2009).
_PADE13 = (64764752532480000.0, 32382376266240000.0, 7771770303897600.0, 1187353796428800.0,
           129060195264000.0, 10559470521600.0, 670442572800.0, 33522128640.0, 1323241920.0,
           40840800.0, 960960.0, 16380.0, 182.0, 1.0)
_THETA13 = 5.371920351148152
_MAX_SQUARINGS = 24


def _sp_expm(A):
    """scipy.linalg.expm of a square matrix (or a stack of them): Note [expm by scaling and
    squaring]."""
    a, = _matrices("expm", A)
    n = need_square("expm", a)
    b = _PADE13
    norm = ops.stop_gradient(ops.amax(ops.sum(ops.abs(a), -2, True), -1, True))
    s = ops.maximum(ops.ceil(ops.log2(ops.div(norm, _THETA13))), 0.0)
    bind(check_p, stats.any(ops.gt(s, float(_MAX_SQUARINGS))), exc=UnsupportedError, args=(
        f"scipy.linalg.expm of a matrix of 1-norm above {_THETA13 * 2 ** _MAX_SQUARINGS:.1e} "
        f"is not supported on llgrad values", user_loc(),
        "scale the matrix down (expm(A) = expm(A / 2^k) squared k times)"))
    a = ops.div(a, ops.exp2(s))
    eye = np.eye(n, dtype=dtype_of(a))
    a2 = ops.matmul(a, a)
    a4 = ops.matmul(a2, a2)
    a6 = ops.matmul(a4, a2)

    def poly(c6, c4, c2, c0):
        return ops.add(ops.add(ops.mul(c6, a6), ops.mul(c4, a4)),
                       ops.add(ops.mul(c2, a2), ops.mul(c0, eye)))
    u = ops.matmul(a, ops.add(ops.matmul(a6, poly(b[13], b[11], b[9], 0.0)),
                              poly(b[7], b[5], b[3], b[1])))
    v = ops.add(ops.matmul(a6, poly(b[12], b[10], b[8], 0.0)), poly(b[6], b[4], b[2], b[0]))
    x = bind(solve_p, ops.sub(v, u), ops.add(v, u))
    for i in range(_MAX_SQUARINGS):
        x = ops.where(ops.gt(s, float(i)), ops.matmul(x, x), x)
    return x


SCIPY = {
    "scipy.linalg.expm": _sp_expm,
    "scipy.linalg.solve_triangular": _sp_solve_triangular,
    "scipy.linalg.cholesky": _sp_cholesky,
    "scipy.linalg.cho_factor": _sp_cho_factor,
    "scipy.linalg.cho_solve": _sp_cho_solve,
    "scipy.linalg.solve": _sp_solve,
    "scipy.linalg.inv": lambda a, overwrite_a=False, check_finite=True: ops.inv(a),
    "scipy.linalg.det": lambda a, overwrite_a=False, check_finite=True: ops.det(a),
}
