"""The neural-network primitives (tests/opinfo_nn.py): `llgrad.autograd.gradcheck` and
`gradgradcheck` on each, and each eager impl against its `decompose` (what the compiler
emits, run eagerly op by op) on every call its OpSpec samples make, forward and backward.

With tests/codegen/test_lower_ops.py (compiled decomposition == interpreted decomposition)
this ties compiled code to the eager numbers.
"""
from __future__ import annotations

import importlib

import numpy as np
import pytest
import opinfo  # noqa: F401  (first: opinfo_nn is imported by it)
from opinfo_nn import NN_OPS

import llgrad as lg
from llgrad.runtime.prim import REGISTRY
from llgrad.runtime.tensor import Tensor

NAMES = sorted({s.name for s in NN_OPS})
_CONV = importlib.import_module("llgrad.runtime.ops.conv")  # (ops.conv is also a function)


def _calls(spec, dtype=np.float64):
    """(prim, input arrays, params) of every primitive call of the spec's samples."""
    calls = []
    orig = Tensor.__dict__["_lg_process"].__func__

    def process(prim, args, params):
        calls.append((prim, [a._data if isinstance(a, Tensor) else np.asarray(a) for a in args],
                      dict(params)))
        return orig(prim, args, params)
    Tensor._lg_process = staticmethod(process)
    try:
        for sample in spec.make_samples(np.random.default_rng(0), dtype):
            args = [lg.tensor(a, requires_grad=not spec.nondiff and a.dtype.kind == "f")
                    if isinstance(a, np.ndarray) else a for a in sample.args]
            out = spec.op(*args, **sample.kwargs)
            outs = [o for o in (out if isinstance(out, tuple) else (out,)) if o.requires_grad]
            if outs:
                lg.autograd.backward(outs, [lg.ones_like(o) for o in outs])
    finally:
        Tensor._lg_process = staticmethod(orig)
    return calls


@pytest.mark.parametrize("name", [n for n in NAMES if REGISTRY[n].decompose is not None])
def test_impl_agrees_with_decomposition(name):
    """(The activations have none: their scalar rule is their impl, runtime/ops/activation.py.)"""
    _check_impl_against_decomposition(name)


@pytest.mark.parametrize("name", ["conv", "conv_input_grad", "conv_weight_grad"])
def test_convolutions_image_by_image_agree_with_decomposition(name, monkeypatch):
    # Note [im2col layout]: the impls run over chunks of images; one image a chunk here
    monkeypatch.setattr(_CONV, "_CHUNK_BYTES", 1)
    _check_impl_against_decomposition(name)


def test_convolution_chunks_of_uneven_size():
    # 5 images in chunks of 2, 2 and 1 give the numbers of one chunk of 5
    conv = _CONV
    rng = np.random.default_rng(3)
    x, w = rng.standard_normal((5, 4, 6, 5)), rng.standard_normal((6, 2, 3, 2))
    g = rng.standard_normal((5, 6, 3, 4))
    p = dict(stride=(2, 1), padding=((1, 1), (0, 1)), dilation=(1, 2), groups=2)

    def run():
        return (conv.conv_p.impl(x, w, np.arange(6.0), **p),
                conv.conv_input_grad_p.impl(g, w, hw=(6, 5), **p),
                conv.conv_weight_grad_p.impl(x, g, khw=(3, 2), **p))
    whole = run()
    old = conv._CHUNK_BYTES
    try:
        conv._CHUNK_BYTES = 2 * 4 * 3 * 2 * 3 * 4 * 8  # the columns of 2 images
        assert [len(range(5)[s]) for s in conv._chunks(5, 4 * 3 * 2 * 3 * 4 * 8)] == [2, 2, 1]
        for a, b in zip(run(), whole):
            np.testing.assert_allclose(a, b, rtol=1e-13, atol=1e-13)
    finally:
        conv._CHUNK_BYTES = old


def test_convolution_of_an_empty_batch():
    # no chunk at all: the output and input gradient are empty, the weight gradient zeros
    x = lg.zeros(0, 4, 6, 5, dtype=lg.float64, requires_grad=True)
    w = lg.ones(6, 2, 3, 2, dtype=lg.float64, requires_grad=True)
    y = lg.nn.functional.conv2d(x, w, groups=2, padding=1)
    assert y.shape == (0, 6, 6, 6)
    y.sum().backward()
    assert x.grad.shape == (0, 4, 6, 5) and w.grad.tolist() == np.zeros((6, 2, 3, 2)).tolist()


