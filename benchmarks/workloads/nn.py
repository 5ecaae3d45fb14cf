"""Eager training steps of small networks (issue 15): the same PyTorch script run by torch and
by llgrad (``import llgrad as torch``), float32.

``cnn_step``
    One SGD step (lr 0.01) of a small CNN on a batch of 64 28x28 images: conv 3x3 1->16
    (padding 1), relu, conv 3x3 16->32 (padding 1), relu, 2x2 max-pool, linear 32*14*14->10,
    cross-entropy against integer labels. The timed unit is forward + backward + update; the
    checked result is the loss and the gradients at the initial parameters.

``lstm_step``
    One SGD step (lr 0.01) of an LSTM sequence classifier: nn.LSTM(32, 128, batch_first=True)
    over 50 steps of a batch of 32, linear 128->10 of the last hidden state, cross-entropy.

The float64 numpy references (``cnn_loss``, ``lstm_loss``) compute the same losses with plain
loops and einsum; they check values and (by finite differences) gradients.
"""

from __future__ import annotations

import numpy as np

from ..harness import Goal, Impl, Workload, need

LR = 0.01
CNN_PARAMS = ("w1", "b1", "w2", "b2", "w3", "b3")
LSTM_PARAMS = ("w_ih", "w_hh", "b_ih", "b_hh", "w_fc", "b_fc")


# ------------------------------------------------------------------------ references ----

def _conv3x3(x, w, b):
    """3x3 convolution, padding 1, by summing the nine shifted products."""
    n, c, h, wd = x.shape
    xp = np.zeros((n, c, h + 2, wd + 2))
    xp[:, :, 1:-1, 1:-1] = x
    out = np.zeros((n, w.shape[0], h, wd)) + b[None, :, None, None]
    for i in range(3):
        for j in range(3):
            out += np.einsum("nchw,oc->nohw", xp[:, :, i:i + h, j:j + wd], w[:, :, i, j])
    return out


def _cross_entropy(logits, y):
    m = logits.max(axis=1, keepdims=True)
    logp = logits - m - np.log(np.exp(logits - m).sum(axis=1, keepdims=True))
    return -np.mean(logp[np.arange(len(y)), y])


