"""Anomaly detection (thread local): nodes record the forward traceback that created them;
a failing backward prints it, and NaN outputs of a backward node raise.

Overhead: a traceback capture per recorded op while on; nothing at all while off.
"""
from __future__ import annotations

from llgrad.runtime.autograd.state import STATE


def is_anomaly_enabled() -> bool:
    return STATE.anomaly


def is_anomaly_check_nan_enabled() -> bool:
    return STATE.anomaly and STATE.anomaly_check_nan


class detect_anomaly:
    """Context manager (and decorator) that enables anomaly detection for autograd.

    Example:
        >>> import llgrad as lg
        >>> with lg.autograd.detect_anomaly():
        ...     y = (lg.tensor([1.], requires_grad=True) * 2).sum()
        ...     y.backward()
    """

    def __init__(self, check_nan: bool = True):
        self.check_nan = check_nan

    def __enter__(self):
        self._prev = (STATE.anomaly, STATE.anomaly_check_nan)
        STATE.anomaly, STATE.anomaly_check_nan = True, self.check_nan
        return self

    def __exit__(self, *exc):
        STATE.anomaly, STATE.anomaly_check_nan = self._prev
        return False

    def __call__(self, fn):
        import functools

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with detect_anomaly(self.check_nan):
                return fn(*args, **kwargs)
        return wrapper


class set_detect_anomaly:
    """Turn anomaly detection on or off; usable as a function or a context manager."""

    def __init__(self, mode: bool, check_nan: bool = True):
        self._prev = (STATE.anomaly, STATE.anomaly_check_nan)
        STATE.anomaly, STATE.anomaly_check_nan = bool(mode), check_nan

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        STATE.anomaly, STATE.anomaly_check_nan = self._prev
        return False
