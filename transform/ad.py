"""Reverse mode on the IR: run each primitive's VJP rule on IR values inside a Builder.

`grad_function(fn, wrt)` returns the joint function: the forward ops first, then the backward,
in one region. There is no second derivative table: plain ops call `prim.vjp_rule(i)`; only the
region ops (cond, for_loop, while_loop, fusion, custom_vjp) have rules: cond, fusion and
custom_vjp (whose bwd region holds its cotangents) here, the loops in transform/loop_ad.py
(Note [Loop tapes]).
Requires: a verified function whose output 0 is a float scalar. Produces: a verified function.
"""
from __future__ import annotations

from collections import defaultdict

import numpy as np

from llgrad.runtime import ops
from llgrad.runtime.aval import Aval, aval_str
from llgrad.runtime.errors import InternalError, ShapeError, UnsupportedError
from llgrad.runtime.ops.control import (cond_p, custom_vjp_p, for_loop_p, fusion_p, tape_get_p,
                                        tape_push_p, while_loop_p)
from llgrad.runtime.ops.index import INDEXING, index_operands, indexed_shape
from llgrad.runtime.ops.shape import broadcast_to_p
from llgrad.transform import ir
from llgrad.transform.control import (body, custom_bwd, custom_parts, describe, pred,
                                      state)
from llgrad.transform.builder import Builder
from llgrad.transform.checkpoint import segment_loops
from llgrad.transform.loop_ad import LoopAD
from llgrad.transform.loop_facts import describe_tapes


def grad_function(fn: ir.Function, wrt: list[int], name: str | None = None,
                  checkpoint=None, plain: bool = False) -> ir.Function:
    """The joint forward+backward function of `fn`.

    Args:
        fn: the function; output 0 must be a float scalar (it is seeded with 1.0).
        wrt: indices of the parameters to differentiate with respect to.
        name: the new function's name (default `<fn.name>_grad`).
        checkpoint: None, "sqrt", "log" or an int: the schedule of the top-level loops
            (transform/checkpoint.py, Note [Checkpointed loops]); loops marked with
            llgrad.checkpointed (fn.meta["checkpoint loops"]) take their own.
        plain: no loop checkpointed, marked or not (for the stats that compare).
    Returns:
        A function with fn's params whose outputs are fn's outputs followed by one cotangent
        per `wrt` param (zeros where no path leads to output 0; integer params get zeros).
    Raises:
        ShapeError: output 0 is not a float scalar.
        UnsupportedError: the derivative would flow through a loop tape (Note [No AD through
            tapes]).
    Example:
        >>> g = grad_function(fn, [0]); interp.run(g, x)[-1]  # doctest: +SKIP
    """
    if not fn.outputs:
        raise ShapeError(f"{fn.name} has no output to differentiate")
    out0 = fn.outputs[0]
    if out0.aval.shape != () or out0.aval.dtype.kind != "f":
        raise ShapeError(f"the differentiated output of {fn.name} must be a float scalar, got "
                         f"{aval_str(*out0.aval)}", fix="reduce it first, e.g. with np.sum")
    unstacked, segmented = set(), 0
    checkpointed = not plain and (checkpoint is not None or fn.meta.get("checkpoint loops"))
    if checkpointed:
        fn, unstacked, segmented = segment_loops(fn, checkpoint)
        out0 = fn.outputs[0]
    wrt_params = [fn.params[i] for i in wrt]
    _check_no_tape_derivative(fn, wrt_params, out0)
    ad = _AD(_activity(fn, wrt_params, out0), name or f"{fn.name}_grad")
    ad.unstacked = unstacked
    joint = ad.run(fn, wrt)
    joint.meta.pop("checkpointed loops", None)
    if checkpointed:
        joint.meta["checkpointed loops"] = segmented
    return joint


