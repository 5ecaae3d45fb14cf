"""scipy.stats' sample moments and summaries on llgrad values, with scipy's signatures:
moment, skew, kurtosis, zscore, sem, gmean, hmean, entropy and pearsonr. scipy's own formulas
(central moments by exponentiation by squares, the same NaN where the variance is ~0, its bias
corrections), so values agree with scipy's to rounding and gradients follow from the
primitives'. `SCIPY` joins runtime/numpy_api.LAZY
(Note [Lazily named functions] there)."""
from __future__ import annotations

from collections import namedtuple

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


def sem(a, axis=0, ddof=1, nan_policy="propagate", *, keepdims=False):
    """scipy.stats.sem: the standard error of the mean, std(a, ddof) / sqrt(n)."""
    a, axis = _data("sem", a, axis, nan_policy)
    n = shape_of(a)[axis]
    return _keep(ops.div(ops.std(a, axis, correction=ddof), n ** 0.5), axis, keepdims)


def _weighted_mean(v, axis, weights):
    """The mean of v along `axis`, weighted as scipy's _xp_mean (weights broadcast to v)."""
    if weights is None:
        return ops.mean(v, axis)
    w = ops.broadcast_to(as_operand(weights), shape_of(v))
    return ops.div(ops.sum(ops.mul(v, w), axis), ops.sum(w, axis))


def gmean(a, axis=0, dtype=None, weights=None, *, nan_policy="propagate", keepdims=False):
    """scipy.stats.gmean: exp of the (weighted) mean of log(a)."""
    a, axis = _data("gmean", a if dtype is None else ops.astype(as_operand(a), dtype), axis,
                    nan_policy)
    return _keep(ops.exp(_weighted_mean(ops.log(a), axis, weights)), axis, keepdims)


def hmean(a, axis=0, dtype=None, *, weights=None, nan_policy="propagate", keepdims=False):
    """scipy.stats.hmean: 1 / the (weighted) mean of 1 / a (0 where an element is 0, as
    scipy's 1 / inf)."""
    a, axis = _data("hmean", a if dtype is None else ops.astype(as_operand(a), dtype), axis,
                    nan_policy)
    return _keep(ops.reciprocal(_weighted_mean(ops.reciprocal(a), axis, weights)),
                 axis, keepdims)


def entropy(pk, qk=None, base=None, axis=0, *, nan_policy="propagate", keepdims=False):
    """scipy.stats.entropy: -sum(p log p) of pk normalised along `axis`, or the relative
    entropy sum(p log(p / q)) with qk (normalised too); in units of log(base)."""
    pk, axis = _data("entropy", pk, axis, nan_policy)
    pk = ops.div(pk, ops.sum(pk, axis, True))
    if qk is None:
        vec = ops.special.entr(pk)
    else:
        qk, _ = _data("entropy", qk, axis, nan_policy)
        qk = ops.div(qk, ops.sum(qk, axis, True))
        vec = ops.special.rel_entr(pk, qk)
    out = ops.sum(vec, axis)
    return _keep(out if base is None else ops.div(out, float(np.log(base))), axis, keepdims)


PearsonRResult = namedtuple("PearsonRResult", ["statistic", "pvalue"])


def _pearson_pvalue(r, n: int, alternative: str):
    """scipy's p-value of r under the null: a beta(n/2 - 1, n/2 - 1) distribution on [-1, 1];
    its tails are regularised incomplete beta functions (betainc: gradient in r exact)."""
    if alternative not in ("two-sided", "greater", "less"):
        raise ValueError("alternative must be 'less', 'greater' or 'two-sided'")
    if n == 2:
        return ops.add(ops.mul(r, 0.0), 1.0)
    ab = n / 2.0 - 1.0
    if alternative == "two-sided":
        return ops.mul(ops.betainc(ab, ab, ops.mul(ops.sub(1.0, ops.abs(r)), 0.5)), 2.0)
    side = ops.sub(1.0, r) if alternative == "greater" else ops.add(1.0, r)
    return ops.betainc(ab, ab, ops.mul(side, 0.5))


def pearsonr(x, y, *, alternative="two-sided", method=None, axis=0):
    """scipy.stats.pearsonr: (statistic, pvalue); the statistic is scipy's sum of the
    products of the centred, normalised samples, clipped to [-1, 1], the p-value scipy's
    beta-distribution tail (`_pearson_pvalue`)."""
    if method is not None:
        raise UnsupportedError("scipy.stats.pearsonr(method=...) is not supported on traced "
                               "values", loc=user_loc(), fix="leave method=None")
    x, ax = _data("pearsonr", x, axis, "propagate")
    y, _ = _data("pearsonr", y, axis, "propagate")
    n = shape_of(x)[ax]
    if n < 2:
        raise ValueError("`x` and `y` must have length at least 2.")
    xm = ops.sub(x, ops.mean(x, ax, True))
    ym = ops.sub(y, ops.mean(y, ax, True))
    xm = ops.div(xm, ops.sqrt(ops.sum(ops.mul(xm, xm), ax, True)))
    ym = ops.div(ym, ops.sqrt(ops.sum(ops.mul(ym, ym), ax, True)))
    r = ops.clip(ops.sum(ops.mul(xm, ym), ax), -1.0, 1.0)
    return PearsonRResult(r, _pearson_pvalue(r, n, alternative))


SCIPY = {f"scipy.stats.{f.__name__}": f for f in (moment, skew, kurtosis, zscore, sem, gmean,
                                                  hmean, entropy, pearsonr)}
