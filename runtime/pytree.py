"""Pytrees: the Python containers llgrad looks through (tuples, lists, dicts, namedtuples,
dataclasses and classes registered with `register_pytree`), flattened to leaves and rebuilt.

This module is the one definition of what a container is: the compiler's call signatures
(tracer/signature.py), traced outputs, loop state, custom derivatives and the eager runtime
all ask `node_type`. Everything that is not a container is a leaf here; what a leaf means
(traced array, static value, tensor) is the caller's business.
"""
from __future__ import annotations

import collections
import dataclasses
from typing import Any, Callable


class NodeType:
    """How one container type is taken apart and rebuilt.

    `flatten(x) -> (children, aux)`; `unflatten(aux, children) -> x` (jax.tree_util's
    convention). `aux` carries what is not a child (dict keys, a class): it is part of a
    compiled function's signature, so it is compared by value.
    """

    __slots__ = ("name", "flatten", "unflatten", "kind")

    def __init__(self, name: str, flatten: Callable, unflatten: Callable, kind: str):
        self.name, self.flatten, self.unflatten, self.kind = name, flatten, unflatten, kind

    def __repr__(self) -> str:
        return f"<pytree node {self.name}>"


_TYPES: dict[type, NodeType | None] = {}


def register_pytree(cls: type, flatten: Callable, unflatten: Callable) -> type:
    """Make instances of `cls` containers whose children llgrad traces and differentiates.

    Args:
        cls: the class.
        flatten: `flatten(obj) -> (children, aux)`: the children (arrays, floats or other
            pytrees) and anything else needed to rebuild the object (hashable; it becomes
            part of a compiled function's signature, so a new aux traces again).
        unflatten: `unflatten(aux, children) -> obj`.

    Returns:
        `cls`, so the call can follow the class definition.

    Example:
        >>> class Pair:
        ...     def __init__(self, a, b): self.a, self.b = a, b
        >>> register_pytree(Pair, lambda p: ((p.a, p.b), None),
        ...                 lambda aux, ch: Pair(*ch))  # doctest: +ELLIPSIS
        <class '...Pair'>
    """
    if not isinstance(cls, type):
        raise TypeError(f"register_pytree takes a class, got {cls!r}")
    if cls in (tuple, list, dict):
        raise ValueError(f"{cls.__name__} is already a pytree node")
    _TYPES[cls] = NodeType(cls.__qualname__, flatten, unflatten, "custom")
    return cls


def node_type(x) -> NodeType | None:
    """The NodeType of `x`'s type, or None if `x` is a leaf."""
    t = type(x)
    try:
        return _TYPES[t]
    except KeyError:
        nt = _TYPES[t] = _detect(t)
        return nt


def is_node(x) -> bool:
    return node_type(x) is not None


# -- built-in containers ----------------------------------------------------------------------
def _namedtuple(t: type) -> NodeType:
    return NodeType(t.__qualname__, lambda x: (list(x), None),
                    lambda aux, ch: t._make(ch), "namedtuple")


# Note [Dataclasses are their fields]
# A dataclass flattens to the values of its fields (dataclasses.fields: init=False fields
# too) and is rebuilt field by field without calling __init__ or __post_init__, the way
# copy.copy would: the function receives an object equal to the one passed (a __post_init__
# that converts with np.asarray or validates would otherwise run again on traced values),
# and a gradient is an instance of the same class whose fields are the gradients (or the
# static values) of the argument's fields. Frozen and slotted dataclasses rebuild alike.
def _dataclass(t: type) -> NodeType:
    names = tuple(f.name for f in dataclasses.fields(t))

    def unflatten(aux, children):
        obj = object.__new__(t)
        for n, c in zip(names, children):
            object.__setattr__(obj, n, c)
        return obj
    return NodeType(t.__qualname__, lambda x: ([getattr(x, n) for n in names], None),
                    unflatten, "dataclass")


def _detect(t: type) -> NodeType | None:
    if issubclass(t, tuple) and isinstance(getattr(t, "_fields", None), tuple):
        return _namedtuple(t)
    if dataclasses.is_dataclass(t):
        return _dataclass(t)
    return None


def _dict_items(x):
    return list(x.values()), tuple(x)


