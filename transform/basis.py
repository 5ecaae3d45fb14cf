"""The first iteration of a loop that starts from a Jacobian's basis, peeled: `peel_basis(fn,
basis)` for llgrad/forward.py's batched sweeps (Note [Products with the basis]). Requires: a
verified, unfused function whose param `basis` is the (n, n) identity at run time. Produces:
a verified function, its top-level for_loops that carry `basis` in with one iteration less.
"""
from __future__ import annotations

import numpy as np

from llgrad.runtime.aval import Aval
from llgrad.runtime.ops.control import cond_p, constant_p, for_loop_p
from llgrad.runtime.ops.elementwise import lt_p, mul_p
from llgrad.runtime.ops.linalg import matmul_p
from llgrad.runtime.ops.shape import broadcast_to_p, reshape_p
from llgrad.transform import control, ir
from llgrad.transform.passes import substitute

# Note [Products with the basis]
# jacfwd's tangents and jacrev's cotangents start as the identity, and a loop carries them:
# the 100 -> 100 tanh recurrence's forward sweep multiplies the carried (100, 100) tangent by
# W at each of its 8 iterations, and its reverse sweep the cotangent (times the tanh
# derivative) by W. The products are the whole cost (8 gemms: JAX's time), and the first is a
# product with the identity, I @ B = B, or with a diagonal, (I * d) @ B = d[:, None] * B. So
# the first iteration of a top-level for_loop with constant bounds that carries the basis in
# is run before the loop (the loop starting one step later), and in that copy those products
# are not made: one gemm of 8 fewer. Only the basis param is known to be the identity (its
# values are not in the IR while it is a param), so only products that read it directly count.


def peel_basis(fn: ir.Function, basis: ir.Value) -> bool:
    """Peel the loops of `fn` that carry `basis` in (in place); whether any was."""
    n = basis.aval.shape[0]
    if basis.aval.shape != (n, n):
        return False
    peeled = False
    for k in range(len(fn.body.ops) - 1, -1, -1):
        op = fn.body.ops[k]
        if op.prim is not for_loop_p or not any(v is basis for v in control.state(op)):
            continue
        start, stop, step = (_const_int(v) for v in control.bounds(op))
        if start is None or not step or (step < 0 if stop is None else
                                         len(range(start, stop, step)) < 1):
            continue
        fn.body.ops[k:k + 1] = _peel(op, start + step, stop is None, basis)
        peeled = True
    return peeled


def _const_int(v):
    op = getattr(v, "op", None)
    if op is None or op.prim is not constant_p or v.aval.shape != ():
        return None
    return int(op.params["value"])


def _peel(op, first: int, guarded: bool, basis) -> list:
    """op's first iteration as ops (under a cond when its trip count is known only at run
    time), its products with the basis folded, then op from counter value `first` on."""
    body, state = control.body(op), control.state(op)
    start, stop, step = control.bounds(op)
    # inside the cond the basis is read from outside, so that its products are seen
    params = [v if v is basis or not guarded else ir.Value(v.aval, v.name) for v in state]
    env = {body.params[0].id: start}
    env.update((p.id, v) for p, v in zip(body.params[1:], params))
    copy = _copy(body, env)
    ops, folded = _fold(copy.ops, basis)
    results = [folded.get(v.id, v) for v in copy.results]
    begin = _new(constant_p, [], (), np.int64, op.loc, value=np.array(first, np.int64))
    if not guarded:
        op.inputs = [begin.outputs[0], stop, step] + results
        return ops + [begin, op]
    run = _new(lt_p, [start, stop], (), np.bool_, op.loc)
    then = ir.Region([p for p, v in zip(params, state) if v is not basis])
    then.ops, then.results = ops, results
    skip = ir.Region([ir.Value(v.aval, v.name) for v in state if v is not basis])
    skip.results = _with_basis(state, skip.params, basis)
    outs = [ir.Value(v.aval, v.name) for v in state]
    kept = [v for v in state if v is not basis]
    branch = ir.Op(cond_p, [run.outputs[0]] + kept, {}, outs, [then, skip], loc=op.loc)
    op.inputs = [begin.outputs[0], stop, step] + outs
    return [run, branch, begin, op]


def _with_basis(state, params, basis) -> list:
    it = iter(params)
    return [basis if v is basis else next(it) for v in state]


def _new(prim, inputs, shape, dtype, loc, **params) -> ir.Op:
    return ir.Op(prim, inputs, params, [ir.Value(Aval(shape, np.dtype(dtype)))], loc=loc)


def _copy(r: ir.Region, env: dict) -> ir.Region:
    """A copy of region r with fresh values; env maps its params (and is filled); values
    from enclosing regions stay."""
    def fresh(v):
        env[v.id] = ir.Value(v.aval, v.name)
        return env[v.id]

    new = ir.Region([env[p.id] if p.id in env else fresh(p) for p in r.params])
    for op in r.ops:
        regions = [_copy(s, env) for s in op.regions]
        new.ops.append(ir.Op(op.prim, [env.get(v.id, v) for v in op.inputs], op.params,
                             [fresh(v) for v in op.outputs], regions, op.loc))
    new.results = [env.get(v.id, v) for v in r.results]
    return new


def _fold(ops, basis):
    """(ops with I @ B replaced by B and (I * d) @ B by d[:, None] * B, {old id: new value})."""
    n = basis.aval.shape[0]
    out, folded = [], {}
    for op in ops:
        op.inputs = [folded.get(v.id, v) for v in op.inputs]
        for r in op.regions:
            substitute(r, folded)
        if op.prim is matmul_p and op.inputs[0] is basis and \
                op.outputs[0].aval == op.inputs[1].aval:
            folded[op.outputs[0].id] = op.inputs[1]
            continue
        d = _diagonal(op.inputs[0], basis) if op.prim is matmul_p else None
        if d is not None and len(op.inputs[1].aval.shape) == 2 and \
                d.aval.dtype == op.inputs[1].aval.dtype == op.outputs[0].aval.dtype:
            col = ir.Value(Aval((n, 1), d.aval.dtype))
            wide = ir.Value(op.outputs[0].aval)
            out += [ir.Op(reshape_p, [d], {"shape": (n, 1)}, [col], loc=op.loc),
                    ir.Op(broadcast_to_p, [col], {"shape": op.outputs[0].aval.shape}, [wide],
                          loc=op.loc),
                    ir.Op(mul_p, [wide, op.inputs[1]], {}, op.outputs, loc=op.loc)]
            continue
        out.append(op)
    return out, folded


def _diagonal(a, basis):
    """d when `a` is basis * d (d of shape (n,), or broadcast from it along the rows)."""
    op = getattr(a, "op", None)
    if op is None or op.prim is not mul_p or a.aval != basis.aval:
        return None
    x, y = op.inputs
    other = y if x is basis else x if y is basis else None
    if other is None:
        return None
    n = basis.aval.shape[0]
    if other.aval.shape == (n,):
        return other
    src = getattr(other, "op", None)
    if src is not None and src.prim is broadcast_to_p and src.inputs[0].aval.shape == (n,):
        return src.inputs[0]
    return None
