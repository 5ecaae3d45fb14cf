"""Array workloads without control flow (issue 4): ``elementwise`` and ``gmm``.

``elementwise``
    ``f(x) = sum(exp(-x**2) * sin(3*x) + log1p(x**2))`` for ``x`` of 1e6 float64 (standard
    normal, seed 2); value and gradient w.r.t. ``x``.

``gmm``
    The ADBench Gaussian-mixture-model objective (microsoft/ADBench, ``gmm_objective``), d=10,
    k=25, n=1000, float64; value and gradient w.r.t. (alphas, means, icf). Each component's
    precision factor is ``Q_k = diag(exp(icf[k, :d])) + L_k`` where ``L_k`` is strictly lower
    triangular, filled column by column from ``icf[k, d:]``; the objective is::

        -n*d/2*log(2*pi) + sum_i logsumexp_k(alpha_k + sum(icf[k, :d])
                                             - 1/2 * ||Q_k (x_i - mu_k)||^2)
        - n * logsumexp(alpha) + log_wishart_prior(Q, gamma, m)

    with ADBench's Wishart prior ``sum_k (gamma^2/2 * ||Q_k||_F^2 - m * sum(icf[k, :d]))
    - k * (n_w*d*log(gamma/sqrt 2) - multigammaln(n_w/2, d))``, ``n_w = d + m + 1``,
    ``gamma = 1``, ``m = 0``. Inputs follow ADBench's generator (alphas ~ N(0,1),
    means ~ U(0,1), icf ~ N(0,1), x ~ N(0,1)), seed 3. The lower-triangular gather uses a
    static index array ``tril_idx`` into ``[0, icf[k, d:]]`` (the formulation JAX ports use).
"""

from __future__ import annotations

import math

import numpy as np

from ..harness import Goal, Impl, Workload, need
from ._common import autograd_vg, jax_vg, llgrad_compiled, numba_fwd, numpy_fwd


# ---------------------------------------------------------------------- elementwise ----

def elementwise(x):
    """Plain numpy (reference forward; compiled by llgrad, run by autograd and JAX)."""
    return np.sum(np.exp(-x ** 2) * np.sin(3 * x) + np.log1p(x ** 2))


def elementwise_loop(x):
    """Explicit-loop forward for Numba (the compiled scalar baseline)."""
    s = 0.0
    for i in range(x.shape[0]):
        xi = x[i]
        s += np.exp(-xi * xi) * np.sin(3.0 * xi) + np.log1p(xi * xi)
    return s


def _torch_elementwise(inputs):
    torch = need("torch")
    x = torch.tensor(inputs["x"], requires_grad=True)

    def run():
        y = (torch.exp(-x ** 2) * torch.sin(3 * x) + torch.log1p(x ** 2)).sum()
        y.backward()
        g = x.grad
        x.grad = None
        return y, (g,)
    return run


elementwise_wl = Workload(
    name="elementwise",
    description="sum(exp(-x**2)*sin(3x)+log1p(x**2)), n=1e6 float64, value+grad",
    issue="issue 4",
    make_inputs=lambda: {"x": np.random.default_rng(2).standard_normal(1_000_000)},
    forward=elementwise,
    wrt=("x",),
    impls=[
        llgrad_compiled(elementwise, ("x",)),
        Impl("torch", _torch_elementwise, "v+g", "eager"),
        jax_vg(elementwise, ("x",), note="jit(value_and_grad)"),
        autograd_vg(elementwise, ("x",)),
        numba_fwd(elementwise_loop, note="njit explicit loop, forward only"),
        numpy_fwd(elementwise),
    ],
    goals=[
        Goal.faster("llgrad", "jax", "llgrad value+grad faster than JAX jit(grad)"),
        Goal.faster("llgrad", "torch", "llgrad value+grad faster than PyTorch eager"),
        Goal.at_most("llgrad", "numba-fwd", 2.5, "llgrad value+grad <= 2.5x Numba forward"),
        Goal.first_call("llgrad", 1.0),
    ],
    fallback_ref="numba-fwd",
)


