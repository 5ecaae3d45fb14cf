"""The tensor API a script ported from PyTorch needs (issue 15): gather/scatter along a dim,
index_select/index_add, topk, addmm and F.linear, unbind/narrow/select/chunk, in-place
forms, and numpy()/__array__ refusing tensors that require grad. Expected values and errors
were checked by hand against torch 2.13 (the tests do not import torch); values and
gradients of every op are also checked against numpy and finite differences through OP_DB
(tests/opinfo_torch.py)."""
from __future__ import annotations

import numpy as np
import pytest

import llgrad as lg
from llgrad.runtime.errors import DTypeError, IndexingError, ShapeError


def _x():
    return lg.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], dtype=lg.float64, requires_grad=True)


def _g():
    return lg.tensor([[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]], dtype=lg.float64)


def test_gather_values_and_gradient():
    x = _x()
    y = x.gather(1, lg.tensor([[0, 0], [2, 1]]))
    assert y.tolist() == [[1.0, 1.0], [6.0, 5.0]]
    y.backward(lg.tensor([[1.0, 2.0], [3.0, 4.0]], dtype=lg.float64))
    assert x.grad.tolist() == [[3.0, 0.0, 0.0], [0.0, 4.0, 3.0]]  # repeats add up
    # an index smaller than the input in the other dims reads that part only; int32 is fine
    z = lg.gather(lg.arange(12.0).reshape(3, 4), 1, lg.tensor(np.array([[3], [0]], np.int32)))
    assert z.tolist() == [[3.0], [4.0]]


def test_scatter_and_scatter_add_values_and_gradients():
    x = _x()
    s = lg.tensor([[10.0, 20.0], [30.0, 40.0]], dtype=lg.float64, requires_grad=True)
    y = x.scatter(1, lg.tensor([[2, 0], [1, 2]]), s)
    assert y.tolist() == [[20.0, 2.0, 10.0], [4.0, 30.0, 40.0]]
    y.backward(_g())
    assert x.grad.tolist() == [[0.0, 1.0, 0.0], [3.0, 0.0, 0.0]]
    assert s.grad.tolist() == [[2.0, 0.0], [4.0, 5.0]]
    x.grad = s.grad = None
    y = x.scatter_add(1, lg.tensor([[0, 0], [2, 2]]), s)
    assert y.tolist() == [[31.0, 2.0, 3.0], [4.0, 5.0, 76.0]]
    y.backward(_g())
    assert x.grad.tolist() == _g().tolist()
    assert s.grad.tolist() == [[0.0, 0.0], [5.0, 5.0]]
    y = x.scatter(0, lg.tensor([[1, 0, 1]]), 7.5)  # the value form
    assert y.tolist() == [[1.0, 7.5, 3.0], [7.5, 5.0, 7.5]]
    assert lg.scatter(x, 0, lg.tensor([[1, 0, 1]]), value=7.5).tolist() == y.tolist()


def test_scatter_gradient_goes_to_the_last_write():
    # PyTorch leaves repeated writes unspecified; llgrad keeps numpy's last write, and only
    # that element of src gets the gradient
    x = lg.zeros(3, dtype=lg.float64, requires_grad=True)
    s = lg.tensor([1.0, 2.0], dtype=lg.float64, requires_grad=True)
    y = x.scatter(0, lg.tensor([1, 1]), s)
    assert y.tolist() == [0.0, 2.0, 0.0]
    y.backward(lg.tensor([1.0, 10.0, 100.0], dtype=lg.float64))
    assert s.grad.tolist() == [0.0, 10.0] and x.grad.tolist() == [1.0, 0.0, 100.0]


def test_index_select_index_add_and_topk():
    x = _x()
    y = x.index_select(1, lg.tensor([2, 0, 2]))
    assert y.tolist() == [[3.0, 1.0, 3.0], [6.0, 4.0, 6.0]]
    y.sum().backward()
    assert x.grad.tolist() == [[1.0, 0.0, 2.0], [1.0, 0.0, 2.0]]
    z = lg.index_add(x, 0, lg.tensor([1, 1]), lg.ones(2, 3, dtype=lg.float64), alpha=2)
    assert z.tolist() == [[1.0, 2.0, 3.0], [8.0, 9.0, 10.0]]
    t = lg.tensor([[3.0, 1.0, 4.0, 1.0], [5.0, 9.0, 2.0, 6.0]])
    v, i = t.topk(2)
    assert v.tolist() == [[4.0, 3.0], [9.0, 6.0]] and i.tolist() == [[2, 0], [1, 3]]
    v, i = lg.topk(t, 2, dim=0, largest=False)
    assert v.tolist() == [[3.0, 1.0, 2.0, 1.0], [5.0, 9.0, 4.0, 6.0]]
    assert i.tolist() == [[0, 0, 1, 0], [1, 1, 0, 1]]
    v, i = lg.tensor([3.0, float("nan"), 1.0]).topk(1)  # NaN is the largest
    assert np.isnan(v.item()) and i.tolist() == [1]


