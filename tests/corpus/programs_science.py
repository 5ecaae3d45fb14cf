"""Corpus programs from physics, finance, optimisation, geometry and signal processing (see
tests/corpus/programs.py), written as their textbooks and notebooks write them."""
from __future__ import annotations

import math

import numpy as np
import scipy.stats

from tests.corpus.registry import program


# ---- physics -----------------------------------------------------------------------------------
def _nbody_args(rng):
    return rng.standard_normal((6, 3)), rng.uniform(0.5, 2.0, 6), rng.standard_normal((6, 3))


@program(_nbody_args, wrt=(0, 2))
def nbody_total_energy(pos, masses, vel, G=1.0, softening=0.1):
    """Kinetic plus softened gravitational energy (the usual nbody-python notebook): pairwise
    separations by broadcasting, the upper triangle by np.triu."""
    kinetic = 0.5 * np.sum(masses[:, None] * vel ** 2)
    dx = pos[:, 0:1].T - pos[:, 0:1]
    dy = pos[:, 1:2].T - pos[:, 1:2]
    dz = pos[:, 2:3].T - pos[:, 2:3]
    inv_r = 1.0 / np.sqrt(dx ** 2 + dy ** 2 + dz ** 2 + softening ** 2)
    potential = G * np.sum(np.sum(np.triu(-(masses * masses.T) * inv_r, 1)))
    return kinetic + potential


def _pendulum_rhs(state, g, length, damping):
    theta, omega = state
    return np.array([omega, -(g / length) * np.sin(theta) - damping * omega])


def rk4_step(f, y, dt, *args):
    k1 = f(y, *args)
    k2 = f(y + 0.5 * dt * k1, *args)
    k3 = f(y + 0.5 * dt * k2, *args)
    k4 = f(y + dt * k3, *args)
    return y + dt / 6.0 * (k1 + 2 * k2 + 2 * k3 + k4)


def _pendulum_args(rng):
    return np.array([1.0, 0.0]), 1.5


@program(_pendulum_args, wrt=(0, 1))
def pendulum_rk4(y0, length, g=9.81, damping=0.1, dt=0.02, steps=100):
    """A damped pendulum integrated by a generic RK4 step that takes the right-hand side as a
    function and its parameters as *args."""
    y = np.asarray(y0, dtype=np.float64)
    for _ in range(steps):
        y = rk4_step(_pendulum_rhs, y, dt, g, length, damping)
    return y[0] ** 2 + 0.1 * y[1] ** 2


def _cn_args(rng):
    x = np.linspace(0, 1, 12)
    return np.sin(np.pi * x) + 0.1 * rng.standard_normal(12), 0.05


@program(_cn_args, wrt=(0, 1))
def heat_crank_nicolson(u0, kappa, steps=10, dt=0.01):
    """Crank-Nicolson for the heat equation: the tridiagonal operator built with np.diag's
    offsets, one np.linalg.solve per time step."""
    n = u0.shape[0]
    dx = 1.0 / (n - 1)
    r = kappa * dt / dx ** 2
    lap = np.diag(-2.0 * np.ones(n)) + np.diag(np.ones(n - 1), 1) + np.diag(np.ones(n - 1), -1)
    A = np.eye(n) - 0.5 * r * lap
    B = np.eye(n) + 0.5 * r * lap
    u = u0
    for _ in range(steps):
        u = np.linalg.solve(A, B @ u)
    return np.sum(u ** 2) * dx


def _chain_args(rng):
    return 1.0 + 0.2 * rng.random(5), 0.5


@program(_chain_args, wrt=(0, 1))
def hanging_chain_equilibrium(stiffness, weight, lr=0.05, tol=1e-6, max_iter=500):
    """The sag of a chain of springs found by gradient descent until the gradient's norm falls
    below a tolerance (`while` on a traced condition with an iteration cap)."""
    n = stiffness.shape[0] - 1
    y = np.zeros(n)
    grad = np.ones(n)
    it = 0
    while np.linalg.norm(grad) > tol and it < max_iter:
        ext = np.diff(np.concatenate([[0.0], y, [0.0]]))
        force = stiffness * ext
        grad = -np.diff(force) + weight
        y = y - lr * grad
        it += 1
    return np.sum(y)


