"""The registry refuses anything less than a complete primitive (STYLE.md, "The one op
registry"): impl, shape rule, vjp-or-nondiff, an OpSpec in tests/opinfo.py, and a shape rule
that agrees with impl on every sample input the OpSpec produces."""
from __future__ import annotations

import numpy as np
import pytest
from opinfo import OP_DB, OPS

import llgrad as lg
from llgrad.runtime.aval import Aval
from llgrad.runtime.prim import REGISTRY, Primitive
from llgrad.runtime.tensor import Tensor

ARRAY_PRIMS = [p for p in REGISTRY.values() if p.family not in ("control",)]


def test_every_primitive_has_an_opspec():
    missing = sorted(set(REGISTRY) - set(OPS))
    assert not missing, f"primitives without an OpSpec in tests/opinfo.py: {missing}"
    stale = sorted(set(OPS) - set(REGISTRY))
    assert not stale, f"OpSpecs for primitives that do not exist: {stale}"


@pytest.mark.parametrize("prim", list(REGISTRY.values()), ids=lambda p: p.name)
def test_primitive_is_complete(prim: Primitive):
    assert callable(prim.impl), "no impl"
    if prim.family != "control":  # regions: shapes come from the bodies (transform/verify.py)
        assert callable(prim.shape), "no shape rule"
    if prim.nondiff:
        assert prim.vjp is None or prim.vjp == (), "nondiff primitive with vjp rules"
    else:
        assert prim.vjp is not None, "no vjp rule and not nondiff"
        if isinstance(prim.vjp, tuple):
            assert any(r is not None for r in prim.vjp)
    names = [prim.node_name] if isinstance(prim.node_name, str) else \
        list(prim.node_name.values()) if isinstance(prim.node_name, dict) else [  # overloads
            prim.node_name(out, axes=(0,), keepdims=k)  # per call: reductions
            for out in ((), (3,)) for k in (False, True)]
    for name in names:
        assert name.endswith(("Backward0", "Backward1", "Backward2")), name
    # And a codegen lowering: elementwise prims need `prim.scalar` (one generic lowering serves
    # them), the rest a `@lowers`/`@view` entry in codegen/lowerings/<family>.py, unless they are
    # structural (IR literals, regions, loop tapes). tests/codegen/test_lower_ops.py checks each
    # lowering against the interpreter on the OpSpec's samples.
    if prim.family == "elementwise":
        assert prim.scalar is not None, "elementwise primitive without a scalar rule"
    if prim.family not in ("const", "control", "tape") and prim.decompose is None:
        import llgrad.codegen.lowerings  # noqa: F401  (registers the lowerings)
        from llgrad.codegen.registry import LOWERINGS
        assert prim in LOWERINGS, f"no codegen lowering for {prim.name} (codegen/lowerings/)"


class _Recorder:
    """Records every (primitive, input arrays, params, outputs) the eager interpretation runs."""

    def __init__(self):
        self.calls = []

    def __enter__(self):
        self._orig = Tensor.__dict__["_lg_process"]
        self._orig_binary = Tensor.__dict__["_lg_binary"]  # (the binary ops' fast path)
        orig = self._orig.__func__
        calls = self.calls

        def process(prim, args, params):
            out = orig(prim, args, params)
            arrays = [a._data if isinstance(a, Tensor) else np.asarray(a) for a in args]
            outs = out if isinstance(out, tuple) else (out,)
            calls.append((prim, arrays, params, [o._data for o in outs]))
            return out
        Tensor._lg_process = staticmethod(process)
        Tensor._lg_binary = staticmethod(lambda prim, x, y: process(prim, (x, y), {}))
        return self

    def __exit__(self, *exc):
        Tensor._lg_process, Tensor._lg_binary = self._orig, self._orig_binary


def _to_tensor(a, requires_grad):
    if isinstance(a, np.ndarray):
        return lg.tensor(a, requires_grad=requires_grad and a.dtype.kind == "f")
    return a


SPECS = [s for s in OP_DB if not s.structural]


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.name)
@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
def test_shape_rule_agrees_with_impl(spec, dtype, rng):
    """Run the op (forward and backward) on the samples; every primitive call it makes must have
    a shape rule giving exactly the shape and dtype impl produced. The spec's own primitive must
    be among them."""
    seen = False
    for sample in spec.make_samples(rng, dtype):
        with _Recorder() as rec:
            args = [_to_tensor(a, not spec.nondiff) for a in sample.args]
            out = spec.op(*args, **sample.kwargs)
            outs = [o for o in (out if isinstance(out, tuple) else (out,))
                    if isinstance(o, Tensor) and o.requires_grad]
            if outs:
                lg.autograd.backward(outs, [lg.ones_like(o) for o in outs])
        for prim, arrays, params, results in rec.calls:
            seen = seen or prim.name == spec.name
            avals = [Aval(a.shape, a.dtype) for a in arrays]
            expect = prim.shape(*avals, **params)
            expect = expect if isinstance(expect, tuple) and prim.multiple_results else (expect,)
            got = tuple(Aval(r.shape, r.dtype) for r in results)
            assert tuple(Aval(tuple(e.shape), np.dtype(e.dtype)) for e in expect) == got, (
                f"{prim.name}{params} on {[str(a) for a in avals]}: shape rule says "
                f"{[str(e) for e in expect]}, impl gave {[str(g) for g in got]} ({sample!r})")
    assert seen, f"OpSpec {spec.name}'s samples never ran primitive {spec.name}"


def test_constant_shape_rule():
    p = REGISTRY["constant"]
    v = np.ones((2, 3), np.float32)
    assert p.shape(value=v) == Aval((2, 3), np.dtype(np.float32))
    assert p.impl(value=v) is v


def test_primitive_declared_twice_is_refused():
    from llgrad.runtime.prim import register
    with pytest.raises(ValueError, match="declared twice"):
        register(Primitive("add", "elementwise", np.add, lambda *a: a[0], nondiff=True))


def test_primitive_needs_vjp_or_nondiff():
    with pytest.raises(ValueError, match="give vjp rules or nondiff=True"):
        Primitive("nothing", "elementwise", np.add, lambda *a: a[0])
