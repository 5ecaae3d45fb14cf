"""`inspect()`: every stage as printable text; the text IR shows the user's source lines;
golden text IR for three small functions (LLGRAD_UPDATE_GOLDEN=1 or --update-golden
rewrites tests/golden/e2e_*.ir)."""
from __future__ import annotations

import difflib
import inspect as pyinspect
import os
from pathlib import Path

import numpy as np
import pytest

import llgrad
from tests.e2e import golden_fns

GOLDEN = Path(__file__).resolve().parent.parent / "golden"


def model(w, x, y):
    z = x @ w  # the matmul
    p = np.tanh(z)
    return np.mean((p - y) ** 2)  # the loss


@pytest.fixture(scope="module")
def case():
    rng = np.random.default_rng(0)
    args = (rng.standard_normal(3), rng.standard_normal((5, 3)), rng.standard_normal(5))
    f = llgrad.differentiate(model)
    return f, args, f.inspect(*args)


STAGES = ["graph", "forward_ir", "backward_ir", "llvm_ir", "python_source", "stats"]


@pytest.mark.parametrize("stage", STAGES)
def test_every_stage_is_printable_text(case, stage, capsys):
    _, _, ins = case
    text = getattr(ins, stage)
    assert str(text).strip()
    print(text)
    out = capsys.readouterr().out
    assert out.strip() == str(text).strip()
    assert repr(text).strip() == str(text).strip()  # prints nicely in a REPL too


def _line(marker):
    lines, start = pyinspect.getsourcelines(model)
    return start + next(i for i, s in enumerate(lines) if marker in s)


@pytest.mark.parametrize("stage", ["graph", "forward_ir", "backward_ir"])
def test_text_ir_shows_the_users_source_line(case, stage):
    text = getattr(case[2], stage)
    assert f"test_inspect.py:{_line('the matmul')}  z = x @ w  # the matmul" in text
    assert f"test_inspect.py:{_line('the loss')}" in text
    assert "matmul" in text and "tanh" in text


def test_backward_ir_is_the_gradient(case):
    f, args, ins = case
    assert ins.backward_ir.startswith("func @model_grad(")
    assert "-> (f64[], f64[3])" in ins.backward_ir.splitlines()[0]
    assert ins.forward_ir.startswith("func @model(")


def test_llvm_ir_and_stats(case):
    _, _, ins = case
    assert "define" in ins.llvm_ir
    for key in ("path", "signature", "ops (forward)", "ops (forward+backward)", "optimize time",
                "autodiff time", "codegen time"):
        assert key in ins.stats, key
    assert ins.stats["path"] == "staged" and ins.path == "staged"
    assert ins.stats["signature"] == "(f64[3], f64[5,3], f64[5])"
    assert "codegen time" in str(ins.stats) and " ms" in str(ins.stats)
    assert "model" in repr(ins)


def test_python_source_runs_and_gives_the_gradient(case):
    f, args, ins = case
    ns: dict = {}
    exec(compile(ins.python_source, "<python_source>", "exec"), ns)
    value, grad = ns["model_grad"](*args)[:2]
    v, g = f.value_and_grad(*args)
    np.testing.assert_allclose(value, v, rtol=1e-12)
    np.testing.assert_allclose(grad, g, rtol=1e-12)


def test_inspect_does_not_retrace(case):
    f, args, _ = case
    before = f.cache_info()["traces"]
    f.inspect(*args)
    f(*args)
    assert f.cache_info()["traces"] == before


def test_inspect_without_jit(case, monkeypatch):
    f, args, _ = case
    monkeypatch.setenv("LLGRAD_DISABLE_JIT", "1")
    ins = f.inspect(*args)
    assert "LLGRAD_DISABLE_JIT=1" in ins.llvm_ir
    assert ins.backward_ir.startswith("func @model_grad(")


def test_not_differentiable_backward_ir_says_why():
    @llgrad.differentiate
    def vec(x):
        return x * 2
    ins = vec.inspect(np.ones(3))
    assert "not differentiable" in ins.backward_ir and "f64[3]" in ins.backward_ir


# ---- golden text IR ------------------------------------------------------------------------
def check_golden(name: str, text: str, update: bool) -> None:
    path = GOLDEN / name
    if update or os.environ.get("LLGRAD_UPDATE_GOLDEN") == "1" or not path.exists():
        path.write_text(text)
        return
    expected = path.read_text()
    if text != expected:
        diff = "".join(difflib.unified_diff(expected.splitlines(True), text.splitlines(True),
                                            f"tests/golden/{name}", "now"))
        pytest.fail(f"{name} changed; review the diff and rerun with LLGRAD_UPDATE_GOLDEN=1:\n"
                    f"{diff}")


GOLDEN_CASES = {
    "softplus_sum": (np.linspace(-1.0, 1.0, 8),),
    "linear_mse": (np.ones(3), np.ones((4, 3)), np.ones(4)),
    "gather_clip": (np.ones(5), np.array([4, 0, 0, 2]), 0.5),
}


@pytest.mark.parametrize("name", list(GOLDEN_CASES))
def test_golden_text_ir(name, update_golden):
    fn = getattr(golden_fns, name)
    ins = llgrad.differentiate(fn).inspect(*GOLDEN_CASES[name])
    text = (f"// {name}: traced graph\n{ins.graph}\n"
            f"// {name}: forward IR (optimised)\n{ins.forward_ir}\n"
            f"// {name}: forward+backward IR (optimised)\n{ins.backward_ir}\n")
    check_golden(f"e2e_{name}.ir", text, update_golden)
