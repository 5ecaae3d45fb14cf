"""Decompositions with several results: the eigh, svd and qr primitives (numpy eagerly, LAPACK's
syevd, gesdd, geqrf/orgqr in compiled code as numpy calls them), and the functions built on
them: eigvalsh, svdvals, matrix norms, pinv. Results are numpy's namedtuples (the same field
names as PyTorch's).

A multi-result primitive's VJP rule gets `g` and `out` as tuples; an output no gradient flows
to has None in `g` (eagerly and in the compiler's AD), so terms that need it are skipped: the
eigenvectors' term divides by eigenvalue gaps, inf for repeated eigenvalues, which would turn
the gradient of a function of the eigenvalues alone into nan.
"""
from __future__ import annotations

from collections import namedtuple

import numpy as np

from llgrad.runtime.aval import Aval, aval_str
from llgrad.runtime.errors import ShapeError, UnsupportedError, user_loc
from llgrad.runtime.ops import elementwise as ew
from llgrad.runtime.ops._util import dtype_of, shape_of
from llgrad.runtime.ops.index import slice_axis
from llgrad.runtime.ops.linalg import matmul
from llgrad.runtime.ops.linalg_solve import (
    _matrices, _need_float, _numpy_errors, mT, need_square, triangular_solve,
)
from llgrad.runtime.ops.shape import concatenate, unsqueeze
from llgrad.runtime.ops.structure import tril
from llgrad.runtime.prim import Primitive, bind, register

EighResult = namedtuple("EighResult", ["eigenvalues", "eigenvectors"])
SVDResult = namedtuple("SVDResult", ["U", "S", "Vh"])
QRResult = namedtuple("QRResult", ["Q", "R"])
SlogdetResult = namedtuple("SlogdetResult", ["sign", "logabsdet"])


def _diag(v):
    """A stack of diagonal matrices from a stack of vectors."""
    n = shape_of(v)[-1]
    return ew.mul(unsqueeze(v, -2), np.eye(n, dtype=dtype_of(v)))


def _gap_inverse(w):
    """F[i, j] = 1 / (w[j] - w[i]) off the diagonal, 0 on it (inf for repeated values)."""
    eye = np.eye(shape_of(w)[-1], dtype=dtype_of(w))
    return ew.sub(ew.div(1.0, ew.add(ew.sub(unsqueeze(w, -2), unsqueeze(w, -1)), eye)), eye)


# ---- eigh ---------------------------------------------------------------------------------------
def _eigh_rule(a, lower):
    need_square("eigh", a)
    _need_float("eigh", a)
    return Aval(tuple(a.shape[:-1]), a.dtype), Aval(tuple(a.shape), a.dtype)


def _eigh_vjp(g, out, a, lower):
    # gA = V (diag(gw) + F * (V^T gV)) V^T, symmetrised (Note [Symmetric gradients])
    (gw, gv), (w, v) = g, out
    inner = None if gw is None else _diag(gw)
    if gv is not None:
        term = ew.mul(_gap_inverse(w), matmul(mT(v), gv))
        inner = term if inner is None else ew.add(inner, term)
    ga = matmul(matmul(v, inner), mT(v))
    return ew.mul(ew.add(ga, mT(ga)), 0.5)


eigh_p = register(Primitive(
    "eigh", "linalg",
    _numpy_errors(lambda a, lower: tuple(np.linalg.eigh(a, "L" if lower else "U"))),
    _eigh_rule, (_eigh_vjp,), multiple_results=True, node_name="LinalgEighBackward0"))


# ---- svd ----------------------------------------------------------------------------------------
def _svd_rule(a, full_matrices):
    if len(a.shape) < 2:
        raise ShapeError(f"svd: expected a matrix (or a stack of them), got "
                         f"{aval_str(a.shape, a.dtype)}")
    _need_float("svd", a)
    *batch, m, n = a.shape
    k = min(m, n)
    ku, kv = (m, n) if full_matrices else (k, k)
    return (Aval((*batch, m, ku), a.dtype), Aval((*batch, k), a.dtype),
            Aval((*batch, kv, n), a.dtype))


