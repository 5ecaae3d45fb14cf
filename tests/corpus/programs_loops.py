"""Corpus programs written as loops over indices, the way Numba users write them (see
tests/corpus/programs.py): scalar accumulators, work arrays filled element by element,
`while` with a counter, `break`, swaps, zip/enumerate over arrays, np.vectorize of a scalar
function with an `if`. Each is staged (no loop unrolled, no dynamic path)."""
from __future__ import annotations

import math

import numpy as np

from tests.corpus.registry import program


# ---- learning ----------------------------------------------------------------------------------
def _logreg_args(rng):
    X = rng.standard_normal((60, 4))
    return rng.standard_normal(4), 0.1, X, (rng.random(60) > 0.5).astype(np.float64)


@program(_logreg_args, wrt=(0, 1))
def logistic_loss_loops(w, b, X, y):
    """Log-loss with the dot products and the stable softplus written out per sample."""
    n, d = X.shape
    loss = 0.0
    for i in range(n):
        z = b
        for j in range(d):
            z += X[i, j] * w[j]
        if y[i] > 0.5:
            loss += math.log1p(math.exp(-z))
        else:
            loss += math.log1p(math.exp(z))
    return loss / n


def _mf_args(rng):
    return (0.3 * rng.standard_normal((8, 3)), 0.3 * rng.standard_normal((10, 3)),
            rng.integers(0, 8, 40), rng.integers(0, 10, 40), rng.standard_normal(40), 0.05)


@program(_mf_args, wrt=(0, 1))
def matrix_factorisation_loss(U, V, rows, cols, vals, lam):
    """Collaborative filtering: squared error over the observed (row, col) pairs plus an L2
    penalty, the rating prediction as an inner loop."""
    loss = 0.0
    k = U.shape[1]
    for t in range(rows.shape[0]):
        i, j = rows[t], cols[t]
        pred = 0.0
        for f in range(k):
            pred += U[i, f] * V[j, f]
        err = vals[t] - pred
        loss += err * err
    reg = 0.0
    for i in range(U.shape[0]):
        for f in range(k):
            reg += U[i, f] * U[i, f]
    for j in range(V.shape[0]):
        for f in range(k):
            reg += V[j, f] * V[j, f]
    return loss + lam * reg


def _zip_args(rng):
    return rng.standard_normal(3), rng.standard_normal((15, 3)), rng.standard_normal(15)


@program(_zip_args)
def least_squares_over_zipped_rows(w, X, y):
    """`for xi, yi in zip(X, y)`: the rows of a numpy array iterated directly."""
    loss = 0.0
    for xi, yi in zip(X, y):
        pred = np.dot(w, xi)
        loss += (pred - yi) ** 2
    return loss / len(y)


def huber_scalar(r, delta=1.0):
    if abs(r) <= delta:
        return 0.5 * r * r
    return delta * (abs(r) - 0.5 * delta)


vectorized_huber = np.vectorize(huber_scalar)


@program(_zip_args)
def huber_by_np_vectorize(w, X, y):
    """A scalar loss with an `if`, applied elementwise by np.vectorize."""
    return np.mean(vectorized_huber(X @ w - y, 0.5))


# ---- sequences and signals ---------------------------------------------------------------------
def _conv_args(rng):
    return rng.standard_normal(40), rng.standard_normal(5)


@program(_conv_args, wrt=(0, 1))
def conv1d_valid_loops(x, k):
    """A 'valid' 1-D correlation into a preallocated output, then a tanh energy."""
    n, m = x.shape[0], k.shape[0]
    out = np.zeros(n - m + 1)
    for i in range(n - m + 1):
        acc = 0.0
        for j in range(m):
            acc += x[i + j] * k[j]
        out[i] = acc
    total = 0.0
    for i in range(out.shape[0]):
        total += math.tanh(out[i]) ** 2
    return total


def _ema_args(rng):
    return rng.standard_normal(30), 0.7


