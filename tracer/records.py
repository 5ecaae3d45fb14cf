"""Records of arrays in the state of a staged `if` or loop, carried as their leaves (Note
[Records in loop and branch state] in tracer/operators.py)."""
from __future__ import annotations

import dataclasses

import numpy as np

from llgrad.runtime import pytree
from llgrad.runtime.errors import LLGradError
from llgrad.tracer import operators
from llgrad.tracer.operators import Undefined
from llgrad.transform import ir


def flat_state(get_state, set_state, names, nouts: int = 0, first: dict | None = None,
               rebound: frozenset = frozenset()):
    """The state with each record of arrays replaced by its leaves, named `state.pos`, ...
    (Note [Records in loop and branch state] in operators.py): (get, set, names, nouts) to
    stage with, `nouts` counting the flat entries of the first `nouts` names (an `if`'s
    outputs). A record whose structure changes reads back as itself, which the stager reports
    as a changed variable; one unbound on a path reads back as Undefined leaves. `first` maps
    the names a loop body first binds to a record (unbound or None before the loop, as
    `__lg_retval` before a loop that has `return (a, b)`) to that record: they are carried
    as its leaves, None or Undefined until bound. `rebound` names hold lists or dicts a loop
    body replaces by new ones of the same structure: they are carried as records too (Note
    [Containers rebuilt by a loop body])."""
    first = first or {}
    s0 = [first.get(name, v) if _unbound(v) else v for v, name in zip(get_state(), names)]
    defs = []

    def carried_as_record(v, name) -> bool:
        return operators.is_record(v) or name in rebound and pytree.node_type(v) is not None

    for v, name in zip(s0, names):
        d = None
        if carried_as_record(v, name):
            leaves, struct = pytree.flatten(v)
            if name in rebound or any(isinstance(x, ir.Value) or isinstance(x, (np.ndarray, float))
                                      for x in leaves):
                d = (struct, len(leaves))
        defs.append(d)
    if not any(defs):
        return get_state, set_state, names, nouts
    flat_names = []
    for v, name, d in zip(s0, names, defs):
        flat_names.extend([name] if d is None else _leaf_names(name, v))

    def get():
        out = []
        for v, d, name in zip(get_state(), defs, names):
            if d is None:
                out.append(v)
            elif _unbound(v):  # (`first`)
                out.extend([v] * d[1])
            else:
                leaves, struct = pytree.flatten(v) if carried_as_record(v, name) else ([], None)
                out.extend(leaves if struct == d[0] else [_Restructured(v)] * d[1])
        return tuple(out)

    def set_(values):
        it, out = iter(values), []
        for name, d in zip(names, defs):
            if d is None:
                out.append(next(it))
                continue
            leaves = [next(it) for _ in range(d[1])]
            undefined = next((x for x in leaves if isinstance(x, Undefined)), None)
            if undefined is not None:
                out.append(Undefined(name, object.__getattribute__(undefined, "reason")))
            elif type(leaves[0]) is _Restructured:
                out.append(leaves[0].value)
            elif all(x is None for x in leaves):  # not bound yet (`first`)
                out.append(None)
            else:
                out.append(pytree.unflatten(d[0], leaves))
        set_state(tuple(out))
    return get, set_, tuple(flat_names), sum(1 if d is None else d[1] for d in defs[:nouts])


def _unbound(v) -> bool:
    return v is None or isinstance(v, Undefined)


class _Restructured:
    """A record variable that no longer has its structure (another record, an array): each
    of its leaf slots holds this, which is neither an array nor a number, so the stager
    reports the variable as changed (and unrolls a loop with a static trip count)."""

    __slots__ = ("value",)

    def __init__(self, value):
        self.value = value


_Restructured.__name__ = "value of another structure"  # what the stager's messages print


def _leaf_names(name, record) -> list[str]:
    """`state.pos`, `pair[0]`, ... for the leaves of a record variable."""
    out = []

    def rec(x, where):
        nt = pytree.node_type(x)
        if nt is None:
            out.append(where)
            return
        children, _ = nt.flatten(x)
        fields = [f".{f}" for f in type(x)._fields] if nt.kind == "namedtuple" else \
            [f".{f.name}" for f in dataclasses.fields(x)] if nt.kind == "dataclass" else \
            [f"[{k!r}]" for k in x] if nt.kind == "dict" else None
        for i, c in enumerate(children):
            rec(c, f"{where}{fields[i]}" if fields else f"{where}[{i}]")
    rec(record, name)
    return out


def split_merge(name, a, c, put, loc):
    """The leaf merges of a variable that holds a record on the paths of a traced `if` but
    held none before it (`t = (x, y)` in both branches; `return (a, b)` inside the `if`,
    whose `__lg_retval` is a record on one path and None, nothing returned yet, on the
    other): [(leaf name, leaf on one path, leaf on the other, put leaf)], `put` getting the
    record rebuilt once every leaf is put; None if neither value is a record. Records of
    different structures cannot be one value: LLGradError at the `if`."""
    ra, rc = operators.is_record(a), operators.is_record(c)
    if a is not c and type(a) is type(c) and _container(a):  # Note [Containers rebuilt by a
        if pytree.flatten(a)[1] != pytree.flatten(c)[1]:     # loop body] in staging.py
            raise LLGradError(f"{_what(name)} holds {_shape_of(a)} on one path of a traced "
                              f"condition and another {type(c).__name__} (other keys or "
                              f"length) on the other", loc=loc, fix="give it the same keys "
                              "(or length) on both paths")
        ra = rc = True
    if a is c or not (ra or rc) or not (ra or a is None) or not (rc or c is None):
        return None
    (la, sa), (lc, sc) = (pytree.flatten(v) if v is not None else (None, None) for v in (a, c))
    if sa is not None and sc is not None and sa != sc:
        raise LLGradError(f"{_what(name)} holds {_shape_of(a)} on one path of a traced "
                          f"condition and {_shape_of(c)} on the other", loc=loc,
                          fix="give it the same structure (the same number and nesting of "
                          "items) on both paths")
    struct, n = sa or sc, len(la or lc)
    la, lc = la or [None] * n, lc or [None] * n
    got, left = [None] * n, [n]

    def put_leaf(k, v):
        got[k] = v
        left[0] -= 1
        if not left[0]:
            put(pytree.unflatten(struct, got))
    names = _leaf_names(name, a if sa is not None else c)
    return [(names[k], la[k], lc[k], lambda v, k=k: put_leaf(k, v)) for k in range(n)]


def _container(v) -> bool:
    """A list or dict (not a record: its identity matters where it is changed in place)."""
    nt = pytree.node_type(v)
    return nt is not None and nt.kind in ("list", "dict")


def _what(name) -> str:
    return "the value returned" if name.startswith("__lg_retval") else f"variable `{name}`"


def _shape_of(record) -> str:
    """`a tuple of 2 items`, `a Pair`, ..."""
    if type(record) is tuple:
        return f"a tuple of {len(record)} item{'s' * (len(record) != 1)}"
    return f"a {type(record).__name__}"


__all__ = ["flat_state", "split_merge"]
