"""Pooling over (N, C, H, W): max_pool2d (with its indices and its backward), avg_pool2d (and
its backward), adaptive_avg_pool2d. Each pair is closed under differentiation, so gradients of
any order exist where PyTorch's do: the max pool's backward is linear in its gradient (a
scatter to the argmax positions, whose VJP is a gather), the average pool's is its transpose.

Params: kernel, stride, padding (ph, pw) on both sides, dilation (max only) and ceil_mode, as
PyTorch's; the output size is PyTorch's `pooling_output_shape`. Eager impls loop over the
kH*kW taps with strided slices (numpy's fast path); the compiler sees the same as ops.
"""
from __future__ import annotations

import numpy as np

from llgrad.runtime.aval import I64, Aval, ShapeError
from llgrad.runtime.ops import elementwise as ew
from llgrad.runtime.ops._util import dtype_of, shape_of
from llgrad.runtime.prim import Primitive, bind, register


def out_size(n, k, s, p, d, ceil_mode):
    """PyTorch's pooling_output_shape: the number of windows along an axis of size n."""
    span = n + 2 * p - d * (k - 1) - 1 + (s - 1 if ceil_mode else 0)
    out = span // s + 1
    if ceil_mode and (out - 1) * s >= n + p:
        out -= 1
    return out


def _geometry(xshape, kernel, stride, padding, dilation, ceil_mode):
    return tuple(out_size(xshape[2 + i], kernel[i], stride[i], padding[i], dilation[i],
                          ceil_mode) for i in (0, 1))


def _pads(xshape, oshape, kernel, stride, padding, dilation):
    """((top, bottom), (left, right)) padding that every window fits in (ceil_mode windows may
    reach past the symmetric padding)."""
    out = []
    for i in (0, 1):
        need = (oshape[i] - 1) * stride[i] + dilation[i] * (kernel[i] - 1) + 1
        out.append((padding[i], max(padding[i], need - xshape[2 + i] - padding[i])))
    return tuple(out)


def _taps(kernel, stride, dilation, oshape):
    """(i, j, row slice, column slice) of the padded input for each kernel tap."""
    for i in range(kernel[0]):
        for j in range(kernel[1]):
            yield (i, j,
                   slice(i * dilation[0], i * dilation[0] + stride[0] * (oshape[0] - 1) + 1,
                         stride[0]),
                   slice(j * dilation[1], j * dilation[1] + stride[1] * (oshape[1] - 1) + 1,
                         stride[1]))


def _padded(x, pads, value):
    (pt, pb), (pl, pr) = pads
    if not (pt or pb or pl or pr):
        return x
    return np.pad(x, ((0, 0), (0, 0), (pt, pb), (pl, pr)), constant_values=value)


def _pool_shape(x, kernel, stride, padding, dilation=(1, 1), ceil_mode=False, **_):
    if len(x.shape) != 4:
        raise ShapeError(f"pooling: expected a 4-d input (N, C, H, W), got {list(x.shape)}")
    for i in (0, 1):
        if padding[i] > (dilation[i] * (kernel[i] - 1) + 1) // 2:
            raise ShapeError(f"pooling: pad should be at most half of effective kernel size, "
                             f"but got pad={padding[i]}, kernel_size={kernel[i]} and "
                             f"dilation={dilation[i]}")
    oh, ow = _geometry(x.shape, kernel, stride, padding, dilation, ceil_mode)
    if oh <= 0 or ow <= 0:
        raise ShapeError(f"pooling: output size is too small: input {list(x.shape)}, kernel "
                         f"{list(kernel)}, stride {list(stride)}, padding {list(padding)} give "
                         f"({oh}x{ow})", fix="use a larger input or a smaller kernel")
    return Aval(tuple(x.shape[:2]) + (oh, ow), x.dtype)


# ---- max pooling ---------------------------------------------------------------------------------
def _max_impl(x, kernel, stride, padding, dilation, ceil_mode):
    _pool_shape(Aval(x.shape, x.dtype), kernel, stride, padding, dilation, ceil_mode)
    oshape = _geometry(x.shape, kernel, stride, padding, dilation, ceil_mode)
    xp = _padded(x, _pads(x.shape, oshape, kernel, stride, padding, dilation), -np.inf)
    out = None
    for _, _, hs, ws in _taps(kernel, stride, dilation, oshape):
        out = xp[:, :, hs, ws].copy() if out is None else np.maximum(out, xp[:, :, hs, ws], out=out)
    return out


