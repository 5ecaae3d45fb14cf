"""Two OpenBLAS thread pools on the same cores: ``python -m benchmarks.blas_pools [--quick]``.

The scenario (codegen/blas.py, Note [One BLAS, one thread pool]): a user's loop alternates a
compiled Gaussian-process step (``gp_nlml`` value and gradient, n=200: kernel matrix, compiled
Cholesky and triangular solves) with a numpy matmul of their own (200x200). Compiled code that
calls scipy's OpenBLAS while numpy calls its own runs two thread pools whose idle threads spin
while the other's work: on this 2-core machine each iteration went from ~1 ms to 130-680 ms.

Each configuration runs in a fresh process (thread counts are fixed when OpenBLAS loads):
the library compiled code calls (numpy's, llgrad's choice; or scipy's, forced, as llgrad
called before) x the thread count (OpenBLAS's default, one per core, or
OPENBLAS_NUM_THREADS=1). Per configuration, interleaved samples of the compiled step alone,
the numpy matmul alone and the two alternating; the table shows medians and the ratio of
"alternating" to the sum of the two alone (1.0: no interference).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

CONFIGS = [("numpy", None), ("numpy", "1"), ("scipy", None), ("scipy", "1")]


def _child(library: str, samples: int, budget: float) -> dict:
    import random
    import time

    import numpy as np

    import llgrad
    from llgrad.codegen import blas

    from .workloads.linalg import _inputs, gp_nlml

    if library == "scipy":  # what compiled code called before: scipy's LP64 OpenBLAS
        lib = blas.Library("scipy's OpenBLAS", 32, blas._scipy_routine)
        blas.library = lambda: lib
        blas.blas_address.cache_clear()
    inputs = _inputs(200)()
    f = llgrad.differentiate(gp_nlml)
    args = (inputs["log_params"], inputs["X"], inputs["y"])
    a = np.random.default_rng(0).standard_normal((200, 200))
    expected = gp_nlml(*args)
    value, _ = f.value_and_grad(*args)
    assert abs(value - expected) <= 1e-9 * abs(expected), (value, expected)

    def both():
        f.value_and_grad(*args)
        a @ a
    runs = {"compiled": lambda: f.value_and_grad(*args), "numpy": lambda: a @ a,
            "alternating": both}
    wall, cpu = {k: [] for k in runs}, {k: [] for k in runs}
    start = time.perf_counter()
    for _ in range(samples):
        for k in random.sample(list(runs), len(runs)):
            t, c = time.perf_counter(), time.process_time()  # process: every thread's CPU
            for _ in range(5):
                runs[k]()
            wall[k].append((time.perf_counter() - t) / 5)
            cpu[k].append((time.process_time() - c) / 5)
        if time.perf_counter() - start > budget:
            break
    return {"library": blas.library().name,
            "wall": {k: float(np.median(v)) for k, v in wall.items()},
            "cpu": {k: float(np.median(v)) for k, v in cpu.items()},
            "samples": len(wall["compiled"])}


def _run(library: str, threads: str | None, samples: int, budget: float) -> dict:
    env = {k: v for k, v in os.environ.items()
           if k not in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "LLGRAD_DISABLE_JIT")}
    if threads is not None:
        env["OPENBLAS_NUM_THREADS"] = threads
    code = (f"import json; from benchmarks.blas_pools import _child; "
            f"print(json.dumps(_child({library!r}, {samples}, {budget})))")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    out = subprocess.run([sys.executable, "-c", code], cwd=root, env=env, text=True,
                         capture_output=True, timeout=600)
    if out.returncode != 0:
        return {"error": out.stderr.strip().splitlines()[-1]}
    return json.loads(out.stdout.splitlines()[-1])


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="fewer samples (5, 10 s budget)")
    p.add_argument("--json", help="write the results here")
    opts = p.parse_args(argv)
    samples, budget = (5, 10.0) if opts.quick else (15, 30.0)
    rows = []
    print(f"{'compiled code calls':18s} {'threads':>7s} | wall ms: {'compiled':>8s} "
          f"{'numpy @':>8s} {'altern.':>8s} {'ratio':>6s} | cpu ms: {'compiled':>8s} "
          f"{'numpy @':>8s} {'altern.':>8s} {'ratio':>6s}")
    for library, threads in CONFIGS:
        r = _run(library, threads, samples, budget)
        rows.append({"config": [library, threads], **r})
        label = "default" if threads is None else threads
        if "error" in r:
            print(f"{library + ' (error)':18s} {label:>7s}  {r['error']}")
            continue
        cells = []
        for m in (r["wall"], r["cpu"]):
            ratio = m["alternating"] / (m["compiled"] + m["numpy"])
            cells.append(f"{m['compiled'] * 1e3:8.2f} {m['numpy'] * 1e3:8.2f} "
                         f"{m['alternating'] * 1e3:8.2f} {ratio:6.2f}")
        print(f"{r['library']:18s} {label:>7s} |          {cells[0]} |         {cells[1]}")
    print("medians of interleaved samples (5 calls each), one process per row; cpu: all "
          "threads of the process;\nratio = alternating / (compiled alone + numpy alone), "
          "1.0: no interference")
    if opts.json:
        with open(opts.json, "w") as fh:
            json.dump(rows, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
