"""The IR rendered as readable, runnable numpy Python (gast + astunparse).

One statement per op, `np.` calls where numpy has the operation, Python `for`/`while`/`if` for
region ops (Note [Control-flow ops]); primitives numpy has no single call for (scatter_add,
index_put, tapes, ...) call their `impl` through `__lg_impl`. exec() of the result defines a
function equal to `interp.run` on the IR (a test checks it).
"""
from __future__ import annotations

import re

import astunparse
import gast
import numpy as np

from llgrad.runtime.prim import REGISTRY
from llgrad.runtime.ops.control import check_p, cond_p, for_loop_p, fusion_p, while_loop_p
from llgrad.transform import control, ir

_REDUCE = {"reduce_sum": "sum", "reduce_max": "max", "reduce_min": "min", "reduce_prod": "prod"}
_PREAMBLE = ["import numpy as np",
             "from llgrad.transform.printers.python_src import prim_impl as __lg_impl"]


def prim_impl(name: str, *args, **params):
    """Run primitive `name`'s numpy implementation (the generated code's fallback)."""
    return REGISTRY[name].impl(*args, **params)


def literal(v) -> str:
    """Python source for a parameter value (arrays exactly, via hex bytes when not simple)."""
    if isinstance(v, np.ndarray):
        dt = f"np.{v.dtype.name}" if v.dtype.name != "bool" else "np.bool_"
        if v.size <= 16 and (v.dtype.kind in "bi" or np.all(np.isfinite(v))):
            return f"np.array({v.tolist()!r}, dtype={dt})"
        return (f"np.frombuffer(bytes.fromhex({v.tobytes().hex()!r}), dtype={dt})"
                f".reshape({v.shape!r})")
    if isinstance(v, np.dtype):
        return f"np.dtype({v.name!r})"
    if isinstance(v, (tuple, list)):
        inner = ", ".join(literal(x) for x in v)
        return f"({inner},)" if isinstance(v, tuple) and len(v) == 1 else \
            (f"({inner})" if isinstance(v, tuple) else f"[{inner}]")
    if isinstance(v, float) and not np.isfinite(v):
        return f"float({str(v)!r})"
    return repr(v)


class _Names:
    def __init__(self):
        self.names: dict[int, str] = {}

    def __call__(self, v: ir.Value) -> str:
        n = self.names.get(v.id)
        if n is None:
            hint = re.sub(r"\W", "_", v.name or "v")
            n = self.names[v.id] = f"{hint}_{len(self.names)}"
        return n


def _key_src(key, idx) -> str:
    # astunparse garbles slices inside a tuple subscript, so tuples spell slices as slice(...)
    parts = []
    for e in key:
        tag = e[0]
        if tag == "i":
            parts.append(str(e[1]))
        elif tag == "s":
            parts.append(f"slice({e[1]!r}, {e[2]!r}, {e[3]!r})" if len(key) > 1 else
                         ":".join("" if x is None else str(x) for x in e[1:3]) +
                         ("" if e[3] is None else f":{e[3]}"))
        else:
            parts.append({"n": "None", "e": "..."}.get(tag) or idx[e[1]])
    return ", ".join(parts) + ("," if len(parts) == 1 and key[0][0] != "s" else "")


def _expr(op: ir.Op, ins: list) -> str:
    name, p = op.name, op.params
    if name == "constant":
        return literal(p["value"])
    if op.prim.np_name is not None and not p:
        return f"np.{op.prim.np_name}({', '.join(ins)})"
    if name in _REDUCE:
        return f"np.{_REDUCE[name]}({ins[0]}, axis={literal(p['axes'])}, " \
               f"keepdims={p['keepdims']})"
    if name == "astype":
        return f"{ins[0]}.astype({literal(p['dtype'])})"
    if name == "stop_gradient":
        return ins[0]
    if name == "reshape":
        return f"np.reshape({ins[0]}, {literal(p['shape'])})"
    if name == "transpose":
        return f"np.transpose({ins[0]}, {literal(p['perm'])})"
    if name == "broadcast_to":
        return f"np.broadcast_to({ins[0]}, {literal(p['shape'])})"
    if name == "concatenate":
        return f"np.concatenate([{', '.join(ins)}], axis={p['axis']})"
    if name == "getitem":
        return f"{ins[0]}[{_key_src(p['key'], ins[1:])}]"
    args = ", ".join(ins + [f"{k}={literal(v)}" for k, v in p.items()])
    return f"__lg_impl({name!r}, {args})"