def _svd_vjp(g, out, a, full_matrices):
    # Townsend's formula (as HIPS autograd): gA = U [(F * (U^T gU - gU^T U)) S + diag(gS)
    # + S (F * (V^T gV - gV^T V))] V^T plus the parts outside U's or V's span for non-square A;
    # F[i, j] = 1 / (s_j^2 - s_i^2).
    (gu, gs, gvh), (u, s, vh) = g, out
    *_, m, n = shape_of(a)
    k = min(m, n)
    if full_matrices and m != n:
        if gu is not None or gvh is not None:
            raise UnsupportedError(
                "the gradient of svd(full_matrices=True) of a non-square matrix through U or "
                "Vh is not supported (the extra singular vectors are not unique)",
                fix="use full_matrices=False")
        u, vh = slice_axis(u, -1, 0, k), slice_axis(vh, -2, 0, k)
    v = mT(vh)
    inner = None if gs is None else _diag(gs)
    f = _gap_inverse(ew.mul(s, s)) if gu is not None or gvh is not None else None
    if gu is not None:
        utgu = matmul(mT(u), gu)
        term = ew.mul(ew.mul(f, ew.sub(utgu, mT(utgu))), unsqueeze(s, -2))
        inner = term if inner is None else ew.add(inner, term)
    if gvh is not None:
        gv = mT(gvh)
        vtgv = matmul(vh, gv)
        term = ew.mul(unsqueeze(s, -1), ew.mul(f, ew.sub(vtgv, mT(vtgv))))
        inner = term if inner is None else ew.add(inner, term)
    ga = matmul(matmul(u, inner), vh)
    if m > n and gu is not None:  # (I - U U^T) gU S^-1 V^T
        rest = ew.sub(gu, matmul(u, matmul(mT(u), gu)))
        ga = ew.add(ga, matmul(ew.div(rest, unsqueeze(s, -2)), vh))
    if m < n and gvh is not None:  # U S^-1 gV^T (I - V V^T)
        rest = ew.sub(gvh, matmul(matmul(gvh, v), vh))
        ga = ew.add(ga, matmul(ew.div(u, unsqueeze(s, -2)), rest))
    return ga


def _svd_impl(a, full_matrices):
    u, s, vh = np.linalg.svd(a, full_matrices=full_matrices)
    return u, s, vh


svd_p = register(Primitive(
    "svd", "linalg", _numpy_errors(_svd_impl), _svd_rule, (_svd_vjp,),
    multiple_results=True, node_name="LinalgSvdBackward0"))


# ---- qr -----------------------------------------------------------------------------------------
def _qr_rule(a, complete):
    if len(a.shape) < 2:
        raise ShapeError(f"qr: expected a matrix (or a stack of them), got "
                         f"{aval_str(a.shape, a.dtype)}")
    _need_float("qr", a)
    *batch, m, n = a.shape
    k = m if complete else min(m, n)
    return Aval((*batch, m, k), a.dtype), Aval((*batch, k, n), a.dtype)


def _qr_square_vjp(gq, gr, q, r):
    # A = QR with R square (m >= n): gA = (gQ + Q copyltu(M)) R^-T, M = R gR^T - gQ^T Q,
    # copyltu(M) = tril(M) + tril(M, -1)^T (Liao et al. 2019; Walter & Lehmann).
    m = matmul(r, mT(gr)) if gr is not None else None
    if gq is not None:
        qtg = matmul(mT(gq), q)
        m = ew.neg(qtg) if m is None else ew.sub(m, qtg)
    low = tril(m, -1)
    b = matmul(q, ew.add(tril(m), mT(low)))
    if gq is not None:
        b = ew.add(b, gq)
    return mT(triangular_solve(r, mT(b), lower=False))  # b R^-T


def _qr_vjp(g, out, a, complete):
    (gq, gr), (q, r) = g, out
    *_, m, n = shape_of(a)
    if complete and m > n:
        raise UnsupportedError("the gradient of qr(mode='complete') of a tall matrix is not "
                               "supported (the extra columns of Q are not unique)",
                               fix="use mode='reduced'")
    if m >= n:
        return _qr_square_vjp(gq, gr, q, r)
    # wide: A = [X | Y], R = [U | V], X = QU, Y = QV (JAX's and PyTorch's split)
    u = slice_axis(r, -1, 0, m)
    gu = None if gr is None else slice_axis(gr, -1, 0, m)
    gv = None if gr is None else slice_axis(gr, -1, m, n)
    if gv is not None:
        y_gv = matmul(slice_axis(a, -1, m, n), mT(gv))
        gq = y_gv if gq is None else ew.add(gq, y_gv)
    gx = _qr_square_vjp(gq, gu, q, u)
    gy = matmul(q, gv) if gv is not None else ew.mul(slice_axis(a, -1, m, n), 0.0)
    return concatenate([gx, gy], len(shape_of(a)) - 1)


qr_p = register(Primitive(
    "qr", "linalg",
    lambda a, complete: tuple(np.linalg.qr(a, "complete" if complete else "reduced")),
    _qr_rule, (_qr_vjp,), multiple_results=True, node_name="LinalgQrBackward0"))


