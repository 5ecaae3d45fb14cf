"""OpSpecs of the neural-network primitives (issue 15): convolutions, pooling, normalisation,
activations, embedding, recurrent layers and losses; merged into OP_DB by tests/opinfo.py.

The references are naive numpy written from the definitions (loops over kernel taps and
windows, one step at a time for the recurrences), not the implementations' im2col and
vectorised forms. Primitives reached only through a VJP (the convolution's two transposes, the
pools' backwards) are called through `bind`.
"""
from __future__ import annotations

import numpy as np
from scipy.special import erf

import llgrad as lg
from llgrad.runtime import ops
from llgrad.runtime.ops import pool as pool_ops
from llgrad.runtime.ops.conv import conv_weight_grad_p
from llgrad.runtime.prim import bind

from opinfo import OpSpec, Sample, make_input

F = lg.nn.functional
F32 = np.dtype(np.float32)
_LOOSE = {F32: (2e-5, 2e-5)}


def _r(rng, shape, dtype, lo=None, hi=None):
    if lo is None:
        return make_input(rng, shape, "real", dtype)
    return np.asarray(rng.uniform(lo, hi, shape), dtype)


def _pair(v):
    return (v, v) if isinstance(v, int) else tuple(v)


# ---- convolution ---------------------------------------------------------------------------------
def _as2d(x, *ws):
    """1-d operands as 2-d ones of height 1."""
    return (x[:, :, None],) + tuple(w[:, :, None] for w in ws) if x.ndim == 3 else (x,) + ws


def _taps(kh, kw, oh, ow, s, d):
    for i in range(kh):
        for j in range(kw):
            yield i, j, (slice(i * d[0], i * d[0] + s[0] * (oh - 1) + 1, s[0]),
                         slice(j * d[1], j * d[1] + s[1] * (ow - 1) + 1, s[1]))


def _norm_params(nd, stride, padding, dilation):
    """(stride, padding, dilation) pairs; 1-d ones for a height of 1."""
    if nd == 2:
        return _pair(stride), _pair(padding), _pair(dilation)

    def one(v):
        return v if isinstance(v, int) else v[0]
    return (1, one(stride)), (0, one(padding)), (1, one(dilation))


def _conv_ref(x, w, b=None, stride=1, padding=0, dilation=1, groups=1):
    """out[n, o, i, j] = sum_{c, ki, kj} xpad[n, c, i s + ki d, j s + kj d] w[o, c, ki, kj]."""
    nd = x.ndim - 2
    s, p, d = _norm_params(nd, stride, padding, dilation)
    x, w = _as2d(x, w)
    xp = np.pad(x, ((0, 0), (0, 0), (p[0], p[0]), (p[1], p[1])))
    o, cg, kh, kw = w.shape
    oh = (xp.shape[2] - d[0] * (kh - 1) - 1) // s[0] + 1
    ow = (xp.shape[3] - d[1] * (kw - 1) - 1) // s[1] + 1
    out = np.zeros((x.shape[0], o, oh, ow), x.dtype)
    og = o // groups
    for g in range(groups):
        for i, j, (hs, ws) in _taps(kh, kw, oh, ow, s, d):
            win = xp[:, g * cg:(g + 1) * cg, hs, ws]
            out[:, g * og:(g + 1) * og] += np.einsum("nchw,oc->nohw", win,
                                                     w[g * og:(g + 1) * og, :, i, j])
    if b is not None:
        out += b.reshape(1, -1, 1, 1)
    return out[:, :, 0] if nd == 1 else out


