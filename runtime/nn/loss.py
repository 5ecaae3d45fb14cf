"""Loss modules: MSELoss, CrossEntropyLoss, NLLLoss (thin wrappers over nn.functional)."""
from __future__ import annotations

from llgrad.runtime.nn import functional as F
from llgrad.runtime.nn.module import Module
from llgrad.runtime.tensor import Tensor


class _Loss(Module):
    def __init__(self, reduction: str = "mean") -> None:
        super().__init__()
        if reduction not in ("none", "mean", "sum"):
            raise ValueError(f"{reduction} is not a valid value for reduction")
        self.reduction = reduction


class MSELoss(_Loss):
    """Mean squared error; reduction 'mean' (default), 'sum' or 'none'."""

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return F.mse_loss(input, target, reduction=self.reduction)


class NLLLoss(_Loss):
    """Negative log likelihood of int64 class indices under log-probabilities."""

    def __init__(self, weight: Tensor | None = None, ignore_index: int = -100,
                 reduction: str = "mean") -> None:
        super().__init__(reduction)
        self.register_buffer("weight", weight)
        self.ignore_index = ignore_index

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return F.nll_loss(input, target, self.weight, self.ignore_index, self.reduction)


class CrossEntropyLoss(_Loss):
    """log_softmax + NLL over class-index targets (int64), or over class probabilities.

    Example:
        >>> import llgrad as lg
        >>> loss = lg.nn.CrossEntropyLoss()
        >>> loss(lg.tensor([[2.0, 0.0], [0.0, 2.0]]), lg.tensor([0, 1]))
        tensor(0.1269)
    """

    def __init__(self, weight: Tensor | None = None, ignore_index: int = -100,
                 reduction: str = "mean", label_smoothing: float = 0.0) -> None:
        super().__init__(reduction)
        self.register_buffer("weight", weight)
        self.ignore_index, self.label_smoothing = ignore_index, label_smoothing

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return F.cross_entropy(input, target, self.weight, self.ignore_index, self.reduction,
                               self.label_smoothing)