@program(_ema_args, wrt=(0, 1))
def ema_while_counter(x, w):
    """An exponential moving average with `i = 0; while i < n: ...; i += 1`."""
    n = x.shape[0]
    out = np.empty_like(x)
    i = 0
    acc = 0.0
    while i < n:
        acc = 0.9 * acc + w * x[i]
        out[i] = acc
        i += 1
    return np.sum(out ** 2)


def _crossing_args(rng):
    return rng.standard_normal(40), 8.0


@program(_crossing_args)
def energy_until_threshold(x, thresh):
    """A running sum of squares stopped by `break` once it passes a threshold."""
    total = 0.0
    for i in range(x.shape[0]):
        total += x[i] * x[i]
        if total > thresh:
            break
    return total


# ---- physics and numerics ----------------------------------------------------------------------
def _lj_args(rng):
    return np.stack(np.meshgrid(np.arange(3.0), np.arange(3.0), [0.0]), -1).reshape(-1, 3) * 1.2 \
        + 0.05 * rng.standard_normal((9, 3)),


@program(_lj_args)
def lennard_jones_pair_loops(pos):
    """Lennard-Jones energy over the pairs i < j, coordinates unpacked by hand."""
    n = pos.shape[0]
    e = 0.0
    for i in range(n):
        for j in range(i + 1, n):
            dx = pos[i, 0] - pos[j, 0]
            dy = pos[i, 1] - pos[j, 1]
            dz = pos[i, 2] - pos[j, 2]
            r2 = dx * dx + dy * dy + dz * dz
            inv6 = 1.0 / (r2 * r2 * r2)
            e += 4.0 * (inv6 * inv6 - inv6)
    return e


def _particles_args(rng):
    return rng.standard_normal((6, 2)), rng.standard_normal((6, 2)), 0.05


@program(_particles_args, wrt=(0, 1))
def symplectic_euler_particles(pos, vel, dt):
    """Particles in a harmonic well, integrated component by component in place."""
    n = pos.shape[0]
    p = pos.copy()
    v = vel.copy()
    for step in range(20):
        for i in range(n):
            v[i, 0] -= dt * p[i, 0]
            v[i, 1] -= dt * p[i, 1]
            p[i, 0] += dt * v[i, 0]
            p[i, 1] += dt * v[i, 1]
    return np.sum(p ** 2)


def _kernel_args(rng):
    return rng.standard_normal(8), 1.3


@program(_kernel_args, wrt=(0, 1))
def rbf_kernel_loops_then_cholesky(a, ell):
    """A squared-exponential Gram matrix filled by two loops, then its log-determinant by
    np.linalg.cholesky."""
    n = a.shape[0]
    K = np.zeros((n, n))
    for i in range(n):
        for j in range(n):
            K[i, j] = math.exp(-(a[i] - a[j]) ** 2 / (2 * ell * ell))
    K += 1e-2 * np.eye(n)
    L = np.linalg.cholesky(K)
    return 2.0 * np.sum(np.log(np.diag(L)))


def _sort_args(rng):
    return rng.permutation(10).astype(np.float64) + 0.1 * rng.standard_normal(10),


@program(_sort_args)
def bubble_sort_weighted(x):
    """Bubble sort by swaps through a temporary, then a rank-weighted sum (piecewise linear)."""
    y = x.copy()
    n = y.shape[0]
    for i in range(n):
        for j in range(n - 1 - i):
            if y[j] > y[j + 1]:
                t = y[j]
                y[j] = y[j + 1]
                y[j + 1] = t
    return np.sum(np.arange(n, dtype=np.float64) * y)


def _rows_args(rng):
    return 0.5 * rng.standard_normal((5, 5)), rng.standard_normal(5)


@program(_rows_args, wrt=(0, 1))
def row_recurrence_into_history(A, x0):
    """States kept as rows of a history matrix, each from the previous one."""
    T = 12
    H = np.zeros((T, x0.shape[0]))
    H[0] = x0
    for t in range(1, T):
        H[t] = np.tanh(A @ H[t - 1])
    return np.sum(H[-1] ** 2) + 0.1 * np.sum(H)
