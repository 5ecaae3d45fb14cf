"""The IR verifier: SSA dominance, shape rules, explicit broadcasting and region conventions.

`verify(fn)` raises InternalError naming the op (with the printed IR's value names) and its
source location. Passes and the AD call it in tests and under LLGRAD_VERIFY=1; it never mutates.
"""
from __future__ import annotations

import numpy as np

from llgrad.runtime.aval import BOOL, I64, Aval, aval_str
from llgrad.runtime.errors import InternalError, LLGradError
from llgrad.runtime.ops.control import (cond_p, custom_vjp_p, for_loop_p, fusion_p, tape_push_p,
                                        while_loop_p)
from llgrad.transform import ir
from llgrad.transform.control import (CONTROL, body, bounds, branches, custom_bwd,
                                      custom_parts, loop_test, state)
from llgrad.transform.passes.fuse import REDUCTIONS
from llgrad.transform.printers.text import Namer, print_function

_SCALAR_I64, _SCALAR_BOOL = Aval((), I64), Aval((), BOOL)


class _Verifier:
    def __init__(self, fn: ir.Function):
        self.fn, self.name = fn, Namer()
        try:
            print_function(fn, self.name)  # so messages use the printed names
        except Exception:  # noqa: BLE001 - a broken IR may not print; names stay ad hoc
            pass
        self.defined: set[int] = set()

    def fail(self, op, what):
        head = f"verify @{self.fn.name}: " + (f"{self._op_str(op)}: " if op is not None else "")
        raise InternalError(head + what, loc=getattr(op, "loc", None))

    def _op_str(self, op):
        outs = ", ".join(self.name(v) for v in op.outputs)
        return f"{outs + ' = ' if outs else ''}{op.name} " + ", ".join(
            self.name(v) for v in op.inputs)

    def define(self, v, op, scope):
        if v.id in self.defined:
            self.fail(op, f"{self.name(v)} is defined twice (SSA)")
        self.defined.add(v.id)
        scope.add(v.id)

    def region(self, r: ir.Region, scope: set, owner=None):
        scope = set(scope)
        for p in r.params:
            self.define(p, owner, scope)
        for op in r.ops:
            for k, v in enumerate(op.inputs):
                if not isinstance(v, ir.Value):
                    self.fail(op, f"operand {k} is a {type(v).__name__}, not an IR value")
                if v.id not in scope:
                    self.fail(op, f"operand {self.name(v)} is not defined before its use "
                                  f"(SSA dominance)")
            if op.regions or op.prim in _REGION_RULES:
                _REGION_RULES.get(op.prim, _no_regions)(self, op)
                for sub in op.regions:
                    self.region(sub, scope, op)
            else:
                self.plain(op)
            for v in op.outputs:
                self.define(v, op, scope)
        for v in r.results:
            if v.id not in scope:
                self.fail(owner, f"{'yields' if owner else 'returns'} {self.name(v)}, which is "
                                 f"not defined in scope")

    def plain(self, op):
        avals = [v.aval for v in op.inputs]
        try:
            want = op.prim.shape(*avals, **op.params)
        except LLGradError as e:
            self.fail(op, f"shape rule rejects operands "
                          f"({', '.join(aval_str(*a) for a in avals)}): {e}")
        want = list(want) if op.prim.multiple_results else [want]
        got = [v.aval for v in op.outputs]
        if [(tuple(a.shape), np.dtype(a.dtype)) for a in want] != \
                [(tuple(a.shape), np.dtype(a.dtype)) for a in got]:
            self.fail(op, f"outputs are {', '.join(aval_str(*a) for a in got)} but the shape "
                          f"rule gives {', '.join(aval_str(*a) for a in want)}")
        if op.prim.family == "elementwise":
            for v in op.inputs:
                if v.aval.shape != got[0].shape:
                    self.fail(op, f"elementwise operand {self.name(v)} has shape "
                                  f"{list(v.aval.shape)}, the output {list(got[0].shape)} "
                                  f"(broadcasts must be explicit broadcast_to ops)")
        if op.prim is tape_push_p and avals[1] != Aval(avals[0].shape[1:], avals[0].dtype):
            self.fail(op, f"pushes {aval_str(*avals[1])} onto a tape of rows "
                          f"{aval_str(avals[0].shape[1:], avals[0].dtype)}")


