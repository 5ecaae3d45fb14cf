"""The graph and the engine: grad_fn names, next_functions, leaves, requires_grad propagation,
retain_grad, nodes as functions, backward/grad options, higher order, accumulation order."""
from __future__ import annotations

import numpy as np
import pytest

import llgrad as lg
from llgrad.autograd import grad


def test_grad_fn_names_and_next_functions():
    a = lg.tensor(2.0, requires_grad=True)
    b = lg.tensor(0.5, requires_grad=True)
    c = a * b
    d = c.exp()
    e = d + b
    assert c.grad_fn.name() == "MulBackward0" and type(c.grad_fn).__name__ == "PrimNode" or \
        c.grad_fn.name() == "MulBackward0"
    assert d.grad_fn.name() == "ExpBackward0" and e.grad_fn.name() == "AddBackward0"
    assert repr(c.grad_fn).startswith("<MulBackward0 object at 0x")
    (n0, i0), (n1, i1) = e.grad_fn.next_functions
    assert n0 is d.grad_fn and i0 == 0
    assert type(n1).__name__ == "AccumulateGrad" and n1.variable is b and i1 == 0
    acc_a = c.grad_fn.next_functions[0][0]
    assert acc_a.name() == "AccumulateGrad" and acc_a.variable is a
    assert acc_a.next_functions == ()
    # one AccumulateGrad per leaf while the graph lives
    assert (a * 3).grad_fn.next_functions[0][0] is acc_a


def test_next_functions_have_none_for_inputs_without_grad():
    x = lg.tensor([1.0, 2.0], requires_grad=True)
    y = x * lg.tensor([3.0, 4.0])
    assert y.grad_fn.next_functions[1] == (None, 0)
    assert y.grad_fn.next_functions[0][0].variable is x


def test_is_leaf_and_requires_grad_propagation():
    a = lg.tensor([1.0], requires_grad=True)
    b = lg.tensor([2.0])
    c = a + b
    d = b * 2
    assert a.is_leaf and b.is_leaf and not c.is_leaf and d.is_leaf
    assert c.requires_grad and not d.requires_grad and d.grad_fn is None
    assert a.grad_fn is None
    assert not c.detach().requires_grad and c.detach().is_leaf
    assert (c > 0).requires_grad is False


def test_non_leaf_grad_is_none_unless_retain_grad():
    a = lg.tensor([1.0, 2.0], requires_grad=True)
    b = a * 2
    c = b * b
    b.retain_grad()
    assert b.retains_grad and not c.retains_grad
    c.sum().backward()
    assert b.grad.tolist() == [4.0, 8.0]
    assert c.grad is None
    assert a.grad.tolist() == [8.0, 16.0]


def test_gradients_accumulate_across_backward_calls():
    x = lg.tensor([1.0, 2.0], requires_grad=True)
    (x * x).sum().backward()
    (x * 3).sum().backward()
    assert x.grad.tolist() == [5.0, 7.0]
    x.grad = None
    (x * 3).sum().backward()
    assert x.grad.tolist() == [3.0, 3.0]


def test_leaf_grad_is_not_the_incoming_gradient_object():
    x = lg.tensor([1.0, 2.0], requires_grad=True)
    g = lg.tensor([1.0, 1.0])
    x.backward(g)
    g.add_(1)  # the caller's tensor: changing it must not change x.grad
    assert x.grad.tolist() == [1.0, 1.0]


def test_nodes_are_callable():
    a = lg.tensor(2.0, requires_grad=True)
    b = lg.tensor(0.5, requires_grad=True)
    c = a * b
    ga, gb = c.grad_fn(lg.tensor(1.0))
    assert ga.item() == 0.5 and gb.item() == 2.0
    d = c.exp()
    assert d.grad_fn(lg.tensor(1.0)).item() == pytest.approx(np.e, rel=1e-6)


def test_backward_with_gradient_argument_and_implicit_scalar():
    x = lg.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = x * x
    y.backward(lg.tensor([1.0, 0.0, 2.0]))
    assert x.grad.tolist() == [2.0, 0.0, 12.0]
    z = lg.tensor([[4.0]], requires_grad=True)
    (z * 2).backward()  # one element: implicit gradient 1
    assert z.grad.tolist() == [[2.0]]


def test_implicit_gradient_only_for_scalars():
    x = lg.tensor([1.0, 2.0], requires_grad=True)
    with pytest.raises(RuntimeError, match="grad can be implicitly created only for scalar "
                       r"outputs \(output 0 has shape \[2\]\)"):
        (x * 2).backward()
    with pytest.raises(RuntimeError, match="grad can be implicitly created only for scalar"):
        grad(x * 2, x)


