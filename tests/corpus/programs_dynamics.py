"""Corpus programs from epidemics, population dynamics, pharmacokinetics and time series /
finance (see tests/corpus/programs.py), written as the notebooks and tutorials of those fields
write them: Euler and RK4 steps in `for` loops, a `while t < T:` integrator, recursive
variance filters, closed-form curves fitted by least squares."""
from __future__ import annotations

import functools
import math

import numpy as np

from tests.corpus.registry import program


# ---- epidemics and population dynamics ---------------------------------------------------------
def _sir_args(rng):
    days = 30
    true_cases = 1000 * np.exp(-0.5 * ((np.arange(days) - 15) / 5.0) ** 2)
    return np.array([math.log(0.4), math.log(0.1)]), true_cases * rng.uniform(0.8, 1.2, days)


@program(_sir_args)
def sir_euler_fit(log_params, cases, N=10000.0, I0=10.0, dt=1.0):
    """An SIR model stepped by forward Euler, one step a day, the new infections collected in
    a list and compared to reported cases on a log scale (the classic COVID-era notebook)."""
    beta, gamma = np.exp(log_params)
    S, I, R = N - I0, I0, 0.0
    new_cases = []
    for day in range(len(cases)):
        infections = beta * S * I / N * dt
        recoveries = gamma * I * dt
        S = S - infections
        I = I + infections - recoveries
        R = R + recoveries
        new_cases.append(infections)
    new_cases = np.array(new_cases)
    return np.mean((np.log1p(new_cases) - np.log1p(cases)) ** 2)


def seir_rhs(t, y, beta, sigma, gamma, N):
    S, E, I, R = y
    return np.array([-beta * S * I / N,
                     beta * S * I / N - sigma * E,
                     sigma * E - gamma * I,
                     gamma * I])


def _seir_args(rng):
    return np.array([0.5, 0.2, 0.1]), rng.uniform(50, 150, 8)


@program(_seir_args)
def seir_rk4_weekly(params, weekly_infected, N=1e4, h=0.5, steps_per_week=14):
    """An SEIR model integrated by classical RK4 with a right-hand side in scipy's
    `f(t, y, *args)` form; the infected compartment sampled once a week."""
    beta, sigma, gamma = params
    y = np.array([N - 10.0, 0.0, 10.0, 0.0])
    t = 0.0
    preds = []
    for week in range(len(weekly_infected)):
        for _ in range(steps_per_week):
            k1 = seir_rhs(t, y, beta, sigma, gamma, N)
            k2 = seir_rhs(t + h / 2, y + h / 2 * k1, beta, sigma, gamma, N)
            k3 = seir_rhs(t + h / 2, y + h / 2 * k2, beta, sigma, gamma, N)
            k4 = seir_rhs(t + h, y + h * k3, beta, sigma, gamma, N)
            y = y + h / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
            t = t + h
        preds.append(y[2])
    resid = np.asarray(preds) - weekly_infected
    return np.sum(resid ** 2) / N


def _lv_args(rng):
    return {"alpha": 1.1, "beta": 0.4, "delta": 0.1, "gamma": 0.4}, rng.uniform(5, 15, (10, 2))


@program(_lv_args)
def lotka_volterra_dict_params(p, observed, dt=0.05, steps_between=4):
    """Predator-prey (Lotka-Volterra) with the parameters in a dict, a state dict updated in
    the loop, and tuple unpacking of observations in `for prey_obs, pred_obs in ...`."""
    state = {"prey": 10.0, "pred": 5.0}
    loss = 0.0
    for prey_obs, pred_obs in observed:
        for _ in range(steps_between):
            x, y = state["prey"], state["pred"]
            state["prey"] = x + dt * (p["alpha"] * x - p["beta"] * x * y)
            state["pred"] = y + dt * (p["delta"] * x * y - p["gamma"] * y)
        loss += (state["prey"] - prey_obs) ** 2 + (state["pred"] - pred_obs) ** 2
    return loss / len(observed)


def _pk_args(rng):
    times = np.array([0.5, 1.0, 2.0, 4.0, 6.0, 8.0, 12.0, 16.0, 24.0])
    return np.array([math.log(0.2), math.log(30.0), math.log(1.5)]), times, rng.uniform(1, 5, 9)


