"""The reference interpreter agrees with the eager runtime and with plain numpy."""
from __future__ import annotations

import numpy as np
import pytest

from llgrad.transform import control, interp
from llgrad.transform.verify import verify

from cases import CASES
from helpers import build, eager_value_and_grad


@pytest.mark.parametrize("name", sorted(CASES))
def test_interp_matches_numpy_and_eager(name, rng):
    f, make = CASES[name]
    args = make(rng)
    fn = verify(build(f, *args))
    got = interp.run(fn, *args)[0]
    np.testing.assert_allclose(got, f(*args), rtol=1e-12)
    np.testing.assert_allclose(got, eager_value_and_grad(f, args, [0])[0], rtol=1e-12)


def recurrence(x):
    def body(i, s):
        return 0.9 * s + np.sin(x[i]) * x[i - 1]
    return control.for_loop(1, x.shape[0], 1, body, np.float64(0.0))[0]


def test_for_loop_cond_while():
    x = np.linspace(-1, 1, 7)
    fn = verify(build(recurrence, x))
    s = 0.0
    for i in range(1, 7):
        s = 0.9 * s + np.sin(x[i]) * x[i - 1]
    assert interp.run(fn, x)[0] == pytest.approx(s, rel=1e-14)

    def halve(y):
        return control.while_loop(lambda a, n: a > 0.1, lambda a, n: (a * 0.5, n + 1),
                                  y, np.int64(0))

    a, n = interp.run(build(halve, np.float64(3.0)), np.float64(3.0))
    assert (a, n) == (3.0 / 32, 5)

    def branch(y):
        return control.cond(y > 0, lambda v: v * 2.0, lambda v: -v, y)[0]

    fn = build(branch, np.float64(1.0))
    assert interp.run(fn, 1.5)[0] == 3.0 and interp.run(fn, -2.0)[0] == 2.0


def test_loop_with_zero_trips_and_negative_step():
    x = np.arange(4.0)

    def down(x):
        return control.for_loop(3, -1, -1, lambda i, s: s * 2.0 + x[i], np.float64(0.0))[0]

    def empty(x):
        return control.for_loop(2, 2, 1, lambda i, s: s + x[i], np.float64(7.0))[0]

    assert interp.run(build(down, x), x)[0] == ((3 * 2 + 2) * 2 + 1) * 2 + 0
    assert interp.run(build(empty, x), x)[0] == 7.0


def test_interp_reports_the_failing_op():
    from llgrad.runtime.ops.control import tape_get_p, tape_new_p
    from llgrad.transform.builder import Builder
    b = Builder("bad", loc=None)
    with b:
        t = b.emit(tape_new_p, [], {"shape": (), "dtype": np.dtype("f8"), "rows": 1},
                   [((1,), np.dtype("f8"))])[0]
        k = b.const(np.int64(0))
        b.fn.body.results.append(b.emit(tape_get_p, [t, k], {}, [((), np.dtype("f8"))])[0])
    with pytest.raises(IndexError) as e:
        interp.run(b.fn)
    assert "During: interpreting tape_get" in str(e.value.__notes__)


def test_argument_shape_is_checked():
    fn = build(CASES["elementwise"][0], np.zeros(5))
    with pytest.raises(ValueError, match="built for"):
        interp.run(fn, np.zeros(4))