# Note [No AD through tapes]
# A joint function (the output of grad_function) passes values from a loop's forward sweep to
# its reverse sweep through tapes, which are storage, not math: tape_push and tape_get have no
# VJP rules. Differentiating such a function again in reverse mode (grad of grad of a function
# with a staged loop, or a function calling a differentiated one) would lose every derivative
# that flows through a tape, and give a wrong second derivative. So before AD runs, activity is
# recomputed as if tapes passed derivatives on; if a tape_get would then carry one, that is an
# UnsupportedError at the loop's line, never a wrong result. Forward mode has no such limit:
# tapes are linear, so it carries a tape of tangents beside each tape (transform/jvp.py), and
# Hessians are taken forward over reverse (llgrad/forward.py).
def _check_no_tape_derivative(fn, wrt, out) -> None:
    gets = [op for op in fn.walk() if op.prim is tape_get_p]
    if not gets:
        return
    through = _activity(fn, wrt, out, through=(tape_push_p, tape_get_p))
    for op in gets:
        if op.outputs[0].id in through:
            raise UnsupportedError(
                "llgrad cannot differentiate through the reverse sweep of a compiled loop "
                "in reverse mode again (a second derivative of a function with a loop: grad "
                "of grad, or differentiating a function that calls a differentiated one)",
                loc=op.loc,
                fix="take second derivatives forward over reverse: llgrad.hessian(f), "
                "llgrad.hvp(f), llgrad.jvp(llgrad.grad(f), ...), which run through loops; or "
                "use the eager runtime, e.g. llgrad.autograd.functional.hessian(f, "
                "llgrad.tensor(x)), where loops run as Python")


def _activity(fn, wrt, out, through=()) -> set:
    """Ids of values on a differentiable path from a wrt param to `out` (float dtype only);
    the primitives in `through` count as differentiable although they are not."""
    fwd, bwd, vals = defaultdict(list), defaultdict(list), {}

    def edge(a, b):
        fwd[a.id].append(b.id)
        bwd[b.id].append(a.id)
        vals[a.id], vals[b.id] = a, b

    for op in fn.walk():
        if op.prim is custom_vjp_p:  # derivatives flow from xs to the outputs (through bwd)
            xs, closed, _ = custom_parts(op)
            for v in xs + closed:
                for o in op.outputs:
                    edge(v, o)
        elif (cf := describe(op)) is not None:
            init, loop_body = cf.state(op), cf.body(op)
            for ps in cf.entries(op):
                for v, p in zip(init, ps):
                    edge(v, p)
                if cf.loop:
                    for res, p in zip(loop_body.results, ps):
                        edge(res, p)
            for r in cf.yielding(op):
                for res, o in zip(r.results, op.outputs):
                    edge(res, o)
            if cf.loop:  # a loop that runs zero times yields its init
                for v, o in zip(init, op.outputs):
                    edge(v, o)
        elif not op.prim.nondiff or op.prim in through:
            for v in op.inputs:
                for o in op.outputs:
                    edge(v, o)

    def reach(starts, graph):
        seen, todo = set(), [v.id for v in starts]
        while todo:
            k = todo.pop()
            if k not in seen:
                seen.add(k)
                todo.extend(graph[k])
        return seen

    both = reach(wrt, fwd) & reach([out], bwd)
    vals.update({v.id: v for v in wrt + [out]})
    return {k for k in both if vals[k].aval.dtype.kind == "f"}


# Note [Replayed indices]
# numpy raises IndexError for an index out of range, so compiled code checks every index it
# cannot prove in range (Note [Index checks] in codegen/lowerings/index.py). The reverse
# sweep indexes at indices the forward sweep already checked: it recomputes a loop body's
# element reads at the forward's indices (`icf[j, pos]` at iteration n-1-k, its index read
# back from a tape or recomputed), and the VJP rules of indexing ops index at the op's own
# indices (getitem's scatter_add, index_put's index_put and getitem, at the same key into an
# array of the same shape). The forward ran them first: in the joint function the reverse
# sweep of a loop runs after its forward loop, the cotangent of an op after the op, a
# cond's adjoint only on the branch the forward took. So AD marks such ops `checked` (an Op
# field, transform/ir.py), and codegen emits no bounds check for them, only the wrap of
# negative indices the IR does not prove non-negative. Without the mark, the reverse sweep of
# the GMM written as loops checked each replayed index again (its indices are computed
# from tapes, which the IR cannot bound to the axis): ~40% of the triangle loop's
# instructions. AD marks: (1) every indexing op cloned while `adjoint_region` recomputes a
# region's forward (`replaying`), which replays an op the forward ran at the same values;
# (2) the indexing ops a VJP rule of an indexing op emits at that op's key, index values and
# axis sizes (`_mark_replays`); (3) likewise the scatter of an element cotangent after a
# loop that ran (Note [Element cotangents]). The mark holds for the op where it stands: a
# pass may substitute equal values into it, or drop it (clone_function keeps it; a copy made
# through the Builder, by vmap, jvp or a later AD, does not), but a pass that moves an op to
# where it may run without its forward op (hoisting it out of a loop that may not run) must
# clear it. The interpreter checks every index whatever the mark says.


