"""A corpus of realistic numpy programs, written the way tutorials, papers and notebooks write
them (not for llgrad): each runs as plain Python on numpy and compiled with
`llgrad.differentiate`, and must give the same value and a gradient equal to finite
differences (tests/corpus/test_corpus.py). A program that fails, compiles slowly or gives an
unclear error is a bug.

Each entry is a `Program` (tests/corpus/registry.py); this module holds the first programs and
imports the others (programs_ml.py: learning, statistics and Python styles; programs_numerics.py:
linear algebra and interpolation; programs_science.py: physics, finance, optimisation,
geometry and signals; programs_masks.py: boolean masks; programs_dynamics.py: epidemics, ODEs,
time series and finance; programs_learning.py: recommenders, embeddings, convolutions and
losses; programs_survival.py: survival, robust and quantile regression, densities;
programs_geometry.py: embeddings, optimal transport, alignment and multi-view geometry;
programs_styles.py: Python styles in those domains; programs_loops.py: loops over indices
as Numba users write them; programs_spectral.py: Fourier transforms and complex
intermediates; programs_ode.py: ODE models solved by scipy.integrate; programs_control.py:
reinforcement learning, robotics, control, PDEs, graphs, physics, economics and astronomy;
programs_probabilistic.py: flows, sequence models, ranking, Bayesian models and image
processing; programs_users.py: HIPS autograd's examples, scipy.optimize objectives,
JAX-tutorial models and numerical recipes as new users write them), so PROGRAMS here is the whole corpus.
"""
from __future__ import annotations

import math
from collections import namedtuple
from dataclasses import dataclass

import numpy as np
import scipy.linalg
import scipy.optimize
import scipy.special

from tests.corpus.registry import PROGRAMS, program  # noqa: F401 (PROGRAMS: the corpus)


# ---- statistics and machine learning ---------------------------------------------------------
def _gp_args(rng):
    X = rng.uniform(-3, 3, size=(20, 1))
    y = np.sin(X[:, 0]) + 0.1 * rng.standard_normal(20)
    return np.array([0.1, 0.3, -1.0]), X, y


@program(_gp_args)
def gp_neg_log_marginal_likelihood(params, X, y):
    """GP regression with an RBF kernel (Rasmussen & Williams, Algorithm 2.1)."""
    log_ell, log_sf, log_sn = params
    ell, sf2, sn2 = np.exp(log_ell), np.exp(2 * log_sf), np.exp(2 * log_sn)
    sqdist = np.sum(X ** 2, 1).reshape(-1, 1) + np.sum(X ** 2, 1) - 2 * X @ X.T
    K = sf2 * np.exp(-0.5 / ell ** 2 * sqdist) + sn2 * np.eye(len(X))
    L = np.linalg.cholesky(K)
    alpha = scipy.linalg.solve_triangular(L.T, scipy.linalg.solve_triangular(L, y, lower=True))
    return 0.5 * y @ alpha + np.sum(np.log(np.diag(L))) + 0.5 * len(X) * np.log(2 * np.pi)


def _logreg_args(rng):
    X = rng.standard_normal((50, 4))
    y = (rng.random(50) > 0.5).astype(np.float64)
    return 0.1 * rng.standard_normal(4), X, y


@program(_logreg_args)
def logistic_regression_nll(w, X, y):
    """Logistic regression's negative log-likelihood, the numerically stable way."""
    z = X @ w
    return np.sum(np.logaddexp(0, z) - y * z) + 0.5 * 0.01 * np.dot(w, w)


def _softmax_args(rng):
    return (0.1 * rng.standard_normal((5, 3)), rng.standard_normal((8, 5)),
            rng.integers(0, 3, size=8))


@program(_softmax_args)
def softmax_regression(W, X, labels):
    """Multinomial logistic regression (cs231n style softmax loss)."""
    scores = X.dot(W)
    scores -= np.max(scores, axis=1, keepdims=True)
    probs = np.exp(scores) / np.sum(np.exp(scores), axis=1, keepdims=True)
    n = X.shape[0]
    loss = -np.sum(np.log(probs[np.arange(n), labels])) / n
    return loss + 0.5 * 1e-3 * np.sum(W * W)


