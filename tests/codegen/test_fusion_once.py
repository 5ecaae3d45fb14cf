"""Fusion is decided once (Note [Fusion is decided once] in transform/passes/fuse.py): over the
test corpora and the benchmark workloads, the loops codegen plans are exactly the groups of
the IR `inspect()` prints: one per `fusion` op, with its members, and one per elementwise op
or reduction outside every `fusion` op; nothing split, merged or regrouped."""
from __future__ import annotations

import re
import warnings

import numpy as np
import pytest

import llgrad
from llgrad.codegen import lowerings  # noqa: F401  (registers the lowerings plans use)
from llgrad.codegen.plan import FunctionPlan, GroupUnit, OpUnit, accumulate_p
from llgrad.runtime.ops.control import fusion_p
from llgrad.codegen.ranges import Ranges
from llgrad.runtime.ops.elementwise import add_p
from llgrad.runtime.ops.index import getitem_p, scatter_add_p
from llgrad.transform.passes.fuse import (MAX_GROUP_OPS, REDUCTIONS, accumulation_trees,
                                          use_counts)
from tests import cf_corpus
from tests.corpus.programs import PROGRAMS

_WORKLOADS = ("elementwise", "gmm", "recurrence", "lorenz_rk4", "newton", "rnn", "gmm_loops",
              "stencil", "gp_nlml")


def _ir_groups(fn) -> tuple[list, set]:
    """Per group of the IR: (the op, {(primitive, output) of each member}), outputs renamed
    to what the fusion op yields them as, nested regions included; and the roots of the add
    trees codegen runs as one `accumulate` op (Note [In-place accumulation]), not as loops."""
    groups, uses, accumulated = [], use_counts(fn), set()

    def walk(region):
        trees = accumulation_trees(region.ops, uses)
        accumulated.update(root.outputs[0] for root, _, _, _ in trees)
        absorbed = {id(op) for root, inner, _, _ in trees for op in (root, *inner)}
        for op in region.ops:
            if id(op) in absorbed:
                continue
            if op.prim is fusion_p:
                body = op.regions[0]
                out = dict(zip(body.results, op.outputs))
                groups.append((op, {(m.prim, out.get(m.outputs[0], m.outputs[0]))
                                    for m in body.ops}))
            elif op.prim.family == "elementwise" or op.prim in REDUCTIONS:
                groups.append((op, {(op.prim, op.outputs[0])}))
            for r in op.regions if op.prim is not fusion_p else ():
                walk(r)

    walk(fn.body)
    return groups, accumulated


def _planned_groups(fn) -> tuple[list, set]:
    units = list(FunctionPlan(fn).all_units())
    return ([(u.op, {(m.prim, m.outputs[0]) for m in u.ops + u.reds})
             for u in units if isinstance(u, GroupUnit)],
            {u.op.outputs[0] for u in units if isinstance(u, OpUnit)
             and u.op.prim is accumulate_p})


def _check(f, args) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", llgrad.PerformanceWarning)
        insp = f.inspect(*args)
        stages = [(insp.forward_ir, insp._c.forward)]
        if insp._c.joint is not None:
            stages.append((insp.backward_ir, insp._c.joint))
    for text, fn in stages:
        (shown, accumulated), (planned, accumulates) = _ir_groups(fn), _planned_groups(fn)
        assert accumulated <= accumulates
        assert len(shown) == len(planned)
        key = lambda g: id(g[0])  # noqa: E731
        for (a, members), (b, lowered) in zip(sorted(shown, key=key), sorted(planned, key=key)):
            assert a is b and members == lowered, f"{a.prim.name} at {a.loc}"
            assert len(members) <= MAX_GROUP_OPS
        fused = sum(1 for op, _ in planned if op.prim is fusion_p)
        assert len(re.findall(r"= fusion ", text)) == fused


@pytest.mark.parametrize("p", PROGRAMS, ids=repr)
def test_corpus_program(p):
    wrt = p.wrt if isinstance(p.wrt, tuple) else (p.wrt,)
    _check(llgrad.differentiate(p.fn, wrt=wrt), p.make_args(np.random.default_rng(0)))


@pytest.mark.parametrize("name", sorted(cf_corpus.CASES))
def test_control_flow_case(name):
    c = cf_corpus.CASES[name]
    _check(llgrad.differentiate(c.fn, wrt=c.wrt), c.args())


@pytest.mark.parametrize("name", _WORKLOADS)
def test_benchmark_workload(name):
    from benchmarks.workloads import BY_NAME
    from benchmarks.workloads._common import positional
    w = BY_NAME[name]
    names = list(__import__("inspect").signature(w.forward).parameters)
    _check(llgrad.differentiate(w.forward, wrt=tuple(names.index(k) for k in w.wrt)),
           positional(w.forward, w.make_inputs()))


def _siblings(x, y):
    a = np.exp(x) * 2.0
    b = np.sin(y) + 1.0  # reads nothing of a: a sibling of its loop
    return np.sum(a) + np.max(b)


def test_siblings_and_their_reductions_are_one_loop():
    x, y = np.linspace(-1.0, 1.0, 50), np.linspace(0.0, 2.0, 50)
    f = llgrad.differentiate(_siblings)
    np.testing.assert_allclose(f(x, y), _siblings(x, y), rtol=1e-12)
    fused = [op for op in f.inspect(x, y)._c.forward.walk() if op.prim is fusion_p]
    assert len(fused) == 1
    assert sorted(op.prim.name for op in fused[0].regions[0].ops) == [
        "add", "exp", "mul", "reduce_max", "reduce_sum", "sin"]


def _loop_gradient_parts():
    c = cf_corpus.CASES["recurrence"]  # s = 0.9 * s + sin(x[i]) * x[i - 1]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", llgrad.PerformanceWarning)
        return llgrad.differentiate(c.fn, wrt=c.wrt).inspect(*c.args())._c.joint


def test_accumulations_stay_outside_fusion_and_run_in_place():
    """The reverse sweep's `ct + scatter_add(g, i)` is codegen's accumulate, in place in the
    loop (Note [In-place accumulation]): the fusion pass leaves those adds alone."""
    joint = _loop_gradient_parts()
    scattered = [op.outputs[0] for op in joint.walk() if op.prim is scatter_add_p]
    assert len(scattered) == 2
    assert not any(v is w for op in joint.walk() if op.prim is fusion_p
                   for v in op.inputs for w in scattered)
    units = [u for u in FunctionPlan(joint).all_units()
             if isinstance(u, OpUnit) and u.op.prim is accumulate_p]
    assert units and all(u.op.params["inplace"] is not None for u in units)


def test_index_ranges_see_loop_counters_through_fusion():
    """The forward loop's counter `c = c + 1` is fused with its body's arithmetic; the reverse
    sweep indexes with `c - 1 - k`, still known in range, so no index check is emitted
    (codegen/ranges.py, Note [Index checks])."""
    joint = _loop_gradient_parts()
    assert any(op.prim is add_p and op.outputs[0].aval.dtype == np.int64
               for f in joint.walk() if f.prim is fusion_p for op in f.regions[0].ops)
    ranges = Ranges(joint)
    indexed = [op for op in joint.walk() if op.prim in (getitem_p, scatter_add_p)]
    assert len(indexed) == 5
    assert all(ranges.known_range(v) is not None for op in indexed for v in op.inputs[1:])
