"""Custom derivative rules in traced code: `llgrad.custom_vjp` and `autograd.Function.apply`
called on traced values (runtime/custom.py) become a `custom_vjp` op.

The rule's forward is traced in place (its ops are ordinary ops, its output the op's value);
its backward is traced once into the op's bwd region, whose params are the outputs'
cotangents and which reads the residuals from the enclosing region (Note [Control-flow ops]
in transform/control.py). Both are the user's code, converted like any other (their control
flow is staged, their globals guarded).
"""
from __future__ import annotations

import numpy as np

from llgrad.runtime import ops, pytree
from llgrad.runtime.custom import CustomCall, active, cotangents, in_forward
from llgrad.runtime.errors import LLGradError
from llgrad.runtime.ops.control import custom_vjp_p
from llgrad.tracer import operators
from llgrad.transform import ir
from llgrad.transform.builder import current


def _run(f, *args):
    return operators.converted_call(f, args, None)


def trace_custom(call: CustomCall):
    """Emit `call` into the current trace; returns its output (the forward's structure)."""
    b = current()
    fun = getattr(call.owner, "fun", None)
    if fun is not None and in_forward(call.owner):  # its own fwd calls it: the plain value
        return _run(fun, *call.args)
    arg_leaves = pytree.tree_leaves(call.args)
    xs = [k for k, x in enumerate(arg_leaves) if _float_value(x)]
    region, n0 = b.region, len(b.region.ops)
    with active(call.owner):
        result = call.fwd(_run, *call.args)
    if not (isinstance(result, (tuple, list)) and len(result) == 2):
        raise LLGradError(f"the forward of {call.name} must return a pair (output, "
                          f"residuals), got a {type(result).__name__}", loc=call.loc,
                          fix="return `out, residuals` from fwd")
    out, res = result
    leaves, struct = pytree.flatten(out)
    skip = call.non_diff(out) if call.non_diff is not None else set()
    outs = [k for k, o in enumerate(leaves) if _float_value(o) and id(o) not in skip]
    closed = _closed_over(region.ops[n0:], arg_leaves)
    if not outs or not xs and not closed:
        return out
    params = [b.new_value(leaves[k].aval, f"ct_{leaves[k].name or 'out'}") for k in outs]
    with b.open_region(params) as bwd:
        given = dict(zip(outs, params))
        g = [given[k] if k in given else _zeros(b, o) for k, o in enumerate(leaves)]
        cts = cotangents(call, call.bwd(_run, res, pytree.unflatten(struct, g)),
                         lambda what, fix: LLGradError(what, loc=call.loc, fix=fix))
        bwd.results = [_cotangent(b, cts[k], arg_leaves[k]) for k in xs]
    values = b.emit(custom_vjp_p, [arg_leaves[k] for k in xs] + closed +
                    [leaves[k] for k in outs], {"name": call.name},
                    [leaves[k].aval for k in outs], regions=[bwd], loc=call.loc)
    for k, v in zip(outs, values):
        v.name = leaves[k].name
        leaves[k] = v
    return pytree.unflatten(struct, leaves)


def _closed_over(fwd_ops, arg_leaves) -> list:
    """The float values the forward's ops read that neither they nor the arguments define
    (values a closure or global of the rule holds): AD refuses to differentiate through
    them (custom_parts' `closed`)."""
    defined = {x.id for x in arg_leaves if isinstance(x, ir.Value)}
    out, seen = [], set()
    for top in fwd_ops:
        for op in [top] + [o for r in top.regions for o in r.walk()]:
            defined.update(v.id for v in op.outputs)
            defined.update(p.id for r in op.regions for p in r.params)
    for top in fwd_ops:
        reads = list(top.inputs) + [v for r in top.regions for v in r.free_values()]
        for v in reads:
            if v.id not in defined and v.id not in seen and v.aval.dtype.kind == "f" and \
                    not (v.op is not None and v.op.prim.name == "constant"):
                seen.add(v.id)
                out.append(v)
    return out


def _float_value(x) -> bool:
    return isinstance(x, ir.Value) and x.aval.dtype.kind == "f"


def _zeros(b, o):
    """The cotangent of an output nothing differentiates (zeros of its shape)."""
    if isinstance(o, ir.Value):
        return b.const(np.zeros(o.aval.shape, o.aval.dtype if o.aval.dtype.kind == "f"
                                else np.float64))
    if isinstance(o, (np.ndarray, float, int, np.number)):
        return np.zeros(np.shape(o))
    return None


def _cotangent(b, c, x) -> ir.Value:
    """`c` as an IR value of `x`'s aval (None: zeros; a Function's gradient of a broadcast
    input is summed to its shape, as PyTorch does: runtime/custom.cotangents checked it)."""
    if c is None:
        return b.const(np.zeros(x.aval.shape, x.aval.dtype))
    c = b.lift(np.asarray(c) if not isinstance(c, ir.Value) else c)
    if c.aval.shape != x.aval.shape:
        c = ops.sum_to(c, x.aval.shape)
    return c if c.aval.dtype == x.aval.dtype else ops.astype(c, x.aval.dtype)


__all__ = ["trace_custom"]
