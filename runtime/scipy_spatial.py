"""scipy.spatial.distance on llgrad values: cdist, pdist (the metrics people use) and
squareform, with scipy's signatures. Composites of existing primitives: each metric is a
reduction over the last axis of the pairwise differences (or products), so values are scipy's
formulas and gradients follow from the primitives'. The root-taking metrics use
`ops.vector_norm`, whose gradient at a zero distance is 0 (PyTorch's norm subgradient), so the
zero diagonal of cdist(a, a) never gives NaN. `SCIPY` joins runtime/numpy_api.LAZY (Note
[Lazily named functions] there)."""
from __future__ import annotations

import numpy as np

from llgrad.runtime import ops
from llgrad.runtime.errors import UnsupportedError, user_loc
from llgrad.runtime.ops._util import as_operand, dtype_of, shape_of
from llgrad.runtime.prim import is_value


def _f64(x):
    """x as float64 (scipy computes every metric in float64)."""
    return ops.astype(as_operand(x), np.float64) if is_value(x) else np.asarray(x, np.float64)


def _safe_sqrt(s):
    """sqrt(s) for s >= 0 with gradient 0 where s == 0 (as the 2-norm's, never 0 * inf)."""
    zero = ops.eq(s, 0.0)
    return ops.where(zero, 0.0, ops.sqrt(ops.where(zero, 1.0, s)))


def _rownorm(x):
    return ops.vector_norm(x, 2.0, -1)


def _diff_metric(reduce):
    """A metric of the differences u - v: reduce over their last axis."""
    def metric(u, v, both, p=None, V=None, VI=None):
        return reduce(ops.sub(u, v), both, p=p, V=V, VI=VI)
    return metric


def _minkowski(d, both, p=None, **_):
    return ops.vector_norm(d, 2.0 if p is None else float(p), -1)


def _seuclidean(d, both, V=None, **_):
    # scipy's default V: the variance of each coordinate over all the points, ddof=1
    v = ops.var(both, 0, correction=1) if V is None else _f64(V)
    return ops.vector_norm(ops.div(d, ops.sqrt(v)), 2.0, -1)


def _mahalanobis(d, both, VI=None, **_):
    # scipy's default VI: the inverse of the points' covariance matrix
    if VI is None:
        centred = ops.sub(both, ops.mean(both, 0, True))
        n = shape_of(both)[0]
        VI = ops.inv(ops.div(ops.matmul(ops.transpose(centred, (1, 0)), centred), n - 1.0))
    return _safe_sqrt(ops.einsum("...i,ij,...j->...", d, _f64(VI), d))


def _cosine(u, v, both, **_):
    num = ops.sum(ops.mul(u, v), -1)
    return ops.sub(1.0, ops.div(num, ops.mul(_rownorm(u), _rownorm(v))))


def _correlation(u, v, both, **_):
    return _cosine(ops.sub(u, ops.mean(u, -1, True)), ops.sub(v, ops.mean(v, -1, True)), both)


def _braycurtis(u, v, both, **_):
    return ops.div(ops.sum(ops.abs(ops.sub(u, v)), -1), ops.sum(ops.abs(ops.add(u, v)), -1))


_METRICS = {
    "euclidean": _diff_metric(lambda d, both, **_: ops.vector_norm(d, 2.0, -1)),
    "sqeuclidean": _diff_metric(lambda d, both, **_: ops.sum(ops.mul(d, d), -1)),
    "cityblock": _diff_metric(lambda d, both, **_: ops.vector_norm(d, 1.0, -1)),
    "chebyshev": _diff_metric(lambda d, both, **_: ops.vector_norm(d, np.inf, -1)),
    "minkowski": _diff_metric(_minkowski),
    "seuclidean": _diff_metric(_seuclidean),
    "mahalanobis": _diff_metric(_mahalanobis),
    "cosine": _cosine, "correlation": _correlation, "braycurtis": _braycurtis,
}
_ALIASES = {  # scipy's (scipy.spatial.distance._METRICS' `aka`)
    "euclid": "euclidean", "eu": "euclidean", "e": "euclidean", "sqe": "sqeuclidean",
    "sqeuclid": "sqeuclidean", "cblock": "cityblock", "cb": "cityblock", "c": "cityblock",
    "chebychev": "chebyshev", "cheby": "chebyshev", "cheb": "chebyshev", "ch": "chebyshev",
    "mi": "minkowski", "pnorm": "minkowski", "m": "minkowski", "se": "seuclidean",
    "s": "seuclidean", "mahal": "mahalanobis", "mah": "mahalanobis", "cos": "cosine",
    "co": "correlation"}
_SCIPY_METRICS = {"canberra", "dice", "hamming", "hamm", "ha", "matching", "h", "jaccard", "j",
                  "ja", "jacc", "jensenshannon", "js", "rogerstanimoto", "russellrao",
                  "sokalsneath", "yule"}


