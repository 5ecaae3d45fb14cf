"""Custom autograd Functions: ctx API, several outputs, non-tensor arguments, and the errors
for wrong gradients (PyTorch's documentation examples run unchanged apart from the import)."""
from __future__ import annotations

import numpy as np
import pytest

import llgrad as lg
from llgrad.autograd import Function


class Exp(Function):
    @staticmethod
    def forward(ctx, i):
        result = i.exp()
        ctx.save_for_backward(result)
        return result

    @staticmethod
    def backward(ctx, grad_output):
        result, = ctx.saved_tensors
        return grad_output * result


class LinearFunction(Function):
    """PyTorch's docs example (Extending torch.autograd)."""

    @staticmethod
    def forward(ctx, input, weight, bias=None):
        ctx.save_for_backward(input, weight, bias)
        output = input.mm(weight.t())
        if bias is not None:
            output += bias.unsqueeze(0).expand_as(output)
        return output

    @staticmethod
    def backward(ctx, grad_output):
        input, weight, bias = ctx.saved_tensors
        grad_input = grad_weight = grad_bias = None
        if ctx.needs_input_grad[0]:
            grad_input = grad_output.mm(weight)
        if ctx.needs_input_grad[1]:
            grad_weight = grad_output.t().mm(input)
        if bias is not None and ctx.needs_input_grad[2]:
            grad_bias = grad_output.sum(0)
        return grad_input, grad_weight, grad_bias


class MulConstant(Function):
    @staticmethod
    def forward(ctx, tensor, constant):
        ctx.constant = constant
        return tensor * constant

    @staticmethod
    def backward(ctx, grad_output):
        return grad_output * ctx.constant, None


def test_exp_function_repr_and_grad():
    x = lg.tensor([1.0], requires_grad=True)
    y = Exp.apply(x)
    assert repr(y) == "tensor([2.7183], grad_fn=<ExpBackward>)"
    assert y.grad_fn.name() == "ExpBackward" and type(y.grad_fn).__name__ == "ExpBackward"
    assert y.grad_fn.next_functions[0][0].variable is x
    y.backward()
    assert repr(x.grad) == "tensor([2.7183])"


def test_linear_function_docs_example():
    lg.manual_seed(0)
    x = lg.randn(4, 3, dtype=lg.float64, requires_grad=True)
    w = lg.randn(2, 3, dtype=lg.float64, requires_grad=True)
    b = lg.randn(2, dtype=lg.float64, requires_grad=True)
    out = LinearFunction.apply(x, w, b)
    ref = x @ w.t() + b
    np.testing.assert_allclose(out.detach().numpy(), ref.detach().numpy())
    g = lg.randn(4, 2, dtype=lg.float64)
    got = lg.autograd.grad(out, (x, w, b), g)
    want = lg.autograd.grad(ref, (x, w, b), g)
    for a, e in zip(got, want):
        np.testing.assert_allclose(a.numpy(), e.numpy())
    # without bias (a None argument) and with an input not requiring grad
    out = LinearFunction.apply(x.detach(), w)
    (gw,) = lg.autograd.grad(out.sum(), w)
    np.testing.assert_allclose(gw.numpy(), np.ones((4, 2)).T @ x.detach().numpy())


def test_non_tensor_argument_and_ctx_attribute():
    x = lg.tensor([2.0], requires_grad=True)
    y = MulConstant.apply(x, 5.0)
    y.backward()
    assert x.grad.tolist() == [5.0]


def test_needs_input_grad():
    seen = {}

    class Probe(Function):
        @staticmethod
        def forward(ctx, a, b, k):
            seen["needs"] = ctx.needs_input_grad
            return a * b * k

        @staticmethod
        def backward(ctx, g):
            return g, None, None

    a = lg.tensor([1.0], requires_grad=True)
    Probe.apply(a, lg.tensor([2.0]), 3).sum().backward()
    assert seen["needs"] == (True, False, False)


def test_forward_runs_without_recording():
    class Inner(Function):
        @staticmethod
        def forward(ctx, x):
            y = x * 2
            assert not y.requires_grad and not lg.is_grad_enabled()
            return y

        @staticmethod
        def backward(ctx, g):
            return g * 2

    x = lg.tensor([1.0], requires_grad=True)
    y = Inner.apply(x)
    assert y.requires_grad and y.grad_fn.name() == "InnerBackward"