@program(_pk_args)
def pharmacokinetics_dosing(log_theta, times, conc):
    """One-compartment oral-absorption model (Bateman function) under a dosing schedule given
    as a list of (time, dose) pairs, superposed; doses not yet given contribute nothing."""
    ke, V, ka = np.exp(log_theta)
    schedule = [(0.0, 100.0), (6.0, 50.0), (12.0, 100.0)]
    pred = np.zeros_like(times)
    for t_dose, dose in schedule:
        dt = np.maximum(times - t_dose, 0.0)
        given = times >= t_dose
        pred = pred + np.where(given, dose * ka / (V * (ka - ke))
                               * (np.exp(-ke * dt) - np.exp(-ka * dt)), 0.0)
    return np.sum((np.log(pred) - np.log(conc)) ** 2)


def logistic_curve(t, r, K, P0):
    return K / (1 + (K - P0) / P0 * np.exp(-r * t))


def _logistic_args(rng):
    t = np.linspace(0, 20, 25)
    return np.array([0.5, 100.0]), t, logistic_curve(t, 0.45, 90.0, 5.0) + rng.normal(0, 2, 25)


@program(_logistic_args)
def logistic_growth_partial(params, t, pop):
    """Logistic growth fitted by least squares, the model's initial value bound by
    functools.partial as curve_fit users do."""
    model = functools.partial(logistic_curve, P0=5.0)
    r, K = params
    return 0.5 * np.sum((model(t, r, K) - pop) ** 2)


def _adaptive_args(rng):
    return np.array([1.0, 0.3]), 0.3


@program(_adaptive_args, wrt=(0, 1))
def adaptive_step_oscillator(y0, damping, T=5.0, h_max=0.2):
    """A Van der Pol-like oscillator by Heun's method in a `while t < T:` loop whose step
    shrinks where the state moves fast and is clipped at the end so that t lands on T."""
    y = y0.copy()
    t = 0.0
    while t < T:
        speed = abs(y[1]) + abs(y[0])
        h = min(h_max, 0.5 / (1.0 + speed), T - t)
        f1 = np.array([y[1], -y[0] - damping * (y[0] ** 2 - 1) * y[1]])
        yp = y + h * f1
        f2 = np.array([yp[1], -yp[0] - damping * (yp[0] ** 2 - 1) * yp[1]])
        y = y + 0.5 * h * (f1 + f2)
        t += h
    return y[0] ** 2 + y[1] ** 2


# ---- time series and finance -------------------------------------------------------------------
def _garch_args(rng):
    n = 60
    r = np.empty(n)
    s2 = 1e-4
    for t in range(n):
        r[t] = math.sqrt(s2) * rng.standard_normal()
        s2 = 1e-5 + 0.1 * r[t] ** 2 + 0.85 * s2
    return np.array([1e-5, 0.1, 0.85]), r


@program(_garch_args, fd_eps=1e-9, fd_tol=(1e-4, 1e-3))
def garch11_nll(params, returns):
    """GARCH(1,1) Gaussian negative log-likelihood by the recursive variance filter, started
    at the sample variance (the arch package's textbook version)."""
    omega, alpha, beta = params
    n = len(returns)
    sigma2 = np.zeros(n)
    sigma2[0] = np.var(returns)
    for t in range(1, n):
        sigma2[t] = omega + alpha * returns[t - 1] ** 2 + beta * sigma2[t - 1]
    return 0.5 * np.sum(np.log(2 * np.pi) + np.log(sigma2) + returns ** 2 / sigma2)


def _ewma_args(rng):
    returns = 0.01 * rng.standard_normal(50)
    return 2.0, returns, np.abs(returns) + 0.002


@program(_ewma_args)
def ewma_volatility_fit(logit_lam, returns, realized):
    """RiskMetrics EWMA volatility with its decay chosen by a sigmoid of a free parameter;
    the one-step forecasts compared with realized volatility."""
    lam = 1 / (1 + math.exp(-logit_lam))
    var = returns[0] ** 2
    loss = 0.0
    for t in range(1, len(returns)):
        var = lam * var + (1 - lam) * returns[t - 1] ** 2
        loss = loss + (np.sqrt(var) - realized[t]) ** 2
    return 1e4 * loss


def _ns_args(rng):
    tau = np.array([0.25, 0.5, 1, 2, 3, 5, 7, 10, 20, 30], dtype=float)
    y = 0.04 - 0.02 * (1 - np.exp(-tau / 2)) / (tau / 2) + 0.003 * rng.standard_normal(10)
    return np.array([0.04, -0.02, 0.01, 1.5]), tau, y


@program(_ns_args)
def nelson_siegel_fit(params, tau, yields):
    """A Nelson-Siegel yield curve fitted to observed yields; the factor loadings stacked as
    columns with np.column_stack and the fit written `X @ beta`."""
    b0, b1, b2, lam = params
    x = tau / lam
    slope = (1 - np.exp(-x)) / x
    curve = slope - np.exp(-x)
    X = np.column_stack([np.ones_like(tau), slope, curve])
    fitted = X @ np.array([b0, b1, b2])
    return 1e4 * np.mean((fitted - yields) ** 2)


