"""Each pass: golden before/after text on small functions (tests/golden/pass_*.ir; rerun with
LLGRAD_UPDATE_GOLDEN=1 or --update-golden to rewrite) and interp equality."""
from __future__ import annotations

import numpy as np
import pytest

from llgrad.runtime import ops
from llgrad.transform import ad, control, interp
from llgrad.transform.passes import clone_function
from llgrad.transform.passes.cse import cse
from llgrad.transform.passes.dce import dce
from llgrad.transform.passes.fuse import fuse
from llgrad.transform.passes.pipeline import PASSES, optimize
from llgrad.transform.passes.simplify import simplify
from llgrad.transform.verify import verify

from cases import CASES
from helpers import build, check_golden

X = np.linspace(-1.0, 1.0, 6)


def dead_code(x):
    _ = np.sin(x) * 3.0                      # unused
    s, t = control.for_loop(0, 3, 1, lambda i, s, t: (s + x[i], t * s), np.float64(0.0),
                            np.float64(1.0))  # t is dead
    return s * 2.0


def common(x):
    a = np.exp(x) * 2.0
    b = np.exp(x) * 2.0
    return np.sum(a + b) + np.sum(np.exp(x))


def algebra(x):
    y = (x * 1.0 + 0.0 - 0.0) / 1.0
    z = -(-y)
    w = ops.reshape(ops.reshape(z, (2, 3)), (3, 2))
    v = ops.transpose(ops.transpose(w, (1, 0)), (1, 0))
    c = np.float64(2.0) * np.float64(3.0)
    keep = x * 0.0  # x*0 is not 0 when x is inf or nan
    return np.sum(v) * (ops.exp(np.asarray(c)) + 0.0) + np.sum(keep)


def fusible(x):
    y = np.exp(-x ** 2) * np.sin(3.0 * x)
    m = np.max(y)
    return np.sum(np.tanh(y - m) + 1.0)


def loop_body(x):
    return control.for_loop(0, 6, 1, lambda i, s: s * 0.5 + np.sin(x[i]) * x[i] + 1.0,
                            np.float64(0.0))[0]


CASES_BY_PASS = {"dce": (dce, dead_code), "cse": (cse, common), "simplify": (simplify, algebra),
                 "fuse": (fuse, fusible), "fuse_loop": (fuse, loop_body)}


@pytest.mark.parametrize("name", sorted(CASES_BY_PASS))
def test_pass_golden_and_interp(name, update_golden):
    p, f = CASES_BY_PASS[name]
    before = verify(build(f, X))
    after = verify(p(clone_function(before)))
    check_golden(f"pass_{name}.ir", f"// before {p.name}\n{before}\n// after {p.name}\n{after}\n",
                 update_golden)
    np.testing.assert_allclose(interp.run(after, X), interp.run(before, X), rtol=1e-14)


def test_effects_of_each_pass():
    names = lambda fn: [op.name for op in fn.walk()]  # noqa: E731
    assert "sin" not in names(dce(build(dead_code, X)))
    loop = next(op for op in dce(build(dead_code, X)).walk() if op.name == "for_loop")
    assert len(loop.outputs) == 1                              # dead carried value dropped
    assert names(cse(build(common, X))).count("exp") == 1
    simple = dce(simplify(build(algebra, X)))
    assert "neg" not in names(simple) and "transpose" not in names(simple)
    assert names(simple).count("reshape") == 1                 # reshape∘reshape -> one
    assert "mul" in names(simple)                              # x * 0.0 stays
    fused = fuse(build(fusible, X))
    assert names(fused).count("fusion") == 2 and "reduce_max" in names(fused)


def test_simplify_keeps_nan_and_inf():
    x = np.array([np.inf, -np.inf, np.nan, 0.0, -0.0, 1.0])
    fn = build(lambda x: x * 0.0 + x / x, x)
    np.testing.assert_array_equal(interp.run(optimize(fn), x)[0], interp.run(fn, x)[0])