def test_gradcheck_of_the_gather_scatter_family():
    rng = np.random.default_rng(0)
    x = lg.tensor(rng.standard_normal((3, 4)), requires_grad=True)
    s = lg.tensor(rng.standard_normal((3, 2)), requires_grad=True)
    i = lg.tensor([[3, 0], [1, 1], [2, 0]])
    j = lg.tensor([[3, 0], [1, 2], [2, 0]])
    assert lg.autograd.gradcheck(lambda x: x.gather(1, i), (x,))
    assert lg.autograd.gradcheck(lambda x, s: x.scatter_add(1, i, s), (x, s))
    assert lg.autograd.gradcheck(lambda x, s: x.scatter(1, j, s), (x, s))
    assert lg.autograd.gradcheck(lambda x: x.index_select(0, lg.tensor([2, 2, 0])), (x,))
    assert lg.autograd.gradcheck(lambda x, s: x.index_add(1, lg.tensor([3, 3]), s), (x, s))
    assert lg.autograd.gradcheck(lambda x: x.topk(2, 0).values, (x,))
    assert lg.autograd.gradgradcheck(lambda x, s: x.scatter_add(1, i, s * x[:, :2]), (x, s))


def test_in_place_forms():
    x = _x().detach()
    x.scatter_(1, lg.tensor([[0], [2]]), lg.tensor([[0.5], [0.25]], dtype=lg.float64))
    assert x.tolist() == [[0.5, 2.0, 3.0], [4.0, 5.0, 0.25]]
    x.scatter_add_(0, lg.tensor([[1, 1, 1]]), lg.ones(1, 3, dtype=lg.float64))
    assert x.tolist() == [[0.5, 2.0, 3.0], [5.0, 6.0, 1.25]]
    x.index_add_(1, lg.tensor([0]), lg.tensor([[1.0], [2.0]], dtype=lg.float64), alpha=-1)
    assert x.tolist() == [[-0.5, 2.0, 3.0], [3.0, 6.0, 1.25]]
    w = _x()
    with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
        w.scatter_(1, lg.tensor([[0], [2]]), 0.0)


def test_addmm_and_linear():
    y = lg.addmm(lg.tensor([1.0, 2.0]), lg.tensor([[1.0, 2.0], [3.0, 4.0]]), lg.eye(2),
                 beta=0.5, alpha=2)
    assert y.tolist() == [[2.5, 5.0], [6.5, 9.0]]
    rng = np.random.default_rng(1)
    b, a, m = (lg.tensor(rng.standard_normal(s), requires_grad=True)
               for s in ((3,), (2, 4), (4, 3)))
    assert lg.autograd.gradcheck(lambda b, a, m: lg.addmm(b, a, m, beta=-1.5, alpha=0.5),
                                 (b, a, m))
    assert lg.autograd.gradgradcheck(lambda b, a, m: b.addmm(a, m), (b, a, m))
    x, w = (lg.tensor(rng.standard_normal(s), requires_grad=True) for s in ((2, 5, 4), (3, 4)))
    out = lg.nn.functional.linear(x, w, b)
    np.testing.assert_allclose(out.detach().numpy(), x.detach().numpy() @ w.detach().numpy().T
                               + b.detach().numpy(), rtol=1e-12)
    assert lg.autograd.gradcheck(lambda x, w, b: lg.nn.functional.linear(x, w, b), (x, w, b))


def test_linear_compiled_agrees_with_eager():
    rng = np.random.default_rng(2)
    x, w, b = rng.standard_normal((3, 4)), rng.standard_normal((2, 4)), rng.standard_normal(2)

    def loss(x, w, b):
        return np.sum(np.tanh(lg.nn.functional.linear(x, w, b)) * np.arange(6.0).reshape(3, 2))

    value, grads = lg.differentiate(loss, wrt=(0, 1, 2)).value_and_grad(x, w, b)
    ts = [lg.tensor(v, requires_grad=True) for v in (x, w, b)]
    out = loss(*ts)
    out.backward()
    assert value == pytest.approx(out.item(), rel=1e-12)
    for g, t in zip(grads, ts):
        np.testing.assert_allclose(g, t.grad.numpy(), rtol=1e-10, atol=1e-12)


def test_unbind_select_narrow_chunk():
    t = lg.tensor([[1, 2], [3, 4]])
    assert [u.tolist() for u in t.unbind(1)] == [[1, 3], [2, 4]]
    assert [u.tolist() for u in lg.unbind(t)] == [[1, 2], [3, 4]]
    assert [c.tolist() for c in lg.arange(5).chunk(3)] == [[0, 1], [2, 3], [4]]
    assert [c.tolist() for c in lg.chunk(lg.arange(6), 4)] == [[0, 1], [2, 3], [4, 5]]
    assert lg.arange(6).narrow(0, -3, 2).tolist() == [3, 4]
    assert t.select(1, -1).tolist() == [2, 4]
    with pytest.raises(IndexError, match=r"start \(4\) \+ length \(3\) exceeds dimension size"):
        lg.arange(6).narrow(0, 4, 3)


