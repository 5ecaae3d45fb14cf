"""Golden converted source for a few functions (LLGRAD_UPDATE_GOLDEN=1 rewrites the files).

The converted code is what `inspect()` shows users, so its readability is reviewed in diffs.
"""

import os
import pathlib

import convert_golden_cases as cases
import numpy as np
import pytest

from llgrad.tracer.convert import convert

GOLDEN = pathlib.Path(__file__).parent.parent / "golden"


@pytest.mark.parametrize("fn", [cases.piecewise, cases.recurrence, cases.search],
                         ids=lambda f: f.__name__)
def test_golden_source(fn):
    source = convert(fn).source + "\n"
    path = GOLDEN / f"convert_{fn.__name__}.py"
    if os.environ.get("LLGRAD_UPDATE_GOLDEN") == "1" or not path.exists():
        path.write_text(source)
    assert source == path.read_text(), f"converted source of {fn.__name__} changed"


def test_golden_functions_still_agree_with_python():
    x = np.array([0.5, -2.0, 3.0, 12.0, 0.01])
    for v in (1.0, -0.5, -3.0):
        assert convert(cases.piecewise)(v) == cases.piecewise(v)
    assert convert(cases.recurrence)(x, 5) == cases.recurrence(x, 5)
    assert convert(cases.search)(x.copy(), 0.1) == cases.search(x.copy(), 0.1)
    assert convert(cases.search)(np.array([1e-3]), 0.1) == 0
