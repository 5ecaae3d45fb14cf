"""What `Differentiable.inspect()` returns: every stage of one compiled signature as text
(`Text`), with its statistics (`Stats`)."""
from __future__ import annotations

from typing import TYPE_CHECKING

from llgrad.runtime import config
from llgrad.tracer.tracing import _convertible
from llgrad.transform.printers.text import print_function

if TYPE_CHECKING:
    from llgrad.compiled import Compiled


class Text(str):
    """A stage of the pipeline as text; prints as itself."""

    def __repr__(self) -> str:
        return str(self)


class Stats(dict):
    """Op counts, memory and compile times of one compiled signature; prints as a table."""

    def __str__(self) -> str:
        width = max(len(k) for k in self) if self else 0
        return "\n".join(f"{k:<{width}}  {_fmt_stat(v)}" for k, v in self.items())

    __repr__ = __str__


def _fmt_stat(v) -> str:
    if isinstance(v, float):
        return f"{v * 1e3:.2f} ms" if v < 10 else f"{v:.3g}"
    if isinstance(v, dict):
        return ", ".join(f"{k}={w}" for k, w in v.items())
    return str(v)


class Inspection:
    """Every stage of one compiled signature, as text."""

    def __init__(self, c: Compiled):
        self._c = c

    @property
    def graph(self) -> Text:
        return Text(self._c.graph_text)

    @property
    def converted_source(self) -> Text:
        """The function after gast conversion of its control flow (what was traced)."""
        fn = self._c.trace.source_fn
        conv = _convertible(fn)
        return Text(getattr(conv, "source", f"({getattr(fn, '__name__', fn)} is traced as "
                                             f"written: nothing to convert)"))

    @property
    def forward_ir(self) -> Text:
        return Text(print_function(self._c.forward))

    @property
    def backward_ir(self) -> Text:
        if self._c.joint is None:
            return Text(f"(not differentiable: {self._c.not_differentiable})")
        return Text(print_function(self._c.joint))

    def _native_text(self, attr: str) -> Text:
        if config.disable_jit():
            return Text(f"(LLGRAD_DISABLE_JIT=1: no {attr})")
        entries = ["forward"] + (["joint"] if self._c.joint is not None else [])
        return Text("\n".join(getattr(self._c.module(e), attr) for e in entries))

    @property
    def llvm_ir(self) -> Text:
        """The LLVM IR of the forward and the forward+backward entries (compiles them)."""
        return self._native_text("llvm_ir")

    @property
    def asm(self) -> Text:
        return self._native_text("asm")

    @property
    def python_source(self) -> Text:
        from llgrad.transform.printers.python_src import to_python
        return Text(to_python(self._c.joint))

    @property
    def stats(self) -> Stats:
        """Op counts, memory and the time of each phase (the IR stages are made first, so
        their counts are there; native code is compiled on first use, not here)."""
        self._c.forward, self._c.joint  # noqa: B018  (Note [Stages on first use])
        return self._c.stats

    @property
    def path(self) -> Text:
        """`staged`, or `dynamic (why: the concretisation and its file:line)`."""
        return Text(self._c.stats.get("path", "staged"))

    def draw(self, path: str | None = None, stage: str = "backward") -> Text:
        """The IR of `stage` ("graph", "forward" or "backward") as Graphviz DOT, regions as
        clusters; also rendered to `path` (SVG/PNG by suffix) when given. See llgrad.viz."""
        from llgrad import viz
        from llgrad.transform.printers.dot import to_dot
        fns = {"graph": self._c.trace.fn, "forward": self._c.forward, "backward": self._c.joint}
        if stage not in fns:
            raise ValueError(f"stage={stage!r}: choose 'graph', 'forward' or 'backward'")
        if fns[stage] is None:
            raise self._c.not_differentiable
        text = to_dot(fns[stage])
        if path is not None:
            viz.render(text, path)
        return Text(text)

    def __repr__(self) -> str:
        return (f"<Inspection of {self._c.trace.fn.name}: {self._c.stats.get('signature')}, "
                f"{self.path}>")
