"""Recurrent layers as primitives: one eager node per layer and direction runs the whole time
loop in numpy (the input projection x @ W_ih^T + b is one matmul outside, by the caller).

    rnn_layer(gx, h0, w_hh; nonlinearity)   h_t = act(gx_t + h_{t-1} @ w_hh^T)
    lstm_layer(gx, h0, c0, w_hh)            gates (i, f, g, o), PyTorch's order
    gru_layer(gx, h0, w_hh, b_hh)           gates (r, z, n); b_hh inside r * (...), as PyTorch

gx is (T, N, G*H) with both biases folded in (for GRU only b_ih: b_hn sits inside the reset
gate); results are the hidden states of every step, (T, N, H), and for the LSTM the cell
states too. VJPs are backpropagation through time written with ops, so second derivatives
work; see Note [One sweep for every input].
"""
from __future__ import annotations

import numpy as np

from llgrad.runtime.aval import Aval, ShapeError
from llgrad.runtime.ops import elementwise as ew
from llgrad.runtime.ops._util import dtype_of, shape_of
from llgrad.runtime.prim import Primitive, bind, register


def _sigmoid(x):
    with np.errstate(over="ignore"):
        return 1.0 / (1.0 + np.exp(-x))


def _T(w):
    from llgrad.runtime.ops.shape import swapaxes
    return swapaxes(w, 0, 1)


def _prev(h0, hs):
    """The state before each step: h0, h_0, ..., h_{T-2}, as (T, N, H)."""
    from llgrad.runtime.ops.shape import concatenate, unsqueeze
    return concatenate([unsqueeze(h0, 0), hs[:-1]], 0)


def _steps(t):
    return range(t - 1, -1, -1)


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
    result = sweep(g, out, *inputs, **params)
    _MEMO[0], _MEMO[1] = key, result
    return result


def _rules(sweep, n):
    def rule(i):
        return lambda g, out, *inputs, **params: _memo(sweep, g, out, *inputs, **params)[i]
    return tuple(rule(i) for i in range(n))


def _weight_grads(dgates, hprev):
    """dW_hh = sum_t dgates_t^T @ h_{t-1}, as one matmul over all steps."""
    from llgrad.runtime.ops.linalg import matmul
    from llgrad.runtime.ops.shape import reshape
    t, n, gh = shape_of(dgates)
    return matmul(_T(reshape(dgates, (t * n, gh))), reshape(hprev, (t * n, -1)))


def _hs_grads(g, t):
    """The cotangent of every hidden state, split by step (None where none flows)."""
    return [None] * t if g is None else [g[k] for k in range(t)]


# ---- Elman RNN --------------------------------------------------------------------------------
def _rnn_impl(gx, h0, w_hh, nonlinearity):
    hs = np.empty(gx.shape[:2] + (h0.shape[-1],), gx.dtype)
    h, wt = h0, w_hh.T
    for t in range(gx.shape[0]):
        a = gx[t] + h @ wt
        h = hs[t] = np.tanh(a) if nonlinearity == "tanh" else np.maximum(a, 0)
    return hs


def _rnn_sweep(g, hs, gx, h0, w_hh, nonlinearity):
    from llgrad.runtime.ops.linalg import matmul
    from llgrad.runtime.ops.shape import stack
    t = shape_of(gx)[0]
    deriv = ew.sub(1.0, ew.mul(hs, hs)) if nonlinearity == "tanh" else ew.astype(
        ew.gt(hs, 0.0), dtype_of(hs))
    ghs, dh, dpre = _hs_grads(g, t), None, [None] * t
    for k in _steps(t):
        d = ghs[k] if dh is None else dh if ghs[k] is None else ew.add(ghs[k], dh)
        dpre[k] = ew.mul(d, deriv[k])
        dh = matmul(dpre[k], w_hh)
    dgx = stack(dpre, 0)
    return dgx, dh, _weight_grads(dgx, _prev(h0, hs))


rnn_layer_p = register(Primitive(
    "rnn_layer", "rnn", _rnn_impl,
    lambda gx, h0, w_hh, nonlinearity: _layer_shape(gx, h0, w_hh, 1, "rnn_layer"),
    _rules(_rnn_sweep, 3), saves=(0, 1, 2, -1), node_name="RnnLayerBackward0",
    decompose=lambda gx, h0, w_hh, nonlinearity: _rnn_decompose(gx, h0, w_hh, nonlinearity)))


