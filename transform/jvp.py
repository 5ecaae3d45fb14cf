"""Forward mode on the IR: each op's primal clone followed by the tangents of its outputs.

`jvp_function(fn, wrt)` returns a function of fn's params plus one tangent per `wrt` param,
yielding fn's outputs then one tangent per output (zeros where none flows). There is one rule
per primitive family (Note [Forward mode rules]) and one per control-flow op: cond, for_loop
and while_loop carry the tangents of their state beside the primal state (no tapes), and
regions read the tangents of the values they capture as they read the values.
Requires: a verified function (unfused: fusion bodies are inlined). Produces: a verified
function.
"""
from __future__ import annotations

import numpy as np

from llgrad.runtime import ops
from llgrad.runtime.aval import Aval
from llgrad.runtime.errors import UnsupportedError
from llgrad.runtime.forward_rules import tangents
from llgrad.runtime.ops.control import (check_p, cond_p, constant_p, custom_vjp_p, for_loop_p,
                                        fusion_p, tape_get_p, tape_new_p, tape_push_p,
                                        while_loop_p)
from llgrad.runtime.ops.shape import broadcast_to_p
from llgrad.transform import control, ir
from llgrad.transform.builder import Builder, current

# Note [Forward mode rules]
# A primitive's tangent rule comes from its declaration (runtime/forward_rules.py, shared with
# eager dual tensors, runtime/autograd/forward_ad.py), in this order:
#   - `prim.jvp`, a hand-written rule;
#   - elementwise primitives: the sum over inputs of the input's VJP rule applied to the
#     input's tangent. An elementwise op's Jacobian is diagonal, and its VJP rule is the
#     cotangent times that diagonal, so the same rule maps a tangent to the output's tangent:
#     forward mode uses the very derivative reverse mode does;
#   - `linear="linear"`: the op applied to the tangents (zeros for float inputs without
#     one, the primal values of the others, such as index arrays);
#     `linear="multilinear"` (matmul): the sum over inputs of the op with that input replaced
#     by its tangent;
#   - any other primitive: the transpose of its VJP rules. A VJP rule is linear in the
#     cotangent u, so the tangent J t is the gradient with respect to u of sum(vjp(u) * t):
#     here reverse mode (transform/ad.py) applied to the rule's own IR, inlined (eagerly,
#     the autograd engine on the rule). Correct for every primitive with VJP rules; about
#     the cost of two VJPs.
# Tapes (transform/loop_ad.py) are storage and linear: the tangent of a tape is a tape of
# tangents filled and read at the same rows, so forward mode runs over a reverse sweep
# (Hessians of functions with staged loops: forward over reverse).


def jvp_function(fn: ir.Function, wrt: list[int], name: str | None = None) -> ir.Function:
    """The forward-mode function of `fn` with respect to params `wrt`.

    Returns:
        A function of fn's params followed by one tangent per `wrt` param (same avals),
        yielding fn's outputs followed by one tangent per output (zeros where no tangent
        flows; integer outputs get integer zeros).
    Raises:
        UnsupportedError: a custom_vjp op on a path from a `wrt` param (a custom reverse-mode
            rule gives no forward-mode derivative).
    """
    return _JVP(name or f"{fn.name}_jvp").run(fn, wrt)


def _is_float(v) -> bool:
    return v.aval.dtype.kind == "f"


