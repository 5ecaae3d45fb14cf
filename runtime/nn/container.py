"""Containers: Sequential, ModuleList, ModuleDict (children registered under their index or
key, so parameters(), state_dict() and train() reach them), as in torch.nn."""
from __future__ import annotations

import operator
from collections import OrderedDict

from llgrad.runtime.nn.module import Module


class Sequential(Module):
    """Runs its modules in order, each on the previous one's output.

    Built from modules (`Sequential(a, b)`, children named '0', '1', ...) or from an
    OrderedDict of names to modules. Supports indexing (a slice gives a Sequential), len,
    iteration and append.
    """

    def __init__(self, *args) -> None:
        super().__init__()
        if len(args) == 1 and isinstance(args[0], OrderedDict):
            for name, module in args[0].items():
                self.add_module(name, module)
        else:
            for i, module in enumerate(args):
                self.add_module(str(i), module)

    def _index(self, idx) -> str:
        idx = operator.index(idx)
        n = len(self)
        if not -n <= idx < n:
            raise IndexError(f"index {idx} is out of range")
        return list(self._modules)[idx % n]

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return type(self)(OrderedDict(list(self._modules.items())[idx]))
        return self._modules[self._index(idx)]

    def __setitem__(self, idx, module: Module) -> None:
        setattr(self, self._index(idx), module)

    def __delitem__(self, idx) -> None:
        keys = list(self._modules)[idx] if isinstance(idx, slice) else [self._index(idx)]
        for k in keys:
            del self._modules[k]
        items = list(self._modules.values())
        self._modules.clear()
        for i, m in enumerate(items):
            self._modules[str(i)] = m

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())

    def append(self, module: Module) -> "Sequential":
        self.add_module(str(len(self)), module)
        return self

    def forward(self, input):
        for module in self._modules.values():
            input = module(input)
        return input


class ModuleList(Module):
    """A list of modules, registered as children '0', '1', ... (no forward of its own)."""

    def __init__(self, modules=None) -> None:
        super().__init__()
        for m in modules or ():
            self.append(m)

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return ModuleList(list(self._modules.values())[idx])
        return list(self._modules.values())[idx]

    def __setitem__(self, idx: int, module: Module) -> None:
        key = list(self._modules)[idx]
        setattr(self, key, module)

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())

    def append(self, module: Module) -> "ModuleList":
        self.add_module(str(len(self)), module)
        return self

    def extend(self, modules) -> "ModuleList":
        for m in modules:
            self.append(m)
        return self


class ModuleDict(Module):
    """An ordered dict of modules, registered as children under their keys.

    Example:
        >>> import llgrad as lg
        >>> heads = lg.nn.ModuleDict({"a": lg.nn.Linear(2, 1), "b": lg.nn.Identity()})
        >>> list(heads.keys())
        ['a', 'b']
    """

    def __init__(self, modules=None) -> None:
        super().__init__()
        if modules is not None:
            self.update(modules)

    def __getitem__(self, key: str) -> Module:
        return self._modules[key]

    def __setitem__(self, key: str, module: Module) -> None:
        self.add_module(key, module)

    def __delitem__(self, key: str) -> None:
        del self._modules[key]

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules)

    def __contains__(self, key) -> bool:
        return key in self._modules

    def clear(self) -> None:
        self._modules.clear()

    def pop(self, key: str) -> Module:
        return self._modules.pop(key)

    def keys(self):
        return self._modules.keys()

    def items(self):
        return self._modules.items()

    def values(self):
        return self._modules.values()

    def update(self, modules) -> None:
        """Add (key, module) pairs from a mapping or an iterable of pairs."""
        items = modules.items() if hasattr(modules, "items") else modules
        for k, m in items:
            self[k] = m
