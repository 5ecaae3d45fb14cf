"""Numba-style workloads (issue 13): the code a Numba user writes, nested scalar loops that
update small work arrays element by element, compiled unchanged by llgrad and by Numba.

``gmm_loops``
    The ADBench GMM objective of ``gmm`` (d=10, k=25, n=1000, same inputs, Wishart prior
    included) written with scalar loops throughout: over points, components, dimensions and
    the triangle of each component's matrix, a running max and log-sum-exp per point.
    Gradient w.r.t. (alphas, means, icf). llgrad and Numba run the loops; JAX
    (``jit(value_and_grad)``) and PyTorch (eager) run the vectorised objective of ``gmm``,
    their best version. The reference value and finite differences come from that vectorised
    numpy objective (the same function; the loops in Python would take seconds a call).

``stencil``
    Jacobi sweeps of a 5-point stencil on a 128x128 grid, 50 sweeps, fixed boundary:
    ``u_new[i, j] = c*(u[i-1, j] + u[i+1, j] + u[i, j-1] + u[i, j+1]) + (1-4c)*u[i, j]``
    for the interior, then ``u, u_new = u_new, u``; loss = sum(u**2); gradient w.r.t. the
    initial grid. llgrad and Numba run the loops; JAX and PyTorch a vectorised sweep (slices).
"""

from __future__ import annotations

import math

import numpy as np

from ..harness import Goal, Impl, Workload, need
from ._common import jax_vg, llgrad_compiled, llgrad_forward, numba_fwd
from .arrays import GMM_WRT, _gmm_inputs, _torch_gmm, gmm_objective


def _numba_goals():
    return [
        Goal.at_most("llgrad-fwd", "numba-fwd", 1.5, "llgrad forward <= 1.5x Numba forward"),
        Goal.at_most("llgrad", "numba-fwd", 3.0, "llgrad value+grad <= 3x Numba forward"),
        Goal.faster("llgrad", "jax", "llgrad value+grad faster than JAX jit(value_and_grad)"),
        Goal.first_call("llgrad", 1.0),
    ]


# ------------------------------------------------------------------------ gmm_loops ----

def gmm_loops(alphas, means, icf, x, wishart_gamma, wishart_m, tril_idx):
    """The GMM objective as scalar loops (llgrad; Numba). `tril_idx` is unused: the triangle
    is walked in icf's column-major order, as ADBench's C++ does."""
    n, d = x.shape
    k = alphas.shape[0]
    Qd = np.exp(icf[:, :d])
    sum_qs = np.zeros(k)
    for j in range(k):
        s = 0.0
        for r in range(d):
            s += icf[j, r]
        sum_qs[j] = s
    main = np.zeros(k)
    xc = np.zeros(d)
    Qxc = np.zeros(d)
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
        mx = main[0]
        for j in range(1, k):
            mx = max(mx, main[j])
        se = 0.0
        for j in range(k):
            se += math.exp(main[j] - mx)
        slse += math.log(se) + mx
    amx = alphas[0]
    for j in range(1, k):
        amx = max(amx, alphas[j])
    sa = 0.0
    for j in range(k):
        sa += math.exp(alphas[j] - amx)
    lse_alpha = math.log(sa) + amx
    nw = d + wishart_m + 1
    out = 0.0
    for j in range(k):
        frob = 0.0
        for r in range(d):
            frob += Qd[j, r] * Qd[j, r]
        for p in range(d, icf.shape[1]):
            frob += icf[j, p] * icf[j, p]
        out += 0.5 * wishart_gamma * wishart_gamma * frob - wishart_m * sum_qs[j]
    C = nw * d * math.log(wishart_gamma / math.sqrt(2.0))
    mgl = 0.25 * d * (d - 1) * math.log(math.pi)
    for jj in range(1, d + 1):
        mgl += math.lgamma(0.5 * nw + 0.5 * (1 - jj))
    const = -n * d * 0.5 * math.log(2 * math.pi)
    return const + slse - n * lse_alpha + out - k * (C - mgl)


