"""Stochastic gradient descent with momentum, dampening, Nesterov and weight decay."""
from __future__ import annotations

from llgrad.runtime.optim.optimizer import Optimizer, required
from llgrad.runtime.tensor import Tensor


class SGD(Optimizer):
    """PyTorch's SGD: with g = grad + weight_decay * p,
    buf = g (first step) or momentum * buf + (1 - dampening) * g,
    update = g + momentum * buf (nesterov) or buf (momentum) or g, and p -= lr * update
    (p += lr * update with maximize=True).

    Example:
        >>> import llgrad as lg
        >>> w = lg.tensor([1.0], requires_grad=True)
        >>> opt = lg.optim.SGD([w], lr=0.1)
        >>> (w * 2).sum().backward(); opt.step(); w
        tensor([0.8000], requires_grad=True)
    """

    def __init__(self, params, lr: float = required, momentum: float = 0, dampening: float = 0,
                 weight_decay: float = 0, nesterov: bool = False, *, maximize: bool = False):
        if lr is not required and lr < 0.0:
            raise ValueError(f"Invalid learning rate: {lr}")
        if momentum < 0.0:
            raise ValueError(f"Invalid momentum value: {momentum}")
        if weight_decay < 0.0:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("Nesterov momentum requires a momentum and zero dampening")
        super().__init__(params, dict(lr=lr, momentum=momentum, dampening=dampening,
                                      weight_decay=weight_decay, nesterov=nesterov,
                                      maximize=maximize))

    def _update(self, p: Tensor, grad: Tensor, state: dict, group: dict) -> None:
        if group["maximize"]:
            grad = -grad
        if group["weight_decay"]:
            grad = grad.add(p, alpha=group["weight_decay"])
        momentum = group["momentum"]
        if momentum:
            buf = state.get("momentum_buffer")
            if buf is None:
                buf = state["momentum_buffer"] = grad.clone()
            else:
                buf.mul_(momentum).add_(grad, alpha=1 - group["dampening"])
            grad = grad.add(buf, alpha=momentum) if group["nesterov"] else buf
        p.add_(grad, alpha=-group["lr"])