def _argmax_taps(x, kernel, stride, padding, dilation, ceil_mode):
    """(the tap i * kW + j of each window's first maximum, the taps' slices); NaN counts as
    the largest value, as in PyTorch. Branch-free (masked numpy copies are slow): the
    maximum first, then the taps equal to it, last to first."""
    oshape = _geometry(x.shape, kernel, stride, padding, dilation, ceil_mode)
    xp = _padded(x, _pads(x.shape, oshape, kernel, stride, padding, dilation), -np.inf)
    taps = [(hs, ws) for _, _, hs, ws in _taps(kernel, stride, dilation, oshape)]
    best = xp[:, :, taps[0][0], taps[0][1]].copy()
    for hs, ws in taps[1:]:
        np.maximum(best, xp[:, :, hs, ws], out=best)  # propagates NaN
    nan = np.isnan(best) if np.isnan(x).any() else None
    which = np.zeros(best.shape, np.int16 if len(taps) < 2 ** 15 else np.int64)
    for k in range(len(taps) - 1, -1, -1):
        v = xp[:, :, taps[k][0], taps[k][1]]
        eq = v == best
        if nan is not None:
            eq |= nan & np.isnan(v)
        which -= (which - k) * eq  # which = k where eq
    return which, taps


def _indices_impl(x, kernel, stride, padding, dilation, ceil_mode):
    """Flat indices into H*W of each window's first maximum."""
    which, _ = _argmax_taps(x, kernel, stride, padding, dilation, ceil_mode)
    which = which.astype(np.int64)
    oh, ow = which.shape[2:]
    rows = (np.arange(oh) * stride[0] - padding[0])[:, None] + which // kernel[1] * dilation[0]
    cols = np.arange(ow) * stride[1] - padding[1] + which % kernel[1] * dilation[1]
    return (rows * x.shape[3] + cols).astype(np.int64, copy=False)


def _max_backward_impl(g, x, kernel, stride, padding, dilation, ceil_mode):
    """g added at each window's first maximum: tap by tap into the padded input's shape. Each
    tap takes g selected, not multiplied by a mask, so an inf or NaN gradient reaches its
    maximum only (as PyTorch's scatter), never the window's other positions."""
    which, taps = _argmax_taps(x, kernel, stride, padding, dilation, ceil_mode)
    pads = _pads(x.shape, g.shape[2:], kernel, stride, padding, dilation)
    dx = np.zeros(x.shape[:2] + tuple(x.shape[2 + i] + sum(pads[i]) for i in (0, 1)), g.dtype)
    zero = np.zeros((), g.dtype)
    for k, (hs, ws) in enumerate(taps):
        dx[:, :, hs, ws] += ew.where_p.impl(which == k, g, zero)
    (pt, _), (pl, _) = pads
    return np.ascontiguousarray(dx[:, :, pt:pt + x.shape[2], pl:pl + x.shape[3]])


def _gather_windows(v, idx):
    """v (N, C, H, W) at the flat indices idx (N, C, OH, OW)."""
    from llgrad.runtime.ops.gather import gather_p
    from llgrad.runtime.ops.shape import reshape
    n, c, oh, ow = shape_of(idx)
    flat = bind(gather_p, reshape(v, (n, c, -1)), reshape(idx, (n, c, -1)), axis=2)
    return reshape(flat, (n, c, oh, ow))


def _scatter_windows(g, idx, xshape):
    from llgrad.runtime.ops.gather import put_along_axis_add
    from llgrad.runtime.ops.shape import reshape
    n, c = xshape[:2]
    flat = put_along_axis_add(reshape(g, (n, c, -1)), reshape(idx, (n, c, -1)), 2,
                              (n, c, xshape[2] * xshape[3]))
    return reshape(flat, xshape)


def _indices_decompose(x, kernel, stride, padding, dilation, ceil_mode):
    from llgrad.runtime.ops.gather import take_along_axis
    from llgrad.runtime.ops.reduce import argmax
    from llgrad.runtime.ops.shape import broadcast_to, stack
    from llgrad.runtime.ops.structure import pad
    oshape = _geometry(shape_of(x), kernel, stride, padding, dilation, ceil_mode)
    pads = _pads(shape_of(x), oshape, kernel, stride, padding, dilation)
    xp = pad(x, ((0, 0), (0, 0)) + pads, constant_values=-np.inf)
    taps = list(_taps(kernel, stride, dilation, oshape))
    which = argmax(stack([_slice(xp, hs, ws) for _, _, hs, ws in taps], 2), 2, keepdim=True)
    rows = np.arange(oshape[0]) * stride[0] - padding[0]
    cols = np.arange(oshape[1]) * stride[1] - padding[1]
    table = np.stack([(rows[:, None] + i * dilation[0]) * shape_of(x)[3]
                      + cols[None, :] + j * dilation[1] for i, j, _, _ in taps])
    table = broadcast_to(table.astype(np.int64), tuple(shape_of(x)[:2]) + table.shape)
    return take_along_axis(table, which, 2)[:, :, 0]


