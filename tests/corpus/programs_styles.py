"""Corpus programs (see tests/corpus/programs.py) chosen for the Python styles notebooks use:
a class of hyperparameters with @staticmethod right-hand sides and *args, an early `return`
from a loop, list comprehensions stacked with np.vstack, np.float64 casts, np.asarray of a
list of floats, structured covariances with np.kron, np.tril, np.diag, np.trace and
np.linalg.det, discrete-time survival with np.cumprod and np.prod."""
from __future__ import annotations

import math

import numpy as np

from tests.corpus.registry import program


class TwoCompartment:
    """A two-compartment pharmacokinetic model with IV bolus doses (its rates as *args)."""
    dt = 0.25
    dose_times = [0.0, 8.0, 16.0]
    dose = 100.0

    @staticmethod
    def rhs(y, k10, k12, k21):
        central, peripheral = y[0], y[1]
        return np.array([-(k10 + k12) * central + k21 * peripheral,
                         k12 * central - k21 * peripheral])

    @classmethod
    def simulate(cls, t_end, *rates):
        doses = np.asarray(cls.dose_times)
        y = np.zeros(2)
        levels = []
        for step in range(int(round(t_end / cls.dt))):
            t = step * cls.dt
            if np.any(np.abs(doses - t) < 1e-9):
                y = y + np.array([cls.dose, 0.0])
            k1 = cls.rhs(y, *rates)
            k2 = cls.rhs(y + cls.dt * k1, *rates)
            y = y + 0.5 * cls.dt * (k1 + k2)
            levels.append(y[0])
        return np.array(levels)


def _pk2_args(rng):
    return np.array([math.log(0.15), math.log(0.3), math.log(0.2)]), rng.uniform(5, 60, 12)


@program(_pk2_args)
def pk_two_compartment_class(log_rates, observed, volume=20.0):
    """Concentrations of a two-compartment model every two hours over a day, simulated by a
    class's classmethod (Heun steps, a staticmethod right-hand side, doses from a list)."""
    levels = TwoCompartment.simulate(24.0, *np.exp(log_rates)) / volume
    conc = levels[7::8]  # every 2 h
    return np.sum((np.log(conc) - np.log(observed / 10)) ** 2)


def _newton_args(rng):
    return np.array([1.0, 0.5]), rng.standard_normal(20)


@program(_newton_args)
def newton_mle_early_return(theta, x, tol=1e-10, max_iter=50):
    """The maximum-likelihood location of a logistic distribution by Newton's method, the
    scale given by theta, with an early `return` from the loop once the step is tiny (the
    estimate, and so the result, depends on theta: implicit differentiation by unrolling)."""
    mu, log_s = theta[0], theta[1]
    s = np.exp(log_s)
    for it in range(max_iter):
        z = (x - mu) / s
        p = 1 / (1 + np.exp(-z))
        grad = np.sum(2 * p - 1) / s
        hess = -np.sum(2 * p * (1 - p)) / s ** 2
        step = grad / hess
        mu = mu - step
        if abs(step) < tol:
            return mu ** 2 + s
    return mu ** 2 + s


def _poly_args(rng):
    x = np.linspace(-1, 1, 30)
    return np.zeros(5), x, np.sin(2 * x) + 0.1 * rng.standard_normal(30), 0.01


@program(_poly_args, wrt=(0, 3))
def polynomial_ridge_vstack(coef, x, y, lam, degree=4):
    """Polynomial regression with the design matrix stacked from a list comprehension
    (np.vstack(...).T), the penalty cast with np.float64, `X.T @ r` for the normal equations'
    residual, and the geometric mean of the weights' scale by np.prod."""
    X = np.vstack([x ** k for k in range(degree + 1)]).T
    r = X @ coef - y
    grad_norm = np.sum((X.T @ r) ** 2)
    scale = np.prod(1 + coef ** 2) ** (1 / len(coef))
    return 0.5 * r @ r + np.float64(lam) * (coef @ coef) + 1e-3 * grad_norm + 0.1 * scale


