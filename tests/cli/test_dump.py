"""LLGRAD_DUMP=DIR: every compile writes its stages to DIR/<function>/<signature-hash>/."""
from __future__ import annotations

import json
import os

import numpy as np

import llgrad
from llgrad.dump import FILES, dump_compiled, signature_hash

EXPECTED = {"graph.txt", "forward.ir", "backward.ir", "module.ll", "module.s", "backward.py",
            "stats.json"}


def f(x, n):
    return np.sum(np.sin(x) * n)


def test_every_compile_is_dumped(tmp_path, monkeypatch):
    monkeypatch.setenv("LLGRAD_DUMP", str(tmp_path))
    d = llgrad.differentiate(f)
    x = np.linspace(0.0, 1.0, 4)
    d.grad(x, 2)
    d.grad(x, 2)          # the same signature: no new compile, no new directory
    d.grad(x[:3], 2)      # a new shape
    d.grad(x, 3)          # a new static value
    sigs = sorted(os.listdir(tmp_path / "f"))
    assert len(sigs) == 3 and all(s.startswith("sig-") for s in sigs)
    for s in sigs:
        assert set(os.listdir(tmp_path / "f" / s)) == EXPECTED  # no temporary files left
    i = d.inspect(x, 2)
    here = tmp_path / "f" / ("sig-" + signature_hash(i))
    assert (here / "backward.ir").read_text() == str(i.backward_ir) + "\n"
    assert (here / "graph.txt").read_text().startswith("func @f(")
    assert "def f_grad(" in (here / "backward.py").read_text()
    stats = json.loads((here / "stats.json").read_text())
    assert stats["function"] == "f" and stats["signature"] == "(f64[4], static 2)"
    if not llgrad.runtime.config.disable_jit():
        assert "define" in (here / "module.ll").read_text()


def test_dump_without_jit(tmp_path, monkeypatch):
    monkeypatch.setenv("LLGRAD_DISABLE_JIT", "1")
    i = llgrad.differentiate(f).inspect(np.ones(3), 1)
    out = dump_compiled(str(tmp_path), i)
    assert set(os.listdir(out)) == EXPECTED
    assert "LLGRAD_DISABLE_JIT" in open(os.path.join(out, "module.ll")).read()


def test_signature_hash_is_stable_and_covers_wrt():
    def g(a, b):
        return np.sum(a * b)
    x = np.ones(3)
    h0 = signature_hash(llgrad.differentiate(g).inspect(x, x))
    assert h0 == signature_hash(llgrad.differentiate(g).inspect(x, x))
    assert h0 != signature_hash(llgrad.differentiate(g, wrt=1).inspect(x, x))
    assert len(h0) == 12 and set(FILES) < EXPECTED
