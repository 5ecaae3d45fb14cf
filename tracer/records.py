"""Records of arrays in the state of a staged `if` or loop, carried as their leaves (Note
[Records in loop and branch state] in tracer/operators.py)."""
from __future__ import annotations

import dataclasses

import numpy as np

from llgrad.runtime import pytree
from llgrad.tracer import operators
from llgrad.tracer.operators import Undefined
from llgrad.transform import ir


def flat_state(get_state, set_state, names, nouts: int = 0):
    """The state with each record of arrays replaced by its leaves, named `state.pos`, ...
    (Note [Records in loop and branch state] in operators.py): (get, set, names, nouts) to
    stage with, `nouts` counting the flat entries of the first `nouts` names (an `if`'s
    outputs). A record whose structure changes reads back as itself, which the stager reports
    as a changed variable; one unbound on a path reads back as Undefined leaves."""
    s0 = get_state()
    defs = []
    for v, name in zip(s0, names):
        d = None
        if operators.is_record(v) and not name.startswith("__lg_"):
            leaves, struct = pytree.flatten(v)
            if any(isinstance(x, ir.Value) or isinstance(x, (np.ndarray, float)) for x in leaves):
                d = (struct, len(leaves))
        defs.append(d)
    if not any(defs):
        return get_state, set_state, names, nouts
    flat_names = []
    for v, name, d in zip(s0, names, defs):
        flat_names.extend([name] if d is None else _leaf_names(name, v))

    def get():
        out = []
        for v, d in zip(get_state(), defs):
            if d is None:
                out.append(v)
                continue
            leaves, struct = pytree.flatten(v) if operators.is_record(v) else ([], None)
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
            else:
                out.append(pytree.unflatten(d[0], leaves))
        set_state(tuple(out))
    return get, set_, tuple(flat_names), sum(1 if d is None else d[1] for d in defs[:nouts])


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
        fields = getattr(type(x), "_fields", None) if nt.kind == "namedtuple" else \
            [f.name for f in dataclasses.fields(x)] if nt.kind == "dataclass" else None
        for i, c in enumerate(children):
            rec(c, f"{where}.{fields[i]}" if fields else f"{where}[{i}]")
    rec(record, name)
    return out


__all__ = ["flat_state"]
