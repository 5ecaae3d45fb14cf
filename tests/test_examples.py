"""Every script in examples/ runs (natively: LLGRAD_DISABLE_JIT unset), exits 0 and prints its
key line. A new example must be added to EXPECTED (the test for coverage fails otherwise)."""
from __future__ import annotations

import glob
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLES = os.path.join(ROOT, "examples")

# script -> (extra command-line arguments, lines the output must contain)
EXPECTED = {
    "demo.py": ([], ["finite differences agree: True", "backward IR"]),
    "quickstart.py": ([], ["compiled grad:", "agree: True"]),
    "custom_function.py": ([], ["grad_fn : SoftplusBackward", "gradcheck passed: True"]),
    "inspect_ir.py": ([], ["== forward+backward IR ==", "def loss_grad(", "DOT picture"]),
    "train_mlp.py": (["--steps", "150"], ["train accuracy"]),
    "lorenz_fit.py": ([], ["matches finite differences: True",
                                          "fitted sigma="]),
    "distributed_logreg.py": (["--rows", "20000", "--steps", "3"],
                              ["distributed gradient equals one process: True"]),
}
XFAIL: dict[str, str] = {}  # example -> reason it is expected to fail (none today)


def test_every_example_is_tested():
    scripts = {os.path.basename(p) for p in glob.glob(os.path.join(EXAMPLES, "*.py"))}
    assert scripts == set(EXPECTED), "add the new example to EXPECTED in tests/test_examples.py"


def _params():
    for name in sorted(EXPECTED):
        marks = [pytest.mark.xfail(strict=False, reason=XFAIL[name])] if name in XFAIL else []
        yield pytest.param(name, marks=marks, id=name)


@pytest.mark.parametrize("name", list(_params()))
def test_example_runs(name):
    args, lines = EXPECTED[name]
    env = {k: v for k, v in os.environ.items() if k not in ("LLGRAD_DISABLE_JIT", "LLGRAD_DUMP")}
    r = subprocess.run([sys.executable, os.path.join(EXAMPLES, name), *args], cwd=ROOT,
                       capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0, f"{name} failed:\n{r.stdout[-2000:]}\n{r.stderr[-4000:]}"
    for line in lines:
        assert line in r.stdout, f"{name}: {line!r} not in output:\n{r.stdout[-2000:]}"