class _JVP:
    def __init__(self, name: str):
        self.loc = None
        self.b = Builder(name, loc=lambda: self.loc)

    def run(self, fn, wrt) -> ir.Function:
        b = self.b
        with b:
            env, tan = {}, {}
            for p in fn.params:
                env[p.id] = b.param(p.aval, p.name)
            for i in wrt:
                p = fn.params[i]
                t = b.param(p.aval, f"t_{p.name}" if p.name else "t")
                if _is_float(p):
                    tan[p.id] = t
            self.ops(fn.body.ops, env, tan)
            self.loc = None
            outs = [env[v.id] for v in fn.outputs]
            b.fn.body.results = outs + [self.tangent(tan, v) for v in fn.outputs]
        b.fn.meta.update(fn.meta)
        return b.fn

    # ---- helpers ----------------------------------------------------------------------------
    def zeros(self, aval) -> ir.Value:
        z = self.b.const(np.zeros((), aval.dtype))
        if aval.shape == ():
            return z
        return self.b.emit(broadcast_to_p, [z], {"shape": tuple(aval.shape)},
                           [Aval(tuple(aval.shape), aval.dtype)])[0]

    def tangent(self, tan, v) -> ir.Value:
        t = tan.get(v.id)
        return t if t is not None else self.zeros(v.aval)

    def emit(self, op, ins, regions=(), avals=None) -> list:
        return self.b.emit(op.prim, ins, op.params,
                           avals if avals is not None else [v.aval for v in op.outputs],
                           regions, loc=op.loc)

    def bind(self, env, olds, news) -> None:
        for o, n in zip(olds, news):
            if getattr(o, "name", None) and isinstance(n, ir.Value) and n.name is None:
                n.name = o.name
            env[o.id] = n

    # ---- the walk ---------------------------------------------------------------------------
    def ops(self, op_list, env, tan) -> None:
        for op in op_list:
            self.loc = op.loc
            rule = _RULES.get(op.prim)
            if rule is not None:
                rule(self, op, env, tan)
                continue
            outs = self.emit(op, [env[v.id] for v in op.inputs])
            self.bind(env, op.outputs, outs)
            if op.prim.nondiff or not any(v.id in tan for v in op.inputs):
                continue
            try:
                touts = self.primitive(op, env, tan)
            except UnsupportedError as e:  # a derivative a rule refuses: at the op's line
                if e.loc is not None:
                    raise
                raise UnsupportedError(e.what, op.loc, e.fix) from None
            for o, t in zip(op.outputs, touts):
                if t is not None and _is_float(o):
                    tan[o.id] = _fit(t, o.aval)

    def primitive(self, op, env, tan) -> list:
        """The tangents of a plain op's outputs (Note [Forward mode rules])."""
        prim = op.prim
        ins = [env[v.id] for v in op.inputs]
        tins = [tan.get(v.id) if prim.vjp_rule(i) is not None else None
                for i, v in enumerate(op.inputs)]
        outs = [env[o.id] for o in op.outputs]
        if not any(t is not None for t in tins):
            return [None] * len(outs)
        return tangents(prim, ins, tins, outs, op.params, lambda x: self.zeros(x.aval),
                        lambda *_: _transposed_vjp(op, ins, tins, outs))

    def clone_region(self, r, env) -> ir.Region:
        params = [self.b.new_value(p.aval, p.name) for p in r.params]
        env2 = dict(env)
        self.bind(env2, r.params, params)
        with self.b.open_region(params) as new:
            self.ops(r.ops, env2, {})
            new.results = [env2[v.id] for v in r.results]
        return new

    def clone(self, op, env) -> None:
        regions = [self.clone_region(r, env) for r in op.regions]
        self.bind(env, op.outputs, self.emit(op, [env[v.id] for v in op.inputs], regions))

    def active(self, op, tan) -> bool:
        return any(v.id in tan for v in op.inputs) or any(
            v.id in tan for r in op.regions for v in r.free_values())


# ---- rules for the region ops and the structural primitives ---------------------------------
def _clone(self, op, env, tan):
    """Constants and checks: no tangent."""
    self.clone(op, env)


def _fusion(self, op, env, tan):
    """Forward mode of the unfused body (fused IR reaches here only when given)."""
    body = control.body(op)
    env2 = dict(env)
    self.bind(env2, body.params, [env[v.id] for v in control.state(op)])
    tan2 = dict(tan)
    for p, v in zip(body.params, control.state(op)):
        if v.id in tan:
            tan2[p.id] = tan[v.id]
    self.ops(body.ops, env2, tan2)
    for o, r in zip(op.outputs, body.results):
        env[o.id] = env2[r.id]
        if r.id in tan2:
            tan[o.id] = tan2[r.id]


def _custom_vjp(self, op, env, tan):
    if self.active(op, tan):
        raise UnsupportedError(
            f"{op.params['name']} has a custom reverse-mode rule (custom_vjp), which gives no "
            f"forward-mode derivative", loc=op.loc,
            fix="differentiate this function in reverse mode (llgrad.grad, llgrad.jacrev), "
            "or drop the custom rule")
    self.bind(env, op.outputs, [env[v.id] for v in control.custom_parts(op)[2]])


