"""What compiling costs, told to the user: performance warnings and the compile log.

Warnings (subclasses of `llgrad.PerformanceWarning`, runtime/errors.py), each issued once per
function at the user's line, each saying where, why, what it costs and the rewrite that
avoids it: a loop unrolled at trace time (UnrollWarning), the dynamic path
(DynamicPathWarning), a function traced again on most of its calls (RetraceWarning).

The compile log: every trace and every compile goes to the "llgrad" logger with its reason
(first call, which argument changed from what to what, which global changed, a new dynamic
graph) and its phase times: at WARNING level, so it shows without configuring logging, when
`LLGRAD_LOG=compiles` or `llgrad.config.update("log_compiles", True)`; at DEBUG otherwise
(as JAX's `jax_log_compiles` and PyTorch's `TORCH_LOGS=recompiles` do).
"""
from __future__ import annotations

import collections
import logging
import threading
import warnings

import numpy as np

from llgrad.runtime import config
from llgrad.runtime.aval import aval_str
from llgrad.runtime.errors import (DynamicPathWarning, RetraceWarning, SourceLoc,
                                   UnrollWarning)
from llgrad.tracer import signature as sig
from llgrad.tracer.captures import _UNBOUND, Implicit

LOG = logging.getLogger("llgrad")

# What a call of compiled code costs in Python (Note [Per-call fast path] in api.py measures
# ~6 us plus the kernel): what the dynamic path's per-call trace is compared with.
COMPILED_CALL_US = 10
# RetraceWarning: this many traces within the last RETRACE_WINDOW calls.
RETRACES, RETRACE_WINDOW = 8, 10


def log(message: str) -> None:
    """One compile-log record (see the module docstring for its level)."""
    level = logging.WARNING if config.log_compiles() else logging.DEBUG
    if LOG.isEnabledFor(level):
        LOG.log(level, "llgrad: %s", message)


def ms(seconds: float) -> str:
    return f"{seconds * 1e3:.1f} ms" if seconds < 10 else f"{seconds:.1f} s"


class Monitor:
    """One differentiated function's history: its calls, its traces (and why each ran), and
    the warnings already given. Thread safe."""

    def __init__(self, fn, def_loc: SourceLoc | None):
        self.name = getattr(fn, "__name__", "the function")
        self.def_loc = def_loc
        self.calls = 0  # counted by Differentiable, fast path included
        self._recent = collections.deque(maxlen=RETRACES)  # call numbers of staged traces
        self._last: tuple | None = None  # (argument names, signature) of the last trace
        self._warned: set = set()
        self._lock = threading.Lock()

    def first(self, key) -> bool:
        """True the first time `key` is seen: a warning is given once per function."""
        with self._lock:
            if key in self._warned:
                return False
            self._warned.add(key)
            return True

    # -- reasons ------------------------------------------------------------------------------
    def reason(self, names: list, struct, failed_guard=None) -> tuple[str, str | None]:
        """Why this call traces, and how to avoid it: (reason, fix or None)."""
        if failed_guard is not None:
            kind = "global" if isinstance(failed_guard.where, dict) else "closure variable"
            if isinstance(failed_guard, Implicit):  # an input of one shape and dtype
                g, now = failed_guard, failed_guard.current()
                data = getattr(now, "_data", now)
                to = aval_str(data.shape, data.dtype) if isinstance(data, np.ndarray) else \
                    "unbound" if now is _UNBOUND else f"a {type(now).__name__}"
                return (f"{kind} {g.name!r} changed from {aval_str(g.shape, g.dtype)} to "
                        f"{to} (the compiled code reads it as an input of one shape and "
                        f"dtype)", f"pass {g.name} as an argument instead, padded to one "
                        f"shape (or a few bucket sizes)")
            return (f"{kind} {failed_guard.name!r} changed (a value the compiled code holds "
                    f"as a constant)", f"pass {failed_guard.name} as an argument instead")
        if self._last is None:
            return "first call", None
        old_names, old = self._last
        if old_names != names or len(old.children) != len(struct.children):
            return (f"the arguments changed from {sig.describe(old)} to "
                    f"{sig.describe(struct)}", None)
        for name, a, b in zip(names, old.children, struct.children):
            if a != b:
                name = name.lstrip("*")
                return (f"argument {name!r} changed from {sig.describe(a)} to "
                        f"{sig.describe(b)}", _signature_fix(name, a, b))
        return "new call signature", None

    def traced(self, names: list, struct, reason: str, fix: str | None) -> None:
        """Record a staged trace at the current call; warn once if most calls trace."""
        with self._lock:
            self._last = (names, struct)
            self._recent.append(self.calls)
            often = (len(self._recent) == RETRACES
                     and self.calls - self._recent[0] < RETRACE_WINDOW)
        log(f"tracing {self.name} ({reason})")
        if often and reason != "first call" and self.first("retrace"):
            loc = self.def_loc
            text = (f"llgrad: {self.name} was traced {RETRACES} times in its last "
                    f"{RETRACE_WINDOW} calls; the last time because {reason}. Every trace "
                    f"compiles again" + (f". To avoid it: {fix}" if fix else ""))
            _warn(text, RetraceWarning, loc)