def _rnn_decompose(gx, h0, w_hh, nonlinearity):
    from llgrad.runtime.ops.linalg import matmul
    from llgrad.runtime.ops.shape import stack
    h, hs = h0, []
    for t in range(shape_of(gx)[0]):
        a = ew.add(gx[t], matmul(h, _T(w_hh)))
        h = ew.tanh(a) if nonlinearity == "tanh" else ew.relu(a)
        hs.append(h)
    return stack(hs, 0)


# ---- LSTM ---------------------------------------------------------------------------------------
def _lstm_impl(gx, h0, c0, w_hh):
    t, n = gx.shape[:2]
    hd = h0.shape[-1]
    hs, cs = np.empty((t, n, hd), gx.dtype), np.empty((t, n, hd), gx.dtype)
    h, c, wt = h0, c0, w_hh.T
    for k in range(t):
        a = gx[k] + h @ wt
        ifo = _sigmoid(a)
        gg = np.tanh(a[:, 2 * hd:3 * hd])
        c = cs[k] = ifo[:, hd:2 * hd] * c + ifo[:, :hd] * gg
        h = hs[k] = ifo[:, 3 * hd:] * np.tanh(c)
    return hs, cs


def _lstm_gates(gx, hprev, w_hh):
    """(i, f, g, o) of every step, recomputed with ops from the states."""
    from llgrad.runtime.ops.linalg import matmul
    a = ew.add(gx, matmul(hprev, _T(w_hh)))
    hd = shape_of(w_hh)[1]
    part = [a[..., k * hd:(k + 1) * hd] for k in range(4)]
    return ew.sigmoid(part[0]), ew.sigmoid(part[1]), ew.tanh(part[2]), ew.sigmoid(part[3])


def _lstm_sweep(g, out, gx, h0, c0, w_hh):
    from llgrad.runtime.ops.linalg import matmul
    from llgrad.runtime.ops.shape import concatenate, stack
    hs, cs = out
    t = shape_of(gx)[0]
    hprev, cprev = _prev(h0, hs), _prev(c0, cs)
    i, f, gg, o = _lstm_gates(gx, hprev, w_hh)
    tc = ew.tanh(cs)
    # dc_t += dh_t * dc_coef; dgates_t = [dc, dc, dc, dh]_t * coef (all steps at once)
    dc_coef = ew.mul(o, ew.sub(1.0, ew.mul(tc, tc)))
    coef = concatenate([ew.mul(gg, ew.mul(i, ew.sub(1.0, i))),
                        ew.mul(cprev, ew.mul(f, ew.sub(1.0, f))),
                        ew.mul(i, ew.sub(1.0, ew.mul(gg, gg))),
                        ew.mul(tc, ew.mul(o, ew.sub(1.0, o)))], -1)
    ghs, gcs = _hs_grads(g[0], t), _hs_grads(g[1], t)
    dh = dc = None
    dgates = [None] * t
    for k in _steps(t):
        dh_k = ghs[k] if dh is None else dh if ghs[k] is None else ew.add(ghs[k], dh)
        if dh_k is None:
            dh_k = ew.mul(hs[k], 0.0)
        dc_k = ew.mul(dh_k, dc_coef[k])
        for extra in (gcs[k], dc):
            if extra is not None:
                dc_k = ew.add(dc_k, extra)
        dgates[k] = ew.mul(concatenate([dc_k, dc_k, dc_k, dh_k], -1), coef[k])
        dh = matmul(dgates[k], w_hh)
        dc = ew.mul(dc_k, f[k])
    dgx = stack(dgates, 0)
    return dgx, dh, dc, _weight_grads(dgx, hprev)


def _lstm_decompose(gx, h0, c0, w_hh):
    from llgrad.runtime.ops.shape import stack, unsqueeze
    h, c, hs, cs = h0, c0, [], []
    for k in range(shape_of(gx)[0]):
        i, f, gg, o = _lstm_gates(unsqueeze(gx[k], 0), unsqueeze(h, 0), w_hh)
        c = ew.add(ew.mul(f[0], c), ew.mul(i[0], gg[0]))
        h = ew.mul(o[0], ew.tanh(c))
        hs.append(h)
        cs.append(c)
    return stack(hs, 0), stack(cs, 0)


lstm_layer_p = register(Primitive(
    "lstm_layer", "rnn", _lstm_impl,
    lambda gx, h0, c0, w_hh: (_layer_shape(gx, h0, w_hh, 4, "lstm_layer", c0),) * 2,
    _rules(_lstm_sweep, 4), saves=(0, 1, 2, 3, -1), multiple_results=True,
    decompose=_lstm_decompose, node_name="LstmLayerBackward0"))


