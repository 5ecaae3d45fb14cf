"""Compiled functions on Dask (llgrad/pickling.py, llgrad/distributed.py): pickling by
reference and by source, and data-parallel gradients over a LocalCluster of 2 worker
processes equal to one process's, also when a worker dies mid-job."""
from __future__ import annotations

import os
import pickle
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

import llgrad
from llgrad.runtime.errors import UnsupportedError

distributed = pytest.importorskip("distributed")
da = pytest.importorskip("dask.array")

SCALE = 1.0


@llgrad.differentiate
def logreg(w, X, y):
    z = X @ w
    return np.mean(np.logaddexp(0.0, z) - y * z) * SCALE


@llgrad.differentiate(wrt=0)
def two_layer(params, X, y):
    W, b = params
    h = np.tanh(X @ W + b)
    return np.sum((np.sum(h, axis=1) - y) ** 2)


def _data(rows=3000, cols=6, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(rows, cols))
    return X, (rng.random(rows) < 0.5).astype(np.float64), rng.normal(size=cols) * 0.3


def _close(a, b):
    np.testing.assert_allclose(a, b, rtol=1e-11, atol=1e-14)


# -- pickling ---------------------------------------------------------------------------------
def test_module_level_function_pickles_by_reference():
    assert pickle.loads(pickle.dumps(logreg)) is logreg


def _closure(k):
    @llgrad.differentiate
    def scaled(w, X, y):
        s = 0.0
        for i in range(X.shape[1]):  # a staged loop: the source is converted on loading
            s = s + np.sum(np.sin(X[:, i] * w[i])) * k
        return s * SCALE
    return scaled


def test_closure_pickles_by_source_and_is_reused_with_fresh_captures():
    X, y, w = _data(50, 4)
    f = pickle.loads(pickle.dumps(_closure(2.0)))
    _close(f.grad(w, X, y), _closure(2.0).grad(w, X, y))
    assert f.inspect(w, X, y).stats["path"] == "staged"
    g = pickle.loads(pickle.dumps(_closure(5.0)))  # same source: the same function, k refreshed
    assert g is f
    _close(g.grad(w, X, y), _closure(5.0).grad(w, X, y))
    assert g.trace_count == 2  # the changed closure value failed the first trace's guards
    pickle.loads(pickle.dumps(_closure(5.0))).grad(w, X, y)
    assert g.trace_count == 2


def test_options_travel_with_the_function():
    d = llgrad.differentiate(logreg.fn, wrt=(0, 1), checkpoint="sqrt")
    e = pickle.loads(pickle.dumps(d))
    assert (e.wrt, e.checkpoint, e.fn) == ((0, 1), "sqrt", logreg.fn)
    assert pickle.loads(pickle.dumps(d)) is e  # one per process and options


def test_source_travels_to_a_process_without_the_file(tmp_path):
    src = textwrap.dedent("""
        import numpy as np, llgrad
        OFFSET = 0.5
        def make():
            @llgrad.differentiate
            def f(x):
                t = 0.0
                for i in range(x.shape[0]):
                    if x[i] > OFFSET:
                        t = t + np.exp(x[i])
                    else:
                        t = t - x[i] ** 2
                return t
            return f
        """)
    mod = tmp_path / "gone_module.py"
    mod.write_text(src)
    sys.path.insert(0, str(tmp_path))
    try:
        import gone_module
        blob = pickle.dumps(gone_module.make())
        x = np.linspace(0.0, 1.0, 7)
        want = gone_module.make().grad(x)
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("gone_module", None)
    mod.unlink()
    code = ("import pickle, sys, numpy as np; f = pickle.loads(sys.stdin.buffer.read()); "
            "x = np.linspace(0.0, 1.0, 7); print(repr(f.grad(x).tolist())); "
            "print(f.inspect(x).stats['path'])")
    r = subprocess.run([sys.executable, "-c", code], input=blob, capture_output=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr.decode()[-2000:]
    got, path = r.stdout.decode().splitlines()[-2:]
    _close(np.array(eval(got)), want)
    assert path == "staged"  # converted from the shipped source, not unrolled


def test_function_without_source_refuses_to_load():
    ns = {"np": np, "llgrad": llgrad}
    exec("def nosrc(x):\n    return np.sum(x * x)\n", ns)  # noqa: S102
    blob = pickle.dumps(llgrad.differentiate(ns["nosrc"]))
    with pytest.raises(UnsupportedError, match="not importable here and its source"):
        pickle.loads(blob)


# -- a cluster --------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def client():
    from distributed import Client, LocalCluster
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                      dashboard_address=None) as cluster, Client(cluster) as c:
        yield c


