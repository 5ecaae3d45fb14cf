"""llgrad.autograd.functional: result shapes and nesting as in PyTorch, strict errors,
create_graph, vectorize (checked batching, fallback with a warning)."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import llgrad as lg
from llgrad.autograd.functional import hessian, hvp, jacobian, jvp, vhp, vjp


def d(*shape):
    return lg.randn(*shape, dtype=lg.float64)


def close(a, b):
    return np.allclose(np.asarray(a._data if hasattr(a, "_data") else a),
                       np.asarray(b._data if hasattr(b, "_data") else b))


def test_module_is_exposed():
    import llgrad.autograd.functional as F
    assert F.jacobian is jacobian and lg.autograd.functional.hessian is hessian


def test_jacobian_shapes_and_nesting():
    x, y = d(3), d(2, 2)
    assert jacobian(lambda a: a * 2, x).shape == (3, 3)
    assert jacobian(lambda a: a.sum(), x).shape == (3,)
    j = jacobian(lambda a, b: a.sum() * b, (x, y))          # one output, tuple inputs
    assert isinstance(j, tuple) and [t.shape for t in j] == [(2, 2, 3), (2, 2, 2, 2)]
    j = jacobian(lambda a: (a * 2, a.sum()), x)             # tuple outputs, one input
    assert [t.shape for t in j] == [(3, 3), (3,)]
    j = jacobian(lambda a, b: (a * 2, b.exp()), (x, y))     # both tuples: j[out][in]
    assert j[0][0].shape == (3, 3) and j[0][1].shape == (3, 2, 2)
    assert j[1][0].shape == (2, 2, 3) and j[1][1].shape == (2, 2, 2, 2)
    assert close(j[0][1], np.zeros((3, 2, 2)))
    assert close(j[1][1], np.einsum("ij,ik,jl->ijkl", np.exp(y._data), np.eye(2), np.eye(2)))


def test_jacobian_values_and_no_grad_side_effects():
    w = d(2, 3)
    x = lg.randn(3, dtype=lg.float64, requires_grad=True)
    j = jacobian(lambda a: w @ a.sin(), x)
    assert close(j, w._data * np.cos(x._data))
    assert not j.requires_grad and x.grad is None


def test_jacobian_create_graph():
    x = lg.randn(3, dtype=lg.float64, requires_grad=True)
    j = jacobian(lambda a: a ** 3, x, create_graph=True)
    assert j.requires_grad
    j.sum().backward()
    assert close(x.grad, 6 * x._data)


def test_jacobian_strict():
    x, y = d(2), d(2)
    with pytest.raises(RuntimeError, match="Output 0 of the user-provided function is "
                                           "independent of input 1"):
        jacobian(lambda a, b: a * 2, (x, y), strict=True)
    with pytest.raises(RuntimeError, match="Output 0 of the user-provided function does not "
                                           "require gradients"):
        jacobian(lambda a: lg.ones(2), x, strict=True)
    assert close(jacobian(lambda a, b: a * 2, (x, y))[1], np.zeros((2, 2)))
    with pytest.raises(RuntimeError, match="`strict=True` and `vectorized=True` are not "
                                           "supported together"):
        jacobian(lambda a: a, x, strict=True, vectorize=True)


def test_input_type_errors():
    with pytest.raises(TypeError, match="The inputs given to jacobian must be either a Tensor or "
                                        "a tuple of Tensors but the value at index 1 has type "
                                        "float"):
        jacobian(lambda a, b: a, (d(2), 1.0))
    with pytest.raises(TypeError, match="outputs of the user-provided function given to "
                                        "jacobian must be either a Tensor"):
        jacobian(lambda a: 3.0, d(2))


def test_vectorize_matches_loop_without_fallback():
    x, y, w = d(3), d(2), d(3, 4)

    def g(a, b):
        return a[..., :2] * b, (a ** 2).sum(-1) * b.sum(-1), a.sin() @ w

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        j2 = jacobian(g, (x, y), vectorize=True)
        h2 = hessian(lambda a: (a ** 3).sum(-1), x, vectorize=True)
        lin = jacobian(lambda a: a.exp().unsqueeze(-1) * 2, x, vectorize=True)
    j1 = jacobian(g, (x, y))
    for r1, r2 in zip(j1, j2):
        for a, b in zip(r1, r2):
            assert a.shape == b.shape and close(a, b)
    assert close(h2, hessian(lambda a: (a ** 3).sum(), x))
    assert lin.shape == (3, 1, 3)
    assert close(lin, jacobian(lambda a: a.exp().unsqueeze(-1) * 2, x))


def test_vectorize_falls_back_when_the_batch_would_mix():
    x = d(3)
    with pytest.warns(UserWarning, match="falling back to one backward per row"):
        j = jacobian(lambda a: a - a.mean(), x, vectorize=True)
    assert close(j, np.eye(3) - 1 / 3)
    with pytest.warns(UserWarning, match="falling back"):
        j = jacobian(lambda a: a * a.sum(), x, vectorize=True)
    assert close(j, jacobian(lambda a: a * a.sum(), x))


def test_hessian():
    x, y = d(3), d(2)
    h = hessian(lambda a: (a ** 3).sum(), x)
    assert h.shape == (3, 3) and close(h, np.diag(6 * x._data))
    h = hessian(lambda a, b: (a ** 2).sum() * b.sum(), (x, y))
    assert h[0][0].shape == (3, 3) and h[0][1].shape == (3, 2) and h[1][0].shape == (2, 3)
    assert close(h[0][1], np.outer(2 * x._data, np.ones(2)))
    with pytest.raises(RuntimeError, match="should contain a single element"):
        hessian(lambda a: a ** 2, x)
    with pytest.raises(RuntimeError, match="should return a single Tensor"):
        hessian(lambda a: (a.sum(), a.sum()), x)
    with pytest.raises(RuntimeError, match="jacobian of the user-provided function with "
                                           "respect to input 0 is independent"):
        hessian(lambda a: a.sum(), x, strict=True)


def test_vjp_jvp():
    x = d(3)
    out, g = vjp(lambda a: a ** 2, x, lg.ones(3, dtype=lg.float64))
    assert close(out, x._data ** 2) and close(g, 2 * x._data)
    out, t = jvp(lambda a: a ** 2, x, lg.ones(3, dtype=lg.float64))
    assert close(t, 2 * x._data)
    outs, ts = jvp(lambda a, b: (a * b, a.sum()), (x, x), (lg.ones(3, dtype=lg.float64),) * 2)
    assert isinstance(ts, tuple) and close(ts[0], 2 * x._data) and ts[1].shape == ()
    s = lg.tensor(2.0, dtype=lg.float64)
    assert close(vjp(lambda a: a ** 3, s)[1], 12.0)
    assert close(jvp(lambda a: a ** 3, s)[1], 12.0)
    with pytest.raises(RuntimeError, match="The vector v can only be None if the user-provided "
                                           "function returns a single Tensor with a single "
                                           "element."):
        vjp(lambda a: a, x)
    with pytest.raises(RuntimeError, match="The vector v can only be None if the input to the "
                                           "user-provided function is a single Tensor"):
        jvp(lambda a: a, x)
    with pytest.raises(RuntimeError, match=r"v has invalid size: should be \[3\] but got \[2\]"):
        vjp(lambda a: a, x, d(2))
    with pytest.raises(RuntimeError, match="v is a tuple of invalid length: should be 2 but "
                                           "got 1"):
        jvp(lambda a, b: a, (x, x), (x,))
    with pytest.raises(RuntimeError, match="The output of the user-provided function is "
                                           "independent of input 1"):
        vjp(lambda a, b: a.sum(), (x, x), strict=True)


def test_hvp_vhp():
    x, v = d(3), d(3)
    out, r = hvp(lambda a: (a ** 3).sum(), x, v)
    assert close(out, (x._data ** 3).sum()) and close(r, 6 * x._data * v._data)
    _, r2 = vhp(lambda a: (a ** 3).sum(), x, v)
    assert close(r, r2)
    _, rr = hvp(lambda a, b: (a * b).sum(), (x, x), (v, v))
    assert isinstance(rr, tuple) and close(rr[0], v._data)
    with pytest.raises(RuntimeError, match="The function given to hvp should return a single "
                                           "Tensor"):
        hvp(lambda a: (a.sum(), a.sum()), x, v)
    with pytest.raises(RuntimeError, match="The Tensor returned by the function given to vhp "
                                           "should contain a single element"):
        vhp(lambda a: a, x, v)
    x2 = lg.randn(3, dtype=lg.float64, requires_grad=True)
    _, r = hvp(lambda a: (a ** 3).sum(), x2, v, create_graph=True)
    assert r.requires_grad