def _tape_new(self, op, env, tan):
    self.clone(op, env)
    if _is_float(op.outputs[0]):  # the tape of tangents, filled beside it
        tan[op.outputs[0].id] = self.emit(op, [])[0]


def _tape_push(self, op, env, tan):
    self.clone(op, env)
    tape, x, *mask = op.inputs  # a ragged tape's mask (Note [Ragged tapes])
    if tape.id in tan:
        tan[op.outputs[0].id] = self.b.emit(
            tape_push_p, [tan[tape.id], self.tangent(tan, x)] + [env[m.id] for m in mask], {},
            [tape.aval], loc=op.loc)[0]


def _tape_get(self, op, env, tan):
    self.clone(op, env)
    tape, k = op.inputs
    if tape.id in tan:
        tan[op.outputs[0].id] = self.b.emit(tape_get_p, [tan[tape.id], env[k.id]], {},
                                            [op.outputs[0].aval], loc=op.loc)[0]


def _depends(region, live: set) -> set:
    """`live` plus the ids of the values of `region` that may carry a tangent given that
    the values in `live` do (a region op's outputs when it reads any of them)."""
    live = set(live)
    for op in region.ops:
        if op.prim is tape_new_p:  # a float tape always has its tape of tangents
            if _is_float(op.outputs[0]):
                live.add(op.outputs[0].id)
            continue
        if op.prim.nondiff and not op.regions and op.prim not in (tape_push_p, tape_get_p):
            continue
        if any(v.id in live for v in op.inputs) or any(
                v.id in live for r in op.regions for v in r.free_values()):
            live.update(o.id for o in op.outputs if _is_float(o))
    return live


def _loop_active(op, tan) -> list[int]:
    """The carried positions of a loop whose values may carry a tangent: those whose init
    has one, and (to a fixed point) those the body yields from a value that may."""
    cf = control.CONTROL[op.prim]
    body = cf.body(op)
    act = {k for k, v in enumerate(cf.state(op)) if v.id in tan}
    while True:
        live = set(tan) | {ps[k].id for ps in cf.entries(op) for k in act}
        depends = _depends(body, live)
        new = act | {k for k, v in enumerate(body.results) if v.id in depends}
        if new == act:
            return sorted(act)
        act = new


def _region(self, r, env, tan, params, tparams, tan_of, yields) -> ir.Region:
    """A copy of region `r` (params `params`, then the tangent params `tparams` standing for
    the tangents of `r`'s params `tan_of`) that yields its results and then the tangents of
    its results at positions `yields` (None: the region yields no tangents)."""
    env2, tan2 = dict(env), dict(tan)
    self.bind(env2, r.params, params)
    for p, t in zip(tan_of, tparams):
        tan2[p.id] = t
    with self.b.open_region(params + tparams) as new:
        self.ops(r.ops, env2, tan2)
        new.results = [env2[v.id] for v in r.results]
        if yields is not None:
            new.results += [self.tangent(tan2, r.results[k]) for k in yields]
    return new


def _loop(self, op, env, tan):
    """for_loop, while_loop: the carried tangents (positions `act`) ride along."""
    if not self.active(op, tan):
        self.clone(op, env)
        return
    cf = control.CONTROL[op.prim]
    act = _loop_active(op, tan)
    state = cf.state(op)
    regions = []
    for r in op.regions:
        carried = cf.carried(r)
        regions.append(_region(
            self, r, env, tan, [self.b.new_value(p.aval, p.name) for p in r.params],
            [self.b.new_value(carried[k].aval, "t") for k in act], [carried[k] for k in act],
            act if r is cf.body(op) else None))
    ins = [env[v.id] for v in op.inputs] + [self.tangent(tan, state[k]) for k in act]
    outs = self.emit(op, ins, regions,
                     [v.aval for v in op.outputs] + [op.outputs[k].aval for k in act])
    m = len(op.outputs)
    self.bind(env, op.outputs, outs[:m])
    for k, t in zip(act, outs[m:]):
        tan[op.outputs[k].id] = t


