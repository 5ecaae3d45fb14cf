"""Issue 16's checkpointing table: the gradients of `recurrence` (whose reverse sweep needs
only x: its tapes hold sin and cos of x, and no recomputation of the carried state survives
dce) and of `nonlinear` (s = sin(s) * 0.9 + ...: the reverse sweep reads the carried state,
so checkpointing really reruns segments) at n = 1e6 and 1e7, plain vs
`@differentiate(checkpoint="sqrt")`, `checkpoint="log"` and one loop marked with
`llgrad.checkpointed(range(...))`: tape bytes (inspect().stats), memory and time.

Memory is measured per configuration in a fresh process: "peak RSS" is the whole process's
(imports, LLVM, the input x included), "call peak" what a gradient call adds to the memory
resident before it (Linux: VmHWM reset through /proc/self/clear_refs), i.e. its tapes,
workspace and result (a call in a new thread, whose workspace and tapes are its own: a
thread keeps its tapes' buffers from call to call). Times are medians of --repeat calls interleaved across the
configurations in one more process, so that load from other processes hits them alike.
Run: python -m benchmarks.checkpointing [--sizes 1e6,1e7] [--repeat 5]
    [--workloads recurrence,nonlinear]
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

CHILD = r"""
import json, statistics, sys, threading, time
import numpy as np
import llgrad

def recurrence(x):
    s = x[0]
    for i in range(1, len(x)):
        s = 0.9 * s + np.sin(x[i]) * x[i - 1]
    return s

def marked(x):
    s = x[0]
    for i in llgrad.checkpointed(range(1, len(x))):
        s = 0.9 * s + np.sin(x[i]) * x[i - 1]
    return s

def nonlinear(x):  # its reverse sweep reads the carried state
    s = x[0]
    for i in range(1, len(x)):
        s = np.sin(s) * 0.9 + x[i] * x[i - 1]
    return s

def nonlinear_marked(x):
    s = x[0]
    for i in llgrad.checkpointed(range(1, len(x))):
        s = np.sin(s) * 0.9 + x[i] * x[i - 1]
    return s

workload = sys.argv[4]
fn, mk = (recurrence, marked) if workload == "recurrence" else (nonlinear, nonlinear_marked)
CONFIGS = {"plain": (fn, None), "sqrt": (fn, "sqrt"), "log": (fn, "log"), "per-loop": (mk, None)}

def mem():
    d = dict(l.split(":") for l in open("/proc/self/status") if l.startswith(("VmRSS", "VmHWM")))
    return {k: int(v.split()[0]) * 1024 for k, v in d.items()}

n, which, repeat = int(float(sys.argv[1])), sys.argv[2], int(sys.argv[3])
x = np.random.default_rng(4).normal(size=n) * 0.5
if which == "time":  # every configuration, calls interleaved
    fs = {k: llgrad.differentiate(fn, checkpoint=c) for k, (fn, c) in CONFIGS.items()}
    wall, cpu = {k: [] for k in fs}, {k: [] for k in fs}
    for f in fs.values():
        f.grad(x)
    for _ in range(repeat):
        for k, f in fs.items():
            t0, c0 = time.perf_counter(), time.process_time()
            g = f.grad(x)
            wall[k].append(time.perf_counter() - t0)
            cpu[k].append(time.process_time() - c0)
            del g
    print(json.dumps({k: (statistics.median(wall[k]), statistics.median(cpu[k])) for k in fs}))
    sys.exit()
fn, schedule = CONFIGS[which]
f = llgrad.differentiate(fn, checkpoint=schedule)
t0 = time.perf_counter()
f.grad(x)  # compiles
first = time.perf_counter() - t0
st = f.inspect(x).stats
before = mem()["VmRSS"]
with open("/proc/self/clear_refs", "w") as fh:
    fh.write("5")  # VmHWM := VmRSS
out = []  # in a new thread: a workspace of its own, no tapes kept from the first call
th = threading.Thread(target=lambda: out.append(f.grad(x)))
th.start()
th.join()
g = out[0]
call_peak = mem()["VmHWM"] - before
import resource
print(json.dumps({"compile": first, "tape": st["tape bytes (static)"], "call": call_peak,
                  "peak": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
                  "sum": float(np.sum(g))}))
"""


def _mb(b: float) -> str:
    return f"{b / 2**20:.1f} MB" if b >= 2**20 else f"{b / 2**10:.1f} KB"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="1e6,1e7")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--workloads", default="recurrence,nonlinear")
    args = ap.parse_args()
    print("| workload | n | schedule | tape | call peak | peak RSS | wall per gradient | CPU per "
          "gradient | CPU vs plain |")
    print("|---|---|---|---|---|---|---|---|---|")
    child = os.path.join(tempfile.mkdtemp(), "checkpointing_child.py")
    with open(child, "w") as f:  # a file: code from `python -c` has no source to convert
        f.write(CHILD)

    def run(n, which, workload):
        r = subprocess.run([sys.executable, child, n, which, str(args.repeat), workload],
                           capture_output=True, text=True, check=True)
        return json.loads(r.stdout.strip().splitlines()[-1])

    for workload in args.workloads.split(","):
        for n in args.sizes.split(","):
            _table(workload, n, run)


def _table(workload, n, run) -> None:
    times = run(n, "time", workload)
    rows = {k: run(n, k, workload) for k in times}
    for k, res in rows.items():
        assert abs(res["sum"] - rows["plain"]["sum"]) <= 1e-9 * abs(rows["plain"]["sum"]), \
            f"{k}: the checkpointed gradient differs"
        (wall, cpu), plain = times[k], times["plain"][1]
        print(f"| {workload} | {float(n):.0e} | {k} | {_mb(res['tape'])} | {_mb(res['call'])} | "
              f"{_mb(res['peak'])} | {1e3 * wall:.1f} ms | {1e3 * cpu:.1f} ms | "
              f"{cpu / plain:.2f}x |", flush=True)


if __name__ == "__main__":
    main()
