"""The globals and closure values a traced function reads, kept as guards of its compiled code.

Note [Captured values are guarded]
Python reads a global or closure variable at every call; a trace reads it once, and what it
read becomes a constant of the IR. So while a function is traced, every global name its code
(and the code of the helpers it calls) mentions and every closure variable it uses is recorded
with its current value, when that value is data: a number, a numpy array or an llgrad tensor.
A call of the compiled code first checks the guards: the same object, or an equal number, is
still bound there, and an array's contents equal the copy taken at trace time; if not, the
function is traced again, as Python would read the new value. Other objects (modules,
functions, classes, attribute chains like `cfg.lr`) are not guarded. Checking an array costs
one comparison of its elements per call: pass large data as an argument instead.
"""
from __future__ import annotations

import threading
import types
from typing import Callable

import numpy as np

from llgrad.runtime.tensor import Tensor

_TLS = threading.local()


class Guard:
    """One captured value: where it is read from, and what it was when traced."""

    __slots__ = ("where", "name", "obj", "copy")

    def __init__(self, where, name: str, obj):
        self.where, self.name, self.obj = where, name, obj
        data = getattr(obj, "_data", obj)  # an llgrad Tensor: its array
        self.copy = np.array(data, copy=True) if isinstance(data, np.ndarray) else None

    def current(self):
        if isinstance(self.where, dict):
            return self.where.get(self.name, _UNBOUND)
        try:
            return self.where.cell_contents
        except ValueError:
            return _UNBOUND

    def holds(self) -> bool:
        cur = self.current()
        if self.copy is None:  # a number: the same object or an equal one of the same type
            return cur is self.obj or (type(cur) is type(self.obj) and cur == self.obj)
        data = getattr(cur, "_data", cur)
        if type(cur) is not type(self.obj) or not isinstance(data, np.ndarray) or \
                data.shape != self.copy.shape or data.dtype != self.copy.dtype:
            return False
        return bool(np.array_equal(data, self.copy, equal_nan=data.dtype.kind in "fc"))


_UNBOUND = object()


def _is_data(value) -> bool:
    return isinstance(value, (bool, int, float, complex, np.generic, np.ndarray, Tensor))


def _names(code: types.CodeType, out: set) -> set:
    out.update(code.co_names)
    for c in code.co_consts:
        if isinstance(c, types.CodeType):
            _names(c, out)
    return out


class Recording:
    """The guards of one trace (See Note [Captured values are guarded])."""

    def __init__(self):
        self.guards: list[Guard] = []
        self._seen: set = set()

    def add_function(self, fn: Callable) -> None:
        """Guard the data globals `fn`'s code mentions and its data closure variables."""
        fn = getattr(fn, "__wrapped__", fn)
        code = getattr(fn, "__code__", None)
        if code is None or id(code) in self._seen:
            return
        self._seen.add(id(code))
        glob = getattr(fn, "__globals__", {})
        for name in sorted(_names(code, set())):
            value = glob.get(name, _UNBOUND)
            if value is not _UNBOUND and _is_data(value):
                self.guards.append(Guard(glob, name, value))
        for name, cell in zip(code.co_freevars, fn.__closure__ or ()):
            try:
                value = cell.cell_contents
            except ValueError:
                continue
            if _is_data(value):
                self.guards.append(Guard(cell, name, value))


def recording() -> Recording:
    """Start recording the guards of a trace (the innermost recording gets new functions)."""
    rec = Recording()
    stack = getattr(_TLS, "stack", None)
    if stack is None:
        stack = _TLS.stack = []
    stack.append(rec)
    return rec


def stop(rec: Recording) -> None:
    """End `rec`; an enclosing recording (a trace that inlines this one) inherits its guards."""
    stack = _TLS.stack
    stack.remove(rec)
    if stack:
        stack[-1].guards.extend(rec.guards)


def note_function(fn: Callable) -> None:
    """Record the guards of `fn`, called while a trace is recording."""
    stack = getattr(_TLS, "stack", None)
    if stack:
        stack[-1].add_function(fn)


def hold(guards) -> bool:
    """True if every guard still holds (the compiled code is still what Python would run)."""
    for g in guards:
        if not g.holds():
            return False
    return True


def failed(guards) -> Guard | None:
    """The first guard that no longer holds (the reason to trace again), or None."""
    return next((g for g in guards if not g.holds()), None)


__all__ = ["Guard", "Recording", "recording", "stop", "note_function", "hold", "failed"]
