"""Workloads with Python control flow (issue 5): ``recurrence``, ``lorenz_rk4``, ``newton``, ``rnn``.

All float64. Each is written once as the plain numpy function a user would decorate with
``@llgrad.differentiate`` (loops and ``while`` over traced values included); that function is
also the reference forward, runs unchanged under HIPS autograd (``np`` rebound), and is
compiled unchanged by Numba for the forward baseline. PyTorch runs it op by op (eager), JAX
is written idiomatically with ``lax.fori_loop`` / ``lax.scan``.

``recurrence``
    ``x`` of n=100,000 (N(0,1), seed 4); ``s = x[0]``; ``s = 0.9*s + sin(x[i])*x[i-1]`` for
    i = 1..n-1; loss = s; gradient w.r.t. x. PyTorch indexes ``x.unbind()`` (indexing ``x[i]``
    would allocate a full-size gradient per element in backward). HIPS autograd has no such
    way out (array and list indexing both allocate a full-size gradient per element in
    backward, so the loop is quadratic: hours at this n); its row is skipped with that reason.

``lorenz_rk4``
    Lorenz system, classic RK4, dt=0.01, 1,000 steps from (1, 1, 1), theta = (sigma, rho, beta)
    = (10, 28, 8/3); loss = x^2 + y^2 + z^2 of the final state; gradient w.r.t. theta.

``newton``
    For 1,000 pairs (a_j in [1, 3], b_j in [-5, 5], seed 5) solve x^3 + a_j x - b_j = 0 by
    Newton's method from x = 1, in a ``while |f(x)| > 1e-12 and it < 50`` loop per pair (a
    scalar loop inside a for loop); loss = sum_j x_j^2; gradient w.r.t. (a, b), differentiating
    through the iterations. JAX cannot reverse-differentiate ``lax.while_loop``: its version
    runs a fixed 20 Newton steps (``lax.fori_loop``), vectorised over the pairs — marked in the
    table.

``rnn``
    tanh RNN, input 32, hidden 64, 100 steps, batch 16 (inputs N(0,1), seed 6; Wx, Wh scaled
    by 1/sqrt(fan-in)); ``h_t = tanh(x_t @ Wx + h_{t-1} @ Wh + b)``, h_0 = 0; loss =
    sum(h_100 ** 2); gradient w.r.t. (Wx, Wh, b). Batch 16 so the per-step matmuls are real
    matrix products rather than pure call overhead.
"""

from __future__ import annotations

import numpy as np

from ..harness import Goal, Impl, Skip, Workload, need
from ._common import autograd_vg, jax_vg, llgrad_compiled, numba_fwd, numpy_fwd


def _loop_goals(extra=()):
    return list(extra) + [
        Goal.faster("llgrad", "jax", "llgrad gradient faster than JAX jit(grad)"),
        Goal.at_most("llgrad", "numba-fwd", 4.0, "llgrad value+grad <= 4x Numba forward"),
        Goal.first_call("llgrad", 1.0),
    ]


def _eager_speedups():
    return [Goal.speedup("llgrad", "torch", 1000, "llgrad >= 1000x faster than PyTorch eager"),
            Goal.speedup("llgrad", "autograd", 1000, "llgrad >= 1000x faster than HIPS autograd")]


# ----------------------------------------------------------------------- recurrence ----

def recurrence(x):
    """Plain numpy user code (reference; llgrad; autograd; Numba)."""
    s = x[0]
    for i in range(1, len(x)):
        s = 0.9 * s + np.sin(x[i]) * x[i - 1]
    return s


def _torch_recurrence(inputs):
    torch = need("torch")
    x = torch.tensor(inputs["x"], requires_grad=True)

    def run():
        xs = x.unbind(0)
        s = xs[0]
        for i in range(1, len(xs)):
            s = 0.9 * s + torch.sin(xs[i]) * xs[i - 1]
        s.backward()
        g = x.grad
        x.grad = None
        return s, (g,)
    return run


def _jax_recurrence(jax, jnp, lax):
    def f(x):
        def body(i, s):
            return 0.9 * s + jnp.sin(x[i]) * x[i - 1]
        return lax.fori_loop(1, x.shape[0], body, x[0])
    return f


def _autograd_recurrence(inputs):
    if len(inputs["x"]) > AUTOGRAD_MAX_N:
        raise Skip(
            "HIPS autograd is quadratic here: every x[i] (array or list) allocates a full-size "
            "gradient in backward (~25 s at n=2,000 on this machine, hours at n=100,000); "
            "not run")
    return autograd_vg(recurrence, ("x",)).setup(inputs)


AUTOGRAD_MAX_N = 2_000