# ------------------------------------------------------------------------------ gmm ----

GMM_D, GMM_K, GMM_N = 10, 25, 1000


def tril_index(d):
    """(d, d) int array: position of L[r, c] (r > c) in [0, icf[k, d:]] (column-major), else 0."""
    idx = np.zeros((d, d), dtype=np.int64)
    pos = 1
    for c in range(d):
        for r in range(c + 1, d):
            idx[r, c] = pos
            pos += 1
    return idx


def multigammaln(a, p):
    """log of the multivariate gamma function (Python floats only)."""
    return 0.25 * p * (p - 1) * math.log(math.pi) + sum(
        math.lgamma(a + 0.5 * (1 - j)) for j in range(1, p + 1))


def logsumexp(v, axis):
    mx = np.max(v, axis=axis, keepdims=True)
    return np.log(np.sum(np.exp(v - mx), axis=axis)) + np.squeeze(mx, axis=axis)


def log_wishart_prior(d, gamma, m, sum_qs, Qdiags, icf):
    k = icf.shape[0]
    nw = d + m + 1
    frob = np.sum(Qdiags ** 2, axis=1) + np.sum(icf[:, d:] ** 2, axis=1)
    out = np.sum(0.5 * gamma * gamma * frob - m * sum_qs)
    C = nw * d * math.log(gamma / math.sqrt(2))
    return out - k * (C - multigammaln(0.5 * nw, d))


def gmm_objective(alphas, means, icf, x, wishart_gamma, wishart_m, tril_idx):
    """Plain numpy ADBench GMM objective (reference; compiled by llgrad; autograd; JAX)."""
    n, d = x.shape
    k = alphas.shape[0]
    Qdiags = np.exp(icf[:, :d])                                    # (k, d)
    sum_qs = np.sum(icf[:, :d], axis=1)                            # (k,)
    Lpad = np.concatenate([np.zeros((k, 1)), icf[:, d:]], axis=1)  # (k, 1 + d(d-1)/2)
    Ls = Lpad[:, tril_idx]                                         # (k, d, d)
    xc = x.T[None, :, :] - means[:, :, None]                       # (k, d, n)
    Qxc = Qdiags[:, :, None] * xc + Ls @ xc                        # (k, d, n)
    inner = alphas[:, None] + sum_qs[:, None] - 0.5 * np.sum(Qxc ** 2, axis=1)   # (k, n)
    slse = np.sum(logsumexp(inner, 0))
    const = -n * d * 0.5 * math.log(2 * math.pi)
    return (const + slse - n * logsumexp(alphas, 0)
            + log_wishart_prior(d, wishart_gamma, wishart_m, sum_qs, Qdiags, icf))


def gmm_loops(alphas, means, icf, x, wishart_gamma, wishart_m, tril_idx):
    """Explicit-loop forward for Numba (ADBench's C++ formulation)."""
    n, d = x.shape
    k = alphas.shape[0]
    Qd = np.exp(icf[:, :d])
    sum_qs = np.empty(k)
    for j in range(k):
        sum_qs[j] = np.sum(icf[j, :d])
    main = np.empty(k)
    xc = np.empty(d)
    Qxc = np.empty(d)
    slse = 0.0
    for i in range(n):
        for j in range(k):
            for r in range(d):
                xc[r] = x[i, r] - means[j, r]
                Qxc[r] = Qd[j, r] * xc[r]
            pos = d
            for c in range(d):
                for r in range(c + 1, d):
                    Qxc[r] += icf[j, pos] * xc[c]
                    pos += 1
            sq = 0.0
            for r in range(d):
                sq += Qxc[r] * Qxc[r]
            main[j] = alphas[j] + sum_qs[j] - 0.5 * sq
        mx = np.max(main)
        slse += np.log(np.sum(np.exp(main - mx))) + mx
    amx = np.max(alphas)
    lse_alpha = np.log(np.sum(np.exp(alphas - amx))) + amx
    nw = d + wishart_m + 1
    out = 0.0
    for j in range(k):
        frob = np.sum(Qd[j] ** 2) + np.sum(icf[j, d:] ** 2)
        out += 0.5 * wishart_gamma * wishart_gamma * frob - wishart_m * sum_qs[j]
    C = nw * d * np.log(wishart_gamma / np.sqrt(2.0))
    mgl = 0.25 * d * (d - 1) * np.log(np.pi)
    for jj in range(1, d + 1):
        mgl += math.lgamma(0.5 * nw + 0.5 * (1 - jj))
    prior = out - k * (C - mgl)
    const = -n * d * 0.5 * np.log(2 * np.pi)
    return const + slse - n * lse_alpha + prior


