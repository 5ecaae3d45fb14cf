"""Every corpus program (tests/corpus/programs.py): compiled value equals plain Python,
gradient equals central differences, staged, with no PerformanceWarning (no unrolled loop,
no dynamic path, no retracing)."""
import inspect

import pytest

from tests.corpus.check import run
from tests.corpus.programs import PROGRAMS
from tests.corpus.programs_science import _binomial_args, american_put_binomial
from tests.corpus.registry import Program


@pytest.mark.parametrize("p", PROGRAMS, ids=repr)
def test_program(p):
    r = run(p)
    assert r["path"] == "staged", r["path"]
    assert not r["slow paths"], r["slow paths"]


def test_binomial_tree_of_shrinking_arrays_is_unrolled_with_a_clear_warning(monkeypatch):
    """The one program kept out of PROGRAMS (see programs_science.py): right value and
    gradient, and one warning that names the line taking a shape from the counter."""
    monkeypatch.setenv("LLGRAD_DISABLE_JIT", "1")  # (40 unrolled copies: fast to interpret)
    r = run(Program(american_put_binomial, _binomial_args, wrt=(0, 1)))
    lines, first = inspect.getsourcelines(american_put_binomial)
    line = first + next(k for k, s in enumerate(lines) if "np.arange(i + 1)" in s)
    assert len(r["slow paths"]) == 1, r["slow paths"]
    assert f"as a Python value at line {line} (as a shape or a size" in r["slow paths"][0]
