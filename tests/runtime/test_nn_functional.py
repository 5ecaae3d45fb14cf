"""nn.functional losses and layers against pinned PyTorch 2.13 values (float64), their
grad_fn names, argument errors, and the behaviours PyTorch documents (embedding's
padding_idx, one_hot, normalize, batch_norm's running statistics)."""
from __future__ import annotations

import numpy as np
import pytest

import llgrad as lg
from llgrad import nn

F = nn.functional


def det(shape, k, phase, scale=1.0):
    n = int(np.prod(shape)) if shape else 1
    return (np.sin(np.arange(n) * k + phase) * scale).reshape(shape)


X = det((4, 5), 0.37, 0.1) * 2
T = (det((4, 5), 0.29, 0.7) + 1) / 2
ENV = {"x": X, "p": 1 / (1 + np.exp(-X)), "t": T, "w5": det((5,), 0.5, 1.0) ** 2 + 0.5,
       "idx": np.array([1, 0, 4, 2]), "logp": X - np.log(np.exp(X).sum(1, keepdims=True)),
       "logt": np.log(T), "tsoft": T / T.sum(1, keepdims=True)}

# name: (function, input, target, kwargs (strings name ENV arrays), sum(out * det(0.11,
# 0.2)), the same weighting's gradient for the input and the target (det(0.13, 0.3)),
# grad_fn) from torch 2.13.0
LOSSES = {
    'bce': (
        'binary_cross_entropy',
        'p',
        't',
        {},
        0.09457754019554947,
        0.029218117236610205,
        0.011006570606182896,
        'BinaryCrossEntropyBackward0',
    ),
    'bce_weight_sum': (
        'binary_cross_entropy',
        'p',
        't',
        {'reduction': 'sum', 'weight': 'w5'},
        2.0210900651055455,
        0.5394936255464585,
        0.29157335747028096,
        'BinaryCrossEntropyBackward0',
    ),
    'bce_logits': (
        'binary_cross_entropy_with_logits',
        'x',
        't',
        {},
        0.09457754019554947,
        0.005692857810681209,
        0.011006570606182887,
        'BinaryCrossEntropyWithLogitsBackward0',
    ),
    'bce_logits_pos_weight': (
        'binary_cross_entropy_with_logits',
        'x',
        't',
        {'pos_weight': 'w5', 'reduction': 'none', 'weight': 'w5'},
        8.461585746182973,
        0.4648450405399265,
        7.343813994861469,
        'BinaryCrossEntropyWithLogitsBackward0',
    ),
    'l1': (
        'l1_loss',
        'x',
        't',
        {},
        0.1860109488878974,
        -0.028772174044334655,
        0.028772174044334655,
        'MeanBackward0',
    ),
    'smooth_l1': (
        'smooth_l1_loss',
        'x',
        't',
        {'beta': 0.5},
        0.14219124099413433,
        -0.034500220024293926,
        0.034500220024293926,
        'SmoothL1LossBackward0',
    ),
    'smooth_l1_zero': (
        'smooth_l1_loss',
        'x',
        't',
        {'beta': 0.0, 'reduction': 'sum'},
        3.720218977757948,
        -0.5754434808866934,
        0.5754434808866934,
        'SumBackward0',
    ),
    'huber': (
        'huber_loss',
        'x',
        't',
        {'delta': 0.7},
        0.08834917015190671,
        -0.024478297903835218,
        0.024478297903835218,
        'HuberLossBackward0',
    ),
    'kl_batchmean': (
        'kl_div',
        'logp',
        't',
        {'reduction': 'batchmean'},
        0.6263510203945434,
        -0.3292455118441712,
        0.9112183710631468,
        'DivBackward0',
    ),
    'kl_log_target_sum': (
        'kl_div',
        'logp',
        'logt',
        {'log_target': True, 'reduction': 'sum'},
        2.5054040815781735,
        -1.316982047376685,
        2.9260675563392065,
        'SumBackward0',
    ),
    'ce_smoothing': (
        'cross_entropy',
        'x',
        'idx',
        {'label_smoothing': 0.2},
        0.33781961864264937,
        0.0076999707394849355,
        None,
        'AddBackward0',
    ),
    'ce_smoothing_weight_ignore': (
        'cross_entropy',
        'x',
        'idx',
        {'ignore_index': 4, 'label_smoothing': 0.1, 'weight': 'w5'},
        0.33918540722340895,
        0.007583320574043269,
        None,
        'AddBackward0',
    ),
    'ce_probs_smoothing': (
        'cross_entropy',
        'x',
        'tsoft',
        {'label_smoothing': 0.3},
        0.3277059072664605,
        -0.0015949024438963555,
        None,
        'DivBackward1',
    ),
    'mse_sum': (
        'mse_loss',
        'x',
        't',
        {'reduction': 'sum'},
        4.936527842467773,
        -3.074226919000685,
        3.074226919000685,
        'MseLossBackward0',
    ),
}


