"""Convolution (1-d and 2-d): conv and its two transposes, closed under differentiation (Note
[Three convolutions]); conv_transpose is the input gradient's primitive.

Eagerly each runs as im2col + one BLAS matmul per group (Note [im2col layout]); the compiler
sees `decompose`, the same computation written with slices, stacks and matmul. Shapes are
(N, C, H, W) inputs and (O, C/groups, kH, kW) weights; padding is ((top, bottom), (left,
right)) zeros, so 'same' with an even kernel needs no extra pad node. A 1-d convolution (N, C,
W) is computed as a 2-d one of height 1.
"""
from __future__ import annotations

import numpy as np

from llgrad.runtime.aval import Aval, ShapeError
from llgrad.runtime.ops import elementwise as ew
from llgrad.runtime.ops._util import dtype_of, operands, shape_of
from llgrad.runtime.prim import Primitive, bind, register

# Note [Three convolutions]
# y = conv(x, w) is bilinear, so its VJPs are two other bilinear maps: dx = conv_input_grad(g,
# w) (the transpose of x -> conv(x, w), i.e. conv_transpose) and dw = conv_weight_grad(x, g)
# (the transpose of w -> conv(x, w)). Their VJPs are again these three maps: for a cotangent c
# of dx, <c, input_grad(g, w)> = <conv(c, w), g> = <weight_grad(c, g), w>, so ct_g =
# conv(c, w) and ct_w = weight_grad(c, g); for a cotangent e of dw, <e, weight_grad(x, g)> =
# <conv(x, e), g>, so ct_x = input_grad(g, e) and ct_g = conv(x, e). Gradients of any order
# are therefore convolutions, as in PyTorch (ConvolutionBackward0 is differentiable).

# Note [im2col layout]
# The columns of x are laid out (C, kH, kW, N, OH, OW) and reshaped to (G, C/G*kH*kW, N*OH*OW):
# building them is kH*kW strided slice copies (faster than one 6-d strided copy), and the
# forward and the weight gradient are each one matmul per group over several images at once
# (a large gemm rather than one per image; measured faster here), with a transpose of the (O,
# N, L) result. The input gradient instead makes per-image columns (N, G, kH, kW, C/G, L), tap
# major, straight from g without transposing it, and scatters them back with kH*kW strided
# adds (col2im).
#
# All three run over chunks of images whose columns take about _CHUNK_BYTES: the columns are
# kH*kW times the input, and built for the whole batch they are streamed through memory twice
# (written, then read by the gemm). A chunk that stays in cache made the 16->32-channel 3x3
# convolution of 64 28x28 images 23% faster here (8.2 -> 6.4 ms; 29 MB of columns at once
# against 3.6 MB). The weight gradient sums the chunks' products in order.
_CHUNK_BYTES = 4 << 20


