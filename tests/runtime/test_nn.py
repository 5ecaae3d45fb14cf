"""llgrad.nn against PyTorch's documented behaviour: Module registration and traversal,
train/eval, zero_grad, state_dict round trips and their strict-key errors, repr, hooks,
Parameter, Linear initialisation, layers, nn.functional and the losses.

Oracles: numpy references, central differences (tests/fd.py), and literal values taken from
PyTorch 2.13 where the formula has options (cross_entropy, avg_pool2d).
"""
from __future__ import annotations

import copy
import math
import pickle
from collections import OrderedDict

import numpy as np
import pytest

import llgrad as lg
from llgrad import nn
from llgrad.nn import functional as F
from tests.fd import numerical_vjp


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(4, 3)
        self.act = nn.ReLU()
        self.fc2 = nn.Linear(3, 2)
        self.register_buffer("running", lg.zeros(2))

    def forward(self, x):
        return self.fc2(self.act(self.fc1(x)))


# -- Module: registration and traversal --------------------------------------------------------
def test_public_names():
    import llgrad.nn.functional
    import llgrad.optim
    assert lg.nn is nn and llgrad.nn.functional is F and lg.optim is llgrad.optim
    assert nn.Linear is lg.nn.Linear and callable(F.cross_entropy)


def test_attribute_registration_and_order():
    m = MLP()
    assert [n for n, _ in m.named_parameters()] == ["fc1.weight", "fc1.bias", "fc2.weight",
                                                    "fc2.bias"]
    assert [n for n, _ in m.named_children()] == ["fc1", "act", "fc2"]
    assert list(m.children()) == [m.fc1, m.act, m.fc2]
    assert [n for n, _ in m.named_modules()] == ["", "fc1", "act", "fc2"]
    assert list(m.modules())[0] is m
    assert [n for n, _ in m.named_buffers()] == ["running"]
    assert all(isinstance(p, nn.Parameter) for p in m.parameters())
    assert [p.shape for p in m.fc1.parameters(recurse=False)] == [(3, 4), (3,)]
    assert list(m.parameters(recurse=False)) == []
    assert "fc1" in dir(m) and m.fc1.in_features == 4


def test_shared_parameters_and_modules_are_visited_once():
    lin = nn.Linear(2, 2)
    seq = nn.Sequential(lin, nn.ReLU(), lin)
    assert len(list(seq.parameters())) == 2
    assert [n for n, _ in seq.named_parameters()] == ["0.weight", "0.bias"]
    assert len(list(seq.modules())) == 3
    assert list(seq.state_dict()) == ["0.weight", "0.bias", "2.weight", "2.bias"]


def test_reassignment_and_deletion():
    m = MLP()
    m.fc1 = None
    assert m.fc1 is None and [n for n, _ in m.named_parameters()] == ["fc2.weight", "fc2.bias"]
    m.fc2.bias = None
    assert "fc2.bias" not in m.state_dict()
    m.extra = nn.Parameter(lg.ones(1))
    assert "extra" in dict(m.named_parameters())
    del m.extra
    assert "extra" not in dict(m.named_parameters())
    m.plain = 3  # non-tensor attributes are ordinary attributes
    assert m.plain == 3 and "plain" not in m.state_dict()


def test_registration_errors():
    m = nn.Linear(2, 2)
    with pytest.raises(TypeError, match=r"cannot assign 'Tensor\[llgrad.float32\]' as "
                                        r"parameter 'weight' \(llgrad.nn.Parameter or None"):
        m.weight = lg.ones(2, 2)
    with pytest.raises(TypeError, match="cannot assign 'int' as child module 'fc'"):
        s = nn.Sequential()
        s.fc = nn.Linear(1, 1)
        s.fc = 1
    with pytest.raises(KeyError, match="attribute 'in_features' already exists"):
        m.register_buffer("in_features", lg.zeros(1))
    with pytest.raises(KeyError, match=r'contain "\.", got: a\.b'):
        m.register_parameter("a.b", None)
    with pytest.raises(AttributeError, match="'Linear' object has no attribute 'nope'"):
        m.nope

    class Early(nn.Module):
        def __init__(self):
            self.w = nn.Parameter(lg.ones(1))
    with pytest.raises(AttributeError, match=r"before Module.__init__\(\) call"):
        Early()


def test_missing_forward():
    with pytest.raises(NotImplementedError, match='Module \\[Module\\] is missing the required '
                                                  '"forward" function'):
        nn.Module()(lg.ones(1))


