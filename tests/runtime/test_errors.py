"""The text of each autograd error a user can hit: what, where (user file:line), how to fix."""
from __future__ import annotations

import pytest

import llgrad as lg


def _line_of(text: str) -> int:
    with open(__file__) as f:
        for i, line in enumerate(f, 1):
            if text in line and "_line_of" not in line:
                return i
    raise AssertionError(text)


def test_backward_twice_error_names_node_line_and_fixes():
    x = lg.tensor([1.0, 2.0], requires_grad=True)
    y = x.exp()  # the node whose saved output is freed
    s = y.sum()
    s.backward()
    with pytest.raises(RuntimeError) as e:
        s.backward()
    msg = str(e.value)
    assert msg.startswith("Trying to backward through the graph a second time")
    assert "ExpBackward0" in msg
    assert f"{__file__}:{_line_of('y = x.exp()  # the node')}" in msg
    assert "y = x.exp()" in msg  # the source line
    assert "retain_graph=True" in msg and ".detach()" in msg


def test_grad_twice_error():
    x = lg.tensor([1.0], requires_grad=True)
    y = (x * x).sum()
    lg.autograd.grad(y, x)
    with pytest.raises(RuntimeError, match="Trying to backward through the graph a second time"):
        lg.autograd.grad(y, x)


def test_calling_a_freed_node_directly():
    x = lg.tensor([1.0], requires_grad=True)
    y = x * x
    y.sum().backward()
    with pytest.raises(RuntimeError, match="MulBackward0, created at"):
        y.grad_fn(lg.tensor([1.0]))


def test_graph_without_saved_tensors_can_be_reused():
    x = lg.tensor([1.0], requires_grad=True)
    y = (x + 1).sum()  # add and sum save only shapes
    y.backward()
    y.backward()
    assert x.grad.tolist() == [2.0]


def test_second_backward_through_shared_subgraph_suggests_detach():
    style = lg.rand(1, 8).requires_grad_(True)
    gram = style.T @ style  # computed once, outside the loop
    param = lg.rand(8, 8, requires_grad=True)
    ((param - gram) ** 2).sum().backward()
    with pytest.raises(RuntimeError) as e:
        ((param - gram) ** 2).sum().backward()
    msg = str(e.value)
    assert "MmBackward0" in msg and "gram = style.T @ style" in msg
    assert f":{_line_of('gram = style.T @ style  #')}" in msg
    assert ".detach()" in msg and "retain_graph=True" in msg


def test_mismatched_gradient_shape():
    x = lg.tensor([1.0, 2.0], requires_grad=True)
    with pytest.raises(RuntimeError, match=r"Mismatch in shape: grad_output\[0\] has a shape "
                       r"of \[3\] and output\[0\] has a shape of \[2\]"):
        (x * 2).backward(lg.ones(3))


def test_hook_on_tensor_without_grad():
    with pytest.raises(RuntimeError, match="cannot register a hook on a tensor that doesn't "
                       "require gradient"):
        lg.tensor([1.0]).register_hook(lambda g: g)


def test_errors_are_llgrad_errors_with_a_fix():
    x = lg.tensor([1.0, 2.0], requires_grad=True)
    with pytest.raises(lg.errors.AutogradError) as e:
        (x * 2).backward()
    assert e.value.fix and "sum()" in e.value.fix


def test_shape_error_is_a_value_error_with_both_shapes():
    with pytest.raises(lg.errors.ShapeError, match=r"add: shapes \[2, 3\] and \[4\] cannot be "
                       "broadcast together"):
        lg.ones(2, 3) + lg.ones(4)
