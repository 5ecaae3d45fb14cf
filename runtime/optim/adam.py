"""Adam (Kingma & Ba, 2015) with L2 weight decay, AMSGrad and maximize, as PyTorch's; AdamW
(decoupled weight decay). The update rounds as PyTorch's (lerp for the first moment)."""
from __future__ import annotations

import math

import numpy as np

from llgrad.runtime.optim.optimizer import Optimizer, lerp_
from llgrad.runtime.tensor import Tensor


class Adam(Optimizer):
    """PyTorch's Adam. With g = grad + weight_decay * p and t the step count:
    m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2;
    p -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps).

    State per parameter: 'step' (a 0-d float32 tensor), 'exp_avg', 'exp_avg_sq' (and
    'max_exp_avg_sq' with amsgrad).
    """

    _decoupled = False

    def __init__(self, params, lr: float = 1e-3, betas=(0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0, amsgrad: bool = False, *, maximize: bool = False):
        if not 0.0 <= lr:
            raise ValueError(f"Invalid learning rate: {lr}")
        if not 0.0 <= eps:
            raise ValueError(f"Invalid epsilon value: {eps}")
        for i in (0, 1):
            if not 0.0 <= betas[i] < 1.0:
                raise ValueError(f"Invalid beta parameter at index {i}: {betas[i]}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps,
                                      weight_decay=weight_decay, amsgrad=amsgrad,
                                      maximize=maximize))

    def _update(self, p: Tensor, grad: Tensor, state: dict, group: dict) -> None:
        if not state:
            state["step"] = Tensor._wrap(np.zeros((), np.float32))
            state["exp_avg"] = Tensor._wrap(np.zeros_like(p._data))
            state["exp_avg_sq"] = Tensor._wrap(np.zeros_like(p._data))
            if group["amsgrad"]:
                state["max_exp_avg_sq"] = Tensor._wrap(np.zeros_like(p._data))
        lr, (beta1, beta2), eps = group["lr"], group["betas"], group["eps"]
        if group["maximize"]:
            grad = -grad
        wd = group["weight_decay"]
        if wd:
            if self._decoupled:
                p.mul_(1 - lr * wd)
            else:
                grad = grad.add(p, alpha=wd)
        state["step"].add_(1)
        step = float(state["step"].item())
        exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
        lerp_(exp_avg, grad, 1 - beta1)  # PyTorch's order of rounding
        exp_avg_sq.mul_(beta2).add_(grad * (1 - beta2) * grad)
        bias1, bias2 = 1 - beta1 ** step, 1 - beta2 ** step
        if group["amsgrad"]:
            state["max_exp_avg_sq"].copy_(state["max_exp_avg_sq"].maximum(exp_avg_sq))
            second = state["max_exp_avg_sq"]
        else:
            second = exp_avg_sq
        denom = (second.sqrt() / math.sqrt(bias2)).add(eps)
        p.add_(exp_avg / denom, alpha=-lr / bias1)


class AdamW(Adam):
    """Adam with decoupled weight decay: p *= 1 - lr * weight_decay before the Adam step
    (default weight_decay=1e-2)."""

    _decoupled = True

    def __init__(self, params, lr: float = 1e-3, betas=(0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 1e-2, amsgrad: bool = False, *, maximize: bool = False):
        super().__init__(params, lr, betas, eps, weight_decay, amsgrad, maximize=maximize)
