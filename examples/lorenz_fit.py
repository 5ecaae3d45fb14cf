"""Fit the parameters (sigma, rho, beta) of the Lorenz system to an observed trajectory by
gradient descent, differentiating through an RK4 integrator compiled with llgrad.

    python examples/lorenz_fit.py [--steps 200] [--iters 100]

The integrator is an ordinary Python `for` loop over numpy code; llgrad compiles it as a loop
(with a tape for the reverse sweep), not unrolled, and checks the gradient against finite
differences before fitting.
"""
from __future__ import annotations

import argparse
import time

import numpy as np

import llgrad

TRUE = np.array([10.0, 28.0, 8.0 / 3.0])   # sigma, rho, beta


def lorenz(s, p):
    x, y, z = s[0], s[1], s[2]
    return np.stack([p[0] * (y - x), x * (p[1] - z) - y, x * y - p[2] * z])


def rk4_step(s, p, dt):
    k1 = lorenz(s, p)
    k2 = lorenz(s + 0.5 * dt * k1, p)
    k3 = lorenz(s + 0.5 * dt * k2, p)
    k4 = lorenz(s + dt * k3, p)
    return s + dt / 6.0 * (k1 + 2.0 * k2 + 2.0 * k3 + k4)


@llgrad.differentiate
def lorenz_rk4(p, s0, obs, dt, n):
    """Integrate n RK4 steps from s0 with parameters p; mean squared misfit to obs[i]."""
    s = s0
    total = 0.0
    for i in range(n):
        s = rk4_step(s, p, dt)
        total = total + np.sum((s - obs[i]) ** 2)
    return total / n


def simulate(p, s0, dt, n):
    """The same integrator run as plain numpy: the "observed" data."""
    out, s = [], s0
    for _ in range(n):
        s = rk4_step(s, p, dt)
        out.append(s)
    return np.array(out)


def fit(steps: int = 200, iters: int = 100, dt: float = 0.01, verbose: bool = True):
    s0 = np.array([1.0, 1.0, 1.0])
    obs = simulate(TRUE, s0, dt, steps)
    p = np.array([8.0, 25.0, 2.0])     # initial guess

    # The compiled gradient against central finite differences, once.
    _, g = lorenz_rk4.value_and_grad(p, s0, obs, dt, steps)
    eps = 1e-6
    fd = np.array([(lorenz_rk4(p + eps * e, s0, obs, dt, steps)
                    - lorenz_rk4(p - eps * e, s0, obs, dt, steps)) / (2 * eps)
                   for e in np.eye(3)])
    if verbose:
        print(f"gradient {g} matches finite differences: "
              f"{np.allclose(g, fd, rtol=1e-5, atol=1e-8)}")

    # Gradient descent with a normalised, decaying step (the problem is badly scaled).
    for k in range(iters):
        loss, g = lorenz_rk4.value_and_grad(p, s0, obs, dt, steps)
        if verbose and k % 20 == 0:
            print(f"iter {k:3d}  loss {loss:10.5f}  sigma {p[0]:.4f}  rho {p[1]:.4f}  "
                  f"beta {p[2]:.4f}")
        p = p - 0.5 * 0.95 ** k * g / (np.linalg.norm(g) + 1e-12)
    return p, lorenz_rk4(p, s0, obs, dt, steps)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=200, help="RK4 steps (dt = 0.01)")
    ap.add_argument("--iters", type=int, default=100, help="gradient-descent iterations")
    args = ap.parse_args()
    t0 = time.perf_counter()
    p, loss = fit(args.steps, args.iters)
    print(f"fitted sigma={p[0]:.3f} rho={p[1]:.3f} beta={p[2]:.3f} "
          f"(true 10, 28, 2.667); loss {loss:.2e}; {time.perf_counter() - t0:.2f}s")


if __name__ == "__main__":
    main()
