"""Pictures of graphs: an eager tensor's autograd graph (`draw`, in the manner of torchviz's
`make_dot`) and the Graphviz rendering shared with `Inspection.draw` for the IR (`render`).

DOT text is always returned; rendering to SVG/PNG/PDF needs Graphviz's `dot` on PATH.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import warnings

import numpy as np

from llgrad.runtime.aval import aval_str

__all__ = ["draw", "render", "have_dot"]

_FORMATS = ("svg", "png", "pdf", "dot")


def _q(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def _shape(t) -> str:
    data = getattr(t, "_data", None)
    if data is None:
        data = np.asarray(t)
    return aval_str(data.shape, data.dtype)


def draw(x, path: str | None = None, format: str | None = None,  # noqa: A002
         params: dict | None = None, show_attrs: bool = False) -> str:
    """The autograd graph behind tensor(s) `x` as Graphviz DOT; rendered to `path` if given.

    Backward nodes are boxes named like `grad_fn`s (`MulBackward0`); leaves are the
    `AccumulateGrad` nodes' variables, drawn with their shapes (and names from `params`);
    the outputs `x` are drawn at the bottom with their shapes. Saved tensors are not drawn.

    Args:
        x: a Tensor, or a tuple/list of Tensors (several roots of one graph).
        path: where to render; with `dot` on PATH the picture is written there, otherwise a
            warning is issued and the DOT source is written beside it (`<path>.dot`).
        format: "svg", "png", "pdf" or "dot"; default the suffix of `path`, else "svg".
        params: optional names for leaves, e.g. `dict(model.named_parameters())`.
        show_attrs: also label each node with where in the user's source it was created.

    Returns:
        The DOT source text.

    Example:
        >>> import llgrad as lg
        >>> a = lg.tensor([1.0, 2.0], requires_grad=True)
        >>> print(draw((a * a).sum()).splitlines()[0])
        digraph autograd {
    """
    roots = list(x) if isinstance(x, (tuple, list)) else [x]
    names = {id(v): k for k, v in (params or {}).items()}
    lines = ["digraph autograd {", "  rankdir=TB;",
             '  node [shape=box, style=filled, fillcolor=lightgray, fontname="monospace", '
             'fontsize=10, height=0.2];']
    edges: list[str] = []
    ids: dict[int, str] = {}

    def node_id(obj) -> str:
        return ids.setdefault(id(obj), f"n{len(ids) + 1}")

    seen: set[int] = set()
    stack = []
    for r in roots:
        fn = getattr(r, "grad_fn", None)
        rid = f"out{len(lines)}"
        label = (names.get(id(r)) or "output") + "\n" + _shape(r)
        lines.append(f"  {rid} [label={_q(label)}, fillcolor=darkolivegreen1];")
        if fn is not None:
            edges.append(f"  {node_id(fn)} -> {rid};")
            stack.append(fn)
        elif getattr(r, "requires_grad", False):  # a leaf drawn on its own
            lines[-1] = lines[-1].replace("darkolivegreen1", "lightblue")
    while stack:
        fn = stack.pop()
        if id(fn) in seen:
            continue
        seen.add(id(fn))
        nid = node_id(fn)
        var = getattr(fn, "variable", None)
        if var is not None:  # AccumulateGrad: draw the leaf it accumulates into
            label = (names.get(id(var)) or "") + "\n" + _shape(var)
            lines.append(f"  {nid} [label={_q(label.strip())}, fillcolor=lightblue];")
        else:
            label = fn.name()
            loc = getattr(fn, "loc", None) if show_attrs else None
            if loc is not None:
                label += f"\n{os.path.basename(loc.file)}:{loc.line}"
            lines.append(f"  {nid} [label={_q(label)}];")
        for nxt, _ in getattr(fn, "next_functions", ()) or ():
            if nxt is None:
                continue
            edges.append(f"  {node_id(nxt)} -> {nid};")
            stack.append(nxt)
    text = "\n".join(lines + edges + ["}"]) + "\n"
    if path is not None:
        render(text, path, format)
    return text


def have_dot() -> bool:
    """Whether Graphviz's `dot` program is on PATH."""
    return shutil.which("dot") is not None


def render(dot_text: str, path: str, format: str | None = None) -> str:  # noqa: A002
    """Render DOT source to `path` with Graphviz (`dot -T<format>`); returns the path written.

    The format defaults to the path's suffix, else "svg"; "dot" writes the source itself.
    Without `dot` on PATH, the source is written to `<path>.dot` with a warning.
    """
    if format is None:
        suffix = os.path.splitext(path)[1].lstrip(".").lower()
        format = suffix if suffix in _FORMATS else "svg"  # noqa: A001
    if format not in _FORMATS:
        raise ValueError(f"unknown picture format {format!r}; choose from {', '.join(_FORMATS)}")
    if format == "dot":
        _write(path, dot_text.encode())
        return path
    exe = shutil.which("dot")
    if exe is None:
        out = path + ".dot"
        _write(out, dot_text.encode())
        warnings.warn(f"Graphviz's `dot` is not installed, so {path} was not rendered; the DOT "
                      f"source is in {out} (install graphviz, or render it at "
                      "https://dreampuf.github.io/GraphvizOnline)", stacklevel=3)
        return out
    done = subprocess.run([exe, f"-T{format}"], input=dot_text.encode(), capture_output=True,
                          check=False)
    if done.returncode != 0:
        raise RuntimeError(f"dot -T{format} failed: {done.stderr.decode().strip()}")
    _write(path, done.stdout)
    return path


def _write(path: str, data: bytes) -> None:
    d = os.path.dirname(os.path.abspath(path))
    os.makedirs(d, exist_ok=True)
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, path)
