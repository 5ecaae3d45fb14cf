"""Eager-mode workloads (issues 2, 15): per-op overhead and an MLP training step.

``eager_overhead``
    1,000 chained scalar ops, forward and backward, on a 1-element float64 tensor ``x``
    (start 0.5). 250 blocks of exactly four ops::

        a = sin(x); a = a * 0.001; x = x + a; x = x * 0.9999

    followed by ``sum`` (so the output is a scalar), then ``backward``; the result is the
    value and ``dloss/dx``. The gain per block is ~1, so the gradient stays O(1).

``eager_chain``
    Issue 15's measurement: 1,000 steps ``y = y * a + c`` on a 0-d float64 tensor with Python
    floats ``a = 0.999``, ``c = 0.001`` (2,000 ops), then ``autograd.grad(y, x)``. Its variants
    (1-d, float32, tensor operands, ``backward()``) are tabulated side by side by
    ``python -m benchmarks.eager_overhead --variants``.

``mlp_step``
    One SGD training step (lr 0.01) of a 784-128-10 MLP: ``tanh`` hidden layer, softmax
    cross-entropy against one-hot labels, mean over a batch of 64; float32 (PyTorch's
    default). The timed unit is forward + backward + parameter update; the result checked is
    the loss and the gradients w.r.t. (W1, b1, W2, b2) at the initial parameters.

Implementations: ``llgrad`` (eager tensors, written with the PyTorch API exactly as for
torch), ``torch`` (eager), ``autograd`` (HIPS), ``jax`` (``jit(value_and_grad)``; compiled, not
eager), a hand-written numpy forward+backward (the floor), and ``llgrad-jit``
(``@llgrad.differentiate`` of the plain numpy loss, issue 4).
"""

from __future__ import annotations

import numpy as np

from ..harness import Goal, Impl, Workload, need
from ._common import autograd_vg, jax_vg, llgrad_compiled

N_BLOCKS = 250      # 4 ops each -> 1,000 ops
LR = 0.01


# ------------------------------------------------------------------ eager_overhead ----

def chain(x):
    """Plain numpy version (reference forward; also compiled by llgrad-jit, run by autograd/JAX)."""
    for _ in range(N_BLOCKS):
        a = np.sin(x)
        a = a * 0.001
        x = x + a
        x = x * 0.9999
    return np.sum(x)


def chain_torch_style(x):
    """The same chain written against the PyTorch tensor API (used by torch *and* llgrad)."""
    for _ in range(N_BLOCKS):
        a = x.sin()
        a = a * 0.001
        x = x + a
        x = x * 0.9999
    return x.sum()


def _eager_chain(module: str, attr: str):
    """torch / llgrad eager: same code, different import (the PyTorch-compatibility promise)."""
    def setup(inputs):
        T = need(module, attr)
        x = T.tensor(inputs["x"], dtype=T.float64, requires_grad=True)

        def run():
            y = chain_torch_style(x)
            y.backward()
            g = x.grad
            x.grad = None
            return y, (g,)
        return run
    return setup


def _numpy_chain_manual(inputs):
    x0 = inputs["x"].copy()

    def run():
        x = x0
        saved = []
        for _ in range(N_BLOCKS):
            saved.append(x)
            a = np.sin(x)
            a = a * 0.001
            x = x + a
            x = x * 0.9999
        y = np.sum(x)
        g = np.ones_like(x)
        for xs in reversed(saved):
            g = g * 0.9999
            g = g + g * (0.001 * np.cos(xs))
        return y, (g,)
    return run


eager_overhead = Workload(
    name="eager_overhead",
    description="1,000 chained scalar ops (sin, *, +, *) on a 1-element float64 tensor, fwd+bwd",
    issue="issue 2",
    make_inputs=lambda: {"x": np.array([0.5])},
    forward=chain,
    wrt=("x",),
    impls=[
        Impl("llgrad", _eager_chain("llgrad", "tensor"), "v+g", "eager tensors, PyTorch API"),
        Impl("torch", _eager_chain("torch", "tensor"), "v+g", "eager"),
        autograd_vg(chain, ("x",)),
        jax_vg(chain, ("x",), note="jit(value_and_grad): compiled, not eager"),
        Impl("numpy-manual", _numpy_chain_manual, "v+g", "hand-written forward+backward (floor)"),
        llgrad_compiled(chain, ("x",), name="llgrad-jit", note="@llgrad.differentiate"),
    ],
    goals=[
        Goal.at_most("llgrad", "torch", 1.5, "llgrad eager per-op overhead <= 1.5x PyTorch eager"),
        Goal.faster("llgrad", "autograd", "llgrad eager ahead of HIPS autograd"),
    ],
    fallback_ref="torch",
    per_item=(1000, "op"),
)