# ---- finance -----------------------------------------------------------------------------------
def _greeks_args(rng):
    return np.array([100.0, 95.0, 110.0]), np.array([0.2, 0.25, 0.3])


@program(_greeks_args, wrt=(0, 1))
def black_scholes_vega_weighted(spot, vol, strike=100.0, T=0.75, r=0.03):
    """A book's value plus vega, with scipy.stats.norm.cdf / pdf as most finance notebooks
    write the normal distribution."""
    d1 = (np.log(spot / strike) + (r + vol ** 2 / 2) * T) / (vol * np.sqrt(T))
    d2 = d1 - vol * np.sqrt(T)
    price = spot * scipy.stats.norm.cdf(d1) - strike * np.exp(-r * T) * scipy.stats.norm.cdf(d2)
    vega = spot * scipy.stats.norm.pdf(d1) * np.sqrt(T)
    return np.sum(price) + 0.01 * np.sum(vega)


def _binomial_args(rng):
    return 97.0, 0.25  # (not at the strike, where the price has a kink)


# Not in PROGRAMS: its arrays shrink by one each step (V[1:], np.arange(i + 1)), which one
# compiled loop with static shapes cannot hold, so the loop is unrolled (an UnrollWarning
# naming np.arange's line): 40 copies, ~1.3 s to the first gradient. Value and gradient are
# right (tests/corpus/test_corpus.py checks that it stays so).
def american_put_binomial(S0, sigma, K=100.0, T=1.0, r=0.05, N=40):
    """An American put on a Cox-Ross-Rubinstein tree: the terminal payoffs by np.arange powers,
    backward induction by slicing, early exercise by np.maximum."""
    dt = T / N
    u = np.exp(sigma * np.sqrt(dt))
    d = 1 / u
    p = (np.exp(r * dt) - d) / (u - d)
    disc = np.exp(-r * dt)
    j = np.arange(N + 1)
    S = S0 * u ** j * d ** (N - j)
    V = np.maximum(K - S, 0.0)
    for i in range(N - 1, -1, -1):
        S = S0 * u ** np.arange(i + 1) * d ** (i - np.arange(i + 1))
        V = disc * (p * V[1:] + (1 - p) * V[:-1])
        V = np.maximum(V, K - S)
    return V[0]


def _portfolio_args(rng):
    returns = (0.001 + 0.02 * rng.standard_normal((120, 4))).astype(np.float32)
    return np.array([0.4, 0.3, 0.2, 0.1]), returns


@program(_portfolio_args, value_tol=(1e-6, 0.0))  # float32 sums: numpy's order differs
def sharpe_ratio_float32_returns(weights, returns, periods=252):
    """The annualised Sharpe ratio of a long-only portfolio: returns loaded as float32 (as
    from a CSV), weights in float64, the covariance by the centred product."""
    w = np.abs(weights) / np.abs(weights).sum()
    mu = returns.mean(axis=0)
    centred = returns - mu
    cov = centred.T @ centred / (returns.shape[0] - 1)
    vol = np.sqrt(w @ cov @ w)
    return -(mu @ w) / vol * np.sqrt(periods)


# ---- optimisation --------------------------------------------------------------------------------
def _newton_args(rng):
    X = rng.standard_normal((40, 3))
    y = (X @ np.array([1.0, -1.0, 0.5]) + 0.5 * rng.standard_normal(40) > 0).astype(float)
    return 1.0, X, y