recurrence_wl = Workload(
    name="recurrence",
    description="s = 0.9*s + sin(x[i])*x[i-1], n=100,000, grad wrt x",
    issue="issue 5",
    make_inputs=lambda: {"x": np.random.default_rng(4).standard_normal(100_000)},
    forward=recurrence,
    wrt=("x",),
    impls=[
        llgrad_compiled(recurrence, ("x",)),
        Impl("torch", _torch_recurrence, "v+g", "eager, per-step ops on x.unbind()"),
        jax_vg(_jax_recurrence, ("x",), from_numpy=False, note="jit(value_and_grad), lax.fori_loop"),
        Impl("autograd", _autograd_recurrence, "v+g"),
        numba_fwd(recurrence, note="njit of the same source, forward only"),
    ],
    goals=_loop_goals(_eager_speedups()),
    fallback_ref="numba-fwd",
    per_item=(100_000, "step"),
)


# ----------------------------------------------------------------------- lorenz_rk4 ----

RK4_STEPS = 1000
RK4_DT = 0.01


def lorenz(x, y, z, sigma, rho, beta):
    return sigma * (y - x), x * (rho - z) - y, x * y - beta * z


def lorenz_rk4(theta, state0):
    """Plain numpy user code: RK4 with a helper function, loss = |final state|^2."""
    sigma, rho, beta = theta[0], theta[1], theta[2]
    x, y, z = state0[0], state0[1], state0[2]
    h = RK4_DT
    for _ in range(RK4_STEPS):
        k1x, k1y, k1z = lorenz(x, y, z, sigma, rho, beta)
        k2x, k2y, k2z = lorenz(x + 0.5 * h * k1x, y + 0.5 * h * k1y, z + 0.5 * h * k1z,
                               sigma, rho, beta)
        k3x, k3y, k3z = lorenz(x + 0.5 * h * k2x, y + 0.5 * h * k2y, z + 0.5 * h * k2z,
                               sigma, rho, beta)
        k4x, k4y, k4z = lorenz(x + h * k3x, y + h * k3y, z + h * k3z, sigma, rho, beta)
        x = x + h / 6.0 * (k1x + 2.0 * k2x + 2.0 * k3x + k4x)
        y = y + h / 6.0 * (k1y + 2.0 * k2y + 2.0 * k3y + k4y)
        z = z + h / 6.0 * (k1z + 2.0 * k2z + 2.0 * k3z + k4z)
    return x * x + y * y + z * z


def _torch_lorenz(inputs):
    torch = need("torch")
    theta = torch.tensor(inputs["theta"], requires_grad=True)
    state0 = [float(v) for v in inputs["state0"]]

    def run():
        y = lorenz_rk4(theta.unbind(0), state0)   # same source: only arithmetic on tensors
        y.backward()
        g = theta.grad
        theta.grad = None
        return y, (g,)
    return run


def _jax_lorenz(jax, jnp, lax):
    def f(theta, state0):
        sigma, rho, beta = theta[0], theta[1], theta[2]
        h = RK4_DT

        def step(_, s):
            x, y, z = s
            k1 = lorenz(x, y, z, sigma, rho, beta)
            k2 = lorenz(*(v + 0.5 * h * k for v, k in zip(s, k1)), sigma, rho, beta)
            k3 = lorenz(*(v + 0.5 * h * k for v, k in zip(s, k2)), sigma, rho, beta)
            k4 = lorenz(*(v + h * k for v, k in zip(s, k3)), sigma, rho, beta)
            return tuple(v + h / 6.0 * (a + 2.0 * b + 2.0 * c + d)
                         for v, a, b, c, d in zip(s, k1, k2, k3, k4))

        x, y, z = lax.fori_loop(0, RK4_STEPS, step, (state0[0], state0[1], state0[2]))
        return x * x + y * y + z * z
    return f


lorenz_wl = Workload(
    name="lorenz_rk4",
    description="Lorenz RK4, dt=0.01, 1,000 steps, grad of |final state|^2 wrt (sigma, rho, beta)",
    issue="issue 5",
    make_inputs=lambda: {"theta": np.array([10.0, 28.0, 8.0 / 3.0]),
                         "state0": np.array([1.0, 1.0, 1.0])},
    forward=lorenz_rk4,
    wrt=("theta",),
    impls=[
        llgrad_compiled(lorenz_rk4, ("theta",)),
        Impl("torch", _torch_lorenz, "v+g", "eager, 0-d tensor ops"),
        jax_vg(_jax_lorenz, ("theta",), from_numpy=False, note="jit(value_and_grad), lax.fori_loop"),
        autograd_vg(lorenz_rk4, ("theta",)),
        numba_fwd(lorenz_rk4, helpers=("lorenz",), note="njit of the same source, forward only"),
    ],
    goals=_loop_goals(_eager_speedups()),
    fallback_ref="numba-fwd",
    per_item=(RK4_STEPS, "step"),
    value_rtol=1e-8, fd_rtol=1e-4, grad_rtol=1e-6,
)


# --------------------------------------------------------------------------- newton ----

NEWTON_FIXED_ITERS = 20


def newton(a, b):
    """Plain numpy user code: a Newton while-loop per (a_j, b_j), loss = sum of roots^2."""
    total = 0.0
    for j in range(len(a)):
        aj = a[j]
        bj = b[j]
        x = 1.0
        fx = x * x * x + aj * x - bj
        it = 0
        while abs(fx) > 1e-12 and it < 50:
            x = x - fx / (3.0 * x * x + aj)
            fx = x * x * x + aj * x - bj
            it += 1
        total = total + x * x
    return total


