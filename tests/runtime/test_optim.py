"""llgrad.optim against hand-written numpy references of PyTorch's update rules (SGD with
momentum/dampening/Nesterov/weight decay, Adam with weight decay/AMSGrad, AdamW), parameter
groups, zero_grad, state_dict round trips and the constructor errors; plus a training test.
"""
from __future__ import annotations

import copy
import pickle

import numpy as np
import pytest

import llgrad as lg
from llgrad import nn, optim

STEPS = 5


def _run(make_opt, p0, grads):
    p = lg.tensor(p0, dtype=lg.float64, requires_grad=True)
    opt = make_opt([p])
    out = []
    for g in grads:
        p.grad = lg.tensor(g, dtype=lg.float64)
        opt.step()
        out.append(p.detach().numpy().copy())
    return out


def _sgd_ref(p, grads, lr, momentum=0.0, dampening=0.0, weight_decay=0.0, nesterov=False,
             maximize=False):
    p, buf, out = p.copy(), None, []
    for g in grads:
        g = -g if maximize else g
        g = g + weight_decay * p
        if momentum:
            buf = g.copy() if buf is None else momentum * buf + (1 - dampening) * g
            g = g + momentum * buf if nesterov else buf
        p = p - lr * g
        out.append(p)
    return out


def _adam_ref(p, grads, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0,
              amsgrad=False, decoupled=False):
    p, m, v, vmax, out = p.copy(), 0.0, 0.0, 0.0, []
    b1, b2 = betas
    for t, g in enumerate(grads, 1):
        if decoupled:
            p = p * (1 - lr * weight_decay)
        else:
            g = g + weight_decay * p
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        vmax = np.maximum(vmax, v) if amsgrad else v
        denom = np.sqrt(vmax) / np.sqrt(1 - b2 ** t) + eps
        p = p - lr / (1 - b1 ** t) * m / denom
        out.append(p)
    return out


@pytest.fixture
def problem(rng):
    return rng.standard_normal((3, 2)), [rng.standard_normal((3, 2)) for _ in range(STEPS)]


@pytest.mark.parametrize("kw", [
    dict(lr=0.1),
    dict(lr=0.1, momentum=0.9),
    dict(lr=0.05, momentum=0.9, dampening=0.1, weight_decay=0.01),
    dict(lr=0.1, momentum=0.8, nesterov=True, weight_decay=0.1),
    dict(lr=0.1, momentum=0.5, maximize=True),
], ids=["plain", "momentum", "dampening_wd", "nesterov", "maximize"])
def test_sgd_matches_reference(problem, kw):
    p0, grads = problem
    got = _run(lambda ps: optim.SGD(ps, **kw), p0, grads)
    for a, b in zip(got, _sgd_ref(p0, grads, **kw)):
        np.testing.assert_allclose(a, b, rtol=1e-13, atol=1e-14)


@pytest.mark.parametrize("kw", [
    dict(),
    dict(lr=0.01),
    dict(lr=0.01, betas=(0.8, 0.99), eps=1e-6, weight_decay=0.1),
    dict(lr=0.01, amsgrad=True),
], ids=["default", "lr", "betas_eps_wd", "amsgrad"])
def test_adam_matches_reference(problem, kw):
    p0, grads = problem
    got = _run(lambda ps: optim.Adam(ps, **kw), p0, grads)
    for a, b in zip(got, _adam_ref(p0, grads, **kw)):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-14)


def test_adamw_matches_reference(problem):
    p0, grads = problem
    got = _run(lambda ps: optim.AdamW(ps, lr=0.01), p0, grads)
    for a, b in zip(got, _adam_ref(p0, grads, lr=0.01, weight_decay=1e-2, decoupled=True)):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-14)


def test_adam_first_step_moves_each_weight_by_lr():
    p = lg.tensor([1.0, -2.0, 3.0], requires_grad=True)
    opt = optim.Adam([p], lr=0.1)
    (p * lg.tensor([5.0, -0.01, 100.0])).sum().backward()
    opt.step()
    np.testing.assert_allclose(p.detach().numpy(), [0.9, -1.9, 2.9], rtol=1e-5)
    st = opt.state[p]
    assert set(st) == {"step", "exp_avg", "exp_avg_sq"} and st["step"].item() == 1.0
    assert st["exp_avg"].dtype == lg.float32 and p.dtype == lg.float32  # float32 stays float32


