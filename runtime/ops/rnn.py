"""Recurrent layers as primitives: one eager node per layer and direction runs the whole time
loop (the input projection x @ W_ih^T + b is one matmul outside, by the caller).

    rnn_layer(gx, h0, w_hh; nonlinearity)   h_t = act(gx_t + h_{t-1} @ w_hh^T)
    lstm_layer(gx, h0, c0, w_hh)            gates (i, f, g, o), PyTorch's order
    gru_layer(gx, h0, w_hh, b_hh)           gates (r, z, n); b_hh inside r * (...), as PyTorch

gx is (T, N, G*H) with both biases folded in (for GRU only b_ih: b_hn sits inside the reset
gate); results are the hidden states of every step, (T, N, H), and for the LSTM the cell
states too. Each layer's forward and its backpropagation through time are written once,
against an array namespace `xp` (Note [Recurrences run on numpy or on ops]).
"""
from __future__ import annotations

import numpy as np

from llgrad.runtime.aval import Aval, ShapeError
from llgrad.runtime.ops import elementwise as ew
from llgrad.runtime.ops._util import shape_of
from llgrad.runtime.prim import _DEFAULT, Primitive, bind, register

# Note [Recurrences run on numpy or on ops]
# A layer is a loop of small steps, so per-op overhead dominates if each step is a few graph
# ops. The forward (`_lstm_forward`, ...) and the backward sweep (`_lstm_sweep`, ...) are
# therefore written against a namespace `xp` of array functions and run on one of two:
# NUMPY (plain ndarrays: the eager impl, and the backward when no graph is recorded, i.e.
# backward() without create_graph) or OPS (the ops API: the compiler's decomposition, and the
# backward under create_graph, which then records a differentiable graph). Same formulas,
# same order of operations, so both give the same numbers. One exception: the LSTM's eager
# forward (`_lstm_forward_numpy`) computes _lstm_forward's formulas in the same order but
# into its preallocated results, which saved 4% of an LSTM training step (benchmarks
# lstm_step); a test holds it to _lstm_forward on numpy bit for bit.


def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))  # exp overflows to inf for very negative x: 0, exactly


def _on_numpy(fn, *arrays, **params):
    """fn(NUMPY, ...) with exp's overflow to inf allowed (the sigmoids), set once for the whole
    loop rather than at each step."""
    with np.errstate(over="ignore"):
        return fn(NUMPY, *arrays, **params)


class NUMPY:
    add, sub, mul, matmul, tanh = np.add, np.subtract, np.multiply, np.matmul, np.tanh
    sigmoid = staticmethod(_sigmoid)
    concatenate, stack = staticmethod(np.concatenate), staticmethod(np.stack)

    @staticmethod
    def relu(x):
        return np.maximum(x, 0)

    @staticmethod
    def T(w):
        return w.T

    @staticmethod
    def sum(x, axes):
        return x.sum(axes)

    @staticmethod
    def reshape(x, shape):
        return x.reshape(shape)

    @staticmethod
    def positive(x):
        return x > 0

    @staticmethod
    def select(c, g):
        """g where c, else exactly 0 (an inf or NaN g does not leak, as relu's gradient)."""
        return ew.where_p.impl(c, g, np.zeros((), g.dtype))

    @staticmethod
    def lstm_gates(a, hd):
        """sigmoid of a (N, 4H) but tanh of its third quarter, in place (a is a temporary)."""
        g = np.tanh(a[:, 2 * hd:3 * hd])
        np.negative(a, out=a)
        np.exp(a, out=a)  # (overflow allowed by _on_numpy)
        a += 1.0
        np.reciprocal(a, out=a)
        a[:, 2 * hd:3 * hd] = g
        return a