def _assign(targets: list, values: list, pad: str, out: list) -> None:
    if targets:
        out.append(f"{pad}{', '.join(targets)} = {', '.join(values)}"
                   + ("," if len(values) == 1 and len(targets) > 1 else ""))


def _region(r: ir.Region, names, pad: str, out: list) -> None:
    for op in r.ops:
        ins = [names(v) for v in op.inputs]
        outs = [names(v) for v in op.outputs]
        if op.prim in _REGION_PRINTERS:
            _REGION_PRINTERS[op.prim](op, ins, outs, names, pad, out)
        elif len(outs) > 1:  # a primitive with several results returns a tuple
            out.append(f"{pad}{', '.join(outs)} = {_expr(op, ins)}")
        elif op.prim is check_p:  # Note [Checks]
            exc = op.params["exc"]
            cls = exc.__qualname__ if exc.__module__ == "builtins" else \
                f"__lg_class({exc.__module__!r}, {exc.__qualname__!r})"
            out.append(f"{pad}if {ins[0]}:")
            out.append(f"{pad}    raise {cls}{literal(tuple(op.params['args']))}")
        else:
            _assign(outs, [_expr(op, ins)], pad, out)


def _for_loop(op, ins, outs, names, pad, out) -> None:
    body, i = control.body(op), control.counter(op)
    carried = [names(v) for v in control.carried(op)]
    _assign(carried, [names(v) for v in control.state(op)], pad, out)
    start, stop, step = (names(v) for v in control.bounds(op))
    out.append(f"{pad}for __lg_i in range(int({start}), int({stop}), int({step})):")
    out.append(f"{pad}    {names(i)} = np.int64(__lg_i)")
    _region(body, names, pad + "    ", out)
    _assign(carried, [names(v) for v in body.results], pad + "    ", out)
    _assign(outs, carried, pad, out)


def _while_loop(op, ins, outs, names, pad, out) -> None:
    test, body = control.loop_test(op), control.body(op)
    carried = [names(v) for v in test.params]
    _assign(carried, [names(v) for v in control.state(op)], pad, out)
    out.append(f"{pad}while True:")
    _region(test, names, pad + "    ", out)
    out.append(f"{pad}    if not {names(test.results[0])}:")
    out.append(f"{pad}        break")
    _assign([names(v) for v in body.params], carried, pad + "    ", out)
    _region(body, names, pad + "    ", out)
    _assign(carried, [names(v) for v in body.results], pad + "    ", out)
    _assign(outs, carried, pad, out)


def _cond(op, ins, outs, names, pad, out) -> None:
    operands = [names(v) for v in control.state(op)]
    for k, r2 in enumerate(control.branches(op)):
        out.append(f"{pad}if {names(control.pred(op))}:" if k == 0 else f"{pad}else:")
        n = len(out)
        _assign([names(v) for v in r2.params], operands, pad + "    ", out)
        _region(r2, names, pad + "    ", out)
        _assign(outs, [names(v) for v in r2.results], pad + "    ", out)
        if len(out) == n:
            out.append(f"{pad}    pass")


def _fusion(op, ins, outs, names, pad, out) -> None:
    body = control.body(op)
    _assign([names(v) for v in body.params], [names(v) for v in control.state(op)], pad, out)
    _region(body, names, pad, out)
    _assign(outs, [names(v) for v in body.results], pad, out)


_REGION_PRINTERS = {for_loop_p: _for_loop, while_loop_p: _while_loop, cond_p: _cond,
                    fusion_p: _fusion}


def exception_class(module: str, qualname: str) -> type:
    """The class `module.qualname` (the generated code's name for a user's exception)."""
    import importlib
    obj = importlib.import_module(module)
    for part in qualname.split("."):
        obj = getattr(obj, part)
    return obj


def to_python(fn: ir.Function) -> str:
    """`fn` as the source of a Python function of the same name (and its imports).

    Example:
        >>> ns = {}; exec(to_python(fn), ns); ns[fn.name](x)  # doctest: +SKIP
    """
    names = _Names()
    fname = re.sub(r"\W", "_", fn.name)
    lines = list(_PREAMBLE)
    if any(op.name == "check" and op.params["exc"].__module__ != "builtins" for op in fn.walk()):
        lines.append("from llgrad.transform.printers.python_src import exception_class as "
                     "__lg_class")
    lines.append(f"def {fname}({', '.join(names(p) for p in fn.params)}):")
    _region(fn.body, names, "    ", lines)
    lines.append(f"    return ({', '.join(names(v) for v in fn.outputs)},)")
    tree = gast.parse("\n".join(lines) + "\n")
    return astunparse.unparse(gast.gast_to_ast(tree)).strip() + "\n"