def cnn_loss(w1, b1, w2, b2, w3, b3, X, y):
    h = np.maximum(_conv3x3(X, w1, b1), 0)
    h = np.maximum(_conv3x3(h, w2, b2), 0)
    n, c, hh, ww = h.shape
    h = h.reshape(n, c, hh // 2, 2, ww // 2, 2).max(axis=(3, 5))
    return _cross_entropy(h.reshape(n, -1) @ w3.T + b3, y)


def lstm_loss(w_ih, w_hh, b_ih, b_hh, w_fc, b_fc, X, y):
    hd = w_hh.shape[1]
    h = c = np.zeros((X.shape[0], hd))
    for t in range(X.shape[1]):
        a = X[:, t] @ w_ih.T + b_ih + h @ w_hh.T + b_hh
        i, f, g, o = (1 / (1 + np.exp(-a[:, :hd])), 1 / (1 + np.exp(-a[:, hd:2 * hd])),
                      np.tanh(a[:, 2 * hd:3 * hd]), 1 / (1 + np.exp(-a[:, 3 * hd:])))
        c = f * c + i * g
        h = o * np.tanh(c)
    return _cross_entropy(h @ w_fc.T + b_fc, y)


# ---------------------------------------------------------------------------- inputs ----

def _uniform(rng, shape, fan_in):
    bound = 1 / np.sqrt(fan_in)  # PyTorch's default initialisation range
    return rng.uniform(-bound, bound, shape).astype(np.float32)


def _cnn_inputs():
    rng = np.random.default_rng(3)
    return {"w1": _uniform(rng, (16, 1, 3, 3), 9), "b1": _uniform(rng, (16,), 9),
            "w2": _uniform(rng, (32, 16, 3, 3), 144), "b2": _uniform(rng, (32,), 144),
            "w3": _uniform(rng, (10, 32 * 14 * 14), 6272), "b3": _uniform(rng, (10,), 6272),
            "X": rng.standard_normal((64, 1, 28, 28)).astype(np.float32),
            "y": rng.integers(0, 10, 64)}


def _lstm_inputs():
    rng = np.random.default_rng(4)
    return {"w_ih": _uniform(rng, (512, 32), 128), "w_hh": _uniform(rng, (512, 128), 128),
            "b_ih": _uniform(rng, (512,), 128), "b_hh": _uniform(rng, (512,), 128),
            "w_fc": _uniform(rng, (10, 128), 128), "b_fc": _uniform(rng, (10,), 128),
            "X": rng.standard_normal((32, 50, 32)).astype(np.float32),
            "y": rng.integers(0, 10, 32)}


# ------------------------------------------------------------- the PyTorch scripts ----

def _cnn_model(T, inputs):
    nn = T.nn
    model = nn.Sequential(nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(),
                          nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                          nn.Flatten(), nn.Linear(32 * 14 * 14, 10))
    names = ["0.weight", "0.bias", "2.weight", "2.bias", "6.weight", "6.bias"]
    model.load_state_dict({k: T.tensor(inputs[p].copy()) for k, p in zip(names, CNN_PARAMS)})
    return model, lambda X: model(X)


def _lstm_model(T, inputs):
    nn = T.nn
    lstm, fc = nn.LSTM(32, 128, batch_first=True), nn.Linear(128, 10)
    lstm.load_state_dict({f"{name}_l0": T.tensor(inputs[p].copy()) for name, p in zip(
        ("weight_ih", "weight_hh", "bias_ih", "bias_hh"), LSTM_PARAMS)})
    fc.load_state_dict({"weight": T.tensor(inputs["w_fc"].copy()),
                        "bias": T.tensor(inputs["b_fc"].copy())})
    model = T.nn.ModuleList([lstm, fc])

    def forward(X):
        _, (h, _) = lstm(X)
        return fc(h[-1])
    return model, forward


def _eager_step(make_model, module: str):
    """torch / llgrad: one script, two imports. Returns (loss, grads in the order of the
    workload's parameters) at the parameters before the update."""
    def setup(inputs):
        T = need(module, "nn")
        model, forward = make_model(T, inputs)
        params = list(model.parameters())
        opt = T.optim.SGD(params, lr=LR)
        X, y = T.tensor(inputs["X"]), T.tensor(inputs["y"])

        def run():
            loss = T.nn.functional.cross_entropy(forward(X), y)
            opt.zero_grad()
            loss.backward()
            grads = tuple(p.grad.clone() for p in params)
            opt.step()
            return loss, grads
        return run
    return setup


cnn_step = Workload(
    name="cnn_step",
    description="SGD step, CNN conv3x3 1->16->32 on 28x28, maxpool, linear, batch 64, f32",
    issue="issue 15",
    make_inputs=_cnn_inputs,
    forward=cnn_loss,
    wrt=CNN_PARAMS,
    impls=[
        Impl("llgrad", _eager_step(_cnn_model, "llgrad"), "v+g", "eager, nn.Conv2d etc."),
        Impl("torch", _eager_step(_cnn_model, "torch"), "v+g", "eager (oneDNN convolutions)"),
    ],
    goals=[Goal.at_most("llgrad", "torch", 2.0, "llgrad eager step <= 2x PyTorch (issue 15)")],
    fallback_ref="torch",
    value_rtol=1e-4, fd_rtol=5e-3, grad_rtol=2e-3,
)

lstm_step = Workload(
    name="lstm_step",
    description="SGD step, LSTM(32, 128) over 50 steps, batch 32, linear head, f32",
    issue="issue 15",
    make_inputs=_lstm_inputs,
    forward=lstm_loss,
    wrt=LSTM_PARAMS,
    impls=[
        Impl("llgrad", _eager_step(_lstm_model, "llgrad"), "v+g", "eager, nn.LSTM"),
        Impl("torch", _eager_step(_lstm_model, "torch"), "v+g", "eager (oneDNN LSTM)"),
    ],
    goals=[Goal.at_most("llgrad", "torch", 2.0, "llgrad eager step <= 2x PyTorch (issue 15)")],
    fallback_ref="torch",
    value_rtol=1e-4, fd_rtol=5e-3, grad_rtol=2e-3,
)

WORKLOADS = [cnn_step, lstm_step]
