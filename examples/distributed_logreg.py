"""Data-parallel logistic regression on Dask: each worker computes the compiled gradient of its
row blocks, llgrad.distributed sums them as a tree, and the client takes a gradient step.

    python examples/distributed_logreg.py [--rows 200000] [--cols 32] [--chunks 8] [--steps 30]
    python examples/distributed_logreg.py --scheduler tcp://HOST:8786   # an existing cluster

Without --scheduler it starts a LocalCluster of 2 worker processes. Needs
`pip install llgrad[distributed]`; see the README ("Several machines with Dask") for starting
`dask scheduler` and `dask worker` on several hosts.
"""
from __future__ import annotations

import argparse
import time

import numpy as np

import llgrad
import llgrad.distributed


@llgrad.differentiate
def loss(w, X, y):
    """Mean logistic loss of the rows of X (labels y in {0, 1}) plus a small L2 penalty."""
    z = X @ w
    return np.mean(np.logaddexp(0.0, z) - y * z) + 1e-4 * np.sum(w * w)


def make_data(rows: int, cols: int, chunk: int, seed: int = 0):
    """Synthetic (X, y) as dask arrays of `chunk` rows a block, drawn on the workers."""
    import dask.array as da
    w_true = np.random.default_rng(seed).normal(size=cols)
    rng = da.random.default_rng(seed)
    X = rng.normal(size=(rows, cols), chunks=(chunk, -1))
    p = 1.0 / (1.0 + da.exp(-(X @ w_true)))
    y = (rng.random(rows, chunks=chunk) < p).astype(np.float64)
    return X, y


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scheduler", help="address of a running dask scheduler")
    ap.add_argument("--rows", type=int, default=200_000)
    ap.add_argument("--cols", type=int, default=32)
    ap.add_argument("--chunks", type=int, default=8, help="row blocks (shards)")
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--lr", type=float, default=2.0)
    args = ap.parse_args()

    from dask.distributed import Client, LocalCluster

    cluster = None
    if args.scheduler:
        client = Client(args.scheduler)
    else:
        cluster = LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                               dashboard_address=None)
        client = Client(cluster)
    try:
        X, y = make_data(args.rows, args.cols, -(-args.rows // args.chunks))
        data = llgrad.distributed.shards(X, y, client=client)  # blocks stay on the workers
        w = np.zeros(args.cols)
        t0 = time.perf_counter()
        for i in range(args.steps):
            value, g = llgrad.distributed.value_and_grad(loss, w, data, client=client)
            w = w - args.lr * g
            if i % 10 == 0 or i == args.steps - 1:
                print(f"step {i:3d}  loss {value:.6f}")
        dt = time.perf_counter() - t0
        v1, g1 = loss.value_and_grad(w, *client.compute([X, y], sync=True))  # in one process
        v2, g2 = llgrad.distributed.value_and_grad(loss, w, data, client=client)
        same = bool(np.allclose(g1, g2, rtol=1e-10, atol=1e-14) and np.isclose(v1, v2))
        print(f"{args.steps} steps on {len(client.scheduler_info()['workers'])} workers in "
              f"{dt:.2f} s ({1e3 * dt / args.steps:.1f} ms a step)")
        print(f"distributed gradient equals one process: {same}")
    finally:
        client.close()
        if cluster is not None:
            cluster.close()


if __name__ == "__main__":
    main()
