"""`Optimizer`, the base of SGD and Adam: parameter groups, per-parameter state, zero_grad,
and state_dict()/load_state_dict() in PyTorch's layout.

Updates run under no_grad and change parameters in place (their version counters advance,
as in PyTorch).
"""
from __future__ import annotations

import copy
from collections import defaultdict

from llgrad.runtime.autograd.grad_mode import no_grad
from llgrad.runtime.nn.module import _zero_grad
from llgrad.runtime.tensor import Tensor


class _Required:
    def __repr__(self) -> str:
        return "<required parameter>"


required = _Required()


def check_hyper(**values) -> None:
    """PyTorch's constructor checks: each hyperparameter given must be >= 0."""
    for name, v in values.items():
        if v is not required and v < 0.0:
            word = {"lr": "learning rate", "eps": "epsilon value"}.get(name, f"{name} value")
            raise ValueError(f"Invalid {word}: {v}")


def lerp_(t: Tensor, end: Tensor, weight: float) -> Tensor:
    """t += weight (end - t) in place, rounded as PyTorch's lerp_ (from `end` for weight >=
    0.5)."""
    if weight < 0.5:
        return t.add_(end - t, alpha=weight)
    return t.copy_(end - (end - t) * (1 - weight))


class Optimizer:
    """Base class: holds `param_groups` (a list of dicts, each with 'params' and the
    hyperparameters) and `state` (a dict from parameter to its buffers).

    Args:
        params: an iterable of Tensors, or of dicts defining parameter groups (a group's own
            keys override `defaults`).
        defaults: the default hyperparameters.
    """

    def __init__(self, params, defaults: dict) -> None:
        self.defaults = defaults
        self.state: dict = defaultdict(dict)
        self.param_groups: list[dict] = []
        if isinstance(params, Tensor):
            raise TypeError("params argument given to the optimizer should be an iterable of "
                            f"Tensors or dicts, but got {params.dtype!r} Tensor")
        if isinstance(params, dict):
            raise TypeError("params argument given to the optimizer should be an iterable of "
                            "Tensors or dicts, but got dict; wrap a single group in a list")
        groups = list(params)
        if not groups:
            raise ValueError("optimizer got an empty parameter list")
        if not isinstance(groups[0], dict):
            groups = [{"params": groups}]
        for g in groups:
            self.add_param_group(g)

    def add_param_group(self, param_group: dict) -> None:
        """Add a group of parameters (with optional per-group hyperparameters)."""
        if not isinstance(param_group, dict):
            raise TypeError(f"param_group must be a dict, but got {type(param_group).__name__}")
        params = param_group["params"]
        if isinstance(params, Tensor):
            params = [params]
        elif isinstance(params, set):
            raise TypeError("optimizer parameters need to be organized in ordered collections, "
                            "but the ordering of tensors in sets will change between runs. "
                            "Please use a list instead.")
        else:
            params = list(params)
        for p in params:
            if not isinstance(p, Tensor):
                raise TypeError(f"optimizer can only optimize Tensors, but one of the params "
                                f"is {type(p).__name__}")
            if not p.is_leaf:
                raise ValueError("can't optimize a non-leaf Tensor")
        group = dict(param_group, params=params)
        for name, default in self.defaults.items():
            if default is required and name not in group:
                raise ValueError(f"parameter group didn't specify a value of required "
                                 f"optimization parameter {name}")
            group.setdefault(name, default)
        seen = {id(p) for g in self.param_groups for p in g["params"]}
        if len({id(p) for p in params}) != len(params):
            import warnings
            warnings.warn("optimizer contains a parameter group with duplicate parameters; in "
                          "future, this will cause an error", stacklevel=3)
        if any(id(p) in seen for p in params):
            raise ValueError("some parameters appear in more than one parameter group")
        self.param_groups.append(group)

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Reset the gradients of all optimized parameters: to None (default) or to zeros."""
        for group in self.param_groups:
            for p in group["params"]:
                _zero_grad(p, set_to_none)

    def step(self, closure=None):
        """Perform one optimization step; `closure` re-evaluates the model and returns the
        loss (it runs with grad enabled)."""
        loss = None
        if closure is not None:
            from llgrad.runtime.autograd.grad_mode import enable_grad
            with enable_grad():
                loss = closure()
        with no_grad():
            for group in self.param_groups:
                for p in group["params"]:
                    if p.grad is not None:
                        self._update(p, p.grad.detach(), self.state[p], group)
        return loss

    def _update(self, p: Tensor, grad: Tensor, state: dict, group: dict) -> None:
        raise NotImplementedError

    # -- state dict ---------------------------------------------------------------------------
    def state_dict(self) -> dict:
        """{'state': {index: {...}}, 'param_groups': [{..., 'params': [index, ...]}]}, where
        parameters are numbered in group order, as in PyTorch (the tensors are not copied)."""
        index, groups, start = {}, [], 0
        for g in self.param_groups:
            ids = list(range(start, start + len(g["params"])))
            index.update((id(p), i) for p, i in zip(g["params"], ids))
            groups.append(dict({k: v for k, v in g.items() if k != "params"}, params=ids))
            start += len(ids)
        state = {index[id(p)]: s for p, s in self.state.items() if id(p) in index}
        return {"state": state, "param_groups": groups}

    def load_state_dict(self, state_dict: dict) -> None:
        """Restore hyperparameters and state saved by `state_dict()` (the state is deep
        copied; tensors are cast to their parameter's dtype)."""
        state_dict = copy.deepcopy(state_dict)
        groups, saved = self.param_groups, state_dict["param_groups"]
        if len(groups) != len(saved):
            raise ValueError("loaded state dict has a different number of parameter groups")
        if any(len(g["params"]) != len(s["params"]) for g, s in zip(groups, saved)):
            raise ValueError("loaded state dict contains a parameter group that doesn't match "
                             "the size of optimizer's group")
        id_map = {i: p for g, s in zip(groups, saved) for i, p in zip(s["params"], g["params"])}
        self.state = defaultdict(dict)
        for k, v in state_dict["state"].items():
            if k in id_map:
                p = id_map[k]
                self.state[p] = {
                    name: val.to(p.dtype) if isinstance(val, Tensor) and name != "step"
                    and val.is_floating_point() else val
                    for name, val in v.items()}
        self.param_groups = [dict(s, params=g["params"]) for g, s in zip(groups, saved)]

    def __repr__(self) -> str:
        text = type(self).__name__ + " ("
        for i, group in enumerate(self.param_groups):
            text += f"\nParameter Group {i}"
            for key in sorted(group):
                if key != "params":
                    text += f"\n    {key}: {group[key]}"
        return text + "\n)"

    def __getstate__(self):
        return {"defaults": self.defaults, "state": self.state,
                "param_groups": self.param_groups}

    def __setstate__(self, state):
        self.__dict__.update(state)