def _conv_t_ref(x, w, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
    """The adjoint of _conv_ref in its input: scatter each input pixel through the kernel."""
    nd = x.ndim - 2
    s, p, d = _norm_params(nd, stride, padding, dilation)
    op = _pair(output_padding) if nd == 2 else (0, output_padding)
    x, w = _as2d(x, w)
    cin, og, kh, kw = w.shape
    n, _, h, wd = x.shape
    size = [(h - 1) * s[0] - 2 * p[0] + d[0] * (kh - 1) + op[0] + 1,
            (wd - 1) * s[1] - 2 * p[1] + d[1] * (kw - 1) + op[1] + 1]
    full = np.zeros((n, og * groups, size[0] + 2 * p[0] + s[0], size[1] + 2 * p[1] + s[1]),
                    x.dtype)
    ig = cin // groups
    for g in range(groups):
        for i, j, (hs, ws) in _taps(kh, kw, h, wd, s, d):
            full[:, g * og:(g + 1) * og, hs, ws] += np.einsum(
                "nchw,co->nohw", x[:, g * ig:(g + 1) * ig], w[g * ig:(g + 1) * ig, :, i, j])
    out = full[:, :, p[0]:p[0] + size[0], p[1]:p[1] + size[1]]
    return out[:, :, 0] if nd == 1 else out


def _weight_grad_ref(x, gy, khw, stride, padding, dilation, groups):
    """dw[o, c, ki, kj] = sum_{n, i, j} gy[n, o, i, j] xpad[n, c, i s + ki d, j s + kj d]."""
    nd = x.ndim - 2
    s, p, d = stride, tuple(a for a, _ in padding), dilation
    if nd == 1:
        khw, s, p, d = (1,) + tuple(khw), (1,) + tuple(s), (0,) + p, (1,) + tuple(d)
    x, gy = _as2d(x, gy)
    xp = np.pad(x, ((0, 0), (0, 0), (p[0], p[0]), (p[1], p[1])))
    o, oh, ow = gy.shape[1:]
    cg, og = x.shape[1] // groups, o // groups
    dw = np.zeros((o, cg) + tuple(khw), x.dtype)
    for g in range(groups):
        for i, j, (hs, ws) in _taps(khw[0], khw[1], oh, ow, s, d):
            dw[g * og:(g + 1) * og, :, i, j] = np.einsum(
                "nchw,nohw->oc", xp[:, g * cg:(g + 1) * cg, hs, ws], gy[:, g * og:(g + 1) * og])
    return dw[:, :, 0] if nd == 1 else dw


def _conv_samples(rng, dt):
    return [
        Sample((_r(rng, (2, 4, 6, 5), dt), _r(rng, (6, 2, 3, 2), dt), _r(rng, (6,), dt)),
               dict(stride=(2, 1), padding=(1, 0), dilation=(1, 2), groups=2)),
        Sample((_r(rng, (2, 2, 7), dt), _r(rng, (3, 2, 3), dt), _r(rng, (3,), dt)),
               dict(stride=2, padding=1)),
    ]


def _conv_op(x, w, b=None, **kw):
    return (F.conv1d if x.ndim == 3 else F.conv2d)(x, w, b, **kw)


def _conv_t_samples(rng, dt):
    return [
        Sample((_r(rng, (2, 4, 3, 3), dt), _r(rng, (4, 1, 3, 2), dt)),
               dict(stride=2, padding=1, output_padding=1, groups=2)),
        Sample((_r(rng, (2, 3, 4), dt), _r(rng, (3, 2, 3), dt)), dict(stride=2)),
    ]


def _conv_t_op(x, w, **kw):
    return (F.conv_transpose1d if x.ndim == 3 else F.conv_transpose2d)(x, w, **kw)


def _weight_grad_samples(rng, dt):
    out = []
    for xs, gs, khw, kw in [((2, 4, 6, 5), (2, 6, 3, 3), (3, 2), dict(
            stride=(2, 1), padding=((1, 1), (0, 0)), dilation=(1, 2), groups=2)),
            ((2, 2, 7), (2, 3, 4), (3,), dict(stride=(2,), padding=((1, 1),), dilation=(1,),
                                               groups=1))]:
        out.append(Sample((_r(rng, xs, dt), _r(rng, gs, dt)), dict(khw=khw, **kw)))
    return out


# ---- pooling -------------------------------------------------------------------------------------
def _windows(x, kernel, stride, padding, dilation, ceil_mode, fill):
    """(padded input, output size, taps): the windows of PyTorch's pooling."""
    k, s, p, d = (_pair(v) for v in (kernel, stride or kernel, padding, dilation))
    osz = [pool_ops.out_size(x.shape[2 + a], k[a], s[a], p[a], d[a], ceil_mode) for a in (0, 1)]
    need = [(osz[a] - 1) * s[a] + d[a] * (k[a] - 1) + 1 for a in (0, 1)]
    xp = np.full(x.shape[:2] + tuple(max(need[a], x.shape[2 + a] + 2 * p[a]) for a in (0, 1)),
                 fill, x.dtype)
    xp[:, :, p[0]:p[0] + x.shape[2], p[1]:p[1] + x.shape[3]] = x
    return xp, osz, k, s, p, d


def _max_pool_ref(x, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
                  indices=False):
    xp, (oh, ow), k, s, p, d = _windows(x, kernel_size, stride, padding, dilation, ceil_mode,
                                        -np.inf)
    out = np.empty(x.shape[:2] + (oh, ow), x.dtype)
    idx = np.empty(out.shape, np.int64)
    for i in range(oh):
        for j in range(ow):
            win = xp[:, :, i * s[0]:i * s[0] + d[0] * (k[0] - 1) + 1:d[0],
                     j * s[1]:j * s[1] + d[1] * (k[1] - 1) + 1:d[1]].reshape(x.shape[:2] + (-1,))
            a = np.argmax(win, -1)
            out[:, :, i, j] = np.take_along_axis(win, a[..., None], -1)[..., 0]
            r, c = i * s[0] - p[0] + d[0] * (a // k[1]), j * s[1] - p[1] + d[1] * (a % k[1])
            idx[:, :, i, j] = r * x.shape[3] + c
    return idx if indices else out


def _max_pool_backward_ref(g, x, **p):
    idx = _max_pool_ref(x, p["kernel"], p["stride"], p["padding"], p["dilation"],
                        p["ceil_mode"], indices=True)
    dx = np.zeros(x.shape[:2] + (x.shape[2] * x.shape[3],), g.dtype)
    for n in range(x.shape[0]):
        for c in range(x.shape[1]):
            np.add.at(dx[n, c], idx[n, c].ravel(), g[n, c].ravel())
    return dx.reshape(x.shape)


_POOLS = [dict(kernel_size=2), dict(kernel_size=(3, 2), stride=(2, 1), padding=(1, 0),
                                     dilation=(1, 2), ceil_mode=True)]


def _pool_samples(configs, shape=(2, 3, 7, 6)):
    def make(rng, dt):
        return [Sample((_r(rng, shape, dt),), dict(c)) for c in configs]
    return make


def _prim_params(c, avg=False):
    p = dict(kernel=_pair(c["kernel_size"]), stride=_pair(c.get("stride") or c["kernel_size"]),
             padding=_pair(c.get("padding", 0)), ceil_mode=c.get("ceil_mode", False))
    if avg:
        p.update(count_include_pad=c.get("count_include_pad", True),
                 divisor_override=c.get("divisor_override"))
    else:
        p["dilation"] = _pair(c.get("dilation", 1))
    return p


def _max_backward_samples(rng, dt):
    out = []
    for c in _POOLS:
        x = _r(rng, (2, 2, 7, 6), dt)
        p = _prim_params(c)
        g = _r(rng, _max_pool_ref(x, c["kernel_size"], c.get("stride"), c.get("padding", 0),
                                  c.get("dilation", 1), c.get("ceil_mode", False)).shape, dt)
        out.append(Sample((g, x), p))
    return out


def _avg_pool_ref(x, kernel_size, stride=None, padding=0, ceil_mode=False,
                  count_include_pad=True, divisor_override=None):
    xp, (oh, ow), k, s, p, _ = _windows(x, kernel_size, stride, padding, 1, ceil_mode, 0.0)
    out = np.empty(x.shape[:2] + (oh, ow), x.dtype)
    h, w = x.shape[2:]
    for i in range(oh):
        for j in range(ow):
            r0, c0 = i * s[0] - p[0], j * s[1] - p[1]
            total = xp[:, :, r0 + p[0]:r0 + p[0] + k[0], c0 + p[1]:c0 + p[1] + k[1]].sum((2, 3))
            r1, c1 = min(r0 + k[0], h + p[0]), min(c0 + k[1], w + p[1])
            if not count_include_pad:
                r0, c0, r1, c1 = max(r0, 0), max(c0, 0), min(r1, h), min(c1, w)
            out[:, :, i, j] = total / (divisor_override or (r1 - r0) * (c1 - c0))
    return out


_AVG = [dict(kernel_size=3, stride=2, padding=1, count_include_pad=False),
        dict(kernel_size=(3, 2), stride=(2, 1), padding=(1, 0), ceil_mode=True),
        dict(kernel_size=2, stride=1, divisor_override=3)]


def _avg_backward_samples(rng, dt):
    out = []
    for c in _AVG:
        x = _r(rng, (2, 2, 7, 6), dt)
        g = _r(rng, _avg_pool_ref(x, **c).shape, dt)
        out.append(Sample((g,), dict(hw=(7, 6), **_prim_params(c, avg=True))))
    return out


def _avg_backward_ref(g, hw, **p):
    """The adjoint of _avg_pool_ref, column by column of its matrix."""
    cfg = dict(kernel_size=p["kernel"], stride=p["stride"], padding=p["padding"],
               ceil_mode=p["ceil_mode"], count_include_pad=p["count_include_pad"],
               divisor_override=p["divisor_override"])
    basis = np.eye(hw[0] * hw[1]).reshape(-1, 1, hw[0], hw[1])  # one image per pixel
    m = _avg_pool_ref(basis, **cfg)[:, 0]  # (pixels, OH, OW): the pool as a matrix
    return np.einsum("ncij,pij->ncp", g, m).reshape(g.shape[:2] + tuple(hw)).astype(g.dtype)


def _adaptive_ref(x, output_size):
    oh, ow = output_size
    h, w = x.shape[2:]
    out = np.empty(x.shape[:2] + (oh, ow), x.dtype)
    for i in range(oh):
        for j in range(ow):
            r0, r1 = (i * h) // oh, -(-(i + 1) * h // oh)
            c0, c1 = (j * w) // ow, -(-(j + 1) * w // ow)
            out[:, :, i, j] = x[:, :, r0:r1, c0:c1].mean((2, 3))
    return out


# ---- normalisation -------------------------------------------------------------------------------
def _normalized(x, axes, eps):
    mu = x.mean(axes, keepdims=True)
    return (x - mu) / np.sqrt(((x - mu) ** 2).mean(axes, keepdims=True) + eps)


def _bn_ref(x, w, b, rm, rv, training=True, eps=1e-5):
    shape = (1, -1) + (1,) * (x.ndim - 2)
    if training:
        xh = _normalized(x, (0,) + tuple(range(2, x.ndim)), eps)
    else:
        xh = (x - rm.reshape(shape)) / np.sqrt(rv.reshape(shape) + eps)
    return (xh * w.reshape(shape) + b.reshape(shape)).astype(x.dtype)


def _bn_samples(rng, dt):
    out = []
    for shape, training in (((4, 3, 5), True), ((5, 3), True), ((2, 3, 3, 2), False)):
        c = shape[1]
        out.append(Sample((_r(rng, shape, dt), _r(rng, (c,), dt), _r(rng, (c,), dt),
                           _r(rng, (c,), dt), _r(rng, (c,), dt, 0.5, 1.5)),
                          dict(training=training, eps=1e-3)))
    return out


def _ln_samples(rng, dt):
    return [Sample((_r(rng, (4, 3, 5), dt), _r(rng, (3, 5), dt), _r(rng, (3, 5), dt)),
                   dict(normalized_shape=(3, 5))),
            Sample((_r(rng, (2, 6), dt), _r(rng, (6,), dt), _r(rng, (6,), dt)),
                   dict(normalized_shape=6, eps=1e-2))]


def _ln_ref(x, w, b, normalized_shape, eps=1e-5):
    nd = 1 if isinstance(normalized_shape, int) else len(normalized_shape)
    return (_normalized(x, tuple(range(x.ndim - nd, x.ndim)), eps) * w + b).astype(x.dtype)


def _gn_ref(x, w, b, num_groups, eps=1e-5):
    xg = x.reshape(x.shape[0], num_groups, -1)
    xh = _normalized(xg, (2,), eps).reshape(x.shape)
    shape = (1, -1) + (1,) * (x.ndim - 2)
    return (xh * w.reshape(shape) + b.reshape(shape)).astype(x.dtype)


def _gn_samples(rng, dt):
    return [Sample((_r(rng, (2, 6, 4), dt), _r(rng, (6,), dt), _r(rng, (6,), dt)),
                   dict(num_groups=3)),
            Sample((_r(rng, (3, 4, 2, 2), dt), _r(rng, (4,), dt), _r(rng, (4,), dt)),
                   dict(num_groups=1, eps=1e-3))]


# ---- activations ---------------------------------------------------------------------------------
def _act_samples(*kwargs, domain="real"):
    def make(rng, dt):
        return [Sample((make_input(rng, (3, 4), domain, dt),), dict(kw)) for kw in kwargs]
    return make


def _gelu_ref(x, approximate="none"):
    if approximate == "tanh":
        y = 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)))
    else:
        y = 0.5 * x * (1 + erf(x / np.sqrt(2)))
    return y.astype(x.dtype)