# --------------------------------------------------------------------- eager_chain ----

N_CHAIN = 1000      # steps of y * a + c -> 2,000 ops
CHAIN_A, CHAIN_C = 0.999, 0.001


def affine(x):
    """Plain numpy reference: y = y * a + c, N_CHAIN times."""
    y = x
    for _ in range(N_CHAIN):
        y = y * CHAIN_A + CHAIN_C
    return y


def affine_torch_style(x, a, c):
    """The same chain with the PyTorch API (torch and llgrad); `a`, `c` numbers or tensors."""
    y = x
    for _ in range(N_CHAIN):
        y = y * a + c
    return y


def _eager_affine(module: str):
    def setup(inputs):
        T = need(module, "tensor")
        x = T.tensor(inputs["x"], dtype=T.float64, requires_grad=True)

        def run():
            y = affine_torch_style(x, CHAIN_A, CHAIN_C)
            return y, T.autograd.grad(y, x)
        return run
    return setup


eager_chain = Workload(
    name="eager_chain",
    description="1,000 x (y * a + c), 0-d float64 tensor, Python-float a and c, autograd.grad",
    issue="issue 15",
    make_inputs=lambda: {"x": np.array(0.5)},
    forward=affine,
    wrt=("x",),
    impls=[
        Impl("llgrad", _eager_affine("llgrad"), "v+g", "eager tensors, PyTorch API"),
        Impl("torch", _eager_affine("torch"), "v+g", "eager"),
    ],
    goals=[Goal.at_most("llgrad", "torch", 1.5, "llgrad eager per-op overhead <= 1.5x PyTorch")],
    fallback_ref="torch",
    per_item=(2 * N_CHAIN, "op"),
)


# ------------------------------------------------------------------------ mlp_step ----

def mlp_loss(W1, b1, W2, b2, X, Y):
    """Plain numpy loss (reference forward; compiled by llgrad-jit, run by autograd/JAX)."""
    h = np.tanh(X @ W1 + b1)
    logits = h @ W2 + b2
    m = np.max(logits, axis=1, keepdims=True)
    lse = np.log(np.sum(np.exp(logits - m), axis=1, keepdims=True)) + m
    return -np.sum(Y * (logits - lse)) / X.shape[0]


def mlp_step_torch_style(T, params, X, Y, lr):
    """One training step with the PyTorch API (used by torch *and* llgrad eager)."""
    W1, b1, W2, b2 = params
    h = (X @ W1 + b1).tanh()
    logits = h @ W2 + b2
    logp = logits - logits.logsumexp(dim=1, keepdim=True)
    loss = -(Y * logp).sum() / X.shape[0]
    loss.backward()
    grads = tuple(p.grad for p in params)
    with T.no_grad():
        for p in params:
            p.sub_(p.grad * lr)
            p.grad = None
    return loss, grads


def _mlp_inputs():
    rng = np.random.default_rng(1)
    f32 = np.float32
    labels = rng.integers(0, 10, size=64)
    return {
        "W1": (rng.standard_normal((784, 128)) * 0.05).astype(f32),
        "b1": (rng.standard_normal(128) * 0.1).astype(f32),
        "W2": (rng.standard_normal((128, 10)) * 0.1).astype(f32),
        "b2": (rng.standard_normal(10) * 0.1).astype(f32),
        "X": rng.standard_normal((64, 784)).astype(f32),
        "Y": np.eye(10, dtype=f32)[labels],
    }


PARAMS = ("W1", "b1", "W2", "b2")


def _eager_mlp(module: str, attr: str):
    def setup(inputs):
        T = need(module, attr)
        params = [T.tensor(inputs[k].copy(), requires_grad=True) for k in PARAMS]
        X, Y = T.tensor(inputs["X"]), T.tensor(inputs["Y"])
        return lambda: mlp_step_torch_style(T, params, X, Y, LR)
    return setup


