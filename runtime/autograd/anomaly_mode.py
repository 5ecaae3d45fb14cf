"""Anomaly detection (thread local): nodes record the forward traceback that created them;
a failing backward prints it, and NaN outputs of a backward node raise.

Overhead: a traceback capture per recorded op while on (see benchmarks/anomaly_overhead.py);
nothing at all while off. The printed forward traceback omits llgrad's own frames.
"""
from __future__ import annotations

import sys

from llgrad.runtime.autograd.state import STATE
from llgrad.runtime.errors import is_internal_file


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


def forward_trace(node) -> str:
    """The recorded forward traceback of `node`, without llgrad's own frames (so it ends at
    the user's line that created the node). Source lines are read only now."""
    import traceback
    frames = list(reversed(node._trace or ()))  # recorded innermost first
    user = [f for f in frames if not is_internal_file(f.filename)] or frames
    return "".join(traceback.format_list(user))


def report_forward_trace(node, err: BaseException) -> None:
    """Print the forward traceback of the failing node (before the error propagates, as
    PyTorch does) and add a short pointer to the creating line to the error itself."""
    text = forward_trace(node)
    print(f"Error detected in {node.name()}. Traceback of forward call that caused the "
          f"error:\n{text}", file=sys.stderr)
    if hasattr(err, "add_note"):
        last = text.rstrip("\n").split("\n")[-2:] if text else []
        where = "\n".join(line.rstrip() for line in last)
        err.add_note(f"(anomaly mode) {node.name()} was created by the forward call:\n{where}")
