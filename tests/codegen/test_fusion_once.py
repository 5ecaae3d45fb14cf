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
from llgrad.transform.passes.fuse import REDUCTIONS, accumulation_trees, use_counts
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
