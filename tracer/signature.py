"""Call signatures: flattening argument pytrees (runtime/pytree.py: tuples, lists, dicts,
namedtuples, dataclasses, registered classes) into traced leaves, and the cache key of a call
(structure, shapes, dtypes, scalar types, static values).

Arrays, Python floats and numpy float scalars are traced; Python ints, bools and anything
else are static: the function receives them as they are, and their typed value (a mutable
object's contents) is part of the key, so a new value means a new trace (Note [Static
arguments]).
"""
from __future__ import annotations

import dataclasses
import functools
import hashlib
import types
from dataclasses import dataclass
from typing import Any

import numpy as np

from llgrad.runtime import pytree
from llgrad.runtime.aval import aval_str
from llgrad.runtime.errors import DTypeError, user_loc

TRACED_DTYPES = (np.dtype(np.float32), np.dtype(np.float64), np.dtype(np.int64),
                 np.dtype(np.bool_))


@dataclass(frozen=True)
class Leaf:
    """One traced leaf: an array, or a scalar of type `scalar`: a Python number (traced as a
    weak 0-d value; See Note [Two promotion rules]) or a numpy scalar (np.float32(2.0):
    as strong as an array). Gradients and results come back as that type."""

    shape: tuple
    dtype: np.dtype
    scalar: type | None = None

    @property
    def is_python_scalar(self) -> bool:
        return self.scalar in (float, int, bool)

    def __str__(self) -> str:
        if self.is_python_scalar:
            return self.scalar.__name__
        return aval_str(self.shape, self.dtype) + (" scalar" if self.scalar else "")

    def to_python(self, a):
        """An output or gradient array as this leaf's type. Numpy scalars come back as
        numpy scalars, except float64 ones, which are Python floats (the same number)."""
        if self.scalar is None:
            return np.asarray(a)
        if self.is_python_scalar:
            return self.scalar(a)
        return float(a) if self.dtype == np.float64 else np.asarray(a)[()]


class Static:
    """A static argument: the object itself (what the function receives) and its cache key.

    Two Statics are equal when their keys are: see Note [Static arguments].
    """

    __slots__ = ("value", "key")

    def __init__(self, value):
        self.value, self.key = value, static_key(value)

    def __eq__(self, other) -> bool:
        return type(other) is Static and self.key == other.key

    def __hash__(self) -> int:
        return hash(self.key)

    def __repr__(self) -> str:
        return f"Static({self.value!r})"


# Note [Static arguments]
# Arguments that are not arrays or floats (ints, bools, strings, None, config objects, ...)
# are static: the function receives the object itself, the trace reads what it needs from it
# as constants, and the cache key must say when Python would compute something else:
# - the value with its type: `True == 1` with equal hashes, yet `True + True` is 2 and
#   f"{True}" is "True"; np.int64(1) wraps where 1 does not (so keys are (type, value),
#   recursively through containers);
# - mutable objects (a SimpleNamespace, a set, an instance of a user class, a dataclass
#   holding no arrays or floats: Python hashes them by identity or not at all) by a snapshot
#   of their contents taken at every call: mutating one between calls gives a new key, hence
#   a new trace (or the earlier trace of those contents), and a new object with equal
#   contents per call reuses the trace. (Guards, tracer/captures.py, would check one object's
#   contents too, but a guard is tied to that object: a fresh config per call would trace at
#   every call.) A function that mutates one while it runs is refused (tracing.py: the
#   compiled code would not mutate it again at later calls);
# - objects with a value-based __hash__ (frozen records, enums, Fractions) by (type, value),
#   as JAX keys static arguments; functions, modules, classes, compiled functions and objects
#   whose state llgrad cannot read (C types) by identity.
# Arrays inside a static object are constants of the trace, keyed by a digest of their bytes.
# Containers (pytrees: tuples, lists, dicts, namedtuples, dataclasses, registered classes)
# are not static: their arrays and floats are leaves, and the rest of them static entries.
_ATOMS = frozenset({bool, int, str, bytes, type(None), type(...), complex, range, slice})
_HEAPTYPE = 1 << 9  # Py_TPFLAGS_HEAPTYPE: a class defined in Python


class Identity:
    """Keys an object by identity (and keeps it alive, so its id is not reused)."""

    __slots__ = ("obj",)

    def __init__(self, obj):
        self.obj = obj

    def __eq__(self, other) -> bool:
        return type(other) is Identity and other.obj is self.obj

    def __hash__(self) -> int:
        return id(self.obj)