class OPS:
    add, sub, mul, tanh, sigmoid, relu = ew.add, ew.sub, ew.mul, ew.tanh, ew.sigmoid, ew.relu

    @staticmethod
    def matmul(a, b):
        from llgrad.runtime.ops.linalg import matmul
        return matmul(a, b)

    @staticmethod
    def T(w):
        from llgrad.runtime.ops.shape import swapaxes
        return swapaxes(w, 0, 1)

    @staticmethod
    def concatenate(xs, axis):
        from llgrad.runtime.ops.shape import concatenate
        return concatenate(xs, axis)

    @staticmethod
    def stack(xs, axis):
        from llgrad.runtime.ops.shape import stack
        return stack(xs, axis)

    @staticmethod
    def sum(x, axes):
        from llgrad.runtime.ops.reduce import sum
        return sum(x, axes)

    @staticmethod
    def reshape(x, shape):
        from llgrad.runtime.ops.shape import reshape
        return reshape(x, shape)

    @staticmethod
    def positive(x):
        return ew.gt(x, 0.0)

    @staticmethod
    def select(c, g):
        return ew.where(c, g, 0.0)

    @staticmethod
    def lstm_gates(a, hd):
        return OPS.concatenate([ew.sigmoid(a[..., :2 * hd]), ew.tanh(a[..., 2 * hd:3 * hd]),
                                ew.sigmoid(a[..., 3 * hd:])], -1)


def _run(fn, arrays, params):
    """fn(xp, *arrays, **params) on ndarrays when every operand is eager and no graph is
    being recorded, else on ops; results as values of the caller's kind."""
    from llgrad.runtime.autograd.state import STATE
    tensor = _DEFAULT[0]
    flat = [a for a in arrays if a is not None and not isinstance(a, tuple)] + [
        b for a in arrays if isinstance(a, tuple) for b in a if b is not None]
    if STATE.grad_enabled or not all(isinstance(a, (tensor, np.ndarray)) for a in flat):
        return fn(OPS, *arrays, **params)

    def raw(a):
        if isinstance(a, tuple):
            return tuple(raw(b) for b in a)
        return a._data if isinstance(a, tensor) else a
    out = _on_numpy(fn, *(raw(a) for a in arrays), **params)
    return tuple(None if o is None else tensor._wrap(np.asarray(o)) for o in out)


# Note [One sweep for every input]
# A layer's VJP rules (one per input: gx, h0, c0, w_hh, ...) all need the same backward
# sweep through time, which costs as much as the forward. The engine (and the IR AD) calls the
# rules of one node one after another with the same `g` and `out` objects, so the sweep is
# kept in a one-entry memo keyed by their identity (and the inputs'); the next node's call
# replaces it. A miss only recomputes, so this never changes a result.
_MEMO: list = [None, None]


def _memo(sweep, g, out, *inputs, **params):
    key = (sweep, g, out) + inputs
    old = _MEMO[0]
    if old is not None and len(old) == len(key) and all(a is b for a, b in zip(old, key)):
        return _MEMO[1]
    result = _run(sweep, (g, out) + inputs, params)
    _MEMO[0], _MEMO[1] = key, result
    return result


def _rules(sweep, n):
    def rule(i):
        return lambda g, out, *inputs, **params: _memo(sweep, g, out, *inputs, **params)[i]
    return tuple(rule(i) for i in range(n))


def _prev(xp, h0, hs):
    """The state before each step: h0, h_0, ..., h_{T-2}, as (T, N, H)."""
    return xp.concatenate([h0[None], hs[:-1]], 0)


def _weight_grads(xp, dgates, hprev):
    """dW_hh = sum_t dgates_t^T @ h_{t-1}, as one matmul over all steps."""
    t, n, gh = shape_of(dgates)
    return xp.matmul(xp.T(xp.reshape(dgates, (t * n, gh))), xp.reshape(hprev, (t * n, -1)))


def _acc(xp, *terms):
    """The sum of the terms that are not None (None when all are)."""
    out = None
    for t in terms:
        if t is not None:
            out = t if out is None else xp.add(out, t)
    return out