def _slice(x, hs, ws):
    from llgrad.runtime.ops.index import getitem
    return getitem(x, (slice(None), slice(None), hs, ws))


def _indices(x, params):
    return bind(max_pool2d_indices_p, x, **params)


max_pool2d_indices_p = register(Primitive(
    "max_pool2d_indices", "pool", _indices_impl,
    lambda x, **p: Aval(_pool_shape(x, **p).shape, I64), nondiff=True,
    decompose=_indices_decompose))

max_pool2d_p = register(Primitive(
    "max_pool2d", "pool", _max_impl, _pool_shape,
    (lambda g, out, x, **p: bind(max_pool2d_backward_p, g, x, **p),), saves=(0,),
    decompose=lambda x, **p: _gather_windows(x, _indices(x, p)),
    node_name="MaxPool2DWithIndicesBackward0"))

max_pool2d_backward_p = register(Primitive(
    "max_pool2d_backward", "pool", _max_backward_impl,
    lambda g, x, **p: Aval(tuple(x.shape), x.dtype),
    (lambda g, out, gy, x, **p: _gather_windows(g, _indices(x, p)),
     lambda g, out, gy, x, **p: None),  # piecewise constant in x: no gradient
    saves=(1,),
    decompose=lambda g, x, **p: _scatter_windows(g, _indices(x, p), shape_of(x)),
    node_name="MaxPool2DWithIndicesBackwardBackward0"))


# ---- average pooling -----------------------------------------------------------------------------
def _divisor(hw, oshape, kernel, stride, padding, count_include_pad, divisor_override):
    """(OH, OW) divisors: window sizes clipped to the padded input (count_include_pad) or to
    the input, as PyTorch's avg_pool2d."""
    if divisor_override:
        return np.asarray(float(divisor_override))
    sizes = []
    for i in (0, 1):
        start = np.arange(oshape[i]) * stride[i] - padding[i]
        end = np.minimum(start + kernel[i], hw[i] + padding[i])
        if not count_include_pad:
            start, end = np.maximum(start, 0), np.minimum(end, hw[i])
        sizes.append((end - start).astype(np.float64))
    return sizes[0][:, None] * sizes[1][None, :]


def _avg_params(kernel, stride, padding, ceil_mode):
    return dict(kernel=kernel, stride=stride, padding=padding, dilation=(1, 1),
                ceil_mode=ceil_mode)


def _avg_impl(x, kernel, stride, padding, ceil_mode, count_include_pad, divisor_override):
    _pool_shape(Aval(x.shape, x.dtype), kernel, stride, padding, (1, 1), ceil_mode)
    oshape = _geometry(x.shape, kernel, stride, padding, (1, 1), ceil_mode)
    xp = _padded(x, _pads(x.shape, oshape, kernel, stride, padding, (1, 1)), 0)
    out = None
    for _, _, hs, ws in _taps(kernel, stride, (1, 1), oshape):
        out = xp[:, :, hs, ws].copy() if out is None else np.add(out, xp[:, :, hs, ws], out=out)
    div = _divisor(x.shape[2:], oshape, kernel, stride, padding, count_include_pad,
                   divisor_override)
    return np.divide(out, div.astype(x.dtype), out=out)


def _avg_backward_impl(g, hw, kernel, stride, padding, ceil_mode, count_include_pad,
                       divisor_override):
    n, c, oh, ow = g.shape
    xshape = (n, c) + tuple(hw)
    pads = _pads(xshape, (oh, ow), kernel, stride, padding, (1, 1))
    div = _divisor(hw, (oh, ow), kernel, stride, padding, count_include_pad, divisor_override)
    gd = g / div.astype(g.dtype)
    dx = np.zeros((n, c, hw[0] + sum(pads[0]), hw[1] + sum(pads[1])), g.dtype)
    for _, _, hs, ws in _taps(kernel, stride, (1, 1), (oh, ow)):
        dx[:, :, hs, ws] += gd
    return np.ascontiguousarray(dx[:, :, pads[0][0]:pads[0][0] + hw[0],
                                   pads[1][0]:pads[1][0] + hw[1]])


