"""Scans along one axis: the primitives cumsum, linrec (the affine recurrence
y[k] = a[k] y[k-1] + b[k]), iir (the all-pole filter y[k] = v[k] - sum_m a[m-1] y[k-m]) and
cumargmax/cumargmin (the running arg-extremum, no gradient),
lowered in codegen/lowerings/scan.py; and the composites cumprod, cummax and cummin (one eager
node each, PyTorch's names; the compiler sees their `decompose`).

Scans take `axis` (a non-negative int); `reverse=True` runs from the end of the axis.
See Note [Scan gradients].
"""
from __future__ import annotations

import numpy as np

from llgrad.runtime.aval import I64, Aval, ShapeError, normalize_axes
from llgrad.runtime.ops import elementwise as ew
from llgrad.runtime.ops._util import dtype_of, operands, shape_of
from llgrad.runtime.prim import Primitive, bind, register

# Note [Scan gradients]
# cumsum's VJP is the reversed cumsum of g. cumprod's is exact with zeros in the input (no
# division by x): d y[j] / d x[k] = (prod_{i<k} x_i) (prod_{k<i<=j} x_i) for j >= k, so
#   grad[k] = excl[k] * r[k],  excl = the exclusive cumprod (y shifted by one, 1 first),
#   r[k] = g[k] + x[k+1] r[k+1]   (a reversed affine recurrence: linrec(x, g, reverse=True)).
# linrec is its own transpose up to direction: y[k] = a[k] y[k-1] + b[k] has
#   grad_b = linrec(a, g, reversed direction),  grad_a[k] = grad_b[k] y[k-1]  (0 at k = 0),
# and the reversed recurrence y[k] = a[k+1] y[k+1] + b[k] the mirror image, so gradients of
# every order are linrecs, shifts and products. cummax/cummin send each output's gradient to
# the input position its value came from (PyTorch's cummax_backward), through the gather.


def _shift(v, axis, fill, reverse=False):
    """v moved one step along `axis` (towards the end; towards the start if reverse), with
    `fill` entering at the vacated end."""
    from llgrad.runtime.ops.index import slice_axis
    from llgrad.runtime.ops.shape import concatenate
    n = shape_of(v)[axis]
    if n == 0:
        return v
    edge = list(shape_of(v))
    edge[axis] = 1
    pad = np.full(edge, fill, dtype_of(v))
    if n == 1:
        return ew.add(ew.mul(v, 0.0), pad) if fill != 0 else ew.mul(v, 0.0)
    if reverse:
        return concatenate([slice_axis(v, axis, 1, n), pad], axis)
    return concatenate([pad, slice_axis(v, axis, 0, n - 1)], axis)


def _along(fn, x, axis, reverse):
    """Run a forward numpy scan `fn` along `axis`, from the end when `reverse`."""
    if not reverse:
        return fn(x, axis)
    return np.flip(fn(np.flip(x, axis), axis), axis)


def _same(x, *rest, axis, **_):
    return Aval(x.shape, x.dtype)


# ---- cumsum -------------------------------------------------------------------------------
cumsum_p = register(Primitive(
    "cumsum", "scan", lambda x, axis, reverse: _along(
        lambda v, a: np.cumsum(v, a, dtype=v.dtype), x, axis, reverse), _same,
    (lambda g, out, x, axis, reverse: cumsum_axis(g, axis, not reverse),), saves=(),
    node_name="CumsumBackward0", linear="linear"))


# ---- linrec -------------------------------------------------------------------------------
def _linrec_impl(a, b, axis, reverse):
    a, b = np.moveaxis(a, axis, 0), np.moveaxis(b, axis, 0)
    y = np.empty_like(b)
    n = b.shape[0]
    order = range(n - 1, -1, -1) if reverse else range(n)
    prev = None
    for k in order:
        if prev is None:
            y[k] = b[k]
        else:  # the multiplier sits at the later index of the step (Note [Scan gradients])
            y[k] = a[max(k, prev)] * y[prev] + b[k]
        prev = k
    return np.moveaxis(y, 0, axis)


def _linrec_vjp_a(g, out, a, b, axis, reverse):
    lam = linrec(a, g, axis, not reverse)
    if reverse:
        return ew.mul(_shift(lam, axis, 0.0), out)
    return ew.mul(lam, _shift(out, axis, 0.0))


linrec_p = register(Primitive(
    "linrec", "scan", _linrec_impl, _same,
    (_linrec_vjp_a, lambda g, out, a, b, axis, reverse: linrec(a, g, axis, not reverse)),
    saves=(0, -1), node_name="LinrecBackward0"))


def linrec(a, b, axis, reverse=False):
    """y[k] = a[k] y[k-1] + b[k] along `axis` with y[0] = b[0] (a[0] unused); reversed,
    y[k] = a[k+1] y[k+1] + b[k] with y[n-1] = b[n-1]."""
    (a, b), _ = operands(a, b)
    from llgrad.runtime.ops.shape import broadcast_to
    shape = tuple(np.broadcast_shapes(shape_of(a), shape_of(b)))
    return bind(linrec_p, broadcast_to(a, shape), broadcast_to(b, shape), axis=axis,
                reverse=reverse)


