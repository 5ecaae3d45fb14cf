"""Optimizers (RMSprop, Adagrad, Adam/AdamW with AMSGrad and maximize, SGD with Nesterov)
and learning-rate schedulers against pinned PyTorch 2.13 results: float32 parameters after
six steps on fixed gradients (equal to float32 rounding), and the learning rates (and
momenta, for OneCycleLR) of every step; state_dict round trips of both."""
from __future__ import annotations

import copy
import pickle
import warnings

import numpy as np
import pytest

import llgrad as lg
from llgrad import optim
from llgrad.optim import lr_scheduler as S


def det(shape, k, phase, scale=1.0):
    n = int(np.prod(shape))
    return (np.sin(np.arange(n) * k + phase) * scale).reshape(shape)


OPTIMIZERS = {
    'adam': (
        'Adam(ps, lr=0.01)',
        [0.15519408881664276, 0.725520670413971, 0.9455385208129883, 0.7017136216163635,
         0.10895037651062012, -0.5513116717338562, -0.9651025533676147],
    ),
    'adam_amsgrad_wd': (
        'Adam(ps, lr=0.01, weight_decay=0.1, amsgrad=True)',
        [0.1445583552122116, 0.7250089049339294, 0.9444379806518555, 0.6999140977859497,
         0.10850035399198532, -0.5486798286437988, -0.9596489071846008],
    ),
    'adamw_amsgrad_maximize': (
        'AdamW(ps, lr=0.01, amsgrad=True, maximize=True)',
        [0.24201719462871552, 0.8406486511230469, 1.0529942512512207, 0.7892352342605591,
         0.17319227755069733, -0.5080533623695374, -0.9375389218330383],
    ),
    'rmsprop': (
        'RMSprop(ps, lr=0.01)',
        [-0.177792489528656, 0.3902677595615387, 0.7271605134010315, 0.5987978577613831,
         0.08644731342792511, -0.5408262014389038, -0.9667243361473083],
    ),
    'rmsprop_centered_momentum_wd': (
        'RMSprop(ps, lr=0.01, alpha=0.9, momentum=0.5, centered=True, weight_decay=0.05)',
        [-0.09799876064062119, 0.5234017968177795, 0.8026670813560486, 0.6201533675193787,
         0.07869473844766617, -0.5483250021934509, -0.9517889022827148],
    ),
    'rmsprop_maximize': (
        'RMSprop(ps, lr=0.01, momentum=0.9, maximize=True)',
        [1.2849998474121094, 2.1641383171081543, 2.1430389881134033, 1.604772925376892,
         0.7225050926208496, -0.17539793252944946, -0.7495797872543335],
    ),
    'adagrad': (
        'Adagrad(ps, lr=0.1)',
        [-0.17683708667755127, 0.39135733246803284, 0.7274661660194397, 0.5981179475784302,
         0.08523896336555481, -0.5419999957084656, -0.9672269821166992],
    ),
    'adagrad_decay_init_wd': (
        ('Adagrad(ps, lr=0.1, lr_decay=0.05, initial_accumulator_value=0.2, weight_decay=0.1, '
         'eps=1e-6)'),
        [-0.08916044235229492, 0.4759237468242645, 0.7569773197174072, 0.5959658622741699,
         0.07771849632263184, -0.5360164046287537, -0.9403330087661743],
    ),
    'sgd_nesterov': (
        'SGD(ps, lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.01)',
        [-1.041985034942627, -0.7169822454452515, -0.3260248303413391, -0.15011098980903625,
         -0.297696053981781, -0.651085376739502, -0.94022136926651],
    ),
}


def _train(expr, steps=6, ps=None):
    p = lg.nn.Parameter(lg.tensor(det((7,), 0.7, 0.2), dtype=lg.float32))
    opt = eval("optim." + expr, {"optim": optim, "ps": [p]})
    for s in range(steps):
        p.grad = lg.tensor(det((7,), 0.31 + 0.1 * s, 0.4 * s), dtype=lg.float32)
        opt.step()
    return p, opt


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_optimizer_matches_pytorch_in_float32(name):
    expr, want = OPTIMIZERS[name]
    p, _ = _train(expr)
    assert p.dtype == lg.float32
    np.testing.assert_allclose(p.detach().numpy(), want, rtol=2e-6, atol=2e-7)


