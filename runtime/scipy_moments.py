"""scipy.stats' sample moments on llgrad values, with scipy's signatures: moment, skew,
kurtosis and zscore. scipy's own formulas (central moments by exponentiation by squares, the
same NaN where the variance is ~0, its bias corrections), so values agree with scipy's to
rounding and gradients follow from the primitives'. `SCIPY` joins runtime/numpy_api.LAZY
(Note [Lazily named functions] there)."""
from __future__ import annotations

import numpy as np

from llgrad.runtime import ops
from llgrad.runtime.aval import normalize_axes
from llgrad.runtime.errors import UnsupportedError, user_loc
from llgrad.runtime.ops import stats
from llgrad.runtime.ops._util import as_operand, dtype_of, shape_of


def _data(name: str, a, axis, nan_policy):
    """(a as floats, flattened when axis is None, and its axis)."""
    if nan_policy != "propagate":
        raise UnsupportedError(f"scipy.stats.{name}(nan_policy={nan_policy!r}) is not "
                               f"supported on traced values", loc=user_loc(),
                               fix="use nan_policy='propagate' (the default), and mask NaNs "
                               "yourself with np.where")
    a = as_operand(a)
    if dtype_of(a).kind != "f":
        a = ops.astype(a, np.float64)
    if axis is None:
        return ops.reshape(a, (-1,)), 0
    return a, normalize_axes(axis, len(shape_of(a)))[0]


def _central(a, order: int, axis: int, mean):
    """scipy's _moment: the mean of (a - mean)^order, the power by repeated squaring."""
    steps = [order]
    while steps[-1] > 2:
        n = steps[-1]
        steps.append((n - 1) // 2 if n % 2 else n // 2)
    d = ops.sub(a, mean)
    s = d if steps[-1] == 1 else ops.mul(d, d)
    for n in steps[-2::-1]:
        s = ops.mul(s, s)
        if n % 2:
            s = ops.mul(s, d)
    return ops.mean(s, axis)


def _keep(v, axis: int, keepdims: bool):
    return ops.unsqueeze(v, axis) if keepdims else v


def moment(a, order=1, axis=0, nan_policy="propagate", *, center=None, keepdims=False):
    """scipy.stats.moment: the `order`-th central moment (about `center` if given)."""
    a, axis = _data("moment", a, axis, nan_policy)
    if int(order) != order or order < 0:
        raise UnsupportedError("scipy.stats.moment of a non-integer or negative order is not "
                               "supported on traced values", loc=user_loc(),
                               fix="pass a non-negative integer order")
    order = int(order)
    if order == 0 or (order == 1 and center is None):
        out = ops.mul(ops.sum(a, axis), 0.0)
        out = ops.add(out, 1.0) if order == 0 else out
    else:
        mean = ops.mean(a, axis, True) if center is None else center
        out = _central(a, order, axis, mean)
    return _keep(out, axis, keepdims)


def _moments(a, axis, k):
    mean = ops.mean(a, axis, True)
    m2 = _central(a, 2, axis, mean)
    mk = _central(a, k, axis, mean)
    eps = np.finfo(dtype_of(m2)).eps
    zero = ops.le(m2, ops.square(ops.mul(ops.squeeze(mean, axis), eps)))
    return m2, mk, zero, shape_of(a)[axis]


def skew(a, axis=0, bias=True, nan_policy="propagate", *, keepdims=False):
    """scipy.stats.skew: m3 / m2^1.5, NaN where m2 is ~0; bias=False: the adjusted
    Fisher-Pearson coefficient (n > 2)."""
    a, axis = _data("skew", a, axis, nan_policy)
    m2, m3, zero, n = _moments(a, axis, 3)
    vals = ops.div(m3, ops.pow(ops.where(zero, 1.0, m2), 1.5))
    if not bias and n > 2:
        vals = ops.mul(vals, ((n - 1.0) * n) ** 0.5 / (n - 2.0))
    return _keep(ops.where(zero, np.nan, vals), axis, keepdims)


def kurtosis(a, axis=0, fisher=True, bias=True, nan_policy="propagate", *, keepdims=False):
    """scipy.stats.kurtosis: m4 / m2^2 (minus 3 when fisher), NaN where m2 is ~0;
    bias=False: the unbiased estimator (n > 3)."""
    a, axis = _data("kurtosis", a, axis, nan_policy)
    m2, m4, zero, n = _moments(a, axis, 4)
    safe = ops.where(zero, 1.0, m2)
    vals = ops.div(m4, ops.mul(safe, safe))
    if not bias and n > 3:
        vals = ops.add(ops.mul(ops.sub(ops.mul(vals, n ** 2 - 1.0), 3 * (n - 1) ** 2.0),
                               1.0 / (n - 2) / (n - 3)), 3.0)
    vals = ops.where(zero, np.nan, vals)
    return _keep(ops.sub(vals, 3.0) if fisher else vals, axis, keepdims)


def zscore(a, axis=0, ddof=0, nan_policy="propagate"):
    """scipy.stats.zscore: (a - mean) / std along `axis`, NaN where the values are all
    equal."""
    x, ax = _data("zscore", a, axis, nan_policy)
    mean = ops.mean(x, ax, True)
    std = ops.std(x, ax, correction=ddof, keepdim=True)
    first = ops.slice_axis(x, ax, 0, 1)
    const = stats.all(ops.eq(x, first), (ax,), True)  # (all equal)
    z = ops.where(const, np.nan, ops.div(ops.sub(x, mean), ops.where(const, 1.0, std)))
    return ops.reshape(z, shape_of(as_operand(a))) if axis is None else z


SCIPY = {f"scipy.stats.{f.__name__}": f for f in (moment, skew, kurtosis, zscore)}