def test_retain_graph_allows_a_second_backward():
    x = lg.tensor([1.0, 2.0], requires_grad=True)
    y = (x.exp() * x).sum()
    y.backward(retain_graph=True)
    first = x.grad.clone()
    y.backward()
    np.testing.assert_allclose(x.grad.numpy(), 2 * first.numpy())


def test_grad_returns_without_accumulating():
    x = lg.tensor([1.0, 2.0], requires_grad=True)
    w = lg.tensor([3.0, 4.0], requires_grad=True)
    gx, gw = grad((x * w).sum(), [x, w])
    assert gx.tolist() == [3.0, 4.0] and gw.tolist() == [1.0, 2.0]
    assert x.grad is None and w.grad is None
    (g,) = grad((x * 2).sum(), x)
    assert g.tolist() == [2.0, 2.0]


def test_grad_of_intermediate_tensors():
    a = lg.tensor(2.0, requires_grad=True)
    b = lg.tensor(0.5, requires_grad=True)
    c = a * b
    d = c.exp()
    gc, ga = grad(d, (c, a))
    assert gc.item() == pytest.approx(np.e, rel=1e-6)
    assert ga.item() == pytest.approx(0.5 * np.e, rel=1e-6)


def test_grad_outputs_and_several_outputs():
    x = lg.tensor([1.0, 2.0], requires_grad=True)
    y1, y2 = x * 2, x * x
    (g,) = grad([y1, y2], [x], grad_outputs=[lg.tensor([1.0, 1.0]), lg.tensor([0.5, 1.0])])
    assert g.tolist() == [3.0, 6.0]


def test_allow_unused():
    x = lg.tensor([1.0], requires_grad=True)
    u = lg.tensor([1.0], requires_grad=True)
    with pytest.raises(RuntimeError, match=r"(?s)input 1\) appears to not have been used in the "
                       "graph.*allow_unused=True"):
        grad((x * 2).sum(), [x, u])
    gx, gu = grad((x * 2).sum(), [x, u], allow_unused=True)
    assert gx.tolist() == [2.0] and gu is None
    gx, gu = grad((x * 2).sum(), [x, u], materialize_grads=True)
    assert gu.tolist() == [0.0]


def test_grad_input_that_does_not_require_grad():
    x = lg.tensor([1.0], requires_grad=True)
    with pytest.raises(RuntimeError, match="does not require grad"):
        grad((x * 2).sum(), lg.tensor([1.0]))


def test_backward_inputs_restricts_accumulation():
    x = lg.tensor([1.0], requires_grad=True)
    w = lg.tensor([2.0], requires_grad=True)
    y = (x * w).sum()
    y.backward(inputs=[w])
    assert w.grad.tolist() == [1.0] and x.grad is None
    z = x * w
    h = z * 3
    h.sum().backward(inputs=[z])  # a non-leaf input: its .grad is filled
    assert z.grad.tolist() == [3.0] and x.grad is None
    with pytest.raises(RuntimeError, match="cannot be empty"):
        (x * 2).sum().backward(inputs=[])


def test_autograd_backward_function():
    x = lg.tensor([1.0, 2.0], requires_grad=True)
    lg.autograd.backward([(x * 2).sum(), (x * x).sum()])
    assert x.grad.tolist() == [4.0, 6.0]
    y = lg.tensor([1.0, 2.0], requires_grad=True)
    lg.autograd.backward(y * 3, grad_tensors=lg.tensor([1.0, 2.0]))
    assert y.grad.tolist() == [3.0, 6.0]


def test_backward_on_a_leaf():
    x = lg.tensor(3.0, requires_grad=True)
    x.backward()
    assert x.grad.item() == 1.0


def test_error_when_nothing_requires_grad():
    with pytest.raises(RuntimeError, match="element 0 of tensors does not require grad and "
                       "does not have a grad_fn"):
        lg.tensor([1.0]).sum().backward()


# ---- higher order -------------------------------------------------------------------------
def test_second_and_third_derivative_of_cube():
    x = lg.tensor(2.0, requires_grad=True)
    y = x ** 3
    (g1,) = grad(y, x, create_graph=True)
    assert g1.item() == 12.0 and g1.requires_grad and g1.grad_fn is not None
    (g2,) = grad(g1, x, create_graph=True)
    assert g2.item() == 12.0
    (g3,) = grad(g2, x)
    assert g3.item() == 6.0


def test_second_derivative_of_sin():
    x = lg.tensor([0.3, 1.2], dtype=lg.float64, requires_grad=True)
    (g1,) = grad(x.sin().sum(), x, create_graph=True)
    np.testing.assert_allclose(g1.detach().numpy(), np.cos([0.3, 1.2]))
    (g2,) = grad(g1.sum(), x)
    np.testing.assert_allclose(g2.numpy(), -np.sin([0.3, 1.2]))


