"""The globals and closure values a traced function reads, kept as guards of its compiled code.

Note [Captured values are guarded]
Python reads a global or closure variable at every call; a trace reads it once, and what it
read becomes a constant of the IR. So while a function is traced, every global name its code
(and the code of the helpers it calls) mentions and every closure variable it uses is recorded
with its current value, when that value is data (a number, a numpy array or an llgrad tensor)
or an object whose attributes or items the trace may read (`cfg.lr`): an instance of a Python
class, a SimpleNamespace, a dataclass, a list, dict, set or tuple. A call of the compiled code
first checks the guards: the same object, or an equal number, is still bound there, an
array's contents equal the copy taken at trace time, and an object's contents equal the
snapshot taken when the trace ended (signature.static_key, the key of a static argument, so
`cfg.lr = 0.2` or `cfg.layers[0].w[1] = 3` between calls is seen); if not, the function is
traced again, as Python would read the new values. The snapshot is taken after the trace, so
what the function itself changes in such an object while it runs does not retrace it at
every call (its side effects happen while it is traced). Modules, functions and classes are
not guarded (a module's or class's attribute, `config.LR`, is read once per trace). A guard
costs its comparison at every call: ~0.1 us for a number, one pass over an array's elements,
~0.1 us per attribute of a config object (numbers, strings, lists of them), more for
objects holding arrays (pass large data as an argument).
"""
from __future__ import annotations

import operator
import threading
import types
from typing import Callable

import numpy as np

from llgrad.runtime.tensor import Tensor
from llgrad.tracer.convert.cells import OWNED
from llgrad.tracer.signature import Identity, static_key

_TLS = threading.local()


class Guard:
    """One captured value: where it is read from, and what it was when traced (an array's
    copy, or an object's snapshot key, taken by `snapshot` when the trace ends)."""

    __slots__ = ("where", "name", "obj", "copy", "key", "flat")

    def __init__(self, where, name: str, obj):
        self.where, self.name, self.obj = where, name, obj
        data = getattr(obj, "_data", obj)  # an llgrad Tensor: its array
        self.copy = np.array(data, copy=True) if isinstance(data, np.ndarray) else None
        self.key = self.flat = None

    def current(self):
        if isinstance(self.where, dict):
            return self.where.get(self.name, _UNBOUND)
        try:
            return self.where.cell_contents
        except ValueError:
            return _UNBOUND

    def snapshot(self) -> bool:
        """Key an object's contents; False if it cannot be keyed (then it is not guarded)."""
        try:
            key = static_key(self.obj)
        except Exception:  # noqa: BLE001 - an object llgrad cannot read: as before, unguarded
            return False
        self.key, self.flat = key, _plan(self.obj)
        return not isinstance(key, Identity)

    def holds(self) -> bool:
        cur = self.current()
        if self.key is not None:  # an object: its contents (Note [Captured values are guarded])
            if cur is self.obj and self.flat is not None and _same(cur, self.flat):
                return True
            if type(cur) is not type(self.obj) or static_key(cur) != self.key:
                return False
            self.obj, self.flat = cur, _plan(cur)  # equal contents: check it cheaply next time
            return True
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


_CONTAINERS = (list, dict, set, tuple, types.SimpleNamespace)
_HEAPTYPE = 1 << 9  # Py_TPFLAGS_HEAPTYPE: a class defined in Python


def _is_object(value) -> bool:
    """An object whose contents a trace may read (`cfg.lr`): keyed by its contents."""
    t = type(value)
    return isinstance(value, _CONTAINERS) or (t.__flags__ & _HEAPTYPE and not isinstance(
        value, (type, types.FunctionType, types.MethodType, types.ModuleType)))


# An object made of atoms (numbers, strings, None) and of lists, tuples, dicts and plain
# objects of them (a config) is checked per call by the identity of its keys and values,
# recursively (~0.1 us per attribute), not by its static key (~0.3-0.5 us per attribute): an
# atom cannot change, and the guard keeps the old ones alive, so a rebound attribute is a new
# object. Anything else (arrays, slots, deep nesting) compares static keys.
_ATOMS = frozenset({int, float, str, bool, bytes, complex, type(None)})


def _plan(obj, depth: int = 0):
    """(keys or None, values, ((index, plan) of each non-atom value)), or None."""
    if depth > 3:
        return None
    if type(obj) in (list, tuple):
        keys, values = None, tuple(obj)
    else:
        d = obj if type(obj) is dict else getattr(obj, "__dict__", None)
        if type(d) is not dict or (d is not obj and getattr(type(obj), "__slots__", ())):
            return None
        keys, values = tuple(d), tuple(d.values())
        if not all(type(k) in _ATOMS for k in keys):
            return None
    subs = []
    for i, v in enumerate(values):
        if type(v) not in _ATOMS:
            sub = _plan(v, depth + 1) if type(v) in (list, tuple, dict) or \
                type(v).__flags__ & _HEAPTYPE else None
            if sub is None:
                return None
            subs.append((i, sub))
    return keys, values, tuple(subs)


def _same(obj, plan) -> bool:
    keys, values, subs = plan
    if keys is None:
        if len(obj) != len(values) or not all(map(operator.is_, obj, values)):
            return False
    else:
        d = obj if type(obj) is dict else obj.__dict__
        if len(d) != len(keys) or not all(map(operator.is_, d, keys)) or \
                not all(map(operator.is_, d.values(), values)):
            return False
    return all(_same(values[i], sub) for i, sub in subs)


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
        self.objects: list[Guard] = []  # keyed when the trace ends
        self._seen: set = set()

    def add_function(self, fn: Callable) -> None:
        """Guard the data globals `fn`'s code mentions and its data closure variables."""
        if not isinstance(fn, types.FunctionType):  # (a differentiated function: its fn)
            fn = getattr(fn, "__wrapped__", fn)  # (a function's own code is what runs)
        code = getattr(fn, "__code__", None)
        if code is None or id(code) in self._seen:
            return
        self._seen.add(id(code))
        glob = getattr(fn, "__globals__", {})
        for name in sorted(_names(code, set())):
            value = glob.get(name, _UNBOUND)
            if value is not _UNBOUND:
                self._add(glob, name, value)
        owned = getattr(fn, OWNED, ())  # variables of a traced frame: no constants
        for name, cell in zip(code.co_freevars, fn.__closure__ or ()):
            if name in owned:
                continue
            try:
                value = cell.cell_contents
            except ValueError:
                continue
            self._add(cell, name, value)

    def _add(self, where, name: str, value) -> None:
        if _is_data(value):
            self.guards.append(Guard(where, name, value))
        elif _is_object(value):
            self.objects.append(Guard(where, name, value))


def recording() -> Recording:
    """Start recording the guards of a trace (the innermost recording gets new functions)."""
    rec = Recording()
    stack = getattr(_TLS, "stack", None)
    if stack is None:
        stack = _TLS.stack = []
    stack.append(rec)
    return rec


def stop(rec: Recording) -> None:
    """End `rec`; an enclosing recording (a trace that inlines this one) inherits its guards.
    The outermost one snapshots its objects (Note [Captured values are guarded])."""
    stack = _TLS.stack
    stack.remove(rec)
    if stack:
        stack[-1].guards.extend(rec.guards)
        stack[-1].objects.extend(rec.objects)
    else:
        rec.guards.extend(g for g in rec.objects if g.snapshot())
        rec.objects = []


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
