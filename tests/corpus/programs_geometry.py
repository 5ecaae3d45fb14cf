"""Corpus programs from embedding, optimal transport, sequence alignment and multi-view
geometry (see tests/corpus/programs.py), written as their papers' reference code writes them:
pairwise distances by broadcasting, np.linalg.svd for rotations, Sinkhorn scalings in a
`while err > tol` loop, soft-DTW's dynamic programme in a double loop."""
from __future__ import annotations

import numpy as np
import scipy.special

from tests.corpus.registry import program


def _tsne_args(rng):
    n = 10
    X = rng.standard_normal((n, 5))
    D = np.sum((X[:, None] - X[None]) ** 2, axis=-1)
    P = np.exp(-D)
    np.fill_diagonal(P, 0.0)
    P = P / P.sum()
    return 1e-2 * rng.standard_normal((n, 2)), np.maximum(P, 1e-12)


@program(_tsne_args)
def tsne_kl_objective(Y, P):
    """t-SNE's cost KL(P || Q) with the Student-t similarities of van der Maaten's tsne.py:
    squared distances by the expansion trick, the diagonal zeroed by index assignment."""
    n = Y.shape[0]
    sum_Y = np.sum(np.square(Y), 1)
    num = -2.0 * np.dot(Y, Y.T)
    num = 1.0 / (1.0 + np.add(np.add(num, sum_Y).T, sum_Y))
    num[range(n), range(n)] = 0.0
    Q = num / np.sum(num)
    Q = np.maximum(Q, 1e-12)
    return np.sum(P * np.log(P / Q))


def _mds_args(rng):
    pts = rng.standard_normal((8, 3))
    D = np.linalg.norm(pts[:, None, :] - pts[None, :, :], axis=-1)
    return rng.standard_normal((8, 2)), D


@program(_mds_args)
def mds_stress(X, D):
    """Kruskal's stress-1 of a metric MDS embedding: distances by np.linalg.norm over the
    last axis of a broadcast difference, the upper triangle by np.triu_indices."""
    diff = X[:, None, :] - X[None, :, :]
    d = np.sqrt(np.sum(diff ** 2, axis=-1) + 1e-12)
    iu = np.triu_indices(len(X), k=1)
    return np.sqrt(np.sum((d[iu] - D[iu]) ** 2) / np.sum(D[iu] ** 2))


def _procrustes_args(rng):
    A = rng.standard_normal((12, 3))
    theta = 0.4
    R = np.array([[np.cos(theta), -np.sin(theta), 0], [np.sin(theta), np.cos(theta), 0],
                  [0, 0, 1]])
    return A + 0.1 * rng.standard_normal((12, 3)), A @ R.T


@program(_procrustes_args)
def orthogonal_procrustes(A, B):
    """Orthogonal Procrustes (Schoenemann): the rotation maximising trace(R^T A^T B) from the
    SVD of A.T @ B with the reflection fixed by the sign of det, then the residual."""
    A0 = A - A.mean(axis=0)
    B0 = B - B.mean(axis=0)
    U, s, Vt = np.linalg.svd(A0.T @ B0)
    d = np.sign(np.linalg.det(U @ Vt))
    R = U @ np.diag([1.0, 1.0, d]) @ Vt
    return np.linalg.norm(A0 @ R - B0) ** 2 + 0.01 * np.trace(R)


def _ot_args(rng):
    x, y = rng.standard_normal((7, 2)), rng.standard_normal((6, 2)) + 0.5
    C = np.sum((x[:, None] - y[None]) ** 2, axis=-1)
    return C, np.full(7, 1 / 7), np.full(6, 1 / 6)


@program(_ot_args)
def sinkhorn_until_converged(C, a, b, reg=0.5, tol=1e-9, max_iter=1000):
    """Entropic optimal transport by Sinkhorn's scalings (POT's sinkhorn_knopp), iterated
    `while err > tol`, the marginal error checked every step; the cost of the plan."""
    K = np.exp(-C / reg)
    u = np.ones(len(a)) / len(a)
    v = np.ones(len(b)) / len(b)
    err, it = 1.0, 0
    while err > tol and it < max_iter:
        v = b / (K.T @ u)
        u = a / (K @ v)
        err = np.linalg.norm(v * (K.T @ u) - b)
        it += 1
    P = u[:, None] * K * v[None, :]
    return np.sum(P * C)