def _autograd_mlp(inputs):
    impl = autograd_vg(mlp_loss, PARAMS)
    vals = dict(inputs, **{k: inputs[k].copy() for k in PARAMS})
    vg = impl.setup(vals)
    params = [vals[k] for k in PARAMS]

    def run():
        loss, grads = vg()
        for p, g in zip(params, grads):
            p -= LR * g
        return loss, grads
    return run


def _jax_mlp(inputs):
    jax = need("jax")
    jnp = need("jax.numpy")
    from ..harness import rebind
    loss = rebind(mlp_loss, np=jnp)

    @jax.jit
    def step(params, X, Y):
        value, grads = jax.value_and_grad(lambda ps: loss(*ps, X, Y))(params)
        return value, grads, tuple(p - LR * g for p, g in zip(params, grads))

    state = {"params": tuple(jnp.asarray(inputs[k]) for k in PARAMS)}
    X, Y = jnp.asarray(inputs["X"]), jnp.asarray(inputs["Y"])

    def run():
        value, grads, state["params"] = jax.block_until_ready(step(state["params"], X, Y))
        return value, grads
    return run


def _numpy_mlp_manual(inputs):
    W1, b1, W2, b2 = (inputs[k].copy() for k in PARAMS)
    X, Y = inputs["X"], inputs["Y"]
    B = X.shape[0]

    def run():
        h = np.tanh(X @ W1 + b1)
        logits = h @ W2 + b2
        m = logits.max(axis=1, keepdims=True)
        e = np.exp(logits - m)
        s = e.sum(axis=1, keepdims=True)
        loss = -np.sum(Y * (logits - m - np.log(s))) / B
        dlogits = (e / s - Y) / B
        gW2 = h.T @ dlogits
        gb2 = dlogits.sum(axis=0)
        dpre = (dlogits @ W2.T) * (1 - h * h)
        gW1 = X.T @ dpre
        gb1 = dpre.sum(axis=0)
        grads = (gW1, gb1, gW2, gb2)
        for p, g in zip((W1, b1, W2, b2), grads):
            p -= LR * g
        return loss, grads
    return run


def _llgrad_jit_mlp(inputs):
    vals = dict(inputs, **{k: inputs[k].copy() for k in PARAMS})
    vg = llgrad_compiled(mlp_loss, PARAMS).setup(vals)
    params = [vals[k] for k in PARAMS]

    def run():
        loss, grads = vg()
        for p, g in zip(params, grads):
            p -= LR * g
        return loss, grads
    return run


mlp_step = Workload(
    name="mlp_step",
    description="SGD step, MLP 784-128-10, tanh, softmax cross-entropy, batch 64, float32",
    issue="issues 2, 4",
    make_inputs=_mlp_inputs,
    forward=mlp_loss,
    wrt=PARAMS,
    impls=[
        Impl("llgrad", _eager_mlp("llgrad", "tensor"), "v+g", "eager tensors, PyTorch API"),
        Impl("torch", _eager_mlp("torch", "tensor"), "v+g", "eager"),
        Impl("autograd", _autograd_mlp, "v+g"),
        Impl("jax", _jax_mlp, "v+g", "jit(value_and_grad) + update in one jitted step"),
        Impl("numpy-manual", _numpy_mlp_manual, "v+g", "hand-written backprop (BLAS floor)"),
        Impl("llgrad-jit", _llgrad_jit_mlp, "v+g", "@llgrad.differentiate loss + numpy update"),
    ],
    goals=[
        Goal.at_most("llgrad", "torch", 1.5, "llgrad eager step <= 1.5x PyTorch (issue 2)"),
        Goal.at_most("llgrad-jit", "torch", 1.3, "llgrad compiled step <= 1.3x PyTorch (issue 4)"),
        Goal.first_call("llgrad-jit", 1.0, "llgrad-jit first call (trace+compile) < 1 s"),
    ],
    fallback_ref="torch",
    value_rtol=1e-4, fd_rtol=2e-3, grad_rtol=2e-3,
)

WORKLOADS = [eager_overhead, eager_chain, mlp_step]
