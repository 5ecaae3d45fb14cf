"""Overhead of anomaly mode (not a test): median time of one forward+backward of a ~200-op
eager graph with anomaly detection off, on (check_nan=True) and on without NaN checks.

Run: python benchmarks/anomaly_overhead.py [--repeats N]
While on, every recorded op captures the Python stack of its forward call and every backward
output is scanned for NaN; while off, nothing is paid (one thread-local flag read per node).
"""
from __future__ import annotations

import argparse
import statistics
import time

import llgrad as lg


def step(x, w):
    """50 layers of 4 ops each (matmul, add, tanh, mul): ~200 recorded ops, then backward."""
    h = x
    for _ in range(50):
        h = (h @ w + 0.1).tanh() * 0.9
    h.sum().backward()


def measure(repeats: int, mode) -> float:
    x = lg.randn(16, 32, requires_grad=True)
    w = lg.randn(32, 32, requires_grad=True) * 0.1
    w = w.detach().requires_grad_()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        if mode is None:
            step(x, w)
        else:
            with lg.autograd.detect_anomaly(check_nan=mode):
                step(x, w)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=50)
    args = ap.parse_args()
    measure(5, None)  # warm up
    off = measure(args.repeats, None)
    on = measure(args.repeats, True)
    on_nonan = measure(args.repeats, False)
    print(f"forward+backward of ~200 ops, median of {args.repeats}:")
    print(f"  anomaly off                : {off * 1e3:8.3f} ms")
    print(f"  anomaly on (check_nan=True) : {on * 1e3:8.3f} ms  ({on / off:.2f}x)")
    print(f"  anomaly on (check_nan=False): {on_nonan * 1e3:8.3f} ms  ({on_nonan / off:.2f}x)")


if __name__ == "__main__":
    main()