def test_step_updates_in_place_without_recording_a_graph():
    p = lg.tensor([1.0, 2.0], requires_grad=True)
    version = p._version
    opt = optim.SGD([p], lr=0.5, momentum=0.9)
    (p * p).sum().backward()
    opt.step()
    assert p.is_leaf and p.grad_fn is None and p.requires_grad
    assert p._version > version  # in place, as PyTorch's (saved copies would now be stale)
    np.testing.assert_allclose(p.detach().numpy(), [0.0, 0.0])
    assert opt.state[p]["momentum_buffer"].grad_fn is None


def test_params_without_grad_are_skipped_and_zero_grad():
    a = lg.tensor([1.0], requires_grad=True)
    b = lg.tensor([1.0], requires_grad=True)
    opt = optim.Adam([a, b], lr=0.1)
    (a * 3).sum().backward()
    opt.step()
    assert b.item() == 1.0 and b not in opt.state and a.item() != 1.0
    opt.zero_grad(set_to_none=False)
    assert a.grad is not None and a.grad.item() == 0.0
    opt.zero_grad()
    assert a.grad is None


def test_closure():
    p = lg.tensor([2.0], requires_grad=True)
    opt = optim.SGD([p], lr=0.25)

    def closure():
        opt.zero_grad()
        loss = (p ** 2).sum()
        loss.backward()
        return loss

    with lg.no_grad():  # the closure runs with grad enabled regardless
        loss = opt.step(closure)
    assert loss.item() == 4.0 and p.item() == 1.0


# -- parameter groups ---------------------------------------------------------------------------
def test_parameter_groups():
    m = nn.Sequential(nn.Linear(2, 2), nn.Linear(2, 1))
    opt = optim.SGD([{"params": m[0].parameters()},
                     {"params": m[1].parameters(), "lr": 1.0, "momentum": 0.5}],
                    lr=0.1, momentum=0.9)
    assert [g["lr"] for g in opt.param_groups] == [0.1, 1.0]
    assert [g["momentum"] for g in opt.param_groups] == [0.9, 0.5]
    assert opt.param_groups[0]["weight_decay"] == 0 and len(opt.param_groups[1]["params"]) == 2
    for p in m.parameters():
        p.grad = lg.ones_like(p)
    before = [p.detach().numpy().copy() for p in m.parameters()]
    opt.step()
    deltas = [b - p.detach().numpy() for b, p in zip(before, m.parameters())]
    np.testing.assert_allclose(deltas[0], 0.1, rtol=1e-6)
    np.testing.assert_allclose(deltas[2], 1.0, rtol=1e-6)
    extra = lg.zeros(1, requires_grad=True)
    opt.add_param_group({"params": extra, "lr": 2.0})
    assert opt.param_groups[2]["momentum"] == 0.9 and opt.param_groups[2]["params"] == [extra]
    with pytest.raises(ValueError, match="some parameters appear in more than one parameter "
                                         "group"):
        opt.add_param_group({"params": [extra]})
    opt.param_groups[0]["lr"] = 0.0  # hyperparameters are read at each step (schedulers)
    w = m[0].weight.detach().numpy().copy()
    opt.step()
    np.testing.assert_array_equal(m[0].weight.detach().numpy(), w)


def test_constructor_errors():
    p = lg.zeros(2, requires_grad=True)
    with pytest.raises(TypeError, match="params argument given to the optimizer should be an "
                                        "iterable of Tensors or dicts"):
        optim.SGD(p, lr=0.1)
    with pytest.raises(ValueError, match="optimizer got an empty parameter list"):
        optim.Adam([])
    with pytest.raises(ValueError, match="Invalid learning rate: -1"):
        optim.SGD([p], lr=-1)
    with pytest.raises(ValueError, match="Nesterov momentum requires a momentum and zero "
                                         "dampening"):
        optim.SGD([p], lr=0.1, nesterov=True)
    with pytest.raises(ValueError, match="Invalid beta parameter at index 1: 1.0"):
        optim.Adam([p], betas=(0.9, 1.0))
    with pytest.raises(ValueError, match="Invalid epsilon value: -1"):
        optim.Adam([p], eps=-1)
    with pytest.raises(ValueError, match="parameter group didn't specify a value of required "
                                         "optimization parameter lr"):
        optim.SGD([p])
    with pytest.raises(ValueError, match="can't optimize a non-leaf Tensor"):
        optim.SGD([p * 2], lr=0.1)
    with pytest.raises(TypeError, match="ordering of tensors in sets will change"):
        optim.SGD([{"params": {p}}], lr=0.1)