@pytest.mark.parametrize("name", ["adam_amsgrad_wd", "rmsprop_centered_momentum_wd",
                                  "adagrad_decay_init_wd"])
def test_optimizer_state_dict_round_trip_resumes_exactly(name):
    expr, want = OPTIMIZERS[name]
    p, opt = _train(expr, steps=3)
    saved = pickle.loads(pickle.dumps(opt.state_dict()))
    p2 = lg.nn.Parameter(p.detach().clone())
    opt2 = eval("optim." + expr, {"optim": optim, "ps": [p2]})
    opt2.load_state_dict(saved)
    for q, o in ((p, opt), (p2, opt2)):
        for s in range(3, 6):
            q.grad = lg.tensor(det((7,), 0.31 + 0.1 * s, 0.4 * s), dtype=lg.float32)
            o.step()
    np.testing.assert_array_equal(p2.detach().numpy(), p.detach().numpy())
    np.testing.assert_allclose(p.detach().numpy(), want, rtol=2e-6, atol=2e-7)


def test_new_optimizers_check_their_arguments():
    p = [lg.zeros(2, requires_grad=True)]
    with pytest.raises(ValueError, match="Invalid learning rate"):
        optim.RMSprop(p, lr=-1)
    with pytest.raises(ValueError, match="Invalid alpha value"):
        optim.RMSprop(p, alpha=-0.1)
    with pytest.raises(ValueError, match="Invalid lr_decay value"):
        optim.Adagrad(p, lr_decay=-1)
    with pytest.raises(ValueError, match="Invalid epsilon value"):
        optim.Adagrad(p, eps=-1)
    opt = optim.Adagrad(p, initial_accumulator_value=0.5)
    assert opt.state[p[0]]["sum"].tolist() == [0.5, 0.5]  # made at construction, as PyTorch


def _sgd(ps):
    return optim.SGD(ps, lr=1.0, momentum=0.9)


def _adam(ps):
    return optim.Adam(ps, lr=1.0)


SGD, ADAM = _sgd, _adam


