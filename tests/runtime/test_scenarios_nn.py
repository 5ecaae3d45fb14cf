"""SCENARIOS.md sections 3 (the hand-written backward on an nn.Module MLP), 7 (no_grad vs
eval) and 8 (backward through a freed graph, with lg.optim.Adam), run as written; and the
examples/train_mlp.py script."""
from __future__ import annotations

import inspect
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import llgrad as lg
from llgrad import nn
from test_scenarios import autograd  # SCENARIOS.md section 3's traversal, as written

ROOT = Path(__file__).resolve().parents[2]


# -- section 3 ----------------------------------------------------------------------------------
class TwoHeads(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(10, 5), nn.ReLU())
        self.head1 = nn.Linear(5, 2)
        self.head2 = nn.Sequential(nn.Linear(5, 2), nn.ReLU(), nn.Linear(2, 2))

    def forward(self, x):
        h = self.body(x)
        return self.head1(h) + self.head2(h)


def test_section3_hand_written_backward_on_module_mlp():
    model, reference = TwoHeads(), TwoHeads()
    reference.load_state_dict(model.state_dict())
    x = lg.ones([10], requires_grad=True)
    z = model(x).sum()
    autograd(z.grad_fn, lg.tensor(1.))
    x2 = lg.ones([10], requires_grad=True)
    z2 = reference(x2).sum()
    z2.backward()
    np.testing.assert_allclose(x.auto_grad.detach().numpy(), x2.grad.numpy(), rtol=1e-6,
                               atol=1e-7)
    for (name, p), q in zip(model.named_parameters(), reference.parameters()):
        np.testing.assert_allclose(p.auto_grad.detach().numpy(), q.grad.numpy(), rtol=1e-6,
                                   atol=1e-7, err_msg=name)
    assert abs(float(x2.grad.abs().sum())) > 0  # the ReLUs did not kill every path


# -- section 7 ----------------------------------------------------------------------------------
def _dropout_model():
    return nn.Sequential(nn.Linear(20, 20), nn.Dropout(0.5), nn.Linear(20, 3))


def test_section7_no_grad_stops_recording_but_not_dropout():
    model = _dropout_model()
    inp = lg.randn(4, 20)
    with lg.no_grad():
        y = model(inp)
    assert y.grad_fn is None and not y.requires_grad
    # still training: dropout is active under no_grad, so two calls differ
    with lg.no_grad():
        assert not np.allclose(model(inp).numpy(), model(inp).numpy())
        hidden = model[1](model[0](inp)).numpy()
    assert (hidden == 0).mean() > 0.2


def test_section7_eval_changes_dropout_but_still_records_the_graph():
    model = _dropout_model()
    inp = lg.randn(4, 20)
    model.eval()
    y1, y2 = model(inp), model(inp)
    assert y1.grad_fn is not None and y1.requires_grad  # eval saves no memory by itself
    np.testing.assert_array_equal(y1.detach().numpy(), y2.detach().numpy())
    y1.sum().backward()
    assert model[0].weight.grad is not None
    with lg.no_grad():
        expected = model[2](model[0](inp))  # Dropout is the identity in eval mode
    np.testing.assert_allclose(y1.detach().numpy(), expected.numpy(), rtol=1e-6)
    model.train()
    assert not np.allclose(model(inp).detach().numpy(), y1.detach().numpy())


# -- section 8 ----------------------------------------------------------------------------------
def test_section8_backward_through_freed_graph_names_the_line():
    style = lg.rand(1, 8).requires_grad_(True)   # should not need grad, but does
    style_gram = style.T @ style                  # computed once, outside the loop
    gram_line = inspect.currentframe().f_lineno - 1
    param = lg.rand(8, 8, requires_grad=True)
    opt = lg.optim.Adam([param], 1e-3)
    with pytest.raises(RuntimeError,
                       match="Trying to backward through the graph a second time") as e:
        for step in range(2):
            loss = ((param - style_gram) ** 2).sum()
            opt.zero_grad(); loss.backward(); opt.step()  # noqa: E702
    assert step == 1
    msg = str(e.value)
    assert f"{Path(__file__).name}:{gram_line}" in msg, msg
    assert "detach()" in msg and "retain_graph=True" in msg


def test_section8_fixed_with_detach_trains():
    style = lg.rand(1, 8).requires_grad_(True)
    style_gram = (style.T @ style).detach()
    param = lg.rand(8, 8, requires_grad=True)
    opt = lg.optim.Adam([param], 1e-1)
    losses = []
    for step in range(50):
        loss = ((param - style_gram) ** 2).sum()
        opt.zero_grad(); loss.backward(); opt.step()  # noqa: E702
        losses.append(loss.item())
    assert losses[-1] < losses[0] / 10


# -- examples/train_mlp.py ----------------------------------------------------------------------
def test_train_mlp_example_runs():
    out = subprocess.run([sys.executable, str(ROOT / "examples" / "train_mlp.py"),
                          "--steps", "120", "--every", "40"],
                         capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert [ln.split()[1] for ln in lines if ln.startswith("step")] == ["0", "40", "80", "119"]
    first = float(lines[0].split()[-1])
    last = float(lines[-2].split()[-1])
    assert last < first / 10, out.stdout
    assert "train accuracy" in lines[-1]