def _mlp_args(rng):
    params = {"W1": 0.3 * rng.standard_normal((4, 16)), "b1": np.zeros(16),
              "W2": 0.3 * rng.standard_normal((16, 1)), "b2": np.zeros(1)}
    X = rng.standard_normal((32, 4))
    return params, X, np.sin(X[:, :1])


@program(_mlp_args)
def mlp_mse_dict_params(params, X, y):
    """A two-layer MLP with its parameters in a dict (the usual plain-numpy tutorial)."""
    h = np.tanh(X @ params["W1"] + params["b1"])
    out = h @ params["W2"] + params["b2"]
    return np.mean((out - y) ** 2)


def _kmeans_args(rng):
    return rng.standard_normal((3, 2)), rng.standard_normal((40, 2))


@program(_kmeans_args)
def kmeans_objective(centers, points):
    """k-means distortion: each point's squared distance to its nearest centre."""
    d = np.sum((points[:, None, :] - centers[None, :, :]) ** 2, axis=-1)
    nearest = np.argmin(d, axis=1)
    return np.sum((points - centers[nearest]) ** 2)


def _poisson_args(rng):
    X = rng.standard_normal((30, 3))
    counts = rng.poisson(2.0, size=30).astype(np.float64)
    return 0.1 * rng.standard_normal(3), X, counts


@program(_poisson_args)
def poisson_regression_nll(beta, X, counts):
    """Poisson GLM negative log-likelihood with the log(y!) term (scipy.special.gammaln)."""
    eta = X @ beta
    return -np.sum(counts * eta - np.exp(eta) - scipy.special.gammaln(counts + 1))


def _gmm_args(rng):
    return (rng.standard_normal(3), rng.standard_normal((3, 2)), rng.standard_normal((3, 2)),
            rng.standard_normal((25, 2)))


@program(_gmm_args, wrt=(0, 1, 2))
def gmm_log_likelihood(logits, means, log_sigmas, x):
    """Diagonal-covariance Gaussian mixture log-likelihood with scipy's logsumexp."""
    log_w = logits - scipy.special.logsumexp(logits)
    sig = np.exp(log_sigmas)
    z = (x[:, None, :] - means[None]) / sig[None]
    log_comp = (-0.5 * np.sum(z ** 2, axis=2) - np.sum(log_sigmas, axis=1)
                - x.shape[1] * 0.5 * np.log(2 * np.pi))
    return -np.sum(scipy.special.logsumexp(log_w + log_comp, axis=1))


def _bayes_args(rng):
    X = rng.standard_normal((15, 3))
    return np.array([0.2, -0.3]), X, X @ np.array([1.0, -2.0, 0.5]) + 0.1 * rng.standard_normal(15)


@program(_bayes_args)
def bayesian_linreg_evidence(log_hyper, X, y):
    """Bayesian linear regression's log evidence (Bishop, PRML eq. 3.86) with slogdet/solve."""
    alpha, beta = np.exp(log_hyper)
    n, d = X.shape
    A = alpha * np.eye(d) + beta * X.T @ X
    m = beta * np.linalg.solve(A, X.T @ y)
    E = beta / 2 * np.sum((y - X @ m) ** 2) + alpha / 2 * m @ m
    sign, logdet = np.linalg.slogdet(A)
    return -(d / 2 * np.log(alpha) + n / 2 * np.log(beta) - E - 0.5 * logdet
             - n / 2 * np.log(2 * np.pi))


def _ridge_args(rng):
    X = rng.standard_normal((20, 4))
    return 0.5, X, rng.standard_normal(20), rng.standard_normal((10, 4)), rng.standard_normal(10)


@program(_ridge_args)
def ridge_validation_loss(lam, X, y, Xv, yv):
    """Validation error of ridge regression as a function of the penalty (hyperparameter
    gradient through np.linalg.solve)."""
    w = np.linalg.solve(X.T @ X + lam * np.eye(X.shape[1]), X.T @ y)
    return np.mean((Xv @ w - yv) ** 2)


# ---- recurrent models --------------------------------------------------------------------------
def _rnn_args(rng):
    return (0.3 * rng.standard_normal((16, 16)), 0.3 * rng.standard_normal((3, 16)),
            0.3 * rng.standard_normal((16, 1)), rng.standard_normal((10, 8, 3)),
            rng.standard_normal((10, 8, 1)))


