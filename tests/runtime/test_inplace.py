"""In-place ops and version counters: the "modified by an inplace operation" error, leaf
checks, views sharing versions, setitem, in-place ops through views (the base's graph follows)."""
from __future__ import annotations

import numpy as np
import pytest

import llgrad as lg
from llgrad.autograd.gradcheck import gradcheck, gradgradcheck
from tests.fd import numerical_vjp


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


# ---- in-place ops through views (runtime/autograd/views.py) ------------------------------------
# Each program runs unchanged on numpy arrays (the reference values) and on llgrad tensors; the
# gradient of the llgrad run is checked against central differences of the numpy run.
def through_slice(x):
    y = x * 1.0
    v = y[:2]
    v *= x[1:3]
    return (y * y).sum()


def view_of_view(x):
    y = x * 1.0
    v = y.reshape(2, 2)[1]
    v += x[:2] * x[:2]
    return (y * y * y).sum()


def transposed_column(x):
    y = x.reshape(2, 2) * 1.0
    c = y.T[0]
    c -= x[2:] * 3.0
    return (y * x.reshape(2, 2)).sum()


def other_live_view_sees_the_write(x):
    y = x * 2.0
    a = y[:3]
    b = y[1:]
    a *= x[:3]
    return (b * b).sum() + y[0]


def base_written_while_a_view_lives(x):
    y = x * 1.0
    v = y[1:]
    y *= x
    return (v * v).sum()


def setitem_on_a_view(x):
    y = x * 1.0
    v = y[1:]
    v[0] = x[3] * x[0]
    return (y * y).sum()


def twice_through_one_view(x):
    y = x + 0.0
    v = y[::2]
    v *= x[1::2]
    v += x[::2]
    return (y * y).sum()


VIEW_PROGRAMS = [through_slice, view_of_view, transposed_column, other_live_view_sees_the_write,
                 base_written_while_a_view_lives, setitem_on_a_view, twice_through_one_view]


@pytest.mark.parametrize("prog", VIEW_PROGRAMS, ids=lambda p: p.__name__)
def test_inplace_through_view_gradient_matches_finite_differences(prog):
    x0 = np.array([0.7, -1.3, 2.1, 0.4])
    x = lg.tensor(x0, requires_grad=True)
    out = prog(x)
    assert out.item() == pytest.approx(prog(x0.copy()), rel=1e-12)
    out.backward()
    fd = numerical_vjp(lambda a: prog(a.copy()), [x0], 1.0, wrt=[0])[0]
    np.testing.assert_allclose(x.grad.numpy(), fd, rtol=1e-6, atol=1e-8)


def test_inplace_through_view_rebases_the_base_graph():
    x = lg.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = x * 1.0
    before = y.grad_fn
    v = y[:2]
    v.mul_(x[:2])
    assert y.grad_fn.name() == "CopySlices"
    (old, _), (res, _) = y.grad_fn.next_functions
    assert old is before and res.name() == "MulBackward0"
    assert v.grad_fn is not res  # the view's graph is rebuilt on the rebased base


@pytest.mark.parametrize("prog", [through_slice, other_live_view_sees_the_write],
                         ids=lambda p: p.__name__)
def test_inplace_through_view_second_order(prog):
    x = lg.tensor(np.array([0.7, -1.3, 2.1, 0.4]), requires_grad=True)
    assert gradcheck(prog, (x,)) and gradgradcheck(prog, (x,))


def test_inplace_into_a_fresh_buffer_through_a_view_makes_it_require_grad():
    x = lg.tensor([1.0, 2.0], requires_grad=True)
    buf = lg.zeros(4, dtype=lg.float64)
    buf[1:3].copy_(x * 3.0)
    assert buf.requires_grad and buf.grad_fn.name() == "CopySlices"
    (buf * buf).sum().backward()
    assert x.grad.tolist() == [18.0, 36.0]


def test_view_of_leaf_cannot_be_modified_in_place():
    x = lg.tensor([1.0, 2.0], requires_grad=True)
    with pytest.raises(RuntimeError, match="a view of a leaf Variable that requires grad is "
                                           "being used in an in-place operation"):
        x[:1].mul_(2)
    with lg.no_grad():
        x[:1].mul_(2)  # allowed: not recorded
    assert x.tolist() == [2.0, 2.0]


def test_view_made_under_no_grad_cannot_be_modified_with_grad_on():
    x = lg.tensor([1.0, 2.0], requires_grad=True)
    y = x * 1.0
    with lg.no_grad():
        v = y[:1]
    with pytest.raises(RuntimeError, match="created in no_grad mode.*modified in place"):
        v.mul_(2)


def test_views_without_grad_stay_plain():
    y = lg.tensor([1.0, 2.0, 3.0])
    y[1:].mul_(2)
    assert y.tolist() == [1.0, 4.0, 6.0] and not y.requires_grad and y.grad_fn is None


def test_augmented_assignment_is_in_place_as_in_pytorch():
    x = lg.tensor([1.0, 2.0], requires_grad=True)
    y = x * 1.0
    alias = y
    y += x
    y *= 2.0
    assert y is alias and alias.tolist() == [4.0, 8.0] and y.grad_fn.name() == "MulBackward0"
    y.sum().backward()
    assert x.grad.tolist() == [4.0, 4.0]
    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad is being used in "
                                           "an in-place operation"):
        x -= 1.0
    w = x
    with lg.no_grad():  # the SGD update a PyTorch user writes: w stays the same leaf
        w -= 0.5 * x.grad
    assert w is x and x.is_leaf and x.requires_grad and x.tolist() == [-1.0, 0.0]
    i = lg.tensor([1, 2])
    with pytest.raises(RuntimeError, match="can't be cast"):
        i /= 2


def test_what_is_saved_follows_pytorch():
    # torch 2.13: x * 2.0 and x / 2.0 save the number only, so x may change afterwards;
    # x ** 2.0 and 2.0 / x save x (the error names the version it was saved at)
    w = lg.tensor([1.0, 2.0], requires_grad=True)
    for expr, saves_x in [("x * 2.0", False), ("x / 2.0", False), ("x * c", False),
                          ("x ** 2.0", True), ("c / x", True), ("x * x", True)]:
        x, c = w * 1, lg.tensor([3.0, 4.0])
        y = eval(expr)
        x.add_(1)
        if saves_x:
            with pytest.raises(RuntimeError, match="modified by an inplace operation"):
                y.sum().backward()
        else:
            y.sum().backward()
        w.grad = None


def test_version_counters_are_made_when_needed():
    x = lg.tensor([1.0, 2.0])
    assert x._version == 0
    y = x * 2  # a fresh result has no counter until something needs one
    assert y._v is None and y._version == 0
    v = y[0:1]  # a view shares its base's
    assert y._v is not None and v._vc is y._vc
    v.add_(1)
    assert y._version == v._version == 1 and y.tolist() == [3.0, 4.0]
    d = y.detach()
    d.mul_(2)
    assert y._version == 2
