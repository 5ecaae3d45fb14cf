"""Corpus programs (see tests/corpus/programs.py) from reinforcement learning, robotics, control,
PDEs, graphs, chemistry and physics, economics and astronomy, written as their tutorials and
papers write them: returns accumulated backwards into a list, soft value iteration and PageRank
by `while` until a tolerance, eligibility traces, forward kinematics over zipped links, LQR and
MPC rollouts with np.clip, finite-difference stencils by slice assignment, BLP's contraction
mapping and Kepler's equation by Newton's method inside the model."""
from __future__ import annotations

import math
from collections import namedtuple
from dataclasses import dataclass

import numpy as np
import scipy.special

from tests.corpus.registry import program


# ---- reinforcement learning ------------------------------------------------------------------
def _reinforce_args(rng):
    T, d, n_actions = 12, 4, 3
    return (0.1 * rng.standard_normal((d, n_actions)), rng.standard_normal((T, d)),
            rng.integers(0, n_actions, size=T), rng.standard_normal(T))


@program(_reinforce_args)
def reinforce_softmax_policy(theta, states, actions, rewards, gamma=0.99):
    """REINFORCE with a linear softmax policy over one recorded trajectory: discounted returns
    built backwards with list.insert, normalised, times the log-probabilities of the actions."""
    returns = []
    G = 0.0
    for r in reversed(rewards):
        G = r + gamma * G
        returns.insert(0, G)
    returns = np.array(returns)
    returns = (returns - returns.mean()) / (returns.std() + 1e-8)
    logits = states @ theta
    log_probs = logits - scipy.special.logsumexp(logits, axis=1, keepdims=True)
    chosen = log_probs[np.arange(len(actions)), actions]
    return -np.sum(chosen * returns)


def _soft_vi_args(rng):
    n_states, n_actions = 5, 3
    P = rng.random((n_states, n_actions, n_states))
    P /= P.sum(axis=2, keepdims=True)
    return rng.standard_normal((n_states, n_actions)), P


@program(_soft_vi_args)
def soft_value_iteration(R, P, gamma=0.8, tol=1e-12):
    """Soft (maximum-entropy) value iteration, as in MaxEnt IRL: V <- logsumexp_a(R + gamma P V)
    until the largest change falls below `tol`; the value of a uniform start distribution."""
    n_states = R.shape[0]
    V = np.zeros(n_states)
    delta = np.inf
    while delta > tol:
        Q = R + gamma * P @ V
        V_new = scipy.special.logsumexp(Q, axis=1)
        delta = np.max(np.abs(V_new - V))
        V = V_new
    return np.mean(V)


def _td_args(rng):
    T, d = 15, 4
    return np.zeros(d), rng.random((T + 1, d)), rng.standard_normal(T), rng.standard_normal(T), 0.7


@program(_td_args, wrt=(0, 4))
def td_lambda_eligibility_traces(w, features, rewards, true_values, lam, alpha=0.1, gamma=0.9):
    """Linear TD(lambda) with accumulating eligibility traces (Sutton & Barto, 12.2) over one
    episode; the squared error of the learned values, differentiated w.r.t. the initial weights
    and the trace decay."""
    z = np.zeros_like(w)
    for t in range(len(rewards)):
        x, x_next = features[t], features[t + 1]
        delta = rewards[t] + gamma * w @ x_next - w @ x
        z = gamma * lam * z + x
        w = w + alpha * delta * z
    v = features[:-1] @ w
    return np.mean((v - true_values) ** 2)


# ---- robotics ----------------------------------------------------------------------------------
def forward_kinematics(q, lengths):
    """Joint positions of a planar serial arm, link by link."""
    x, y, phi = 0.0, 0.0, 0.0
    points = [(x, y)]
    for qi, li in zip(q, lengths):
        phi += qi
        x += li * np.cos(phi)
        y += li * np.sin(phi)
        points.append((x, y))
    return np.array(points)


def _arm_args(rng):
    return rng.uniform(-1, 1, 3), np.array([1.2, 0.4]), [1.0, 0.8, 0.5]


@program(_arm_args)
def planar_arm_ik_loss(q, target, lengths, reg=1e-2):
    """Inverse-kinematics loss of a 3-link planar arm: squared end-effector error plus a joint
    regulariser, with forward kinematics zipping the joint angles and a list of link lengths."""
    points = forward_kinematics(q, lengths)
    err = points[-1] - target
    return err @ err + reg * np.sum(q ** 2)