@program(_rnn_args, wrt=(0, 1, 2))
def rnn_list_append(W, U, V, xs, ys):
    """A tanh RNN collecting its per-step predictions in a list, then np.stack."""
    h = np.zeros((xs.shape[1], W.shape[0]))
    preds = []
    for t in range(xs.shape[0]):
        h = np.tanh(h @ W + xs[t] @ U)
        preds.append(h @ V)
    return np.mean((np.stack(preds) - ys) ** 2)


def _lstm_args(rng):
    H, D = 8, 3
    layers = [(0.3 * rng.standard_normal((D if l == 0 else H, 4 * H)),
               0.3 * rng.standard_normal((H, 4 * H)), np.zeros(4 * H)) for l in range(2)]
    return layers, rng.standard_normal((6, 4, D))


def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


@program(_lstm_args)
def lstm_two_layers(layers, xs):
    """A two-layer LSTM written with lists of per-layer states updated by index."""
    T, B, _ = xs.shape
    H = layers[0][1].shape[0]
    hidden = [np.zeros((B, H)) for _ in layers]
    cell = [np.zeros((B, H)) for _ in layers]
    for t in range(T):
        inp = xs[t]
        for i, (Wx, Wh, b) in enumerate(layers):
            gates = inp @ Wx + hidden[i] @ Wh + b
            ingate = _sigmoid(gates[:, :H])
            forget = _sigmoid(gates[:, H:2 * H])
            change = np.tanh(gates[:, 2 * H:3 * H])
            outgate = _sigmoid(gates[:, 3 * H:])
            cell[i] = cell[i] * forget + ingate * change
            hidden[i] = outgate * np.tanh(cell[i])
            inp = hidden[i]
    return np.sum(hidden[-1] ** 2)


# ---- finance -------------------------------------------------------------------------------------
def _mc_args(rng):
    return 100.0, rng.standard_normal((200, 12))


@program(_mc_args)
def monte_carlo_call_price(s0, z):
    """Monte Carlo price of an Asian call under geometric Brownian motion (delta = gradient
    w.r.t. the spot), paths built with np.cumsum."""
    r, sigma, T, K = 0.02, 0.2, 1.0, 100.0
    dt = T / z.shape[1]
    log_paths = np.cumsum((r - 0.5 * sigma ** 2) * dt + sigma * np.sqrt(dt) * z, axis=1)
    paths = s0 * np.exp(log_paths)
    payoff = np.maximum(paths.mean(axis=1) - K, 0.0)
    return np.exp(-r * T) * payoff.mean()


def _bs_args(rng):
    return np.array([100.0, 0.2]), 105.0, 0.5, 0.01


@program(_bs_args)
def black_scholes_call(spot_vol, K, T, r):
    """Black-Scholes call price with math.erf-style normal CDF (scipy.special.erf)."""
    S, sigma = spot_vol
    d1 = (np.log(S / K) + (r + 0.5 * sigma ** 2) * T) / (sigma * np.sqrt(T))
    d2 = d1 - sigma * np.sqrt(T)
    N = lambda v: 0.5 * (1.0 + scipy.special.erf(v / np.sqrt(2.0)))  # noqa: E731
    return S * N(d1) - K * np.exp(-r * T) * N(d2)


def _cvar_args(rng):
    return np.full(4, 0.25), 0.01 + 0.05 * rng.standard_normal((60, 4))


@program(_cvar_args)
def portfolio_cvar(weights, returns):
    """Conditional value at risk of a portfolio: the mean of the worst 10% of returns."""
    w = np.asarray(weights)
    w = w / np.sum(w)
    port = returns @ w
    losses = np.sort(-port)
    k = int(np.ceil(0.1 * len(losses)))
    return np.mean(losses[-k:]) + 0.1 * np.var(port)


def _markowitz_args(rng):
    R = 0.01 + 0.05 * rng.standard_normal((50, 5))
    return np.full(5, 0.2), R


@program(_markowitz_args)
def markowitz_objective(w, returns):
    """Mean-variance objective with np.cov and a softmax-parameterised weight vector."""
    weights = np.exp(w) / np.sum(np.exp(w))
    mu = returns.mean(axis=0)
    cov = np.cov(returns, rowvar=False)
    return -(mu @ weights) + 2.0 * weights @ cov @ weights


# ---- physics and simulation ---------------------------------------------------------------------
State = namedtuple("State", ["pos", "vel"])


