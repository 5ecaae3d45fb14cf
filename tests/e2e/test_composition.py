"""Compiled functions composed with everything else (issue 6): inside eager graphs, grad of
grad, inlining into another compiled function, compiled jacobian/hessian/hvp."""
import numpy as np
import pytest

import llgrad
import llgrad as lg
from llgrad import nn
from tests.e2e.conftest import finite_differences


def fd_grad(f, x, eps=1e-6):
    x = np.array(x, dtype=float)
    g = np.zeros_like(x)
    for i in np.ndindex(*x.shape):
        e = np.zeros_like(x)
        e[i] = eps
        g[i] = (f(x + e) - f(x - e)) / (2 * eps)
    return g


def f_sin(x):
    return np.sum(np.sin(x) * x ** 2)


X = np.array([0.3, 0.7, 1.1, -0.4])


def test_grad_of_grad_scalar(mode):
    def cube(a):
        return a ** 3 + np.sin(a)
    gg = llgrad.grad(llgrad.grad(cube))
    assert gg(2.0) == pytest.approx(12.0 - np.sin(2.0), rel=1e-12)


def test_grad_of_sum_of_grad_matches_hessian_row_sums(mode):
    g = llgrad.grad(f_sin)

    def total(x):
        return np.sum(g(x))
    expected = fd_grad(lambda x: np.sum(llgrad.grad(f_sin)(x)), X)
    np.testing.assert_allclose(llgrad.grad(total)(X), expected, rtol=1e-6, atol=1e-8)


def test_hessian_against_finite_differences(mode):
    h = llgrad.hessian(f_sin)(X)
    g = llgrad.grad(f_sin)
    fd = np.stack([fd_grad(lambda x, i=i: g(x)[i], X) for i in range(X.size)])
    assert h.shape == (4, 4)
    np.testing.assert_allclose(h, fd, rtol=1e-6, atol=1e-7)


def test_hvp_equals_hessian_times_vector(mode):
    v = np.array([1.0, -2.0, 0.5, 3.0])
    np.testing.assert_allclose(llgrad.hvp(f_sin)(X, v), llgrad.hessian(f_sin)(X) @ v,
                               rtol=1e-10, atol=1e-12)


def loop_recurrence(x):
    s = 0.0
    for i in range(x.shape[0]):  # staged: its reverse sweep reads tapes
        s = np.sin(s) + x[i] * x[i]
    return s


def loop_on_constant_only(x, c):
    t = 0.0
    for i in range(c.shape[0]):  # depends on c only: nothing derivative-carrying is taped
        t = np.sin(t) + c[i]
    return np.sum(np.sin(x) * x ** 2) * t


def test_grad_of_grad_through_a_loop_is_refused_at_the_loop(mode):
    """Note [No AD through tapes]: reverse over reverse through a loop is an error naming the
    loop's line, never a wrong second derivative; the message points at forward over
    reverse."""
    def total_grad(x):
        return np.sum(llgrad.grad(loop_recurrence)(x))
    with pytest.raises(llgrad.errors.UnsupportedError) as e:
        llgrad.grad(total_grad)(X)
    msg = str(e.value)
    assert "cannot differentiate through the reverse sweep of a compiled loop" in msg
    assert "test_composition.py:" in msg and "for i in range(x.shape[0])" in msg
    assert "llgrad.hessian" in msg and "llgrad.autograd.functional.hessian" in msg


def test_hessian_and_hvp_through_a_staged_loop(mode):
    """Forward over the reverse sweep (issue 14): tapes carry tangents, no error."""
    g = llgrad.grad(loop_recurrence)
    fd = np.stack([fd_grad(lambda x, i=i: g(x)[i], X) for i in range(X.size)])
    h = llgrad.hessian(loop_recurrence)(X)
    np.testing.assert_allclose(h, fd, rtol=1e-6, atol=1e-7)
    v = np.array([0.3, -1.0, 2.0, 0.5])
    np.testing.assert_allclose(llgrad.hvp(loop_recurrence)(X, v), h @ v, rtol=1e-10,
                               atol=1e-12)


