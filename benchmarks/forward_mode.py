"""Jacobians and Hessians (issue 14): llgrad's `jacfwd`/`jacrev`/`jacobian` (one sweep
batched over the basis) beside the per-row loop `llgrad.jacobian` was (one native reverse
sweep per row from Python, still the path of a Differentiable), and the forward-over-reverse `hessian` of a function with a staged loop beside
the eager runtime's; JAX and torch.func when importable.

    python -m benchmarks.forward_mode [--quick]

Prints wall and CPU time per call (medians of interleaved samples, benchmarks/_interleave.py)
and the first call (trace + compile). Every system runs on one thread. Every result is
checked against the first row's before timing.
"""
from __future__ import annotations

import argparse

from benchmarks._threads import set_threads

set_threads(1)

import numpy as np  # noqa: E402

import llgrad  # noqa: E402
from benchmarks._interleave import table, timed  # noqa: E402


def rnn_map(x, w):
    """100 -> 100 with a staged loop: 8 steps of a tanh recurrence."""
    h = x
    for _ in range(8):
        h = np.tanh(w @ h) + 0.1 * x
    return h


def loop_energy(x):
    """50 -> scalar with a staged loop over the coordinates."""
    s = 0.0
    for i in range(x.shape[0] - 1):
        s = s + np.sin(x[i] * x[i + 1]) + 0.5 * x[i] ** 2 * np.cos(s)
    return s


def _peers_jacobian(x, w):
    out = {}
    try:
        import jax
        import jax.numpy as jnp
        jax.config.update("jax_enable_x64", True)

        def f(x):
            h = x
            for _ in range(8):
                h = jnp.tanh(w @ h) + 0.1 * x
            return h
        jf, jr = jax.jit(jax.jacfwd(f)), jax.jit(jax.jacrev(f))
        out["jax jacfwd"] = lambda: np.asarray(jf(x).block_until_ready())
        out["jax jacrev"] = lambda: np.asarray(jr(x).block_until_ready())
    except ImportError:
        pass
    try:
        import torch
        wt = torch.tensor(w)

        def g(x):
            h = x
            for _ in range(8):
                h = torch.tanh(wt @ h) + 0.1 * x
            return h
        xt = torch.tensor(x)
        out["torch.func jacfwd"] = lambda: torch.func.jacfwd(g)(xt).numpy()
        out["torch.func jacrev"] = lambda: torch.func.jacrev(g)(xt).numpy()
    except ImportError:
        pass
    return out


def _peers_hessian(x):
    out = {}
    try:
        import jax
        import jax.numpy as jnp
        jax.config.update("jax_enable_x64", True)

        def e(x):  # the staged loop as lax.fori_loop: JAX's one loop op with reverse mode
            def body(i, s):
                return s + jnp.sin(x[i] * x[i + 1]) + 0.5 * x[i] ** 2 * jnp.cos(s)
            return jax.lax.fori_loop(0, x.shape[0] - 1, body, 0.0)
        h = jax.jit(jax.hessian(e))
        out["jax hessian (fori_loop)"] = lambda: np.asarray(h(x).block_until_ready())
    except ImportError:
        pass
    try:
        import torch
        xt = torch.tensor(x)
        out["torch.func hessian"] = lambda: torch.func.hessian(loop_energy_torch)(xt).numpy()
    except ImportError:
        pass
    return out


def loop_energy_torch(x):
    import torch
    s = torch.zeros((), dtype=x.dtype)
    for i in range(x.shape[0] - 1):
        s = s + torch.sin(x[i] * x[i + 1]) + 0.5 * x[i] ** 2 * torch.cos(s)
    return s


def _check(ref):
    def check(name, out):
        ref.setdefault("out", out)
        assert np.allclose(out, ref["out"], rtol=1e-8, atol=1e-10), name
    return check


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    samples = 3 if ap.parse_args().quick else 11
    rng = np.random.default_rng(0)
    x, w = rng.normal(size=100), rng.normal(size=(100, 100)) / 10
    rows = {"llgrad jacfwd": lambda: llgrad.jacfwd(rnn_map)(x, w),
            "llgrad jacrev": lambda: llgrad.jacrev(rnn_map)(x, w),
            "llgrad jacobian (auto: jacrev here)": lambda: llgrad.jacobian(rnn_map)(x, w),
            "per-row loop (jacobian before)": lambda: llgrad.jacobian(
                llgrad.Differentiable(rnn_map))(x, w)}
    rows.update(_peers_jacobian(x, w))
    print(table("jacobian 100 -> 100, 8-step loop", timed(rows, samples, check=_check({}))))
    x = rng.normal(size=50)
    rows = {"llgrad hessian (fwd over rev)": lambda: llgrad.hessian(loop_energy)(x)}
    rows.update(_peers_hessian(x))
    print(table("hessian 50-d, staged loop", timed(rows, samples, check=_check({}))))
    eager = {"eager functional.hessian": lambda: llgrad.autograd.functional.hessian(
        loop_energy, llgrad.tensor(x)).numpy()}
    print(table("", timed(eager, 1, reps=1, check=_check({"out": rows[next(iter(rows))]()}))))


if __name__ == "__main__":
    main()