# ---- Elman RNN --------------------------------------------------------------------------------
def _rnn_forward(xp, gx, h0, w_hh, nonlinearity):
    act = xp.tanh if nonlinearity == "tanh" else xp.relu
    h, hs, wt = h0, [], xp.T(w_hh)
    for t in range(shape_of(gx)[0]):
        h = act(xp.add(gx[t], xp.matmul(h, wt)))
        hs.append(h)
    return (xp.stack(hs, 0),)


def _rnn_sweep(xp, g, hs, gx, h0, w_hh, nonlinearity):
    if nonlinearity == "tanh":
        deriv = xp.sub(1.0, xp.mul(hs, hs))
    else:
        active = xp.positive(hs)
    dh, dpre = None, [None] * shape_of(gx)[0]
    for k in reversed(range(len(dpre))):
        d = _acc(xp, g[k], dh)
        dpre[k] = xp.mul(d, deriv[k]) if nonlinearity == "tanh" else xp.select(active[k], d)
        dh = xp.matmul(dpre[k], w_hh)
    dgx = xp.stack(dpre, 0)
    return dgx, dh, _weight_grads(xp, dgx, _prev(xp, h0, hs))


rnn_layer_p = register(Primitive(
    "rnn_layer", "rnn", lambda *a, **p: _on_numpy(_rnn_forward, *a, **p)[0],
    lambda gx, h0, w_hh, nonlinearity: _layer_shape(gx, h0, w_hh, 1, "rnn_layer"),
    _rules(_rnn_sweep, 3), saves=(0, 1, 2, -1), node_name="RnnLayerBackward0",
    decompose=lambda *a, **p: _rnn_forward(OPS, *a, **p)[0]))


# ---- LSTM ---------------------------------------------------------------------------------------
# The primitive's third result is the activated gates of every step, (T, N, 4H): the backward
# reads them instead of recomputing them (a matmul over all steps). It is a result like the
# others, so a cotangent reaching it (only under create_graph, through the first backward)
# is propagated too.
def _lstm_forward(xp, gx, h0, c0, w_hh):
    hd = shape_of(w_hh)[1]
    h, c, hs, cs, acts, wt = h0, c0, [], [], [], xp.T(w_hh)
    for k in range(shape_of(gx)[0]):
        act = xp.lstm_gates(xp.add(gx[k], xp.matmul(h, wt)), hd)
        c = xp.add(xp.mul(act[:, hd:2 * hd], c), xp.mul(act[:, :hd], act[:, 2 * hd:3 * hd]))
        h = xp.mul(act[:, 3 * hd:], xp.tanh(c))
        hs.append(h)
        cs.append(c)
        acts.append(act)
    return xp.stack(hs, 0), xp.stack(cs, 0), xp.stack(acts, 0)


def _lstm_forward_numpy(gx, h0, c0, w_hh):
    """_lstm_forward(NUMPY, ...) computed in place: each step's gates, cell and hidden state
    are written straight into the rows of the results (see Note [Recurrences run on numpy or
    on ops])."""
    hd, n = w_hh.shape[1], gx.shape[0]
    acts = np.empty(gx.shape, np.result_type(gx, h0, c0, w_hh))
    hs, cs = np.empty((n,) + h0.shape, acts.dtype), np.empty((n,) + c0.shape, acts.dtype)
    h, c, wt = h0, c0, w_hh.T
    with np.errstate(over="ignore"):  # (as _on_numpy)
        for k in range(n):
            act, c_new, h_new = acts[k], cs[k], hs[k]
            np.matmul(h, wt, out=act)
            act += gx[k]
            NUMPY.lstm_gates(act, hd)
            np.multiply(act[:, hd:2 * hd], c, out=c_new)
            c_new += act[:, :hd] * act[:, 2 * hd:3 * hd]
            np.tanh(c_new, out=h_new)
            h_new *= act[:, 3 * hd:]
            h, c = h_new, c_new
    return hs, cs, acts


