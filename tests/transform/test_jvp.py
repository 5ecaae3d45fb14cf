"""Forward mode on the IR (transform/jvp.py): every primitive's tangent rule against its VJP
(the OpInfo table), and the control-flow builders' functions against reverse mode and finite
differences, forward over reverse (tapes) included, interpreted and native."""
from __future__ import annotations

import numpy as np
import pytest
from opinfo import OP_DB

import llgrad as lg
from llgrad.runtime.tensor import Tensor
from llgrad.transform import ad, control, interp
from llgrad.transform.builder import Builder
from llgrad.transform.jvp import jvp_function
from llgrad.transform.passes.pipeline import optimize
from llgrad.transform.verify import verify
from cf_builders import cond_in_loop, loop_in_cond, nested, recurrence, rnn


def _record(spec, rng):
    """(prim, input arrays, params) of every differentiable primitive call of a spec's
    float64 samples, forward and backward (the VJP rules' own primitives included)."""
    calls = []
    orig = Tensor.__dict__["_lg_process"].__func__

    def process(prim, args, params):
        if not prim.nondiff:
            calls.append((prim, [a._data if isinstance(a, Tensor) else np.asarray(a)
                                 for a in args], dict(params)))
        return orig(prim, args, params)

    Tensor._lg_process = staticmethod(process)
    try:
        for sample in spec.make_samples(rng, np.float64):
            args = [lg.tensor(a, requires_grad=a.dtype.kind == "f")
                    if isinstance(a, np.ndarray) else a for a in sample.args]
            out = spec.op(*args, **sample.kwargs)
            outs = [o for o in (out if isinstance(out, tuple) else (out,))
                    if isinstance(o, Tensor) and o.requires_grad]
            if outs:
                lg.autograd.backward(outs, [lg.ones_like(o) for o in outs])
    finally:
        Tensor._lg_process = staticmethod(orig)
    return calls


def _cases():
    rng = np.random.default_rng(0)
    cases, seen = [], set()
    for spec in OP_DB:
        if spec.structural or spec.nondiff:
            continue
        for prim, arrays, params in _record(spec, rng):
            key = (prim.name, tuple((a.shape, a.dtype.str) for a in arrays), repr(params))
            if key not in seen and any(a.dtype.kind == "f" for a in arrays):
                seen.add(key)
                cases.append((prim, arrays, params))
    return cases


CASES = _cases()


@pytest.mark.parametrize("case", CASES, ids=lambda c: c[0].name)
def test_tangent_rule_agrees_with_vjp(case, rng):
    """<J t, c> == <t, J^T c> for random t and c: forward mode (from the declaration's
    elementwise derivative, `linear` flag or transposed VJP) against reverse mode."""
    prim, arrays, params = case
    b = Builder(prim.name, loc=None)
    with b:
        ins = [b.param((a.shape, a.dtype), f"a{i}") for i, a in enumerate(arrays)]
        out = b.bind(prim, ins, params)
        outs = list(out) if isinstance(out, tuple) else [out]
        b.fn.body.results.extend(outs)
    fn = b.fn
    wrt = [i for i, a in enumerate(arrays) if a.dtype.kind == "f"]
    floats = [k for k, o in enumerate(fn.outputs) if o.aval.dtype.kind == "f"]
    ts = [rng.normal(size=arrays[i].shape).astype(arrays[i].dtype) for i in wrt]
    if not floats:  # an integer result (astype to int): its tangent is zero
        got = interp.run(verify(jvp_function(fn, wrt)), *arrays, *ts)[len(outs):]
        assert all(not np.any(g) for g in got)
        return
    cs = [rng.normal(size=fn.outputs[k].aval.shape) for k in floats]
    # reverse: the gradient of sum_k <out_k, c_k>
    r = Builder("rev", loc=None)
    with r:
        ps = [r.param((a.shape, a.dtype)) for a in arrays]
        o = r.bind(prim, ps, params)
        o = list(o) if isinstance(o, tuple) else [o]
        total = sum(np.sum(o[k] * c) for k, c in zip(floats, cs))
        r.fn.body.results = [r.lift(total)]
    try:
        grads = interp.run(ad.grad_function(r.fn, wrt), *arrays)[1:]
    except lg.errors.UnsupportedError:  # a derivative the rules refuse: forward mode too
        with pytest.raises(lg.errors.UnsupportedError):
            jvp_function(fn, wrt)
        return
    backward = sum(float(np.sum(g * t)) for g, t in zip(grads, ts))
    got = interp.run(verify(jvp_function(fn, wrt)), *arrays, *ts)[len(outs):]
    forward = sum(float(np.sum(got[k] * c)) for k, c in zip(floats, cs))
    single = any(v.aval.dtype == np.float32 for v in fn.outputs + fn.params)
    tol = 1e-5 if single else 1e-9
    assert forward == pytest.approx(backward, rel=tol, abs=tol)


