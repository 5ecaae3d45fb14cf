"""The IR as a Graphviz DOT graph: params, ops and outputs as nodes, value flow as edges
(labelled with the value's type), each region a cluster inside its op's cluster."""
from __future__ import annotations

from llgrad.runtime.aval import aval_str
from llgrad.transform import ir
from llgrad.transform.printers.text import Namer, _param_str


def _q(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def to_dot(fn: ir.Function) -> str:
    """Graphviz source for `fn` (`dot -Tsvg`); one node per op, clusters for regions.

    Example:
        >>> print(to_dot(fn))  # doctest: +SKIP
    """
    name = Namer()
    lines = [f"digraph {_q(fn.name)} {{", "  rankdir=TB;",
             '  node [shape=box, fontname="monospace", fontsize=10];']
    producer: dict[int, str] = {}
    edges: list[str] = []
    counter = [0]

    def node_id() -> str:
        counter[0] += 1
        return f"n{counter[0]}"

    def value_node(v, pad, shape="ellipse"):
        nid = node_id()
        lines.append(f"{pad}{nid} [label={_q(name(v) + ': ' + aval_str(*v.aval))}, "
                     f"shape={shape}];")
        producer[v.id] = nid
        return nid

    def region(r: ir.Region, pad: str):
        for p in r.params:
            value_node(p, pad)
        for op in r.ops:
            nid = node_id()
            params = ", ".join(f"{k}={_param_str(v)}" for k, v in op.params.items())
            label = op.name + (f"\n{{{params}}}" if params else "") + "\n" + ", ".join(
                name(o) for o in op.outputs)
            if op.regions:
                lines.append(f"{pad}subgraph cluster_{nid} {{")
                lines.append(f"{pad}  label={_q(op.name)}; style=rounded;")
                lines.append(f"{pad}  {nid} [label={_q(label)}, shape=box, style=bold];")
                for k, r2 in enumerate(op.regions):
                    lines.append(f"{pad}  subgraph cluster_{nid}_{k} {{")
                    lines.append(f"{pad}    label={_q(f'region {k}')}; style=dashed;")
                    region(r2, pad + "    ")
                    ynid = node_id()
                    lines.append(f"{pad}    {ynid} [label=\"yield\", shape=plain];")
                    for v in r2.results:
                        edges.append(f"  {producer[v.id]} -> {ynid};")
                    edges.append(f"  {ynid} -> {nid} [style=dotted];")
                    lines.append(f"{pad}  }}")
                lines.append(f"{pad}}}")
            else:
                lines.append(f"{pad}{nid} [label={_q(label)}];")
            for v in op.inputs:
                if v.id in producer:
                    edges.append(f"  {producer[v.id]} -> {nid} "
                                 f"[label={_q(aval_str(*v.aval))}];")
            for o in op.outputs:
                producer[o.id] = nid

    region(fn.body, "  ")
    out = node_id()
    lines.append(f'  {out} [label="return", shape=doublecircle];')
    for v in fn.outputs:
        edges.append(f"  {producer[v.id]} -> {out};")
    return "\n".join(lines + edges + ["}"]) + "\n"