def test_train_eval_propagate():
    m = nn.Sequential(nn.Linear(2, 2), nn.Sequential(nn.Dropout(), nn.ReLU()))
    assert all(mod.training for mod in m.modules())
    assert m.eval() is m and not any(mod.training for mod in m.modules())
    m.train()
    assert all(mod.training for mod in m.modules())
    m[1].train(False)
    assert m.training and not m[1][0].training


def test_zero_grad():
    m = MLP()
    m(lg.ones(5, 4)).sum().backward()
    grads = [p.grad for p in m.parameters()]
    assert all(g is not None for g in grads)
    m.zero_grad(set_to_none=False)
    assert all(p.grad is g and not g.requires_grad for p, g in zip(m.parameters(), grads))
    assert all(np.all(p.grad.numpy() == 0) for p in m.parameters())
    m.zero_grad()
    assert all(p.grad is None for p in m.parameters())


def test_forward_hooks():
    m = nn.Linear(3, 2)
    seen = []
    h1 = m.register_forward_pre_hook(lambda mod, args: (args[0] * 0,))
    h2 = m.register_forward_hook(lambda mod, args, out: seen.append(out.shape) or out + 1)
    out = m(lg.ones(3))
    assert seen == [(2,)]
    np.testing.assert_allclose(out.detach().numpy(), m.bias.detach().numpy() + 1, rtol=1e-6)
    h1.remove()
    h2.remove()
    np.testing.assert_allclose(m(lg.zeros(3)).detach().numpy(), m.bias.detach().numpy())
    assert seen == [(2,)]


def test_apply_double_and_requires_grad():
    m = MLP()
    names = []
    m.apply(lambda mod: names.append(type(mod).__name__))
    assert names == ["Linear", "ReLU", "Linear", "MLP"]
    m.double()
    assert all(p.dtype == lg.float64 for p in m.parameters()) and m.running.dtype == lg.float64
    assert m(lg.ones(4, dtype=lg.float64)).dtype == lg.float64
    m.requires_grad_(False)
    assert not any(p.requires_grad for p in m.parameters())


# -- repr ---------------------------------------------------------------------------------------
def test_repr_lists_submodules_like_pytorch():
    m = nn.Sequential(nn.Linear(10, 5), nn.ReLU(), nn.Dropout(0.2),
                      nn.Sequential(nn.Linear(5, 2, bias=False), nn.Tanh()))
    assert repr(m) == (
        "Sequential(\n"
        "  (0): Linear(in_features=10, out_features=5, bias=True)\n"
        "  (1): ReLU()\n"
        "  (2): Dropout(p=0.2, inplace=False)\n"
        "  (3): Sequential(\n"
        "    (0): Linear(in_features=5, out_features=2, bias=False)\n"
        "    (1): Tanh()\n"
        "  )\n"
        ")")
    assert repr(MLP()) == ("MLP(\n  (fc1): Linear(in_features=4, out_features=3, bias=True)\n"
                           "  (act): ReLU()\n  (fc2): Linear(in_features=3, out_features=2, "
                           "bias=True)\n)")


# -- state_dict ---------------------------------------------------------------------------------
def test_state_dict_keys_and_round_trip():
    a, b = MLP(), MLP()
    sd = a.state_dict()
    assert isinstance(sd, OrderedDict)
    assert list(sd) == ["running", "fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"]
    assert not any(v.requires_grad for v in sd.values())
    assert not np.allclose(a.fc1.weight.detach().numpy(), b.fc1.weight.detach().numpy())
    w_before = b.fc1.weight
    res = b.load_state_dict(sd)
    assert res.missing_keys == [] and res.unexpected_keys == []
    assert b.fc1.weight is w_before  # loaded in place
    x = lg.randn(3, 4)
    np.testing.assert_array_equal(a(x).detach().numpy(), b(x).detach().numpy())
    # state_dict tensors share storage with the parameters (as PyTorch's do)
    with lg.no_grad():
        a.fc1.bias.add_(1.0)
    np.testing.assert_array_equal(sd["fc1.bias"].numpy(), a.fc1.bias.detach().numpy())
    assert a.state_dict(keep_vars=True)["fc1.weight"] is a.fc1.weight