# ---- GRU ----------------------------------------------------------------------------------------
def _gru_impl(gx, h0, w_hh, b_hh):
    t, n = gx.shape[:2]
    hd = h0.shape[-1]
    hs = np.empty((t, n, hd), gx.dtype)
    h, wt = h0, w_hh.T
    for k in range(t):
        gh = h @ wt + b_hh
        rz = _sigmoid(gx[k, :, :2 * hd] + gh[:, :2 * hd])
        nn = np.tanh(gx[k, :, 2 * hd:] + rz[:, :hd] * gh[:, 2 * hd:])
        h = hs[k] = nn + rz[:, hd:] * (h - nn)
    return hs


def _gru_gates(gx, hprev, w_hh, b_hh):
    """(r, z, n, the hidden part of n's preactivation) of every step, with ops."""
    from llgrad.runtime.ops.linalg import matmul
    gh = ew.add(matmul(hprev, _T(w_hh)), b_hh)
    hd = shape_of(w_hh)[1]
    r = ew.sigmoid(ew.add(gx[..., :hd], gh[..., :hd]))
    z = ew.sigmoid(ew.add(gx[..., hd:2 * hd], gh[..., hd:2 * hd]))
    ghn = gh[..., 2 * hd:]
    return r, z, ew.tanh(ew.add(gx[..., 2 * hd:], ew.mul(r, ghn))), ghn


def _gru_sweep(g, hs, gx, h0, w_hh, b_hh):
    from llgrad.runtime.ops.linalg import matmul
    from llgrad.runtime.ops.reduce import sum
    from llgrad.runtime.ops.shape import concatenate, stack
    t = shape_of(gx)[0]
    hprev = _prev(h0, hs)
    r, z, n, ghn = _gru_gates(gx, hprev, w_hh, b_hh)
    # d pre_n = dh (1 - z)(1 - n^2); d pre_z = dh (h_prev - n) z (1 - z);
    # d pre_r = d pre_n * ghn * r (1 - r); the hidden part of n's gate gets d pre_n * r
    cn = ew.mul(ew.sub(1.0, z), ew.sub(1.0, ew.mul(n, n)))
    cz = ew.mul(ew.sub(hprev, n), ew.mul(z, ew.sub(1.0, z)))
    cr = ew.mul(cn, ew.mul(ghn, ew.mul(r, ew.sub(1.0, r))))
    cx = concatenate([cr, cz, cn], -1)
    ch = concatenate([cr, cz, ew.mul(cn, r)], -1)
    ghs, dh = _hs_grads(g, t), None
    dgx, dgh = [None] * t, [None] * t
    for k in _steps(t):
        d = ghs[k] if dh is None else dh if ghs[k] is None else ew.add(ghs[k], dh)
        d3 = concatenate([d, d, d], -1)
        dgx[k], dgh[k] = ew.mul(d3, cx[k]), ew.mul(d3, ch[k])
        dh = ew.add(ew.mul(d, z[k]), matmul(dgh[k], w_hh))
    dgh_all = stack(dgh, 0)
    return stack(dgx, 0), dh, _weight_grads(dgh_all, hprev), sum(dgh_all, (0, 1))


def _gru_decompose(gx, h0, w_hh, b_hh):
    from llgrad.runtime.ops.shape import stack, unsqueeze
    h, hs = h0, []
    for k in range(shape_of(gx)[0]):
        r, z, n, _ = _gru_gates(unsqueeze(gx[k], 0), unsqueeze(h, 0), w_hh, b_hh)
        h = ew.add(n[0], ew.mul(z[0], ew.sub(h, n[0])))
        hs.append(h)
    return stack(hs, 0)


gru_layer_p = register(Primitive(
    "gru_layer", "rnn", _gru_impl,
    lambda gx, h0, w_hh, b_hh: _layer_shape(gx, h0, w_hh, 3, "gru_layer", b=b_hh),
    _rules(_gru_sweep, 4), saves=(0, 1, 2, 3, -1), decompose=_gru_decompose,
    node_name="GruLayerBackward0"))


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
    return bind(lstm_layer_p, gx, h0, c0, w_hh)


def gru_layer(gx, h0, w_hh, b_hh):
    return bind(gru_layer_p, gx, h0, w_hh, b_hh)