State = namedtuple("State", ["x", "y", "theta"])


def _drive_step(s, v_left, v_right, dt, wheel_base):
    v = 0.5 * (v_left + v_right)
    omega = (v_right - v_left) / wheel_base
    return State(s.x + v * np.cos(s.theta) * dt,
                 s.y + v * np.sin(s.theta) * dt,
                 s.theta + omega * dt)


def _drive_args(rng):
    return 1.0 + 0.2 * rng.standard_normal((20, 2)), np.array([2.0, 1.0])


@program(_drive_args)
def differential_drive_rollout(wheel_speeds, goal, dt=0.1, wheel_base=0.5):
    """A differential-drive robot's rollout from wheel-speed commands (a namedtuple state):
    distance of the final pose to a goal plus a smoothness penalty on the commands."""
    s = State(0.0, 0.0, 0.0)
    for vl, vr in wheel_speeds:
        s = _drive_step(s, vl, vr, dt, wheel_base)
    smooth = np.sum(np.diff(wheel_speeds, axis=0) ** 2)
    return (s.x - goal[0]) ** 2 + (s.y - goal[1]) ** 2 + 0.01 * smooth


# ---- control -----------------------------------------------------------------------------------
@dataclass
class LinearSystem:
    A: np.ndarray
    B: np.ndarray
    Q: np.ndarray
    R: np.ndarray


def _lqr_args(rng):
    dt = 0.1
    sys = LinearSystem(A=np.array([[1.0, dt], [0.0, 1.0]]), B=np.array([[0.0], [dt]]),
                       Q=np.diag([1.0, 0.1]), R=np.array([[0.01]]))
    return np.array([[1.0, 1.5]]), sys, np.array([1.0, 0.0])


@program(_lqr_args)
def lqr_rollout_cost(K, sys, x0, horizon=30):
    """The finite-horizon quadratic cost of the feedback law u = -K x on a double integrator
    kept in a dataclass: what policy-gradient LQR papers differentiate w.r.t. K."""
    x = x0
    cost = 0.0
    for _ in range(horizon):
        u = -K @ x
        cost += x @ sys.Q @ x + u @ sys.R @ u
        x = sys.A @ x + sys.B @ u
    return cost + x @ sys.Q @ x


def _mpc_args(rng):
    return 0.8 * rng.standard_normal(15), np.array([0.0, 0.0]), np.array([1.0, 0.0])


@program(_mpc_args)
def mpc_objective_clipped(u, x0, x_ref, u_max=1.0, dt=0.2):
    """A shooting MPC objective: the controls saturated by np.clip, a double integrator rolled
    out with the state stacked into a trajectory, tracking plus effort costs."""
    u = np.clip(u, -u_max, u_max)
    x = np.asarray(x0, dtype=float)
    traj = []
    for k in range(len(u)):
        x = np.array([x[0] + dt * x[1], x[1] + dt * u[k]])
        traj.append(x)
    traj = np.stack(traj)
    tracking = np.sum((traj - x_ref) ** 2)
    return tracking + 0.1 * np.sum(u ** 2)


# ---- PDEs --------------------------------------------------------------------------------------
def _burgers_args(rng):
    x = np.linspace(0, 1, 24, endpoint=False)
    return 0.5 + 0.3 * np.sin(2 * np.pi * x) + 0.02 * rng.standard_normal(24), 0.01


@program(_burgers_args, wrt=(0, 1))
def burgers_upwind(u0, nu, steps=20, dt=0.005):
    """Viscous Burgers' equation on a periodic grid: first-order upwind advection chosen by
    np.where on the sign of u, centred diffusion, both with np.roll."""
    dx = 1.0 / len(u0)
    u = u0.copy()
    for _ in range(steps):
        back = (u - np.roll(u, 1)) / dx
        fwd = (np.roll(u, -1) - u) / dx
        adv = np.where(u > 0, u * back, u * fwd)
        diff = nu * (np.roll(u, -1) - 2 * u + np.roll(u, 1)) / dx ** 2
        u = u + dt * (diff - adv)
    return np.sum(u ** 2) * dx


def _wave_args(rng):
    x = np.linspace(0, 1, 20)
    return np.exp(-100 * (x - 0.4) ** 2) + 0.01 * rng.standard_normal(20), 1.0


