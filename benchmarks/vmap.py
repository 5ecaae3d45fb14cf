"""vmap (issue 14): per-example gradients of a small MLP over a batch of 256, by
`llgrad.vmap(llgrad.grad(loss))` (one native call, the gradient's IR batched), beside a Python
loop of compiled `llgrad.grad` calls, JAX's `jit(vmap(grad))` and `torch.func.vmap(grad)`
when importable; and per-example gradients through a while loop whose trip count differs
across the batch (ragged tapes, Note [Ragged tapes]) beside a Python loop.

    python -m benchmarks.vmap [--quick]

Prints wall and CPU time per call (medians of interleaved samples, benchmarks/_interleave.py)
and the first call (trace + compile), every system on one thread. Every result is checked
against the first row's before timing.
"""
from __future__ import annotations

import argparse

from benchmarks._threads import set_threads

set_threads(1)

import numpy as np  # noqa: E402

import llgrad  # noqa: E402
from benchmarks._interleave import table, timed  # noqa: E402

BATCH, D_IN, HIDDEN, D_OUT = 256, 16, 32, 4


def loss(w1, b1, w2, b2, x, y):
    """Squared error of a 16 -> 32 -> 4 tanh MLP on one example."""
    h = np.tanh(w1 @ x + b1)
    return np.sum((w2 @ h + b2 - y) ** 2)


def _peers(params, xs, ys):
    out = {}
    try:
        import jax
        import jax.numpy as jnp
        jax.config.update("jax_enable_x64", True)

        def jloss(w1, b1, w2, b2, x, y):
            h = jnp.tanh(w1 @ x + b1)
            return jnp.sum((w2 @ h + b2 - y) ** 2)
        jper = jax.jit(jax.vmap(jax.grad(jloss, (0, 1, 2, 3)), (None,) * 4 + (0, 0)))
        out["jax jit(vmap(grad))"] = lambda: [np.asarray(g) for g in jax.block_until_ready(
            jper(*params, xs, ys))]
    except ImportError:
        pass
    try:
        import torch
        tp = [torch.tensor(p) for p in params]
        tx, ty = torch.tensor(xs), torch.tensor(ys)

        def tloss(w1, b1, w2, b2, x, y):
            h = torch.tanh(w1 @ x + b1)
            return torch.sum((w2 @ h + b2 - y) ** 2)
        tper = torch.func.vmap(torch.func.grad(tloss, (0, 1, 2, 3)), (None,) * 4 + (0, 0))
        out["torch.func.vmap(grad)"] = lambda: [g.numpy() for g in tper(*tp, tx, ty)]
    except ImportError:
        pass
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    samples = 5 if ap.parse_args().quick else 21
    rng = np.random.default_rng(0)
    params = (rng.normal(size=(HIDDEN, D_IN)) / 4, rng.normal(size=HIDDEN),
              rng.normal(size=(D_OUT, HIDDEN)) / 6, rng.normal(size=D_OUT))
    xs, ys = rng.normal(size=(BATCH, D_IN)), rng.normal(size=(BATCH, D_OUT))
    grad = llgrad.grad(loss, (0, 1, 2, 3))
    per_example = llgrad.vmap(grad, in_axes=(None,) * 4 + (0, 0))
    rows = {"llgrad vmap(grad)": lambda: per_example(*params, xs, ys),
            "llgrad grad, Python loop": lambda: [np.stack(g) for g in zip(
                *[grad(*params, x, y) for x, y in zip(xs, ys)])]}
    rows.update(_peers(params, xs, ys))
    ref = {}

    def check(name, out):
        ref.setdefault("out", out)
        assert all(np.allclose(a, b, rtol=1e-8, atol=1e-10) for a, b in zip(out, ref["out"])), \
            name
    print(table("per-example gradients, MLP, batch 256", timed(rows, samples, check=check)))
    ragged = llgrad.vmap(llgrad.grad(newton_root))
    grad1 = llgrad.grad(newton_root)
    cs = rng.uniform(0.5, 50.0, size=(BATCH, 2))  # 5 to 17 Newton steps per example
    rows = {"llgrad vmap(grad) (ragged tapes)": lambda: ragged(cs),
            "llgrad grad, Python loop": lambda: np.stack([grad1(c) for c in cs])}
    ref.clear()
    print(table("per-example gradients, while loop, batch 256", timed(rows, samples,
                                                                      check=check)))


def newton_root(c):
    """The cube root of c[0] * c[1] by Newton steps until converged: a while loop whose trip
    count differs across examples (no JAX or torch.func row: JAX's reverse mode refuses a
    while_loop, torch.func.vmap data-dependent control flow)."""
    a = c[0] * c[1]
    x = a
    while np.abs(x * x * x - a) > 1e-9 * a:
        x = x - (x * x * x - a) / (3.0 * x * x)
    return np.sin(x)


if __name__ == "__main__":
    main()
