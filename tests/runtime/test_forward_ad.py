"""Eager forward mode (runtime/autograd/forward_ad.py): dual tensors against reverse mode on
the OpInfo table (<J t, c> == <t, J^T c>), against the compiled `llgrad.jvp`, through
`autograd.functional.jvp`; and its refusals."""
from __future__ import annotations

import numpy as np
import pytest
from opinfo import OP_DB

import llgrad
import llgrad as lg
import llgrad.autograd.forward_ad as fwAD
from llgrad.runtime.tensor import Tensor

SPECS = [s for s in OP_DB if not s.structural and not s.nondiff]


def _plain(a):
    return lg.tensor(a) if isinstance(a, np.ndarray) else a


def _float_args(sample, spec):
    """The arguments to differentiate: the spec's `wrt` (batch_norm's running statistics are
    state updated in place, not inputs), else every floating array."""
    return [i for i, a in enumerate(sample.args)
            if isinstance(a, np.ndarray) and a.dtype.kind == "f"
            and (spec.wrt is None or i in spec.wrt)]


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.name)
def test_dual_tensors_agree_with_reverse_mode(spec, rng):
    for sample in spec.make_samples(rng, np.float64):
        wrt = _float_args(sample, spec)
        if not wrt:
            continue
        ts = {i: rng.normal(size=sample.args[i].shape) for i in wrt}
        # reverse: <t, J^T c>
        args = [lg.tensor(a, requires_grad=i in wrt) if isinstance(a, np.ndarray) else a
                for i, a in enumerate(sample.args)]
        try:
            out = spec.op(*args, **sample.kwargs)
        except lg.errors.UnsupportedError:
            continue
        outs = [o for o in (out if isinstance(out, tuple) else (out,))
                if isinstance(o, Tensor) and o.dtype.is_floating_point]
        cs = [rng.normal(size=o.shape) for o in outs]
        if not any(o.requires_grad for o in outs):  # no derivative (detached, to int, ...)
            with fwAD.dual_level():
                out = spec.op(*[fwAD.make_dual(lg.tensor(a), lg.tensor(ts[i])) if i in wrt
                                else _plain(a) for i, a in enumerate(sample.args)], **sample.kwargs)
                assert all(fwAD.unpack_dual(o).tangent is None
                           for o in (out if isinstance(out, tuple) else (out,)))
            continue
        total = sum((o * lg.tensor(c)).sum() for o, c in zip(outs, cs))
        try:
            grads = lg.autograd.grad([total], [args[i] for i in wrt], allow_unused=True)
        except lg.errors.UnsupportedError:  # refused in reverse: refused forward too
            with pytest.raises(lg.errors.UnsupportedError), fwAD.dual_level():
                spec.op(*[fwAD.make_dual(lg.tensor(a), lg.tensor(ts[i])) if i in wrt else _plain(a)
                          for i, a in enumerate(sample.args)], **sample.kwargs)
            continue
        backward = sum(float(np.sum(g.numpy() * ts[i])) for g, i in zip(grads, wrt)
                       if g is not None)
        with fwAD.dual_level():
            duals = [fwAD.make_dual(lg.tensor(a), lg.tensor(ts[i])) if i in wrt else _plain(a)
                     for i, a in enumerate(sample.args)]
            out = spec.op(*duals, **sample.kwargs)
            outs = [o for o in (out if isinstance(out, tuple) else (out,))
                    if isinstance(o, Tensor) and o.dtype.is_floating_point]
            tangents = [fwAD.unpack_dual(o).tangent for o in outs]
        forward = sum(float(np.sum(t.numpy() * c)) for t, c in zip(tangents, cs)
                      if t is not None)
        tol = 1e-5 if any(o.dtype == lg.float32 for o in outs) else 1e-8
        assert forward == pytest.approx(backward, rel=tol, abs=tol), sample


def f_mix(x, w):
    h = np.tanh(w @ x) * np.exp(-x[:3] ** 2)
    return np.sum(np.maximum(h, 0.1) * np.log1p(x[1:4] ** 2)) + np.max(x)


def test_dual_tensors_equal_compiled_jvp(rng):
    x, w = rng.normal(size=4), rng.normal(size=(3, 4))
    t = rng.normal(size=4)
    _, compiled = llgrad.jvp(f_mix, (x, w), (t, np.zeros_like(w)))
    with fwAD.dual_level():
        y = f_mix(fwAD.make_dual(lg.tensor(x), lg.tensor(t)), lg.tensor(w))
        primal, tangent = fwAD.unpack_dual(y)
    np.testing.assert_allclose(primal.numpy(), f_mix(x, w), rtol=1e-12)
    np.testing.assert_allclose(tangent.numpy(), compiled, rtol=1e-10, atol=1e-12)
    assert fwAD.unpack_dual(y).tangent is None  # the level is closed


def test_functional_jvp_is_forward_mode(rng):
    x, v = rng.normal(size=4), rng.normal(size=4)
    out, t = lg.autograd.functional.jvp(lambda a: lg.sin(a) * a, lg.tensor(x), lg.tensor(v))
    np.testing.assert_allclose(t.numpy(), (np.cos(x) * x + np.sin(x)) * v, rtol=1e-12)
    np.testing.assert_allclose(out.numpy(), np.sin(x) * x, rtol=1e-12)


def test_forward_ad_refusals():
    with pytest.raises(lg.errors.AutogradError, match="no forward AD level is open"):
        fwAD.make_dual(lg.ones(2), lg.ones(2))
    with fwAD.dual_level():
        with pytest.raises(lg.errors.ShapeError, match="tangent's shape"):
            fwAD.make_dual(lg.ones(2), lg.ones(3))
        d = fwAD.make_dual(lg.ones(2), lg.ones(2))
        with pytest.raises(lg.errors.UnsupportedError, match="in-place"):
            d.mul_(2.0)

        class Exp(lg.autograd.Function):
            @staticmethod
            def forward(ctx, i):
                return i.exp()

            @staticmethod
            def backward(ctx, g):
                return g

        with pytest.raises(lg.errors.UnsupportedError, match="no forward-mode derivative"):
            Exp.apply(d)


def test_compiled_function_on_dual_tensors(rng):
    """A compiled function meets dual tensors through its compiled forward mode."""
    f = llgrad.differentiate(f_mix)
    x, w, t = rng.normal(size=4), rng.normal(size=(3, 4)), rng.normal(size=4)
    with fwAD.dual_level():
        y = f(fwAD.make_dual(lg.tensor(x), lg.tensor(t)), lg.tensor(w))
        tangent = fwAD.unpack_dual(y).tangent
    np.testing.assert_allclose(tangent.numpy(), llgrad.jvp(f_mix, (x, w), (t, 0 * w))[1],
                               rtol=1e-12)
