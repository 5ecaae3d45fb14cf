"""Autograd's mutable state: thread-local grad mode and anomaly mode, and the active profiler.

Kept in one tiny module so the hot paths (eager op, engine) read it with one attribute access.
"""
from __future__ import annotations

import threading


class _ThreadState(threading.local):
    def __init__(self):
        self.grad_enabled = True
        self.inference = False
        self.anomaly = False
        self.anomaly_check_nan = True


STATE = _ThreadState()
PROFILER: list = [None]  # the active profiler, or None (zero overhead when off)