def test_several_outputs():
    class SplitTwo(Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * 2, x * x

        @staticmethod
        def backward(ctx, g1, g2):
            x, = ctx.saved_tensors
            return g1 * 2 + g2 * 2 * x

    x = lg.tensor([1.0, 3.0], requires_grad=True)
    a, b = SplitTwo.apply(x)
    assert a.grad_fn is b.grad_fn and a.output_nr == 0 and b.output_nr == 1
    (a.sum() + b.sum()).backward()
    assert x.grad.tolist() == [4.0, 8.0]
    x.grad = None
    a, b = SplitTwo.apply(x)
    b.sum().backward()  # the unused output's gradient is materialised as zeros
    assert x.grad.tolist() == [2.0, 6.0]


def test_set_materialize_grads_false_passes_none():
    got = {}

    class Two(Function):
        @staticmethod
        def forward(ctx, x):
            ctx.set_materialize_grads(False)
            return x.clone(), x.clone()

        @staticmethod
        def backward(ctx, g1, g2):
            got["g"] = (g1, g2)
            return g1 if g1 is not None else g2

    x = lg.tensor([1.0], requires_grad=True)
    a, b = Two.apply(x)
    b.sum().backward()
    assert got["g"][0] is None and got["g"][1].tolist() == [1.0]


def test_mark_non_differentiable():
    class SortIdx(Function):
        @staticmethod
        def forward(ctx, x):
            idx = lg.tensor(np.argsort(x.detach().numpy()))
            ctx.mark_non_differentiable(idx)
            return x.clone(), idx

        @staticmethod
        def backward(ctx, g, g_idx):
            return g

    x = lg.tensor([3.0, 1.0], requires_grad=True)
    y, idx = SortIdx.apply(x)
    assert y.requires_grad and not idx.requires_grad and idx.grad_fn is None
    y.sum().backward()
    assert x.grad.tolist() == [1.0, 1.0]


def test_mark_dirty():
    class AddOneInplace(Function):
        @staticmethod
        def forward(ctx, x):
            x.add_(1)
            ctx.mark_dirty(x)
            return x

        @staticmethod
        def backward(ctx, g):
            return g

    a = lg.tensor([1.0], requires_grad=True)
    b = a.clone()
    v = b._version
    c = AddOneInplace.apply(b)
    assert c is b and c.grad_fn.name() == "AddOneInplaceBackward" and b._version > v
    assert c.tolist() == [2.0]
    (c * 3).sum().backward()
    assert a.grad.tolist() == [3.0]
    with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
        AddOneInplace.apply(lg.tensor([1.0], requires_grad=True))


def test_saved_tensors_version_checked():
    x = lg.tensor([1.0, 2.0], requires_grad=True)
    h = x * 1
    y = Exp.apply(h)
    y.add_(1)  # the saved output was modified
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.sum().backward()


def test_saved_tensors_freed_after_backward():
    x = lg.tensor([1.0], requires_grad=True)
    y = Exp.apply(x)
    y.backward()
    with pytest.raises(RuntimeError, match="Trying to backward through the graph a second time"):
        y.backward()
    with pytest.raises(RuntimeError, match="ExpBackward"):
        y.grad_fn.saved_tensors


def test_save_for_backward_accepts_only_tensors():
    class Bad(Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x, 3.0)
            return x.clone()

        @staticmethod
        def backward(ctx, g):
            return g

    with pytest.raises(TypeError, match="save_for_backward can only save tensors.*argument 1 "
                       "is of type float"):
        Bad.apply(lg.tensor([1.0], requires_grad=True))


def _fn(forward_out, backward_ret):
    class Custom(Function):
        @staticmethod
        def forward(ctx, x, k=None):
            return forward_out(x)

        @staticmethod
        def backward(ctx, g):
            return backward_ret(g)
    return Custom


def test_wrong_number_of_gradients():
    F = _fn(lambda x: x * 2, lambda g: (g, g, g))
    y = F.apply(lg.tensor([1.0], requires_grad=True))
    with pytest.raises(RuntimeError, match=r"function CustomBackward returned an incorrect "
                       r"number of gradients \(expected 1, got 3\)"):
        y.sum().backward()


def test_wrong_gradient_shape():
    F = _fn(lambda x: x * 2, lambda g: lg.ones(3))
    y = F.apply(lg.tensor([1.0, 2.0], requires_grad=True))
    with pytest.raises(RuntimeError, match=r"Function CustomBackward returned an invalid "
                       r"gradient at index 0 - got \[3\] but expected shape compatible with "
                       r"\[2\]"):
        y.sum().backward()


def test_gradient_for_a_non_tensor_input():
    F = _fn(lambda x: x * 2, lambda g: (g, g))
    y = F.apply(lg.tensor([1.0], requires_grad=True), 3.0)
    with pytest.raises(RuntimeError, match="CustomBackward returned a gradient different than "
                       "None at position 1, but the corresponding forward input was not a "
                       "Tensor"):
        y.sum().backward()


def test_backward_returning_none_for_input_needing_no_grad():
    F = _fn(lambda x: x * 2, lambda g: (g * 2, None))
    x = lg.tensor([1.0], requires_grad=True)
    F.apply(x, lg.tensor([1.0])).sum().backward()
    assert x.grad.tolist() == [2.0]


def test_function_without_grad_inputs_records_nothing():
    y = Exp.apply(lg.tensor([1.0]))
    assert y.grad_fn is None and not y.requires_grad
    with lg.no_grad():
        z = Exp.apply(lg.tensor([1.0], requires_grad=True))
    assert z.grad_fn is None


def test_double_backward_through_custom_function():
    x = lg.tensor([0.5], dtype=lg.float64, requires_grad=True)
    y = Exp.apply(x)
    (g,) = lg.autograd.grad(y.sum(), x, create_graph=True)
    (gg,) = lg.autograd.grad(g.sum(), x)
    np.testing.assert_allclose(gg.numpy(), np.exp([0.5]))
