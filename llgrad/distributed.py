"""Data-parallel gradients on Dask: a loss summed or averaged over data shards held by the
workers of a `dask.distributed` cluster.

    >>> from dask.distributed import Client                      # doctest: +SKIP
    >>> client = Client()                # a LocalCluster; or Client("tcp://host:8786")
    >>> data = llgrad.distributed.shards(X, y)  # dask arrays -> blocks kept on the workers
    >>> loss, g = llgrad.distributed.value_and_grad(loss_fn, w, data)   # loss_fn(w, X_i, y_i)

Each worker runs the compiled function on its shards (it pickles by reference or source and
compiles, or loads from the disk cache, once per worker: llgrad/pickling.py), and the
per-shard values and gradients are summed as a tree of tasks in a fixed order (Note [Shard
reduction]). Scheduling, data placement and retries after a worker dies are Dask's. Needs
`pip install llgrad[distributed]`.
"""
from __future__ import annotations

import sys
import time

import numpy as np

from llgrad.runtime import pytree
from llgrad.runtime.errors import UnsupportedError

# Note [Shard reduction]
# The loss of the whole data set is sum_i f(params, shard_i) (reduce="sum") or the row-weighted
# mean sum_i n_i f(params, shard_i) / sum_i n_i (reduce="mean": f averages over its rows, so
# this is f over all rows, whatever the shard sizes). Each shard's task returns (n_i, value,
# gradient), weighted by n_i for "mean"; they are added `split_every` at a time by tasks on the
# workers, in shard order, so the numbers do not depend on which worker ran what or on
# retries, and differ from one process's only by the order of the additions (rounding). A
# shard whose worker dies is recomputed by Dask from its graph (blocks of a dask array);
# data a client scattered has no graph and is lost with its worker (Dask raises).


def shards(*arrays, client=None) -> list:
    """Futures of the row blocks of dask arrays, one tuple (X_i, y_i, ...) per block, kept on
    the workers; pass them to `value_and_grad` at every step. The arrays must be chunked
    along their first axis only, with the same row chunks."""
    import dask
    client = _client(client)
    blocks = _row_blocks(arrays)
    return client.compute([dask.delayed(tuple)(list(b)) for b in blocks])


def value_and_grad(f, params, data, *, client=None, reduce: str = "mean",
                   split_every: int = 8, progress: bool | None = None):
    """(loss, gradient) of `f(params, *shard)` over all shards (Note [Shard reduction]).

    Args:
        f: a function of (params, *shard arrays) returning a scalar, plain or decorated with
            `@llgrad.differentiate` (its `wrt` selects the gradient; default: params).
        params: an array, float or pytree of them; sent to every worker once per call.
        data: dask arrays (a tuple for several: (X, y)), or a list of futures (`shards()`,
            or the user's own), each holding a tuple of arrays or one array.
        client: a `dask.distributed.Client` (default: the current one).
        reduce: "mean" (row-weighted, as f over all rows) or "sum".
        split_every: how many partial sums a reduction task adds.
        progress: a text progress bar on stderr; None shows it on a terminal once the call
            has taken 2 s.
    Returns:
        (value, gradient) as `f.value_and_grad` gives them in one process.
    """
    client = _client(client)
    future = submit(f, params, data, client=client, reduce=reduce, split_every=split_every,
                    progress=progress)
    return future.result()


def grad(f, params, data, **kwargs):
    """The gradient of `value_and_grad`."""
    return value_and_grad(f, params, data, **kwargs)[1]


def submit(f, params, data, *, client=None, reduce: str = "mean", split_every: int = 8,
           progress: bool | None = False):
    """`value_and_grad` without waiting: a Future of (value, gradient) (the progress bar,
    when asked for, is shown before it returns)."""
    from llgrad.api import Differentiable, differentiate
    if reduce not in ("mean", "sum"):
        raise ValueError(f"reduce must be 'mean' or 'sum', got {reduce!r}")
    if split_every < 2:
        raise ValueError(f"split_every must be at least 2, got {split_every}")
    client = _client(client)
    d = f if isinstance(f, Differentiable) else differentiate(f)
    parts = list(data) if _is_futures(data) else shards(
        *(data if isinstance(data, (tuple, list)) else (data,)), client=client)
    if not parts:
        raise ValueError("llgrad.distributed: no data shards")
    [p] = client.scatter([params], broadcast=True, hash=False)
    level = [client.submit(_shard, d, p, s, reduce == "mean", pure=False) for s in parts]
    leaves = list(level)
    while len(level) > 1:
        level = [client.submit(_add, *level[k:k + split_every], pure=False)
                 for k in range(0, len(level), split_every)]
    result = client.submit(_finish, level[0], reduce == "mean", pure=False)
    if progress is not False:
        _show_progress(leaves, progress)
    return result