def _signature_fix(name: str, a, b) -> str | None:
    if isinstance(a, sig.Static) and isinstance(b, sig.Static):
        return (f"{name} is a static argument (its value is part of the signature, like a "
                f"jax static_argnum): pass a value that changes as an array, "
                f"np.asarray({name}), unless it sets a shape or a loop count")
    if isinstance(a, sig.Leaf) and isinstance(b, sig.Leaf):
        if a.shape != b.shape:
            return (f"each shape of {name} compiles separately: pad it to one shape (or a few "
                    f"bucket sizes)")
        return f"pass {name} with one dtype every time (e.g. .astype(np.float64))"
    return f"pass {name} with the same type every time"


# -- the warnings ---------------------------------------------------------------------------------
def _warn(text: str, category, loc: SourceLoc | None) -> None:
    if loc is not None:
        warnings.warn_explicit(text, category, loc.file, loc.line)
    else:
        warnings.warn(text, category, stacklevel=4)


_UNROLL_FIXES = (
    ("indexes a Python list with the loop index",
     "index arrays, not Python lists, with the loop index (stack the list once, "
     "W = np.stack(Ws), and read W[k] in the loop)"),
    ("uses the loop index as a Python value",
     "give the loop's arrays one shape in every iteration (keep them full length and mask "
     "the part in use: np.where(np.arange(n) <= i, ...)); short loops may stay unrolled"),
    ("stores traced values in a Python container",
     "preallocate the result and write it by index (out = np.zeros((n, ...)) before the "
     "loop, out[t] = h inside) instead of appending to a list"),
    ("across iterations",
     "give the loop's variables one shape and dtype in every iteration (preallocate and "
     "fill instead of growing with np.concatenate; cast with .astype before the loop)"),
)


def warn_unrolled(unrolled: list, seconds: float | None = None) -> None:
    """One UnrollWarning per loop in `unrolled` ((loc, reason, copies) from the trace), with
    the cost: `seconds` is what the signature took to trace and compile, when known."""
    for loc, reason, copies in unrolled:
        cost = f"{copies} copies"
        if seconds is not None and copies:
            cost += f", ~{ms(seconds / copies)} each ({ms(seconds)} in all for this signature)"
        fix = next((f for key, f in _UNROLL_FIXES if key in reason), None)
        _warn(f"llgrad: the loop at {loc} is unrolled at trace time because {reason}; it "
              f"compiles one copy of the body per iteration: {cost}"
              + (f". To compile it as one loop: {fix}" if fix else ""), UnrollWarning, loc)


def warn_dynamic(name: str, reason: Exception, seconds: float,
                 def_loc: SourceLoc | None) -> None:
    """The DynamicPathWarning: `reason` is the ConcretizationError that sent `name` there,
    `seconds` what this call took to trace."""
    loc = getattr(reason, "loc", None) or def_loc
    what = getattr(reason, "what", str(reason)).splitlines()[0]
    fix = getattr(reason, "fix", None) or ("keep traced values traced: use np.where for "
                                           "choices, and Python ints for shapes and loop "
                                           "counts")
    _warn(f"llgrad: {name} takes the dynamic path"
          + (f" at {loc}" if loc is not None else "") + f" because {what.rstrip('.')}. It is "
          f"traced again on every call: ~{ms(seconds)} per call instead of "
          f"~{COMPILED_CALL_US} us for compiled code. To stay compiled: {fix}",
          DynamicPathWarning, loc)


def log_compiled(name: str, entry: str, stats, once: dict, first: bool) -> None:
    """The compile-log record of one native entry: every phase's time (tracing, IR passes
    and AD with the `first` entry of a signature), the one-time costs."""
    how = "loaded from the disk cache" if stats.get("disk cache") == "hit" else "compiled"
    parts = [f"{label} {ms(stats[key])}" for key, label in (
        *((("trace time", "trace"), ("optimize time", "IR passes"),
           ("autodiff time", "autodiff")) if first else ()),
        (f"lowering time ({entry})", "lowering"), (f"llvm parse time ({entry})", "LLVM parse"),
        (f"llvm optimize time ({entry})", "LLVM optimisation"),
        (f"machine code time ({entry})", "machine code")) if key in stats]
    level = stats.get(f"opt level ({entry})")
    log(f"{how} {name} ({entry}, {stats['signature']}) in "
        f"{ms(stats[f'codegen time ({entry})'])}: " + ", ".join(parts)
        + (f" (O{level})" if level is not None else "")
        + (f"; once per process: {', '.join(f'{k} {ms(v)}' for k, v in once.items())}"
           if once else ""))