class KellyConfig:
    entropy_weight = 1e-3
    risk_free = 0.0001


def _kelly_args(rng):
    return np.zeros(4), rng.normal(0.01, 0.05, (120, 4))


@program(_kelly_args)
def kelly_log_utility(scores, returns, leverage=1.0):
    """Kelly criterion: the expected log growth of a long-only portfolio whose weights are a
    softmax of free scores, with a small entropy bonus; a class holds the hyperparameters."""
    w = np.exp(scores - np.max(scores))
    w = leverage * w / w.sum()
    growth = np.log1p(KellyConfig.risk_free + returns @ w)
    entropy = -np.sum(w * np.log(w))
    return -(np.mean(growth) + KellyConfig.entropy_weight * entropy)


def _asian_args(rng):
    return np.array([100.0, 0.2]), rng.standard_normal((200, 12))


@program(_asian_args)
def asian_option_local_vol_mc(s0_sigma, z, K=100.0, r=0.02, T=1.0):
    """A Monte Carlo Asian call under a local volatility that grows as the price falls, the
    normals given; the path built step by step and its average taken from a list of steps."""
    s0, sigma = s0_sigma
    n_paths, n_steps = z.shape
    dt = T / n_steps
    S = np.full(n_paths, s0)
    path = []
    for k in range(n_steps):
        vol = sigma * (s0 / S) ** 0.5
        S = S * np.exp((r - 0.5 * vol ** 2) * dt + vol * np.sqrt(dt) * z[:, k])
        path.append(S)
    avg = np.mean(np.stack(path, axis=1), axis=1)
    payoff = np.maximum(avg - K, 0.0)
    return math.exp(-r * T) * payoff.mean()


def _drawdown_args(rng):
    return np.full(3, 1 / 3), rng.normal(0.001, 0.02, (80, 3))


@program(_drawdown_args)
def max_drawdown_penalized_return(w, returns, penalty=2.0):
    """Mean return minus a penalty on the maximum drawdown, the running peak of the wealth
    curve taken with np.maximum.accumulate on the np.cumprod of gross returns."""
    port = returns @ w
    wealth = np.cumprod(1.0 + port)
    peak = np.maximum.accumulate(wealth)
    drawdown = np.max((peak - wealth) / peak)
    return -(np.mean(port) * 252 - penalty * drawdown)


def _hawkes_args(rng):
    return np.array([math.log(0.5), math.log(0.8), math.log(1.5)]), np.sort(rng.uniform(0, 20, 25))


@program(_hawkes_args)
def hawkes_exponential_loglik(log_params, times, T=20.0):
    """A self-exciting (Hawkes) process with an exponential kernel: the negative
    log-likelihood by Ozaki's recursion A[i] = exp(-beta dt) (1 + A[i-1]), filled into an
    array in a loop, and the compensator in closed form."""
    mu, alpha, beta = np.exp(log_params)
    n = len(times)
    A = np.zeros(n)
    for i in range(1, n):
        A[i] = np.exp(-beta * (times[i] - times[i - 1])) * (1 + A[i - 1])
    intensity = mu + alpha * A
    compensator = mu * T + alpha / beta * np.sum(1 - np.exp(-beta * (T - times)))
    return compensator - np.sum(np.log(intensity))


def _hw_args(rng):
    t = np.arange(36)
    y = 10 + 0.2 * t + 3 * np.sin(2 * np.pi * t / 12) + rng.normal(0, 0.5, 36)
    return np.array([0.3, 0.1, 0.2]), y


@program(_hw_args)
def holt_winters_additive(params, y, m=12):
    """Additive Holt-Winters exponential smoothing: level, trend and seasonal components
    indexed by `t % m`, the one-step-ahead errors' sum of squares (the textbook recursions).
    (A Python list of seasonal components unrolls the loop, with a warning saying so.)"""
    alpha, beta, gamma = params
    level, trend = y[0], y[1] - y[0]
    season = y[:m] - np.mean(y[:m])
    sse = 0.0
    for t in range(m, len(y)):
        s = season[t % m]
        forecast = level + trend + s
        sse += (y[t] - forecast) ** 2
        new_level = alpha * (y[t] - s) + (1 - alpha) * (level + trend)
        trend = beta * (new_level - level) + (1 - beta) * trend
        season[t % m] = gamma * (y[t] - new_level) + (1 - gamma) * s
        level = new_level
    return sse / (len(y) - m)