def _shard(d, params, shard, weighted: bool):
    """On a worker: (rows, value, gradient) of one shard, times its rows for a mean."""
    arrays = shard if isinstance(shard, tuple) else (shard,)
    value, g = d.value_and_grad(params, *arrays)
    n = len(arrays[0]) if arrays and np.ndim(arrays[0]) else 1
    if weighted:
        value, g = value * n, pytree.tree_map(lambda x: x * n, g)
    return n, value, g


def _add(*parts):
    n, value, g = parts[0]
    for m, v, h in parts[1:]:
        n, value, g = n + m, value + v, pytree.tree_map(lambda a, b: a + b, g, h)
    return n, value, g


def _finish(part, weighted: bool):
    n, value, g = part
    if weighted:
        value, g = value / n, pytree.tree_map(lambda x: x / n, g)
    return value, g


# -- helpers --------------------------------------------------------------------------------
def _client(client):
    if client is not None:
        return client
    try:
        from distributed import get_client
    except ImportError:
        raise ImportError("llgrad.distributed needs Dask's distributed scheduler: "
                          "pip install 'llgrad[distributed]'") from None
    try:
        return get_client()
    except ValueError:
        raise ValueError("llgrad.distributed: no Dask client; start one first: "
                         "from dask.distributed import Client; client = Client() (a local "
                         "cluster) or Client('tcp://scheduler:8786')") from None


def _is_futures(data) -> bool:
    from distributed import Future
    return isinstance(data, (list, tuple)) and len(data) > 0 and \
        all(isinstance(x, Future) for x in data)


def _row_blocks(arrays) -> list:
    """[(block of each array) per row chunk] of dask arrays chunked along axis 0 only."""
    import dask.array as da
    if not arrays:
        raise ValueError("llgrad.distributed.shards: no arrays")
    rows = None
    for k, a in enumerate(arrays):
        if not isinstance(a, da.Array):
            raise TypeError(f"llgrad.distributed: data argument {k} is a "
                            f"{type(a).__name__}, not a dask array (nor a list of futures); "
                            f"wrap it: dask.array.from_array(x, chunks=(rows, -1))")
        if any(len(c) != 1 for c in a.chunks[1:]):
            raise UnsupportedError(
                f"llgrad.distributed: data argument {k} ({a.shape}, chunks {a.chunks}) is "
                f"chunked along more than its first axis; a shard must hold whole rows",
                fix="rechunk it: x.rechunk({0: 'auto', **{i: -1 for i in range(1, x.ndim)}})")
        if rows is None:
            rows = a.chunks[0]
        elif a.chunks[0] != rows:
            raise UnsupportedError(
                f"llgrad.distributed: the data arrays have different row chunks "
                f"({rows} and {a.chunks[0]})", fix="rechunk them alike: y.rechunk(X.chunks[0])")
    blocks = [a.to_delayed().reshape(-1) for a in arrays]
    return list(zip(*blocks))


def _show_progress(leaves, mode) -> None:
    """A text progress bar over the shard tasks; mode None: on a terminal after 2 s."""
    from distributed import wait
    if mode is None and not sys.stderr.isatty():
        return
    t0, total, shown = time.perf_counter(), len(leaves), False
    while True:
        try:
            wait(leaves, timeout=0.2)
            finished = True
        except TimeoutError:
            finished = False
        elapsed = time.perf_counter() - t0
        if mode or elapsed > 2.0:
            done = sum(f.done() for f in leaves)
            sys.stderr.write(f"\rllgrad.distributed: [{'#' * (30 * done // total):<30}] "
                             f"{done}/{total} shards, {elapsed:.1f} s")
            sys.stderr.flush()
            shown = True
        if finished:
            break
    if shown:
        sys.stderr.write("\n")


__all__ = ["value_and_grad", "grad", "submit", "shards"]
