"""The IR's text form: one op a line, `%name: type = op inputs {params}` (and `[checked]`
for an indexing op whose indices an earlier op checked), the user's source location and
line as a trailing comment (printed only when it changes from the previous op's);
regions indented. Names are stable: assigned in print order by a Namer."""
from __future__ import annotations

import os

import numpy as np

from llgrad.runtime.aval import aval_str
from llgrad.transform import ir


class Namer:
    """Stable, readable value names: the user's variable hint plus a counter (`%z.1`)."""

    def __init__(self):
        self.names: dict[int, str] = {}
        self.count = 0

    def __call__(self, v: ir.Value) -> str:
        n = self.names.get(v.id)
        if n is None:
            n = f"%{v.name}.{self.count}" if v.name else f"%{self.count}"
            self.count += 1
            self.names[v.id] = n
        return n


def _param_str(v) -> str:
    if isinstance(v, np.ndarray):
        if v.size <= 4:
            return np.array2string(v, separator=",").replace("\n", "") if v.ndim else repr(v.item())
        return f"<{aval_str(v.shape, v.dtype)}>"
    if isinstance(v, np.dtype):
        return str(v)
    if isinstance(v, type):  # an exception class (check)
        return v.__qualname__
    return repr(v)


def _op_line(op: ir.Op, name: Namer) -> str:
    outs = ", ".join(f"{name(v)}: {aval_str(*v.aval)}" for v in op.outputs)
    ins = ", ".join(name(v) for v in op.inputs)
    params = ", ".join(f"{k}={_param_str(v)}" for k, v in op.params.items()
                       if k not in ("body", "regions"))
    text = (f"{outs} = " if outs else "") + op.name + (f" {ins}" if ins else "") + \
        (f" {{{params}}}" if params else "")
    return text + (" [checked]" if op.checked else "")  # Note [Replayed indices] in ad.py


def _loc_comment(op: ir.Op) -> str:
    if op.loc is None:
        return ""
    src = op.loc.source_line
    return f"# {os.path.basename(op.loc.file)}:{op.loc.line}" + (f"  {src}" if src else "")


def _print_region(region: ir.Region, name: Namer, indent: int, lines: list,
                  last: list | None = None) -> None:
    pad = "  " * indent
    last = [None] if last is None else last
    for op in region.ops:
        text = pad + _op_line(op, name)
        comment = _loc_comment(op)
        if comment == last[0]:
            comment = ""
        elif comment:
            last[0] = comment
        lines.append(f"{text:<72} {comment}".rstrip() if comment else text)
        for i, r in enumerate(op.regions):
            args = ", ".join(f"{name(p)}: {aval_str(*p.aval)}" for p in r.params)
            lines.append(f"{pad}  region {i}({args}) {{")
            _print_region(r, name, indent + 2, lines, last)
            lines.append(f"{pad}    yield " + ", ".join(name(v) for v in r.results))
            lines.append(f"{pad}  }}")


def print_function(fn: ir.Function, name: Namer | None = None) -> str:
    name = name or Namer()
    params = ", ".join(f"{name(p)}: {aval_str(*p.aval)}" for p in fn.params)
    outs = ", ".join(aval_str(*v.aval) for v in fn.outputs)
    lines = [f"func @{fn.name}({params}) -> ({outs}) {{"]
    _print_region(fn.body, name, 1, lines)
    lines.append("  return " + ", ".join(name(v) for v in fn.outputs))
    lines.append("}")
    return "\n".join(lines)