def _avg_decompose(x, kernel, stride, padding, ceil_mode, count_include_pad, divisor_override):
    from llgrad.runtime.ops.structure import pad
    oshape = _geometry(shape_of(x), kernel, stride, padding, (1, 1), ceil_mode)
    pads = _pads(shape_of(x), oshape, kernel, stride, padding, (1, 1))
    xp = pad(x, ((0, 0), (0, 0)) + pads)
    out = None
    for _, _, hs, ws in _taps(kernel, stride, (1, 1), oshape):
        out = _slice(xp, hs, ws) if out is None else ew.add(out, _slice(xp, hs, ws))
    div = _divisor(shape_of(x)[2:], oshape, kernel, stride, padding, count_include_pad,
                   divisor_override)
    return ew.div(out, div.astype(dtype_of(x)))


def _avg_backward_decompose(g, hw, kernel, stride, padding, ceil_mode, count_include_pad,
                            divisor_override):
    from llgrad.runtime.ops.index import scatter_add_p
    n, c, oh, ow = shape_of(g)
    pads = _pads((n, c) + tuple(hw), (oh, ow), kernel, stride, padding, (1, 1))
    div = _divisor(hw, (oh, ow), kernel, stride, padding, count_include_pad, divisor_override)
    gd = ew.div(g, div.astype(dtype_of(g)))
    shape = (n, c, hw[0] + sum(pads[0]), hw[1] + sum(pads[1]))
    dx = None
    for _, _, hs, ws in _taps(kernel, stride, (1, 1), (oh, ow)):
        key = (("s", None, None, None),) * 2 + tuple(("s", s.start, s.stop, s.step)
                                                    for s in (hs, ws))
        part = bind(scatter_add_p, gd, key=key, shape=shape)
        dx = part if dx is None else ew.add(dx, part)
    return _slice(dx, slice(pads[0][0], pads[0][0] + hw[0]),
                  slice(pads[1][0], pads[1][0] + hw[1]))


def _avg_shape(x, kernel, stride, padding, ceil_mode, count_include_pad, divisor_override):
    return _pool_shape(x, **_avg_params(kernel, stride, padding, ceil_mode))


avg_pool2d_p = register(Primitive(
    "avg_pool2d", "pool", _avg_impl, _avg_shape,
    (lambda g, out, x, **p: bind(avg_pool2d_backward_p, g, hw=shape_of(x)[2:], **p),),
    saves=(), decompose=_avg_decompose, node_name="AvgPool2DBackward0"))

avg_pool2d_backward_p = register(Primitive(
    "avg_pool2d_backward", "pool", _avg_backward_impl,
    lambda g, hw, **p: Aval(tuple(g.shape[:2]) + tuple(hw), g.dtype),
    (lambda g, out, gy, hw, **p: bind(avg_pool2d_p, g, **p),), saves=(),
    decompose=_avg_backward_decompose, node_name="AvgPool2DBackwardBackward0"))


# ---- adaptive average pooling --------------------------------------------------------------------
def adaptive_matrix(n, out, dtype):
    """(out, n) averaging matrix: row i averages [floor(i*n/out), ceil((i+1)*n/out))."""
    m = np.zeros((out, n), dtype)
    for i in range(out):
        a, b = (i * n) // out, -((-(i + 1) * n) // out)
        m[i, a:b] = 1.0 / (b - a)
    return m


def _adaptive_mats(hw, size, dtype):
    return adaptive_matrix(hw[0], size[0], dtype), adaptive_matrix(hw[1], size[1], dtype).T


def _adaptive_impl(x, size):
    mh, mw = _adaptive_mats(x.shape[2:], size, x.dtype)
    return np.matmul(np.matmul(mh, x), mw)


def _adaptive_apply(x, mh, mw):
    from llgrad.runtime.ops.linalg import matmul
    return matmul(matmul(mh, x), mw)


def _adaptive_vjp(g, out, x, size):
    mh, mw = _adaptive_mats(shape_of(x)[2:], size, dtype_of(g))
    return _adaptive_apply(g, np.ascontiguousarray(mh.T), np.ascontiguousarray(mw.T))


def _adaptive_shape(x, size):
    if len(x.shape) != 4 or min(size) <= 0:
        raise ShapeError(f"adaptive_avg_pool2d: expected a 4-d input and a positive output "
                         f"size, got {list(x.shape)} and {list(size)}")
    return Aval(tuple(x.shape[:2]) + tuple(size), x.dtype)


adaptive_avg_pool2d_p = register(Primitive(
    "adaptive_avg_pool2d", "pool", _adaptive_impl, _adaptive_shape, (_adaptive_vjp,), saves=(),
    decompose=lambda x, size: _adaptive_apply(x, *_adaptive_mats(shape_of(x)[2:], size,
                                                                 dtype_of(x))),
    node_name="AdaptiveAvgPool2DBackward0"))