def _elu_ref(x, alpha=1.0):
    return np.where(x > 0, x, alpha * (np.exp(x) - 1)).astype(x.dtype)


def _softplus_ref(x, beta=1.0, threshold=20.0):
    return np.where(x * beta > threshold, x, np.log1p(np.exp(beta * x)) / beta).astype(x.dtype)


# ---- recurrent layers ----------------------------------------------------------------------------
def _sig(x):
    return 1 / (1 + np.exp(-x))


def _rnn_ref(gx, h0, w_hh, nonlinearity):
    h, hs = h0, []
    for t in range(gx.shape[0]):
        a = gx[t] + h @ w_hh.T
        h = np.tanh(a) if nonlinearity == "tanh" else np.maximum(a, 0)
        hs.append(h)
    return np.stack(hs).astype(gx.dtype)


def _lstm_ref(gx, h0, c0, w_hh):
    h, c, hs, cs = h0, c0, [], []
    for t in range(gx.shape[0]):
        i, f, g, o = np.split(gx[t] + h @ w_hh.T, 4, -1)
        c = _sig(f) * c + _sig(i) * np.tanh(g)
        h = _sig(o) * np.tanh(c)
        hs.append(h)
        cs.append(c)
    return np.stack(hs).astype(gx.dtype), np.stack(cs).astype(gx.dtype)


