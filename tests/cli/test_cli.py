"""`python -m llgrad` / `llgrad`: inspect with argument specs and stages, cache, errors."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

from llgrad.__main__ import UsageError, main, parse_spec, parse_wrt

HERE = os.path.dirname(__file__)
SCRIPT = os.path.join(HERE, "inspect_fixture.py")


def run_cli(*argv: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "LLGRAD_DISABLE_JIT"}
    return subprocess.run([sys.executable, "-m", "llgrad", *argv], capture_output=True,
                          text=True, env=env, timeout=120)


def test_inspect_backward_subprocess():
    r = run_cli("inspect", f"{SCRIPT}:loss", "--arg", "f64[3]", "--arg", "f64[5,3]",
                "--arg", "float", "--arg", "int=5", "--wrt", "0", "--stage", "backward")
    assert r.returncode == 0, r.stderr
    assert "__main__ block" not in r.stdout + r.stderr  # it did not run
    assert r.stdout.startswith("# loss(f64[3], f64[5,3], float, static 5)  wrt=0")
    assert "== forward+backward IR (optimised) ==" in r.stdout
    assert "func @loss_grad(" in r.stdout
    assert "-> (f64[], f64[3])" in r.stdout  # value and the gradient w.r.t. w
    assert "tanh" in r.stdout and "== graph" not in r.stdout


def test_inspect_all_stages(capsys):
    assert main(["inspect", f"{SCRIPT}:loss", "--arg", "f64[3]", "--arg", "f32[5,3]",
                 "--arg", "float=2.0", "--arg", "int=5"]) == 0
    out = capsys.readouterr().out
    for header in ("converted source", "graph (traced IR)", "forward IR (optimised)",
                   "forward+backward IR (optimised)", "backward as Python source", "LLVM IR",
                   "assembly", "stats"):
        assert f"== {header} ==" in out
    assert "def loss_grad(" in out  # the Python source
    assert "signature" in out


def test_inspect_differentiable_keeps_its_wrt(capsys):
    assert main(["inspect", f"{SCRIPT}:decorated", "--arg", "f64[4]", "--arg", "f64[4]",
                 "--stage", "graph,backward"]) == 0
    out = capsys.readouterr().out
    assert "wrt='b'" in out and "-> (f64[], f64[4])" in out
    assert main(["inspect", f"{SCRIPT}:decorated", "--arg", "f64[4]", "--arg", "f64[4]",
                 "--wrt", "0,1", "--stage", "backward"]) == 0
    assert "-> (f64[], f64[4], f64[4])" in capsys.readouterr().out


def test_inspect_dot_stage(capsys):
    assert main(["inspect", f"{SCRIPT}:decorated", "--arg", "f64[2]", "--arg", "f64[2]",
                 "--stage", "dot"]) == 0
    out = capsys.readouterr().out
    assert 'digraph "decorated_grad" {' in out


def test_help_documents_every_command():
    r = run_cli("--help")
    assert r.returncode == 0
    for word in ("inspect", "cache", "LLGRAD_DUMP"):
        assert word in r.stdout
    r = run_cli("inspect", "--help")
    assert r.returncode == 0
    for word in ("--arg", "--wrt", "--stage", "f64[100]", "int=5", "float", "backward",
                 "llvm", "asm", "python", "all"):
        assert word in r.stdout


def test_console_script_installed():
    exe = shutil.which("llgrad", path=os.path.dirname(sys.executable))
    if exe is None:
        pytest.skip("the llgrad console script is not installed (pip install -e .)")
    r = subprocess.run([exe, "--help"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and "inspect" in r.stdout


def test_no_command_prints_help(capsys):
    assert main([]) == 2
    assert "inspect" in capsys.readouterr().err


@pytest.mark.parametrize("argv, message", [
    (["inspect", "nope/missing.py:f"], "file not found: nope/missing.py"),
    (["inspect", f"{SCRIPT}:nothere", "--arg", "f64[3]"], "has no function 'nothere'"),
    (["inspect", f"{SCRIPT}", "--arg", "f64[3]"], "expected FILE.py:FUNCTION"),
    (["inspect", f"{SCRIPT}:loss", "--arg", "q64[3]"], "bad --arg 'q64[3]'"),
    (["inspect", f"{SCRIPT}:loss", "--arg", "int"], "a static int needs a value"),
    (["inspect", f"{SCRIPT}:loss", "--arg", "f64[3]"], "missing a required argument"),
    (["inspect", f"{SCRIPT}:decorated", "--arg", "f64[3]", "--arg", "f64[3]", "--wrt", "c"],
     "--wrt c: not a parameter"),
    (["inspect", f"{SCRIPT}:decorated", "--arg", "f64[3]", "--arg", "f64[3]", "--wrt", "7"],
     "--wrt 7: out of range"),
    (["inspect", f"{SCRIPT}:decorated", "--arg", "f64[3]", "--arg", "f64[3]",
      "--stage", "ptx"], "unknown stage 'ptx'"),
])
def test_usage_errors_one_line_exit_2(capsys, argv, message):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err
    assert err.count("\n") == 1 and err.startswith("llgrad inspect: error: ")


def test_usage_error_subprocess_exit_status():
    r = run_cli("inspect", "does/not/exist.py:f", "--arg", "f64[3]")
    assert r.returncode == 2
    assert r.stderr.strip() == "llgrad inspect: error: file not found: does/not/exist.py"


def test_parse_spec():
    rng = np.random.default_rng(0)
    a = parse_spec("f32[3,4]", rng)
    assert a.shape == (3, 4) and a.dtype == np.float32
    assert parse_spec("f64[]", rng).shape == ()
    assert parse_spec(" i64[ 5 ] ", rng).dtype == np.int64
    assert parse_spec("bool[2]", rng).dtype == np.bool_
    assert isinstance(parse_spec("float", rng), float)
    assert parse_spec("float=0.5", rng) == 0.5
    v = parse_spec("int=5", rng)
    assert v == 5 and type(v) is int
    assert parse_spec("bool=true", rng) is True
    for bad in ("f64[3,,4]", "int=x", "f64", "[3]", "bool=maybe"):
        with pytest.raises(UsageError):
            parse_spec(bad, rng)
    # the same seed gives the same values
    assert np.array_equal(parse_spec("f64[4]", np.random.default_rng(1)),
                          parse_spec("f64[4]", np.random.default_rng(1)))


def test_parse_wrt():
    assert parse_wrt(None) is None
    assert parse_wrt(["0"]) == 0
    assert parse_wrt(["0,w"]) == (0, "w")
    assert parse_wrt(["1", "2"]) == (1, 2)


def test_cache_command(capsys, monkeypatch, tmp_path):
    import importlib.util
    monkeypatch.setenv("LLGRAD_CACHE_DIR", str(tmp_path))
    rc = main(["cache", "info"])
    captured = capsys.readouterr()
    if importlib.util.find_spec("llgrad.cache") is None:
        assert rc == 1 and "not available" in captured.err
    else:
        assert rc == 0
        assert main(["cache", "clear"]) == 0


def test_script_that_fails_to_import(capsys, tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("import nonexistent_module_for_llgrad_tests\n\ndef f(x):\n    return x\n")
    assert main(["inspect", f"{bad}:f", "--arg", "f64[3]"]) == 1
    assert "nonexistent_module_for_llgrad_tests" in capsys.readouterr().err
