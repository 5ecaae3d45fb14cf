"""Converted functions kept on disk between processes (Note [Converted code on disk]).

While llgrad/api.py traces a function whose compiled code goes to the disk cache, it hands
this module a store (`using(store)`: `store.load(key) -> (meta, payload) | None`,
`store.store(key, meta, payload)`; llgrad/cache.py is one). A conversion is then looked up
by its key before the gast pipeline runs, and kept after it ran. `Lookups` is the resolver
the pipeline asks for global and closure names: it records what it answered, as facts, so
that a stored conversion is used only where the same lookups give the same facts.
"""

from __future__ import annotations

import builtins
import hashlib
import importlib.util
import inspect
import marshal
import sys
import threading
import types
from contextlib import contextmanager
from typing import Any, Callable

from . import calls
from .cells import OWNED
from .parsing import code_span

_FORMAT = "conversion 1"
_STATE = threading.local()  # .store: the store while this thread traces (llgrad/api.py)


@contextmanager
def using(store):
    """Look conversions up in `store` (None: convert in memory only) while this thread
    runs the block."""
    saved, _STATE.store = current(), store
    try:
        yield
    finally:
        _STATE.store = saved


def current():
    """The store conversions are looked up in on this thread, or None."""
    return getattr(_STATE, "store", None)


class Lookups:
    """The names a conversion of `fn` resolves: `lookups(name, attrs)` is the value of
    `name.attr1.attr2...` (attributes of modules only; else `calls.MISSING`), from the
    closure, the globals or the builtins, recorded as a fact (`fact`)."""

    def __init__(self, fn: Callable):
        self.cells = dict(zip(fn.__code__.co_freevars, fn.__closure__ or ()))
        self.globals = fn.__globals__
        ns = fn.__globals__.get("__builtins__", builtins)
        self.builtins = ns.__dict__ if isinstance(ns, types.ModuleType) else ns
        self.seen: dict[tuple, str] = {}

    def __call__(self, name: str, attrs: tuple = ()) -> Any:
        value = self._root(name)
        for attr in attrs:
            if not isinstance(value, types.ModuleType):
                value = calls.MISSING
                break
            value = getattr(value, attr, calls.MISSING)
        self.seen[(name, *attrs)] = fact(value)
        return value

    def _root(self, name: str) -> Any:
        if name in self.cells:
            try:
                return self.cells[name].cell_contents
            except ValueError:
                return calls.MISSING
        if name in self.globals:
            return self.globals[name]
        return self.builtins.get(name, calls.MISSING)


_BUILTINS = (len, print, range, reversed)


def fact(value: Any) -> str:
    """Everything the conversion asks of a resolved value (calls.py, api.py): which builtin
    it is, whether it is a library object, has a traced form, draws random numbers, is a
    module or belongs to llgrad."""
    if value is calls.MISSING:
        return "missing"
    for b in _BUILTINS:
        if value is b:
            return "builtin " + b.__name__
    module = isinstance(value, types.ModuleType)
    name = value.__name__ if module else getattr(value, "__module__", "") or ""
    llgrad = isinstance(name, str) and (name == "llgrad" or name.startswith("llgrad."))
    flags = (module, calls.is_library_object(value), calls._has_traced_form(value),
             calls._is_random(value), llgrad)
    return "".join("1" if f else "0" for f in flags)


_STAMP: list = []


def _stamp() -> str:
    """What conversions depend on besides the function: the interpreter (its bytecode) and
    llgrad's own files (llgrad/cache.py `code_stamp`: their size and time of change)."""
    if not _STAMP:
        from llgrad import cache
        _STAMP.append("\0".join([_FORMAT, sys.version, importlib.util.MAGIC_NUMBER.hex(),
                                 cache.code_stamp()]))
    return _STAMP[0]


def key(fn: Callable, lines: list[str], firstlineno: int) -> str:
    """The key of `fn`'s conversion: its source text and where it is, its names and free
    variables, and `_stamp()`."""
    code = fn.__code__
    filename = inspect.getsourcefile(fn) or code.co_filename
    h = hashlib.sha256(_stamp().encode())
    owned = " ".join(sorted(getattr(fn, OWNED, ())))
    for part in (filename, str(firstlineno), fn.__name__, fn.__qualname__,
                 " ".join(code.co_freevars), owned, "".join(lines), str(code_span(code))):
        h.update(b"\0" + part.encode())
    return h.hexdigest()


def load(k: str, fn: Callable) -> tuple[types.CodeType, str, str, int] | None:
    """(module code, converted source, filename, first line) stored under `k`, when every
    lookup it recorded gives the same fact for `fn` now; else None (convert again)."""
    entry = current().load(k)
    if entry is None:
        return None
    meta, payload = entry
    try:
        if meta.get("kind") != "conversion":
            return None
        lookups = Lookups(fn)
        for path, was in meta["lookups"]:
            lookups(path[0], tuple(path[1:]))
            if lookups.seen[tuple(path)] != was:
                return None  # a name the conversion asked about means something else now
        code = marshal.loads(payload)
        source, filename, firstlineno = meta["source"], meta["filename"], meta["firstlineno"]
        if not (isinstance(code, types.CodeType) and isinstance(source, str)
                and filename == code.co_filename and type(firstlineno) is int):
            return None
    except (KeyError, TypeError, ValueError, EOFError, IndexError):
        return None  # not an entry this version wrote: convert again (and overwrite it)
    return code, source, filename, firstlineno


def save(k: str, lookups: Lookups, code: types.CodeType, source: str, filename: str,
         firstlineno: int) -> None:
    """Keep a conversion (its module `code`) under `k`, with the facts `lookups` gave."""
    meta = {"kind": "conversion", "source": source, "filename": filename,
            "firstlineno": firstlineno,
            "lookups": [[list(path), f] for path, f in lookups.seen.items()]}
    current().store(k, meta, marshal.dumps(code))


# Note [Converted code on disk]
# A warm start (llgrad/cache.py, Note [Warm starts]) still traces, and converting the source
# with gast was most of that: ~3.4 of ~8 ms CPU for the benchmark's 101-op chain, everything
# imported. So with the disk cache on, a conversion is kept too: the code object the pipeline
# compiles (marshal, the format of Python's own .pyc files) and the converted source, under a
# key of everything the pipeline reads from the function: its source lines, file, first line,
# names and free variables, plus the interpreter's version and bytecode magic and llgrad's
# files (their size and mtime, the stamp object code is keyed by too). The pipeline reads one thing more, what the
# function's global and closure names are bound to (is `np.sum` a library function? `range`
# the builtin?), and that can change between runs without the source changing. Those
# answers are recorded as they are given (`Lookups`: per name or module attribute chain, the
# facts calls.py and api.py decide on), stored with the entry, and asked again before a
# stored conversion is used: one different answer and the function is converted afresh and
# the entry overwritten. The instance is then built as a fresh conversion's is (compile.py:
# the function's own globals, closure cells and names), so it is the same function object.
# Trust: a conversion is code that runs when the function is traced, as the object code
# next to it is when called; both are trusted because only the user can write the cache
# directory (Note [Cache threat model]); the sha256 guards against corruption, a payload
# that is not a code object of the function's file is a miss, and marshal runs nothing
# when it reads.
