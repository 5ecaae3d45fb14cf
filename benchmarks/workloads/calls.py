"""Calls of compiled functions that return arrays: ``scale_1e4``, ``scale_1e6``,
``scale_f32_1e6``, ``two_results`` (the call path: llgrad/api.py, Note [Per-call fast path]).

``scale_*``
    ``x * 2.0`` on a vector of 1e4 or 1e6 float64 (or float32) values, forward only: the kernel
    is one vector loop, so what differs from numpy is the call (argument checks, result
    allocation, the native call) and what happens to the result's memory afterwards.
``two_results``
    ``(K * 2.0, K + 1.0)`` for K of 200x200 float64: two arrays returned in a tuple (results
    that stayed alive in reference cycles until the garbage collector ran made every call
    fault in fresh pages: ~25x numpy; runtime/pytree.py, Note [No reference cycles per call]).

The implementations: llgrad's compiled forward and the same function run by numpy; Numba's
njit of it where installed. The recurrence workload (loops.py) covers loop tapes, which are
kept from call to call (codegen/compiled.py, Note [Workspaces]).
"""
from __future__ import annotations

import numpy as np

from ..harness import Goal, Workload
from ._common import llgrad_forward, numba_fwd, numpy_fwd


def scale(x):
    """Plain numpy (reference; compiled by llgrad)."""
    return x * 2.0


def two_results(K):
    """Plain numpy (reference; compiled by llgrad)."""
    return K * 2.0, K + 1.0


def _vector(n, dtype):
    return lambda: {"x": np.random.default_rng(6).standard_normal(n).astype(dtype)}


def _workload(name, description, fn, make_inputs, limit):
    return Workload(
        name=name, description=description, issue="call overhead",
        make_inputs=make_inputs, forward=fn, wrt=(),
        impls=[llgrad_forward(fn), numpy_fwd(fn, note="numpy's own call"),
               numba_fwd(fn, note="njit of the same source")],
        goals=[Goal.at_most("llgrad", "numpy-fwd", limit,
                            f"llgrad call <= {limit:g}x numpy's")],
        fallback_ref="numpy-fwd", value_rtol=0.0,
    )


WORKLOADS = [
    _workload("scale_1e4", "x * 2.0, x of 1e4 float64, forward (an array result)", scale,
              _vector(10 ** 4, np.float64), 1.2),
    _workload("scale_1e6", "x * 2.0, x of 1e6 float64, forward (an array result)", scale,
              _vector(10 ** 6, np.float64), 1.2),
    _workload("scale_f32_1e6", "x * 2.0, x of 1e6 float32, forward (an array result)", scale,
              _vector(10 ** 6, np.float32), 1.2),
    _workload("two_results", "(K * 2.0, K + 1.0), K of 200x200 float64, forward (two array "
              "results)", two_results,
              lambda: {"K": np.random.default_rng(7).standard_normal((200, 200))}, 1.2),
]
