"""`llgrad.optim.lr_scheduler`: learning-rate schedules as PyTorch's: LRScheduler, LambdaLR,
StepLR, MultiStepLR, ExponentialLR, CosineAnnealingLR, ReduceLROnPlateau, OneCycleLR.

Each keeps PyTorch's state (`last_epoch`, `base_lrs`, `_step_count`, `_last_lr`, ...), its
recursive ("chainable") formulas, which update `group['lr']` from its current value (so
schedulers compose, and the rounding is PyTorch's), and its closed forms for
`step(epoch)`. Constructing a scheduler performs its first step (last_epoch becomes 0).
"""
from __future__ import annotations

import math
import types
import warnings
import weakref
from bisect import bisect_right
from collections import Counter
from functools import wraps

from llgrad.runtime.optim.optimizer import Optimizer

__all__ = ["LRScheduler", "LambdaLR", "StepLR", "MultiStepLR", "ExponentialLR",
           "CosineAnnealingLR", "ReduceLROnPlateau", "OneCycleLR"]


def _wrap_step(opt: Optimizer) -> None:
    """Mark the optimizer when its step() runs, to warn about schedulers stepped first."""
    if hasattr(opt.step, "_wrapped_by_lr_sched"):
        return
    ref, func = weakref.ref(opt), type(opt).step

    @wraps(func)
    def step(*args, **kwargs):
        o = ref()
        o._opt_called = True
        return func(o, *args, **kwargs)
    step._wrapped_by_lr_sched = True
    opt.step = step


class LRScheduler:
    """Base class: sets each group's 'initial_lr' (when last_epoch == -1), keeps `base_lrs`,
    and makes the first step. Subclasses give `get_lr()` (the chainable form) and optionally
    `_get_closed_form_lr()`.

    Args:
        optimizer: the optimizer whose param_groups' 'lr' this scheduler sets.
        last_epoch: the index of the last epoch (-1 to start; else resume, which needs
            'initial_lr' in every group).
    """

    _is_initial = False

    def __init__(self, optimizer: Optimizer, last_epoch: int = -1) -> None:
        if not isinstance(optimizer, Optimizer):
            raise TypeError(f"{type(optimizer).__name__} is not an Optimizer")
        self.optimizer = optimizer
        if last_epoch == -1:
            for group in optimizer.param_groups:
                group.setdefault("initial_lr", group["lr"])
        else:
            for i, group in enumerate(optimizer.param_groups):
                if "initial_lr" not in group:
                    raise KeyError(f"param 'initial_lr' is not specified in param_groups[{i}] "
                                   "when resuming scheduler with last_epoch >= 0")
        self.base_lrs = [group["initial_lr"] for group in optimizer.param_groups]
        self.last_epoch = last_epoch
        _wrap_step(optimizer)
        self._step_count = 0
        self._is_initial = True
        try:
            self.step()
        finally:
            self._is_initial = False

    def get_lr(self) -> list:
        """The next learning rate of each group (the chainable form)."""
        raise NotImplementedError

    def get_last_lr(self) -> list:
        """The learning rates the last step set, one per parameter group."""
        return self._last_lr

    def step(self, epoch: int | None = None) -> None:
        """Advance one epoch (or, deprecated, jump to `epoch` by the closed form) and set each
        group's 'lr'. Call it after optimizer.step()."""
        if self._step_count == 1 and not getattr(self.optimizer, "_opt_called", False):
            warnings.warn("Detected call of `lr_scheduler.step()` before `optimizer.step()`. "
                          "You should call them in the opposite order: `optimizer.step()` "
                          "before `lr_scheduler.step()`. Failure to do this will result in "
                          "skipping the first value of the learning rate schedule.",
                          UserWarning, stacklevel=2)
        self._step_count += 1
        if epoch is None:
            self.last_epoch += 1
            values = self.get_lr()
        else:
            warnings.warn("The epoch parameter in `scheduler.step()` is deprecated; call "
                          "`scheduler.step()` without it.", UserWarning, stacklevel=2)
            self.last_epoch = epoch
            closed = getattr(self, "_get_closed_form_lr", None)
            values = closed() if closed is not None else self.get_lr()
        for group, lr in zip(self.optimizer.param_groups, values):
            group["lr"] = lr
        self._last_lr = [group["lr"] for group in self.optimizer.param_groups]

    def state_dict(self) -> dict:
        """Every attribute but the optimizer."""
        return {k: v for k, v in self.__dict__.items() if k != "optimizer"}

    def load_state_dict(self, state_dict: dict) -> None:
        self.__dict__.update(state_dict)

    def _lrs(self) -> list:
        return [group["lr"] for group in self.optimizer.param_groups]