@pytest.mark.parametrize("name", sorted(LOSSES))
def test_loss_matches_pytorch(name):
    fn, a, b, kw, want, want_ga, want_gb, node = LOSSES[name]
    ta = lg.tensor(ENV[a], dtype=lg.float64, requires_grad=True)
    tb = lg.tensor(ENV[b], requires_grad=want_gb is not None)
    kw = {k: lg.tensor(ENV[v]) if isinstance(v, str) and v in ENV else v for k, v in kw.items()}
    out = getattr(F, fn)(ta, tb, **kw)
    if name != "ce_probs_smoothing":  # llgrad names x / 4.0 DivBackward0 (PyTorch: ...1)
        assert out.grad_fn.name() == node
    cot = det(tuple(out.shape), 0.11, 0.2)
    np.testing.assert_allclose(float((out.detach().numpy() * cot).sum()), want, rtol=1e-12)
    (out * lg.tensor(cot)).sum().backward()
    np.testing.assert_allclose(float((ta.grad.numpy() * det(ta.shape, 0.13, 0.3)).sum()),
                               want_ga, rtol=1e-10, atol=1e-13)
    if want_gb is not None:
        np.testing.assert_allclose(float((tb.grad.numpy() * det(tb.shape, 0.13, 0.3)).sum()),
                                   want_gb, rtol=1e-10, atol=1e-13)


def test_loss_modules_pass_their_arguments():
    x, t = lg.tensor(ENV["x"]), lg.tensor(ENV["t"])
    w = lg.tensor(ENV["w5"])
    pairs = [(nn.L1Loss(reduction="sum"), F.l1_loss(x, t, reduction="sum")),
             (nn.SmoothL1Loss(beta=0.5), F.smooth_l1_loss(x, t, beta=0.5)),
             (nn.HuberLoss(delta=0.7), F.huber_loss(x, t, delta=0.7)),
             (nn.BCEWithLogitsLoss(pos_weight=w), F.binary_cross_entropy_with_logits(
                 x, t, pos_weight=w)),
             (nn.BCELoss(weight=w), F.binary_cross_entropy(lg.tensor(ENV["p"]), t, weight=w)),
             (nn.KLDivLoss(reduction="batchmean", log_target=True),
              F.kl_div(lg.tensor(ENV["logp"]), lg.tensor(ENV["logt"]), reduction="batchmean",
                       log_target=True))]
    for i, (module, want) in enumerate(pairs):
        got = module(lg.tensor(ENV["p"]) if i == 4 else lg.tensor(ENV["logp"]) if i == 5
                     else x, lg.tensor(ENV["logt"]) if i == 5 else t)
        np.testing.assert_array_equal(got.numpy(), want.numpy())


def test_loss_argument_errors():
    x = lg.tensor(ENV["p"])
    with pytest.raises(RuntimeError, match="between 0 and 1"):
        F.binary_cross_entropy(x * 2, x)
    with pytest.raises(ValueError, match="same size"):
        F.binary_cross_entropy(x, x[0])
    with pytest.raises(ValueError, match="must be the same as input size"):
        F.binary_cross_entropy_with_logits(x, x[:2])
    with pytest.raises(ValueError, match="not a valid value for reduction"):
        F.l1_loss(x, x, reduction="avg")
    with pytest.raises(ValueError, match="not a valid value for reduction"):
        nn.KLDivLoss(reduction="mean_of_sums")
    with pytest.raises(RuntimeError, match="negative values for beta"):
        F.smooth_l1_loss(x, x, beta=-1.0)
    with pytest.raises(RuntimeError, match="non-positive values for delta"):
        F.huber_loss(x, x, delta=0.0)
    with pytest.warns(UserWarning, match="batchmean"):
        F.kl_div(x, x)