@program(_wave_args, wrt=(0, 1))
def wave_equation_leapfrog(u0, c, steps=25, dt=0.02):
    """The 1-D wave equation by leapfrog with fixed ends: each new level written into a zeros
    array by slice assignment, the energy of the last level."""
    n = len(u0)
    dx = 1.0 / (n - 1)
    C2 = (c * dt / dx) ** 2
    u_prev = u0.copy()
    u = u0.copy()
    u[1:-1] = u0[1:-1] + 0.5 * C2 * (u0[2:] - 2 * u0[1:-1] + u0[:-2])
    for _ in range(steps):
        u_new = np.zeros_like(u)
        u_new[1:-1] = 2 * u[1:-1] - u_prev[1:-1] + C2 * (u[2:] - 2 * u[1:-1] + u[:-2])
        u_prev, u = u, u_new
    return np.sum(u ** 2) * dx


def _poisson_args(rng):
    return (rng.standard_normal((10, 10)),)


@program(_poisson_args)
def poisson_jacobi_2d(f, iters=60):
    """Jacobi iterations for -lap(u) = f on the unit square with zero boundary (the classic
    numpy slicing stencil), then the L2 norm of the solution."""
    n = f.shape[0]
    h = 1.0 / (n - 1)
    u = np.zeros((n, n))
    for _ in range(iters):
        u_new = u.copy()
        u_new[1:-1, 1:-1] = 0.25 * (u[2:, 1:-1] + u[:-2, 1:-1] + u[1:-1, 2:] + u[1:-1, :-2]
                                    + h ** 2 * f[1:-1, 1:-1])
        u = u_new
    return np.sum(u ** 2) * h ** 2


# ---- graphs ------------------------------------------------------------------------------------
def _pagerank_args(rng):
    n = 6
    A = (rng.random((n, n)) < 0.5).astype(float)
    np.fill_diagonal(A, 0.0)
    A[0, 1] = A[1, 0] = 1.0
    return A * rng.uniform(0.5, 1.5, (n, n)) + 0.05, rng.standard_normal(n)


@program(_pagerank_args)
def pagerank_power_iteration(W, score, d=0.85, tol=1e-12):
    """PageRank by power iteration on a column-stochastic matrix from edge weights, `while` the
    L1 change exceeds `tol`; a weighted sum of the ranks."""
    n = W.shape[0]
    M = W / W.sum(axis=0)
    r = np.ones(n) / n
    err = 1.0
    while err > tol:
        r_new = (1 - d) / n + d * M @ r
        err = np.linalg.norm(r_new - r, 1)
        r = r_new
    return r @ score


def _gcn_args(rng):
    n, d, h, c = 7, 4, 5, 3
    A = (rng.random((n, n)) < 0.4).astype(float)
    A = np.triu(A, 1)
    A = A + A.T
    params = {"W1": 0.5 * rng.standard_normal((d, h)), "W2": 0.5 * rng.standard_normal((h, c))}
    return params, A, rng.standard_normal((n, d)), rng.integers(0, c, n)


@program(_gcn_args)
def gcn_two_layer(params, A, X, labels):
    """Kipf & Welling's GCN: self-loops, symmetric normalisation D^-1/2 (A + I) D^-1/2, two
    graph convolutions with a ReLU, softmax cross-entropy over the nodes."""
    A_hat = A + np.eye(A.shape[0])
    d_inv_sqrt = 1.0 / np.sqrt(A_hat.sum(axis=1))
    A_norm = d_inv_sqrt[:, None] * A_hat * d_inv_sqrt[None, :]
    H = np.maximum(A_norm @ X @ params["W1"], 0)
    logits = A_norm @ H @ params["W2"]
    logp = logits - scipy.special.logsumexp(logits, axis=1, keepdims=True)
    return -np.mean(logp[np.arange(len(labels)), labels])


def _smooth_args(rng):
    n = 8
    edges = [(i, i + 1) for i in range(n - 1)] + [(0, 4), (2, 6)]
    return rng.standard_normal(n), rng.uniform(0.5, 2.0, len(edges)), edges, rng.standard_normal(n)


@program(_smooth_args, wrt=(0, 1))
def laplacian_smoothing(x, weights, edges, y, lam=0.5):
    """Graph-Laplacian smoothing energy ||x - y||^2 + lam x^T L x, the weighted Laplacian
    assembled from an edge list by indexed `+=`/`-=` in a Python loop."""
    n = len(x)
    L = np.zeros((n, n))
    for (i, j), w in zip(edges, weights):
        L[i, i] += w
        L[j, j] += w
        L[i, j] -= w
        L[j, i] -= w
    return np.sum((x - y) ** 2) + lam * x @ L @ x