# PyTorch's get_last_lr() after each of 12 (OneCycleLR: 11) optimizer.step(); scheduler.step()
# pairs (ReduceLROnPlateau: step(metric)), for two parameter groups (lr 1.0 and 0.5; SGD
# with momentum 0.9 or Adam), and group 0's momentum (Adam: beta1) after each step.
SCHEDULES = {
    'step': (
        'StepLR(opt, step_size=3, gamma=0.5)',
        SGD,
        None,
        [[1.0, 0.5], [1.0, 0.5], [0.5, 0.25], [0.5, 0.25], [0.5, 0.25], [0.25, 0.125],
         [0.25, 0.125], [0.25, 0.125], [0.125, 0.0625], [0.125, 0.0625], [0.125, 0.0625],
         [0.0625, 0.03125]],
        [0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9],
    ),
    'multistep': (
        'MultiStepLR(opt, milestones=[2, 5, 5, 9], gamma=0.1)',
        SGD,
        None,
        [[1.0, 0.5], [0.1, 0.05], [0.1, 0.05], [0.1, 0.05], [0.001, 0.0005], [0.001, 0.0005],
         [0.001, 0.0005], [0.001, 0.0005], [0.0001, 5e-05], [0.0001, 5e-05], [0.0001, 5e-05],
         [0.0001, 5e-05]],
        [0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9],
    ),
    'exponential': (
        'ExponentialLR(opt, gamma=0.9)',
        SGD,
        None,
        [[0.9, 0.45], [0.81, 0.405], [0.729, 0.3645], [0.6561, 0.32805], [0.59049, 0.295245],
         [0.531441, 0.2657205], [0.4782969, 0.23914845], [0.43046721, 0.215233605],
         [0.387420489, 0.1937102445], [0.3486784401, 0.17433922005],
         [0.31381059609, 0.156905298045], [0.282429536481, 0.1412147682405]],
        [0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9],
    ),
    'cosine': (
        'CosineAnnealingLR(opt, T_max=5, eta_min=0.01)',
        SGD,
        None,
        [[0.905463412215599, 0.453209163621862], [0.657963412215599, 0.330709163621862],
         [0.352036587784401, 0.179290836378138], [0.104536587784401, 0.056790836378138],
         [0.01, 0.01], [0.104536587784401, 0.056790836378138],
         [0.352036587784401, 0.179290836378138], [0.657963412215599, 0.330709163621862],
         [0.9054634122156, 0.453209163621862], [1.0, 0.5], [0.9054634122156, 0.453209163621862],
         [0.657963412215599, 0.330709163621862]],
        [0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9],
    ),
    'lambda': (
        'LambdaLR(opt, [lambda e: 1 / (e + 1), lambda e: 0.5 ** e])',
        SGD,
        None,
        [[0.5, 0.25], [0.333333333333333, 0.125], [0.25, 0.0625], [0.2, 0.03125],
         [0.166666666666667, 0.015625], [0.142857142857143, 0.0078125], [0.125, 0.00390625],
         [0.111111111111111, 0.001953125], [0.1, 0.0009765625], [0.090909090909091, 0.00048828125],
         [0.083333333333333, 0.000244140625], [0.076923076923077, 0.0001220703125]],
        [0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9],
    ),
    'plateau': (
        'ReduceLROnPlateau(opt, factor=0.5, patience=1, cooldown=1, min_lr=[0.1, 0.2])',
        SGD,
        [5, 4, 4, 4, 4, 4, 3.9999, 3, 3, 3, 3, 3],
        [[1.0, 0.5], [1.0, 0.5], [1.0, 0.5], [0.5, 0.25], [0.5, 0.25], [0.5, 0.25], [0.25, 0.2],
         [0.25, 0.2], [0.25, 0.2], [0.125, 0.2], [0.125, 0.2], [0.125, 0.2]],
        [0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9],
    ),
    'plateau_max_abs': (
        "ReduceLROnPlateau(opt, mode='max', threshold=0.5, threshold_mode='abs', patience=0)",
        SGD,
        [1, 1.4, 1.6, 2.2, 2.3, 2.4, 3, 3, 3, 3, 3, 3],
        [[1.0, 0.5], [0.1, 0.05], [0.1, 0.05], [0.1, 0.05], [0.01, 0.005], [0.001, 0.0005],
         [0.001, 0.0005], [0.0001, 5e-05], [1e-05, 5e-06], [1e-06, 5e-07], [1e-07, 5e-08],
         [1e-08, 5e-09]],
        [0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9],
    ),
    'onecycle': (
        'OneCycleLR(opt, max_lr=[1.0, 2.0], total_steps=12)',
        SGD,
        None,
        [[0.349789654219583, 0.699579308439166], [0.879285159122129, 1.758570318244257],
         [0.994415435450912, 1.988830870901823], [0.933012969841412, 1.866025939682823],
         [0.811745653949763, 1.623491307899526], [0.647378997695103, 1.294757995390207],
         [0.462637102666975, 0.92527420533395], [0.283060998208699, 0.566121996417398],
         [0.133477530188831, 0.266955060377661], [0.034566987425395, 0.06913397485079],
         [4e-06, 8e-06]],
        [0.9177302443521267, 0.8625744625914449, 0.8505584586887436, 0.856698729810778,
         0.8688255099070633, 0.8852622412794547, 0.9037365046793212, 0.9216941869558779,
         0.9366525935914912, 0.9465436874322102, 0.95],
    ),
    'onecycle_adam_linear_3phase': (
        ('OneCycleLR(opt, max_lr=0.1, epochs=3, steps_per_epoch=4, pct_start=0.25, '
         "anneal_strategy='linear', three_phase=True)"),
        ADAM,
        None,
        [[0.052, 0.052], [0.1, 0.1], [0.052, 0.052], [0.004, 0.004],
         [0.003428628571429, 0.003428628571429], [0.002857257142857, 0.002857257142857],
         [0.002285885714286, 0.002285885714286], [0.001714514285714, 0.001714514285714],
         [0.001143142857143, 0.001143142857143], [0.000571771428571, 0.000571771428571],
         [4e-07, 4e-07]],
        [0.8999999999999999, 0.85, 0.8999999999999999, 0.95, 0.95, 0.95, 0.95, 0.95, 0.95, 0.95,
         0.95],
    ),
}


