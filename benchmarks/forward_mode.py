"""Jacobians and Hessians (issue 14): llgrad's `jacfwd`/`jacrev`/`jacobian` (one sweep
batched over the basis) beside the per-row loop `llgrad.jacobian` was (one native reverse
sweep per row from Python, still the path of a Differentiable), and the forward-over-reverse `hessian` of a function with a staged loop beside
the eager runtime's; JAX and torch.func when importable.

    python -m benchmarks.forward_mode [--quick]

Prints seconds per call (median of interleaved samples) and the first call (trace +
compile). Every result is checked against the others before timing.
"""
from __future__ import annotations

import argparse
import statistics
import time

from benchmarks._threads import set_threads

set_threads(1)

import numpy as np  # noqa: E402

import llgrad  # noqa: E402


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


def _timed(fn, samples):
    t0 = time.perf_counter()
    out = fn()
    first = time.perf_counter() - t0
    times = []
    for _ in range(samples):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return out, first, statistics.median(times)


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
    ref = None
    print(f"{'jacobian 100 -> 100, 8-step loop':40s} {'per call':>12s} {'first call':>12s}")
    for name, fn in rows.items():
        out, first, med = _timed(fn, samples)
        ref = out if ref is None else ref
        assert np.allclose(out, ref, rtol=1e-8, atol=1e-10), name
        print(f"{name:40s} {med * 1e3:10.2f} ms {first:10.2f} s")
    x = rng.normal(size=50)
    rows = {"llgrad hessian (fwd over rev)": lambda: llgrad.hessian(loop_energy)(x),
            "eager functional.hessian": lambda: llgrad.autograd.functional.hessian(
                loop_energy, llgrad.tensor(x)).numpy()}
    ref = None
    print(f"{'hessian 50-d, staged loop':40s} {'per call':>12s} {'first call':>12s}")
    for name, fn in rows.items():
        out, first, med = _timed(fn, samples if "llgrad hessian" in name else 1)
        ref = out if ref is None else ref
        assert np.allclose(out, ref, rtol=1e-8, atol=1e-10), name
        print(f"{name:40s} {med * 1e3:10.2f} ms {first:10.2f} s")


if __name__ == "__main__":
    main()