class _AD(LoopAD):
    """One AD run: the activity set, the builder of the joint function, the current loc."""

    def __init__(self, active: set, name: str):
        self.act = active
        self.unstacked: set = set()  # ids of loops never stacked (Note [Checkpointed loops])
        self.replaying = 0  # inside adjoint_region's recomputation (Note [Replayed indices])
        self.loc = None
        self.b = Builder(name, loc=lambda: self.loc)

    # ---- emission helpers ---------------------------------------------------------------------
    def const(self, value, dtype) -> ir.Value:
        return self.b.const(np.asarray(value, dtype=dtype))

    def zeros(self, aval) -> ir.Value:
        z = self.const(0, aval.dtype)
        if aval.shape == ():
            return z
        return self.b.emit(broadcast_to_p, [z], {"shape": tuple(aval.shape)},
                           [Aval(tuple(aval.shape), aval.dtype)])[0]

    def emit(self, prim, ins, avals, regions=(), params=None, loc=None):
        return self.b.emit(prim, ins, params or {}, avals, regions, loc=loc)

    def accum(self, ct: dict, v: ir.Value, g) -> None:
        if v.id not in self.act or g is None:
            return
        if not isinstance(g, ir.Value):
            g = self.b.lift(np.asarray(g, dtype=v.aval.dtype))
        if g.aval.shape != v.aval.shape:
            g = ops.sum_to(g, v.aval.shape)  # Note [Broadcasting at primitives]
            if g.aval.shape != v.aval.shape:
                g = ops.broadcast_to(g, v.aval.shape)
        if g.aval.dtype != v.aval.dtype:
            g = ops.astype(g, v.aval.dtype)
        ct[v.id] = ops.add(ct[v.id], g) if v.id in ct else g

    def ct_or_zeros(self, ct, v):
        g = ct.get(v.id)
        return g if g is not None else self.zeros(v.aval)

    # ---- driver -------------------------------------------------------------------------------
    def run(self, fn: ir.Function, wrt) -> ir.Function:
        b = self.b
        with b:
            env = {}
            for p in fn.params:
                env[p.id] = b.param(p.aval, p.name)
            rec = self.forward(fn.body.ops, env, taped=True)
            ct: dict[int, ir.Value] = {}
            self.accum(ct, fn.outputs[0], self.const(1.0, fn.outputs[0].aval.dtype))
            self.backward(fn.body.ops, env, rec, ct)
            self.loc = None
            grads = []
            for i in wrt:
                p = fn.params[i]
                g = ct.get(p.id)
                g = g if g is not None else self.zeros(p.aval)
                if g.name is None:
                    g.name = f"ct_{p.name}" if p.name else None
                grads.append(g)
            b.fn.body.results = [env[v.id] for v in fn.outputs] + grads
        b.fn.meta.update(fn.meta)
        b.fn.meta["grad_wrt"] = list(wrt)
        b.fn.meta["tapes"] = describe_tapes(b.fn)
        return b.fn

    # ---- forward: clone ops; loops that the backward will visit get tapes ---------------------
    def forward(self, op_list, env, taped: bool, pre=None, given=()) -> dict:
        """Clone `op_list` into the current region. `pre` maps original value ids to values
        already available (read from a tape): plain ops whose outputs all are in it are not
        recomputed, nor are the loops in `given` (ids of stacked inner loops, whose tapes the
        forward sweep kept; Note [Stacked inner tapes])."""
        rec = {}
        for op in op_list:
            active = any(o.id in self.act for o in op.outputs)
            if pre and all(o.id in pre for o in op.outputs) and (id(op) in given or not (
                    taped and active and op.prim in (for_loop_p, while_loop_p, fusion_p))):
                for o in op.outputs:
                    env[o.id] = pre[o.id]
                continue
            if taped and active and op.prim in (for_loop_p, while_loop_p):
                rec[id(op)] = self.forward_loop(op, env)
            elif taped and active and op.prim is fusion_p:  # differentiate the unfused body
                fbody = body(op)
                env2 = self.bind_params(env, fbody.params, [env[v.id] for v in state(op)])
                rec[id(op)] = (env2, self.forward(fbody.ops, env2, True))
                for o, r in zip(op.outputs, fbody.results):
                    env[o.id] = env2[r.id]
            else:
                self.clone(op, env)
        return rec

    def bind_params(self, env, params, values) -> dict:
        env2 = dict(env)
        for p, v in zip(params, values):
            env2[p.id] = v
        return env2

    def clone(self, op, env) -> list:
        if op.prim is custom_vjp_p:  # its value is its values; backward_custom runs bwd
            outs = [env[v.id] for v in custom_parts(op)[2]]
            for o, n in zip(op.outputs, outs):
                env[o.id] = n
            return outs
        regions = [self.clone_region(r, env) for r in op.regions]
        outs = self.emit(op.prim, [env[v.id] for v in op.inputs], [v.aval for v in op.outputs],
                         regions, op.params, loc=op.loc)
        for o, n in zip(op.outputs, outs):
            n.name = o.name
            env[o.id] = n
        if self.replaying and op.prim in INDEXING:  # Note [Replayed indices]
            outs[0].op.checked = True
        return outs

    def mark_replays(self, start: int, key, idx: list, shape: tuple) -> None:
        """Mark `checked` the indexing ops emitted into the current region since op `start`
        that index an array of `shape` at `key` and index values `idx`, which an op the
        forward ran checked (Note [Replayed indices])."""
        for o in self.b.region.ops[start:]:
            if o.prim in INDEXING and o.params["key"] == key and indexed_shape(o) == shape \
                    and len(index_operands(o)) == len(idx) \
                    and all(a is b for a, b in zip(index_operands(o), idx)):
                o.checked = True

    def clone_region(self, r, env, extra=()) -> ir.Region:
        params = [self.b.new_value(p.aval, p.name) for p in r.params]
        env2 = self.bind_params(env, r.params, params)
        with self.b.open_region(params) as new:
            for op in r.ops:
                self.clone(op, env2)
            new.results = [env2[v.id] for v in r.results]
        return new

    def backward(self, op_list, env, rec, ct, stop=()) -> None:
        """The adjoints of `op_list`, last op first, adding into `ct`; the ops in `stop` (ids)
        are skipped: their outputs' cotangents are wanted as they are (Note [Element
        cotangents] in loop_facts.py)."""
        for op in reversed(op_list):
            if not any(o.id in ct for o in op.outputs) or id(op) in stop:
                continue
            self.loc = op.loc
            if op.prim in (for_loop_p, while_loop_p):
                self.backward_loop(op, env, rec[id(op)], ct)
            elif op.prim is cond_p:
                self.backward_cond(op, env, ct)
            elif op.prim is custom_vjp_p:
                self.backward_custom(op, env, ct)
            elif op.prim is fusion_p:
                env2, rec2 = rec[id(op)]
                fbody = body(op)
                for o, r in zip(op.outputs, fbody.results):
                    self.accum(ct, r, ct.get(o.id))
                self.backward(fbody.ops, env2, rec2, ct)
                for v, p in zip(state(op), fbody.params):
                    self.accum(ct, v, ct.get(p.id))
            elif id(op) in rec:
                self.backward_resid(op, env, ct, *rec[id(op)])
            else:
                self.backward_plain(op, env, ct)

    def backward_plain(self, op, env, ct) -> None:
        if op.prim.multiple_results:  # tuples, None where no cotangent flows (as eager)
            g = tuple(ct.get(o.id) for o in op.outputs)
            out = tuple(env[o.id] for o in op.outputs)
        elif len(op.outputs) != 1:
            raise InternalError(f"ad: {op.name} has {len(op.outputs)} outputs; reverse mode "
                                f"handles single-output primitives", loc=op.loc)
        else:
            g = ct[op.outputs[0].id]
            out = env[op.outputs[0].id]
        ins = [env[v.id] for v in op.inputs]
        start = len(self.b.region.ops)
        for i, v in enumerate(op.inputs):
            if v.id not in self.act:
                continue
            rule = op.prim.vjp_rule(i)
            if rule is None:
                continue
            try:
                gi = rule(g, out, *ins, **op.params)
            except UnsupportedError as e:  # a gradient a rule refuses: at the op's line
                if e.loc is not None:
                    raise
                raise UnsupportedError(e.what, op.loc, e.fix) from None
            self.accum(ct, v, gi)
        if op.prim in INDEXING:  # the transposes at op's indices (Note [Replayed indices])
            mapped = [env[v.id] for v in index_operands(op)]
            self.mark_replays(start, op.params["key"], mapped, indexed_shape(op))

    def adjoint_region(self, region, env, head_values, seeds, wanted, pre=None,
                       extra_rec=None, running=None, stop=()) -> list:
        """Recompute `region`'s forward from `head_values`, run its adjoint seeded with
        `seeds` (cotangents of its results, None = zero) and return the cotangents of `wanted`
        (original values; zeros where none flows). `running` maps ids of values the region
        reads from outside to their cotangents so far, which the region's adjoint adds to
        (Note [Running cotangents] in loop_ad.py); the adjoints of the ops in `stop` (ids of
        top-level ops) are not run."""
        env2 = self.bind_params(env, region.params, head_values)
        self.replaying += 1  # Note [Replayed indices]
        try:
            rec = self.forward(region.ops, env2, taped=True, pre=pre, given=extra_rec or ())
        finally:
            self.replaying -= 1
        rec.update(extra_rec or {})
        ct2: dict[int, ir.Value] = dict(running or {})
        for r, g in zip(region.results, seeds):
            self.accum(ct2, r, g)
        self.backward(region.ops, env2, rec, ct2, stop)
        return [self.ct_or_zeros(ct2, w) for w in wanted]

    def backward_custom(self, op, env, ct) -> None:
        """A custom rule's cotangents: its bwd region, cloned here with the outputs'
        cotangents as its params (Note [Custom rules are differentiable] in
        runtime/custom.py: a later AD pass differentiates these ops like any others)."""
        xs, closed, _ = custom_parts(op)
        for v in closed:
            if v.id in self.act:
                raise UnsupportedError(
                    f"{op.params['name']} has a custom derivative rule, and its forward reads a "
                    f"differentiated value ({aval_str(*v.aval)}) that is not one of its "
                    f"arguments: the rule gives no derivative for it", loc=op.loc,
                    fix="pass the value to the function as an argument (and return its "
                    "cotangent from the backward)")
        if not any(x.id in self.act for x in xs):
            return
        bwd = custom_bwd(op)
        env2 = self.bind_params(env, bwd.params, [self.ct_or_zeros(ct, o) for o in op.outputs])
        for inner in bwd.ops:
            self.clone(inner, env2)
        for x, r in zip(xs, bwd.results):
            self.accum(ct, x, env2[r.id])

    def backward_cond(self, op, env, ct) -> None:
        pos = [k for k, o in enumerate(op.outputs) if o.id in self.act]
        operands = state(op)
        opnd = [k for k, v in enumerate(operands) if v.id in self.act]
        captured, seen = [], set()
        for r in op.regions:
            for v in r.free_values():
                if v.id in self.act and v.id not in seen:
                    seen.add(v.id)
                    captured.append(v)
        if not opnd and not captured:
            return
        b = self.b
        seeds0 = [self.ct_or_zeros(ct, op.outputs[k]) for k in pos]
        ins = [env[v.id] for v in operands] + seeds0
        regions = []
        for src in op.regions:
            params = [b.new_value(v.aval, v.name) for v in ins]
            with b.open_region(params) as r:
                seeds = [None] * len(src.results)
                for k, g in zip(pos, params[len(operands):]):
                    seeds[k] = g
                r.results = self.adjoint_region(
                    src, env, params[:len(operands)], seeds,
                    [src.params[k] for k in opnd] + captured)
            regions.append(r)
        outs = self.emit(cond_p, [env[pred(op).id]] + ins,
                         [operands[k].aval for k in opnd] + [v.aval for v in captured],
                         regions, loc=op.loc)
        for k, g in zip(opnd, outs):
            self.accum(ct, operands[k], g)
        for v, g in zip(captured, outs[len(opnd):]):
            self.accum(ct, v, g)
