"""Every corpus program (tests/corpus/programs.py): compiled value equals plain Python,
gradient equals central differences, staged, with no PerformanceWarning (no unrolled loop,
no dynamic path, no retracing)."""
import pytest

from tests.corpus.check import run
from tests.corpus.programs import PROGRAMS


@pytest.mark.parametrize("p", PROGRAMS, ids=repr)
def test_program(p):
    r = run(p)
    assert r["path"] == "staged", r["path"]
    assert not r["slow paths"], r["slow paths"]
