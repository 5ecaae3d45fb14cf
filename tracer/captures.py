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
objects holding arrays (pass large data as an argument). A captured array that changes
between calls becomes an input of the compiled code instead: Note [Captured arrays that change
become inputs].

Note [Captured arrays that change become inputs]
A minibatch loop `llgrad.grad(lambda w: loss(w, xb, yb))(w)` rebinds `xb` and `yb` at every
step; as constants, they retraced and compiled at every step. So, as PyTorch Dynamo's
"automatic dynamic" does, the first trace keeps captured arrays as constants (constant
folding, Python control flow on them, masks and index arrays all work as before), and when a
guard fails because a captured array changed but kept its type, shape and dtype (rebound or
changed in place), the function is traced again with that capture as an *implicit input*
(`Implicit`): an IR parameter after the arguments' leaves, named after the variable, bound
in its cell or globals dict while the trace runs (`substituted`) so the function and the
helpers it calls read it as they read an argument. Its guard then checks only that the name
is still bound to an array of that type, shape and dtype, and every call passes the array
bound there at call time (`Implicit.value`): ~0.5 us a call for both, where a constant's
guard compares every element (~6 us for 96); no gradient is taken w.r.t. it (it is no `wrt`
leaf). Each Differentiable remembers which captures vary (its `CaptureInputs`), so its later
traces (another signature, a shape change) take them as inputs from the start. If a trace
with implicit inputs fails (a ConcretizationError: the code reads their values as Python
numbers, `int(k[0])`, or as a shape; a write into one, refused as a write into an argument
is, Note [Writes into arguments] in tracer/aliasing.py; any other error), the captures are
tried one at a time, and those that fail stay constants for good: traced again at each
change, with the RetraceWarning's advice to pass it as an argument. (An `if` on an input is
staged, as on an argument.) A capture that changes shape is traced again at each change, as
before, and switching back reuses an earlier trace (Note [Earlier traces of a signature] in
llgrad/api.py). While such a trace runs (milliseconds, once per capture), another thread
reading that variable would see the IR value bound there.
"""
from __future__ import annotations

import operator
import threading
import types
from contextlib import contextmanager
from typing import Callable, Iterator

import numpy as np

from llgrad.runtime.tensor import Tensor
from llgrad.tracer.convert.cells import OWNED
from llgrad.tracer.signature import TRACED_DTYPES, Identity, static_key
from llgrad.transform import ir

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
        return _read(self.where, self.name)

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


def _read(where, name: str):
    """What a global (`where` a globals dict) or a closure variable (a cell) is bound to."""
    if isinstance(where, dict):
        return where.get(name, _UNBOUND)
    try:
        return where.cell_contents
    except ValueError:
        return _UNBOUND


def _array(value):
    """The ndarray of a captured array (an llgrad Tensor: its data), or None (also for an
    ndarray subclass: a memmap, a matrix)."""
    data = getattr(value, "_data", value)
    return data if type(data) is np.ndarray else None


class Implicit(Guard):
    """A captured array taken as an input of the compiled code: its guard checks the type,
    shape and dtype of what is bound there; `value()` is what a call passes (Note [Captured
    arrays that change become inputs])."""

    __slots__ = ("kind", "shape", "dtype")

    def __init__(self, where, name: str, value):
        self.where, self.name, self.obj = where, name, None
        data = _array(value)
        self.kind, self.shape, self.dtype = type(value), data.shape, data.dtype
        self.copy = self.key = self.flat = None

    def holds(self) -> bool:
        cur = self.current()
        data = getattr(cur, "_data", cur)
        return type(cur) is self.kind and type(data) is np.ndarray and \
            data.shape == self.shape and data.dtype == self.dtype

    def value(self) -> np.ndarray:
        cur = self.current()
        return getattr(cur, "_data", cur)


def varying(guards) -> list[Guard]:
    """The guards of captured arrays that no longer hold but whose current value kept its
    type, shape and dtype: what the next trace may take as implicit inputs."""
    out = []
    for g in guards:
        if g.copy is None:  # (not an array)
            continue
        cur = g.current()
        data = _array(cur)
        if type(cur) is type(g.obj) and data is not None and data.shape == g.copy.shape and \
                data.dtype == g.copy.dtype and data.dtype in TRACED_DTYPES and not g.holds():
            out.append(g)
    return out


class CaptureInputs:
    """Which captures of one compiled function are read as inputs (those that changed and
    kept their type, shape and dtype), and which stay constants because a trace reading them
    as inputs failed; each keyed by (id(where), name) -> (where, name) (Note [Captured arrays
    that change become inputs])."""

    def __init__(self):
        self.inputs: dict = {}
        self.constants: dict = {}

    def trace(self, run: Callable, failed_guards, log: Callable[[str], None]):
        """`run(captures)` (a trace reading those captures as inputs) with the captures known
        to vary, after adding those among `failed_guards` (of the trace this one replaces)
        that kept their type, shape and dtype. When it fails, the captures are tried one at
        a time, and those it fails with stay constants. `log` tells the compile log."""
        for g in varying(failed_guards):
            k = (id(g.where), g.name)
            if k not in self.constants and k not in self.inputs:
                self.inputs[k] = (g.where, g.name)
                log(f"{g.name!r} changed and kept its shape and dtype: read as an "
                    f"input of the compiled code")
        captures = list(self.inputs.values())
        if not captures:
            return run(())
        try:
            return run(captures)
        except Exception as e:  # noqa: BLE001 - any failure: those captures stay constants
            reason = e
        tr, kept = None, []
        for cap in captures if len(captures) > 1 else ():  # which of them can be inputs
            try:
                tr, kept = run(kept + [cap]), kept + [cap]
            except Exception as e:  # noqa: BLE001
                reason = e
        for k, cap in list(self.inputs.items()):
            if not any(cap is c for c in kept):  # (cells compare by their contents)
                self.constants[k] = self.inputs.pop(k)
                what = getattr(reason, "what", str(reason)).splitlines()[0]
                where = f" at {reason.loc}" if getattr(reason, "loc", None) else ""
                log(f"{cap[1]!r} stays a constant of the compiled code (read as an "
                    f"input, the trace failed: {what}{where})")
        return tr if tr is not None else run(())


@contextmanager
def substituted(builder, captures) -> Iterator[list[Implicit]]:
    """Bind a new IR parameter of `builder` in place of each capture (where, name) bound to
    an array of a traced dtype, for the block; yields their `Implicit` guards and restores
    the arrays after it (Note [Captured arrays that change become inputs])."""
    implicit, saved = [], []
    try:
        for where, name in captures:
            value = _read(where, name)
            data = _array(value)
            if data is None or data.dtype not in TRACED_DTYPES:
                continue
            p = builder.param((data.shape, data.dtype), name)
            builder.arguments[p.id] = name  # a write into it is refused: it stays a constant
            implicit.append(Implicit(where, name, value))
            saved.append((where, name, value))
            _bind(where, name, p)
        yield implicit
    finally:
        for where, name, value in reversed(saved):
            _bind(where, name, value)


def _bind(where, name: str, value) -> None:
    if isinstance(where, dict):
        where[name] = value
    else:
        where.cell_contents = value


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
        if isinstance(value, ir.Value):  # an implicit input, guarded as such
            return
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
    if stack:  # (an implicit input of a function compiled while tracing: a constant here)
        stack[-1].guards.extend(Guard(g.where, g.name, g.current()) if type(g) is Implicit
                                else g for g in rec.guards)
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


__all__ = ["Guard", "Implicit", "CaptureInputs", "varying", "substituted", "Recording",
           "recording", "stop", "note_function", "hold", "failed"]