def test_legacy_size_average_and_reduce():
    x, t = lg.tensor(ENV["x"]), lg.tensor(ENV["t"])
    with pytest.warns(UserWarning, match="size_average and reduce"):
        got = F.mse_loss(x, t, size_average=False)
    np.testing.assert_allclose(got.numpy(), F.mse_loss(x, t, reduction="sum").numpy())
    with pytest.warns(UserWarning):
        assert F.l1_loss(x, t, reduce=False).shape == (4, 5)


def test_embedding_padding_idx_gets_no_gradient():
    w = lg.tensor(det((5, 3), 0.3, 0.2), requires_grad=True)
    idx = lg.tensor([[0, 2, 4], [4, 4, 1]])
    out = F.embedding(idx, w, padding_idx=4)
    assert out.grad_fn.name() == "EmbeddingBackward0" and out.shape == (2, 3, 3)
    np.testing.assert_array_equal(out.detach().numpy(), w.detach().numpy()[idx.numpy()])
    out.backward(lg.ones(2, 3, 3))
    np.testing.assert_array_equal(w.grad.numpy()[:, 0], [1.0, 1.0, 1.0, 0.0, 0.0])
    emb = nn.Embedding(5, 3, padding_idx=-1)
    assert emb.padding_idx == 4 and not emb.weight[4].detach().numpy().any()
    with pytest.raises(IndexError, match="index out of range"):
        F.embedding(lg.tensor([5]), w)
    with pytest.raises(RuntimeError, match="Long, Int"):
        F.embedding(lg.tensor([1.0]), w)
    frozen = nn.Embedding.from_pretrained(lg.ones(4, 2))
    assert not frozen.weight.requires_grad and frozen(lg.tensor([3])).shape == (1, 2)


def test_one_hot_and_normalize():
    oh = F.one_hot(lg.tensor([0, 2, 1]))
    assert oh.dtype == lg.int64 and oh.tolist() == [[1, 0, 0], [0, 0, 1], [0, 1, 0]]
    assert F.one_hot(lg.tensor([1]), num_classes=4).tolist() == [[0, 1, 0, 0]]
    with pytest.raises(RuntimeError, match="smaller than num_classes"):
        F.one_hot(lg.tensor([4]), num_classes=4)
    x = lg.tensor([[3.0, 4.0], [0.0, 0.0]])
    np.testing.assert_allclose(F.normalize(x).numpy(), [[0.6, 0.8], [0.0, 0.0]])
    np.testing.assert_allclose(F.normalize(x, p=1, dim=0).numpy(), [[1.0, 1.0], [0.0, 0.0]])


def test_batch_norm_functional_updates_running_stats_in_place():
    x = lg.tensor(det((6, 2), 0.7, 0.3))
    rm, rv = lg.zeros(2, dtype=lg.float64), lg.ones(2, dtype=lg.float64)
    F.batch_norm(x, rm, rv, training=True, momentum=0.5)
    xs = x.numpy()
    np.testing.assert_allclose(rm.numpy(), 0.5 * xs.mean(0))
    np.testing.assert_allclose(rv.numpy(), 0.5 + 0.5 * xs.var(0, ddof=1))
    assert rm._version == 2  # mul_ and add_, as PyTorch's in-place update
    with pytest.raises(RuntimeError, match="must be defined in evaluation mode"):
        F.batch_norm(x, None, None, training=False)
    with pytest.raises(ValueError, match="more than 1 value per channel"):
        F.batch_norm(x[:1], None, None, training=True)
    with pytest.raises(ValueError, match="expected 4D input"):
        nn.BatchNorm2d(2)(x)


