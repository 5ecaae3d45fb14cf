"""`Module`, the base class of every layer: registration of parameters, buffers and submodules
by attribute assignment, traversal, train/eval mode, state_dict round trips, forward hooks.

Mirrors `torch.nn.Module`; ordering of parameters, buffers and children is insertion order,
and every traversal visits a shared parameter or module once.
"""
from __future__ import annotations

from collections import OrderedDict, namedtuple
from typing import Iterator

import numpy as np

from llgrad.runtime.autograd.graph import RemovableHandle, _add_hook
from llgrad.runtime.autograd.grad_mode import no_grad
from llgrad.runtime.nn.parameter import Parameter
from llgrad.runtime.tensor import Tensor

IncompatibleKeys = namedtuple("IncompatibleKeys", ["missing_keys", "unexpected_keys"])


def _type_name(value) -> str:
    return type(value).__name__ if not isinstance(value, Tensor) else f"Tensor[{value.dtype}]"


def _addindent(s: str, n: int) -> str:
    first, *rest = s.split("\n")
    return "\n".join([first] + [" " * n + ln for ln in rest])


class Module:
    """Base class for all neural-network modules; subclasses define `forward`.

    Assigning a `Parameter`, a `Module` or (for names registered with `register_buffer`) a
    Tensor to an attribute registers it, so `parameters()`, `state_dict()`, `train()` and
    `zero_grad()` see it.

    Example:
        >>> import llgrad as lg
        >>> class Net(lg.nn.Module):
        ...     def __init__(self):
        ...         super().__init__()
        ...         self.fc = lg.nn.Linear(3, 2)
        ...     def forward(self, x):
        ...         return self.fc(x).relu()
        >>> [name for name, _ in Net().named_parameters()]
        ['fc.weight', 'fc.bias']
    """

    training: bool

    def __init__(self) -> None:
        d = self.__dict__
        d["training"] = True
        d["_parameters"] = OrderedDict()
        d["_buffers"] = OrderedDict()
        d["_non_persistent_buffers"] = set()
        d["_modules"] = OrderedDict()
        d["_forward_hooks"] = OrderedDict()
        d["_forward_pre_hooks"] = OrderedDict()

    def forward(self, *args, **kwargs):
        raise NotImplementedError(
            f'Module [{type(self).__name__}] is missing the required "forward" function')

    def __call__(self, *args, **kwargs):
        for hook in list(self._forward_pre_hooks.values()):
            res = hook(self, args)
            if res is not None:
                args = res if isinstance(res, tuple) else (res,)
        out = self.forward(*args, **kwargs)
        for hook in list(self._forward_hooks.values()):
            res = hook(self, args, out)
            if res is not None:
                out = res
        return out

    def register_forward_hook(self, hook) -> RemovableHandle:
        """`hook(module, args, output)` runs after `forward`; a non-None result replaces output."""
        return _add_hook(self._forward_hooks, hook)

    def register_forward_pre_hook(self, hook) -> RemovableHandle:
        """`hook(module, args)` runs before `forward`; a non-None result replaces the args."""
        return _add_hook(self._forward_pre_hooks, hook)

    # -- registration -----------------------------------------------------------------------
    def _check_name(self, name: str, kind: str) -> None:
        if "_parameters" not in self.__dict__:
            raise AttributeError(f"cannot assign {kind} before Module.__init__() call")
        if not isinstance(name, str):
            raise TypeError(f"{kind} name should be a string. Got {type(name).__name__}")
        if "." in name:
            raise KeyError(f'{kind} name can\'t contain ".", got: {name}')
        if name == "":
            raise KeyError(f'{kind} name can\'t be empty string ""')

    def register_parameter(self, name: str, param: Parameter | None) -> None:
        """Add a parameter (or a None placeholder) under `name`."""
        self._check_name(name, "parameter")
        if hasattr(self, name) and name not in self._parameters:
            raise KeyError(f"attribute '{name}' already exists")
        if param is not None and not isinstance(param, Parameter):
            raise TypeError(f"cannot assign '{_type_name(param)}' object to parameter '{name}' "
                            "(llgrad.nn.Parameter or None required)")
        self._parameters[name] = param

    def register_buffer(self, name: str, tensor: Tensor | None, persistent: bool = True) -> None:
        """Add a tensor that is state but not a parameter (saved in state_dict if persistent)."""
        self._check_name(name, "buffer")
        if hasattr(self, name) and name not in self._buffers:
            raise KeyError(f"attribute '{name}' already exists")
        if tensor is not None and not isinstance(tensor, Tensor):
            raise TypeError(f"cannot assign '{_type_name(tensor)}' object to buffer '{name}' "
                            "(llgrad Tensor or None required)")
        self._buffers[name] = tensor
        if persistent:
            self._non_persistent_buffers.discard(name)
        else:
            self._non_persistent_buffers.add(name)

    def add_module(self, name: str, module: "Module | None") -> None:
        """Add a child module under `name`."""
        self._check_name(name, "module")
        if module is not None and not isinstance(module, Module):
            raise TypeError(f"{_type_name(module)} is not a Module subclass")
        if hasattr(self, name) and name not in self._modules:
            raise KeyError(f"attribute '{name}' already exists")
        self._modules[name] = module

    register_module = add_module

    def __setattr__(self, name: str, value) -> None:
        d = self.__dict__
        params = d.get("_parameters")
        if isinstance(value, Parameter):
            if params is None:
                raise AttributeError("cannot assign parameters before Module.__init__() call")
            self._remove_from(name, d, self._buffers, self._modules)
            self.register_parameter(name, value)
        elif params is not None and name in params:
            if value is not None:
                raise TypeError(f"cannot assign '{_type_name(value)}' as parameter '{name}' "
                                "(llgrad.nn.Parameter or None expected)")
            params[name] = None
        elif isinstance(value, Module):
            if params is None:
                raise AttributeError("cannot assign module before Module.__init__() call")
            self._remove_from(name, d, params, self._buffers)
            self._modules[name] = value
        elif d.get("_modules") is not None and name in d["_modules"]:
            if value is not None:
                raise TypeError(f"cannot assign '{_type_name(value)}' as child module "
                                f"'{name}' (llgrad.nn.Module or None expected)")
            d["_modules"][name] = None
        elif d.get("_buffers") is not None and name in d["_buffers"]:
            if value is not None and not isinstance(value, Tensor):
                raise TypeError(f"cannot assign '{_type_name(value)}' as buffer '{name}' "
                                "(llgrad Tensor or None expected)")
            d["_buffers"][name] = value
        else:
            object.__setattr__(self, name, value)

    @staticmethod
    def _remove_from(name, d, *dicts) -> None:
        d.pop(name, None)
        for dd in dicts:
            dd.pop(name, None)

    def __getattr__(self, name: str):
        d = self.__dict__
        for key in ("_parameters", "_buffers", "_modules"):
            table = d.get(key)
            if table is not None and name in table:
                return table[name]
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __delattr__(self, name: str) -> None:
        for key in ("_parameters", "_buffers", "_modules"):
            if name in self.__dict__[key]:
                del self.__dict__[key][name]
                self._non_persistent_buffers.discard(name)
                return
        object.__delattr__(self, name)

    def __dir__(self):
        return sorted(set(super().__dir__()) | set(self._parameters) | set(self._buffers)
                      | set(self._modules))

    # -- traversal ----------------------------------------------------------------------------
    def named_modules(self, memo=None, prefix: str = "", remove_duplicate: bool = True):
        """(name, module) for this module and every descendant, depth first, each once."""
        if memo is None:
            memo = set()
        if remove_duplicate:
            if self in memo:
                return
            memo.add(self)
        yield prefix, self
        for name, module in self._modules.items():
            if module is None:
                continue
            sub = prefix + ("." if prefix else "") + name
            yield from module.named_modules(memo, sub, remove_duplicate)

    def modules(self) -> Iterator["Module"]:
        for _, m in self.named_modules():
            yield m

    def named_children(self):
        """(name, module) for the immediate children, each once."""
        seen = set()
        for name, module in self._modules.items():
            if module is not None and module not in seen:
                seen.add(module)
                yield name, module

    def children(self) -> Iterator["Module"]:
        for _, m in self.named_children():
            yield m

    def _named_members(self, get_members, prefix="", recurse=True, remove_duplicate=True):
        seen = set()
        mods = self.named_modules(prefix=prefix, remove_duplicate=remove_duplicate) \
            if recurse else [(prefix, self)]
        for mod_prefix, mod in mods:
            for k, v in get_members(mod):
                if v is None or (remove_duplicate and id(v) in seen):
                    continue
                seen.add(id(v))
                yield mod_prefix + ("." if mod_prefix else "") + k, v

    def named_parameters(self, prefix: str = "", recurse: bool = True,
                         remove_duplicate: bool = True):
        """(dotted name, Parameter) for every parameter, each shared parameter once."""
        yield from self._named_members(lambda m: m._parameters.items(), prefix, recurse,
                                       remove_duplicate)

    def parameters(self, recurse: bool = True) -> Iterator[Parameter]:
        for _, p in self.named_parameters(recurse=recurse):
            yield p

    def named_buffers(self, prefix: str = "", recurse: bool = True,
                      remove_duplicate: bool = True):
        yield from self._named_members(lambda m: m._buffers.items(), prefix, recurse,
                                       remove_duplicate)

    def buffers(self, recurse: bool = True) -> Iterator[Tensor]:
        for _, b in self.named_buffers(recurse=recurse):
            yield b

    def get_submodule(self, target: str) -> "Module":
        mod = self
        for item in target.split(".") if target else []:
            if item not in mod._modules:
                raise AttributeError(f"{type(mod).__name__} has no attribute `{item}`")
            mod = mod._modules[item]
        return mod

    def apply(self, fn) -> "Module":
        """Call `fn` on every submodule (children first) and on self; returns self."""
        for m in self.children():
            m.apply(fn)
        fn(self)
        return self

    # -- modes and gradients ------------------------------------------------------------------
    def train(self, mode: bool = True) -> "Module":
        """Set training mode on this module and its descendants (changes Dropout and the like;
        it does not change whether graphs are recorded: that is `no_grad`)."""
        if not isinstance(mode, bool):
            raise ValueError("training mode is expected to be boolean")
        self.training = mode
        for m in self.children():
            m.train(mode)
        return self

    def eval(self) -> "Module":
        """Evaluation mode: `train(False)`."""
        return self.train(False)

    def requires_grad_(self, requires_grad: bool = True) -> "Module":
        for p in self.parameters():
            p.requires_grad_(requires_grad)
        return self

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Reset the gradients of all parameters: to None (default) or to zero tensors."""
        for p in self.parameters():
            _zero_grad(p, set_to_none)

    def _apply(self, fn) -> "Module":
        with no_grad():
            for m in self.modules():
                for p in m._parameters.values():
                    if p is not None:
                        p._data = fn(p._data)
                        if p._grad is not None:
                            p._grad._data = fn(p._grad._data)
                for k, b in m._buffers.items():
                    if b is not None:
                        b._data = fn(b._data)
        return self

    def double(self) -> "Module":
        return self._apply(lambda a: a.astype(np.float64) if a.dtype.kind == "f" else a)

    def float(self) -> "Module":
        return self._apply(lambda a: a.astype(np.float32) if a.dtype.kind == "f" else a)

    def to(self, *args, **kwargs) -> "Module":
        dt = kwargs.get("dtype")
        for a in args:
            if not isinstance(a, str):
                dt = a
        if dt is None:
            return self
        from llgrad.runtime.aval import to_np
        np_dt = to_np(dt)
        return self._apply(lambda a: a.astype(np_dt) if a.dtype.kind == "f" else a)

    def cpu(self) -> "Module":
        return self

    # -- state dict ---------------------------------------------------------------------------
    def state_dict(self, destination=None, prefix: str = "", keep_vars: bool = False):
        """An OrderedDict of every parameter and persistent buffer by dotted name (detached
        tensors sharing storage with the module's, unless keep_vars=True)."""
        if destination is None:
            destination = OrderedDict()
        for name, p in self._parameters.items():
            if p is not None:
                destination[prefix + name] = p if keep_vars else p.detach()
        for name, b in self._buffers.items():
            if b is not None and name not in self._non_persistent_buffers:
                destination[prefix + name] = b if keep_vars else b.detach()
        for name, m in self._modules.items():
            if m is not None:
                m.state_dict(destination, prefix + name + ".", keep_vars)
        return destination

    def _load_from_state_dict(self, state_dict, prefix, missing, errors) -> None:
        local = {k: v for k, v in self._parameters.items() if v is not None}
        local.update((k, v) for k, v in self._buffers.items()
                     if v is not None and k not in self._non_persistent_buffers)
        for name, target in local.items():
            key = prefix + name
            if key not in state_dict:
                missing.append(key)
                continue
            src = state_dict[key]
            if not isinstance(src, Tensor):
                errors.append(f'While copying the parameter named "{key}", expected Tensor '
                              f"from checkpoint but received {type(src).__name__}")
                continue
            if tuple(src.shape) != tuple(target.shape):
                errors.append(f"size mismatch for {key}: copying a param with shape "
                              f"{list(src.shape)} from checkpoint, the shape in current model "
                              f"is {list(target.shape)}.")
                continue
            with no_grad():
                target.copy_(src)

    def load_state_dict(self, state_dict, strict: bool = True):
        """Copy parameters and buffers from `state_dict` into this module (in place).

        Returns:
            `IncompatibleKeys(missing_keys, unexpected_keys)`.
        Raises:
            RuntimeError: on shape mismatches, and with strict=True on missing or unexpected
                keys (the message lists them, as PyTorch's does).
        """
        if not isinstance(state_dict, dict):
            raise TypeError(f"Expected state_dict to be dict-like, got {type(state_dict)}.")
        missing: list = []
        errors: list = []
        expected = set()
        for mod_prefix, mod in self.named_modules(remove_duplicate=False):
            p = mod_prefix + "." if mod_prefix else ""
            mod._load_from_state_dict(state_dict, p, missing, errors)
            expected.update(p + k for k, v in mod._parameters.items() if v is not None)
            expected.update(p + k for k, v in mod._buffers.items()
                            if v is not None and k not in mod._non_persistent_buffers)
        missing = list(dict.fromkeys(missing))
        unexpected = [k for k in state_dict if k not in expected]
        if strict:
            if unexpected:
                errors.insert(0, "Unexpected key(s) in state_dict: {}. ".format(
                    ", ".join(f'"{k}"' for k in unexpected)))
            if missing:
                errors.insert(0, "Missing key(s) in state_dict: {}. ".format(
                    ", ".join(f'"{k}"' for k in missing)))
        if errors:
            raise RuntimeError("Error(s) in loading state_dict for {}:\n\t{}".format(
                type(self).__name__, "\n\t".join(errors)))
        return IncompatibleKeys(missing, unexpected)

    # -- repr ---------------------------------------------------------------------------------
    def extra_repr(self) -> str:
        """Extra text inside this module's repr parentheses (override in subclasses)."""
        return ""

    def _get_name(self) -> str:
        return type(self).__name__

    def __repr__(self) -> str:
        lines = []
        extra = self.extra_repr()
        if extra:
            lines = extra.split("\n")
        for name, module in self._modules.items():
            lines.append("(" + name + "): " + _addindent(repr(module), 2))
        main = self._get_name() + "("
        if lines:
            if len(lines) == 1 and not self._modules:
                main += lines[0]
            else:
                main += "\n  " + "\n  ".join(lines) + "\n"
        return main + ")"


def _zero_grad(p: Tensor, set_to_none: bool) -> None:
    g = p.grad
    if g is None:
        return
    if set_to_none:
        p.grad = None
        return
    if g.grad_fn is not None:
        g.detach_()
    else:
        g.requires_grad_(False)
    with no_grad():
        g.zero_()