def _particle_args(rng):
    return State(rng.standard_normal((5, 2)), rng.standard_normal((5, 2))), 0.05


@program(_particle_args)
def particles_namedtuple(state, dt):
    """Velocity Verlet for particles on springs to the origin; state in a namedtuple."""
    pos, vel = state
    for _ in range(20):
        acc = -pos - 0.1 * vel
        vel = vel + 0.5 * dt * acc
        pos = pos + dt * vel
        acc = -pos - 0.1 * vel
        vel = vel + 0.5 * dt * acc
    final = State(pos, vel)
    return np.sum(final.pos ** 2) + 0.5 * np.sum(final.vel ** 2)


@dataclass
class Springs:
    stiffness: np.ndarray
    rest: np.ndarray


def _springs_args(rng):
    return Springs(1.0 + rng.random(4), 1.0 + 0.1 * rng.random(4)), rng.standard_normal((5, 2))


@program(_springs_args)
def spring_chain_energy(springs, x):
    """Potential energy of a chain of springs whose parameters live in a dataclass."""
    lengths = np.linalg.norm(np.diff(x, axis=0), axis=1)
    return 0.5 * np.sum(springs.stiffness * (lengths - springs.rest) ** 2)


def _lj_args(rng):
    g = np.stack(np.meshgrid(np.arange(3.0), np.arange(3.0)), -1).reshape(-1, 2)
    return (1.1 * g + 0.05 * rng.standard_normal(g.shape),)


@program(_lj_args)
def lennard_jones_energy(pos):
    """Lennard-Jones energy over all pairs, upper triangle via np.triu_indices."""
    diff = pos[:, None, :] - pos[None, :, :]
    r2 = np.sum(diff ** 2, axis=-1)
    i, j = np.triu_indices(len(pos), k=1)
    inv6 = 1.0 / r2[i, j] ** 3
    return np.sum(4.0 * (inv6 ** 2 - inv6))


def _heat_args(rng):
    return 0.1 + rng.random(32), 0.2


@program(_heat_args)
def heat_equation_explicit(u0, alpha):
    """Explicit finite differences for the 1-D heat equation with fixed ends (slicing)."""
    u = u0.copy()
    for _ in range(50):
        u[1:-1] = u[1:-1] + alpha * (u[2:] - 2 * u[1:-1] + u[:-2])
    return np.sum(u ** 2)


def _euler_args(rng):
    return np.array([1.0, 0.0]), 0.3


@program(_euler_args, wrt=(0, 1))
def damped_oscillator_until(y0, damping):
    """Integrate a damped oscillator with forward Euler until t reaches 3 (a while loop)."""
    t, dt = 0.0, 0.01
    y = y0
    while t < 3.0:
        y = y + dt * np.array([y[1], -y[0] - damping * y[1]])
        t += dt
    return y[0] ** 2 + y[1] ** 2


def _rosen_args(rng):
    return rng.random(6) + 0.5,


@program(_rosen_args)
def scipy_rosen(x):
    """scipy's own Rosenbrock function (which starts with np.asanyarray)."""
    return scipy.optimize.rosen(x)


# ---- signal, image and linear algebra ----------------------------------------------------------
def _tv_args(rng):
    return rng.random(30), rng.random(30)


@program(_tv_args)
def total_variation_denoise(u, f):
    """1-D total-variation denoising objective with a smoothed absolute value."""
    return 0.5 * np.sum((u - f) ** 2) + 0.3 * np.sum(np.sqrt(np.diff(u) ** 2 + 1e-3))


def _chol_args(rng):
    A = rng.standard_normal((6, 6))
    return A @ A.T + 6 * np.eye(6), rng.standard_normal(6)


@program(_chol_args, wrt=(0, 1))
def handwritten_cholesky_solve(A, b):
    """Cholesky-Banachiewicz and two triangular solves, written with loops (Numerical
    Recipes style)."""
    n = A.shape[0]
    L = np.zeros_like(A)
    for i in range(n):
        for j in range(i + 1):
            s = np.dot(L[i, :j], L[j, :j])
            if i == j:
                L[i, j] = np.sqrt(A[i, i] - s)
            else:
                L[i, j] = (A[i, j] - s) / L[j, j]
    z = np.zeros(n)
    for i in range(n):
        z[i] = (b[i] - np.dot(L[i, :i], z[:i])) / L[i, i]
    x = np.zeros(n)
    for i in reversed(range(n)):
        x[i] = (z[i] - np.dot(L[i + 1:, i], x[i + 1:])) / L[i, i]
    return np.sum(x ** 2)