def _wishart_args(rng):
    S = np.cov(rng.standard_normal((3, 40)))
    return 0.1 * rng.standard_normal((3, 3)), S, 40


@program(_wishart_args)
def gaussian_covariance_tril(raw, S, n):
    """A Gaussian covariance fitted to a sample covariance S: Sigma = L L^T with L from
    np.tril of a free matrix and a positive diagonal by np.diag(np.exp(...)); the negative
    log-likelihood with np.trace and np.linalg.det."""
    L = np.tril(raw, -1) + np.diag(np.exp(np.diag(raw)))
    Sigma = L @ L.T
    return 0.5 * n * (np.log(np.linalg.det(Sigma)) + np.trace(np.linalg.inv(Sigma) @ S))


def _kron_args(rng):
    t = np.linspace(0, 1, 4)
    s = np.linspace(0, 1, 3)
    return np.array([math.log(0.3), math.log(0.5), math.log(0.1)]), t, s, rng.standard_normal(12)


def rbf(a, ell):
    return np.exp(-0.5 * np.subtract.outer(a, a) ** 2 / ell ** 2)


@program(_kron_args)
def kronecker_gp_likelihood(log_params, t, s, y):
    """A Gaussian process on a space-time grid with a separable kernel K_t (x) K_s built by
    np.kron, its log-determinant by np.linalg.slogdet and the quadratic form by a solve."""
    ell_t, ell_s, noise = np.exp(log_params)
    K = np.kron(rbf(t, ell_t), rbf(s, ell_s)) + noise * np.eye(len(t) * len(s))
    sign, logdet = np.linalg.slogdet(K)
    return 0.5 * (y @ np.linalg.solve(K, y) + logdet + len(y) * np.log(2 * np.pi))


def _hazard_args(rng):
    n, periods = 25, 8
    X = rng.standard_normal((n, 2))
    return np.array([-2.0, 0.3, -0.2]), X, rng.integers(0, periods, n), rng.random(n) < 0.7


@program(_hazard_args)
def discrete_time_hazard(theta, X, last_period, event, periods=8):
    """A discrete-time survival model: per-period hazards by a logistic link with a baseline
    that rises with time; survival to each period by np.cumprod of (1 - hazard), each
    subject's likelihood the survival up to its last period times the hazard (or not) there."""
    base, beta = theta[0], theta[1:]
    t = np.arange(periods)
    hazard = 1 / (1 + np.exp(-(base + 0.1 * t[None, :] + (X @ beta)[:, None])))
    surv = np.cumprod(1 - hazard, axis=1)
    rows = np.arange(len(X))
    before = np.where(last_period > 0, surv[rows, np.maximum(last_period - 1, 0)], 1.0)
    h_last = hazard[rows, last_period]
    lik = before * np.where(event, h_last, 1 - h_last)
    return -np.sum(np.log(lik)) - 0.01 * np.log(np.prod(surv[:, -1]))


def _node_args(rng):
    params = {"W1": 0.5 * rng.standard_normal((2, 8)), "b1": np.zeros(8),
              "W2": 0.5 * rng.standard_normal((8, 2))}
    return params, np.array([1.0, 0.0]), np.array([0.2, 0.9])


def mlp_field(params, y, t):
    h = np.tanh(y @ params["W1"] + params["b1"] + t)
    return h @ params["W2"]


@program(_node_args, wrt=(0, 1))
def neural_ode_between_grid_points(params, y0, target, n_points=21):
    """A neural ODE (Chen et al. 2018) integrated by RK4 between the points of a time grid
    made with np.linspace, walked as `for t0, t1 in zip(ts[:-1], ts[1:])`."""
    ts = np.linspace(0.0, 1.0, n_points)
    y = y0
    for t0, t1 in zip(ts[:-1], ts[1:]):
        h = t1 - t0
        k1 = mlp_field(params, y, t0)
        k2 = mlp_field(params, y + h / 2 * k1, t0 + h / 2)
        k3 = mlp_field(params, y + h / 2 * k2, t0 + h / 2)
        k4 = mlp_field(params, y + h * k3, t1)
        y = y + h / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
    return np.sum((y - target) ** 2)