def _check_impl_against_decomposition(name):
    spec = next(s for s in NN_OPS if s.name == name)
    checked = 0
    for prim, arrays, params in _calls(spec):
        if prim.name not in NAMES or prim.decompose is None:
            continue
        got = prim.impl(*arrays, **params)
        want = prim.decompose(*[Tensor._wrap(a) for a in arrays], **params)
        for g, w in zip(got if prim.multiple_results else (got,),
                        want if prim.multiple_results else (want,)):
            w = np.asarray(w.numpy() if isinstance(w, Tensor) else w)  # (integer ops: numpy)
            assert np.asarray(g).shape == w.shape and np.asarray(g).dtype == w.dtype
            np.testing.assert_allclose(g, w, rtol=1e-11, atol=1e-12,
                                       err_msg=f"{prim.name}{params}")
        checked += prim.name == name
    assert checked, f"no call of {name} recorded"


def _gradcheck_inputs(spec):
    sample = spec.make_samples(np.random.default_rng(1), np.float64)[0]
    wrt = spec.wrt if spec.wrt is not None else tuple(
        i for i, a in enumerate(sample.args) if isinstance(a, np.ndarray) and a.dtype.kind == "f")
    args = [lg.tensor(a, requires_grad=i in wrt) if isinstance(a, np.ndarray) else a
            for i, a in enumerate(sample.args)]
    return sample, args


@pytest.mark.parametrize("name", [n for n in NAMES if n != "max_pool2d_indices"])
def test_gradcheck_and_gradgradcheck(name):
    spec = next(s for s in NN_OPS if s.name == name)
    sample, args = _gradcheck_inputs(spec)

    def f(*xs):
        out = spec.op(*xs, **sample.kwargs)
        return tuple(o for o in out) if isinstance(out, tuple) else out
    assert lg.autograd.gradcheck(f, args, eps=1e-6, atol=1e-6, rtol=1e-5)
    assert lg.autograd.gradgradcheck(f, args, eps=1e-6, atol=1e-5, rtol=1e-4)


def test_every_nn_primitive_is_covered():
    new = {"conv", "conv_input_grad", "conv_weight_grad", "max_pool2d", "max_pool2d_indices",
           "max_pool2d_backward", "avg_pool2d", "avg_pool2d_backward", "adaptive_avg_pool2d",
           "batch_norm", "layer_norm", "group_norm", "gelu", "silu", "elu", "softplus",
           "hardtanh", "leaky_relu", "embedding", "rnn_layer", "lstm_layer", "gru_layer",
           "binary_cross_entropy", "binary_cross_entropy_with_logits", "huber_loss",
           "smooth_l1_loss"}
    assert new <= set(REGISTRY) and new == set(NAMES)


@pytest.mark.parametrize("layer", ["lstm", "gru", "rnn"])
def test_recurrent_backward_on_numpy_equals_backward_on_ops(layer):
    """backward() runs a layer's sweep on ndarrays, create_graph=True on ops (Note
    [Recurrences run on numpy or on ops]): the same gradients."""
    module = {"lstm": lg.nn.LSTM, "gru": lg.nn.GRU, "rnn": lg.nn.RNN}[layer](3, 4, 2).double()
    x = lg.tensor(np.random.default_rng(2).standard_normal((6, 2, 3)), requires_grad=True)
    params = [x] + list(module.parameters())
    out = module(x)[0]
    plain = lg.autograd.grad(out.sum(), params, retain_graph=True)
    graph = lg.autograd.grad(out.sum(), params, create_graph=True)
    assert all(g.grad_fn is not None for g in graph)
    for a, b in zip(plain, graph):
        np.testing.assert_allclose(a.numpy(), b.detach().numpy(), rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_lstm_forward_in_place_equals_the_shared_formulas(dtype):
    # Note [Recurrences run on numpy or on ops]: the LSTM's eager forward computes
    # _lstm_forward's formulas into its results; bit for bit the same numbers
    rnn = importlib.import_module("llgrad.runtime.ops.rnn")
    rng = np.random.default_rng(5)
    t, n, h = 6, 3, 4
    gx = (rng.standard_normal((t, n, 4 * h)) * 3).astype(dtype)
    gx[2, 0, :h] = -200.0  # a sigmoid whose exp overflows to inf: 0, exactly, no warning
    h0, c0 = rng.standard_normal((n, h)).astype(dtype), rng.standard_normal((n, h)).astype(dtype)
    w = rng.standard_normal((4 * h, h)).astype(dtype)
    with np.errstate(all="raise"):
        got = rnn.lstm_layer_p.impl(gx, h0, c0, w)
    with np.errstate(over="ignore"):
        want = rnn._lstm_forward(rnn.NUMPY, gx, h0, c0, w)
    for a, b in zip(got, want):
        assert a.dtype == b.dtype == dtype and a.shape == b.shape
        np.testing.assert_array_equal(a, b)