# ---- iir ----------------------------------------------------------------------------------
# Note [All-pole filters]
# iir(v, a) is the recurrence y[k] = v[k] - sum_{m=1..p} a[m-1] y[k-m] along `axis` (terms
# before the start are 0), the denominator of scipy.signal.lfilter with a[0] = 1: a linear
# map y = T v with T lower triangular Toeplitz. Its transpose is the same filter run from the
# end, so grad_v = lam = iir(g, a, reversed direction), and since T depends on a through
# A y = v, grad_a[m-1] = -sum_k lam[k] y[k-m] (the reverse direction mirrored). The numpy
# impl and the lowering subtract the terms in the same order (m = 1, 2, ...): same bits.
def _iir_impl(v, a, axis, reverse):
    y = np.moveaxis(v, axis, 0).copy()
    rows = y[::-1] if reverse else y  # (a view: the writes land in y)
    for k in range(1, rows.shape[0]):
        for m in range(1, min(k, a.shape[0]) + 1):
            rows[k] -= a[m - 1] * rows[k - m]
    return np.ascontiguousarray(np.moveaxis(y, 0, axis))


def _iir_shape(v, a, axis, reverse):
    if len(a.shape) != 1 or a.dtype != v.dtype or not 0 <= axis < len(v.shape):
        raise ShapeError(f"iir: needs 1-D coefficients of the signal's dtype and an axis of "
                         f"it, got a={a}, v={v}, axis={axis}")
    return Aval(v.shape, v.dtype)


def _iir_vjp_a(g, out, v, a, axis, reverse):
    from llgrad.runtime.ops.index import slice_axis
    from llgrad.runtime.ops.reduce import sum as total
    from llgrad.runtime.ops.shape import stack
    lam, n = iir(g, a, axis, not reverse), shape_of(out)[axis]
    terms = []
    for m in range(1, shape_of(a)[0] + 1):
        if m >= n:
            terms.append(ew.mul(total(out), 0.0))
            continue
        later, earlier = (0, n - m), (m, n)
        ls, ys = (later, earlier) if reverse else (earlier, later)
        terms.append(ew.neg(total(ew.mul(slice_axis(lam, axis, *ls),
                                         slice_axis(out, axis, *ys)))))
    return stack(terms, 0) if terms else ew.mul(a, 0.0)


iir_p = register(Primitive(
    "iir", "scan", _iir_impl, _iir_shape,
    (lambda g, out, v, a, axis, reverse: iir(g, a, axis, not reverse), _iir_vjp_a),
    saves=(1, -1), node_name="IirBackward0"))


def iir(v, a, axis, reverse=False):
    """The all-pole filter y[k] = v[k] - sum_m a[m-1] y[k-m] along `axis` (from the end,
    y[k] = v[k] - sum_m a[m-1] y[k+m], when reverse): Note [All-pole filters]."""
    (v, a), _ = operands(v, a)
    return bind(iir_p, v, a, axis=axis, reverse=reverse)


# ---- cumprod (composite) ------------------------------------------------------------------
def _first_mask(shape, axis):
    m = np.zeros([d if i == axis else 1 for i, d in enumerate(shape)], np.bool_)
    m[(0,) * len(shape)] = True
    return m


def _cumprod_decompose(x, axis):
    # b is x at the first position and -0.0 elsewhere: v + (-0.0) == v for every v (signed
    # zeros included), so y[k] = x[k] y[k-1] + b[k] has exactly numpy's bits.
    if shape_of(x)[axis] == 0:
        return x
    return linrec(x, ew.where(_first_mask(shape_of(x), axis), x, -0.0), axis)


def _cumprod_vjp(g, out, x, axis):
    return ew.mul(_shift(out, axis, 1.0), linrec(x, g, axis, reverse=True))


cumprod_p = register(Primitive(
    "cumprod", "scan", lambda x, axis: np.cumprod(x, axis, dtype=x.dtype), _same,
    (_cumprod_vjp,), saves=(0, -1), decompose=_cumprod_decompose,
    node_name="CumprodBackward0"))


# ---- cumargmax / cumargmin and the composites cummax / cummin ------------------------------
def _cumarg_impl(acc):
    def impl(x, axis):
        m = acc(x, axis)
        pos = np.arange(x.shape[axis]).reshape([-1 if i == axis else 1 for i in range(x.ndim)])
        # the latest position holding the running extremum (ties: the later index, as
        # PyTorch's cummax); a NaN stays the extremum once seen, the latest NaN its index
        hit = (x == m) | np.isnan(x) if x.dtype.kind == "f" else x == m
        return np.maximum.accumulate(np.where(hit, pos, 0), axis).astype(np.int64)
    return impl


