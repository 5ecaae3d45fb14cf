"""In-place ops and version counters: the "modified by an inplace operation" error, leaf
checks, views sharing versions, setitem."""
from __future__ import annotations

import pytest

import llgrad as lg


def test_inplace_ops_values_and_versions():
    t = lg.tensor([1.0, 2.0])
    v = t._version
    t.add_(1).mul_(2).sub_(1).div_(2)
    assert t.tolist() == [1.5, 2.5] and t._version == v + 4
    t.clamp_(2.0, 2.2)
    assert t.tolist() == [2.0, pytest.approx(2.2)]
    t.fill_(3.0)
    assert t.tolist() == [3.0, 3.0]
    t.zero_()
    assert t.tolist() == [0.0, 0.0]
    t.copy_(lg.tensor([5.0, 6.0]))
    assert t.tolist() == [5.0, 6.0]
    t.add_(lg.tensor([1.0, 1.0]), alpha=2)
    assert t.tolist() == [7.0, 8.0]
    t[0] = 1.0
    assert t.tolist() == [1.0, 8.0] and t._version == v + 10


def test_inplace_keeps_dtype():
    t = lg.tensor([1, 2])
    with pytest.raises(RuntimeError, match="can't be cast"):
        t.mul_(1.5)
    f = lg.tensor([1.0, 2.0])
    f.add_(lg.tensor([1, 1]))
    assert f.dtype == lg.float32


def test_modified_saved_tensor_error_names_tensor_op_and_versions():
    x = lg.tensor([1.0, 2.0], requires_grad=True)
    a = x * 1
    b = a * a  # saves a (version 0)
    a.add_(1)
    with pytest.raises(RuntimeError) as e:
        b.sum().backward()
    msg = str(e.value)
    assert "one of the variables needed for gradient computation has been modified by an " \
        "inplace operation" in msg
    assert "a tensor of shape f32[2], which is output 0 of AddBackward0," in msg
    assert "is at version 1; expected version 0 instead" in msg
    assert "saved by MulBackward0, created at " + __file__ in msg


def test_modified_saved_output_error():
    x = lg.tensor([1.0, 2.0], requires_grad=True)
    y = x.exp()  # saves its output
    y.mul_(2)
    with pytest.raises(RuntimeError, match=r"a tensor of shape f32\[2\], which is output 0 of ExpBackward0, is at version 1; expected version 0"):
        y.sum().backward()


def test_inplace_not_saved_is_fine_and_gradient_flows():
    x = lg.tensor([1.0, 2.0], requires_grad=True)
    y = x + 0  # add saves nothing
    y.mul_(3)
    assert y.grad_fn.name() == "MulBackward0"
    y.sum().backward()
    assert x.grad.tolist() == [3.0, 3.0]


def test_inplace_op_keeps_the_old_value_for_its_own_backward():
    x = lg.tensor([1.0, 2.0], requires_grad=True)
    w = lg.tensor([3.0, 4.0], requires_grad=True)
    y = x + 0
    y.mul_(w)  # d/dw needs y before the update
    y.sum().backward()
    assert x.grad.tolist() == [3.0, 4.0] and w.grad.tolist() == [1.0, 2.0]


def test_setitem_records_graph():
    x = lg.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = x.clone()
    y[0] = x[2] * 10
    assert y.grad_fn.name() == "IndexPutBackward0"
    y.sum().backward()
    assert x.grad.tolist() == [0.0, 1.0, 11.0]


def test_leaf_requiring_grad_cannot_be_modified_in_place():
    x = lg.tensor([1.0], requires_grad=True)
    for op in (lambda: x.add_(1), lambda: x.mul_(2), lambda: x.zero_(), lambda: x.fill_(1.0),
               lambda: x.copy_(lg.tensor([2.0])), lambda: x.__setitem__(0, 2.0)):
        with pytest.raises(RuntimeError, match="(?s)a leaf Variable that requires grad is being "
                           r"used in an in-place operation \(.*\).*no_grad"):
            op()
    with lg.no_grad():
        x.add_(1)
        x.mul_(3)
    assert x.tolist() == [6.0] and x.is_leaf and x.grad_fn is None and x.requires_grad


def test_views_share_the_version_counter():
    x = lg.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    base = x * 1
    row = base[0]
    y = row * row  # saves row
    base.mul_(2)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.sum().backward()


def test_detach_shares_storage_and_version():
    x = lg.tensor([1.0, 2.0], requires_grad=True)
    y = x.exp()
    d = y.detach()
    d.zero_()
    assert y.tolist() == [0.0, 0.0]
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.sum().backward()


def test_data_updates_bypass_autograd():
    w = lg.tensor([1.0], requires_grad=True)
    w.data.sub_(0.5)
    assert w.tolist() == [0.5] and w.is_leaf