# ---- chemistry and physics ---------------------------------------------------------------------
def _morse_args(rng):
    grid = np.array([[i, j, 0.0] for i in range(3) for j in range(2)], dtype=float)
    return 1.1 * grid + 0.05 * rng.standard_normal(grid.shape), np.array([1.0, 1.5, 1.0])


@program(_morse_args, wrt=(0, 1))
def morse_cluster_energy(pos, morse_params):
    """Total Morse energy D (1 - exp(-a (r - r0)))^2 - D of a small cluster over the unique pairs
    from np.triu_indices."""
    D, a, r0 = morse_params
    i, j = np.triu_indices(len(pos), k=1)
    r = np.linalg.norm(pos[i] - pos[j], axis=1)
    return np.sum(D * (1 - np.exp(-a * (r - r0))) ** 2 - D)


def _coulomb_args(rng):
    return rng.uniform(-1, 1, (6, 3)), np.array([1.0, -1.0, 1.0, -1.0, 0.5, -0.5])


@program(_coulomb_args, wrt=(0, 1))
def coulomb_masked_pairs(pos, charges, k_e=1.0):
    """Direct (Ewald-free) Coulomb energy: every pair by broadcasting, the self-interactions
    removed by a boolean off-diagonal mask, halved for double counting."""
    n = len(pos)
    diff = pos[:, None, :] - pos[None, :, :]
    r = np.sqrt(np.sum(diff ** 2, axis=-1))
    mask = ~np.eye(n, dtype=bool)
    qq = charges[:, None] * charges[None, :]
    return 0.5 * k_e * np.sum(qq[mask] / r[mask])


def _cloth_args(rng):
    ny, nx = 4, 5
    gx, gy = np.meshgrid(np.arange(nx, dtype=float), np.arange(ny, dtype=float))
    pos = np.stack([gx, gy, np.zeros_like(gx)], axis=-1)
    return (pos + 0.05 * rng.standard_normal(pos.shape),)


@program(_cloth_args)
def spring_mass_cloth(pos, k=50.0, rest=1.0, mass=0.1, g=9.81):
    """A cloth as a grid of masses joined by structural and shear springs (neighbours taken by
    slicing the (ny, nx, 3) grid), plus gravity."""
    def spring(a, b, rest_len):
        length = np.linalg.norm(a - b, axis=-1)
        return 0.5 * k * np.sum((length - rest_len) ** 2)
    e = spring(pos[:, 1:], pos[:, :-1], rest) + spring(pos[1:, :], pos[:-1, :], rest)
    e += spring(pos[1:, 1:], pos[:-1, :-1], rest * math.sqrt(2))
    e += spring(pos[1:, :-1], pos[:-1, 1:], rest * math.sqrt(2))
    return e + mass * g * np.sum(pos[..., 2])


# ---- economics ---------------------------------------------------------------------------------
def _ces_args(rng):
    return rng.uniform(1, 3, 4), np.array([0.4, 0.3, 0.2, 0.1]), -0.5


@program(_ces_args, wrt=(0, 1, 2))
def ces_utility_with_budget(x, alpha, rho, prices=(1.0, 2.0, 0.5, 1.5), income=8.0):
    """Negative CES utility (sum alpha x^rho)^(1/rho) plus a quadratic penalty for overspending a
    budget, prices given as a tuple."""
    p = np.asarray(prices)
    utility = np.sum(alpha * x ** rho) ** (1.0 / rho)
    overspend = max(p @ x - income, 0.0)
    return -utility + 10.0 * overspend ** 2


def _blp_args(rng):
    J, R = 4, 30
    X = rng.standard_normal((J, 2))
    return np.array([0.5, 0.3]), X, rng.standard_normal((2, R)), np.array([0.1, 0.2, 0.15, 0.25])


def blp_shares(delta, X, sigma, nu):
    """Simulated random-coefficient logit market shares: a mean over consumer draws."""
    mu = X @ (sigma[:, None] * nu)                       # (J, R)
    u = np.exp(delta[:, None] + mu)
    return np.mean(u / (1.0 + u.sum(axis=0)), axis=1)


