"""Issue 12's timing table: a hand-written Cholesky factorisation plus the two triangular
solves, whose slices (`L[i, :j]`, `x[i + 1:]`) have loop-dependent lengths, at n = 10, 25,
50: llgrad's first call (trace + compile + run) and steady-state call, for the value and the
gradient, next to the same function run by numpy and to scipy's cho_factor/cho_solve.

`--compare` adds the design comparison of Note [Slices of loop-dependent length]: the same
computations written with scalar inner loops over exactly the run-time length (the code that
views of dynamic length would compile to), and a triangular sum of dots `x[:i] @ y[:i]`
padded vs exact, at n = 100 and 1000.

Each llgrad measurement runs in a fresh process with an empty disk cache (first calls
include tracing and LLVM) under a time limit, so the dynamic path of older versions can be
timed too. Run: python -m benchmarks.dynamic_extents [--sizes 10,25,50] [--timeout 120]
[--compare]
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


def cholesky_loops(A, b):
    """cholesky_solve with each dot written as a scalar loop over exactly its length."""
    n = A.shape[0]
    L = np.zeros_like(A)
    for i in range(n):
        for j in range(i + 1):
            s = 0.0
            for k in range(j):
                s = s + L[i, k] * L[j, k]
            if i == j:
                L[i, j] = np.sqrt(A[i, i] - s)
            else:
                L[i, j] = (A[i, j] - s) / L[j, j]
    z = np.zeros(n)
    for i in range(n):
        s = 0.0
        for k in range(i):
            s = s + L[i, k] * z[k]
        z[i] = (b[i] - s) / L[i, i]
    x = np.zeros(n)
    for i in reversed(range(n)):
        s = 0.0
        for k in range(i + 1, n):
            s = s + L[k, i] * x[k]
        x[i] = (z[i] - s) / L[i, i]
    return np.sum(x ** 2)


def triangular_dots(x, y):
    s = x[0] * 0.0
    for i in range(x.shape[0]):
        s = s + x[:i] @ y[:i]
    return s


def triangular_loops(x, y):
    s = x[0] * 0.0
    for i in range(x.shape[0]):
        for k in range(i):
            s = s + x[k] * y[k]
    return s


FUNCTIONS = {f.__name__: f for f in (handwritten_cholesky_solve, cholesky_loops,
                                       triangular_dots, triangular_loops)}


def problem(name: str, n: int):
    rng = np.random.default_rng(n)
    if name.startswith("triangular"):
        return tuple(rng.standard_normal((2, n)))
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


def _child(name: str, n: int) -> dict:
    """One fresh process: llgrad's first and steady-state calls (value, then gradient)."""
    import llgrad
    fn, args = FUNCTIONS[name], problem(name, n)
    f = llgrad.differentiate(fn)
    out = {}
    t, c = time.perf_counter(), time.process_time()
    v = f(*args)
    out["value first"] = time.perf_counter() - t
    out["value first cpu"] = time.process_time() - c
    out["path"] = f.inspect(*args).path
    out["value ok"] = bool(np.isclose(v, fn(*args), rtol=1e-10))
    t, c = time.perf_counter(), time.process_time()
    f.grad(*args)
    out["grad first"] = time.perf_counter() - t
    out["grad first cpu"] = time.process_time() - c
    out["value steady"] = _steady(lambda: f(*args))
    out["grad steady"] = _steady(lambda: f.grad(*args))
    return out


def _llgrad(name: str, n: int, timeout: float) -> dict:
    cmd = [sys.executable, "-m", "benchmarks.dynamic_extents", "--child", f"{name}:{n}"]
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


def _baselines(name: str, n: int) -> dict:
    args = problem(name, n)
    out = {"numpy": _steady(lambda: FUNCTIONS[name](*args))}
    if not name.startswith("triangular"):
        from scipy.linalg import cho_factor, cho_solve
        A, b = args
        out["scipy"] = _steady(lambda: np.sum(cho_solve(cho_factor(A), b) ** 2))
    return out


def _ms(s) -> str:
    return f"{s * 1e3:9.3f}" if isinstance(s, float) else f"{s:>9}"


def _row(name: str, n: int, timeout: float) -> str:
    r, base = _llgrad(name, n, timeout), _baselines(name, n)
    refs = f"{_ms(base['numpy'])} {_ms(base.get('scipy', '-'))}"
    if "error" in r:
        return f"{name:27s}{n:5d}  {r['error']:68s}{refs}"
    path = r["path"] if r["value ok"] else r["path"] + " (WRONG value)"
    return (f"{name:27s}{n:5d}  {_ms(r['value first'])} ({_ms(r['value first cpu'])}) "
            f"{_ms(r['value steady'])}  {_ms(r['grad first'])} ({_ms(r['grad first cpu'])}) "
            f"{_ms(r['grad steady'])} {refs}  {path[:40]}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="10,25,50")
    ap.add_argument("--timeout", type=float, default=120.0,
                    help="seconds allowed for one llgrad process")
    ap.add_argument("--compare", action="store_true",
                    help="also time the exact-length loop versions (the design alternative)")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child is not None:
        name, n = args.child.split(":")
        print(json.dumps(_child(name, int(n))))
        return 0
    sizes = [int(s) for s in args.sizes.split(",")]
    runs = [("handwritten_cholesky_solve", n) for n in sizes]
    if args.compare:
        runs += [("cholesky_loops", n) for n in sizes]
        runs += [(name, n) for n in (100, 1000) for name in ("triangular_dots",
                                                             "triangular_loops")]
    print(f"{'ms (first calls: wall (cpu))':27s}{'n':>5s}  {'value first':>22s} "
          f"{'steady':>9s}  {'grad first':>22s} {'steady':>9s} {'numpy':>9s} {'scipy':>9s}  path")
    for name, n in runs:
        print(_row(name, n, args.timeout))
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