def _int_shape(x, axis):
    return Aval(x.shape, I64)


cumargmax_p = register(Primitive("cumargmax", "scan", _cumarg_impl(np.maximum.accumulate),
                                 _int_shape, nondiff=True))
cumargmin_p = register(Primitive("cumargmin", "scan", _cumarg_impl(np.minimum.accumulate),
                                 _int_shape, nondiff=True))


def _cumext(name, acc, arg_p):
    def vjp(g, out, x, axis):
        from llgrad.runtime.ops.gather import put_along_axis_add
        return put_along_axis_add(g, bind(arg_p, x, axis=axis), axis, shape_of(x))

    def decompose(x, axis):
        from llgrad.runtime.ops.gather import gather_p
        return bind(gather_p, x, bind(arg_p, x, axis=axis), axis=axis)
    return register(Primitive(name, "scan", lambda x, axis: acc(x, axis), _same, (vjp,),
                              saves=(0,), decompose=decompose,
                              node_name=name.capitalize() + "Backward0"))


cummax_p = _cumext("cummax", np.maximum.accumulate, cumargmax_p)
cummin_p = _cumext("cummin", np.minimum.accumulate, cumargmin_p)


# ---- the ops API ------------------------------------------------------------------------------
def _scan_input(x, dim, accumulate_ints=True):
    """(x, axis): dim=None flattens (numpy's axis=None); bool/int sums run in int64."""
    (x,), dt = operands(x)
    if accumulate_ints and dt.kind in "bi" and dt != np.int64:
        x = ew.astype(x, I64)
    if dim is None:
        from llgrad.runtime.ops.shape import reshape
        x = reshape(x, (-1,))
        dim = 0
    if not shape_of(x):
        from llgrad.runtime.ops.shape import reshape
        return reshape(x, (1,)), 0, True
    return x, normalize_axes(dim, len(shape_of(x)))[0], False


def _restore(r, scalar):
    from llgrad.runtime.ops.shape import reshape
    return reshape(r, ()) if scalar else r


def cumsum_axis(x, axis, reverse=False):
    return bind(cumsum_p, x, axis=axis, reverse=reverse)


def cumsum(x, dim=None, dtype=None):
    """Cumulative sum along `dim` (all elements flattened when None, as numpy's axis=None)."""
    if dtype is not None:
        x = ew.astype(x, dtype)
    x, axis, scalar = _scan_input(x, dim)
    return _restore(cumsum_axis(x, axis), scalar)


def cumprod(x, dim=None, dtype=None):
    """Cumulative product along `dim`; its gradient is exact with zeros in x."""
    if dtype is not None:
        x = ew.astype(x, dtype)
    x, axis, scalar = _scan_input(x, dim)
    if dtype_of(x).kind != "f":
        raise NotImplementedError("cumprod of integer arrays is not supported; cast to float")
    return _restore(bind(cumprod_p, x, axis=axis), scalar)


def _cum_extremum(prim, arg_p, x, dim):
    x, axis, scalar = _scan_input(x, dim, accumulate_ints=False)
    return (_restore(bind(prim, x, axis=axis), scalar),
            _restore(bind(arg_p, x, axis=axis), scalar))


def cummax(x, dim):
    """(values, indices) of the running maximum along `dim` (PyTorch's cummax)."""
    return _cum_extremum(cummax_p, cumargmax_p, x, dim)


def cummin(x, dim):
    """(values, indices) of the running minimum along `dim` (PyTorch's cummin)."""
    return _cum_extremum(cummin_p, cumargmin_p, x, dim)


def logcumsumexp(x, dim):
    """log(cumsum(exp(x))) along `dim` without overflow or underflow (PyTorch's logcumsumexp,
    numpy's np.logaddexp.accumulate). With m the running maximum (held constant: the result
    does not depend on it), s[k] = sum_{j<=k} exp(x[j] - m[k]) follows the affine recurrence
    s[k] = exp(m[k-1] - m[k]) s[k-1] + exp(x[k] - m[k]), whose terms are at most 1, and the
    result is m + log(s); where m is not finite (all -inf so far, an inf, a NaN) it is m."""
    from llgrad.runtime.ops.ufuncs import isfinite
    x, axis, scalar = _scan_input(x, dim, accumulate_ints=False)
    if dtype_of(x).kind != "f":
        x = ew.astype(x, np.float64)
    if shape_of(x)[axis] == 0:
        return _restore(x, scalar)
    m = ew.stop_gradient(bind(cummax_p, x, axis=axis))
    finite = isfinite(m)
    m0 = ew.where(finite, m, 0.0)
    a = ew.exp(ew.minimum(ew.sub(_shift(m0, axis, 0.0), m0), 0.0))  # (a[0] is not used)
    s = linrec(a, ew.exp(ew.sub(x, m0)), axis)
    y = ew.add(m0, ew.log(ew.where(finite, s, 1.0)))
    return _restore(ew.where(finite, y, m), scalar)
