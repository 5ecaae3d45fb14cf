"""Issue 12's timing table: a hand-written Cholesky factorisation plus the two triangular
solves, whose slices (`L[i, :j]`, `x[i + 1:]`) have loop-dependent lengths, at n = 10, 25,
50: llgrad's first call (trace + compile + run) and steady-state call, for the value and the
gradient, next to the same function run by numpy and to scipy's cho_factor/cho_solve.

Each llgrad measurement runs in a fresh process (first calls include tracing and LLVM, with
the disk cache off) under a time limit, so the dynamic path of older versions can be timed
too. Run: python -m benchmarks.dynamic_extents [--sizes 10,25,50] [--timeout 120]
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np


def handwritten_cholesky_solve(A, b):
    n = A.shape[0]
    L = np.zeros_like(A)
    for i in range(n):
        for j in range(i + 1):
            s = np.dot(L[i, :j], L[j, :j])
            if i == j:
                L[i, j] = np.sqrt(A[i, i] - s)
            else:
                L[i, j] = (A[i, j] - s) / L[j, j]
    z = np.zeros(n)
    for i in range(n):
        z[i] = (b[i] - np.dot(L[i, :i], z[:i])) / L[i, i]
    x = np.zeros(n)
    for i in reversed(range(n)):
        x[i] = (z[i] - np.dot(L[i + 1:, i], x[i + 1:])) / L[i, i]
    return np.sum(x ** 2)


def problem(n: int):
    rng = np.random.default_rng(n)
    m = rng.standard_normal((n, n))
    return m @ m.T + n * np.eye(n), rng.standard_normal(n)


def _steady(fn, budget=0.5) -> float:
    """Median seconds per call over calls filling about `budget` seconds."""
    fn()
    times = []
    start = time.perf_counter()
    while time.perf_counter() - start < budget or len(times) < 5:
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
        if len(times) >= 200:
            break
    return float(np.median(times))


def _child(n: int) -> dict:
    """One fresh process: llgrad's first and steady-state calls (value, then gradient)."""
    import llgrad
    A, b = problem(n)
    f = llgrad.differentiate(handwritten_cholesky_solve)
    out = {}
    t = time.perf_counter()
    v = f(A, b)
    out["value first"] = time.perf_counter() - t
    out["path"] = f.inspect(A, b).path
    out["value ok"] = bool(np.isclose(v, handwritten_cholesky_solve(A, b), rtol=1e-10))
    t = time.perf_counter()
    f.grad(A, b)
    out["grad first"] = time.perf_counter() - t
    out["value steady"] = _steady(lambda: f(A, b))
    out["grad steady"] = _steady(lambda: f.grad(A, b))
    return out


def _llgrad(n: int, timeout: float) -> dict:
    cmd = [sys.executable, "-m", "benchmarks.dynamic_extents", "--child", str(n)]
    with tempfile.TemporaryDirectory() as cache:  # an empty disk cache: first calls compile
        env = dict(os.environ, LLGRAD_CACHE_DIR=cache)
        try:
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                                  env=env)
        except subprocess.TimeoutExpired:
            return {"error": f"> {timeout:.0f} s"}
    if done.returncode:
        return {"error": done.stderr.strip().splitlines()[-1]}
    return json.loads(done.stdout.strip().splitlines()[-1])


def _baselines(n: int) -> dict:
    from scipy.linalg import cho_factor, cho_solve
    A, b = problem(n)
    return {"numpy": _steady(lambda: handwritten_cholesky_solve(A, b)),
            "scipy": _steady(lambda: np.sum(cho_solve(cho_factor(A), b) ** 2))}


def _ms(s) -> str:
    return f"{s * 1e3:9.3f}" if isinstance(s, float) else f"{s:>9}"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="10,25,50")
    ap.add_argument("--timeout", type=float, default=120.0,
                    help="seconds allowed for one size's llgrad process")
    ap.add_argument("--child", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child is not None:
        print(json.dumps(_child(args.child)))
        return 0
    print("ms          n  value first  value steady  grad first  grad steady     numpy     scipy"
          "  path")
    for n in (int(s) for s in args.sizes.split(",")):
        r, base = _llgrad(n, args.timeout), _baselines(n)
        if "error" in r:
            print(f"{'':10s}{n:3d}  {r['error']}{'':30s}{_ms(base['numpy'])} {_ms(base['scipy'])}")
            continue
        path = r["path"] if r["value ok"] else r["path"] + " (WRONG value)"
        print(f"{'':10s}{n:3d}  {_ms(r['value first'])}    {_ms(r['value steady'])}  "
              f"{_ms(r['grad first'])}    {_ms(r['grad steady'])} {_ms(base['numpy'])} "
              f"{_ms(base['scipy'])}  {path[:40]}")
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