# -- state_dict ---------------------------------------------------------------------------------
def _train(model, opt, x, y, steps):
    for _ in range(steps):
        opt.zero_grad()
        nn.functional.mse_loss(model(x), y).backward()
        opt.step()


@pytest.mark.parametrize("make", [lambda ps: optim.Adam(ps, lr=0.01),
                                  lambda ps: optim.SGD(ps, lr=0.05, momentum=0.9)],
                         ids=["adam", "sgd"])
def test_state_dict_round_trip_resumes_exactly(make):
    x, y = lg.randn(8, 3), lg.randn(8, 1)
    model = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 1))
    opt = make(model.parameters())
    _train(model, opt, x, y, 3)
    sd = pickle.loads(pickle.dumps(opt.state_dict()))
    assert sorted(sd) == ["param_groups", "state"]
    assert sd["param_groups"][0]["params"] == [0, 1, 2, 3] and sorted(sd["state"]) == [0, 1, 2, 3]
    clone = copy.deepcopy(model)
    opt2 = make(clone.parameters())
    opt2.load_state_dict(sd)
    assert opt2.param_groups[0]["params"][0] is clone[0].weight
    _train(model, opt, x, y, 3)
    _train(clone, opt2, x, y, 3)
    for a, b in zip(model.parameters(), clone.parameters()):
        np.testing.assert_array_equal(a.detach().numpy(), b.detach().numpy())


def test_load_state_dict_is_a_copy_and_checks_groups():
    p = lg.ones(2, requires_grad=True)
    opt = optim.Adam([p], lr=0.1)
    p.grad = lg.ones(2)
    opt.step()
    sd = opt.state_dict()
    q = lg.ones(2, requires_grad=True)
    opt2 = optim.Adam([q])
    opt2.load_state_dict(sd)
    assert opt2.param_groups[0]["lr"] == 0.1 and opt2.state[q]["step"].item() == 1.0
    assert opt2.state[q]["exp_avg"] is not opt.state[p]["exp_avg"]
    with pytest.raises(ValueError, match="loaded state dict has a different number of "
                                         "parameter groups"):
        optim.Adam([{"params": [q]}, {"params": [lg.ones(1, requires_grad=True)]}]) \
            .load_state_dict(sd)
    with pytest.raises(ValueError, match="doesn't match the size of optimizer's group"):
        optim.Adam([q, lg.ones(1, requires_grad=True)]).load_state_dict(sd)


def test_repr():
    opt = optim.SGD([lg.zeros(1, requires_grad=True)], lr=0.1)
    assert repr(opt).startswith("SGD (\nParameter Group 0\n    dampening: 0\n    lr: 0.1\n")


# -- training -----------------------------------------------------------------------------------
@pytest.mark.parametrize("make", [lambda ps: optim.Adam(ps, lr=0.02),
                                  lambda ps: optim.SGD(ps, lr=0.1, momentum=0.9)],
                         ids=["adam", "sgd"])
def test_training_reduces_loss_tenfold(make, rng):
    x = rng.standard_normal((64, 3)).astype(np.float32)
    y = (np.sin(x[:, :1]) + x[:, 1:2] * x[:, 2:3]).astype(np.float32)
    model = nn.Sequential(nn.Linear(3, 32), nn.Tanh(), nn.Linear(32, 1))
    opt = make(model.parameters())
    loss_fn = nn.MSELoss()
    tx, ty = lg.tensor(x), lg.tensor(y)
    losses = []
    for _ in range(300):
        opt.zero_grad()
        loss = loss_fn(model(tx), ty)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < losses[0] / 10, (losses[0], losses[-1])