def static_key(v, _path: tuple = ()):
    """The cache key of a static value (See Note [Static arguments])."""
    t = type(v)
    if t in _ATOMS:
        return (t, v)
    if t is float:
        return (t, v.hex())  # nan equals itself, 0.0 and -0.0 differ
    if id(v) in _path:
        return ("<cycle>", _path.index(id(v)))
    path = _path + (id(v),)
    if isinstance(v, np.ndarray):
        digest = hashlib.blake2b(np.ascontiguousarray(v).view(np.uint8), digest_size=16)
        return (t, v.shape, v.dtype.str, digest.digest())
    if isinstance(v, np.generic):
        return (t, v.tobytes())
    if isinstance(v, (tuple, list)):
        return (t, tuple((te, e) if (te := type(e)) in _ATOMS else static_key(e, path)
                         for e in v))
    if isinstance(v, dict):
        return (t, tuple((static_key(k, path), static_key(e, path)) for k, e in v.items()))
    if isinstance(v, (set, frozenset)):
        return (t, frozenset(static_key(e, path) for e in v))
    own = getattr(t, "_lg_static_key", None)  # e.g. a Differentiable: by identity
    if own is not None:
        return own(v)
    data = getattr(v, "_data", None)
    if isinstance(data, np.ndarray) and hasattr(t, "_lg_level"):  # an llgrad Tensor
        return (t, static_key(data, path))
    if not dataclasses.is_dataclass(v) and t.__hash__ not in (None, object.__hash__):
        try:
            hash(v)
            return (t, v)
        except TypeError:
            pass
    if t.__flags__ & _HEAPTYPE or t is types.SimpleNamespace:
        return (t, tuple((name, (te, e) if (te := type(e)) in _ATOMS else static_key(e, path))
                         for name, e in _attributes(v)))
    return Identity(v)


def _attributes(v) -> list:
    """An object's attributes: its __dict__ and its __slots__, in a fixed order. Values a
    functools.cached_property stored are left out: they derive from the others, and appear
    when first read (a trace reading one does not change its object)."""
    cached, slots = _layout(type(v))
    d = getattr(v, "__dict__", None)
    out = sorted((n, e) for n, e in d.items() if n not in cached) if d else []
    for name in slots:
        if hasattr(v, name):
            out.append((name, getattr(v, name)))
    return out


@functools.lru_cache(maxsize=1024)
def _layout(cls) -> tuple[frozenset, tuple]:
    """A class's cached_property names and slot names (static_key runs per call: guards)."""
    first: dict = {}  # each name's definition nearest in the MRO (no descriptor is run)
    for klass in cls.__mro__:
        for n, v in vars(klass).items():
            first.setdefault(n, v)
    cached = frozenset(n for n, v in first.items() if isinstance(v, functools.cached_property))
    slots = []
    for klass in cls.__mro__:
        names = getattr(klass, "__slots__", ())
        for name in (names,) if isinstance(names, str) else names:
            if name not in ("__dict__", "__weakref__"):
                slots.append(name)
    return cached, tuple(slots)


def flatten(tree, names=None, paths: list | None = None) -> tuple[list, Any]:
    """Leaves (arrays/floats) and a hashable structure: pytree Nodes (runtime/pytree.py),
    Leaf specs, and Static entries for the rest.

    `names` (the parameter names of a tuple of arguments) name an argument in errors and in
    `paths`, which receives each leaf's path in the arguments (`state.pos`, `params['w']`).
    A dataclass or registered object without arrays or floats is static as a whole: the
    function receives the object itself (Note [Static arguments]).
    """
    leaves: list = []
    if names is not None:  # no closure: Note [No reference cycles per call] (pytree.py)
        kids = tuple(_flatten(x, n.lstrip("*"), leaves, paths) for n, x in zip(names, tree))
        return leaves, pytree.Node(pytree.node_type(()), None, kids)
    return leaves, _flatten(tree, "the argument", leaves, paths)


def _flatten(x, where: str, leaves: list, paths: list | None):
    nt = pytree.node_type(x)
    if nt is not None:
        n0 = len(leaves)
        children, aux = nt.flatten(x)
        kids = tuple(_flatten(c, w, leaves, paths)
                     for c, w in zip(children, _child_paths(nt, x, aux, where, len(children))))
        if len(leaves) == n0 and nt.kind in ("dataclass", "custom"):
            if paths is not None:
                del paths[n0:]
            return Static(x)
        return pytree.Node(nt, aux, kids, key=None if aux is None else static_key(aux))
    aval = getattr(x, "aval", None)
    if aval is not None and hasattr(type(x), "_lg_level"):  # an IR value (nested tracing)
        leaf = Leaf(tuple(aval.shape), aval.dtype)
    elif isinstance(x, np.ndarray) or (hasattr(x, "_data") and
                                       isinstance(x._data, np.ndarray)):
        arr = x if isinstance(x, np.ndarray) else x._data
        if arr.dtype not in TRACED_DTYPES:
            raise _unsupported_dtype(arr, where)
        x, leaf = arr, Leaf(arr.shape, arr.dtype)
    elif isinstance(x, float) and not isinstance(x, np.floating):
        x, leaf = np.asarray(float(x), dtype=np.float64), Leaf((), np.dtype(np.float64), float)
    elif isinstance(x, np.floating):
        if x.dtype not in TRACED_DTYPES:
            raise DTypeError(f"unsupported dtype {x.dtype} for a scalar argument",
                             fix="use np.float64 or np.float32 scalars")
        x, leaf = np.asarray(x), Leaf((), x.dtype, type(x))
    else:
        return Static(x)
    leaves.append(x)
    if paths is not None:
        paths.append(where)
    return leaf


