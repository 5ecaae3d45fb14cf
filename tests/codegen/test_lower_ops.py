"""Every primitive, compiled, agrees with the reference interpreter (transform/interp.py).

The cases come from OP_DB (tests/opinfo.py): each OpSpec's samples run eagerly, forward and
backward, and every primitive call made on the way (the op itself and the ops of its VJP) is
replayed as a one-op IR function, compiled, and compared with `interp.run` — for float64 and
float32, over the samples' shapes (broadcasting and 0-d included).
"""
from __future__ import annotations

import numpy as np
import pytest
from opinfo import OP_DB

import llgrad as lg
from llgrad import codegen
import llgrad.codegen.lowerings  # noqa: F401  (registers the lowerings)
from llgrad.codegen.registry import LOWERINGS
from llgrad.runtime.prim import REGISTRY
from llgrad.runtime.tensor import Tensor
from llgrad.transform import interp
from llgrad.transform.builder import Builder

STRUCTURAL = {"const": "constants are module globals or immediates, not ops",
              "control": "region ops: fusion is inlined; cond/for/while are not lowered yet",
              "tape": "loop tapes exist only inside loops, which are not lowered yet"}
TOL = {np.dtype(np.float64): (1e-11, 1e-12), np.dtype(np.float32): (2e-5, 2e-6)}


def _record(spec, rng, dtype):
    """(prim, input arrays, params) of every primitive call of the spec's samples."""
    calls = []
    orig = Tensor.__dict__["_lg_process"].__func__

    def process(prim, args, params):
        calls.append((prim, [a._data if isinstance(a, Tensor) else np.asarray(a)
                             for a in args], dict(params)))
        return orig(prim, args, params)

    binary = Tensor.__dict__["_lg_binary"]  # (the binary ops' fast path)
    Tensor._lg_process = staticmethod(process)
    Tensor._lg_binary = staticmethod(lambda prim, x, y: process(prim, (x, y), {}))
    try:
        for sample in spec.make_samples(rng, dtype):
            args = [lg.tensor(a, requires_grad=not spec.nondiff and a.dtype.kind == "f")
                    if isinstance(a, np.ndarray) else a for a in sample.args]
            out = spec.op(*args, **sample.kwargs)
            outs = [o for o in (out if isinstance(out, tuple) else (out,))
                    if isinstance(o, Tensor) and o.requires_grad]
            if outs:
                lg.autograd.backward(outs, [lg.ones_like(o) for o in outs])
    finally:
        Tensor._lg_process, Tensor._lg_binary = staticmethod(orig), binary
    return calls


def _one_op(prim, arrays, params):
    b = Builder(prim.name, loc=None)
    with b:
        ins = [b.param((a.shape, a.dtype), f"a{i}") for i, a in enumerate(arrays)]
        out = b.bind(prim, ins, params)
        b.fn.body.results.extend(out if isinstance(out, tuple) else [out])
    return b.fn


def _cases():
    rng = np.random.default_rng(0)
    cases, seen = {}, set()
    for spec in OP_DB:
        if spec.structural:
            continue
        for dtype in (np.float64, np.float32):
            for prim, arrays, params in _record(spec, rng, dtype):
                key = (prim.name, tuple((a.shape, a.dtype.str) for a in arrays), repr(params))
                if key not in seen:
                    seen.add(key)
                    cases.setdefault(prim.name, []).append((prim, arrays, params))
    return cases


CASES = _cases()


@pytest.mark.parametrize("name", sorted(REGISTRY))
def test_primitive_compiles_like_interp(name):
    prim = REGISTRY[name]
    if prim.family in STRUCTURAL:
        pytest.skip(STRUCTURAL[prim.family])
    assert name in CASES, f"no OP_DB sample ever runs primitive {name}"
    fns = {f"c{k}": _one_op(p, arrays, params) for k, (p, arrays, params) in
           enumerate(CASES[name])}
    module = codegen.compile_functions(fns)  # one module, many entries
    for k, (p, arrays, params) in enumerate(CASES[name]):
        want = interp.run(fns[f"c{k}"], *arrays)
        got = module[f"c{k}"](*arrays)
        for g, w in zip(got, want):
            where = f"{name}{params} on {[f'{a.dtype}{list(a.shape)}' for a in arrays]}"
            assert g.dtype == w.dtype and g.shape == w.shape, where
            rtol, atol = TOL.get(w.dtype, (0, 0))
            np.testing.assert_allclose(g, w, rtol=rtol, atol=atol, err_msg=where)


def test_every_primitive_has_a_lowering_or_is_structural():
    missing = [p.name for p in REGISTRY.values()  # composites reach the IR decomposed
               if p.family not in STRUCTURAL and p not in LOWERINGS and p.decompose is None]
    assert not missing, f"primitives without a codegen lowering: {missing}"
