"""Run one corpus program as plain Python and compiled: compare values, check the gradient
against central differences, and time the first compiled call."""
from __future__ import annotations

import dataclasses
import time
import warnings

import numpy as np

import llgrad
from tests.corpus.registry import Program


def _leaves(x):
    """Float leaves of a pytree argument (tuples, lists, dicts, namedtuples, dataclasses)."""
    if isinstance(x, dict):
        return [l for k in sorted(x) for l in _leaves(x[k])]
    if isinstance(x, (tuple, list)):
        return [l for v in x for l in _leaves(v)]
    if dataclasses.is_dataclass(x):
        return [l for f in dataclasses.fields(x) for l in _leaves(getattr(x, f.name))]
    return [x]


def _rebuild(x, leaves):
    """`x` with its leaves (in _leaves' order) taken from the iterator `leaves`."""
    if isinstance(x, dict):
        new = {k: _rebuild(x[k], leaves) for k in sorted(x)}
        return {k: new[k] for k in x}
    if isinstance(x, (tuple, list)):
        items = [_rebuild(v, leaves) for v in x]
        return type(x)(*items) if hasattr(x, "_fields") else type(x)(items)
    if dataclasses.is_dataclass(x):
        return dataclasses.replace(x, **{f.name: _rebuild(getattr(x, f.name), leaves)
                                         for f in dataclasses.fields(x)})
    return next(leaves)


def _finite_differences(fn, args, wrt, eps):
    """d fn / d (every float leaf of args[i]) for i in wrt, by central differences; array
    leaves are perturbed in place, Python floats (alone or in a pytree) by rebuilding."""
    grads = []
    for i in wrt:
        leaves = _leaves(args[i])
        per_leaf = []
        for j, leaf in enumerate(leaves):
            if isinstance(leaf, float):
                def at(v):
                    new = _rebuild(args[i], iter(leaves[:j] + [v] + leaves[j + 1:]))
                    return fn(*args[:i], new, *args[i + 1:])
                per_leaf.append((at(leaf + eps) - at(leaf - eps)) / (2 * eps))
                continue
            g = np.zeros_like(leaf, dtype=np.float64)
            flat, gf = leaf.reshape(-1), g.reshape(-1)
            for k in range(flat.size):
                old = flat[k]
                flat[k] = old + eps
                hi = fn(*args)
                flat[k] = old - eps
                lo = fn(*args)
                flat[k] = old
                gf[k] = (hi - lo) / (2 * eps)
            per_leaf.append(g)
        grads.append(per_leaf)
    return grads


def run(p: Program, rng_seed: int = 0) -> dict:
    """Check `p`; returns timings. Raises AssertionError on a mismatch."""
    args = p.make_args(np.random.default_rng(rng_seed))
    wrt = (p.wrt,) if isinstance(p.wrt, int) else tuple(p.wrt)
    expected = p.fn(*args)
    f = llgrad.differentiate(p.fn, wrt=p.wrt)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        t0 = time.perf_counter()
        value, grads = f.value_and_grad(*args)
        first = time.perf_counter() - t0
    np.testing.assert_allclose(value, expected, rtol=p.value_tol[0], atol=p.value_tol[1],
                               err_msg="value")
    grads = (grads,) if isinstance(p.wrt, int) else grads
    fd = _finite_differences(p.fn, list(args), wrt, p.fd_eps)
    for i, g, n in zip(wrt, grads, fd):
        got = _leaves(g)
        assert len(got) == len(n), f"gradient of argument {i} has {len(got)} leaves"
        for a, b in zip(got, n):
            np.testing.assert_allclose(a, b, rtol=p.fd_tol[0], atol=p.fd_tol[1],
                                       err_msg=f"gradient of argument {i}")
    t0 = time.perf_counter()
    f.value_and_grad(*args)
    again = time.perf_counter() - t0
    path = f.inspect(*args).path
    return {"first": first, "again": again, "path": path,
            "warnings": [str(w.message).splitlines()[0] for w in caught],
            "slow paths": [str(w.message) for w in caught
                           if issubclass(w.category, llgrad.PerformanceWarning)]}
