"""Use cases of numpy.linalg and scipy.linalg (issue 11), registered into tests/usecases.py's
USECASES (same argument roles: x vectors (4,), m (3, 4), s (3, 3)). Matrices that must be
invertible or positive definite are built so (s s^T + 3 I); gradients through eigenvectors or
singular vectors, which need spread-out eigenvalues, are in tests/e2e/test_linalg.py."""
from __future__ import annotations

import numpy as np
import scipy.linalg

from tests.usecases import usecase

SCIPY = "scipy.linalg converts its arguments with np.asarray: it takes no Tensors"


@usecase
def linalg_solves(s, x):
    a = s @ s.T + 3.0 * np.eye(3)
    return (np.sum(np.linalg.solve(a, x[:3]) * x[1:]) + np.sum(np.linalg.inv(a) * s)
            + 0.1 * np.linalg.det(a) + np.linalg.slogdet(a)[1]
            + np.sum(np.linalg.cholesky(a) * s) + np.sum(np.linalg.matrix_power(s * 0.4, 3)))


@usecase
def linalg_decompositions(m, s):
    w, _ = np.linalg.eigh(s + s.T)
    q, r = np.linalg.qr(m.T)
    return (np.sum(w * np.arange(1.0, 4.0)) + np.sum(np.linalg.eigvalsh(s @ s.T) ** 2)
            + np.sum(np.linalg.svd(m, full_matrices=False)[1]) + np.sum(np.linalg.svdvals(m))
            + np.sum(q * m.T) + np.sum(r * r) + np.sum(np.linalg.pinv(m) * m.T))


@usecase
def linalg_norms(m, x):
    return (np.linalg.norm(m, "nuc") + np.linalg.norm(m, 2) + np.linalg.norm(m, -np.inf)
            + np.linalg.matrix_norm(m, ord=1) + np.linalg.vector_norm(x, ord=3)
            + np.sum(np.linalg.norm(m[None], np.inf, axis=(1, 2))))


@usecase(eager=SCIPY)
def scipy_cholesky_solves(s, x):
    a = s @ s.T + 3.0 * np.eye(3)
    u = scipy.linalg.cholesky(a)
    c = scipy.linalg.cho_factor(a, lower=True)
    return (np.sum(scipy.linalg.solve_triangular(u, x[:3], trans=1) * x[1:])
            + np.sum(scipy.linalg.cho_solve(c, s)) + np.sum(scipy.linalg.solve(a, x[:3],
                                                                              assume_a="pos"))
            + 0.1 * scipy.linalg.det(a) + np.sum(scipy.linalg.inv(a) * s))


@usecase
def linalg_lstsq(m, x):
    coef, res, rank, sv = np.linalg.lstsq(m.T, x, rcond=None)  # tall: the least squares
    return (np.sum(coef ** 2) + res[0] + np.sum(sv) + rank
            + np.sum(np.linalg.lstsq(m, x[:3], rcond=None)[0] * x))  # wide: the least norm


@usecase(eager=SCIPY)
def scipy_expm(s):
    return np.sum(scipy.linalg.expm(s) * s) + np.trace(scipy.linalg.expm(3.0 * s))


@usecase
def linalg_products_and_conditioning(m, k, s):
    a = s @ s.T + 3.0 * np.eye(3)
    return (np.sum(np.linalg.multi_dot([m, k, s])) + np.linalg.multi_dot([m[0], k, m[:, 1]])
            + np.linalg.cond(a) + np.linalg.cond(a, "fro") + np.linalg.cond(a, 1)
            + np.sum(s) * np.linalg.matrix_rank(a))


@usecase
def polynomials(x, w):
    grid = np.arange(4.0)
    return (np.sum(np.polyfit(grid, x, 2) * [1.0, 2.0, 3.0])
            + np.sum(np.polyfit(grid, x, 1, w=np.abs(w) + 1.0)) + np.sum(np.vander(x, 3) * 0.5)
            + np.sum(np.polyder(x) ** 2) + np.sum(np.polyint(x) * np.arange(5.0))
            + np.sum(np.polyadd(x, w[:2]) * np.polysub(w, x[:3]))
            + np.sum(np.polymul(x, w[:2]) ** 2))


@usecase(eager="numpy.polynomial's functions convert a Tensor with np.asarray")
def numpy_polynomial_module(x, w):
    import numpy.polynomial.polynomial
    grid = np.arange(4.0)
    return (np.sum(numpy.polynomial.polynomial.polyfit(grid, x, 2) * [1.0, 2.0, 3.0])
            + np.sum(numpy.polynomial.polynomial.polyval(w, x) ** 2)
            + np.sum(numpy.polynomial.polynomial.polyvander(x, 2) * 0.3))