@pytest.mark.parametrize("name", sorted(CASES))
def test_pipeline_preserves_values_and_gradients(name, rng):
    f, make = CASES[name]
    args = make(rng)
    fn = build(f, *args)
    joint = ad.grad_function(optimize(fn, fuse=False), list(range(len(args))))
    want = interp.run(ad.grad_function(fn, list(range(len(args)))), *args)
    for fused in (False, True):
        got = interp.run(verify(optimize(joint, fuse=fused)), *args)
        for a, b in zip(got, want):
            np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-14)


def test_optimize_does_not_modify_its_input():
    fn = build(algebra, X)
    text = str(fn)
    optimize(fn)
    assert str(fn) == text


def test_print_after(monkeypatch, capsys):
    monkeypatch.setenv("LLGRAD_PRINT_AFTER", "cse,fuse")
    optimize(build(fusible, X))
    err = capsys.readouterr().err
    assert "IR after cse" in err and "IR after fuse" in err and "IR after dce" not in err
    assert set(PASSES) == {"strip_custom_vjp", "simplify", "cse", "dce", "fuse"}
    assert all(PASSES[n].name == n and "Requires" in PASSES[n].__doc__ for n in PASSES)


def test_fusion_of_ad_output_in_loops_stays_acyclic():
    def f(x):
        return control.for_loop(0, 6, 1, lambda i, s: np.tanh(s * x[i] + np.sin(s)) * 2.0,
                                np.float64(0.3))[0]
    joint = ad.grad_function(build(f, X), [0])
    got = interp.run(verify(optimize(joint)), X)
    np.testing.assert_allclose(got[1], interp.run(joint, X)[1], rtol=1e-12)


def captured_by_regions(x):
    a = x * 1.5
    c, = control.cond(np.max(x) > 0.2, lambda: a * np.exp(x), lambda: a)  # captures a
    d, = control.for_loop(0, 2, 1, lambda i, s: control.cond(s[0] > 0, lambda: s + a,
                                                             lambda: s * a)[0], c)
    return np.sum(d * a + c)


@pytest.mark.parametrize("xv", [np.array([0.1, 0.5, -0.3]), np.array([-0.1, 0.1, -0.3])])
def test_fusion_respects_values_captured_by_regions(xv):
    fn = verify(build(captured_by_regions, xv))
    opt = verify(optimize(fn))
    assert any(op.name == "fusion" for op in opt.walk())
    np.testing.assert_allclose(interp.run(opt, xv)[0], interp.run(fn, xv)[0], rtol=1e-12)


@pytest.mark.parametrize("f", [captured_by_regions, loop_body])
def test_fuse_is_idempotent(f):
    from llgrad.transform.passes.fuse import fuse
    from llgrad.transform.printers.text import print_function
    fn = optimize(build(f, X[:3]))
    before = print_function(fn)
    again = verify(fuse(fn))
    assert print_function(again) == before
    for op in again.walk():
        if op.name == "fusion":
            assert not any(inner.regions for inner in op.regions[0].walk())


def _long_program(x, w):
    for _ in range(300):  # plain Python: a straight line of ~1800 ops, and its gradient
        x = np.tanh(x * w) + x * 0.5
        w = w + np.sum(x) * 1e-3
    return np.sum(x)