_TYPES[tuple] = NodeType("tuple", lambda x: (list(x), None), lambda aux, ch: tuple(ch), "tuple")
_TYPES[list] = NodeType("list", lambda x: (list(x), None), lambda aux, ch: list(ch), "list")
_TYPES[dict] = NodeType("dict", _dict_items, lambda keys, ch: dict(zip(keys, ch)), "dict")
_TYPES[collections.OrderedDict] = NodeType(
    "OrderedDict", _dict_items, lambda keys, ch: collections.OrderedDict(zip(keys, ch)), "dict")
_TYPES[collections.defaultdict] = NodeType(
    "defaultdict", lambda x: (list(x.values()), (x.default_factory, tuple(x))),
    lambda aux, ch: collections.defaultdict(aux[0], zip(aux[1], ch)), "dict")


# -- whole trees ------------------------------------------------------------------------------
class Node:
    """One container in a flattened tree: its NodeType, aux, and the children's structures.

    Equality (for signature keys) compares `key`, which defaults to `aux`; callers that need
    typed keys (1 and True as dict keys) pass a key of their own.
    """

    __slots__ = ("type", "aux", "children", "key")

    def __init__(self, type_: NodeType, aux, children: tuple, key=None):
        self.type, self.aux, self.children = type_, aux, children
        self.key = aux if key is None else key

    def __eq__(self, other) -> bool:
        return type(other) is Node and self.type is other.type and self.key == other.key \
            and self.children == other.children

    def __hash__(self) -> int:
        return hash((id(self.type), self.key, self.children))

    def __repr__(self) -> str:
        return f"Node({self.type.name}, {self.children!r})"


LEAF = None  # the structure of a leaf in `flatten`'s trees


def flatten(tree, is_leaf: Callable | None = None) -> tuple[list, Any]:
    """(leaves, structure) of `tree`; `is_leaf(x)` may stop the descent at a container."""
    leaves: list = []
    return leaves, _flatten(tree, is_leaf, leaves)


def _flatten(x, is_leaf, leaves: list):
    nt = None if is_leaf is not None and is_leaf(x) else node_type(x)
    if nt is None:
        leaves.append(x)
        return LEAF
    children, aux = nt.flatten(x)
    return Node(nt, aux, tuple(_flatten(c, is_leaf, leaves) for c in children))


def unflatten(struct, leaves, leaf: Callable | None = None) -> Any:
    """Rebuild a tree from its structure and leaves (an iterable, consumed in order).

    `leaf(spec, it)` gives the value of a non-Node spec (default: the next leaf).
    See Note [No reference cycles per call].
    """
    return _unflatten(struct, iter(leaves), leaf)


def _unflatten(s, it, leaf):
    if type(s) is Node:
        return s.type.unflatten(s.aux, [_unflatten(c, it, leaf) for c in s.children])
    return next(it) if leaf is None else leaf(s, it)


# Note [No reference cycles per call]
# Code that runs on every compiled call (flatten, unflatten, leaf_specs in
# tracer/signature.py) uses module-level recursive functions, never a nested `def rec` that
# calls itself: such a closure refers to itself through its cell, a reference cycle that
# holds everything it captured (here the iterator over the call's result arrays) until the
# cyclic garbage collector runs. The results a caller dropped stayed allocated for hundreds of
# calls, so every call got fresh memory from the OS and paid its page faults: a function
# returning two 200x200 arrays took ~240 us a call instead of ~9 us (numpy), and peak memory
# grew with the collector's threshold (tests/e2e/test_call_path.py).


def tree_leaves(tree) -> list:
    return flatten(tree)[0]


def any_leaf(pred: Callable, tree) -> bool:
    """Whether `pred` holds for a leaf of `tree` (no structure is built: per-call checks)."""
    nt = node_type(tree)
    if nt is None:
        return bool(pred(tree))
    for c in nt.flatten(tree)[0]:
        if any_leaf(pred, c):
            return True
    return False


def tree_map(f: Callable, tree, *rest) -> Any:
    """`f` applied to the leaves of `tree` (and the matching leaves of `rest`), same structure."""
    xs, struct = flatten(tree)
    others = [flatten(r)[0] for r in rest]
    return unflatten(struct, [f(x, *o) for x, *o in zip(xs, *others)])


__all__ = ["register_pytree", "node_type", "is_node", "Node", "NodeType", "flatten",
           "unflatten", "tree_leaves", "any_leaf", "tree_map", "LEAF"]