def test_errors_follow_pytorch():
    x = lg.tensor([[1.0, 2.0]])
    with pytest.raises(IndexingError, match="index 2 is out of bounds for dimension 1 with size 2"):
        x.gather(1, lg.tensor([[2]]))
    with pytest.raises(IndexingError, match="index -1 is out of bounds"):
        x.scatter(1, lg.tensor([[-1]]), 0.0)
    with pytest.raises(DTypeError, match="Expected self.dtype to be equal to src.dtype"):
        x.scatter(1, lg.tensor([[0]]), lg.tensor([[1.0]], dtype=lg.float64))
    with pytest.raises(DTypeError, match="must have the same scalar type"):
        lg.tensor([1.0, 2.0]).index_add(0, lg.tensor([0]), lg.ones(1, dtype=lg.float64))
    with pytest.raises(TypeError, match="masked_fill only supports boolean masks"):
        lg.tensor([1.0, 2.0]).masked_fill(lg.tensor([1, 0]), 0.0)
    with pytest.raises(ShapeError, match="does not broadcast to the input's shape"):
        lg.tensor([1.0, 2.0]).masked_fill(lg.tensor([[True], [False]]), 0.0)
    with pytest.raises(IndexingError, match=r"topk: k \(3\) is out of range"):
        lg.tensor([1.0, 2.0]).topk(3)
    with pytest.raises(ShapeError, match="larger than the input"):  # (dim 0: 2 > 1)
        x.gather(1, lg.tensor([[0], [0]]))
    with pytest.raises(ShapeError, match="mat1 and mat2 shapes cannot be multiplied"):
        lg.addmm(lg.zeros(2), lg.zeros(2, 3), lg.zeros(2, 2))
    with pytest.raises(NotImplementedError, match="reduce"):
        x.scatter(1, lg.tensor([[0]]), 1.0, reduce="add")


def test_masked_fill_keeps_the_input_dtype():
    # torch 2.13: a float64 0-d value tensor fills a float32 tensor, which stays float32
    x = lg.tensor([1.0, 2.0], requires_grad=True)
    v = lg.tensor(0.5, dtype=lg.float64, requires_grad=True)
    y = x.masked_fill(lg.tensor([True, False]), v)
    assert y.dtype == lg.float32 and y.tolist() == [0.5, 2.0]
    y.sum().backward()
    assert x.grad.tolist() == [0.0, 1.0] and v.grad.item() == 1.0 and v.grad.dtype == lg.float64


def test_numpy_and_array_refuse_tensors_that_require_grad():
    msg = r"Can't call numpy\(\) on Tensor that requires grad. Use tensor.detach\(\).numpy\(\)"
    x = lg.tensor([[2.0, 1.0], [1.0, 3.0]], requires_grad=True)
    with pytest.raises(RuntimeError, match=msg):
        x.numpy()
    with pytest.raises(RuntimeError, match=msg):
        np.asarray(x)
    with pytest.raises(RuntimeError, match=msg):
        (x * 2).numpy()
    # scipy on a tensor that requires grad used to return a plain array, dropping the graph
    scipy_linalg = pytest.importorskip("scipy.linalg")
    with pytest.raises(RuntimeError, match=msg):
        scipy_linalg.expm(x)
    assert np.asarray(x.detach()).tolist() == [[2.0, 1.0], [1.0, 3.0]]
    assert np.asarray(x.detach(), dtype=np.float64).dtype == np.float64
    # numpy functions llgrad implements still dispatch (and keep the graph)
    assert np.exp(x).requires_grad


def test_new_factories():
    x = lg.tensor([1, 2])
    assert x.new_full((2, 1), 7).tolist() == [[7], [7]] and x.new_full(3, 1).dtype == lg.int64
    assert x.new_empty(2).shape == (2,) and lg.empty_like(x).dtype == lg.int64


def test_bmm_values_gradients_and_errors():
    a = lg.tensor(np.arange(12.0).reshape(2, 2, 3), requires_grad=True)
    b = lg.tensor(np.arange(6.0).reshape(2, 3, 1), requires_grad=True)
    y = lg.bmm(a, b)
    # batch 0: [[0,1,2],[3,4,5]] @ [0,1,2]^T = [5, 14]; batch 1: [[6,7,8],[9,10,11]] @ [3,4,5]
    assert y.tolist() == [[[5.0], [14.0]], [[86.0], [122.0]]]
    y.sum().backward()
    assert b.grad.tolist() == [[[3.0], [5.0], [7.0]], [[15.0], [17.0], [19.0]]]  # column sums
    assert a.grad.tolist() == [[[0.0, 1.0, 2.0]] * 2, [[3.0, 4.0, 5.0]] * 2]
    assert lg.autograd.gradcheck(lambda p, q: p.bmm(q), (a.detach().requires_grad_(),
                                                         b.detach().requires_grad_()))
    with pytest.raises(ShapeError, match="must be 3D tensors"):
        lg.bmm(a[0], b[0])
    with pytest.raises(ShapeError, match=r"do not fit \(batch sizes must be equal"):
        lg.bmm(a, b[:1])