class LambdaLR(LRScheduler):
    """lr = initial_lr * lr_lambda(epoch), one function or one per parameter group.

    Example:
        >>> import llgrad as lg
        >>> opt = lg.optim.SGD([lg.zeros(1, requires_grad=True)], lr=1.0)
        >>> sched = lg.optim.lr_scheduler.LambdaLR(opt, lambda e: 0.5 ** e)
        >>> opt.step(); sched.step(); sched.get_last_lr()
        [0.5]
    """

    def __init__(self, optimizer: Optimizer, lr_lambda, last_epoch: int = -1) -> None:
        n = len(optimizer.param_groups)
        if isinstance(lr_lambda, (list, tuple)):
            if len(lr_lambda) != n:
                raise ValueError(f"Expected {n} lr_lambdas, but got {len(lr_lambda)}")
            self.lr_lambdas = list(lr_lambda)
        else:
            self.lr_lambdas = [lr_lambda] * n
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list:
        return [base * f(self.last_epoch) for f, base in zip(self.lr_lambdas, self.base_lrs)]

    def state_dict(self) -> dict:
        """As the base's; functions are not saved, callable objects' attributes are."""
        state = {k: v for k, v in self.__dict__.items() if k not in ("optimizer", "lr_lambdas")}
        state["lr_lambdas"] = [None if isinstance(f, types.FunctionType) else f.__dict__.copy()
                               for f in self.lr_lambdas]
        return state

    def load_state_dict(self, state_dict: dict) -> None:
        state = dict(state_dict)
        lambdas = state.pop("lr_lambdas")
        self.__dict__.update(state)
        for f, saved in zip(self.lr_lambdas, lambdas):
            if saved is not None:
                f.__dict__.update(saved)