@program(_blp_args)
def blp_contraction_objective(sigma, X, nu, s_obs, tol=1e-12, max_iter=1000):
    """BLP (1995): the mean utilities delta found by Berry's contraction mapping
    delta <- delta + log s_obs - log s(delta), `while` the sup-norm change exceeds `tol`; a
    GMM-like objective of the linear regression of delta on X."""
    delta = np.log(s_obs) - np.log(1 - s_obs.sum())
    diff, it = np.inf, 0
    while diff > tol and it < max_iter:
        new = delta + np.log(s_obs) - np.log(blp_shares(delta, X, sigma, nu))
        diff = np.max(np.abs(new - delta))
        delta, it = new, it + 1
    beta = np.linalg.lstsq(X, delta, rcond=None)[0]
    xi = delta - X @ beta
    return xi @ xi


def _cobb_args(rng):
    K = rng.uniform(1, 10, 25)
    L = rng.uniform(1, 10, 25)
    Y = 2.0 * K ** 0.3 * L ** 0.7 * np.exp(0.05 * rng.standard_normal(25))
    return np.array([0.5, 0.4]), K, L, Y


@program(_cobb_args)
def cobb_douglas_nls(params, K, L, Y):
    """Nonlinear least squares for a constant-returns Cobb-Douglas production function
    Y = A K^a L^(1-a), with log A and a unpacked from the parameter vector."""
    log_A, a = params
    Y_hat = np.exp(log_A) * np.power(K, a) * np.power(L, 1 - a)
    return np.mean((Y - Y_hat) ** 2)


# ---- astronomy ---------------------------------------------------------------------------------
def solve_kepler(M, e, tol=1e-13):
    """Eccentric anomaly E with E - e sin E = M by Newton's method (vectorised over M)."""
    E = M.copy() if e < 0.8 else np.full_like(M, np.pi)
    dE = np.ones_like(M)
    while np.max(np.abs(dE)) > tol:
        dE = (E - e * np.sin(E) - M) / (1 - e * np.cos(E))
        E = E - dE
    return E


def _kepler_args(rng):
    t = np.sort(rng.uniform(0, 10, 12))
    return np.array([math.log(2.0), 0.3, 0.5, 1.0]), t, rng.standard_normal((12, 2))


@program(_kepler_args)
def kepler_orbit_fit(elements, t, obs, period=7.0):
    """Residuals of a Keplerian orbit's sky positions: mean anomaly, Kepler's equation solved by
    Newton iterations inside the model, true anomaly by arctan2, orientation by omega."""
    log_a, e, omega, tp = elements
    a = np.exp(log_a)
    M = 2 * np.pi * (t - tp) / period
    E = solve_kepler(M, e)
    nu = 2 * np.arctan2(np.sqrt(1 + e) * np.sin(E / 2), np.sqrt(1 - e) * np.cos(E / 2))
    r = a * (1 - e * np.cos(E))
    x = r * np.cos(nu + omega)
    y = r * np.sin(nu + omega)
    return np.sum((x - obs[:, 0]) ** 2 + (y - obs[:, 1]) ** 2)


# ---- more: actor-critic, Q-learning, manipulator dynamics, equilibria ---------------------------
def _a2c_args(rng):
    T = 10
    return 0.1 * rng.standard_normal(4), rng.standard_normal((T + 1, 4)), rng.standard_normal(T)


@program(_a2c_args)
def critic_discounted_returns_matrix(w, features, rewards, gamma=0.95, lam=0.9):
    """An actor-critic's critic loss against GAE(lambda) advantages, the discounting written
    as a matrix of (gamma lam)^(j - i) from np.subtract.outer and np.triu (no Python loop)."""
    T = len(rewards)
    values = features @ w
    deltas = rewards + gamma * values[1:] - values[:-1]
    idx = np.arange(T)
    powers = np.triu(np.subtract.outer(idx, idx).T.astype(float))
    discount = np.triu((gamma * lam) ** powers)
    advantages = discount @ deltas
    return 0.5 * np.mean(advantages ** 2)


def _bellman_args(rng):
    n, d, n_actions = 16, 5, 3
    return (0.1 * rng.standard_normal((d, n_actions)), rng.standard_normal((n, d)),
            rng.integers(0, n_actions, n), rng.standard_normal(n), rng.standard_normal((n, d)),
            (rng.random(n) < 0.2).astype(float))


@program(_bellman_args)
def dqn_bellman_residual(W, states, actions, rewards, next_states, dones, gamma=0.99):
    """A DQN-style squared Bellman residual with a linear Q-function: Q(s, a) picked by
    np.take_along_axis, the target's max over actions with its gradient, done masks."""
    q = states @ W
    q_sa = np.take_along_axis(q, actions[:, None], axis=1).squeeze(1)
    target = rewards + gamma * (1 - dones) * np.max(next_states @ W, axis=1)
    return np.mean((q_sa - target) ** 2)