# ---- control flow: the builders of tests/cf_builders.py -------------------------------------
def _build(f, *args):
    b = Builder(f.__name__, loc=None)
    with b:
        ps = [b.param((np.shape(a), np.asarray(a).dtype), f"a{k}") for k, a in enumerate(args)]
        out = f(*ps)
        b.fn.body.results = [b.lift(out[0] if isinstance(out, tuple) else out)]
    return b.fn


def while_grow(x):
    s, n = control.while_loop(lambda s, n: s < 10.0, lambda s, n: (s * 1.5 + np.sum(x), n + 1),
                              np.sum(x * x) + 0.5, np.int64(0))
    return s * np.sum(np.sin(x))


R = np.random.default_rng(3)
FLOWS = {
    "recurrence": (recurrence, [R.normal(size=6)]),
    "nested": (nested, [R.normal(size=4), R.normal(size=4)]),
    "cond_in_loop": (cond_in_loop, [R.normal(size=5)]),
    "rnn": (rnn, [R.normal(size=(3, 3)) * 0.5, R.normal(size=(4, 3))]),
    "loop_in_cond+": (loop_in_cond, [np.abs(R.normal(size=4)) + 0.1]),
    "loop_in_cond-": (loop_in_cond, [-np.abs(R.normal(size=4)) - 0.1]),
    "while_grow": (while_grow, [np.abs(R.normal(size=3)) * 0.3 + 0.1]),
}


def _fd(fn, args, k, t, out=0, eps=1e-6):
    a1, a2 = list(args), list(args)
    a1[k], a2[k] = args[k] + eps * t, args[k] - eps * t
    return (interp.run(fn, *a1)[out] - interp.run(fn, *a2)[out]) / (2 * eps)


@pytest.mark.parametrize("name", sorted(FLOWS))
def test_forward_mode_through_control_flow(name, rng):
    """Tangents carried with the loop state: equal to reverse mode and to finite
    differences, and native code equals the interpreter."""
    from llgrad.codegen import compile_functions
    f, args = FLOWS[name]
    fn = optimize(_build(f, *args), fuse=False)
    grads = interp.run(ad.grad_function(fn, list(range(len(args)))), *args)[1:]
    for k in range(len(args)):
        t = rng.normal(size=np.shape(args[k]))
        jf = verify(jvp_function(fn, [k]))
        tangent = interp.run(jf, *args, t)[1]
        np.testing.assert_allclose(tangent, np.sum(grads[k] * t), rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(tangent, _fd(fn, args, k, t), rtol=1e-6, atol=1e-8)
    native = compile_functions({"j": optimize(jf)})["j"](*args, t)
    np.testing.assert_allclose(native[1], tangent, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("name", sorted(FLOWS))
def test_forward_over_reverse_through_tapes(name, rng):
    """The JVP of a joint function (its reverse sweep reads tapes) is the Hessian-vector
    product: equal to finite differences of the gradient, natively too."""
    from llgrad.codegen import compile_functions
    f, args = FLOWS[name]
    fn = optimize(_build(f, *args), fuse=False)
    joint = optimize(ad.grad_function(fn, [0]), fuse=False)
    if name in ("recurrence", "nested", "rnn", "cond_in_loop"):
        assert any(op.name == "tape_get" for op in joint.walk())
    t = rng.normal(size=np.shape(args[0]))
    hv = interp.run(verify(jvp_function(joint, [0])), *args, t)[3]
    np.testing.assert_allclose(hv, _fd(joint, args, 0, t, out=1), rtol=1e-5, atol=1e-7)
    native = compile_functions({"h": optimize(jvp_function(joint, [0]))})["h"](*args, t)
    np.testing.assert_allclose(native[3], hv, rtol=1e-10, atol=1e-12)


def test_custom_vjp_is_refused_in_forward_mode():
    @lg.custom_vjp
    def f(x):
        return np.sin(x)

    f.defvjp(lambda x: (np.sin(x), x), lambda x, g: (g * np.cos(x),))

    def g(x):
        return np.sum(f(x))
    with pytest.raises(lg.errors.UnsupportedError, match="custom reverse-mode rule"):
        lg.jvp(g, (np.ones(3),), (np.ones(3),))