def _lstm_sweep(xp, g, out, gx, h0, c0, w_hh):
    (hs, cs, acts), (ghs, gcs, gacts) = out, g
    hd = shape_of(w_hh)[1]
    cprev = _prev(xp, c0, cs)
    i, f, gg, o = (acts[..., k * hd:(k + 1) * hd] for k in range(4))
    tc = xp.tanh(cs)
    # per step: dc_t = dh_t * dc_coef_t + (dc from step t + 1) + g_c, and dgates_t = [dc, dc,
    # dc, dh]_t * coef_t (+ the cotangent of the gates themselves through their derivatives);
    # the coefficients of all steps at once
    one_minus = [xp.sub(1.0, v) for v in (i, f, o)]
    coef = xp.concatenate([xp.mul(gg, xp.mul(i, one_minus[0])),
                           xp.mul(cprev, xp.mul(f, one_minus[1])),
                           xp.mul(i, xp.sub(1.0, xp.mul(gg, gg))),
                           xp.mul(tc, xp.mul(o, one_minus[2]))], -1)
    dc_coef = xp.mul(o, xp.sub(1.0, xp.mul(tc, tc)))
    direct = None
    if gacts is not None:
        dact = xp.concatenate([xp.mul(i, one_minus[0]), xp.mul(f, one_minus[1]),
                               xp.sub(1.0, xp.mul(gg, gg)), xp.mul(o, one_minus[2])], -1)
        direct = xp.mul(gacts, dact)
    dh = dc = None
    dgates = [None] * shape_of(gx)[0]
    for k in reversed(range(len(dgates))):
        dh_k = _acc(xp, None if ghs is None else ghs[k], dh)
        if dh_k is None:
            dh_k = xp.mul(hs[k], 0.0)
        dc_k = _acc(xp, xp.mul(dh_k, dc_coef[k]), None if gcs is None else gcs[k], dc)
        dgates[k] = _acc(xp, xp.mul(xp.concatenate([dc_k, dc_k, dc_k, dh_k], -1), coef[k]),
                         None if direct is None else direct[k])
        dh = xp.matmul(dgates[k], w_hh)
        dc = xp.mul(dc_k, f[k])
    dgx = xp.stack(dgates, 0)
    return dgx, dh, dc, _weight_grads(xp, dgx, _prev(xp, h0, hs))


def _lstm_shape(gx, h0, c0, w_hh):
    a = _layer_shape(gx, h0, w_hh, 4, "lstm_layer", c0)
    return a, a, Aval(tuple(gx.shape), gx.dtype)


lstm_layer_p = register(Primitive(
    "lstm_layer", "rnn", _lstm_forward_numpy, _lstm_shape,
    _rules(_lstm_sweep, 4), saves=(0, 1, 2, 3, -1), multiple_results=True,
    decompose=lambda *a: _lstm_forward(OPS, *a), node_name="LstmLayerBackward0"))


# ---- GRU ----------------------------------------------------------------------------------------
def _gru_gates(xp, gx, gh, hd):
    """(r, z, n) from the input part gx and the hidden part gh (with b_hh) of the gates."""
    r = xp.sigmoid(xp.add(gx[..., :hd], gh[..., :hd]))
    z = xp.sigmoid(xp.add(gx[..., hd:2 * hd], gh[..., hd:2 * hd]))
    return r, z, xp.tanh(xp.add(gx[..., 2 * hd:], xp.mul(r, gh[..., 2 * hd:])))


def _gru_forward(xp, gx, h0, w_hh, b_hh):
    hd = shape_of(w_hh)[1]
    h, hs, wt = h0, [], xp.T(w_hh)
    for k in range(shape_of(gx)[0]):
        r, z, n = _gru_gates(xp, gx[k], xp.add(xp.matmul(h, wt), b_hh), hd)
        h = xp.add(n, xp.mul(z, xp.sub(h, n)))
        hs.append(h)
    return (xp.stack(hs, 0),)