def test_eager_hessian_of_a_loop_as_the_error_suggests():
    h = lg.autograd.functional.hessian(loop_recurrence, lg.tensor(X))
    g = lg.autograd.functional.jacobian(loop_recurrence, lg.tensor(X))
    assert g.shape == (4,)

    def grad_np(x):
        return lg.autograd.functional.jacobian(loop_recurrence, lg.tensor(x)).numpy()
    fd = np.stack([fd_grad(lambda x, i=i: grad_np(x)[i], X) for i in range(X.size)])
    np.testing.assert_allclose(h.numpy(), fd, rtol=1e-6, atol=1e-7)


def test_hessian_with_a_loop_that_tapes_nothing_it_needs(mode):
    c = np.array([0.2, -0.5, 0.9])
    h = llgrad.hessian(loop_on_constant_only, 0)(X, c)
    g = llgrad.grad(loop_on_constant_only, 0)
    fd = np.stack([fd_grad(lambda x, i=i: g(x, c)[i], X) for i in range(X.size)])
    np.testing.assert_allclose(h, fd, rtol=1e-6, atol=1e-7)


def test_jacobian_of_vector_function(mode):
    def f(x, w):
        return np.tanh(w @ x)
    w = np.arange(12.0).reshape(3, 4) / 10
    j = llgrad.jacobian(f)(X, w)
    fd = np.stack([fd_grad(lambda x, i=i: f(x, w)[i], X) for i in range(3)])
    assert j.shape == (3, 4)
    np.testing.assert_allclose(j, fd, rtol=1e-6, atol=1e-8)


def test_differentiated_function_called_inside_another_is_inlined(mode):
    inner = llgrad.differentiate(f_sin)

    @llgrad.differentiate
    def outer(x):
        return inner(x) * 2.0 + np.sum(x)
    value, grad = outer.value_and_grad(X)
    assert value == pytest.approx(2 * f_sin(X) + np.sum(X))
    np.testing.assert_allclose(grad, fd_grad(lambda x: 2 * f_sin(x) + np.sum(x), X),
                               rtol=1e-6)
    graph = str(outer.inspect(X).graph)
    assert "sin" in graph and "test_composition.py" in graph  # inner ops, inner lines
    assert inner.cache_info()["traces"] == 0  # never compiled on its own


def test_compiled_function_is_a_node_of_the_eager_graph(mode):
    d = llgrad.differentiate(f_sin)
    t = lg.tensor(X, dtype=lg.float64, requires_grad=True)
    y = d(t)
    assert y.grad_fn.name() == "CompiledFunctionBackward"
    assert [n for n, _ in y.grad_fn.next_functions if n is not None][0].variable is t
    seen = []
    t.register_hook(lambda g: seen.append(g.numpy().copy()))
    (y * 3.0).backward(retain_graph=True)
    expected = 3 * (np.cos(X) * X ** 2 + 2 * X * np.sin(X))
    np.testing.assert_allclose(t.grad.numpy(), expected, rtol=1e-12)
    np.testing.assert_allclose(seen[0], expected, rtol=1e-12)
    y.backward()  # retain_graph kept the compiled node's saved inputs
    np.testing.assert_allclose(t.grad.numpy(), expected + expected / 3, rtol=1e-12)


def test_gradcheck_through_a_compiled_node(mode):
    d = llgrad.differentiate(f_sin)
    t = lg.tensor(X, dtype=lg.float64, requires_grad=True)
    assert lg.autograd.gradcheck(lambda t: d(t), (t,))


def test_vector_output_inside_eager_graph(mode):
    @llgrad.differentiate
    def squash(x):
        return np.tanh(x) * x
    t = lg.tensor(X, dtype=lg.float64, requires_grad=True)
    (squash(t) * lg.tensor([1.0, 2.0, 3.0, 4.0], dtype=lg.float64)).sum().backward()
    d = np.tanh(X) + X * (1 - np.tanh(X) ** 2)
    np.testing.assert_allclose(t.grad.numpy(), d * np.array([1, 2, 3, 4.0]), rtol=1e-12)