def _gmm_inputs():
    rng = np.random.default_rng(3)
    d, k, n = GMM_D, GMM_K, GMM_N
    return {
        "alphas": rng.standard_normal(k),
        "means": rng.random((k, d)),
        "icf": rng.standard_normal((k, d * (d + 1) // 2)),
        "x": rng.standard_normal((n, d)),
        "wishart_gamma": 1.0,
        "wishart_m": 0,
        "tril_idx": tril_index(d),
    }


GMM_WRT = ("alphas", "means", "icf")


def _torch_gmm(inputs):
    torch = need("torch")
    alphas, means, icf = (torch.tensor(inputs[k], requires_grad=True) for k in GMM_WRT)
    x = torch.tensor(inputs["x"])
    gamma, m = inputs["wishart_gamma"], inputs["wishart_m"]
    tril_idx = torch.tensor(inputs["tril_idx"])

    def objective():
        n, d = x.shape
        k = alphas.shape[0]
        Qdiags = torch.exp(icf[:, :d])
        sum_qs = icf[:, :d].sum(1)
        Lpad = torch.cat([torch.zeros((k, 1), dtype=icf.dtype), icf[:, d:]], 1)
        Ls = Lpad[:, tril_idx]
        xc = x.T[None, :, :] - means[:, :, None]
        Qxc = Qdiags[:, :, None] * xc + Ls @ xc
        inner = alphas[:, None] + sum_qs[:, None] - 0.5 * (Qxc ** 2).sum(1)
        slse = torch.logsumexp(inner, 0).sum()
        nw = d + m + 1
        frob = (Qdiags ** 2).sum(1) + (icf[:, d:] ** 2).sum(1)
        prior = (0.5 * gamma * gamma * frob - m * sum_qs).sum() - k * (
            nw * d * math.log(gamma / math.sqrt(2)) - multigammaln(0.5 * nw, d))
        const = -n * d * 0.5 * math.log(2 * math.pi)
        return const + slse - n * torch.logsumexp(alphas, 0) + prior

    params = (alphas, means, icf)

    def run():
        y = objective()
        y.backward()
        grads = tuple(p.grad for p in params)
        for p in params:
            p.grad = None
        return y, grads
    return run


gmm = Workload(
    name="gmm",
    description=f"ADBench GMM objective d={GMM_D} k={GMM_K} n={GMM_N}, value+grad wrt alphas, means, icf",
    issue="issue 4",
    make_inputs=_gmm_inputs,
    forward=gmm_objective,
    wrt=GMM_WRT,
    impls=[
        llgrad_compiled(gmm_objective, GMM_WRT),
        Impl("torch", _torch_gmm, "v+g", "eager"),
        jax_vg(gmm_objective, GMM_WRT, note="jit(value_and_grad)"),
        autograd_vg(gmm_objective, GMM_WRT),
        numba_fwd(gmm_loops, note="njit explicit loops, forward only"),
        numpy_fwd(gmm_objective),
    ],
    goals=[
        Goal.faster("llgrad", "jax", "llgrad value+grad faster than JAX jit(grad)"),
        Goal.faster("llgrad", "torch", "llgrad value+grad faster than PyTorch eager"),
        Goal.at_most("llgrad", "numba-fwd", 3.0, "llgrad value+grad <= 3x Numba forward"),
        Goal.first_call("llgrad", 1.0),
    ],
    fallback_ref="numba-fwd",
)

WORKLOADS = [elementwise_wl, gmm]
