"""The reference interpreter: runs an ir.Function on numpy arrays, one `prim.impl` per op.

It is the oracle of the transform and codegen tests and the executor of LLGRAD_DISABLE_JIT=1.
Control flow follows Note [Control-flow ops] in transform/control.py. No op is special-cased
except the region ops and `check` (Note [Checks]: a failed check raises the user's exception);
a failing op is reported with its name and source location.
"""
from __future__ import annotations

import numpy as np

from llgrad.runtime.errors import IndexingError, InternalError, LinAlgError, LLGradError
from llgrad.runtime.ops.control import (check_exception, check_p, cond_p, constant_p,
                                        custom_vjp_p, for_loop_p, fusion_p, while_loop_p)
from llgrad.transform import control, ir
from llgrad.transform.control import CONTROL


def run(fn: ir.Function, *arrays) -> list[np.ndarray]:
    """Evaluate `fn` on concrete arguments; returns one ndarray per output.

    Example:
        >>> outs = run(fn, np.ones(3))  # doctest: +SKIP
    """
    if len(arrays) != len(fn.params):
        raise TypeError(f"{fn.name} takes {len(fn.params)} arguments, got {len(arrays)}")
    env: dict[int, object] = {}
    for p, a in zip(fn.params, arrays):
        a = np.asarray(a)
        if a.shape != p.aval.shape:
            raise ValueError(f"{fn.name}: argument {p.name or p.id} has shape {a.shape}, the "
                             f"function was built for {p.aval.shape}")
        env[p.id] = a.astype(p.aval.dtype, copy=False)
    try:
        outs = _region(fn.body, [env[p.id] for p in fn.params], env)
    except _Raised as r:  # a failed check: the user's exception, as the program raises it
        raise r.exc from None
    return [np.asarray(v) for v in outs]


class _Raised(BaseException):
    """Carries the exception of a failed check out of the ops around it (no `During:`)."""

    def __init__(self, exc: BaseException):
        self.exc = exc


def _region(region: ir.Region, args, env) -> list:
    for p, a in zip(region.params, args):
        env[p.id] = a
    for op in region.ops:
        _op(op, env)
    return [env[v.id] for v in region.results]


def _op(op: ir.Op, env) -> None:
    rule = _RULES.get(op.prim)
    try:
        ins = [env[v.id] for v in op.inputs]
    except KeyError:
        raise InternalError(f"interp: {op.name} reads a value that is not defined yet",
                            loc=op.loc) from None
    try:
        if rule is not None:
            outs = rule(op, ins, env)
        else:
            res = op.prim.impl(*ins, **op.params)
            outs = list(res) if op.prim.multiple_results else [res]
    except LinAlgError as e:  # located by the impl at the interpreter's caller: the op's line
        raise LinAlgError(e.what, op.loc or e.loc, e.fix) from None
    except LLGradError:
        raise
    except Exception as e:
        if isinstance(e, IndexError) and op.prim.family == "index":
            # numpy's words at the user's line, as compiled code reports them
            raise IndexingError.out_of_bounds(str(e), op.loc) from None
        where = f" ({op.loc.describe()})" if op.loc else ""
        e.add_note(f"During: interpreting {op.name}{where}")
        raise
    for v, o in zip(op.outputs, outs):
        if isinstance(o, np.ndarray) or np.isscalar(o):
            o = np.asarray(o)
            if o.dtype != v.aval.dtype:
                o = o.astype(v.aval.dtype)
        env[v.id] = o


def _constant(op, ins, env):
    return [op.params["value"]]


def _cond(op, ins, env):
    lay = CONTROL[cond_p]
    then_r, else_r = control.branches(op)
    return _region(then_r if bool(ins[0]) else else_r, ins[lay.n_lead:], env)


def _for_loop(op, ins, env):
    lay = CONTROL[for_loop_p]
    start, stop, step = (int(v) for v in ins[:lay.n_lead])
    carried = ins[lay.n_lead:]
    body = control.body(op)
    for i in range(start, stop, step):
        carried = _region(body, [np.asarray(i, np.int64)] + list(carried), env)
    return carried


def _while_loop(op, ins, env):
    test, body = control.loop_test(op), control.body(op)
    carried = ins
    while bool(_region(test, carried, env)[0]):
        carried = _region(body, carried, env)
    return carried


def _check(op, ins, env):
    if bool(ins[0]):
        raise _Raised(check_exception(op.params["exc"], op.params["args"], op.loc))
    return []


def _fusion(op, ins, env):
    return _region(control.body(op), ins, env)


def _custom_vjp(op, ins, env):
    return ins[len(ins) - len(op.outputs):]  # its values (the bwd region runs only in AD)


_RULES = {constant_p: _constant, cond_p: _cond, for_loop_p: _for_loop,
          while_loop_p: _while_loop, fusion_p: _fusion, check_p: _check,
          custom_vjp_p: _custom_vjp}
