"""Index checks the IR makes unnecessary are left out (codegen/ranges.py, Note [Integer
ranges]; Note [Index checks]), and the reverse sweep does not check again what the forward
checked (Note [Replayed indices] in transform/ad.py); every index that may be out of range
is still checked, in the forward and in the gradient, natively as in the interpreter, and
negative indices still wrap where the IR does not prove them non-negative."""
from __future__ import annotations

import numpy as np
import pytest

from llgrad.codegen import compile_functions
from llgrad.codegen.ranges import Ranges
from llgrad.runtime.errors import IndexingError
from llgrad.runtime.ops.index import INDEXING, getitem_p, index_operands
from llgrad.transform import ad, control, interp
from llgrad.transform.builder import Builder
from llgrad.transform.passes.pipeline import optimize
from tests.fd import numerical_vjp

D = 6  # the triangle's side: columns D .. D*(D+1)/2 - 1 of a row hold its strict lower part
T = D * (D + 1) // 2


def build(f, *args):
    b = Builder(f.__name__, loc=None)
    with b:
        ps = [b.param((np.shape(a), np.asarray(a).dtype), f"a{k}") for k, a in enumerate(args)]
        b.fn.body.results.append(b.lift(f(*ps)))
    return b.fn


def triangle(w, x, start):
    """`pos = start; for c in range(D): for r in range(c + 1, D): q += w[pos] * x[c]; pos +=
    1` (the GMM's walk over a triangle): pos stays in D..T-1 when start is D."""
    def outer(c, pos, q):
        def inner(r, pos, q):
            return pos + 1, q + w[pos] * x[c] * x[r]
        return control.for_loop(c + 1, D, 1, inner, pos, q)
    return control.for_loop(0, D, 1, outer, start, 0.0)[1]


def _index_of(fn, array_param: int):
    """The index operand of the (one) getitem of parameter `array_param` in fn's loops."""
    p = fn.params[array_param]
    op = next(o for o in fn.walk() if o.prim is getitem_p and o.inputs[0] is p)
    return index_operands(op)[0]


def _stats(fn) -> dict:
    return compile_functions({"f": fn}).stats


W, X = np.random.default_rng(3).standard_normal(T), np.random.default_rng(4).standard_normal(D)


def test_an_induction_counter_over_a_triangle_is_proven_in_range():
    fn = build(lambda w, x: triangle(w, x, np.int64(D)), W, X)
    assert Ranges(fn).known_range(_index_of(fn, 0)) == (D, T - 1)
    stats = _stats(fn)
    assert (stats["index checks"], stats["index wraps"]) == (0, 0)
    want = sum(W[p] * X[c] * X[r] for p, (c, r) in enumerate(
        ((c, r) for c in range(D) for r in range(c + 1, D)), start=D))
    np.testing.assert_allclose(compile_functions({"f": fn})["f"](W, X)[0], want, rtol=1e-13)


def test_a_counter_one_too_far_is_checked_and_raises():
    fn = build(lambda w, x: triangle(w, x, np.int64(D + 1)), W, X)
    assert Ranges(fn).known_range(_index_of(fn, 0)) == (D + 1, T)
    stats = _stats(fn)
    assert (stats["index checks"], stats["index wraps"]) == (1, 0)  # the upper bound only
    want = f"index {T} is out of bounds for axis 0 with size {T}"
    for run in (lambda: compile_functions({"f": fn})["f"](W, X), lambda: interp.run(fn, W, X)):
        with pytest.raises(IndexingError, match=want):
            run()


def _joint(fn):
    return optimize(ad.grad_function(fn, [0]))


def _natural_start(w, x, s):
    return triangle(w, x, np.minimum(np.maximum(s, 0), 1000))  # (so pos + 1 cannot wrap)


def _gradients_agree(fn, joint, *args):
    native = compile_functions({"f": joint})["f"]
    for got in (native(*args), interp.run(joint, *args)):
        np.testing.assert_allclose(got[0], interp.run(fn, *args)[0], rtol=1e-13)
        fd = numerical_vjp(lambda w: interp.run(fn, w, *args[1:])[0], [args[0]], np.ones(()),
                           [0])
        np.testing.assert_allclose(got[1], fd[0], rtol=1e-6, atol=1e-8)


def test_the_reverse_sweep_does_not_check_again_what_the_forward_checked():
    """A start only known at run time, in 0..1000: the forward checks w[pos]'s upper bound
    and wraps nothing; the reverse sweep's reread of w[pos] and its scatter into w's
    cotangent are marked `checked` and check nothing; the joint still raises numpy's error
    for a start too large, natively and in the interpreter."""
    fn = build(_natural_start, W, X, np.array(D))
    assert Ranges(fn).known_range(_index_of(fn, 0))[0] == 0
    assert (_stats(fn)["index checks"], _stats(fn)["index wraps"]) == (1, 0)
    joint = _joint(fn)
    marked = {o.prim.name for o in joint.walk() if o.prim in INDEXING and o.checked}
    assert marked == {"getitem", "scatter_add"}
    assert (_stats(joint)["index checks"], _stats(joint)["index wraps"]) == (1, 0)
    _gradients_agree(fn, joint, W, X, np.array(D))
    bad = np.array(T - D + 1)  # pos reaches T at the last element
    want = f"index {T} is out of bounds for axis 0 with size {T}"
    for run in (lambda: compile_functions({"f": joint})["f"](W, X, bad),
                lambda: interp.run(joint, W, X, bad)):
        with pytest.raises(IndexingError, match=want):
            run()


def test_negative_indices_the_ir_does_not_bound_still_wrap():
    """pos from -3: w[-3], w[-2], w[-1] are numpy's last elements, forward and reverse."""
    fn = build(triangle, W, X, np.array(-3))
    joint = _joint(fn)
    assert _stats(joint)["index checks"] == _stats(fn)["index checks"] == 1
    assert _stats(joint)["index wraps"] >= 2  # the forward's and the reverse sweep's
    _gradients_agree(fn, joint, W, X, np.array(-3))
    want = f"index {-T - 1} is out of bounds for axis 0 with size {T}"
    with pytest.raises(IndexingError, match=want):
        compile_functions({"f": joint})["f"](W, X, np.array(-T - 1))