@program(_newton_args)
def newton_logistic_validation(lam, X, y, n_steps=6, tol=1e-10):
    """Hyperparameter gradient through Newton's method for L2 logistic regression, stopped
    early by a `break` when the step is small."""
    Xtr, ytr, Xva, yva = X[:30], y[:30], X[30:], y[30:]
    w = np.zeros(X.shape[1])
    for _ in range(n_steps):
        p = 1 / (1 + np.exp(-Xtr @ w))
        grad = Xtr.T @ (p - ytr) + lam * w
        H = Xtr.T @ (Xtr * (p * (1 - p))[:, None]) + lam * np.eye(len(w))
        step = np.linalg.solve(H, grad)
        w = w - step
        if np.linalg.norm(step) < tol:
            break
    z = Xva @ w
    return np.mean(np.logaddexp(0, z) - yva * z)


def _gd_args(rng):
    A = rng.standard_normal((5, 5))
    return A @ A.T / 5 + np.eye(5), rng.standard_normal(5)


@program(_gd_args, wrt=(0, 1))
def unrolled_gradient_descent(A, b, lr=0.1, steps=15):
    """Gradient descent on a quadratic with a history of iterates kept in a list, the loss
    read back from the last few (a learned-optimiser style unroll)."""
    x = np.zeros_like(b)
    history = [x]
    for k in range(steps):
        g = A @ x - b
        x = x - lr / (1 + 0.1 * k) * g
        history.append(x)
    tail = np.stack(history[-5:])
    return np.sum(0.5 * np.einsum("ki,ij,kj->k", tail, A, tail) - tail @ b)


# ---- geometry and graphics -----------------------------------------------------------------------
def quat_mul(q, r):
    """Hamilton product of quaternions (w, x, y, z)."""
    w0, x0, y0, z0 = q
    w1, x1, y1, z1 = r
    return np.array([w0 * w1 - x0 * x1 - y0 * y1 - z0 * z1,
                     w0 * x1 + x0 * w1 + y0 * z1 - z0 * y1,
                     w0 * y1 - x0 * z1 + y0 * w1 + z0 * x1,
                     w0 * z1 + x0 * y1 - y0 * x1 + z0 * w1])


def _quat_args(rng):
    return rng.standard_normal(4), rng.standard_normal((5, 3)), rng.standard_normal((5, 3))


@program(_quat_args)
def quaternion_alignment(q, points, targets):
    """Rotate points by a unit quaternion (q p q*, a product helper called per point) and
    measure the squared distance to their targets."""
    q = q / np.linalg.norm(q)
    q_conj = q * np.array([1.0, -1.0, -1.0, -1.0])
    rotated = [quat_mul(quat_mul(q, np.concatenate([[0.0], p])), q_conj)[1:] for p in points]
    return np.sum((np.array(rotated) - targets) ** 2)


def rodrigues(axis_angle):
    """Rotation matrix of an axis-angle vector (Rodrigues' formula with the cross-product
    matrix)."""
    theta = np.linalg.norm(axis_angle)
    k = axis_angle / theta
    K = np.array([[0, -k[2], k[1]], [k[2], 0, -k[0]], [-k[1], k[0], 0]])
    return np.eye(3) + np.sin(theta) * K + (1 - np.cos(theta)) * K @ K


def _rot_args(rng):
    return np.array([0.3, -0.2, 0.5]), rng.standard_normal((8, 3))


@program(_rot_args)
def rodrigues_rotation_fit(axis_angle, points):
    """A rotation fitted to a rotated copy of the points; an f-string assert checks shapes."""
    assert points.ndim == 2 and points.shape[1] == 3, f"expected (n, 3) points, got {points.shape}"
    R = rodrigues(axis_angle)
    target = points @ rodrigues(np.array([0.1, 0.1, 0.4])).T
    return np.sum((points @ R.T - target) ** 2)


def _polygon_args(rng):
    angles = np.sort(rng.uniform(0, 2 * np.pi, 7))
    return np.column_stack([np.cos(angles), np.sin(angles)]) * (1 + 0.2 * rng.random((7, 1))),