gmm_loops_wl = Workload(
    name="gmm_loops",
    description="GMM objective d=10 k=25 n=1000 as scalar loops (Numba style), value+grad "
                "wrt alphas, means, icf; JAX/torch run the vectorised objective",
    issue="issue 13",
    make_inputs=_gmm_inputs,
    forward=gmm_objective,
    wrt=GMM_WRT,
    impls=[
        llgrad_compiled(gmm_loops, GMM_WRT, note="the loops"),
        llgrad_forward(gmm_loops, name="llgrad-fwd", note="the loops, forward only"),
        numba_fwd(gmm_loops, note="njit of the same loops, forward only"),
        jax_vg(gmm_objective, GMM_WRT, note="jit(value_and_grad), vectorised"),
        Impl("torch", _torch_gmm, "v+g", "eager, vectorised"),
    ],
    goals=_numba_goals(),
    fallback_ref="numba-fwd",
)


# -------------------------------------------------------------------------- stencil ----

STENCIL_N, STENCIL_SWEEPS, STENCIL_C = 128, 50, 0.2


def stencil(u0, c):
    """The loops (llgrad; Numba)."""
    n, m = u0.shape
    u = u0.copy()
    u_new = u0.copy()
    for s in range(STENCIL_SWEEPS):
        for i in range(1, n - 1):
            for j in range(1, m - 1):
                u_new[i, j] = c * (u[i - 1, j] + u[i + 1, j] + u[i, j - 1] + u[i, j + 1]) \
                    + (1 - 4 * c) * u[i, j]
        u, u_new = u_new, u
    return np.sum(u * u)


def stencil_vectorised(u0, c):
    """The same sweeps on slices (the reference)."""
    u = u0.copy()
    for s in range(STENCIL_SWEEPS):
        v = u.copy()
        v[1:-1, 1:-1] = c * (u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:]) \
            + (1 - 4 * c) * u[1:-1, 1:-1]
        u = v
    return np.sum(u * u)


def _jax_stencil(jax, jnp, lax):
    def f(u0, c):
        def sweep(s, u):
            inner = c * (u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:]) \
                + (1 - 4 * c) * u[1:-1, 1:-1]
            return u.at[1:-1, 1:-1].set(inner)
        u = lax.fori_loop(0, STENCIL_SWEEPS, sweep, u0)
        return jnp.sum(u * u)
    return f


def _torch_stencil(inputs):
    torch = need("torch")
    u0 = torch.tensor(inputs["u0"], requires_grad=True)
    c = inputs["c"]

    def run():
        u = u0
        for s in range(STENCIL_SWEEPS):
            v = u.clone()
            v[1:-1, 1:-1] = c * (u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:]) \
                + (1 - 4 * c) * u[1:-1, 1:-1]
            u = v
        y = torch.sum(u * u)
        y.backward()
        g = u0.grad
        u0.grad = None
        return y, (g,)
    return run


def _stencil_inputs():
    return {"u0": np.random.default_rng(13).standard_normal((STENCIL_N, STENCIL_N)),
            "c": STENCIL_C}


stencil_wl = Workload(
    name="stencil",
    description=f"5-point Jacobi stencil {STENCIL_N}x{STENCIL_N}, {STENCIL_SWEEPS} sweeps as "
                "loops (Numba style), grad of sum(u**2) wrt u0; JAX/torch on slices",
    issue="issue 13",
    make_inputs=_stencil_inputs,
    forward=stencil_vectorised,
    wrt=("u0",),
    impls=[
        llgrad_compiled(stencil, ("u0",), note="the loops"),
        llgrad_forward(stencil, name="llgrad-fwd", note="the loops, forward only"),
        numba_fwd(stencil, note="njit of the same loops, forward only"),
        jax_vg(_jax_stencil, ("u0",), from_numpy=False,
               note="jit(value_and_grad), slices, lax.fori_loop"),
        Impl("torch", _torch_stencil, "v+g", "eager, slices"),
    ],
    goals=_numba_goals(),
    fallback_ref="numba-fwd",
)

WORKLOADS = [gmm_loops_wl, stencil_wl]
