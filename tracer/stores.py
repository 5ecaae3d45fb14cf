"""The store log of traced `if` branches: attribute and item stores into Python objects.

Used by the stager (staging.py) through `StoreLog`; converted code announces stores with
operators.note_attr / note_item / setitem. Invariant: when a traced `if` has been staged,
every Python object its branches stored into holds the merge of the two branches' values,
as after a Python `if` (See Note [Stores in traced branches]).
"""
from __future__ import annotations

import operator
from contextlib import contextmanager

import numpy as np

from llgrad.runtime.errors import UnsupportedError, user_frame, user_loc
from llgrad.tracer.operators import UNKNOWN, Undefined, is_traced

# Note [Stores in traced branches]
# Both branches of a traced `if` run at trace time, one after the other (Note [Each branch
# starts from the state before the if]). A store into a Python object (`obj.a = v`,
# `lst[0] = v`, `d[k] = v`) made by the first branch would be seen by the second, and would
# stay whichever branch runs at run time. So converted code announces each such store before
# it happens (operators.note_attr / note_item, and operators.setitem for the items of local
# lists and dicts); while a branch is traced, the log keeps the old value of each place
# stored (once per branch), and when the branch ends it reads the new value and puts the old
# one back. After both branches, each place gets the merge of its two values, like a
# variable (a cond output when they differ as traced values). A store that cannot be merged
# is refused at its line: into a numpy array that is not a local variable (compiled code
# cannot write that Python object on the path taken; a local array is updated by value,
# operators.setitem), list slices and deletions (they change the list's length), items of
# other objects. Mutating methods (`lst.append(v)`, `a.fill(0)`) on objects that existed
# before the branch are refused too (Note [Python effects in staged code] in effects.py).

class StoreLog:
    """One log per traced branch being traced (innermost last)."""

    def __init__(self):
        self.stack: list = []  # (entries, loc): entries maps place -> [obj, key, old, new]

    @contextmanager
    def branch(self, loc):
        """Log the stores of one branch; on exit, record the new values, restore the old."""
        entries: dict = {}
        self.stack.append((entries, loc))
        try:
            yield entries
        finally:
            self.stack.pop()
            for e in entries.values():
                e[3] = _read(e[0], e[1])
            for obj, key, old, _ in reversed(list(entries.values())):
                _write(obj, key, old)

    def note(self, obj, key: tuple, delete: bool = False) -> None:
        """Before the store `key` (("attr", name) or ("item", index)) into `obj`."""
        if not self.stack:
            return
        entries, loc = self.stack[-1]
        key = _checked(obj, key, delete, loc)
        place = (id(obj),) + key
        if place not in entries:
            entries[place] = [obj, key, _read(obj, key), None]

    def merges(self, true_log: dict, false_log: dict):
        """(label, true value, false value, put) for each place either branch stored."""
        for place in dict.fromkeys([*true_log, *false_log]):
            obj, key, old, _ = true_log.get(place) or false_log[place]
            a = true_log[place][3] if place in true_log else old
            c = false_log[place][3] if place in false_log else old
            yield _label(obj, key), a, c, Place(self, obj, key)

    def put(self, obj, key: tuple, value) -> None:
        """Store a merged value (logged in an enclosing traced branch, if any)."""
        self.note(obj, key)
        _write(obj, key, value)


class Place:
    """A stored place, as the `put` of a merge: calling it stores the merged value."""

    __slots__ = ("log", "obj", "key")

    def __init__(self, log: StoreLog, obj, key: tuple):
        self.log, self.obj, self.key = log, obj, key

    def __call__(self, value) -> None:
        self.log.put(self.obj, self.key, value)

    def is_dict_key(self) -> bool:
        return isinstance(self.obj, dict)


def _label(obj, key) -> str:
    """How the user's code names the place: `d['a']` for a local dict d (else `dict['a']`)."""
    kind, k = key
    f = user_frame(2)
    name = next((n for n, v in (f.f_locals.items() if f is not None else ())
                 if v is obj and not n.startswith("__lg")), type(obj).__name__)
    return f"{name}.{k}" if kind == "attr" else f"{name}[{k!r}]"


def _checked(obj, key, delete, loc) -> tuple:
    """The key, normalised (list indices >= 0); raise UnsupportedError for what cannot be
    merged (See Note [Stores in traced branches])."""
    kind, k = key
    if kind == "attr" and obj is not UNKNOWN:
        return key
    what = None
    if obj is UNKNOWN:
        what = "a store into an object computed by a call"
    elif isinstance(obj, dict):
        return key
    elif isinstance(obj, list):
        try:
            i = operator.index(k)
        except TypeError:
            what = "a slice assignment into a Python list"
        else:
            if delete:
                what = "deleting an item of a Python list"
            else:
                return ("item", i + len(obj) if i < 0 else i)
    elif isinstance(obj, np.ndarray) or is_traced(obj):
        what = "an element update of an array that is not a local variable"
    else:
        what = f"an item store into a {type(obj).__name__}"
    raise UnsupportedError(
        f"{what} inside a branch of the traced `if` at {loc}: both branches are traced, and "
        f"llgrad cannot undo this store or make it happen on the taken path only",
        loc=user_loc(), fix="update a local variable instead (`buf = self.buf.copy()`, "
        "`buf[i] = v`, and assign `self.buf = buf` after the `if`), or compute the value "
        "with `np.where`")


def _read(obj, key):
    kind, k = key
    try:
        return getattr(obj, k) if kind == "attr" else obj[k]
    except (AttributeError, KeyError, IndexError):
        return Undefined(_label(obj, key))


def _write(obj, key, value) -> None:
    """Store `value`; an Undefined without a reason (the place did not exist) deletes."""
    kind, k = key
    if type(value) is Undefined and object.__getattribute__(value, "reason") is None:
        try:
            delattr(obj, k) if kind == "attr" else obj.__delitem__(k)
        except (AttributeError, KeyError):
            pass
        return
    setattr(obj, k, value) if kind == "attr" else obj.__setitem__(k, value)