# ---- the functions (PyTorch's names) ------------------------------------------------------------
def eigh(a, UPLO: str = "L"):
    """Eigenvalues (ascending) and eigenvectors of symmetric matrices, reading the lower (or,
    with UPLO='U', upper) triangle. Gradients assume distinct eigenvalues where they flow
    through the eigenvectors."""
    a, = _matrices("eigh", a)
    return EighResult(*bind(eigh_p, a, lower=_uplo(UPLO)))


def _uplo(uplo):
    if uplo not in ("L", "U"):
        raise ValueError(f"UPLO must be 'L' or 'U', got {uplo!r}")
    return uplo == "L"


def eigvalsh(a, UPLO: str = "L"):
    return eigh(a, UPLO).eigenvalues


def svd(a, full_matrices: bool = True):
    """U, S, Vh with A = U diag(S) Vh. Gradients through U or Vh assume distinct singular
    values (and full_matrices=False for non-square A)."""
    a, = _matrices("svd", a)
    return SVDResult(*bind(svd_p, a, full_matrices=bool(full_matrices)))


def svdvals(a):
    a, = _matrices("svdvals", a)
    return bind(svd_p, a, full_matrices=False)[1]


def qr(a, mode: str = "reduced"):
    """Q, R with A = QR (mode 'reduced' or 'complete'), or R alone (mode 'r')."""
    if mode not in ("reduced", "complete", "r"):
        raise UnsupportedError(f"qr(mode={mode!r}) is not supported",
                               loc=user_loc(), fix="use mode='reduced', 'complete' or 'r'")
    a, = _matrices("qr", a)
    q, r = bind(qr_p, a, complete=mode == "complete")
    return r if mode == "r" else QRResult(q, r)


def matrix_norm(a, ord="fro", dim=(-2, -1), keepdim: bool = False):
    """torch.linalg.matrix_norm: 'fro', 'nuc', 2, -2 (largest, smallest singular value), 1,
    -1 (max, min column sum of |A|), inf, -inf (max, min row sum) over the axes `dim`."""
    from llgrad.runtime.ops import reduce as rd
    a, = _matrices("matrix_norm", a)
    nd = len(shape_of(a))
    if nd < 2:
        raise ShapeError(f"matrix_norm: expected a matrix (or a stack of them), got "
                         f"{aval_str(shape_of(a), dtype_of(a))}")
    row, col = (int(d) % nd for d in dim)
    if row == col:
        raise ShapeError(f"matrix_norm: dim must name two different axes, got {tuple(dim)}")
    if ord == "fro":
        return rd.vector_norm(a, 2.0, (row, col), keepdim)
    if ord in ("nuc", 2, -2):
        s = svdvals(_to_back(a, row, col))
        r = rd.sum(s, -1) if ord == "nuc" else (rd.amax if ord == 2 else rd.amin)(s, -1)
    elif ord in (1, -1, np.inf, -np.inf):
        across = row if ord in (1, -1) else col  # 1: sums down columns; inf: along rows
        other = row + col - across
        sums = rd.vector_norm(a, 1.0, (across,))  # sums of |a| (PyTorch's nodes)
        r = (rd.amax if ord > 0 else rd.amin)(sums, other - (other > across))
    else:
        raise ValueError(f"matrix_norm: invalid norm order {ord!r}; use 'fro', 'nuc', 2, -2, "
                         "1, -1, inf or -inf")
    if keepdim:
        for d in sorted((row, col)):
            r = unsqueeze(r, d)
    return r


def _to_back(a, row, col):
    """a with axes (row, col) moved to the end, in that order."""
    from llgrad.runtime.ops.shape import transpose
    nd = len(shape_of(a))
    return transpose(a, [d for d in range(nd) if d not in (row, col)] + [row, col])


def pinv(a, rtol=None, hermitian: bool = False):
    """The pseudo-inverse from the SVD, singular values at most rtol * max(S) dropped (numpy's
    algorithm; rtol defaults to max(m, n) * eps). Its gradient goes through the SVD's, so it
    needs distinct singular values."""
    from llgrad.runtime.ops import reduce as rd
    if hermitian:
        raise UnsupportedError("pinv(hermitian=True) is not supported", loc=user_loc(),
                               fix="use hermitian=False (the same result, through the SVD)")
    a, = _matrices("pinv", a)
    *_, m, n = shape_of(a)
    if rtol is None:
        rtol = max(m, n) * np.finfo(dtype_of(a)).eps
    u, s, vh = bind(svd_p, a, full_matrices=False)
    cutoff = ew.mul(rd.amax(s, -1, keepdim=True), rtol)
    large = ew.gt(s, cutoff)
    inv_s = ew.where(large, ew.div(1.0, ew.where(large, s, 1.0)), 0.0)
    return matmul(mT(vh), ew.mul(unsqueeze(inv_s, -1), mT(u)))