def _cond(self, op, env, tan):
    """cond: the operands' tangents enter both branches; each yields its outputs'."""
    if not self.active(op, tan):
        self.clone(op, env)
        return
    operands = control.state(op)
    t_in = [k for k, v in enumerate(operands) if v.id in tan]
    t_out = set()
    for r in control.branches(op):
        depends = _depends(r, set(tan) | {r.params[k].id for k in t_in})
        t_out |= {k for k, v in enumerate(r.results) if v.id in depends}
    t_out = sorted(t_out)
    regions = [_region(self, r, env, tan, [self.b.new_value(p.aval, p.name) for p in r.params],
                       [self.b.new_value(r.params[k].aval, "t") for k in t_in],
                       [r.params[k] for k in t_in], t_out)
               for r in control.branches(op)]
    ins = [env[v.id] for v in op.inputs] + [tan[operands[k].id] for k in t_in]
    outs = self.emit(op, ins, regions,
                     [v.aval for v in op.outputs] + [op.outputs[k].aval for k in t_out])
    m = len(op.outputs)
    self.bind(env, op.outputs, outs[:m])
    for k, t in zip(t_out, outs[m:]):
        tan[op.outputs[k].id] = t


_RULES = {constant_p: _clone, check_p: _clone, fusion_p: _fusion,
          custom_vjp_p: _custom_vjp, tape_new_p: _tape_new, tape_push_p: _tape_push,
          tape_get_p: _tape_get, cond_p: _cond, for_loop_p: _loop, while_loop_p: _loop}


# ---- the rule of last resort ------------------------------------------------------------------
def _transposed_vjp(op, ins, tins, outs) -> list:
    """J t as the gradient in u of sum(vjp(u) * t) (Note [Forward mode rules])."""
    from llgrad.transform.ad import grad_function
    from llgrad.transform.inline import inline
    prim, params = op.prim, op.params
    floats = [k for k, o in enumerate(outs) if _is_float(o)]
    sub = Builder(f"{prim.name}_vjp_transposed", loc=lambda: op.loc)
    with sub:
        us = [sub.param(outs[k].aval, "u") for k in floats]
        xs = [sub.param(x.aval) for x in ins]
        ys = [sub.param(o.aval) for o in outs]
        ts = {i: sub.param(t.aval) for i, t in enumerate(tins) if t is not None}
        if prim.multiple_results:
            g = [None] * len(outs)
            for k, u in zip(floats, us):
                g[k] = u
            g, out = tuple(g), tuple(ys)
        else:
            g, out = us[0], ys[0]
        total = None
        for i, t in ts.items():
            c = prim.vjp_rule(i)(g, out, *xs, **params)
            if c is None:
                continue
            if not isinstance(c, ir.Value):
                c = sub.lift(np.asarray(c, t.aval.dtype))
            if c.aval.shape != t.aval.shape:
                c = ops.sum_to(c, t.aval.shape)  # Note [Broadcasting at primitives]
            s = ops.sum(ops.mul(ops.astype(c, t.aval.dtype), t))
            total = s if total is None else ops.add(total, s)
        if total is None:
            total = sub.lift(np.asarray(0.0, outs[floats[0]].aval.dtype))
        sub.fn.body.results = [ops.astype(total, np.float64)]
    grads = grad_function(sub.fn, list(range(len(us))))
    args = [current().const(np.zeros(u.aval.shape, u.aval.dtype)) for u in us] + \
        list(ins) + list(outs) + [t for t in tins if t is not None]
    got = inline(grads, args)[1:]
    res = [None] * len(outs)
    for k, t in zip(floats, got):
        res[k] = t
    return res


def _fit(t, aval):
    """`t` with `aval`'s shape and dtype (a broadcast operand's tangent, a rule's dtype)."""
    if not isinstance(t, ir.Value):
        t = current().lift(np.asarray(t, aval.dtype))
    if t.aval.shape != tuple(aval.shape):
        t = ops.broadcast_to(t, tuple(aval.shape))
    if t.aval.dtype != aval.dtype:
        t = ops.astype(t, aval.dtype)
    return t