def test_activation_modules_and_inplace():
    x = lg.tensor(det((3, 4), 0.9, 0.1) * 3)
    for module, fn in [(nn.GELU("tanh"), lambda v: F.gelu(v, approximate="tanh")),
                       (nn.SiLU(), F.silu), (nn.ELU(0.3), lambda v: F.elu(v, 0.3)),
                       (nn.CELU(0.3), lambda v: F.celu(v, 0.3)), (nn.SELU(), F.selu),
                       (nn.Softplus(2.0, 3.0), lambda v: F.softplus(v, 2.0, 3.0)),
                       (nn.Hardtanh(-0.5, 2.0), lambda v: F.hardtanh(v, -0.5, 2.0)),
                       (nn.ReLU6(), F.relu6), (nn.LogSigmoid(), F.logsigmoid),
                       (nn.LeakyReLU(0.3), lambda v: F.leaky_relu(v, 0.3))]:
        np.testing.assert_array_equal(module(x).numpy(), fn(x).numpy())
    np.testing.assert_allclose(F.relu6(x).numpy(), np.clip(x.numpy(), 0, 6))
    np.testing.assert_allclose(F.logsigmoid(x).numpy(), -np.log1p(np.exp(-x.numpy())),
                               rtol=1e-6)
    y = x.clone()
    assert F.elu(y, inplace=True) is y and y._version == 1
    np.testing.assert_array_equal(y.numpy(), F.elu(x).numpy())
    assert repr(nn.GELU("tanh")) == "GELU(approximate='tanh')"
    assert repr(nn.Hardtanh(-0.5, 2.0, inplace=True)) == \
        "Hardtanh(min_val=-0.5, max_val=2.0, inplace=True)"
    with pytest.raises(ValueError, match="approximate argument"):
        F.gelu(x, approximate="fast")


def test_conv_and_pool_errors_say_what_and_where():
    x = lg.ones(1, 3, 5, 5)
    with pytest.raises(lg.errors.DTypeError, match="input type .* and weight type"):
        F.conv2d(x, lg.ones(2, 3, 3, 3, dtype=lg.float64))
    with pytest.raises(ValueError, match="expects 6 input channels, but the input"):
        F.conv2d(x, lg.ones(2, 3, 3, 3), groups=2)
    with pytest.raises(ValueError, match="smaller than the \\(dilated\\) kernel"):
        F.conv2d(x, lg.ones(2, 3, 3, 3), dilation=3)
    with pytest.raises(ValueError, match="not supported for strided convolutions"):
        F.conv2d(x, lg.ones(2, 3, 3, 3), stride=2, padding="same")
    with pytest.raises(ValueError, match="Invalid padding string"):
        nn.Conv2d(3, 2, 3, padding="full")
    with pytest.raises(ValueError, match="divisible by groups"):
        nn.Conv2d(3, 2, 3, groups=2)
    with pytest.raises(ValueError, match="expected a 2-d \\(unbatched\\) or 3-d"):
        F.conv1d(x, lg.ones(2, 3, 3))
    with pytest.raises(ValueError, match="pad should be at most half"):
        F.max_pool2d(x, 2, padding=2)
    with pytest.raises(ValueError, match="output size is too small"):
        F.avg_pool2d(x, 6)
    with pytest.raises(ValueError, match="output padding must be smaller"):
        F.conv_transpose2d(x, lg.ones(3, 2, 3, 3), stride=2, output_padding=2)


def test_max_pool_gradient_reaches_only_each_windows_maximum():
    # PyTorch scatters the gradient to the argmax: an inf or NaN gradient must not turn the
    # window's other positions into NaN (inf * 0); checked by hand against torch 2.13
    x = lg.tensor(np.arange(16.0).reshape(1, 1, 4, 4), requires_grad=True)
    y = nn.functional.max_pool2d(x, 2)
    y.backward(lg.tensor([[[[np.inf, 1.0], [np.nan, 2.0]]]], dtype=lg.float64))
    want = np.zeros(16)
    want[[5, 7, 13, 15]] = [np.inf, 1.0, np.nan, 2.0]
    np.testing.assert_array_equal(x.grad.numpy().ravel(), want)


def test_relu_rnn_gradient_ignores_inactive_units():
    # relu's gradient is exactly 0 where the unit is off (threshold_backward), whatever the
    # incoming gradient: inf there gives the same input gradient as 0
    lg.manual_seed(0)
    rnn = nn.RNN(2, 3, nonlinearity="relu").double()
    x = lg.tensor(np.array([[[0.5, -1.0]], [[1.0, 2.0]]]), requires_grad=True)
    out, _ = rnn(x)
    off = out.detach().numpy() <= 0
    assert off.any() and not off.all()
    grads = []
    for fill in (0.0, np.inf):
        x.grad = None
        out, _ = rnn(x)
        out.backward(lg.tensor(np.where(off, fill, 1.0)))
        grads.append(x.grad.numpy().copy())
    assert np.isfinite(grads[1]).all()
    np.testing.assert_array_equal(grads[0], grads[1])
