"""Helpers for the end-to-end compiler tests: the four ways to run a use case.

- `reference`: the plain Python value on numpy arrays;
- `eager`: the same function on llgrad Tensors (numpy calls dispatch through
  `__array_function__`), then `.backward()`;
- `compiled(fn, wrt)`: one `llgrad.differentiate` object per (function, wrt), shared by the
  tests of a session so each signature compiles once;
- `finite_differences`: central differences of the plain function in float64;
- the `mode` fixture: each test twice, through the reference interpreter and natively;
- the `cache_dir` fixture: an empty on-disk compile cache (test_disk_cache.py).
"""
from __future__ import annotations

import numpy as np
import pytest

import llgrad
import llgrad as lg
from tests.fd import numerical_vjp

_COMPILED: dict = {}


def compiled(fn, wrt) -> "llgrad.Differentiable":
    key = (fn, wrt)
    d = _COMPILED.get(key)
    if d is None:
        d = _COMPILED[key] = llgrad.differentiate(fn, wrt=wrt)
    return d


def eager(fn, args, wrt) -> tuple[np.ndarray, list]:
    """Value and gradients (w.r.t. the args in `wrt`) from the eager runtime."""
    tensors = []
    for i, a in enumerate(args):
        if i in wrt:
            tensors.append(lg.tensor(np.asarray(a, dtype=getattr(a, "dtype", np.float64)),
                                     requires_grad=True))
        else:
            tensors.append(a)
    out = fn(*tensors)
    assert isinstance(out, lg.Tensor), f"eager result is a {type(out).__name__}"
    out.backward()
    grads = []
    for i in wrt:
        g = tensors[i].grad
        grads.append(np.zeros(np.shape(args[i])) if g is None else g.numpy())
    return out.detach().numpy(), grads


def finite_differences(fn, args, wrt, eps: float = 1e-6) -> list[np.ndarray]:
    return numerical_vjp(fn, list(args), np.ones(()), list(wrt), eps=eps)


@pytest.fixture
def no_jit(monkeypatch):
    """Run compiled functions through the reference interpreter (LLGRAD_DISABLE_JIT=1)."""
    monkeypatch.setenv("LLGRAD_DISABLE_JIT", "1")


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    """A fresh LLGRAD_CACHE_DIR (not created yet), with native code on."""
    from llgrad.codegen import abi
    # The calling trampoline is set up once per process (here, before this cache exists), so
    # in-process entry counts are compiled functions only.
    abi.fast_path_available()
    d = tmp_path / "cache"
    monkeypatch.setenv("LLGRAD_CACHE_DIR", str(d))
    monkeypatch.delenv("LLGRAD_DISABLE_JIT", raising=False)
    return d


@pytest.fixture(params=["interp", "native"])
def mode(request, monkeypatch):
    """Run the test through the reference interpreter (LLGRAD_DISABLE_JIT=1) and natively."""
    if request.param == "interp":
        monkeypatch.setenv("LLGRAD_DISABLE_JIT", "1")
    else:
        monkeypatch.delenv("LLGRAD_DISABLE_JIT", raising=False)
    return request.param
