"""Printers: text (golden, loc comments only on change), Python source (exec == interp) and
Graphviz DOT (structure)."""
from __future__ import annotations

import numpy as np
import pytest

from llgrad.runtime.errors import SourceLoc
from llgrad.transform import ad, interp
from llgrad.transform.builder import Builder
from llgrad.transform.passes.pipeline import optimize
from llgrad.transform.printers.dot import to_dot
from llgrad.transform.printers.python_src import to_python

from cases import CASES
from helpers import build, check_golden
from test_ad import cond_in_loop, grow, loop_in_cond, nested, recurrence, rnn

R = np.random.default_rng(3)
FLOW = {"recurrence": (recurrence, [np.linspace(-1, 1, 6)]),
        "nested": (nested, [R.normal(size=3), R.normal(size=4)]),
        "cond_in_loop": (cond_in_loop, [R.normal(size=5)]),
        "rnn": (rnn, [R.normal(size=(3, 3)) * 0.5, R.normal(size=(4, 3))]),
        "while": (grow, [np.array([0.3, 0.4])]),
        "loop_in_cond": (loop_in_cond, [np.array([0.5, 0.2, 0.1])])}


def _exec(fn):
    ns: dict = {}
    exec(compile(to_python(fn), f"<{fn.name}>", "exec"), ns)
    return ns[fn.name]


@pytest.mark.parametrize("name", sorted(CASES) + sorted(FLOW))
def test_python_source_round_trip(name, rng):
    f, args = (CASES[name][0], CASES[name][1](rng)) if name in CASES else FLOW[name]
    fn = build(f, *args)
    for g in (fn, ad.grad_function(fn, list(range(len(args)))),
              optimize(ad.grad_function(fn, list(range(len(args)))))):
        got = _exec(g)(*args)
        for a, b in zip(got, interp.run(g, *args)):
            np.testing.assert_allclose(a, b, rtol=1e-13, atol=1e-15)


def test_python_source_is_readable(update_golden):
    fn = build(recurrence, np.zeros(4))
    src = to_python(fn)
    assert "for __lg_i in range(" in src and "np.sin(" in src and "x_0[" in src
    check_golden("python_src_recurrence.py", src, update_golden)


def test_text_golden(update_golden):
    fn = build(FLOW["cond_in_loop"][0], np.zeros(3))
    check_golden("text_cond_in_loop_grad.ir", str(ad.grad_function(fn, [0])) + "\n",
                 update_golden)


def test_loc_comment_only_when_it_changes(tmp_path):
    src = tmp_path / "model.py"
    src.write_text("a = 1\nb = 2\n")
    locs = iter([SourceLoc(str(src), 1, 0, "f")] * 3 + [SourceLoc(str(src), 2, 0, "f")] * 9)
    b = Builder("f", loc=lambda: next(locs))
    with b:
        x = b.param(((3,), np.float64), "x")
        y = np.exp(x) * 2.0
        b.fn.body.results.append(np.sum(y + 1.0))
    lines = str(b.fn).splitlines()
    commented = [ln for ln in lines if "#" in ln]
    assert len(commented) == 2
    assert commented[0].endswith("# model.py:1  a = 1")
    assert commented[1].endswith("# model.py:2  b = 2")


def test_dot_structure():
    fn = build(FLOW["cond_in_loop"][0], np.zeros(3))
    dot = to_dot(fn)
    assert dot.startswith('digraph "cond_in_loop" {') and dot.rstrip().endswith("}")
    assert dot.count("subgraph cluster_") == 2 + 3  # for_loop(+1 region), cond(+2 regions)
    assert 'label="for_loop"' in dot and 'label="cond"' in dot and "->" in dot
    assert dot.count("{") == dot.count("}")
    assert 'shape=doublecircle' in dot