def test_state_dict_non_persistent_buffer_and_pickle():
    m = MLP()
    m.register_buffer("scratch", lg.ones(1), persistent=False)
    assert "scratch" not in m.state_dict() and "scratch" in dict(m.named_buffers())
    sd = pickle.loads(pickle.dumps(m.state_dict()))
    MLP().load_state_dict(sd)


def test_load_state_dict_strict_errors():
    m = nn.Sequential(nn.Linear(3, 2), nn.ReLU())
    with pytest.raises(RuntimeError) as e:
        m.load_state_dict({"0.weight": lg.zeros(2, 3), "extra": lg.zeros(1)})
    assert str(e.value) == ('Error(s) in loading state_dict for Sequential:\n\t'
                            'Missing key(s) in state_dict: "0.bias". \n\t'
                            'Unexpected key(s) in state_dict: "extra". ')
    with pytest.raises(RuntimeError, match=r"size mismatch for 0.weight: copying a param with "
                                           r"shape \[3, 3\] from checkpoint, the shape in "
                                           r"current model is \[2, 3\]"):
        m.load_state_dict({"0.weight": lg.zeros(3, 3), "0.bias": lg.zeros(2)})
    with pytest.raises(RuntimeError, match="size mismatch"):  # even with strict=False
        m.load_state_dict({"0.weight": lg.zeros(3, 3)}, strict=False)
    res = m.load_state_dict({"0.weight": lg.zeros(2, 3), "junk": lg.ones(1)}, strict=False)
    assert res.missing_keys == ["0.bias"] and res.unexpected_keys == ["junk"]
    assert np.all(m[0].weight.detach().numpy() == 0)


def test_deepcopy_is_independent():
    m = MLP()
    c = copy.deepcopy(m)
    assert isinstance(c.fc1.weight, nn.Parameter) and c.fc1.weight.requires_grad
    with lg.no_grad():
        c.fc1.weight.fill_(0.0)
    assert not np.all(m.fc1.weight.detach().numpy() == 0)


# -- Parameter ----------------------------------------------------------------------------------
def test_parameter():
    p = nn.Parameter(lg.tensor([1.0, 2.0]))
    assert repr(p) == "Parameter containing:\ntensor([1., 2.], requires_grad=True)"
    assert isinstance(p, lg.Tensor) and p.is_leaf and p.requires_grad
    y = p * 2
    assert type(y) is lg.Tensor and y.grad_fn is not None
    q = nn.Parameter(lg.ones(2), requires_grad=False)
    assert not q.requires_grad
    assert nn.Parameter().shape == (0,)
    t = lg.zeros(3)
    shared = nn.Parameter(t)
    with lg.no_grad():
        shared.add_(1.0)
    np.testing.assert_array_equal(t.numpy(), [1, 1, 1])  # storage is shared, not copied
    assert isinstance(pickle.loads(pickle.dumps(p)), nn.Parameter)


# -- Linear -------------------------------------------------------------------------------------
def test_linear_shapes_and_value(rng):
    fc = nn.Linear(4, 3)
    assert fc.weight.shape == (3, 4) and fc.bias.shape == (3,)
    assert fc.weight.dtype == lg.float32
    x = rng.standard_normal((5, 4)).astype(np.float32)
    ref = x @ fc.weight.detach().numpy().T + fc.bias.detach().numpy()
    np.testing.assert_allclose(fc(lg.tensor(x)).detach().numpy(), ref, rtol=1e-5, atol=1e-6)
    assert fc(lg.ones(4)).shape == (3,)
    assert fc(lg.ones(2, 5, 4)).shape == (2, 5, 3)
    assert nn.Linear(4, 3, bias=False).bias is None


def test_linear_init_is_kaiming_uniform_and_seeded():
    fc = nn.Linear(400, 300)
    bound = 1 / math.sqrt(400)  # kaiming_uniform_(a=sqrt(5)) and the bias bound coincide
    w, b = fc.weight.detach().numpy(), fc.bias.detach().numpy()
    assert np.abs(w).max() <= bound and np.abs(b).max() <= bound
    assert np.abs(w).max() > 0.99 * bound
    assert abs(w.std() - bound / math.sqrt(3)) < 0.01 * bound  # uniform, not normal
    assert abs(w.mean()) < 0.01 * bound
    lg.manual_seed(7)
    a = nn.Linear(5, 3)
    lg.manual_seed(7)
    c = nn.Linear(5, 3)
    np.testing.assert_array_equal(a.weight.detach().numpy(), c.weight.detach().numpy())
    np.testing.assert_array_equal(a.bias.detach().numpy(), c.bias.detach().numpy())
    assert not np.array_equal(nn.Linear(5, 3).weight.detach().numpy(), a.weight.detach().numpy())