@program(_polygon_args)
def polygon_isoperimetric_ratio(vertices):
    """A polygon's area by the shoelace formula with np.roll and its perimeter with np.hypot,
    combined into the isoperimetric quotient 4 pi A / P^2."""
    x, y = vertices[:, 0], vertices[:, 1]
    area = 0.5 * np.abs(np.dot(x, np.roll(y, -1)) - np.dot(y, np.roll(x, -1)))
    edges = np.roll(vertices, -1, axis=0) - vertices
    perimeter = np.sum(np.hypot(edges[:, 0], edges[:, 1]))
    return 4 * math.pi * area / perimeter ** 2


def de_casteljau(points, t):
    """A point on a Bezier curve by de Casteljau's recursion."""
    if len(points) == 1:
        return points[0]
    return de_casteljau((1 - t) * points[:-1] + t * points[1:], t)


def _bezier_args(rng):
    control = np.array([[0.0, 0.0], [1.0, 2.0], [3.0, 2.5], [4.0, 0.0]])
    return control + 0.1 * rng.standard_normal((4, 2)),


@program(_bezier_args)
def bezier_arc_length(control, n=16):
    """The arc length of a cubic Bezier curve by a polyline through points evaluated with a
    recursive de Casteljau helper."""
    pts = np.array([de_casteljau(control, t) for t in np.linspace(0.0, 1.0, n)])
    return np.sum(np.linalg.norm(np.diff(pts, axis=0), axis=1))


# ---- signal processing ---------------------------------------------------------------------------
def _fir_args(rng):
    t = np.arange(64)
    clean = np.sin(2 * np.pi * t / 16)
    return np.ones(5) / 5, clean + 0.3 * rng.standard_normal(64), clean


@program(_fir_args)
def fir_filter_design(taps, noisy, clean):
    """Least-squares design of a smoothing FIR filter: np.convolve in 'same' mode plus a
    penalty on the taps' sum differing from 1."""
    filtered = np.convolve(noisy, taps, mode="same")
    return np.mean((filtered - clean) ** 2) + (np.sum(taps) - 1.0) ** 2


def _acf_args(rng):
    e = rng.standard_normal(50)
    return np.convolve(e, [1.0, 0.6, 0.3], mode="valid"),


@program(_acf_args)
def autocorrelation_penalty(x, max_lag=5):
    """Sample autocorrelations at lags 1..max_lag (a list comprehension of shifted dot
    products), squared and summed, as a whiteness penalty."""
    x = x - x.mean()
    denom = np.dot(x, x)
    acf = np.array([np.dot(x[:-k], x[k:]) / denom for k in range(1, max_lag + 1)])
    return np.sum(acf ** 2)


def _smooth_args(rng):
    return rng.standard_normal(40), rng.standard_normal(40)


@program(_smooth_args)
def moving_average_padded(signal, target, window=5):
    """A centred moving average by cumulative sums over an edge-padded signal (np.pad,
    np.cumsum, differences of the running sum)."""
    half = window // 2
    padded = np.pad(signal, (half, half), mode="edge")
    c = np.cumsum(np.insert(padded, 0, 0.0))
    smooth = (c[window:] - c[:-window]) / window
    return np.sum((smooth - target) ** 2)


def _topk_args(rng):
    return rng.standard_normal((6, 10)),


@program(_topk_args)
def topk_trimmed_mean(scores, k=3):
    """The mean of each row's k largest scores, selected by argsort and take_along_axis, minus
    a trimmed mean by np.sort (ranking losses in retrieval)."""
    idx = np.argsort(scores, axis=1)[:, ::-1][:, :k]
    top = np.take_along_axis(scores, idx, axis=1)
    trimmed = np.sort(scores, axis=1)[:, 1:-1].mean(axis=1)
    return np.sum(top.mean(axis=1) - trimmed)