def _two_link_args(rng):
    return 0.5 * rng.standard_normal((25, 2)), np.array([0.3, -0.2, 0.0, 0.0])


@program(_two_link_args)
def two_link_arm_dynamics(torques, x0, m1=1.0, m2=0.8, l1=1.0, l2=0.7, g=9.81, dt=0.02):
    """A two-link arm's manipulator equation M(q) qdd + C(q, qd) qd + G(q) = tau integrated by
    semi-implicit Euler, the 2x2 mass matrix solved at every step; reach a target angle."""
    q, qd = x0[:2], x0[2:]
    for tau in torques:
        c2, s2 = np.cos(q[1]), np.sin(q[1])
        M = np.array([[m1 * l1 ** 2 + m2 * (l1 ** 2 + 2 * l1 * l2 * c2 + l2 ** 2),
                       m2 * (l1 * l2 * c2 + l2 ** 2)],
                      [m2 * (l1 * l2 * c2 + l2 ** 2), m2 * l2 ** 2]])
        C = np.array([-m2 * l1 * l2 * s2 * (2 * qd[0] * qd[1] + qd[1] ** 2),
                      m2 * l1 * l2 * s2 * qd[0] ** 2])
        G = np.array([(m1 + m2) * l1 * g * np.cos(q[0]) + m2 * g * l2 * np.cos(q[0] + q[1]),
                      m2 * g * l2 * np.cos(q[0] + q[1])])
        qdd = np.linalg.solve(M, tau - C - G)
        qd = qd + dt * qdd
        q = q + dt * qd
    return np.sum((q - np.array([0.5, 0.5])) ** 2) + 1e-3 * np.sum(torques ** 2)


def _ising_args(rng):
    n = 8
    J = rng.standard_normal((n, n)) / n
    return 0.1 * rng.standard_normal(n), (J + J.T) / 2 - np.diag(np.diag(J)), 0.5


@program(_ising_args, wrt=(0, 2))
def ising_mean_field_free_energy(h, J, beta, tol=1e-12):
    """Naive mean-field for an Ising model: the magnetisations m = tanh(beta (J m + h)) by
    fixed-point iteration until converged, then the mean-field free energy."""
    m = np.zeros_like(h)
    while True:
        m_new = np.tanh(beta * (J @ m + h))
        if np.max(np.abs(m_new - m)) < tol:
            break
        m = m_new
    m = m_new
    p_up, p_down = (1 + m) / 2, (1 - m) / 2
    entropy = -np.sum(p_up * np.log(p_up) + p_down * np.log(p_down))
    energy = -0.5 * m @ J @ m - h @ m
    return energy - entropy / beta


def _bertrand_args(rng):
    return np.array([1.0, 1.2, 0.8]), np.array([0.5, 0.6, 0.4]), 2.0


@program(_bertrand_args, wrt=(0, 2))
def bertrand_logit_equilibrium(quality, cost, alpha, tol=1e-12, max_iter=500):
    """Bertrand-Nash prices of single-product firms under logit demand, by iterating the
    first-order conditions p = c + 1 / (alpha (1 - s)) to a fixed point; total profit."""
    p = cost + 1.0
    for _ in range(max_iter):
        u = np.exp(quality - alpha * p)
        s = u / (1 + u.sum())
        p_new = cost + 1.0 / (alpha * (1 - s))
        if np.max(np.abs(p_new - p)) < tol:
            break
        p = p_new
    u = np.exp(quality - alpha * p_new)
    s = u / (1 + u.sum())
    return np.sum((p_new - cost) * s)


def _heading_args(rng):
    t = np.linspace(0, 2.0, 15)
    return 0.5 * rng.standard_normal(15), t, 3.0 * t + 0.05 * rng.standard_normal(15)


@program(_heading_args)
def unwrapped_heading_fit(omega_noise, t, gyro_heading, omega=3.0):
    """A turning robot's compass headings (wrapped into (-pi, pi] by arctan2) unwrapped with
    np.unwrap and fitted to an integrated gyro heading."""
    heading = omega * t + np.cumsum(omega_noise) * (t[1] - t[0])
    compass = np.arctan2(np.sin(heading), np.cos(heading))
    return np.mean((np.unwrap(compass) - gyro_heading) ** 2)
