"""RMSprop (Hinton's, with PyTorch's centered and momentum variants) and Adagrad (Duchi et
al., 2011), with PyTorch's update order so float32 results round as PyTorch's do."""
from __future__ import annotations

import numpy as np

from llgrad.runtime.optim.optimizer import Optimizer, check_hyper, lerp_
from llgrad.runtime.tensor import Tensor


def _step_state(state: dict) -> float:
    """Advance the 'step' count (a 0-d float32 tensor, as PyTorch keeps it); return it."""
    if "step" not in state:
        state["step"] = Tensor._wrap(np.zeros((), np.float32))
    state["step"].add_(1)
    return float(state["step"].item())


class RMSprop(Optimizer):
    """PyTorch's RMSprop. With g = grad + weight_decay * p:
    v = alpha v + (1 - alpha) g^2; centered: m = lerp(m, g, 1 - alpha), avg = sqrt(v - m^2),
    else avg = sqrt(v); avg += eps; with momentum: buf = momentum buf + g / avg,
    p -= lr buf; else p -= lr g / avg.

    State per parameter: 'step', 'square_avg' (and 'momentum_buffer', 'grad_avg').
    """

    def __init__(self, params, lr: float = 1e-2, alpha: float = 0.99, eps: float = 1e-8,
                 weight_decay: float = 0, momentum: float = 0, centered: bool = False,
                 capturable: bool = False, foreach=None, maximize: bool = False,
                 differentiable: bool = False):
        check_hyper(lr=lr, eps=eps, momentum=momentum, weight_decay=weight_decay, alpha=alpha)
        super().__init__(params, dict(lr=lr, alpha=alpha, eps=eps, weight_decay=weight_decay,
                                      momentum=momentum, centered=centered, maximize=maximize,
                                      capturable=capturable, foreach=foreach,
                                      differentiable=differentiable))

    def _update(self, p: Tensor, grad: Tensor, state: dict, group: dict) -> None:
        if not state:
            state["square_avg"] = Tensor._wrap(np.zeros_like(p._data))
            if group["momentum"] > 0:
                state["momentum_buffer"] = Tensor._wrap(np.zeros_like(p._data))
            if group["centered"]:
                state["grad_avg"] = Tensor._wrap(np.zeros_like(p._data))
        _step_state(state)
        alpha, eps, lr = group["alpha"], group["eps"], group["lr"]
        if group["maximize"]:
            grad = -grad
        if group["weight_decay"]:
            grad = grad.add(p, alpha=group["weight_decay"])
        square_avg = state["square_avg"]
        square_avg.mul_(alpha).add_(grad * (1 - alpha) * grad)
        if group["centered"]:
            grad_avg = state["grad_avg"]
            lerp_(grad_avg, grad, 1 - alpha)
            avg = (square_avg - grad_avg * grad_avg).sqrt()
        else:
            avg = square_avg.sqrt()
        avg = avg.add(eps)
        if group["momentum"] > 0:
            buf = state["momentum_buffer"]
            buf.mul_(group["momentum"]).add_(grad / avg)
            p.add_(buf, alpha=-lr)
        else:
            p.add_(grad / avg, alpha=-lr)


class Adagrad(Optimizer):
    """PyTorch's Adagrad. With g = grad + weight_decay * p and t the step count:
    clr = lr / (1 + (t - 1) lr_decay); sum += g^2; p -= clr g / (sqrt(sum) + eps).

    State per parameter: 'step', 'sum' (starting at initial_accumulator_value).
    """

    def __init__(self, params, lr: float = 1e-2, lr_decay: float = 0, weight_decay: float = 0,
                 initial_accumulator_value: float = 0, eps: float = 1e-10, foreach=None, *,
                 maximize: bool = False, differentiable: bool = False, fused=None):
        check_hyper(lr=lr, eps=eps, weight_decay=weight_decay, lr_decay=lr_decay,
                    initial_accumulator_value=initial_accumulator_value)
        super().__init__(params, dict(lr=lr, lr_decay=lr_decay, eps=eps,
                                      weight_decay=weight_decay,
                                      initial_accumulator_value=initial_accumulator_value,
                                      foreach=foreach, maximize=maximize,
                                      differentiable=differentiable, fused=fused))
        for group in self.param_groups:  # PyTorch makes the state at construction
            for p in group["params"]:
                self.state[p]["step"] = Tensor._wrap(np.zeros((), np.float32))
                self.state[p]["sum"] = Tensor._wrap(
                    np.full_like(p._data, group["initial_accumulator_value"]))

    def _update(self, p: Tensor, grad: Tensor, state: dict, group: dict) -> None:
        if "sum" not in state:  # a parameter group added after construction
            state["sum"] = Tensor._wrap(np.full_like(p._data, group["initial_accumulator_value"]))
        step = _step_state(state)
        if group["maximize"]:
            grad = -grad
        if group["weight_decay"]:
            grad = grad.add(p, alpha=group["weight_decay"])
        clr = group["lr"] / (1 + (step - 1) * group["lr_decay"])
        state["sum"].add_(grad * grad)
        std = state["sum"].sqrt().add(group["eps"])
        p.add_(grad / std, alpha=-clr)