def test_backward_create_graph_gives_differentiable_grad():
    x = lg.tensor(3.0, requires_grad=True)
    y = x ** 2
    y.backward(create_graph=True)
    assert x.grad.item() == 6.0 and x.grad.requires_grad
    gx = x.grad
    x.grad = None
    gx.backward()
    assert x.grad.item() == 2.0


def test_without_create_graph_grads_do_not_require_grad():
    x = lg.tensor(3.0, requires_grad=True)
    (g,) = grad(x ** 2, x)
    assert not g.requires_grad and g.grad_fn is None


def test_hessian_vector_product_by_double_backward():
    w = lg.tensor([1.0, 2.0, 3.0], dtype=lg.float64, requires_grad=True)
    f = (w ** 2).sum() * w.sum()
    (g,) = grad(f, w, create_graph=True)
    v = lg.tensor([1.0, 0.0, 0.0], dtype=lg.float64)
    (hv,) = grad((g * v).sum(), w)
    wn = np.array([1.0, 2.0, 3.0])
    H = 2 * np.diag(np.full(3, wn.sum())) + 2 * wn[:, None] + 2 * wn[None, :]
    np.testing.assert_allclose(hv.numpy(), H @ [1.0, 0.0, 0.0])


# ---- engine order ---------------------------------------------------------------------------
def test_each_node_runs_once_after_all_its_consumers():
    calls = []
    x = lg.tensor([1.0], requires_grad=True)
    a = x * 2
    a.grad_fn.register_prehook(lambda g: calls.append("a") or None)
    b = a * 3
    c = a + b  # a has two consumers
    d = c * a
    d.sum().backward()
    assert calls == ["a"]
    # d = (a + 3a) * a = 4 a^2 -> dd/da = 8a = 16; da/dx = 2
    assert x.grad.tolist() == [32.0]


def test_diamond_and_deep_chain():
    x = lg.tensor(1.0, dtype=lg.float64, requires_grad=True)
    y = x
    for _ in range(2000):  # deep graphs need no recursion
        y = y * 1.0001
    y.backward()
    assert x.grad.item() == pytest.approx(1.0001 ** 2000)


def test_multi_output_node_with_one_output_used():
    x = lg.arange(6.0).requires_grad_()
    a, b, c = x.split(2)
    (b * 2).sum().backward()
    assert x.grad.tolist() == [0.0, 0.0, 2.0, 2.0, 0.0, 0.0]


def test_detach_cuts_the_graph_and_shares_data():
    x = lg.tensor([1.0, 2.0], requires_grad=True)
    y = x * 2
    z = y.detach()
    assert not z.requires_grad and z.grad_fn is None
    (x * z).sum().backward()
    assert x.grad.tolist() == [2.0, 4.0]
    w = x * 3
    w.detach_()
    assert w.is_leaf and not w.requires_grad


def test_requires_grad_setters():
    x = lg.tensor([1.0])
    assert x.requires_grad_() is x and x.requires_grad
    x.requires_grad = False
    assert not x.requires_grad
    y = lg.tensor([1.0], requires_grad=True) * 2
    with pytest.raises(RuntimeError, match="only change requires_grad flags of leaf"):
        y.requires_grad_(False)
    with pytest.raises(RuntimeError, match="only Tensors of floating point dtype can require "
                       "gradients"):
        lg.tensor([1, 2], requires_grad=True)


def test_tensor_basics():
    t = lg.tensor([[1.0, 2.0], [3.0, 4.0]])
    assert t.shape == (2, 2) and t.size() == (2, 2) and t.size(1) == 2
    assert t.dim() == 2 and t.numel() == 4 and t.dtype == lg.float32
    assert t.tolist() == [[1.0, 2.0], [3.0, 4.0]] and t[1, 1].item() == 4.0
    assert t.double().dtype == lg.float64 and t.to(lg.float64).dtype == lg.float64
    assert t.double().float().dtype == lg.float32
    assert isinstance(t.numpy(), np.ndarray)
    c = t.clone()
    c[0, 0] = 9.0
    assert t[0, 0].item() == 1.0
    with pytest.raises(RuntimeError, match=r"Can't call numpy\(\) on Tensor that requires grad"):
        lg.tensor([1.0], requires_grad=True).numpy()
    with pytest.raises(RuntimeError, match="a Tensor with 2 elements cannot be converted to "
                       "Scalar"):
        lg.tensor([1.0, 2.0]).item()
    with pytest.raises(RuntimeError, match="Boolean value of Tensor with more than one value "
                       "is ambiguous"):
        bool(lg.tensor([1.0, 2.0]))