def test_init_functions():
    w = lg.empty(30, 20)
    nn.init.xavier_uniform_(w)
    assert np.abs(w.numpy()).max() <= math.sqrt(6 / 50)
    nn.init.constant_(w, 0.5)
    assert np.all(w.numpy() == 0.5)
    assert nn.init.calculate_gain("relu") == math.sqrt(2)
    assert nn.init.calculate_gain("leaky_relu", math.sqrt(5)) == math.sqrt(1 / 3)
    with pytest.raises(ValueError, match="fewer than 2 dimensions"):
        nn.init.kaiming_uniform_(lg.empty(3))


# -- activations, containers --------------------------------------------------------------------
def test_activations(rng):
    x = rng.standard_normal((3, 4)).astype(np.float32)
    t = lg.tensor(x)
    np.testing.assert_allclose(nn.ReLU()(t).numpy(), np.maximum(x, 0))
    np.testing.assert_allclose(nn.Tanh()(t).numpy(), np.tanh(x), rtol=1e-6)
    np.testing.assert_allclose(nn.Sigmoid()(t).numpy(), 1 / (1 + np.exp(-x)), rtol=1e-6)
    np.testing.assert_allclose(nn.LeakyReLU(0.1)(t).numpy(), np.where(x > 0, x, 0.1 * x))
    assert nn.Identity(3, foo=1)(t) is t
    assert repr(nn.ReLU(inplace=True)) == "ReLU(inplace=True)"


def test_sequential_container():
    a, b, c = nn.Linear(2, 3), nn.ReLU(), nn.Linear(3, 1)
    s = nn.Sequential(a, b, c)
    assert len(s) == 3 and list(s) == [a, b, c]
    assert s[0] is a and s[-1] is c
    assert isinstance(s[1:], nn.Sequential) and list(s[1:]) == [b, c]
    with pytest.raises(IndexError, match="index 3 is out of range"):
        s[3]
    named = nn.Sequential(OrderedDict([("lin", a), ("act", b)]))
    assert named.lin is a and [n for n, _ in named.named_children()] == ["lin", "act"]
    s.append(nn.Sigmoid())
    assert len(s) == 4 and s(lg.ones(5, 2)).shape == (5, 1)
    del s[1]
    assert [n for n, _ in s.named_children()] == ["0", "1", "2"]
    ml = nn.ModuleList([a, c])
    assert len(ml) == 2 and ml[1] is c and len(list(ml.parameters())) == 4


# -- Dropout ------------------------------------------------------------------------------------
def test_dropout_training_scales_and_eval_is_identity():
    d = nn.Dropout(p=0.25)
    x = lg.ones(200, 100)
    y = d(x).numpy()
    kept = y != 0
    np.testing.assert_allclose(y[kept], 1 / 0.75, rtol=1e-6)
    assert abs(kept.mean() - 0.75) < 0.02
    d.eval()
    assert d(x) is x
    assert np.all(nn.Dropout(p=1.0)(x).numpy() == 0)
    assert nn.Dropout(p=0.0)(x) is x
    with pytest.raises(ValueError, match="dropout probability has to be between 0 and 1, but "
                                         "got 1.5"):
        nn.Dropout(1.5)
    with pytest.raises(ValueError, match="between 0 and 1"):
        F.dropout(x, -0.1)


def test_dropout_gradient_is_the_mask_and_seeded():
    x = lg.ones(50, requires_grad=True)
    lg.manual_seed(3)
    y = F.dropout(x, 0.5)
    y.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), y.detach().numpy())
    lg.manual_seed(3)
    np.testing.assert_array_equal(F.dropout(lg.ones(50), 0.5).numpy(), y.detach().numpy())
    assert F.dropout(lg.ones(3, dtype=lg.float64), 0.5).dtype == lg.float64


