"""Issue 16's checkpointing table: the `recurrence` workload's gradient at n = 1e6 and 1e7,
plain vs `@differentiate(checkpoint="sqrt")`: tape bytes (inspect().stats), the process's
peak resident memory, and the time per gradient call (min of --repeat).

Each configuration runs in a fresh process (peak memory is per process).
Run: python -m benchmarks.checkpointing [--sizes 1e6,1e7] [--repeat 5]
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

CHILD = r"""
import json, resource, sys, time
import numpy as np
import llgrad

def recurrence(x):
    s = x[0]
    for i in range(1, len(x)):
        s = 0.9 * s + np.sin(x[i]) * x[i - 1]
    return s

n, schedule, repeat = int(float(sys.argv[1])), json.loads(sys.argv[2]), int(sys.argv[3])
x = np.random.default_rng(4).normal(size=n)
f = llgrad.differentiate(recurrence, checkpoint=schedule)
t0 = time.perf_counter()
g = f.grad(x)
first = time.perf_counter() - t0
times = []
for _ in range(repeat):
    t0 = time.perf_counter()
    g = f.grad(x)
    times.append(time.perf_counter() - t0)
st = f.inspect(x).stats
print(json.dumps({"first": first, "time": min(times), "tape": st["tape bytes (static)"],
                  "peak": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
                  "sum": float(np.sum(g))}))
"""


def _mb(b: float) -> str:
    return f"{b / 2**20:.1f} MB" if b >= 2**20 else f"{b / 2**10:.1f} KB"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="1e6,1e7")
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    print("| n | schedule | tape | peak RSS | time per gradient | first call |")
    print("|---|---|---|---|---|---|")
    child = os.path.join(tempfile.mkdtemp(), "checkpointing_child.py")
    with open(child, "w") as f:  # a file: code from `python -c` has no source to convert
        f.write(CHILD)
    for n in args.sizes.split(","):
        rows = {}
        for schedule in (None, "sqrt"):
            r = subprocess.run([sys.executable, child, n, json.dumps(schedule),
                                str(args.repeat)], capture_output=True, text=True, check=True)
            rows[schedule] = res = json.loads(r.stdout.strip().splitlines()[-1])
            print(f"| {float(n):.0e} | {schedule or 'plain'} | {_mb(res['tape'])} | "
                  f"{_mb(res['peak'])} | {1e3 * res['time']:.1f} ms | "
                  f"{1e3 * res['first']:.0f} ms |", flush=True)
        p, c = rows[None], rows["sqrt"]
        assert p["sum"] == c["sum"], "checkpointed gradient differs"
        print(f"|  | ratio | {p['tape'] / c['tape']:.0f}x smaller | "
              f"{_mb(p['peak'] - c['peak'])} less | {c['time'] / p['time']:.2f}x | |")


if __name__ == "__main__":
    main()