def _gru_ref(gx, h0, w_hh, b_hh):
    h, hs = h0, []
    for t in range(gx.shape[0]):
        xr, xz, xn = np.split(gx[t], 3, -1)
        hr, hz, hn = np.split(h @ w_hh.T + b_hh, 3, -1)
        r, z = _sig(xr + hr), _sig(xz + hz)
        n = np.tanh(xn + r * hn)
        h = (1 - z) * n + z * h
        hs.append(h)
    return np.stack(hs).astype(gx.dtype)


def _rnn_samples(gates, extra=0):
    def make(rng, dt):
        out = []
        for t, n, h in ((3, 2, 3), (1, 1, 2)):
            args = [_r(rng, (t, n, gates * h), dt), _r(rng, (n, h), dt)]
            if gates == 4:
                args.append(_r(rng, (n, h), dt))
            args.append(_r(rng, (gates * h, h), dt) * 0.7)
            if extra:
                args.append(_r(rng, (gates * h,), dt))
            out.append(Sample(tuple(args)))
        return out
    return make


# ---- losses --------------------------------------------------------------------------------------
def _bce_ref(x, t, weight=None, reduction="mean"):
    w = 1.0 if weight is None else weight
    loss = -w * (t * np.log(x) + (1 - t) * np.log(1 - x))
    return _red(loss.astype(x.dtype), reduction)


