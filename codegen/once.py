"""What code generation pays once per process (imports, the JIT's set-up, shared libraries,
the support module: calling trampoline and SIGINT hook), recorded where it is paid so the
compile that paid it can say so.

`paid(name)` times a one-time step; `claim()` returns what was paid since the last claim, and
a compile claims at its end (llgrad/compiled.py puts it in `inspect().stats`): a step paid
beside a trace, on another thread (the JIT's set-up: Note [JIT set-up in the background] in
jit.py), is reported by the compile that comes after it. This module imports nothing heavy:
it is used before llvmlite is loaded.
"""
from __future__ import annotations

import threading
import time
from contextlib import contextmanager

_COSTS: dict[str, float] = {}
_CLAIMED: dict[str, float] = {}
_lock = threading.Lock()


@contextmanager
def paid(name: str):
    """Add the time spent in the `with` block to the one-time cost `name`."""
    t0 = time.perf_counter()
    try:
        yield
    finally:
        with _lock:
            _COSTS[name] = _COSTS.get(name, 0.0) + time.perf_counter() - t0


def claim() -> dict[str, float]:
    """Seconds paid for each one-time step since the last claim (by any thread)."""
    with _lock:
        new = {k: v - _CLAIMED.get(k, 0.0) for k, v in _COSTS.items()
               if v > _CLAIMED.get(k, 0.0)}
        _CLAIMED.update(_COSTS)
    return new
