"""The `check` primitive (Note [Checks]): passes keep it, the interpreter raises the user's
exception with a note naming the line, printers show it, AD differentiates around it."""
from __future__ import annotations

import numpy as np
import pytest

from llgrad.runtime import ops
from llgrad.runtime.errors import SourceLoc
from llgrad.runtime.ops.control import check_p, cond_p
from llgrad.transform import ad, interp
from llgrad.transform.builder import Builder
from llgrad.transform.passes.pipeline import optimize
from llgrad.transform.printers.python_src import to_python
from llgrad.transform.verify import verify

LOC = SourceLoc(__file__, 12, 0, "f")
PARAMS = {"exc": ValueError, "args": ("x must be >= 0",)}


class NotConverged(RuntimeError):
    pass


def guarded(hoisted: bool, exc=ValueError):
    """f(x) = x * x, raising when x < 0: `check(x < 0)`, or a cond whose true region
    holds `check(true)` and that has no outputs (only the check keeps it alive)."""
    b = Builder("f", loc=None)
    with b:
        x = b.param(((), np.float64), "x")
        fail = ops.lt(x, 0.0)
        params = dict(PARAMS, exc=exc)
        if hoisted:
            b.emit(check_p, [fail], params, [], loc=LOC)
        else:
            with b.open_region() as then:
                b.emit(check_p, [b.const(np.bool_(True))], params, [], loc=LOC)
            with b.open_region() as other:
                pass
            b.emit(cond_p, [fail], {}, [], regions=[then, other])
        b.fn.body.results = [ops.mul(x, x)]
    return verify(b.fn)


@pytest.mark.parametrize("hoisted", [True, False], ids=["check", "cond"])
def test_passes_keep_checks_and_the_interpreter_raises(hoisted):
    fn = optimize(guarded(hoisted))
    assert sum(op.prim is check_p for op in fn.walk()) == 1
    assert interp.run(fn, np.float64(3.0))[0] == 9.0
    with pytest.raises(ValueError) as info:
        interp.run(fn, np.float64(-3.0))
    assert info.value.args == ("x must be >= 0",)
    assert info.value.__notes__ == [f"raised by compiled code at {LOC.describe()}"]


def test_joint_function_checks_before_the_backward():
    g = optimize(verify(ad.grad_function(guarded(False), [0])))
    value, ct = interp.run(g, np.float64(3.0))
    assert (value, ct) == (9.0, 6.0)
    with pytest.raises(ValueError, match="x must be >= 0"):
        interp.run(g, np.float64(-1.0))


def test_printers_show_the_check():
    fn = guarded(True)
    assert "check %" in str(fn) and "{exc=ValueError, args=('x must be >= 0',)}" in str(fn)
    ns: dict = {}
    exec(to_python(guarded(False, NotConverged)), ns)
    assert ns["f"](np.float64(2.0))[0] == 4.0
    with pytest.raises(NotConverged, match="x must be >= 0"):
        ns["f"](np.float64(-2.0))