def _bce_logits_ref(x, t, weight=None, reduction="mean", pos_weight=None):
    w = 1.0 if weight is None else weight
    pw = 1.0 if pos_weight is None else pos_weight
    loss = -w * (pw * t * np.log(_sig(x)) + (1 - t) * np.log(1 - _sig(x)))
    return _red(loss.astype(x.dtype), reduction)


def _red(loss, reduction):
    if reduction == "none":
        return loss
    return np.asarray(loss.mean() if reduction == "mean" else loss.sum(), loss.dtype)


def _bce_samples(logits):
    def make(rng, dt):
        x = _r(rng, (3, 4), dt) if logits else _r(rng, (3, 4), dt, 0.05, 0.95)
        t, w = _r(rng, (3, 4), dt, 0.0, 1.0), _r(rng, (4,), dt, 0.5, 2.0)
        out = [Sample((x, t), dict(reduction=r)) for r in ("mean", "sum", "none")]
        out.append(Sample((x, t), dict(weight=w)))
        if logits:
            out.append(Sample((x, t), dict(pos_weight=_r(rng, (4,), dt, 0.5, 3.0),
                                           reduction="sum")))
        return out
    return make


def _huber_ref(smooth):
    def ref(x, t, reduction="mean", **kw):
        d = x - t
        a = np.abs(d)
        delta = kw.get("beta" if smooth else "delta", 1.0)
        if smooth and delta == 0:
            loss = a
        elif smooth:
            loss = np.where(a < delta, 0.5 * d * d / delta, a - 0.5 * delta)
        else:
            loss = np.where(a < delta, 0.5 * d * d, delta * (a - 0.5 * delta))
        return _red(loss.astype(x.dtype), reduction)
    return ref