def _gru_sweep(xp, g, hs, gx, h0, w_hh, b_hh):
    hd = shape_of(w_hh)[1]
    hprev = _prev(xp, h0, hs)
    gh = xp.add(xp.matmul(hprev, xp.T(w_hh)), b_hh)
    r, z, n = _gru_gates(xp, gx, gh, hd)
    # d pre_n = dh (1 - z)(1 - n^2); d pre_z = dh (h_prev - n) z (1 - z);
    # d pre_r = d pre_n * ghn * r (1 - r); the hidden part of n's gate gets d pre_n * r
    cn = xp.mul(xp.sub(1.0, z), xp.sub(1.0, xp.mul(n, n)))
    cz = xp.mul(xp.sub(hprev, n), xp.mul(z, xp.sub(1.0, z)))
    cr = xp.mul(cn, xp.mul(gh[..., 2 * hd:], xp.mul(r, xp.sub(1.0, r))))
    cx = xp.concatenate([cr, cz, cn], -1)
    ch = xp.concatenate([cr, cz, xp.mul(cn, r)], -1)
    dh = None
    dgx, dgh = [None] * shape_of(gx)[0], [None] * shape_of(gx)[0]
    for k in reversed(range(len(dgx))):
        d = _acc(xp, g[k], dh)
        d3 = xp.concatenate([d, d, d], -1)
        dgx[k], dgh[k] = xp.mul(d3, cx[k]), xp.mul(d3, ch[k])
        dh = xp.add(xp.mul(d, z[k]), xp.matmul(dgh[k], w_hh))
    dgh_all = xp.stack(dgh, 0)
    return xp.stack(dgx, 0), dh, _weight_grads(xp, dgh_all, hprev), xp.sum(dgh_all, (0, 1))


gru_layer_p = register(Primitive(
    "gru_layer", "rnn", lambda *a: _on_numpy(_gru_forward, *a)[0],
    lambda gx, h0, w_hh, b_hh: _layer_shape(gx, h0, w_hh, 3, "gru_layer", b=b_hh),
    _rules(_gru_sweep, 4), saves=(0, 1, 2, 3, -1),
    decompose=lambda *a: _gru_forward(OPS, *a)[0], node_name="GruLayerBackward0"))


def _layer_shape(gx, h0, w_hh, gates, what, c0=None, b=None):
    t, n, gh = gx.shape if len(gx.shape) == 3 else (None, None, None)
    hd = gh // gates if gh else None
    want = {"gx": (t, n, gates * hd) if hd else None, "h0": (n, hd), "w_hh": (gates * hd, hd)}
    got = {"gx": tuple(gx.shape), "h0": tuple(h0.shape), "w_hh": tuple(w_hh.shape)}
    if c0 is not None:
        want["c0"], got["c0"] = (n, hd), tuple(c0.shape)
    if b is not None:
        want["b_hh"], got["b_hh"] = (gates * hd,), tuple(b.shape)
    if hd is None or gh % gates or want != got:
        raise ShapeError(f"{what}: inconsistent shapes " + ", ".join(
            f"{k} {list(v)}" for k, v in got.items()) + f" ({gates} gates)")
    return Aval((t, n, hd), gx.dtype)


# ---- the ops API -------------------------------------------------------------------------------
def rnn_layer(gx, h0, w_hh, nonlinearity="tanh"):
    return bind(rnn_layer_p, gx, h0, w_hh, nonlinearity=nonlinearity)


def lstm_layer(gx, h0, c0, w_hh):
    """(hidden states, cell states) of every step, each (T, N, H)."""
    return bind(lstm_layer_p, gx, h0, c0, w_hh)[:2]


def gru_layer(gx, h0, w_hh, b_hh):
    return bind(gru_layer_p, gx, h0, w_hh, b_hh)
