"""Snapshots of the Python containers a staged loop body or a traced branch may change:
the lists, dicts, sets and objects' attribute dicts reachable from its state and free
variables, copied shallowly, compared and put back (Note [Containers in staged loops] and
Note [Python effects in staged code] in effects.py)."""
from __future__ import annotations

import types

import numpy as np

from llgrad.tracer.operators import Undefined
from llgrad.transform import ir

_LIMIT = 20_000  # objects visited per snapshot (a bound on the cost, not on correctness)
_DEPTH = 6
_SKIP_MODULES = ("numpy", "llgrad", "scipy", "builtins", "typing", "collections")
# numpy arrays up to this size are copied too: numpy's own in-place operators (`a += b` on
# two numpy arrays) change them without passing through llgrad, once per trace
_ARRAY_BYTES = 1 << 24


def _user_object(v) -> bool:
    t = type(v)
    if isinstance(v, (types.ModuleType, type, types.FunctionType, types.MethodType,
                      types.BuiltinFunctionType, np.ndarray, np.generic, ir.Value)):
        return False
    return (t.__module__ or "").split(".")[0] not in _SKIP_MODULES and \
        isinstance(getattr(v, "__dict__", None), dict)


def free_values(fns) -> list:
    """What functions read from outside: closure cells and the globals their code names."""
    out = []
    for fn in fns:
        fn = getattr(fn, "__func__", fn)
        if not isinstance(fn, types.FunctionType):
            continue
        for cell in fn.__closure__ or ():
            try:
                out.append(cell.cell_contents)
            except ValueError:
                pass
        g, todo = fn.__globals__, [fn.__code__]
        while todo:
            code = todo.pop()
            todo.extend(c for c in code.co_consts if isinstance(c, types.CodeType))
            for name in code.co_names:
                v = g.get(name)
                if isinstance(v, (list, dict)) or _user_object(v):
                    out.append(v)
    return out


class Snapshot:
    """Shallow copies of the lists, dicts, sets and attribute dicts reachable from `roots`,
    copies of the numpy arrays reachable (up to _ARRAY_BYTES each) and the ids of all of them
    (an in-place method on one is refused)."""

    def __init__(self, roots):
        self.copies: dict = {}  # id -> (obj, kind, copy)
        self.arrays: set = set()
        todo, seen = [(r, 0) for r in roots], set()
        while todo and len(seen) < _LIMIT:
            v, depth = todo.pop()
            if type(v) is np.ndarray:
                self.arrays.add(id(v))
                if id(v) not in self.copies and v.nbytes <= _ARRAY_BYTES:
                    self.copies[id(v)] = (v, "array", v.copy())
                continue
            if id(v) in seen or depth > _DEPTH or v is None or \
                    isinstance(v, (int, float, str, bool, ir.Value, Undefined)) or \
                    type(v).__name__ == "Poison":
                continue
            seen.add(id(v))
            if type(v) is list or isinstance(v, list):
                self.copies[id(v)] = (v, "list", list(v))
                todo.extend((x, depth + 1) for x in v)
            elif isinstance(v, dict):
                self.copies[id(v)] = (v, "dict", dict(v))
                todo.extend((x, depth + 1) for x in v.values())
            elif isinstance(v, (set, frozenset)):
                if isinstance(v, set):
                    self.copies[id(v)] = (v, "set", set(v))
            elif isinstance(v, tuple):
                todo.extend((x, depth + 1) for x in v)
            elif _user_object(v):
                self.copies[id(v)] = (v, "attrs", dict(vars(v)))
                todo.extend((x, depth + 1) for x in vars(v).values())

    def holds(self, obj) -> bool:
        """Whether `obj` was reachable (existed before the body or branch)."""
        return id(obj) in self.copies or id(obj) in self.arrays

    def changes(self):
        """(obj, kind, copy) of each container that differs from its copy."""
        for obj, kind, copy in self.copies.values():
            if kind == "array":
                if not np.array_equal(obj, copy, equal_nan=obj.dtype.kind in "fc"):
                    yield obj, kind, copy
                continue
            if kind == "set":
                if obj != copy:
                    yield obj, kind, copy
                continue
            now = obj if kind == "list" else obj if kind == "dict" else vars(obj)
            if len(now) != len(copy) or any(a is not b for a, b in zip(
                    now if kind == "list" else now.values(),
                    copy if kind == "list" else copy.values())) or \
                    (kind != "list" and list(now) != list(copy)):
                yield obj, kind, copy

    def restore(self) -> None:
        for obj, kind, copy in self.copies.values():
            if kind == "array":
                if not np.array_equal(obj, copy, equal_nan=obj.dtype.kind in "fc"):
                    np.copyto(obj, copy)
            elif kind == "set":
                if obj != copy:
                    obj.clear()
                    obj.update(copy)
            elif kind == "list":
                if len(obj) != len(copy) or any(a is not b for a, b in zip(obj, copy)):
                    obj[:] = copy
            else:
                d = obj if kind == "dict" else vars(obj)
                if len(d) != len(copy) or any(d.get(k, d) is not v for k, v in copy.items()):
                    d.clear()
                    d.update(copy)
