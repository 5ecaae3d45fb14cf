"""Interleaved timing of a few zero-argument callables (issue 14's benchmarks): the first call
of each (trace + compile), then rounds in which every callable runs `reps` times in a freshly
shuffled order, so machine noise falls on all alike. Reports the medians of wall time and of
process CPU time (every thread's, `time.process_time`), per call."""
from __future__ import annotations

import gc
import random
import statistics
import time
from typing import Callable


def timed(rows: dict[str, Callable], samples: int, reps: int = 5, check=None) -> dict:
    """{name: (first call's result, first call seconds, median wall s/call, median CPU
    s/call)}; `check(name, result)` runs on each first result before timing."""
    first = {}
    for name, fn in rows.items():
        t0 = time.perf_counter()
        out = fn()
        first[name] = (out, time.perf_counter() - t0)
        if check is not None:
            check(name, out)
    wall = {k: [] for k in rows}
    cpu = {k: [] for k in rows}
    rng = random.Random(0)
    for _ in range(samples):
        order = list(rows)
        rng.shuffle(order)
        for name in order:
            gc.collect()
            t0, c0 = time.perf_counter(), time.process_time()
            for _ in range(reps):
                rows[name]()
            wall[name].append((time.perf_counter() - t0) / reps)
            cpu[name].append((time.process_time() - c0) / reps)
    return {k: (first[k][0], first[k][1], statistics.median(wall[k]), statistics.median(cpu[k]))
            for k in rows}


def table(title: str, results: dict, unit: float = 1e3, unit_name: str = "ms") -> str:
    lines = [f"{title:44s} {'wall/call':>12s} {'cpu/call':>12s} {'first call':>11s}"]
    for name, (_, first, wall, cpu) in results.items():
        lines.append(f"{name:44s} {wall * unit:9.3f} {unit_name} {cpu * unit:9.3f} {unit_name} "
                     f"{first:9.2f} s")
    return "\n".join(lines)
