"""What code generation pays once per process (imports, the JIT's set-up, shared libraries,
the support module: calling trampoline and SIGINT hook), recorded where it is paid so the compile that paid it can say so.

`paid(name)` times a one-time step; `costs()` returns the totals so far, and a compile
reports the difference across it (llgrad/api.py puts it in `inspect().stats`). This module
imports nothing heavy: it is used before llvmlite is loaded.
"""
from __future__ import annotations

import time
from contextlib import contextmanager

_COSTS: dict[str, float] = {}


@contextmanager
def paid(name: str):
    """Add the time spent in the `with` block to the one-time cost `name`."""
    t0 = time.perf_counter()
    try:
        yield
    finally:
        _COSTS[name] = _COSTS.get(name, 0.0) + time.perf_counter() - t0


def costs() -> dict[str, float]:
    """Seconds paid so far for each one-time step of this process."""
    return dict(_COSTS)