class StepLR(LRScheduler):
    """Multiply lr by gamma every step_size epochs."""

    def __init__(self, optimizer: Optimizer, step_size: int, gamma: float = 0.1,
                 last_epoch: int = -1) -> None:
        self.step_size, self.gamma = step_size, gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list:
        if self.last_epoch == 0 or self.last_epoch % self.step_size:
            return self._lrs()
        return [lr * self.gamma for lr in self._lrs()]

    def _get_closed_form_lr(self) -> list:
        return [b * self.gamma ** (self.last_epoch // self.step_size) for b in self.base_lrs]


class MultiStepLR(LRScheduler):
    """Multiply lr by gamma at each milestone epoch (a repeated milestone counts twice)."""

    def __init__(self, optimizer: Optimizer, milestones, gamma: float = 0.1,
                 last_epoch: int = -1) -> None:
        self.milestones, self.gamma = Counter(milestones), gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list:
        if self.last_epoch not in self.milestones:
            return self._lrs()
        return [lr * self.gamma ** self.milestones[self.last_epoch] for lr in self._lrs()]

    def _get_closed_form_lr(self) -> list:
        ms = sorted(self.milestones.elements())
        return [b * self.gamma ** bisect_right(ms, self.last_epoch) for b in self.base_lrs]


class ExponentialLR(LRScheduler):
    """Multiply lr by gamma every epoch."""

    def __init__(self, optimizer: Optimizer, gamma: float, last_epoch: int = -1) -> None:
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list:
        if self._is_initial:
            return self._lrs()
        return [lr * self.gamma for lr in self._lrs()]

    def _get_closed_form_lr(self) -> list:
        return [b * self.gamma ** self.last_epoch for b in self.base_lrs]


class CosineAnnealingLR(LRScheduler):
    """lr = eta_min + (initial_lr - eta_min) (1 + cos(pi epoch / T_max)) / 2, computed
    recursively from the current lr as PyTorch does (and continuing past T_max)."""

    def __init__(self, optimizer: Optimizer, T_max: int, eta_min: float = 0.0,
                 last_epoch: int = -1) -> None:
        self.T_max, self.eta_min = T_max, eta_min
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list:
        e, t, lo = self.last_epoch, self.T_max, self.eta_min
        if self._is_initial:
            return self._lrs()
        if self._step_count == 1 and e > 0:
            return [lo + (b - lo) * (1 + math.cos(e * math.pi / t)) / 2 for b in self.base_lrs]
        if (e - 1 - t) % (2 * t) == 0:
            return [lr + (b - lo) * (1 - math.cos(math.pi / t)) / 2
                    for b, lr in zip(self.base_lrs, self._lrs())]
        return [(1 + math.cos(math.pi * e / t)) / (1 + math.cos(math.pi * (e - 1) / t))
                * (lr - lo) + lo for lr in self._lrs()]

    def _get_closed_form_lr(self) -> list:
        lo = self.eta_min
        return [lo + (b - lo) * (1 + math.cos(math.pi * self.last_epoch / self.T_max)) / 2
                for b in self.base_lrs]


class ReduceLROnPlateau(LRScheduler):
    """Multiply lr by `factor` when the metric passed to step() has not improved (by more
    than `threshold`, relative or absolute) for more than `patience` epochs; then wait
    `cooldown` epochs; never below min_lr (changes smaller than eps are skipped)."""

    def __init__(self, optimizer: Optimizer, mode: str = "min", factor: float = 0.1,
                 patience: int = 10, threshold: float = 1e-4, threshold_mode: str = "rel",
                 cooldown: int = 0, min_lr=0, eps: float = 1e-8) -> None:
        if factor >= 1.0:
            raise ValueError("Factor should be < 1.0.")
        if not isinstance(optimizer, Optimizer):
            raise TypeError(f"{type(optimizer).__name__} is not an Optimizer")
        if mode not in ("min", "max"):
            raise ValueError("mode " + mode + " is unknown!")
        if threshold_mode not in ("rel", "abs"):
            raise ValueError("threshold mode " + threshold_mode + " is unknown!")
        n = len(optimizer.param_groups)
        if isinstance(min_lr, (list, tuple)):
            if len(min_lr) != n:
                raise ValueError(f"expected {n} min_lrs, got {len(min_lr)}")
            self.default_min_lr, self.min_lrs = None, list(min_lr)
        else:
            self.default_min_lr, self.min_lrs = min_lr, [min_lr] * n
        self.optimizer, self.factor, self.patience = optimizer, factor, patience
        self.cooldown, self.eps, self.last_epoch = cooldown, eps, 0
        self.mode, self.threshold, self.threshold_mode = mode, threshold, threshold_mode
        self.mode_worse = math.inf if mode == "min" else -math.inf
        self._last_lr = self._lrs()
        self.best, self.cooldown_counter, self.num_bad_epochs = self.mode_worse, 0, 0

    @property
    def in_cooldown(self) -> bool:
        return self.cooldown_counter > 0

    def is_better(self, a: float, best: float) -> bool:
        if self.mode == "min":
            return a < (best * (1.0 - self.threshold) if self.threshold_mode == "rel"
                        else best - self.threshold)
        return a > (best * (self.threshold + 1.0) if self.threshold_mode == "rel"
                    else best + self.threshold)

    def step(self, metrics, epoch=None) -> None:
        """Record `metrics` (a float or 0-d tensor) for one epoch; reduce lr on a plateau."""
        current = float(metrics)
        self.last_epoch = self.last_epoch + 1 if epoch is None else epoch
        if self.is_better(current, self.best):
            self.best, self.num_bad_epochs = current, 0
        else:
            self.num_bad_epochs += 1
        if self.in_cooldown:
            self.cooldown_counter -= 1
            self.num_bad_epochs = 0
        if self.num_bad_epochs > self.patience:
            if len(self.min_lrs) != len(self.optimizer.param_groups):
                if self.default_min_lr is None:
                    raise RuntimeError("The number of param groups in the optimizer differs "
                                       "from when ReduceLROnPlateau was initialized; set "
                                       "`min_lrs` to match")
                self.min_lrs = [self.default_min_lr] * len(self.optimizer.param_groups)
            for i, group in enumerate(self.optimizer.param_groups):
                old = float(group["lr"])
                new = max(old * self.factor, self.min_lrs[i])
                if old - new > self.eps:
                    group["lr"] = new
            self.cooldown_counter, self.num_bad_epochs = self.cooldown, 0
        self._last_lr = self._lrs()


class OneCycleLR(LRScheduler):
    """The 1cycle policy (Smith & Topin): lr rises from max_lr/div_factor to max_lr over
    pct_start of total_steps, then anneals to initial_lr/final_div_factor (three_phase:
    back to initial_lr first); momentum (or Adam's beta1) cycles inversely between
    max_momentum and base_momentum. Step it after every batch."""

    def __init__(self, optimizer: Optimizer, max_lr, total_steps: int | None = None,
                 epochs: int | None = None, steps_per_epoch: int | None = None,
                 pct_start: float = 0.3, anneal_strategy: str = "cos",
                 cycle_momentum: bool = True, base_momentum=0.85, max_momentum=0.95,
                 div_factor: float = 25.0, final_div_factor: float = 1e4,
                 three_phase: bool = False, last_epoch: int = -1) -> None:
        if not isinstance(optimizer, Optimizer):
            raise TypeError(f"{type(optimizer).__name__} is not an Optimizer")
        if total_steps is not None:
            if not isinstance(total_steps, int) or total_steps <= 0:
                raise ValueError(f"Expected positive integer total_steps, but got {total_steps}")
            self.total_steps = total_steps
        elif epochs is not None and steps_per_epoch is not None:
            if not isinstance(epochs, int) or epochs <= 0:
                raise ValueError(f"Expected positive integer epochs, but got {epochs}")
            if not isinstance(steps_per_epoch, int) or steps_per_epoch <= 0:
                raise ValueError(f"Expected positive integer steps_per_epoch, but got "
                                 f"{steps_per_epoch}")
            self.total_steps = epochs * steps_per_epoch
        else:
            raise ValueError("You must define either total_steps OR (epochs AND "
                             "steps_per_epoch)")
        if not isinstance(pct_start, float) or not 0 <= pct_start <= 1:
            raise ValueError(f"Expected float between 0 and 1 pct_start, but got {pct_start}")
        if anneal_strategy not in ("cos", "linear"):
            raise ValueError(f"anneal_strategy must be one of 'cos' or 'linear', instead got "
                             f"{anneal_strategy}")
        n, up = self.total_steps, float(pct_start * self.total_steps) - 1
        self._schedule_phases = [
            dict(end_step=up, start_lr="initial_lr", end_lr="max_lr",
                 start_momentum="max_momentum", end_momentum="base_momentum"),
            dict(end_step=float(2 * pct_start * n) - 2, start_lr="max_lr",
                 end_lr="initial_lr", start_momentum="base_momentum",
                 end_momentum="max_momentum"),
            dict(end_step=n - 1, start_lr="initial_lr", end_lr="min_lr",
                 start_momentum="max_momentum", end_momentum="max_momentum"),
        ] if three_phase else [
            dict(end_step=up, start_lr="initial_lr", end_lr="max_lr",
                 start_momentum="max_momentum", end_momentum="base_momentum"),
            dict(end_step=n - 1, start_lr="max_lr", end_lr="min_lr",
                 start_momentum="base_momentum", end_momentum="max_momentum"),
        ]
        self._anneal_func_type = anneal_strategy
        groups = optimizer.param_groups
        if last_epoch == -1:
            for group, m in zip(groups, _per_group("max_lr", groups, max_lr)):
                group["initial_lr"] = m / div_factor
                group["max_lr"] = m
                group["min_lr"] = group["initial_lr"] / final_div_factor
        self.cycle_momentum = cycle_momentum
        if cycle_momentum:
            if "momentum" not in optimizer.defaults and "betas" not in optimizer.defaults:
                raise ValueError("optimizer must support momentum or beta1 with "
                                 "`cycle_momentum` option enabled")
            self.use_beta1 = "betas" in optimizer.defaults
            if last_epoch == -1:
                for group, hi, lo in zip(groups, _per_group("max_momentum", groups, max_momentum),
                                         _per_group("base_momentum", groups, base_momentum)):
                    self._set_momentum(group, hi)
                    group["max_momentum"], group["base_momentum"] = hi, lo
        super().__init__(optimizer, last_epoch)

    def _set_momentum(self, group: dict, m: float) -> None:
        if self.use_beta1:
            group["betas"] = (m, *group["betas"][1:])
        else:
            group["momentum"] = m

    def _anneal(self, start: float, end: float, pct: float) -> float:
        if self._anneal_func_type == "cos":
            return end + (start - end) / 2.0 * (math.cos(math.pi * pct) + 1)
        return (end - start) * pct + start

    def get_lr(self) -> list:
        step = self.last_epoch
        if step > self.total_steps:
            raise ValueError(f"Tried to step {step} times. The specified number of total steps "
                             f"is {self.total_steps}")
        lrs = []
        for group in self.optimizer.param_groups:
            start = 0.0
            for i, phase in enumerate(self._schedule_phases):
                end = phase["end_step"]
                if step <= end or i == len(self._schedule_phases) - 1:
                    pct = (step - start) / (end - start)
                    lrs.append(self._anneal(group[phase["start_lr"]], group[phase["end_lr"]],
                                            pct))
                    if self.cycle_momentum:
                        self._set_momentum(group, self._anneal(
                            group[phase["start_momentum"]], group[phase["end_momentum"]], pct))
                    break
                start = end
        return lrs


def _per_group(name: str, groups: list, value) -> list:
    if isinstance(value, (list, tuple)):
        if len(value) != len(groups):
            raise ValueError(f"{name} must have the same length as optimizer.param_groups. "
                             f"{name} has {len(value)} values, param_groups has {len(groups)}.")
        return list(value)
    return [value] * len(groups)
