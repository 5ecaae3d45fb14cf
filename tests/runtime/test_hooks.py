"""Tensor hooks (may replace the gradient), Node.register_hook / register_prehook, handles."""
from __future__ import annotations

import llgrad as lg


def test_tensor_hook_sees_and_replaces_gradient():
    x = lg.tensor([1.0, 2.0], requires_grad=True)
    y = x * 2
    seen = []
    y.register_hook(lambda g: seen.append(g.tolist()))
    h = y.register_hook(lambda g: g * 10)
    (y * y).sum().backward(retain_graph=True)
    assert seen == [[4.0, 8.0]]
    assert x.grad.tolist() == [80.0, 160.0]
    h.remove()
    x.grad = None
    (y * 1).sum().backward()
    assert x.grad.tolist() == [2.0, 2.0]


def test_hooks_run_in_registration_order_and_chain():
    x = lg.tensor([1.0], requires_grad=True)
    y = x * 1
    y.register_hook(lambda g: g + 1)
    y.register_hook(lambda g: g * 3)
    y.sum().backward()
    assert x.grad.tolist() == [6.0]


def test_leaf_tensor_hook():
    x = lg.tensor([1.0, 2.0], requires_grad=True)
    x.register_hook(lambda g: g * 0.5)
    (x * 4).sum().backward()
    assert x.grad.tolist() == [2.0, 2.0]


def test_hook_on_intermediate_prints_like_the_docs(capsys):
    A = lg.tensor(2.0, requires_grad=True)
    B = lg.tensor(0.5, requires_grad=True)
    C = A * B
    handle = C.register_hook(lambda g: print("the gradient of C is:", g))
    C.exp().backward()
    assert capsys.readouterr().out == "the gradient of C is: tensor(2.7183)\n"
    handle.remove()


def test_node_hook_and_prehook():
    x = lg.tensor([1.0, 2.0], requires_grad=True)
    w = lg.tensor([3.0, 4.0], requires_grad=True)
    y = x * w
    log = []

    def pre(grad_outputs):
        log.append(("pre", grad_outputs[0].tolist()))
        return (grad_outputs[0] * 2,)

    def post(grad_inputs, grad_outputs):
        log.append(("post", [g.tolist() for g in grad_inputs], grad_outputs[0].tolist()))
        return (grad_inputs[0], grad_inputs[1] * 0)

    hp = y.grad_fn.register_prehook(pre)
    hh = y.grad_fn.register_hook(post)
    y.sum().backward(retain_graph=True)
    assert log == [("pre", [1.0, 1.0]), ("post", [[6.0, 8.0], [2.0, 4.0]], [2.0, 2.0])]
    assert x.grad.tolist() == [6.0, 8.0] and w.grad.tolist() == [0.0, 0.0]
    hp.remove()
    hh.remove()
    x.grad = w.grad = None
    y.sum().backward()
    assert x.grad.tolist() == [3.0, 4.0] and w.grad.tolist() == [1.0, 2.0]


def test_accumulate_grad_node_hook():
    x = lg.tensor([1.0], requires_grad=True)
    y = x * 2
    acc = y.grad_fn.next_functions[0][0]
    seen = []
    acc.register_prehook(lambda go: seen.append(go[0].tolist()))
    y.sum().backward()
    assert seen == [[2.0]]


def test_handle_as_context_manager():
    x = lg.tensor([1.0], requires_grad=True)
    y = x * 1
    with y.register_hook(lambda g: g * 100):
        pass
    y.sum().backward()
    assert x.grad.tolist() == [1.0]


def test_hook_with_create_graph_is_differentiable():
    x = lg.tensor(2.0, requires_grad=True)
    y = x * x
    y.register_hook(lambda g: g * x)  # the replacement gradient depends on x
    (g,) = lg.autograd.grad(y, x, create_graph=True)
    assert g.item() == 8.0  # x * 2x
    (gg,) = lg.autograd.grad(g, x)
    assert gg.item() == 8.0  # d/dx 2x^2