def test_factories():
    lg.manual_seed(3)
    a = lg.rand(2, 3)
    lg.manual_seed(3)
    assert lg.equal(a, lg.rand(2, 3))
    assert lg.zeros(2, 3).tolist() == [[0.0] * 3] * 2 and lg.ones((2,)).tolist() == [1.0, 1.0]
    assert lg.full((2,), 7.0).tolist() == [7.0, 7.0] and lg.eye(2).tolist() == [[1, 0], [0, 1]]
    assert lg.arange(3).tolist() == [0, 1, 2] and lg.zeros_like(a).shape == (2, 3)
    assert lg.ones_like(a, dtype=lg.float64).dtype == lg.float64
    assert lg.randn(4, requires_grad=True).requires_grad
    n = np.arange(3.0)
    f = lg.from_numpy(n)
    n[0] = 5.0
    assert f[0].item() == 5.0 and f.dtype == lg.float64
    t = lg.tensor(n)
    n[0] = 6.0
    assert t[0].item() == 5.0  # tensor() copies


@pytest.mark.parametrize("make, text", [
    (lambda: lg.tensor([1.0], requires_grad=True).exp(), "tensor([2.7183], grad_fn=<ExpBackward0>)"),
    (lambda: lg.tensor(1.5, dtype=lg.float64, requires_grad=True),
     "tensor(1.5000, dtype=llgrad.float64, requires_grad=True)"),
    (lambda: lg.tensor([1.0, 2.0], dtype=lg.float64), "tensor([1., 2.], dtype=llgrad.float64)"),
    (lambda: lg.tensor([1.0, 2.0], dtype=lg.float64, requires_grad=True) * 2,
     "tensor([2., 4.], dtype=llgrad.float64, grad_fn=<MulBackward0>)"),
    (lambda: lg.tensor([1, 10, -100]), "tensor([   1,   10, -100])"),
    (lambda: lg.tensor([True, False]), "tensor([ True, False])"),
    (lambda: lg.tensor([[1.5, -2.25], [30.0, 4.0]]),
     "tensor([[ 1.5000, -2.2500],\n        [30.0000,  4.0000]])"),
    (lambda: lg.tensor([0.1, 1000.0]), "tensor([1.0000e-01, 1.0000e+03])"),
    (lambda: lg.tensor([100.0, 2.0]), "tensor([100.,   2.])"),
    (lambda: lg.tensor([1.5, float("-inf")]), "tensor([1.5000,   -inf])"),
    (lambda: lg.zeros(0), "tensor([])"),
    (lambda: lg.zeros(0, dtype=lg.int64), "tensor([], dtype=llgrad.int64)"),
    (lambda: lg.tensor(3.7183), "tensor(3.7183)"),
])
def test_repr_like_pytorch(make, text):
    assert repr(make()) == text
    assert str(make()) == text


# ---- which nodes autograd.grad runs (Note [Which nodes autograd.grad runs]) ----------------
def test_grad_runs_only_nodes_leading_to_the_inputs():
    x = lg.tensor([1.0, 2.0], requires_grad=True)
    w = lg.tensor([3.0, 4.0], requires_grad=True)
    side = (w * 5).exp()  # a branch that does not lead to x
    ran = []
    side.grad_fn.register_prehook(lambda g: ran.append("side"))
    out = (x * x).sum() + side.sum()
    (g,) = lg.autograd.grad(out, x, retain_graph=True)
    assert g.tolist() == [2.0, 4.0] and ran == [] and w.grad is None
    out.backward()  # backward runs everything
    assert ran == ["side"] and x.grad.tolist() == [2.0, 4.0]


def test_nodes_are_newer_than_the_nodes_their_edges_point_at():
    from llgrad.runtime.autograd.engine import _collect

    class Twice(lg.autograd.Function):
        @staticmethod
        def forward(ctx, a):
            return a * 2

        @staticmethod
        def backward(ctx, g):
            return g * 2

    x = lg.tensor([1.0, 2.0], requires_grad=True)  # its AccumulateGrad is made by Twice
    y = (Twice.apply(x) * x).sum()
    deps, roots, ordered = _collect([y.grad_fn])
    assert ordered and len(deps) == 3  # Mul, TwiceBackward, AccumulateGrad (Sum is the root)
    assert lg.autograd.grad(y, x)[0].tolist() == [4.0, 8.0]


def test_needed_sets_agree_with_a_depth_first_search():
    from llgrad.runtime.autograd.engine import _collect, _needed
    rng = np.random.default_rng(0)
    xs = [lg.tensor(rng.standard_normal(2), requires_grad=True) for _ in range(4)]
    vals = list(xs)
    for _ in range(30):  # a random DAG
        i, j = rng.integers(0, len(vals), 2)
        vals.append(vals[i] * vals[j] if rng.random() < 0.5 else (vals[i] + 1.0).sin())
    root = sum(v.sum() for v in vals[-5:])
    deps, roots, ordered = _collect([root.grad_fn])
    nodes = roots.union(deps)
    for k in range(4):
        targets = {x._accumulator() for x in xs[:k + 1]}
        assert _needed(nodes, targets, True) == _needed(nodes, targets, False)