def _chunks(n, per_image_bytes):
    """Slices of the batch (0..n) of about _CHUNK_BYTES of columns each."""
    step = max(1, _CHUNK_BYTES // max(per_image_bytes, 1))
    return [slice(s, min(s + step, n)) for s in range(0, n, step)]


def _out_size(n, k, stride, pad, dil):
    return (n + pad[0] + pad[1] - dil * (k - 1) - 1) // stride + 1


def _geometry(xshape, kshape, stride, padding, dilation):
    return tuple(_out_size(xshape[2 + i], kshape[i], stride[i], padding[i], dilation[i])
                 for i in (0, 1))


def _window(i, j, oh, ow, stride, dilation):
    """The slices of the padded input that kernel tap (i, j) reads, for every output."""
    si, sj = i * dilation[0], j * dilation[1]
    return (slice(si, si + stride[0] * (oh - 1) + 1, stride[0]),
            slice(sj, sj + stride[1] * (ow - 1) + 1, stride[1]))


def _pad_array(x, padding):
    (pt, pb), (pl, pr) = padding
    if not (pt or pb or pl or pr):
        return x
    return np.pad(x, ((0, 0), (0, 0), (pt, pb), (pl, pr)))


def _im2col(x, kshape, stride, padding, dilation, groups):
    """(G, C/G*kH*kW, N*OH*OW) columns of x; see Note [im2col layout]."""
    n, c = x.shape[:2]
    oh, ow = _geometry(x.shape, kshape, stride, padding, dilation)
    xt = _pad_array(x, padding).transpose(1, 0, 2, 3)
    cols = np.empty((c, kshape[0], kshape[1], n, oh, ow), x.dtype)
    for i in range(kshape[0]):
        for j in range(kshape[1]):
            hs, ws = _window(i, j, oh, ow, stride, dilation)
            cols[:, i, j] = xt[:, :, hs, ws]
    return cols.reshape(groups, -1, n * oh * ow)


def _by_group(g, groups):
    """(N, O, OH, OW) -> (G, O/G, N*OH*OW)."""
    n, o = g.shape[:2]
    return np.ascontiguousarray(g.transpose(1, 0, 2, 3)).reshape(groups, o // groups, -1)


def _flat(stride, padding, dilation):
    """1-d params as 2-d ones over a height of 1."""
    return (1,) + tuple(stride), ((0, 0),) + tuple(padding), (1,) + tuple(dilation)


def _conv_impl(x, w, b, stride, padding, dilation, groups):
    if x.ndim == 3:
        return _conv_impl(x[:, :, None], w[:, :, None], b, *_flat(stride, padding, dilation),
                          groups)[:, :, 0]
    n, o = x.shape[0], w.shape[0]
    oh, ow = _geometry(x.shape, w.shape[2:], stride, padding, dilation)
    wg = w.reshape(groups, o // groups, -1)
    out = np.empty((n, o, oh, ow), np.result_type(x, w))
    for part in _chunks(n, w[0].size * groups * oh * ow * x.itemsize):
        cols = _im2col(x[part], w.shape[2:], stride, padding, dilation, groups)
        y = np.matmul(wg, cols).reshape(o, -1, oh, ow).transpose(1, 0, 2, 3)
        if b.ndim:
            np.add(y, b.reshape(o, 1, 1), out=out[part])
        else:
            out[part] = y
    return out


def _input_grad_impl(g, w, hw, stride, padding, dilation, groups):
    if g.ndim == 3:
        return _input_grad_impl(g[:, :, None], w[:, :, None], (1,) + tuple(hw),
                                *_flat(stride, padding, dilation), groups)[:, :, 0]
    n, o, oh, ow = g.shape
    kh, kw = w.shape[2:]
    cg = w.shape[1]
    # per image and group: columns (kH, kW, C/G, L) = w^T @ g, tap-major so each tap's slice
    # is contiguous; no transpose of g (see Note [im2col layout] for the forward's)
    wt = w.reshape(groups, o // groups, cg, kh, kw).transpose(0, 3, 4, 2, 1)
    wt = wt.reshape(groups, kh * kw * cg, o // groups)
    (pt, pb), (pl, pr) = padding
    hp = max(hw[0] + pt + pb, stride[0] * (oh - 1) + dilation[0] * (kh - 1) + 1)
    wp = max(hw[1] + pl + pr, stride[1] * (ow - 1) + dilation[1] * (kw - 1) + 1)
    out = np.empty((n, groups * cg) + tuple(hw), np.result_type(g, w))
    for part in _chunks(n, w.size * oh * ow * g.itemsize // max(o // groups, 1)):
        m = g[part].shape[0]
        cols = np.matmul(wt, g[part].reshape(m, groups, o // groups, oh * ow))
        cols = cols.reshape(m, groups, kh, kw, cg, oh, ow)
        dx = np.zeros((m, groups, cg, hp, wp), out.dtype)
        for i in range(kh):
            for j in range(kw):
                hs, ws = _window(i, j, oh, ow, stride, dilation)
                dx[:, :, :, hs, ws] += cols[:, :, i, j]
        out[part] = dx.reshape(m, groups * cg, hp, wp)[:, :, pt:pt + hw[0], pl:pl + hw[1]]
    return out


def _weight_grad_impl(x, g, khw, stride, padding, dilation, groups):
    if x.ndim == 3:
        return _weight_grad_impl(x[:, :, None], g[:, :, None], (1,) + tuple(khw),
                                 *_flat(stride, padding, dilation), groups)[:, :, 0]
    n, o = g.shape[:2]
    dw = None
    for part in _chunks(n, x.shape[1] * khw[0] * khw[1] * g.shape[2] * g.shape[3] * x.itemsize):
        cols = _im2col(x[part], khw, stride, padding, dilation, groups)
        d = np.matmul(_by_group(g[part], groups), cols.transpose(0, 2, 1))
        dw = d if dw is None else np.add(dw, d, out=dw)
    if dw is None:  # an empty batch
        dw = np.zeros((o, x.shape[1] // groups) + tuple(khw), np.result_type(x, g))
    return dw.reshape(o, x.shape[1] // groups, khw[0], khw[1])


# ---- shape rules --------------------------------------------------------------------------------
def _up(a):
    """A 1-d convolution's aval as a 2-d one of height 1."""
    return Aval(tuple(a.shape[:2]) + (1,) + tuple(a.shape[2:]), a.dtype)


def _down(a):
    return Aval(tuple(a.shape[:2]) + tuple(a.shape[3:]), a.dtype)


def _check(x, w, groups, what):
    if len(x.shape) not in (3, 4) or len(w.shape) != len(x.shape):
        raise ShapeError(f"{what}: expected a 3-d or 4-d input and a weight of the same rank, "
                         f"got shapes {list(x.shape)} and {list(w.shape)}")
    if x.dtype != w.dtype:
        raise ShapeError(f"{what}: input ({x.dtype}) and weight ({w.dtype}) must have the same "
                         "dtype", fix="convert one with .float() or .double()")
    if w.shape[0] % groups:
        raise ShapeError(f"{what}: {w.shape[0]} output channels are not divisible by "
                         f"groups={groups}")


def _conv_shape(x, w, b, stride, padding, dilation, groups):
    _check(x, w, groups, "conv")
    if len(x.shape) == 3:
        return _down(_conv_shape(_up(x), _up(w), b, *_flat(stride, padding, dilation), groups))
    if x.shape[1] != w.shape[1] * groups:
        raise ShapeError(f"conv: weight of shape {list(w.shape)} with groups={groups} expects "
                         f"{w.shape[1] * groups} input channels, but the input of shape "
                         f"{list(x.shape)} has {x.shape[1]}")
    if b.shape not in ((), (w.shape[0],)):
        raise ShapeError(f"conv: bias of shape {list(b.shape)} for {w.shape[0]} output channels")
    oh, ow = _geometry(x.shape, w.shape[2:], stride, padding, dilation)
    if oh <= 0 or ow <= 0:
        hp = [x.shape[2 + i] + sum(padding[i]) for i in (0, 1)]
        kd = [dilation[i] * (w.shape[2 + i] - 1) + 1 for i in (0, 1)]
        raise ShapeError(f"conv: calculated padded input size per channel ({hp[0]} x "
                         f"{hp[1]}) is smaller than the (dilated) kernel ({kd[0]} x {kd[1]})",
                         fix="use a larger input, more padding or a smaller kernel")
    return Aval((x.shape[0], w.shape[0], oh, ow), x.dtype)


def _input_grad_shape(g, w, hw, stride, padding, dilation, groups):
    _check(g, w, groups, "conv_transpose")
    if g.shape[1] != w.shape[0]:
        raise ShapeError(f"conv_transpose: input of shape {list(g.shape)} has {g.shape[1]} "
                         f"channels; weight of shape {list(w.shape)} expects {w.shape[0]}")
    return Aval((g.shape[0], w.shape[1] * groups) + tuple(hw), g.dtype)


def _weight_grad_shape(x, g, khw, stride, padding, dilation, groups):
    _check(x, g, groups, "conv weight gradient")
    return Aval((g.shape[1], x.shape[1] // groups) + tuple(khw), x.dtype)


# ---- decompositions (for the compiler) -----------------------------------------------------------
def _columns(x, khw, stride, padding, dilation, groups):
    """(N, G, C/G*kH*kW, OH*OW) columns of x, written with ops."""
    from llgrad.runtime.ops.shape import reshape, stack
    from llgrad.runtime.ops.structure import torch_pad
    n, c = shape_of(x)[:2]
    oh, ow = _geometry(shape_of(x), khw, stride, padding, dilation)
    (pt, pb), (pl, pr) = padding
    xp = torch_pad(x, (pl, pr, pt, pb)) if pt or pb or pl or pr else x
    taps = [_hw_slice(xp, *_window(i, j, oh, ow, stride, dilation))
            for i in range(khw[0]) for j in range(khw[1])]
    return reshape(stack(taps, 2), (n, groups, -1, oh * ow))


def _hw_slice(x, hs, ws):
    """x[:, :, hs, ws] with ops."""
    from llgrad.runtime.ops.index import getitem
    return getitem(x, (slice(None), slice(None), hs, ws))


def _conv_decompose(x, w, b, stride, padding, dilation, groups):
    if len(shape_of(x)) == 3:
        return _conv_decompose(x[:, :, None], w[:, :, None], b,
                               *_flat(stride, padding, dilation), groups)[:, :, 0]
    from llgrad.runtime.ops.linalg import matmul
    from llgrad.runtime.ops.shape import reshape
    n, o = shape_of(x)[0], shape_of(w)[0]
    oh, ow = _geometry(shape_of(x), shape_of(w)[2:], stride, padding, dilation)
    cols = _columns(x, shape_of(w)[2:], stride, padding, dilation, groups)
    y = reshape(matmul(reshape(w, (groups, o // groups, -1)), cols), (n, o, oh, ow))
    return ew.add(y, reshape(b, (o, 1, 1))) if shape_of(b) else y


def _input_grad_decompose(g, w, hw, stride, padding, dilation, groups):
    if len(shape_of(g)) == 3:
        return _input_grad_decompose(g[:, :, None], w[:, :, None], (1,) + tuple(hw),
                                     *_flat(stride, padding, dilation), groups)[:, :, 0]
    from llgrad.runtime.ops.index import getitem, scatter_add_p
    from llgrad.runtime.ops.linalg import matmul
    from llgrad.runtime.ops.shape import reshape, swapaxes
    n, o, oh, ow = shape_of(g)
    kh, kw = shape_of(w)[2:]
    c = shape_of(w)[1] * groups
    wg = reshape(w, (groups, o // groups, -1))
    cols = matmul(swapaxes(wg, -1, -2), reshape(g, (n, groups, o // groups, oh * ow)))
    cols = reshape(cols, (n, c, kh, kw, oh, ow))
    (pt, pb), (pl, pr) = padding
    hp = max(hw[0] + pt + pb, stride[0] * (oh - 1) + dilation[0] * (kh - 1) + 1)
    wp = max(hw[1] + pl + pr, stride[1] * (ow - 1) + dilation[1] * (kw - 1) + 1)
    dx = None
    for i in range(kh):
        for j in range(kw):
            hs, ws = _window(i, j, oh, ow, stride, dilation)
            key = (("s", None, None, None),) * 2 + tuple(("s", s.start, s.stop, s.step)
                                                        for s in (hs, ws))
            part = bind(scatter_add_p, getitem(cols, (slice(None), slice(None), i, j)),
                        key=key, shape=(n, c, hp, wp))
            dx = part if dx is None else ew.add(dx, part)
    return _hw_slice(dx, slice(pt, pt + hw[0]), slice(pl, pl + hw[1]))


def _weight_grad_decompose(x, g, khw, stride, padding, dilation, groups):
    if len(shape_of(x)) == 3:
        return _weight_grad_decompose(x[:, :, None], g[:, :, None], (1,) + tuple(khw),
                                      *_flat(stride, padding, dilation), groups)[:, :, 0]
    from llgrad.runtime.ops.linalg import matmul
    from llgrad.runtime.ops.reduce import sum
    from llgrad.runtime.ops.shape import reshape, swapaxes
    n, o, oh, ow = shape_of(g)
    cols = _columns(x, khw, stride, padding, dilation, groups)
    gg = reshape(g, (n, groups, o // groups, oh * ow))
    dw = sum(matmul(gg, swapaxes(cols, -1, -2)), 0)
    return reshape(dw, (o, shape_of(x)[1] // groups) + tuple(khw))


# ---- the primitives (see Note [Three convolutions]) ---------------------------------------------
def _conv_vjp_x(g, out, x, w, b, stride, padding, dilation, groups):
    return bind(conv_input_grad_p, g, w, hw=shape_of(x)[2:], stride=stride, padding=padding,
                dilation=dilation, groups=groups)


def _conv_vjp_w(g, out, x, w, b, stride, padding, dilation, groups):
    return bind(conv_weight_grad_p, x, g, khw=shape_of(w)[2:], stride=stride, padding=padding,
                dilation=dilation, groups=groups)


def _conv_vjp_b(g, out, x, w, b, stride, padding, dilation, groups):
    from llgrad.runtime.ops.reduce import sum
    return sum(g, (0,) + tuple(range(2, len(shape_of(g))))) if shape_of(b) else None


conv_p = register(Primitive(
    "conv", "conv", _conv_impl, _conv_shape, (_conv_vjp_x, _conv_vjp_w, _conv_vjp_b),
    saves=(0, 1), decompose=_conv_decompose, node_name="ConvolutionBackward0"))


def _conv(x, w, stride, padding, dilation, groups):
    return bind(conv_p, x, w, np.zeros((), dtype_of(x)), stride=stride, padding=padding,
                dilation=dilation, groups=groups)


conv_input_grad_p = register(Primitive(
    "conv_input_grad", "conv", _input_grad_impl, _input_grad_shape,
    (lambda g, out, gy, w, hw, **p: _conv(g, w, **p),
     lambda g, out, gy, w, hw, **p: bind(conv_weight_grad_p, g, gy, khw=shape_of(w)[2:], **p)),
    saves=(0, 1), decompose=_input_grad_decompose, node_name="ConvolutionBackward0"))

conv_weight_grad_p = register(Primitive(
    "conv_weight_grad", "conv", _weight_grad_impl, _weight_grad_shape,
    (lambda g, out, x, gy, khw, **p: bind(conv_input_grad_p, gy, g, hw=shape_of(x)[2:], **p),
     lambda g, out, x, gy, khw, **p: _conv(x, g, **p)),
    saves=(0, 1), decompose=_weight_grad_decompose, node_name="ConvolutionBackwardBackward0"))


# ---- the ops API --------------------------------------------------------------------------------
def _ntuple(v, k, what):
    if isinstance(v, (int, np.integer)):
        return (int(v),) * k
    v = tuple(int(e) for e in v)
    if len(v) != k:
        raise ShapeError(f"{what} must be an int or a tuple of {k} ints, got {v}")
    return v


def conv_params(k, stride, padding, dilation):
    """(stride, ((before, after), ...), dilation) for k spatial dimensions, from ints, k-tuples
    or, for padding, k (before, after) pairs."""
    stride, dilation = _ntuple(stride, k, "stride"), _ntuple(dilation, k, "dilation")
    if isinstance(padding, (int, np.integer)) or all(
            isinstance(p, (int, np.integer)) for p in padding):
        padding = tuple((p, p) for p in _ntuple(padding, k, "padding"))
    else:
        padding = tuple((int(a), int(b)) for a, b in padding)
    if min(stride) <= 0 or min(dilation) <= 0 or min(min(p) for p in padding) < 0:
        raise ShapeError(f"conv: stride and dilation must be positive and padding "
                         f"non-negative, got stride={stride}, padding={padding}, "
                         f"dilation={dilation}")
    return stride, padding, dilation


def conv(x, w, b=None, stride=1, padding=0, dilation=1, groups=1):
    """Cross-correlation of x (N, C, [H,] W) with w (O, C/groups, [kH,] kW), plus b (O,)."""
    (x, w), dt = operands(x, w)
    stride, padding, dilation = conv_params(len(shape_of(x)) - 2, stride, padding, dilation)
    b = np.zeros((), dt) if b is None else b
    return bind(conv_p, x, w, b, stride=stride, padding=padding, dilation=dilation,
                groups=int(groups))


def conv_transpose(x, w, stride=1, padding=0, dilation=1, groups=1, output_size=None):
    """The transpose of conv (its gradient with respect to the input): x (N, C_in, [H,] W),
    w (C_in, C_out/groups, [kH,] kW); `output_size` picks among the sizes that stride > 1
    leaves open (PyTorch's output_padding)."""
    (x, w), _ = operands(x, w)
    stride, padding, dilation = conv_params(len(shape_of(x)) - 2, stride, padding, dilation)
    hw = output_size or tuple(
        (n - 1) * s - sum(p) + d * (k - 1) + 1 for n, s, p, d, k in
        zip(shape_of(x)[2:], stride, padding, dilation, shape_of(w)[2:]))
    return bind(conv_input_grad_p, x, w, hw=tuple(int(v) for v in hw), stride=stride,
                padding=padding, dilation=dilation, groups=int(groups))
