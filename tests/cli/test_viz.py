"""Pictures: llgrad.viz.draw (eager autograd graphs) and Inspection.draw (IR), as DOT text;
rendered only when Graphviz's `dot` is installed."""
from __future__ import annotations

import re

import numpy as np
import pytest

import llgrad as lg
from llgrad import viz
from llgrad.autograd import Function

needs_dot = pytest.mark.skipif(not viz.have_dot(), reason="Graphviz `dot` is not installed")


def _labels(dot: str) -> dict[str, str]:
    return dict(re.findall(r'^\s*(\w+) \[label="([^"]*)"', dot, re.M))


def _edges(dot: str) -> set[tuple[str, str]]:
    return set(re.findall(r"^\s*(\w+) -> (\w+)", dot, re.M))


def test_draw_eager_graph_structure():
    a = lg.tensor([1.0, 2.0], requires_grad=True)
    w = lg.tensor([[1.0, 0.5], [0.0, 1.0]], requires_grad=True)
    c = lg.tensor([3.0, 4.0])  # a constant: not drawn
    y = ((w @ a).exp() * a + c).sum()
    dot = viz.draw(y, params={"a": a, "w": w})
    assert dot.startswith("digraph autograd {") and dot.rstrip().endswith("}")
    labels = _labels(dot)
    by_label = {v: k for k, v in labels.items()}
    assert {"SumBackward0", "AddBackward0", "MulBackward0", "ExpBackward0"} <= set(labels.values())
    assert by_label["a\\nf32[2]"] and by_label["w\\nf32[2,2]"]  # leaves: name and shape
    assert by_label["output\\nf32[]"]
    assert "AccumulateGrad" not in dot and "f32[2]\\n" not in labels.get("c", "")
    edges = _edges(dot)
    # a feeds both the mul and (through the matmul) the exp: one leaf node, two uses
    assert sum(1 for src, _ in edges if src == by_label["a\\nf32[2]"]) == 2
    assert (by_label["SumBackward0"], by_label["output\\nf32[]"]) in edges
    assert (by_label["ExpBackward0"], by_label["MulBackward0"]) in edges
    # every node reached from the output: one node per grad_fn, none repeated
    assert len(labels) == len(set(labels))


def test_draw_custom_function_and_multiple_roots():
    class Cube(Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x * x

        @staticmethod
        def backward(ctx, g):
            x, = ctx.saved_tensors
            return 3 * x * x * g

    x = lg.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y1, y2 = Cube.apply(x).sum(), (x * 2).sum()
    dot = viz.draw((y1, y2))
    labels = list(_labels(dot).values())
    assert "CubeBackward" in labels and labels.count("output\\nf32[]") == 2
    assert labels.count("f32[3]") == 1  # one leaf shared by both roots


def test_draw_leaf_without_graph():
    x = lg.tensor([1.0], requires_grad=True)
    dot = viz.draw(x)
    assert "lightblue" in dot and "->" not in dot


def test_render_without_dot_writes_source(tmp_path, monkeypatch):
    monkeypatch.setattr(viz.shutil, "which", lambda name: None)
    x = lg.tensor([1.0], requires_grad=True)
    with pytest.warns(UserWarning, match="not installed"):
        viz.draw((x * 2).sum(), path=str(tmp_path / "g.svg"))
    assert (tmp_path / "g.svg.dot").read_text().startswith("digraph")
    viz.draw((x * 2).sum(), path=str(tmp_path / "g.dot"))  # DOT itself needs no Graphviz
    assert (tmp_path / "g.dot").read_text().startswith("digraph")
    with pytest.raises(ValueError, match="unknown picture format"):
        viz.render("digraph {}", str(tmp_path / "g"), format="gif")


def _loop_free(x, y):
    return np.sum(np.where(x > 0, x * y, np.exp(x)))


def test_inspection_draw_ir_structure():
    i = lg.differentiate(_loop_free).inspect(np.linspace(-1, 1, 5), np.ones(5))
    back = i.draw()
    assert back.startswith('digraph "_loop_free_grad" {')
    assert "exp" in back and "->" in back and 'shape=doublecircle' in back
    fwd = i.draw(stage="forward")
    assert fwd.startswith('digraph "_loop_free" {')
    assert len(back) > len(fwd)
    # fusion regions are drawn as clusters
    if "fusion" in str(i.backward_ir):
        assert "subgraph cluster_" in back
    with pytest.raises(ValueError, match="stage="):
        i.draw(stage="llvm")


@needs_dot
def test_render_svg_and_png(tmp_path):
    x = lg.tensor([1.0, 2.0], requires_grad=True)
    viz.draw((x.exp() * x).sum(), path=str(tmp_path / "g.svg"))
    assert "<svg" in (tmp_path / "g.svg").read_text()
    viz.draw((x.exp() * x).sum(), path=str(tmp_path / "g.png"))
    assert (tmp_path / "g.png").read_bytes()[:4] == b"\x89PNG"
    i = lg.differentiate(_loop_free).inspect(np.ones(3), np.ones(3))
    i.draw(str(tmp_path / "ir.svg"))
    assert "<svg" in (tmp_path / "ir.svg").read_text()