def _huber_samples(key, values):
    def make(rng, dt):
        x, t = _r(rng, (3, 4), dt) * 2, _r(rng, (3, 4), dt)
        return [Sample((x, t), {key: v, "reduction": r})
                for v, r in zip(values, ("mean", "sum", "none"))]
    return make


def _lstm_op(gx, h0, c0, w_hh):
    return ops.lstm_layer(gx, h0, c0, w_hh)


NN_OPS: list[OpSpec] = [
    OpSpec("conv", _conv_op, _conv_ref, samples=_conv_samples, tol=_LOOSE),
    OpSpec("conv_input_grad", _conv_t_op, _conv_t_ref, samples=_conv_t_samples, tol=_LOOSE),
    OpSpec("conv_weight_grad",
           lambda x, g, **kw: bind(conv_weight_grad_p, x, g, **kw),
           _weight_grad_ref, samples=_weight_grad_samples, tol=_LOOSE),
    OpSpec("max_pool2d", F.max_pool2d, _max_pool_ref, samples=_pool_samples(_POOLS)),
    OpSpec("max_pool2d_indices", lambda x, **kw: F.max_pool2d(x, return_indices=True, **kw)[1],
           lambda x, **kw: _max_pool_ref(x, indices=True, **kw), samples=_pool_samples(_POOLS),
           nondiff=True, order=0),
    OpSpec("max_pool2d_backward",
           lambda g, x, **kw: bind(pool_ops.max_pool2d_backward_p, g, x, **kw),
           _max_pool_backward_ref, samples=_max_backward_samples, wrt=(0,)),
    OpSpec("avg_pool2d", F.avg_pool2d, _avg_pool_ref, samples=_pool_samples(_AVG)),
    OpSpec("avg_pool2d_backward",
           lambda g, **kw: bind(pool_ops.avg_pool2d_backward_p, g, **kw), _avg_backward_ref,
           samples=_avg_backward_samples),
    OpSpec("adaptive_avg_pool2d", F.adaptive_avg_pool2d, _adaptive_ref,
           samples=_pool_samples([dict(output_size=(3, 2)), dict(output_size=(4, 5))]),
           tol=_LOOSE),
    OpSpec("batch_norm", lambda x, w, b, rm, rv, **kw: F.batch_norm(x, rm, rv, w, b, **kw),
           _bn_ref, samples=_bn_samples, wrt=(0, 1, 2), tol=_LOOSE),
    OpSpec("layer_norm", lambda x, w, b, **kw: F.layer_norm(x, weight=w, bias=b, **kw),
           _ln_ref, samples=_ln_samples, tol=_LOOSE),
    OpSpec("group_norm", lambda x, w, b, **kw: F.group_norm(x, weight=w, bias=b, **kw),
           _gn_ref, samples=_gn_samples, tol=_LOOSE),
    OpSpec("gelu", F.gelu, _gelu_ref, samples=_act_samples({}, {"approximate": "tanh"})),
    OpSpec("silu", F.silu, lambda x: (x * _sig(x)).astype(x.dtype), samples=_act_samples({})),
    OpSpec("elu", F.elu, _elu_ref, samples=_act_samples({}, {"alpha": 0.5}, domain="away0")),
    OpSpec("softplus", F.softplus, _softplus_ref,
           samples=_act_samples({}, {"beta": 2.0, "threshold": 1.5}, domain="away0")),
    OpSpec("hardtanh", F.hardtanh, lambda x, **kw: np.clip(x, kw["min_val"], kw["max_val"]),
           samples=_act_samples({"min_val": -0.5, "max_val": 0.5}, domain="clip")),
    OpSpec("leaky_relu", F.leaky_relu,
           lambda x, negative_slope=0.01: np.where(x > 0, x, x * negative_slope).astype(x.dtype),
           samples=_act_samples({}, {"negative_slope": 0.2}, domain="away0")),
    OpSpec("embedding", lambda w, idx: F.embedding(idx, w), lambda w, idx: w[idx],
           samples=lambda rng, dt: [
               Sample((_r(rng, (5, 3), dt), np.array([[0, 2, 4], [4, 4, 1]]))),
               Sample((_r(rng, (4, 2), dt), np.array(3)))]),
    OpSpec("rnn_layer", lambda gx, h0, w, **kw: ops.rnn_layer(gx, h0, w, **kw), _rnn_ref,
           samples=lambda rng, dt: [Sample(s.args, {"nonlinearity": nl}) for s, nl in zip(
               _rnn_samples(1)(rng, dt), ("tanh", "relu"))], tol=_LOOSE),
    OpSpec("lstm_layer", _lstm_op, _lstm_ref, samples=_rnn_samples(4), tol=_LOOSE),
    OpSpec("gru_layer", ops.gru_layer, _gru_ref, samples=_rnn_samples(3, extra=1), tol=_LOOSE),
    OpSpec("binary_cross_entropy", F.binary_cross_entropy, _bce_ref, samples=_bce_samples(False),
           wrt=(0, 1), tol=_LOOSE),
    OpSpec("binary_cross_entropy_with_logits", F.binary_cross_entropy_with_logits,
           _bce_logits_ref, samples=_bce_samples(True), wrt=(0, 1), tol=_LOOSE),
    OpSpec("huber_loss", F.huber_loss, _huber_ref(False),
           samples=_huber_samples("delta", (1.0, 0.5, 2.0)), tol=_LOOSE),
    OpSpec("smooth_l1_loss", F.smooth_l1_loss, _huber_ref(True),
           samples=_huber_samples("beta", (1.0, 0.0, 0.5)), tol=_LOOSE),
]
