"""The dynamic path: functions that concretise traced values (`float(t)`, `t.item()`,
`bool(t)` outside converted code, `int(t)` as a shape, indexing a Python container).

Each call is traced eagerly with concrete values: every op is evaluated with numpy as it is
recorded, so concretisation simply reads the value. The converted function runs, with the
stager in its eager mode: control flow runs as Python (deciding concretises the condition),
while element writes `y[i] = v` into numpy buffers stay functional updates, so their
gradient is not lost to numpy's in-place float conversion.
The result is the dynamic graph of this call; the path it took is implied by the graph
itself, so graphs are keyed by their structural fingerprint and each distinct graph's
backward is compiled once (a bounded cache). Concretised values are constants from then on:
no gradient flows through them, as in PyTorch.
"""
from __future__ import annotations

import numpy as np

from llgrad.runtime.errors import ConcretizationError, IndexingError, user_loc
from llgrad.tracer import signature as sig
from llgrad.tracer.tracing import Arguments, Trace, _convertible, _flatten_outputs, call_with
from llgrad.tracer.aliasing import check_unaliased
from llgrad.tracer.custom import trace_custom
from llgrad.tracer.library import library_number
from llgrad.runtime.ops.control import custom_vjp_p
from llgrad.transform.builder import Builder
from llgrad.transform.control import custom_parts


class EagerBuilder(Builder):
    """A Builder that also evaluates every op as it is emitted (values in `env`)."""

    eager = True  # the stager runs control flow as Python (See IRStager.eager)

    def __init__(self, name: str):
        super().__init__(name)
        self.env: dict[int, np.ndarray] = {}
        self.concrete = lambda v: self.env[v.id]
        self.on_concretize = self._concretize
        self.on_inplace, self.on_custom_vjp = check_unaliased, trace_custom
        self.guards: list = []
        self.cuts: list = []  # (what, value, loc): See Note [Gradients cut by a constant]

    def _concretize(self, v, what: str):
        if v.id not in self.env:  # computed in a custom rule's backward (tracer/custom.py)
            raise ConcretizationError(
                f"{what} of a value computed in the backward of a custom derivative rule: the "
                f"backward is traced once, before any cotangent is known", loc=user_loc(),
                fix="keep the backward an array computation (np.where instead of if)")
        if what.startswith("conversion to a numpy array"):
            raise ConcretizationError(
                "a traced value was passed to code that converts it to a numpy array (a "
                "library llgrad does not know, or a Python list of traced values held in a "
                "variable); its gradient would be lost", loc=user_loc(),
                fix="build a list of traced values as an array first, np.array([...]) or "
                "np.stack(...); use numpy functions llgrad supports; or make the conversion "
                "explicit with float(x) / x.item() if it is meant as a constant")
        if what in ("float()", ".item()", ".tolist()") and v.aval.dtype.kind == "f":
            library_number(what)  # Note [Unsupported library functions]
        value = self.env[v.id]
        self.guards.append((what, value))
        if what in _NUMBERS:  # (a decision, bool(), cuts no gradient: the value's is 0)
            self.cuts.append((what, v, user_loc() if len(self.cuts) < _CUT_LOCS else None))
        return value

    def emit(self, prim, inputs, params, out_avals, regions=(), loc=None) -> list:
        outs = super().emit(prim, inputs, params, out_avals, regions, loc)
        if len(self.regions) > 1:  # a custom rule's backward: traced, run later by AD
            return outs
        if prim is custom_vjp_p:
            for v, x in zip(outs, custom_parts(outs[0].op)[2]):
                self.env[v.id] = self.env[x.id]
            return outs
        if regions:
            raise ConcretizationError("structured control flow inside the dynamic path")
        try:
            res = prim.impl(*[self.env[v.id] for v in inputs], **params)
        except IndexError as e:  # at the user's line, as the staged path reports it
            if prim.family != "index":
                raise
            raise IndexingError.out_of_bounds(str(e), outs[0].op.loc) from None
        res = res if prim.multiple_results else (res,)
        for v, r in zip(outs, res):
            self.env[v.id] = np.asarray(r)
        return outs


def trace_dynamic(fn, args: tuple, kwargs: dict) -> tuple[Trace, list]:
    """Trace one call eagerly; returns the Trace and the concrete output values."""
    a = Arguments(fn, args, kwargs)
    b = EagerBuilder(getattr(fn, "__name__", "f"))
    with b:
        params = a.params(b)
        for p, arr in zip(params, a.leaves):
            b.env[p.id] = arr
        traced = sig.unflatten(a.struct, params)
        out = call_with(_convertible(fn), a.names, traced)
        a.check_unchanged(traced, params, fn, statics=False)
        out_leaves, out_struct = _flatten_outputs(out, b, fn)
        b.fn.body.results = out_leaves
    return Trace(b.fn, a.struct, out_struct, a.names, a.owner, fn, cuts=b.cuts), \
        [b.env[v.id] for v in out_leaves]


# Note [Gradients cut by a constant]
# On the dynamic path a concretised number is a constant (PyTorch's float(t)): no gradient
# flows through it. When the value's only dependence on the differentiated inputs goes
# through such numbers (`return float(np.sum(x ** 2))`, `xs = x.tolist(); sum(v * v for v
# in xs)`), the gradient would be all zeros though the value depends on x: PyTorch refuses
# it ("element 0 of tensors does not require grad"), JAX refuses the float(). So grad()
# refuses it too, naming the first concretisation of a value that depends on an input;
# where another path still carries a gradient, the cut path contributes nothing, as in
# PyTorch (the dynamic path's warning says so). A value that does not depend on the inputs
# at all (`return 3.0`) keeps its zero gradient, as in JAX, and so does one that depends on
# them only through decisions (`1.0 if x[0] > 0 else 0.0`: bool(), an index): piecewise
# constant, its derivative is 0 wherever it exists.
_CUT_LOCS = 32  # concretisations whose line is kept (finding it walks the stack)
_NUMBERS = frozenset({"float()", "int()", ".item()", ".tolist()"})  # values, not decisions


def cut_gradient(tr: Trace, wrt_leaves: list) -> tuple | None:
    """(what, loc) of the first concretisation of a value depending on a differentiated input
    when the first output depends on none of them (Note [Gradients cut by a constant])."""
    if not tr.cuts or not wrt_leaves or not tr.fn.outputs:
        return None
    live = {tr.fn.params[i].id for i in wrt_leaves}
    for op in tr.fn.walk():
        if any(v.id in live for v in op.inputs):
            live.update(v.id for v in op.outputs)
    if tr.fn.outputs[0].id in live:
        return None
    return next(((what, loc) for what, v, loc in tr.cuts if v.id in live), None)