# -- functional ---------------------------------------------------------------------------------
def test_softmax_log_softmax(rng):
    x = rng.standard_normal((3, 5))
    t = lg.tensor(x, dtype=lg.float64)
    e = np.exp(x - x.max(1, keepdims=True))
    sm = e / e.sum(1, keepdims=True)
    np.testing.assert_allclose(F.softmax(t, dim=1).numpy(), sm, rtol=1e-12)
    np.testing.assert_allclose(F.log_softmax(t, dim=1).numpy(), np.log(sm), rtol=1e-12)
    np.testing.assert_allclose(nn.Softmax(dim=0)(t).numpy().sum(0), np.ones(5), rtol=1e-12)
    with pytest.warns(UserWarning, match="Implicit dimension choice for softmax"):
        np.testing.assert_allclose(F.softmax(t).numpy(), sm, rtol=1e-12)  # 2-D: dim=1
    big = lg.tensor([1000.0, 0.0])
    np.testing.assert_allclose(F.softmax(big, 0).numpy(), [1.0, 0.0])


def test_mse_loss(rng):
    a, b = rng.standard_normal((4, 3)), rng.standard_normal((4, 3))
    ta = lg.tensor(a, dtype=lg.float64, requires_grad=True)
    tb = lg.tensor(b, dtype=lg.float64)
    np.testing.assert_allclose(F.mse_loss(ta, tb).item(), ((a - b) ** 2).mean())
    np.testing.assert_allclose(nn.MSELoss(reduction="sum")(ta, tb).item(), ((a - b) ** 2).sum())
    np.testing.assert_allclose(nn.MSELoss(reduction="none")(ta, tb).detach().numpy(),
                               (a - b) ** 2)
    F.mse_loss(ta, tb).backward()
    np.testing.assert_allclose(ta.grad.numpy(), 2 * (a - b) / a.size)
    with pytest.warns(UserWarning, match=r"Using a target size \(\[4, 1\]\) that is different "
                                         r"to the input size \(\[4, 3\]\)"):
        F.mse_loss(ta, lg.zeros(4, 1, dtype=lg.float64))
    with pytest.raises(ValueError, match="bad is not a valid value for reduction"):
        nn.MSELoss(reduction="bad")


X3 = [[1., 2., 3.], [1., -1., 0.], [0.5, 0.2, -0.3]]
T3 = [2, 0, 1]
W3 = [0.2, 0.3, 0.5]


@pytest.mark.parametrize("kwargs, expected", [
    ({}, 0.63306023),
    ({"weight": W3}, 0.61051480),
    ({"ignore_index": 0}, 0.74578736),
    ({"label_smoothing": 0.1}, 0.70194911),
    ({"label_smoothing": 0.1, "weight": W3}, 0.67910268),
    ({"reduction": "none", "weight": W3, "ignore_index": 0}, [0.20380298, 0.0, 0.32519062]),
], ids=["plain", "weight", "ignore_index", "smoothing", "smoothing_weight", "none"])
def test_cross_entropy_matches_pytorch(kwargs, expected):
    """Values printed by PyTorch 2.13 for the same inputs (float64)."""
    if "weight" in kwargs:
        kwargs = dict(kwargs, weight=lg.tensor(kwargs["weight"], dtype=lg.float64))
    x = lg.tensor(X3, dtype=lg.float64)
    out = F.cross_entropy(x, lg.tensor(T3), **kwargs)
    np.testing.assert_allclose(out.numpy(), expected, rtol=1e-7)
    mod = nn.CrossEntropyLoss(**kwargs)(x, lg.tensor(T3))
    np.testing.assert_allclose(mod.numpy(), expected, rtol=1e-7)


def test_cross_entropy_gradient_and_reductions(rng):
    x = rng.standard_normal((6, 4))
    t = np.array([0, 3, 1, 1, 2, 0])
    tx = lg.tensor(x, dtype=lg.float64, requires_grad=True)
    loss = nn.CrossEntropyLoss()(tx, lg.tensor(t))
    e = np.exp(x - x.max(1, keepdims=True))
    p = e / e.sum(1, keepdims=True)
    np.testing.assert_allclose(loss.item(), -np.log(p[np.arange(6), t]).mean(), rtol=1e-12)
    loss.backward()
    np.testing.assert_allclose(tx.grad.numpy(), (p - np.eye(4)[t]) / 6, rtol=1e-10, atol=1e-14)
    total = F.cross_entropy(tx, lg.tensor(t), reduction="sum").item()
    np.testing.assert_allclose(total, 6 * loss.item(), rtol=1e-12)
    per = F.cross_entropy(tx, lg.tensor(t), reduction="none")
    assert per.shape == (6,)
    # unbatched input and K-dimensional input (N, C, d1)
    np.testing.assert_allclose(F.cross_entropy(lg.tensor(x[0], dtype=lg.float64),
                                               lg.tensor(t[0])).item(), per.detach()[0].item())
    x3 = rng.standard_normal((2, 4, 3))
    t3 = np.array([[0, 1, 2], [3, 3, 0]])
    ref = np.mean([F.cross_entropy(lg.tensor(x3[:, :, k], dtype=lg.float64),
                                   lg.tensor(t3[:, k]), reduction="sum").item()
                   for k in range(3)]) / 2
    np.testing.assert_allclose(F.cross_entropy(lg.tensor(x3, dtype=lg.float64),
                                               lg.tensor(t3)).item(), ref, rtol=1e-12)


