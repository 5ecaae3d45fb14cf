"""Namer: fresh generated names with the reserved ``__lg_`` prefix, never clashing with a
symbol the user's function mentions (AutoGraph's naming.Namer)."""

from __future__ import annotations

import gast

PREFIX = "__lg_"


class Namer:
    def __init__(self, used: set[str]):
        self.used = set(used)

    @classmethod
    def for_function(cls, node: gast.AST) -> "Namer":
        used = set()
        for n in gast.walk(node):
            if isinstance(n, gast.Name):
                used.add(n.id)
            elif isinstance(n, (gast.FunctionDef, gast.ClassDef)):
                used.add(n.name)
            elif isinstance(n, (gast.Global, gast.Nonlocal)):
                used.update(n.names)
        return cls(used)

    def new(self, hint: str) -> str:
        """A fresh name ``__lg_<hint>``, ``__lg_<hint>_1``, ... not used so far."""
        base = hint if hint.startswith(PREFIX) else PREFIX + hint
        name, i = base, 0
        while name in self.used:
            i += 1
            name = f"{base}_{i}"
        self.used.add(name)
        return name
