"""Corpus programs from survival analysis, robust and quantile regression and density
estimation (see tests/corpus/programs.py), written as statistics papers and notebooks write
them: risk sets by argsort and reversed cumulative sums, censoring by indicator arrays,
piecewise losses by np.where and np.maximum."""
from __future__ import annotations

import math

import numpy as np
import scipy.special

from tests.corpus.registry import program


def _cox_args(rng):
    n = 30
    X = rng.standard_normal((n, 3))
    times = rng.exponential(1.0, n) * np.exp(-X @ np.array([0.5, -0.3, 0.2]))
    return np.zeros(3), X, times, (rng.random(n) < 0.7).astype(float)


@program(_cox_args)
def cox_partial_likelihood(beta, X, times, events):
    """Cox proportional hazards' negative log partial likelihood (Breslow, no ties): the
    subjects sorted by decreasing time so that each risk set is a prefix, its log-sum of
    hazards a running log-cumsum-exp written with np.logaddexp.accumulate."""
    order = np.argsort(-times)
    eta = X[order] @ beta
    log_risk = np.logaddexp.accumulate(eta)
    return -np.sum(events[order] * (eta - log_risk))


@program(_cox_args)
def cox_reversed_cumsum(beta, X, times, events):
    """The same likelihood as most tutorials write it: sorted by increasing time, the risk
    set's total hazard by a reversed cumulative sum (x[::-1].cumsum()[::-1])."""
    idx = np.argsort(times)
    X, events = X[idx], events[idx]
    eta = X @ beta
    risk = np.exp(eta)
    risk_set = np.cumsum(risk[::-1])[::-1]
    return -np.sum((eta - np.log(risk_set))[events == 1])


def _weibull_args(rng):
    n = 40
    X = rng.standard_normal((n, 2))
    t = rng.weibull(1.5, n) * np.exp(0.3 * X[:, 0])
    return np.array([0.0, 0.1, -0.1, 0.2]), X, t, rng.random(n) < 0.75


@program(_weibull_args)
def weibull_aft_censored(theta, X, t, observed):
    """A Weibull accelerated-failure-time model with right censoring: log-density for the
    events, log-survival for the censored, split by the boolean indicator."""
    log_k, coef = theta[0], theta[1:]
    k = np.exp(log_k)
    lam = np.exp(coef[0] + X @ coef[1:])
    z = (t / lam) ** k
    log_pdf = np.log(k) - np.log(lam) + (k - 1) * np.log(t / lam) - z
    log_surv = -z
    return -(np.sum(log_pdf[observed]) + np.sum(log_surv[~observed]))


# ---- robust and quantile regression ------------------------------------------------------------
def _quantile_args(rng):
    X = np.column_stack([np.ones(40), rng.standard_normal(40)])
    y = X @ np.array([1.0, 2.0]) + rng.standard_t(3, 40)
    return np.array([-0.5, 1.0, 2.3, 1.9]), X[:, 1], y


@program(_quantile_args)
def quantile_regression_multi(theta, x, y, quantiles=(0.1, 0.5, 0.9)):
    """Pinball (check) loss over several quantiles at once with one shared slope and an
    intercept per quantile, `for i, q in enumerate(quantiles)` picking each intercept."""
    *intercepts, slope = theta
    total = 0.0
    for i, q in enumerate(quantiles):
        r = y - (intercepts[i] + slope * x)
        total = total + np.mean(np.maximum(q * r, (q - 1) * r))
    return total


def _tukey_args(rng):
    X = np.column_stack([np.ones(30), rng.standard_normal(30)])
    y = X @ np.array([0.5, -1.0]) + 0.3 * rng.standard_normal(30)
    y[:4] += 8.0  # outliers
    return np.array([0.4, -0.9]), X, y


@program(_tukey_args)
def tukey_biweight_regression(beta, X, y, c=4.685):
    """Tukey's biweight M-estimator with the residual scale estimated by the MAD (median of
    absolute deviations from the median), held fixed as in one IRLS step."""
    r = y - X @ beta
    scale = np.median(np.abs(r - np.median(r))) / 0.6745
    u = r / scale
    rho = np.where(np.abs(u) <= c, c ** 2 / 6 * (1 - (1 - (u / c) ** 2) ** 3), c ** 2 / 6)
    return np.sum(rho)


def _kde_args(rng):
    return math.log(0.5), rng.standard_normal(30), rng.standard_normal(12)


@program(_kde_args)
def kde_log_likelihood(log_bandwidth, train, test):
    """Held-out log-likelihood of a Gaussian kernel density estimate, the bandwidth chosen by
    maximising it (scipy.special.logsumexp over the training points)."""
    h = np.exp(log_bandwidth)
    d = (test[:, None] - train[None, :]) / h
    log_k = -0.5 * d ** 2 - 0.5 * np.log(2 * np.pi) - np.log(h)
    return -np.sum(scipy.special.logsumexp(log_k, axis=1) - np.log(len(train)))