@program(_ot_args, wrt=(0, 1))
def sinkhorn_log_domain(C, a, b, eps=0.3, n_iter=60):
    """Log-domain Sinkhorn with a fixed number of iterations (the stable form of Peyre and
    Cuturi's book), the potentials updated by logsumexp; the entropic OT value."""
    f = np.zeros(len(a))
    g = np.zeros(len(b))
    for _ in range(n_iter):
        f = -eps * scipy.special.logsumexp((g[None, :] - C) / eps + np.log(b)[None, :], axis=1)
        g = -eps * scipy.special.logsumexp((f[:, None] - C) / eps + np.log(a)[:, None], axis=0)
    P = np.exp((f[:, None] + g[None, :] - C) / eps) * np.outer(a, b)
    return np.sum(P * C)


def softmin(a, b, c, gamma):
    z = -np.array([a, b, c]) / gamma
    m = np.max(z)
    return -gamma * (m + np.log(np.sum(np.exp(z - m))))


def _sdtw_args(rng):
    return rng.standard_normal(8), np.sin(np.linspace(0, 3, 10))


@program(_sdtw_args)
def soft_dtw(x, y, gamma=0.5):
    """Soft-DTW (Cuturi and Blondel 2017) between two series: the accumulated-cost table
    filled by a double loop with a soft minimum of its three predecessors."""
    n, m = len(x), len(y)
    D = (x[:, None] - y[None, :]) ** 2
    R = np.full((n + 1, m + 1), np.inf)
    R[0, 0] = 0.0
    for i in range(1, n + 1):
        for j in range(1, m + 1):
            R[i, j] = D[i - 1, j - 1] + softmin(R[i - 1, j - 1], R[i - 1, j], R[i, j - 1], gamma)
    return R[n, m]


def rotate(points, rot_vecs):
    """Rotate points by given rotation vectors (Rodrigues' rotation formula)."""
    theta = np.linalg.norm(rot_vecs, axis=1)[:, np.newaxis]
    with np.errstate(invalid="ignore"):
        v = rot_vecs / theta
        v = np.nan_to_num(v)
    dot = np.sum(points * v, axis=1)[:, np.newaxis]
    cos_theta = np.cos(theta)
    sin_theta = np.sin(theta)
    return cos_theta * points + sin_theta * np.cross(v, points) + dot * (1 - cos_theta) * v


def _ba_args(rng):
    n_cams, n_pts, n_obs = 3, 8, 20
    cams = np.hstack([0.1 * rng.standard_normal((n_cams, 3)), rng.standard_normal((n_cams, 2)),
                      np.full((n_cams, 1), 10.0), np.full((n_cams, 1), 500.0),
                      np.full((n_cams, 1), 0.01)])
    pts = rng.standard_normal((n_pts, 3))
    return (cams, pts, rng.integers(0, n_cams, n_obs), rng.integers(0, n_pts, n_obs),
            50 * rng.standard_normal((n_obs, 2)))


@program(_ba_args, wrt=(0, 1), fd_tol=(1e-5, 1e-5))
def bundle_adjustment_residuals(cams, points, cam_idx, pt_idx, observed):
    """Reprojection error of the SciPy cookbook's bundle adjustment: each observation's
    camera (Rodrigues rotation with np.errstate and np.nan_to_num, translation, focal length,
    radial distortion) applied to its point, in-place updates of the projections."""
    camera_params = cams[cam_idx]
    points_proj = rotate(points[pt_idx], camera_params[:, :3])
    points_proj += camera_params[:, 3:6]
    points_proj = -points_proj[:, :2] / points_proj[:, 2, np.newaxis]
    f = camera_params[:, 6]
    k1 = camera_params[:, 7]
    n = np.sum(points_proj ** 2, axis=1)
    r = 1 + k1 * n
    points_proj *= (r * f)[:, np.newaxis]
    residuals = points_proj - observed
    return 0.5 * np.sum(residuals ** 2) / len(observed)


def _poly_args(rng):
    angles = np.sort(rng.uniform(0, 2 * np.pi, 9))
    return (np.column_stack([np.cos(angles), np.sin(angles)]) * rng.uniform(0.8, 1.2, (9, 1)),)


@program(_poly_args)
def polygon_shape_energy(verts, target_area=2.5):
    """A polygon's shoelace area and perimeter with np.roll, pushed to a target area with a
    short perimeter (a cell-shape energy of vertex models)."""
    x, y = verts[:, 0], verts[:, 1]
    area = 0.5 * np.abs(np.dot(x, np.roll(y, -1)) - np.dot(y, np.roll(x, -1)))
    edges = np.roll(verts, -1, axis=0) - verts
    perimeter = np.sum(np.linalg.norm(edges, axis=1))
    return (area - target_area) ** 2 + 0.1 * perimeter ** 2
