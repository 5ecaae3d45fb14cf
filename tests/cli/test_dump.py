"""LLGRAD_DUMP=DIR: every compile writes its stages to DIR/<function>/<signature-hash>/, never
through a link or into another user's directory."""
from __future__ import annotations

import json
import os

import numpy as np
import pytest

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


def _inspection():
    return llgrad.differentiate(f).inspect(np.ones(3), 1)


def test_dump_does_not_follow_links(tmp_path):
    """Another user who prepares the tree cannot make a dump write elsewhere (issue 10,
    item 12): a linked directory is refused, and a link at a file's name (or at the
    temporary name older versions used) is replaced, not written through."""
    i = _inspection()
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    sig = "sig-" + signature_hash(i)
    d = tmp_path / "dump" / "f" / sig
    d.mkdir(parents=True)
    os.symlink(victim, d / "graph.txt")
    os.symlink(victim, d / f"graph.txt.tmp.{os.getpid()}")
    assert dump_compiled(str(tmp_path / "dump"), i) == str(d)
    assert victim.read_text() == "precious\n"
    assert not os.path.islink(d / "graph.txt")
    assert (d / "graph.txt").read_text() == str(i.graph) + "\n"

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (tmp_path / "linked").mkdir()
    os.symlink(elsewhere, tmp_path / "linked" / "f")
    with pytest.warns(UserWarning, match=r"LLGRAD_DUMP: not writing the dump of f: "
                                         r".*linked/f is not a plain directory"):
        assert dump_compiled(str(tmp_path / "linked"), i) is None
    assert os.listdir(elsewhere) == []


def test_a_refused_dump_does_not_stop_the_computation(tmp_path, monkeypatch):
    (tmp_path / "dump").mkdir()
    os.symlink(tmp_path, tmp_path / "dump" / "f")
    monkeypatch.setenv("LLGRAD_DUMP", str(tmp_path / "dump"))
    x = np.linspace(0.0, 1.0, 4)
    with pytest.warns(UserWarning, match="not a plain directory"):
        g = llgrad.differentiate(f).grad(x, 2)
    np.testing.assert_allclose(g, 2 * np.cos(x))


@pytest.mark.skipif(os.geteuid() != 0, reason="making a directory someone else's needs root")
@pytest.mark.parametrize("level", ["root", "function"])
def test_dump_refuses_directories_of_another_user(tmp_path, level):
    i = _inspection()
    root = tmp_path / "dump"
    (root / "f").mkdir(parents=True)
    os.chown(root if level == "root" else root / "f", 65534, -1)
    with pytest.warns(UserWarning, match=r"belongs to .*uid 65534.*not to you"):
        assert dump_compiled(str(root), i) is None
    assert os.listdir(root / "f") == []