def _make(expr, make_opt):
    p, q = lg.nn.Parameter(lg.zeros(2)), lg.nn.Parameter(lg.zeros(1))
    opt = make_opt([{"params": [p]}, {"params": [q], "lr": 0.5}])
    return opt, eval("S." + expr, {"S": S, "opt": opt})


@pytest.mark.parametrize("name", sorted(SCHEDULES))
def test_scheduler_matches_pytorch(name):
    expr, make_opt, metrics, lrs, moms = SCHEDULES[name]
    opt, sched = _make(expr, make_opt)
    for i, (want, mom) in enumerate(zip(lrs, moms)):
        opt.step()
        sched.step() if metrics is None else sched.step(metrics[i])
        assert sched.get_last_lr() == pytest.approx(want, rel=1e-13, abs=1e-15), i
        assert [g["lr"] for g in opt.param_groups] == sched.get_last_lr()
        g = opt.param_groups[0]
        assert g.get("momentum", g.get("betas", (None,))[0]) == pytest.approx(mom, rel=1e-13)


@pytest.mark.parametrize("name", ["cosine", "onecycle", "plateau", "multistep"])
def test_scheduler_state_dict_round_trip(name):
    expr, make_opt, metrics, lrs, _ = SCHEDULES[name]
    opt, sched = _make(expr, make_opt)
    for i in range(5):
        opt.step()
        sched.step() if metrics is None else sched.step(metrics[i])
    state = pickle.loads(pickle.dumps(sched.state_dict()))
    assert "optimizer" not in state and state["last_epoch"] == 5
    opt2, sched2 = _make(expr, make_opt)
    opt2.load_state_dict(copy.deepcopy(opt.state_dict()))
    sched2.load_state_dict(state)
    for i in range(5, len(lrs)):
        opt2.step()
        sched2.step() if metrics is None else sched2.step(metrics[i])
        assert sched2.get_last_lr() == pytest.approx(lrs[i], rel=1e-13, abs=1e-15)


def test_lambda_lr_state_dict_skips_functions_and_keeps_callable_objects():
    class Warmup:
        def __init__(self):
            self.scale = 2.0

        def __call__(self, epoch):
            return self.scale * (epoch + 1)
    opt = _sgd([lg.nn.Parameter(lg.zeros(1))])
    w = Warmup()
    sched = S.LambdaLR(opt, [w])
    state = sched.state_dict()
    assert state["lr_lambdas"] == [{"scale": 2.0}]
    w.scale = 5.0
    sched.load_state_dict(state)
    assert w.scale == 2.0
    state = S.LambdaLR(_sgd([lg.nn.Parameter(lg.zeros(1))]), lambda e: 1.0).state_dict()
    assert state["lr_lambdas"] == [None]


def test_scheduler_closed_form_and_warnings():
    opt, sched = _make("StepLR(opt, step_size=3, gamma=0.5)", SGD)
    with pytest.warns(UserWarning, match="before `optimizer.step\\(\\)`"):
        sched.step()
    with pytest.warns(UserWarning, match="epoch parameter"):
        sched.step(7)
    assert sched.get_last_lr() == [0.25, 0.125] and sched.last_epoch == 7
    with pytest.raises(KeyError, match="initial_lr"):
        S.StepLR(_sgd([lg.nn.Parameter(lg.zeros(1))]), 2, last_epoch=3)
    with pytest.raises(TypeError, match="is not an Optimizer"):
        S.ExponentialLR(object(), 0.5)
    with pytest.raises(ValueError, match="Factor should be < 1.0"):
        S.ReduceLROnPlateau(opt, factor=2.0)
    with pytest.raises(ValueError, match="total_steps OR"):
        S.OneCycleLR(opt, max_lr=1.0)
    with pytest.raises(ValueError, match="optimizer must support momentum"):
        S.OneCycleLR(optim.Adagrad([lg.nn.Parameter(lg.zeros(1))]), max_lr=1.0, total_steps=4)
    opt, sched = _make("OneCycleLR(opt, max_lr=1.0, total_steps=2)", SGD)
    with warnings.catch_warnings(), pytest.raises(ValueError, match="Tried to step 3 times"):
        warnings.simplefilter("ignore")
        for _ in range(3):
            opt.step()
            sched.step()