def _torch_newton(inputs):
    torch = need("torch")
    a = torch.tensor(inputs["a"], requires_grad=True)
    b = torch.tensor(inputs["b"], requires_grad=True)

    def run():
        y = newton(a.unbind(0), b.unbind(0))   # same source: arithmetic + bool() on tensors
        y.backward()
        ga, gb = a.grad, b.grad
        a.grad = b.grad = None
        return y, (ga, gb)
    return run


def _jax_newton(jax, jnp, lax):
    def f(a, b):
        def body(_, x):
            fx = x * x * x + a * x - b
            return x - fx / (3.0 * x * x + a)
        x = lax.fori_loop(0, NEWTON_FIXED_ITERS, body, jnp.ones_like(a))
        return jnp.sum(x * x)
    return f


def _newton_inputs():
    rng = np.random.default_rng(5)
    return {"a": rng.uniform(1.0, 3.0, 1000), "b": rng.uniform(-5.0, 5.0, 1000)}


newton_wl = Workload(
    name="newton",
    description="Newton while-loop for x^3+a*x-b=0 per pair, 1,000 pairs, grad of sum x^2 wrt (a, b)",
    issue="issue 5",
    make_inputs=_newton_inputs,
    forward=newton,
    wrt=("a", "b"),
    impls=[
        llgrad_compiled(newton, ("a", "b")),
        Impl("torch", _torch_newton, "v+g", "eager, 0-d tensor ops, while on bool(tensor)"),
        jax_vg(_jax_newton, ("a", "b"), from_numpy=False,
               note=f"NOT the same loop: fixed {NEWTON_FIXED_ITERS} steps (lax.fori_loop), "
                    "vectorised over pairs; lax.while_loop has no reverse mode"),
        autograd_vg(newton, ("a", "b")),
        numba_fwd(newton, note="njit of the same source, forward only"),
    ],
    goals=_loop_goals(),
    fallback_ref="numba-fwd",
    fd_rtol=1e-5, grad_rtol=1e-7,
)


# ------------------------------------------------------------------------------ rnn ----

def rnn(Wx, Wh, b, xs):
    """Plain numpy user code: tanh RNN over time, loss = sum of the final hidden state squared."""
    h = np.zeros((xs.shape[1], Wh.shape[0]))
    for t in range(xs.shape[0]):
        h = np.tanh(xs[t] @ Wx + h @ Wh + b)
    return np.sum(h * h)


def _torch_rnn(inputs):
    torch = need("torch")
    Wx, Wh, b = (torch.tensor(inputs[k], requires_grad=True) for k in ("Wx", "Wh", "b"))
    xs = torch.tensor(inputs["xs"])

    def run():
        h = torch.zeros((xs.shape[1], Wh.shape[0]), dtype=torch.float64)
        for t in range(xs.shape[0]):
            h = torch.tanh(xs[t] @ Wx + h @ Wh + b)
        y = (h * h).sum()
        y.backward()
        grads = (Wx.grad, Wh.grad, b.grad)
        Wx.grad = Wh.grad = b.grad = None
        return y, grads
    return run


def _jax_rnn(jax, jnp, lax):
    def f(Wx, Wh, b, xs):
        def step(h, x):
            return jnp.tanh(x @ Wx + h @ Wh + b), None
        h, _ = lax.scan(step, jnp.zeros((xs.shape[1], Wh.shape[0])), xs)
        return jnp.sum(h * h)
    return f


def _rnn_inputs():
    rng = np.random.default_rng(6)
    I, H, T, B = 32, 64, 100, 16
    return {"Wx": rng.standard_normal((I, H)) / np.sqrt(I),
            "Wh": rng.standard_normal((H, H)) / np.sqrt(H),
            "b": rng.standard_normal(H) * 0.1,
            "xs": rng.standard_normal((T, B, I))}


RNN_WRT = ("Wx", "Wh", "b")

rnn_wl = Workload(
    name="rnn",
    description="tanh RNN, input 32, hidden 64, 100 steps, batch 16, grad of sum(h_T^2) wrt weights",
    issue="issue 5",
    make_inputs=_rnn_inputs,
    forward=rnn,
    wrt=RNN_WRT,
    impls=[
        llgrad_compiled(rnn, RNN_WRT),
        Impl("torch", _torch_rnn, "v+g", "eager"),
        jax_vg(_jax_rnn, RNN_WRT, from_numpy=False, note="jit(value_and_grad), lax.scan"),
        autograd_vg(rnn, RNN_WRT),
        numba_fwd(rnn, note="njit of the same source, forward only"),
        numpy_fwd(rnn),
    ],
    goals=_loop_goals(),
    fallback_ref="numba-fwd",
    per_item=(100, "step"),
)

WORKLOADS = [recurrence_wl, lorenz_wl, newton_wl, rnn_wl]
