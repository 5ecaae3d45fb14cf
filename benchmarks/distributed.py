"""Issue 16's distributed table: the gradient of a mean logistic loss over 4e6 x 32 float64
rows, in one process vs split across 2 local Dask worker processes (llgrad.distributed), and
the overhead of one distributed call (a tiny data set, where the work is nil).

Every process is limited to one thread (BLAS included), so the 2 workers use the 2 cores.
Run: python -m benchmarks.distributed [--rows 4000000] [--cols 32] [--shards 8] [--repeat 5]
"""
from __future__ import annotations

from benchmarks._threads import set_threads

set_threads(1)

import argparse  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

import llgrad  # noqa: E402
import llgrad.distributed  # noqa: E402


@llgrad.differentiate
def logreg(w, X, y):
    z = X @ w
    return np.mean(np.logaddexp(0.0, z) - y * z)


def _best(fn, repeat):
    fn()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=4_000_000)
    ap.add_argument("--cols", type=int, default=32)
    ap.add_argument("--shards", type=int, default=8)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    import dask.array as da
    from dask.distributed import Client, LocalCluster

    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                      dashboard_address=None) as cluster, Client(cluster) as client:
        chunk = -(-args.rows // args.shards)
        rng = da.random.default_rng(0)
        X = rng.normal(size=(args.rows, args.cols), chunks=(chunk, -1))
        y = (rng.random(args.rows, chunks=chunk) < 0.5).astype(np.float64)
        data = llgrad.distributed.shards(X, y, client=client)
        w = np.random.default_rng(1).normal(size=args.cols) * 0.1
        dist = _best(lambda: llgrad.distributed.value_and_grad(logreg, w, data, client=client),
                     args.repeat)
        Xl, yl = client.compute([X, y], sync=True)
        one = _best(lambda: logreg.value_and_grad(w, Xl, yl), args.repeat)
        v1, g1 = logreg.value_and_grad(w, Xl, yl)
        v2, g2 = llgrad.distributed.value_and_grad(logreg, w, data, client=client)
        err = float(np.max(np.abs(g1 - g2)) / np.max(np.abs(g1)))
        del Xl, yl
        tiny = llgrad.distributed.shards(da.zeros((1000, args.cols), chunks=(500, -1)),
                                         da.zeros(1000, chunks=500), client=client)
        overhead = _best(lambda: llgrad.distributed.value_and_grad(logreg, w, tiny,
                                                                   client=client),
                         max(args.repeat, 10))
    print(f"| logistic gradient, {args.rows:.0e} x {args.cols} f64, {args.shards} shards | "
          f"time |")
    print("|---|---|")
    print(f"| one process | {1e3 * one:.1f} ms |")
    print(f"| 2 Dask worker processes | {1e3 * dist:.1f} ms ({one / dist:.2f}x) |")
    print(f"| overhead of a distributed call (2 shards of 500 rows) | {1e3 * overhead:.1f} ms |")
    print(f"max relative difference of the gradients: {err:.1e}")


if __name__ == "__main__":
    main()
