"""Linear-algebra workloads (issue 11): ``gp_nlml``.

``gp_nlml``
    The negative log marginal likelihood of a Gaussian process with an RBF kernel on n=200
    points in 3 dimensions (seed 5), as GP code writes it: the kernel matrix, its Cholesky
    factor, a triangular solve and the log determinant from the factor's diagonal::

        K = sf^2 exp(-|x_i - x_j|^2 / (2 ell^2)) + (sn^2 + 1e-6) I,   L = chol(K)
        nlml = |L^-1 y|^2 / 2 + sum(log diag L) + n/2 log(2 pi)

    value and gradient w.r.t. the three log hyperparameters (log ell, log sf, log sn).
    ``gp_nlml_n10`` and ``gp_nlml_n100`` are the same at n=10 and 100 (run with ``--only``,
    not by default: the small-matrix end, where call overheads dominate).
    llgrad compiles the plain numpy/scipy function; JAX runs the same source with
    ``np = jax.numpy`` and ``sla = jax.scipy.linalg``, HIPS autograd with its numpy and
    scipy wrappers; PyTorch is written with torch.linalg.
"""
from __future__ import annotations

import math

import numpy as np
import scipy.linalg as sla

from ..harness import Goal, Impl, Workload, need, rebind
from ._common import llgrad_compiled, numpy_fwd

GP_N, GP_D = 200, 3


def gp_nlml(log_params, X, y):
    """Plain numpy + scipy (reference; compiled by llgrad; run by JAX and autograd)."""
    ell, sf, sn = np.exp(log_params[0]), np.exp(log_params[1]), np.exp(log_params[2])
    d = X[:, None, :] - X[None, :, :]
    n = y.shape[0]
    K = sf ** 2 * np.exp(-0.5 * np.sum(d * d, axis=-1) / ell ** 2) \
        + (sn ** 2 + 1e-6) * np.eye(n)
    L = np.linalg.cholesky(K)
    alpha = sla.solve_triangular(L, y, lower=True)
    return 0.5 * np.dot(alpha, alpha) + np.sum(np.log(np.diag(L))) \
        + 0.5 * n * np.log(2 * np.pi)


def _inputs(n):
    def make():
        rng = np.random.default_rng(5)
        X = rng.uniform(-2.0, 2.0, (n, GP_D))
        y = np.sin(X @ np.array([1.0, -0.5, 0.25])) + 0.1 * rng.standard_normal(n)
        return {"log_params": np.array([0.0, 0.3, -1.5]), "X": X, "y": y}
    return make


def _jax(inputs):
    jax = need("jax")
    jnp = need("jax.numpy")
    jsl = need("jax.scipy.linalg")
    f = rebind(gp_nlml, np=jnp, sla=jsl)
    vg = jax.jit(jax.value_and_grad(f))
    args = [jnp.asarray(inputs[k]) for k in ("log_params", "X", "y")]
    return lambda: jax.block_until_ready(vg(*args))


def _autograd(inputs):
    autograd = need("autograd")
    anp = need("autograd.numpy")
    asl = need("autograd.scipy.linalg")
    vg = autograd.value_and_grad(rebind(gp_nlml, np=anp, sla=asl))
    X, y, p = inputs["X"], inputs["y"], inputs["log_params"]
    return lambda: vg(p, X, y)


def _torch(inputs):
    torch = need("torch")
    p = torch.tensor(inputs["log_params"], requires_grad=True)
    X, y = torch.tensor(inputs["X"]), torch.tensor(inputs["y"])
    n = y.shape[0]
    eye = torch.eye(n, dtype=X.dtype)

    def run():
        ell, sf, sn = torch.exp(p[0]), torch.exp(p[1]), torch.exp(p[2])
        d = X[:, None, :] - X[None, :, :]
        K = sf ** 2 * torch.exp(-0.5 * (d * d).sum(-1) / ell ** 2) + (sn ** 2 + 1e-6) * eye
        L = torch.linalg.cholesky(K)
        alpha = torch.linalg.solve_triangular(L, y[:, None], upper=False)[:, 0]
        v = 0.5 * alpha @ alpha + torch.log(torch.diagonal(L)).sum() \
            + 0.5 * n * math.log(2 * math.pi)
        v.backward()
        g = p.grad
        p.grad = None
        return v, (g,)
    return run


def _workload(n, name, goals=()):
    return Workload(
        name=name,
        description=f"GP negative log marginal likelihood, RBF kernel, n={n} d={GP_D}: "
                    "Cholesky + triangular solve, value+grad wrt 3 log hyperparameters",
        issue="issue 11",
        make_inputs=_inputs(n),
        forward=gp_nlml,
        wrt=("log_params",),
        impls=[
            llgrad_compiled(gp_nlml, ("log_params",)),
            Impl("torch", _torch, "v+g", "eager, torch.linalg"),
            Impl("jax", _jax, "v+g", "jit(value_and_grad), jax.scipy.linalg"),
            Impl("autograd", _autograd, "v+g", "autograd.scipy.linalg"),
            numpy_fwd(gp_nlml, note="numpy + scipy forward"),
        ],
        goals=list(goals),
        fallback_ref="numpy-fwd",
    )


WORKLOADS = [_workload(GP_N, "gp_nlml", [
    Goal.faster("llgrad", "jax", "llgrad value+grad faster than JAX jit(grad)"),
    Goal.faster("llgrad", "torch", "llgrad value+grad faster than PyTorch eager"),
    Goal.first_call("llgrad", 1.0),
])]
EXTRA = [_workload(10, "gp_nlml_n10"), _workload(100, "gp_nlml_n100")]
