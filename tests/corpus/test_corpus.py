"""Every corpus program (tests/corpus/programs.py): compiled value equals plain Python,
gradient equals central differences, staged (never silently on the dynamic path)."""
import pytest

from tests.corpus.check import run
from tests.corpus.programs import PROGRAMS


@pytest.mark.parametrize("p", PROGRAMS, ids=repr)
def test_program(p):
    r = run(p)
    assert r["path"] == "staged", r["path"]
