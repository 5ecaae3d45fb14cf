"""Tensor factories (tensor, zeros, ones, full, arange, eye, ...); the random ones (rand, randn,
manual_seed, ...) live in runtime/rng.py."""
from __future__ import annotations

import numpy as np

from llgrad.runtime.aval import DEFAULT_FLOAT, to_np
from llgrad.runtime.rng import (  # noqa: F401  (the random functions' old home)
    manual_seed, numpy_rng, rand, rand_like, randint, randn, randn_like,
)
from llgrad.runtime.tensor import Tensor, _from_data


def _rng() -> np.random.Generator:
    """The default generator's numpy generator (llgrad.manual_seed seeds it)."""
    return numpy_rng()


def _size(size):
    if len(size) == 1 and isinstance(size[0], (tuple, list)):
        return tuple(int(s) for s in size[0])
    return tuple(int(s) for s in size)


def _make(arr, requires_grad):
    return Tensor._wrap(arr).requires_grad_(requires_grad) if requires_grad else Tensor._wrap(arr)


def tensor(data, dtype=None, requires_grad: bool = False, device=None) -> Tensor:
    """A new tensor copying `data` (lists of floats become float32, as in PyTorch)."""
    arr = _from_data(data, dtype)
    arr = np.array(arr, copy=True)
    return _make(arr, requires_grad)


def as_tensor(data, dtype=None) -> Tensor:
    if isinstance(data, Tensor) and dtype is None:
        return data
    return Tensor._wrap(_from_data(data, dtype))


def from_numpy(arr: np.ndarray) -> Tensor:
    """A tensor sharing memory with `arr`."""
    return Tensor._wrap(arr)


def _filled(fill, size, dtype, requires_grad):
    dt = to_np(dtype) or DEFAULT_FLOAT
    return _make(np.full(_size(size), fill, dt), requires_grad)


def zeros(*size, dtype=None, requires_grad=False, device=None) -> Tensor:
    return _filled(0, size, dtype, requires_grad)


def ones(*size, dtype=None, requires_grad=False, device=None) -> Tensor:
    return _filled(1, size, dtype, requires_grad)


def empty(*size, dtype=None, requires_grad=False, device=None) -> Tensor:
    return _filled(0, size, dtype, requires_grad)


def full(size, fill_value, dtype=None, requires_grad=False, device=None) -> Tensor:
    if dtype is None:
        dtype = (np.bool_ if isinstance(fill_value, bool) else np.int64
                 if isinstance(fill_value, int) else DEFAULT_FLOAT)
    return _filled(fill_value, (size,), dtype, requires_grad)


def zeros_like(t, dtype=None, requires_grad=False) -> Tensor:
    return _make(np.zeros(t.shape, to_np(dtype) or t._np_dtype), requires_grad)


def ones_like(t, dtype=None, requires_grad=False) -> Tensor:
    return _make(np.ones(t.shape, to_np(dtype) or t._np_dtype), requires_grad)


def empty_like(t, dtype=None, requires_grad=False) -> Tensor:
    return zeros_like(t, dtype, requires_grad)


def full_like(t, fill_value, dtype=None, requires_grad=False) -> Tensor:
    return _make(np.full(t.shape, fill_value, to_np(dtype) or t._np_dtype), requires_grad)


def arange(start, end=None, step=1, dtype=None, requires_grad=False) -> Tensor:
    if end is None:
        start, end = 0, start
    ints = all(isinstance(v, int) for v in (start, end, step))
    dt = to_np(dtype) or (np.int64 if ints else DEFAULT_FLOAT)
    return _make(np.arange(start, end, step).astype(dt), requires_grad)


def linspace(start, end, steps, dtype=None, requires_grad=False) -> Tensor:
    return _make(np.linspace(start, end, steps).astype(to_np(dtype) or DEFAULT_FLOAT),
                 requires_grad)


def eye(n, m=None, dtype=None, requires_grad=False) -> Tensor:
    return _make(np.eye(n, m, dtype=to_np(dtype) or DEFAULT_FLOAT), requires_grad)


