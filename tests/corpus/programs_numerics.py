"""Corpus programs from numerical linear algebra and interpolation (see
tests/corpus/programs.py): factorisations, matrix chains, interpolation on grids and
quadrature, as numerical-methods notebooks write them."""
from __future__ import annotations

import functools

import numpy as np

from tests.corpus.registry import program


def _pca_args(rng):
    return rng.standard_normal((30, 4)) @ np.diag([3.0, 1.0, 0.5, 0.1]),


@program(_pca_args)
def pca_reconstruction_error(X, k=2):
    """PCA by np.linalg.eigh of the covariance: the top-k eigenvectors picked by argsort in
    descending order, the reconstruction error as a Frobenius norm."""
    Xc = X - X.mean(axis=0)
    C = Xc.T @ Xc / (len(X) - 1)
    evals, evecs = np.linalg.eigh(C)
    order = np.argsort(evals)[::-1]
    W = evecs[:, order[:k]]
    recon = Xc @ W @ W.T
    return np.linalg.norm(Xc - recon) ** 2


def _qr_args(rng):
    return rng.standard_normal((6, 3)), rng.standard_normal(6)


@program(_qr_args, wrt=(0, 1))
def least_squares_qr(A, b):
    """Least squares by the reduced QR factorisation and a triangular solve."""
    Q, R = np.linalg.qr(A)
    x = np.linalg.solve(R, Q.T @ b)
    return np.sum((A @ x - b) ** 2) + np.sum(x ** 2)


def _chain_args(rng):
    return [rng.standard_normal((3, 3)) * 0.3 for _ in range(4)], rng.standard_normal(3)


@program(_chain_args)
def matrix_chain_reduce(mats, v):
    """functools.reduce over a list of matrices, then a determinant and a norm with ord=1."""
    M = functools.reduce(np.matmul, mats)
    return np.linalg.det(np.eye(3) + M) + np.linalg.norm(M @ v, ord=1)


def _interp_args(rng):
    return np.linspace(0, 1, 8) ** 2 + 0.05 * rng.standard_normal(8), np.sort(rng.random(20))


@program(_interp_args)
def interp_calibration(ys, xq):
    """A calibration curve given on a grid, read with np.interp and integrated with
    np.trapezoid, plus a polynomial through np.polyval."""
    grid = np.linspace(0, 1, ys.shape[0])
    vals = np.interp(xq, grid, ys)
    return np.trapezoid(vals, xq) + np.sum(np.polyval(ys[:3], xq))


def _knots_args(rng):
    return np.sort(rng.random(10)), rng.random(6)


@program(_knots_args)
def piecewise_linear_by_searchsorted(knots_y, xq):
    """Linear interpolation written by hand: the interval by np.searchsorted, clipped, then
    fancy indexing of the knots."""
    knots_x = np.linspace(0.0, 1.0, knots_y.shape[0])
    idx = np.clip(np.searchsorted(knots_x, xq) - 1, 0, len(knots_x) - 2)
    t = (xq - knots_x[idx]) / (knots_x[idx + 1] - knots_x[idx])
    return np.sum((1 - t) * knots_y[idx] + t * knots_y[idx + 1])
