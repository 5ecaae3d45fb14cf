"""SCENARIOS.md sections 1, 2, 3 (first part), 4 and 8 (without optim), run exactly as written,
checking what they print. (Section 3 on nn.Module, 7 and 8 with Adam: test_scenarios_nn.py.)"""
from __future__ import annotations

import re

import pytest

import llgrad as lg
from llgrad.autograd import Function

ADDR = r"object at 0x[0-9a-f]+"


def _lines(capsys):
    return capsys.readouterr().out.splitlines()


# ---- 1. Custom Functions --------------------------------------------------------------------
class Exp(Function):
    @staticmethod
    def forward(ctx, i):
        result = i.exp()
        ctx.save_for_backward(result)   # tensors only; other values go on ctx as attributes
        return result

    @staticmethod
    def backward(ctx, grad_output):
        result, = ctx.saved_tensors
        return grad_output * result


class GradCoeff(Function):
    @staticmethod
    def forward(ctx, x, coeff):
        ctx.coeff = coeff
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad_output):
        return ctx.coeff * grad_output, None   # one gradient per forward input


def test_section_1_custom_functions(capsys):
    x = lg.tensor([1.], requires_grad=True)
    ret = Exp.apply(x)
    print(ret)        # tensor([2.7183], grad_fn=<ExpBackward>)
    ret.backward()
    print(x.grad)     # tensor([2.7183])

    x = lg.tensor([2.], requires_grad=True)
    ret = GradCoeff.apply(x, -0.1) ** 2
    ret.backward()
    print(x.grad)     # tensor([-0.4000])
    assert _lines(capsys) == ["tensor([2.7183], grad_fn=<ExpBackward>)", "tensor([2.7183])",
                              "tensor([-0.4000])"]


# ---- 2. The graph ---------------------------------------------------------------------------
def test_section_2_the_graph(capsys):
    A = lg.tensor(2., requires_grad=True); B = lg.tensor(.5, requires_grad=True)  # noqa: E702
    E = lg.tensor(1., requires_grad=True)
    C = A * B; D = C.exp(); F = D + E  # noqa: E702
    print(F)                                      # tensor(3.7183, grad_fn=<AddBackward0>)
    print([t.is_leaf for t in [A, B, C, D, E, F]])  # [True, True, False, False, True, False]
    print([t.grad_fn for t in [F, D, C, A]])       # [<AddBackward0 ...>, <ExpBackward0 ...>, <MulBackward0 ...>, None]  # noqa: E501
    print(F.grad_fn.next_functions)                # ((<ExpBackward0 ...>, 0), (<AccumulateGrad ...>, 0))  # noqa: E501
    F.backward(retain_graph=True)
    print(A.grad, B.grad, E.grad)                  # tensor(1.3591) tensor(5.4366) tensor(1.)
    print(C.grad, D.grad)                          # None None
    out = _lines(capsys)
    assert out[0] == "tensor(3.7183, grad_fn=<AddBackward0>)"
    assert out[1] == "[True, True, False, False, True, False]"
    assert re.fullmatch(rf"\[<AddBackward0 {ADDR}>, <ExpBackward0 {ADDR}>, "
                        rf"<MulBackward0 {ADDR}>, None\]", out[2]), out[2]
    assert re.fullmatch(rf"\(\(<ExpBackward0 {ADDR}>, 0\), \(<AccumulateGrad {ADDR}>, 0\)\)",
                        out[3]), out[3]
    assert out[4] == "tensor(1.3591) tensor(5.4366) tensor(1.)"
    assert out[5] == "None None"


# ---- 3. A backward pass written by hand ------------------------------------------------------
def autograd(grad_fn, gradient):
    queue = [[grad_fn, gradient]]
    while queue:
        item = queue.pop()
        gradients = item[0](item[1])
        functions = [x[0] for x in item[0].next_functions]
        if type(gradients) is not tuple:
            gradients = (gradients,)
        for grad, func in zip(gradients, functions):
            if type(func).__name__ == 'AccumulateGrad':
                if hasattr(func.variable, 'auto_grad'):
                    func.variable.auto_grad = func.variable.auto_grad + grad
                else:
                    func.variable.auto_grad = grad
            else:
                queue.append([func, grad])


def test_section_3_backward_by_hand(capsys):
    A = lg.tensor([3.], requires_grad=True); B = lg.tensor([2.], requires_grad=True)  # noqa: E702
    C = A ** 2; D = B ** 2; E = C * D; F = D + E  # noqa: E702
    autograd(F.grad_fn, lg.tensor(1))
    print(A.auto_grad, B.auto_grad)   # tensor([24.], ...) tensor([40.], ...)
    out = _lines(capsys)
    assert re.fullmatch(r"tensor\(\[24\.\], grad_fn=<\w+>\) tensor\(\[40\.\], grad_fn=<\w+>\)",
                        out[0]), out[0]
    F.backward()  # the nodes were called by hand with their saved values intact
    assert A.grad.tolist() == A.auto_grad.tolist() and B.grad.tolist() == B.auto_grad.tolist()


# ---- 4. Dynamic graphs ----------------------------------------------------------------------
def f(x):
    result = 1
    for ii in x:
        if ii.item() > 0: result = ii * result  # noqa: E701
    return result


def test_section_4_dynamic_graph(capsys):
    x = lg.tensor([0.3071, 1.1043, 1.3605, -0.3471], requires_grad=True)
    f(x).backward(); print(x.grad)   # ≈ tensor([1.5024, 0.4178, 0.3391, 0.0000])  # noqa: E702
    assert _lines(capsys) == ["tensor([1.5024, 0.4178, 0.3391, 0.0000])"]


# ---- 8. backward through the graph a second time (the loop without the optimiser) -----------
def test_section_8_second_backward_through_freed_graph():
    style = lg.rand(1, 8).requires_grad_(True)   # should not need grad, but does
    style_gram = style.T @ style                  # computed once, outside the loop
    param = lg.rand(8, 8, requires_grad=True)
    with pytest.raises(RuntimeError) as e:
        for step in range(2):
            loss = ((param - style_gram) ** 2).sum()
            param.grad = None; loss.backward()  # noqa: E702
    assert step == 1
    msg = str(e.value)
    assert "Trying to backward through the graph a second time" in msg
    assert "MmBackward0" in msg and "style_gram = style.T @ style" in msg
    assert re.search(re.escape(__file__) + r":\d+", msg)
    assert "retain_graph=True" in msg and ".detach()" in msg
    # the fix the message suggests
    style_gram = style.detach().T @ style.detach()
    for step in range(2):
        loss = ((param - style_gram) ** 2).sum()
        param.grad = None; loss.backward()  # noqa: E702
    assert param.grad.shape == (8, 8)