def test_gradient_over_dask_array_blocks_equals_one_process(client):
    X, y, w = _data()
    Xd, yd = da.from_array(X, chunks=(700, -1)), da.from_array(y, chunks=700)  # unequal blocks
    value, g = llgrad.distributed.value_and_grad(logreg, w, (Xd, yd), client=client)
    v1, g1 = logreg.value_and_grad(w, X, y)
    _close(value, v1)
    _close(g, g1)


def test_sum_over_futures_with_pytree_parameters(client):
    X, y, _ = _data(1000, 5)
    rng = np.random.default_rng(1)
    params = (rng.normal(size=(5, 3)) * 0.3, rng.normal(size=3) * 0.1)
    parts = llgrad.distributed.shards(da.from_array(X, chunks=(300, -1)),
                                      da.from_array(y, chunks=300), client=client)
    assert len(parts) == 4
    value, (gW, gb) = llgrad.distributed.value_and_grad(two_layer, params, parts,
                                                        client=client, reduce="sum",
                                                        split_every=2)
    v1, (gW1, gb1) = two_layer.value_and_grad(params, X, y)
    _close(value, v1)
    _close(gW, gW1)
    _close(gb, gb1)


def test_gradient_is_right_after_a_worker_dies(client):
    def fresh(w, X, y):  # a new function: the workers compile it during the job
        z = X @ w
        t = np.mean(np.logaddexp(0.0, z) - y * z)
        for k in range(3):
            t = t + 1e-3 * np.sum(np.cos(w * (k + 1)))
        return t

    X, y, w = _data(4000, 6, seed=2)
    Xd, yd = da.from_array(X, chunks=(250, -1)), da.from_array(y, chunks=250)
    future = llgrad.distributed.submit(fresh, w, (Xd, yd), client=client)
    pids = client.run(os.getpid)
    victim = None
    deadline = time.time() + 30
    while victim is None and time.time() < deadline and not future.done():
        busy = [a for a, keys in client.processing().items() if keys]
        victim = busy[0] if busy else None
        time.sleep(0.005)
    assert victim is not None, "no worker was seen running the job"
    os.kill(pids[victim], signal.SIGKILL)
    assert not future.done()  # the job runs on after the death
    value, g = future.result(timeout=60)
    v1, g1 = llgrad.differentiate(fresh).value_and_grad(w, X, y)
    _close(value, v1)
    _close(g, g1)
    client.wait_for_workers(2, timeout=30)
    assert pids[victim] not in client.run(os.getpid).values()  # it died (the nanny restarted it)


def test_data_errors(client):
    X, y, w = _data(100, 4)
    with pytest.raises(UnsupportedError, match="chunked along more than its first axis"):
        llgrad.distributed.grad(logreg, w, (da.from_array(X, chunks=(50, 2)),
                                            da.from_array(y, chunks=50)), client=client)
    with pytest.raises(UnsupportedError, match="different row chunks"):
        llgrad.distributed.grad(logreg, w, (da.from_array(X, chunks=(50, -1)),
                                            da.from_array(y, chunks=25)), client=client)
    with pytest.raises(TypeError, match="not a dask array"):
        llgrad.distributed.grad(logreg, w, (X, y), client=client)
    with pytest.raises(ValueError, match="reduce must be 'mean' or 'sum'"):
        llgrad.distributed.grad(logreg, w, (da.from_array(X, chunks=(50, -1)),
                                            da.from_array(y, chunks=50)),
                                client=client, reduce="max")
