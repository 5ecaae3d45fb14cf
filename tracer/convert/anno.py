"""Annotations on gast nodes, and source locations of generated nodes.

Annotations live in a dict attribute ``_lg_anno`` on each node; gast_to_ast drops them.
Invariant kept by every pass: each statement and expression has ``lineno``/``col_offset`` in
the user's file (generated nodes inherit the location of the statement they replace).
"""

from __future__ import annotations

import enum
from typing import Any

import gast

_LOC_FIELDS = ("lineno", "col_offset", "end_lineno", "end_col_offset")


class Key(enum.Enum):
    EXTRA_TEST = "for-loop extra tests (list of exprs), added by jump conversion"
    LIVE_OUT = "names live after an if/for/while"
    HEAD_LIVE = "names live at the head of a loop (before test / next item)"
    DEFINED_IN = "names possibly defined on entry to a statement"
    DEFINITELY_IN = "names definitely defined on entry to a statement"
    MODIFIED = "names a statement may bind (excluding global/nonlocal declared names)"
    IN_TARGET = "a subscript inside an assignment target (calls.py leaves it as written)"


def get(node: Any, key: Key, default: Any = None) -> Any:
    return getattr(node, "_lg_anno", {}).get(key, default)


def set_(node: Any, key: Key, value: Any) -> None:
    if not hasattr(node, "_lg_anno"):
        node._lg_anno = {}
    node._lg_anno[key] = value


def strip_loc(node: gast.AST) -> None:
    """Remove locations from a template-generated subtree (templates have their own lines)."""
    for n in gast.walk(node):
        for f in _LOC_FIELDS:
            if hasattr(n, f):
                setattr(n, f, None)


def fill_loc(nodes: Any, origin: gast.AST) -> None:
    """Give every node in ``nodes`` lacking a location the location of ``origin``."""
    for root in nodes if isinstance(nodes, list) else [nodes]:
        for n in gast.walk(root):
            if "lineno" in getattr(n, "_attributes", ()) and getattr(n, "lineno", None) is None:
                for f in _LOC_FIELDS:
                    setattr(n, f, getattr(origin, f, None))