def _metric(name: str, metric, kwargs: dict):
    """The metric function named `metric` (scipy's names and aliases), checking its options."""
    if not isinstance(metric, str):
        raise UnsupportedError(
            f"scipy.spatial.distance.{name} with a callable metric is not supported on traced "
            f"values", loc=user_loc(),
            fix="pass one of the metric names " + ", ".join(_METRICS) + ", or compute the "
            "distances with numpy on the pairs (u[:, None, :] - v[None, :, :])")
    key = _ALIASES.get(metric.lower(), metric.lower())
    if key not in _METRICS:
        if key in _SCIPY_METRICS:
            raise UnsupportedError(
                f"scipy.spatial.distance.{name}(metric={metric!r}) is not supported on traced "
                f"values", loc=user_loc(), fix="use one of " + ", ".join(_METRICS))
        raise ValueError(f"Unknown Distance Metric: {metric}")
    allowed = {"minkowski": {"p"}, "seuclidean": {"V"}, "mahalanobis": {"VI"}}.get(key, set())
    extra = set(kwargs) - allowed
    if extra:
        raise UnsupportedError(
            f"scipy.spatial.distance.{name}(metric={metric!r}, {sorted(extra)[0]}=...) is not "
            f"supported on traced values", loc=user_loc(),
            fix=f"metric {metric!r} takes " + (", ".join(sorted(allowed)) or "no options")
            + " here")
    return _METRICS[key]


def _two_d(x, what: str):
    x = _f64(x)
    if len(shape_of(x)) != 2:
        raise ValueError(what)
    return x


def cdist(XA, XB, metric="euclidean", *, out=None, **kwargs):
    """scipy.spatial.distance.cdist: the (mA, mB) distances between the rows of XA and XB."""
    if out is not None:
        raise UnsupportedError("scipy.spatial.distance.cdist(out=...) is not supported on "
                               "traced values", loc=user_loc(), fix="use the returned array")
    f = _metric("cdist", metric, kwargs)
    a = _two_d(XA, "XA must be a 2-dimensional array.")
    b = _two_d(XB, "XB must be a 2-dimensional array.")
    if shape_of(a)[1] != shape_of(b)[1]:
        raise ValueError("XA and XB must have the same number of columns "
                         "(i.e. feature dimension.)")
    (ma, k), mb = shape_of(a), shape_of(b)[0]
    both = ops.concatenate([a, b], 0)
    return f(ops.reshape(a, (ma, 1, k)), ops.reshape(b, (1, mb, k)), both, **kwargs)


def pdist(X, metric="euclidean", *, out=None, **kwargs):
    """scipy.spatial.distance.pdist: the distances of the pairs i < j of rows of X, in
    squareform's (condensed) order."""
    if out is not None:
        raise UnsupportedError("scipy.spatial.distance.pdist(out=...) is not supported on "
                               "traced values", loc=user_loc(), fix="use the returned array")
    f = _metric("pdist", metric, kwargs)
    x = _two_d(X, "A 2-dimensional array must be passed.")
    i, j = np.triu_indices(shape_of(x)[0], 1)
    return f(ops.take(x, i, 0), ops.take(x, j, 0), x, **kwargs)


def squareform(X, force="no", checks=True):
    """scipy.spatial.distance.squareform: a condensed distance vector as the symmetric matrix
    with a zero diagonal, or such a matrix's upper triangle as the vector (not checked for
    symmetry: that would need the values)."""
    x = as_operand(X)
    nd = len(shape_of(x))
    if force.lower() == "tovector" or force.lower() != "tomatrix" and nd == 2:
        if nd != 2 or shape_of(x)[0] != shape_of(x)[1]:
            raise ValueError("Forcing 'tovector' but input X is not a distance matrix.")
        n = shape_of(x)[0]
        i, j = np.triu_indices(n, 1)
        return ops.take(ops.reshape(x, (-1,)), i * n + j, 0)
    if nd != 1:
        raise ValueError("The first argument must be one or two dimensional array. A "
                         f"{nd}-dimensional array is not permitted")
    m = shape_of(x)[0]
    n = int(np.ceil(np.sqrt(m * 2)))
    if n * (n - 1) != m * 2:
        raise ValueError("Incompatible vector size. It must be a binomial coefficient n "
                         "choose 2 for some integer n >= 2.")
    # where entry (i, j) comes from: 1 + its condensed index, 0 (a prepended zero) on the
    # diagonal
    where = np.zeros((n, n), np.int64)
    i, j = np.triu_indices(n, 1)
    where[i, j] = where[j, i] = np.arange(1, m + 1)
    zero = np.zeros(1, dtype_of(x))
    return ops.take(ops.concatenate([zero, x], 0), where, 0)


SCIPY = {f"scipy.spatial.distance.{f.__name__}": f for f in (cdist, pdist, squareform)}