def _avals(vals):
    return [Aval(tuple(v.aval.shape), np.dtype(v.aval.dtype)) for v in vals]


def _expect(vf, op, what, got, want):
    if _avals(got) != list(want):
        vf.fail(op, f"{what}: {', '.join(aval_str(*a) for a in _avals(got)) or 'nothing'} "
                    f"but expected {', '.join(aval_str(*a) for a in want) or 'nothing'}")


def _nregions(vf, op):
    n = CONTROL[op.prim].n_regions if op.prim in CONTROL else 1  # custom_vjp: its bwd
    if len(op.regions) != n:
        vf.fail(op, f"has {len(op.regions)} regions, expected {n}")


def _no_regions(vf, op):
    vf.fail(op, "carries regions but is not a region op")


def _check_cond(vf, op):
    _nregions(vf, op)
    _expect(vf, op, "predicate", CONTROL[cond_p].lead(op), [_SCALAR_BOOL])
    for r, which in zip(branches(op), ("then", "else")):
        _expect(vf, op, f"{which} params", r.params, _avals(state(op)))
        _expect(vf, op, f"{which} yields", r.results, _avals(op.outputs))


def _check_for(vf, op):
    _nregions(vf, op)
    _expect(vf, op, "bounds (start, stop, step)", bounds(op), [_SCALAR_I64] * 3)
    init = _avals(state(op))
    _expect(vf, op, "body params (i, *carried)", body(op).params, [_SCALAR_I64] + init)
    _expect(vf, op, "body yields", body(op).results, init)
    _expect(vf, op, "outputs", op.outputs, init)


def _check_while(vf, op):
    _nregions(vf, op)
    init = _avals(state(op))
    _expect(vf, op, "cond params", loop_test(op).params, init)
    _expect(vf, op, "cond yields", loop_test(op).results, [_SCALAR_BOOL])
    _expect(vf, op, "body params", body(op).params, init)
    _expect(vf, op, "body yields", body(op).results, init)
    _expect(vf, op, "outputs", op.outputs, init)


def _check_fusion(vf, op):
    _nregions(vf, op)
    _expect(vf, op, "body params", body(op).params, _avals(state(op)))
    _expect(vf, op, "body yields", body(op).results, _avals(op.outputs))
    reduced = set()  # a reduction's result exists after the loop (Note [Fusion is decided once])
    for inner in body(op).ops:
        if inner.prim.family != "elementwise" and inner.prim not in REDUCTIONS:
            vf.fail(op, f"fusion body holds {inner.name}, which is neither elementwise nor "
                        f"a reduction")
        if any(v.id in reduced for v in inner.inputs):
            vf.fail(op, f"fusion body's {inner.name} reads a reduction of the same loop")
        if inner.prim in REDUCTIONS:
            reduced.add(inner.outputs[0].id)


def _check_custom_vjp(vf, op):
    _nregions(vf, op)
    xs, _, values = custom_parts(op)
    bwd = custom_bwd(op)
    _expect(vf, op, "values", values, _avals(op.outputs))
    _expect(vf, op, "bwd params (cotangents of the outputs)", bwd.params, _avals(op.outputs))
    _expect(vf, op, "bwd yields (cotangents of the xs)", bwd.results, _avals(xs))


_REGION_RULES = {cond_p: _check_cond, for_loop_p: _check_for, while_loop_p: _check_while,
                 fusion_p: _check_fusion, custom_vjp_p: _check_custom_vjp}


def verify(fn: ir.Function) -> ir.Function:
    """Check `fn`'s invariants (see transform/ir.py); returns fn, raises InternalError."""
    vf = _Verifier(fn)
    vf.region(fn.body, set())
    scope = {p.id for p in fn.params} | {v.id for op in fn.body.ops for v in op.outputs}
    for v in fn.outputs:
        if v.id not in scope:
            vf.fail(None, f"returns {vf.name(v)}, which is not defined in the function body")
    return fn