def _attn_args(rng):
    return (0.3 * rng.standard_normal((8, 8)), 0.3 * rng.standard_normal((8, 8)),
            rng.standard_normal((2, 5, 8)))


@program(_attn_args, wrt=(0, 1))
def attention_einsum(Wq, Wk, x):
    """Scaled dot-product self-attention written with np.einsum."""
    q = np.einsum("bti,ij->btj", x, Wq)
    k = np.einsum("bti,ij->btj", x, Wk)
    scores = np.einsum("bqd,bkd->bqk", q, k) / np.sqrt(q.shape[-1])
    w = scipy.special.softmax(scores, axis=-1)
    out = np.einsum("bqk,bkd->bqd", w, x)
    return np.sum(out ** 2)


def _sgd_args(rng):
    X = rng.standard_normal((12, 3))
    return 0.1 * rng.standard_normal(3), X, X @ np.array([1.0, -2.0, 0.5]) + 0.1 * rng.standard_normal(12)


@program(_sgd_args)
def meta_gradient_of_one_gd_step(w, X, y):
    """The least-squares gradient summed sample by sample into a numpy accumulator (the way a
    course exercise writes it), one gradient-descent step, then the loss at the new weights:
    its gradient with respect to the starting weights is a meta-gradient."""
    grad = np.zeros(w.shape[0])
    for i in range(X.shape[0]):
        r = X[i] @ w - y[i]
        grad += r * X[i]
    grad /= X.shape[0]
    w_new = w - 0.1 * grad
    return 0.5 * np.mean((X @ w_new - y) ** 2)


def _huber_args(rng):
    X = rng.standard_normal((40, 3))
    y = X @ np.array([1.0, -1.0, 2.0]) + rng.standard_normal(40) * 2
    return np.zeros(3), X, y


@program(_huber_args)
def huber_regression(w, X, y, delta=1.0):
    """Robust regression with the Huber loss (np.where on the residual)."""
    r = y - X @ w
    quad = 0.5 * r ** 2
    lin = delta * (np.abs(r) - 0.5 * delta)
    return np.mean(np.where(np.abs(r) <= delta, quad, lin))


def _ar_args(rng):
    return np.array([0.5, -0.2]), np.cumsum(rng.standard_normal(40))


@program(_ar_args)
def ar2_residuals(phi, series):
    """Least-squares loss of an AR(2) model on the differenced series."""
    d = np.diff(series)
    pred = phi[0] * d[1:-1] + phi[1] * d[:-2]
    return np.sum((d[2:] - pred) ** 2)


class Perceptron:
    """A model held by a class whose loss method is differentiated."""

    def __init__(self, X, y):
        self.X, self.y = X, y

    def loss(self, w):
        margins = self.y * (self.X @ w)
        return np.mean(np.log1p(np.exp(-margins)))


def _method_args(rng):
    X = rng.standard_normal((20, 3))
    return np.array([0.1, -0.2, 0.3]), X, np.sign(X[:, 0] + 0.1)


@program(_method_args)
def class_method_model(w, X, y):
    """Calls a method on an object built from the data (the object is not an argument)."""
    return Perceptron(X, y).loss(w)


def _kalman_args(rng):
    return np.array([-1.0, -0.5]), rng.standard_normal(20).cumsum()


@program(_kalman_args)
def kalman_local_level_loglik(log_vars, obs):
    """Negative log-likelihood of the local-level model by the Kalman filter."""
    q, r = np.exp(log_vars)
    m, P = 0.0, 10.0
    nll = 0.0
    for y in obs:
        P = P + q
        S = P + r
        K = P / S
        v = y - m
        nll = nll + 0.5 * (np.log(2 * math.pi * S) + v ** 2 / S)
        m = m + K * v
        P = (1 - K) * P
    return nll


from tests.corpus import (  # noqa: E402,F401 (register theirs)
    programs_control, programs_dynamics, programs_geometry, programs_learning, programs_loops,
    programs_masks, programs_ml, programs_numerics, programs_ode, programs_probabilistic,
    programs_science, programs_spectral,
    programs_styles, programs_survival, programs_users,
)