def test_fuse_does_bounded_work_per_op(monkeypatch):
    """Note [Dependencies between groups]: the dependency searches of a long program cost a
    bounded number of steps per op (they were quadratic in its length)."""
    import heapq
    from llgrad.transform.passes import fuse as fuse_module
    steps = [0]

    class Counting:
        heapify, heappop = staticmethod(heapq.heapify), staticmethod(heapq.heappop)

        @staticmethod
        def heappush(heap, item):
            steps[0] += 1
            heapq.heappush(heap, item)

    monkeypatch.setattr(fuse_module, "heapq", Counting)
    x, w = np.ones(4), np.full(4, 0.3)
    joint = ad.grad_function(optimize(build(_long_program, x, w), fuse=False), [0, 1])
    n_ops = sum(1 for _ in joint.walk())
    fused = verify(fuse(joint))
    assert steps[0] < 40 * n_ops, (steps[0], n_ops)
    for a, b in zip(interp.run(fused, x, w), interp.run(joint, x, w)):
        np.testing.assert_allclose(a, b, rtol=1e-12)


def _restore(x, i, j):
    """x with element i zeroed, plus x[i] scattered back at i: x (the reverse sweep of
    `q[i] += v`); at j, or at an index array (which may repeat), it is not x."""
    from llgrad.runtime.ops import index as ix
    key = (("a", 0),)
    zeroed = ix.index_put_p.bind(x, np.float64(0.0), i, key=key)
    back = lambda at: ix.scatter_add_p.bind(ix.getitem_p.bind(x, at, key=key), at,  # noqa: E731
                                            key=key, shape=x.shape)
    pair = np.stack([i, i])
    twice = ix.index_put_p.bind(x, np.zeros(2), pair, key=key) + back(pair)
    return zeroed + back(i), back(j) + zeroed, twice


def test_simplify_sees_an_element_zeroed_and_restored():
    args = (X, np.int64(2), np.int64(4))
    fn = build(_restore, *args)
    simple = dce(simplify(clone_function(fn)))
    assert simple.outputs[0] is simple.params[0]
    assert all(v.op is not None and v.op.prim.name == "add" for v in simple.outputs[1:])
    for a, b in zip(interp.run(simple, *args), interp.run(fn, *args)):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(interp.run(fn, *args)[2][2], 2 * X[2])  # not x


def _restore_cols(x, i):
    """x with a column (or every other row of it) zeroed, plus that part scattered back
    (the reverse sweep of `G[:, i] += v`): x; a different slice scattered back: not x."""
    from llgrad.runtime.ops import index as ix

    def restore(put_key, back_key):
        zeroed = ix.index_put_p.bind(x, np.float64(0.0), i, key=put_key)
        part = ix.getitem_p.bind(x, i, key=back_key)
        return zeroed + ix.scatter_add_p.bind(part, i, key=back_key, shape=x.shape)
    col, every_other = (("s", None, None, None), ("a", 0)), (("s", None, None, 2), ("a", 0))
    return restore(col, col), restore(every_other, every_other), restore(col, every_other)


def test_simplify_sees_a_slice_zeroed_and_restored():
    x = np.arange(20.0).reshape(4, 5)
    fn = build(_restore_cols, x, np.int64(1))
    simple = dce(simplify(clone_function(fn)))
    assert simple.outputs[0] is simple.params[0] and simple.outputs[1] is simple.params[0]
    assert simple.outputs[2].op.prim.name == "add"
    for a, b in zip(interp.run(simple, x, np.int64(1)), interp.run(fn, x, np.int64(1))):
        np.testing.assert_array_equal(a, b)
    assert not np.array_equal(interp.run(fn, x, np.int64(1))[2], x)


def test_cse_keeps_scatters_apart():
    """Two equal scatter_adds stay two: each is added in place into its own sum (Note
    [In-place accumulation] in codegen/plan.py), where one shared would be materialised."""
    from llgrad.runtime.ops import index as ix
    key = (("a", 0),)

    def f(x, i):
        g = ix.getitem_p.bind(x, i, key=key)
        return (x + ix.scatter_add_p.bind(g, i, key=key, shape=x.shape),
                x * 2.0 + ix.scatter_add_p.bind(g, i, key=key, shape=x.shape))

    names = [op.name for op in cse(build(f, X, np.int64(1))).walk()]
    assert names.count("scatter_add") == 2 and names.count("getitem") == 1