def test_compiled_loss_trains_an_nn_module(mode):
    lg.manual_seed(0)
    rng = np.random.default_rng(0)
    xs = rng.normal(size=(64, 3))
    ys = xs @ np.array([1.0, -2.0, 0.5]) + 0.3

    @llgrad.differentiate
    def mse(pred, target):
        return np.mean((pred - target) ** 2)

    model = nn.Linear(3, 1).double()
    opt = lg.optim.SGD(model.parameters(), lr=0.1)
    x, y = lg.tensor(xs, dtype=lg.float64), ys
    first = None
    for _ in range(60):
        opt.zero_grad()
        loss = mse(model(x).reshape(-1), y)
        loss.backward()
        opt.step()
        first = first if first is not None else loss.item()
    assert loss.item() < first / 10


def test_double_backward_through_a_compiled_node_raises_instead_of_dropping(mode):
    """create_graph through CompiledFunctionBackward: the gradient's values are right, but a
    second backward through it is an error (PyTorch's once_differentiable), not a silent 0."""
    cf = llgrad.differentiate(f_sin)
    x = lg.tensor(X, requires_grad=True)
    (gx,) = lg.autograd.grad(cf(x), x, create_graph=True)
    np.testing.assert_allclose(gx.detach().numpy(), llgrad.grad(f_sin)(X), rtol=1e-12)
    w = lg.tensor(np.ones(4), requires_grad=True)
    penalty = (gx * gx).sum() + (w * x).sum()  # a gradient penalty, as in WGAN-GP
    with pytest.raises(RuntimeError, match="cannot differentiate it a second time") as e:
        penalty.backward()
    assert "test_composition.py" in str(e.value) and "create_graph=True" in str(e.value)
    (gx1,) = lg.autograd.grad(cf(x), x)  # without create_graph: a plain constant
    assert gx1.grad_fn is None


def test_per_row_jacobian_and_eager_backward_convert_the_function(mode):
    """The compiled vector-Jacobian product (llgrad.jacobian of a Differentiable, the
    backward of a compiled node in an eager graph) converts the user's function as a trace
    does: a traced value written into a new numpy array is an update, not a conversion."""
    def f(x):
        y = np.zeros(4)
        y[np.array([0, 2])] = x * 2.0
        return np.sin(y)
    x = np.array([0.3, 0.5])
    want = np.zeros((4, 2))
    want[0, 0], want[2, 1] = 2 * np.cos(0.6), 2 * np.cos(1.0)
    np.testing.assert_allclose(llgrad.jacobian(llgrad.Differentiable(f))(x), want, rtol=1e-12)
    t = lg.tensor(x, requires_grad=True)
    llgrad.differentiate(f)(t).sum().backward()
    np.testing.assert_allclose(t.grad.numpy(), want.sum(axis=0), rtol=1e-12)


def test_grad_of_a_closure_over_the_callers_traced_value(mode):
    """`llgrad.grad(lambda v: f(w, v))(w)` inside a traced function: the lambda reads the
    caller's traced `w` (compose._lift_free_values); a KeyError from the IR passes before."""
    def outer(w):
        return np.sum(llgrad.grad(lambda v: np.sum(w * v ** 2))(w) ** 2)

    w = np.array([1.0, 2.0, 0.5])
    value, grad = llgrad.value_and_grad(outer)(w)
    by_hand = lambda w: np.sum((2.0 * w * w) ** 2)  # noqa: E731 (the inner gradient: 2 w v)
    assert value == pytest.approx(by_hand(w), rel=1e-12)
    np.testing.assert_allclose(grad, finite_differences(by_hand, (w,), (0,))[0], rtol=1e-6)