def _child_paths(nt, x, aux, where: str, n: int) -> list[str]:
    """How the children of a container are written in the user's code (for messages)."""
    if nt.kind == "dict":
        keys = aux if nt.name != "defaultdict" else aux[1]
        return [f"{where}[{k!r}]" for k in keys]
    if nt.kind == "namedtuple":
        return [f"{where}.{f}" for f in type(x)._fields]
    if nt.kind == "dataclass":
        return [f"{where}.{f.name}" for f in dataclasses.fields(x)]
    return [f"{where}[{i}]" for i in range(n)]


def arg_struct(struct, a: int):
    """The structure of argument `a` in the structure of a tuple of arguments."""
    return struct.children[a]


_DTYPE_FIXES = {
    "f": "pass float64 or float32 arrays (x.astype(np.float64))",
    "u": "pass a signed integer array (x.astype(np.int64))",
    # numpy's int8/16/32 arithmetic wraps at their width; cast silently to int64, it would not
    "i": "pass x.astype(np.int64): the same values, but arithmetic on them then wraps at 2**63 "
         "instead of at the narrower dtype's limit, as numpy's own would",
    "c": "complex numbers are not supported: pass the real and imaginary parts as two float "
         "arrays (x.real, x.imag)",
    "M": "convert the dates to numbers first, e.g. (t - t0) / np.timedelta64(1, 's')",
    "m": "convert the durations to numbers first, e.g. d / np.timedelta64(1, 's')",
    "U": "strings cannot be traced: pass a Python str (a static argument) or encode them as "
         "numbers",
    "O": "convert it to a numeric array (np.asarray(x, dtype=np.float64))",
}
_DTYPE_FIXES["S"] = _DTYPE_FIXES["U"]


def _unsupported_dtype(arr: np.ndarray, where: str) -> DTypeError:
    name = where if where.startswith("the ") else f"`{where}`"
    return DTypeError(
        f"argument {name} is an array of dtype {arr.dtype} (shape {list(arr.shape)}); compiled "
        f"functions take arrays of float64, float32, int64 or bool", loc=user_loc(),
        fix=_DTYPE_FIXES.get(arr.dtype.kind, "convert it to float64, int64 or bool").replace(
            "x.", "x." if where.startswith("the ") else f"{where}."))


def _leaf_value(spec, it):
    return spec.value if type(spec) is Static else next(it)


def unflatten(struct, leaves) -> Any:
    """The arguments (or results) a structure describes, with `leaves` for its Leaf specs."""
    return pytree.unflatten(struct, leaves, _leaf_value)


def _no_gradient(spec, it):
    return None if type(spec) is Static else next(it)


def unflatten_gradient(struct, leaves) -> Any:
    """A gradient with the structure of the arguments `struct` describes: `leaves` for its
    Leaf specs and None for its static entries (an int, a string, an object without arrays
    or floats has no gradient; its own value would read as one)."""
    return pytree.unflatten(struct, leaves, _no_gradient)


def leaf_specs(struct) -> list[Leaf]:
    out: list[Leaf] = []
    _leaf_specs(struct, out)  # no closure: Note [No reference cycles per call] (pytree.py)
    return out


def _leaf_specs(s, out: list) -> None:
    if type(s) is Leaf:
        out.append(s)
    elif type(s) is pytree.Node:
        for c in s.children:
            _leaf_specs(c, out)


def describe(struct) -> str:
    """A short human form of a signature, for inspect() and error messages."""
    def rec(s):
        if isinstance(s, Leaf):
            return str(s)
        if isinstance(s, Static):
            return f"static {s.value!r}"
        nt, kids = s.type, [rec(c) for c in s.children]
        if nt.kind == "dict":
            keys = s.aux if nt.name != "defaultdict" else s.aux[1]
            return "{" + ", ".join(f"{k!r}: {v}" for k, v in zip(keys, kids)) + "}"
        if nt.kind == "tuple":
            return f"({', '.join(kids)})"
        if nt.kind == "list":
            return f"[{', '.join(kids)}]"
        return f"{nt.name}({', '.join(kids)})"
    return rec(struct)
