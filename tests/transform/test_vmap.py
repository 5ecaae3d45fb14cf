"""Batching on the IR (transform/vmap.py): every primitive call of the OpInfo table mapped
over a batch, with each operand batched or not, equals the call on each example (interpreted).
Control flow is tested through the API on the corpus (tests/e2e/test_vmap.py)."""
from __future__ import annotations

import numpy as np
import pytest
from opinfo import OP_DB

import llgrad as lg
from llgrad.runtime.tensor import Tensor
from llgrad.transform import interp
from llgrad.transform.builder import Builder
from llgrad.transform.verify import verify
from llgrad.transform.vmap import vmap_function

N = 3


def _record(spec, rng):
    """(prim, input arrays, params) of every primitive call of a spec's float64 samples."""
    calls = []
    orig = Tensor.__dict__["_lg_process"].__func__

    def process(prim, args, params):
        calls.append((prim, [a._data if isinstance(a, Tensor) else np.asarray(a)
                             for a in args], dict(params)))
        return orig(prim, args, params)

    Tensor._lg_process = staticmethod(process)
    try:
        for sample in spec.make_samples(rng, np.float64):
            args = [lg.tensor(a) if isinstance(a, np.ndarray) else a for a in sample.args]
            spec.op(*args, **sample.kwargs)
    finally:
        Tensor._lg_process = staticmethod(orig)
    return calls


def _cases():
    rng = np.random.default_rng(0)
    cases, seen = [], set()
    for spec in OP_DB:
        if spec.structural:
            continue
        for prim, arrays, params in _record(spec, rng):
            if prim.decompose is not None or prim.family in ("control", "tape", "const"):
                continue
            key = (prim.name, tuple((a.shape, a.dtype.str) for a in arrays), repr(params))
            if key not in seen:
                seen.add(key)
                cases.append((prim, arrays, params))
    return cases


CASES = _cases()


def _examples(a, rng):
    """N examples near `a`: floats scaled by factors in [0.8, 1] (inside the op's domain when
    `a` is), other arrays (indices, masks) repeated."""
    if a.dtype.kind != "f":
        return [a] * N
    return [(a * rng.uniform(0.8, 1.0, a.shape)).astype(a.dtype) for _ in range(N)]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c[0].name)
def test_batched_primitive_equals_each_example(case, rng):
    prim, arrays, params = case
    b = Builder(prim.name, loc=None)
    with b:
        ins = [b.param((a.shape, a.dtype), f"a{i}") for i, a in enumerate(arrays)]
        out = b.bind(prim, ins, params)
        b.fn.body.results = list(out) if isinstance(out, tuple) else [out]
    fn = b.fn
    examples = [_examples(a, rng) for a in arrays]
    flags = {tuple(k == j for k in range(len(arrays))) for j in range(len(arrays))}
    flags.add((True,) * len(arrays))
    for batched in sorted(flags):
        vfn, out_b = vmap_function(fn, list(batched), N)
        verify(vfn)
        args = [np.stack(e) if bt else e[0] for e, bt in zip(examples, batched)]
        got = interp.run(vfn, *args)
        want = [interp.run(fn, *[e[i] if bt else e[0] for e, bt in zip(examples, batched)])
                for i in range(N)]
        for k, (g, ob) in enumerate(zip(got, out_b)):
            w = np.stack([np.asarray(x[k]) for x in want])
            if not ob:
                g = np.broadcast_to(g, w.shape)
            np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-12, err_msg=str(batched))