def test_cross_entropy_probabilities_and_finite_differences(rng):
    x = rng.standard_normal((3, 4))
    probs = rng.random((3, 4))
    probs /= probs.sum(1, keepdims=True)
    tx = lg.tensor(x, dtype=lg.float64, requires_grad=True)
    loss = F.cross_entropy(tx, lg.tensor(probs, dtype=lg.float64))

    def ref(a):
        lse = np.log(np.exp(a).sum(1, keepdims=True))
        return -((a - lse) * probs).sum(1).mean()

    np.testing.assert_allclose(loss.item(), ref(x), rtol=1e-12)
    loss.backward()
    num, = numerical_vjp(ref, [x], np.ones(()), [0])
    np.testing.assert_allclose(tx.grad.numpy(), num, rtol=1e-6, atol=1e-8)


def test_cross_entropy_errors():
    x = lg.randn(3, 4)
    with pytest.raises(RuntimeError, match="expected scalar type Long but found "
                                           "llgrad.float32"):
        F.cross_entropy(x, lg.tensor([0.0, 1.0, 2.0]))
    with pytest.raises(IndexError, match=r"Target 4 is out of bounds \(number of classes is "
                                         r"4\)"):
        F.cross_entropy(x, lg.tensor([0, 4, 1]))
    with pytest.raises(ValueError, match=r"Expected target of shape \[3\]"):
        F.cross_entropy(x, lg.tensor([0, 1]))


def test_nll_loss_is_cross_entropy_of_log_softmax(rng):
    x = lg.tensor(rng.standard_normal((5, 3)), dtype=lg.float64)
    t = lg.tensor([0, 2, 1, 1, 0])
    np.testing.assert_allclose(nn.NLLLoss()(F.log_softmax(x, 1), t).item(),
                               F.cross_entropy(x, t).item(), rtol=1e-12)


def test_avg_pool2d_matches_pytorch():
    im = lg.arange(25.0).reshape(1, 1, 5, 5)
    np.testing.assert_allclose(
        F.avg_pool2d(im, 3, 2, 1).numpy()[0, 0],
        [[1.33333337, 3.0, 2.66666675], [7.0, 12.0, 9.0], [8.0, 13.0, 9.33333302]], rtol=1e-6)
    np.testing.assert_allclose(F.avg_pool2d(im, 2).numpy()[0, 0], [[3.0, 5.0], [13.0, 15.0]])
    np.testing.assert_allclose(F.avg_pool2d(im[0], 2, 1).numpy()[0],
                               np.arange(3.0, 23.0).reshape(4, 5)[:, :4], rtol=1e-6)
    assert nn.AvgPool2d(2)(lg.ones(2, 3, 4, 4)).shape == (2, 3, 2, 2)
    with pytest.raises(ValueError, match="pad should be at most half"):
        F.avg_pool2d(im, 2, 2, 2)


@pytest.mark.parametrize("kernel, stride, padding", [(2, None, 0), (3, 2, 1), ((3, 2), (1, 2),
                                                                              (1, 0))])
def test_avg_pool2d_gradient(rng, kernel, stride, padding):
    x = rng.standard_normal((2, 2, 6, 7))
    tx = lg.tensor(x, dtype=lg.float64, requires_grad=True)
    y = F.avg_pool2d(tx, kernel, stride, padding)
    v = rng.standard_normal(y.shape)
    (y * lg.tensor(v, dtype=lg.float64)).sum().backward()

    def ref(a):
        return F.avg_pool2d(lg.tensor(a, dtype=lg.float64), kernel, stride, padding).numpy()

    num, = numerical_vjp(ref, [x], v, [0])
    np.testing.assert_allclose(tx.grad.numpy(), num, rtol=1e-6, atol=1e-8)
