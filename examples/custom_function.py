"""A custom autograd Function (PyTorch's torch.autograd.Function): a numerically stable
softplus with its own backward, checked against finite differences with gradcheck."""
import numpy as np

import llgrad as lg
from llgrad.autograd import Function, gradcheck


class Softplus(Function):
    """softplus(x) = log(1 + exp(x)), computed without overflow for large x."""

    @staticmethod
    def forward(ctx, x, beta=1.0):
        ctx.save_for_backward(x)      # what backward needs, version-checked
        ctx.beta = beta               # non-tensor state goes on ctx as attributes
        bx = x * beta
        return (bx.clamp(min=0) + (-bx.abs()).exp().log1p()) / beta

    @staticmethod
    def backward(ctx, grad_output):
        x, = ctx.saved_tensors
        return grad_output * (x * ctx.beta).sigmoid(), None   # no gradient for beta


x = lg.tensor(np.linspace(-30.0, 30.0, 7), dtype=lg.float64, requires_grad=True)
y = Softplus.apply(x, 2.0)
print("y       :", y)
print("grad_fn :", y.grad_fn.name())
y.sum().backward()
print("x.grad  :", x.grad)

# gradcheck compares the analytical Jacobian with central finite differences (float64).
ok = gradcheck(lambda t: Softplus.apply(t, 2.0), (lg.randn(5, dtype=lg.float64,
                                                             requires_grad=True),))
print("gradcheck passed:", ok)
