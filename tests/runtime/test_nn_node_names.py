"""The nn layers' graph nodes have PyTorch's names and edges (torch 2.13.0): one node per
layer, ConvolutionBackward0, MaxPool2DWithIndicesBackward0, NativeBatchNormBackward0, ...

Deviations, by design: an absent bias or affine weight is a constant in llgrad, which gets no
edge (PyTorch shows a None edge); CELU is an ELU node (EluBackward0, PyTorch CeluBackward0);
the recurrent layers are one node per layer and direction (LstmLayerBackward0, ...), where
PyTorch's float32 CPU LSTM is MkldnnRnnLayerBackward0 and its other RNNs are per-step ops.
"""
from __future__ import annotations

import numpy as np
import pytest

import llgrad as lg

F = lg.nn.functional

CASES = [  # (expression, PyTorch's grad_fn name, its next_functions' names)
    ("F.conv2d(x4, w4, b4, padding=1)", "ConvolutionBackward0",
     ["AccumulateGrad", "AccumulateGrad", "AccumulateGrad"]),
    ("F.conv2d(x4, w4)", "ConvolutionBackward0", ["AccumulateGrad", "AccumulateGrad"]),
    ("F.conv1d(x3, w3, b3)", "ConvolutionBackward0",
     ["AccumulateGrad", "AccumulateGrad", "AccumulateGrad"]),
    ("F.conv_transpose2d(x4, w4t)", "ConvolutionBackward0", ["AccumulateGrad", "AccumulateGrad"]),
    ("F.max_pool2d(x4, 2)", "MaxPool2DWithIndicesBackward0", ["AccumulateGrad"]),
    # (llgrad's squeeze is a ViewBackward0: PyTorch's SqueezeBackward1)
    ("F.max_pool1d(x3, 2)", "ViewBackward0", ["MaxPool2DWithIndicesBackward0"]),
    ("F.avg_pool2d(x4, 2)", "AvgPool2DBackward0", ["AccumulateGrad"]),
    ("F.adaptive_avg_pool2d(x4, 3)", "AdaptiveAvgPool2DBackward0", ["AccumulateGrad"]),
    ("F.adaptive_avg_pool2d(x4, 1)", "MeanBackward1", ["AccumulateGrad"]),
    ("F.batch_norm(x4, None, None, b3, b3, True)", "NativeBatchNormBackward0",
     ["AccumulateGrad", "AccumulateGrad", "AccumulateGrad"]),
    ("F.layer_norm(x4, (6, 6))", "NativeLayerNormBackward0", ["AccumulateGrad"]),
    ("F.group_norm(x4, 1, b3, b3)", "NativeGroupNormBackward0",
     ["AccumulateGrad", "AccumulateGrad", "AccumulateGrad"]),
    ("F.gelu(x4)", "GeluBackward0", ["AccumulateGrad"]),
    ("F.gelu(x4, approximate='tanh')", "GeluBackward0", ["AccumulateGrad"]),
    ("F.silu(x4)", "SiluBackward0", ["AccumulateGrad"]),
    ("F.elu(x4)", "EluBackward0", ["AccumulateGrad"]),
    ("F.selu(x4)", "EluBackward0", ["AccumulateGrad"]),
    ("F.softplus(x4)", "SoftplusBackward0", ["AccumulateGrad"]),
    ("F.hardtanh(x4)", "HardtanhBackward0", ["AccumulateGrad"]),
    ("F.relu6(x4)", "HardtanhBackward0", ["AccumulateGrad"]),
    ("F.leaky_relu(x4)", "LeakyReluBackward0", ["AccumulateGrad"]),
    ("F.embedding(idx, w4.reshape(-1, 3))", "EmbeddingBackward0", ["ViewBackward0"]),
    ("F.binary_cross_entropy(x4.sigmoid(), x4.detach().sigmoid())",
     "BinaryCrossEntropyBackward0", ["SigmoidBackward0", None]),
    ("F.binary_cross_entropy_with_logits(x4, x4.detach().sigmoid())",
     "BinaryCrossEntropyWithLogitsBackward0", ["AccumulateGrad", None]),
    ("F.l1_loss(x4, x4.detach() * 2)", "MeanBackward0", ["AbsBackward0"]),
    ("F.smooth_l1_loss(x4, x4.detach() * 2)", "SmoothL1LossBackward0", ["AccumulateGrad", None]),
    ("F.huber_loss(x4, x4.detach() * 2)", "HuberLossBackward0", ["AccumulateGrad", None]),
    # (the batch size divides as a constant: no edge; PyTorch: a None edge)
    ("F.kl_div(x4, x4.detach().sigmoid(), reduction='batchmean')", "DivBackward0",
     ["SumBackward0"]),
]


def _env():
    rng = np.random.default_rng(0)

    def t(*shape):
        return lg.tensor(rng.random(shape), requires_grad=True)
    return dict(F=F, x4=t(2, 3, 6, 6), w4=t(4, 3, 3, 3), b4=t(4), x3=t(2, 3, 7),
                w3=t(3, 3, 2), b3=t(3), w4t=t(3, 2, 3, 3), idx=lg.tensor([[0, 2], [3, 1]]))


@pytest.mark.parametrize("expr,name,nexts", CASES, ids=[c[0] for c in CASES])
def test_nn_grad_fn_names_match_pytorch(expr, name, nexts):
    y = eval(expr, _env())
    assert y.grad_fn.name() == name
    assert [None if n is None else n.name() for n, _ in y.grad_fn.next_functions] == nexts


def test_recurrent_layers_are_one_node_per_layer_and_direction():
    lstm = lg.nn.LSTM(3, 4, num_layers=2, bidirectional=True)
    out, (h, c) = lstm(lg.randn(5, 2, 3))
    assert out.grad_fn.name() == "CatBackward0"
    layers, todo, seen = [], [out.grad_fn], set()
    while todo:
        n = todo.pop()
        if id(n) in seen:
            continue
        seen.add(id(n))
        layers += [n.name()] if n.name() == "LstmLayerBackward0" else []
        todo += [m for m, _ in n.next_functions if m is not None]
    assert len(layers) == 4
    gru_out, _ = lg.nn.GRU(3, 4)(lg.randn(5, 2, 3))
    assert gru_out.grad_fn.name() == "GruLayerBackward0"
    rnn_out, _ = lg.nn.RNN(3, 4, nonlinearity="relu")(lg.randn(5, 2, 3))
    assert rnn_out.grad_fn.name() == "RnnLayerBackward0"
