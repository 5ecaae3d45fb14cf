"""scipy.stats's distributions on llgrad values: the methods of the distributions in
runtime/scipy_dists.py (`scipy.stats.t.logpdf(x, df, loc, scale)`, `poisson.logpmf(k, mu)`),
their frozen forms (`scipy.stats.gamma(a, scale=s).logpdf(x)`) and
`multivariate_normal.logpdf`/`pdf`, as statistics code fits them by maximum likelihood. scipy's
methods convert their arguments with np.asarray, so the tracer calls these instead
(runtime/numpy_api.py `traced_forms`; the names are resolved once scipy.stats is imported,
Note [Lazily named functions]). A frozen distribution of constants holds its own copy of the
distribution, whose methods are found by class and name. Their other methods (ppf, rvs,
fit, ...) raise UnsupportedError at the user's line.

Each method follows scipy's rv_continuous / rv_discrete (Note [scipy's methods as selects]).
"""
from __future__ import annotations

import math

import numpy as np

from llgrad.runtime import ops
from llgrad.runtime.conversions import array_from
from llgrad.runtime.errors import UnsupportedError, user_loc
from llgrad.runtime.ops._util import dtype_of, shape_of
from llgrad.runtime.prim import is_value
from llgrad.runtime.scipy_dists import CONTINUOUS, DISCRETE, Dist

# Note [scipy's methods as selects]
# scipy computes a method on the entries whose arguments are valid (argcheck of the shapes,
# scale > 0) and inside the support (closed for densities, open for cdf/sf; integers for a
# pmf), and fills the rest: NaN where an argument is invalid or x is NaN, else -inf (log
# densities), 0 (densities, the cdf below the support, the sf above) or 1 (the cdf above,
# the sf below). Here the formula runs on every entry and `where` selects, as scipy's
# results; the entries filled in compute on finite stand-ins (z inside the support,
# Dist.inside, where anything is filled; valid shapes, Dist.safe, and scale 1 where those
# are invalid), since where's gradient of a NaN or inf it drops would be NaN. A condition
# known to hold everywhere (constant parameters, a support of all reals) costs no select: a
# t or norm log density with constant df and scale is its formula alone, and with constant
# df its normaliser is a constant. Values are float64 (float32
# x too: scipy promotes to float64).
_FILL = {"logpdf": -math.inf, "pdf": 0.0, "cdf": 0.0, "sf": 0.0, "logpmf": -math.inf,
         "pmf": 0.0}


def _all_true(c) -> bool:
    return not is_value(c) and bool(np.all(c))


def _and(a, b):
    if _all_true(a):
        return b
    return a if _all_true(b) else np.logical_and(a, b)


def _float64(x, like=None):
    """`x` as an array of `like`'s dtype (x's) promoted to float64 (scipy's np.asarray)."""
    x = array_from(x)
    dt = np.promote_types(dtype_of(x if like is None else like), np.float64)
    return ops.astype(x, dt) if is_value(x) else np.asarray(x, dt)


def _bind(name: str, dist: Dist, args, kw):
    """scipy's _parse_args: the shapes, then loc (and scale), by position or keyword."""
    names = dist.shapes + (("loc",) if dist.discrete else ("loc", "scale"))
    if len(args) > len(names):
        raise TypeError(f"scipy.stats.{name}: at most {len(names)} parameters "
                        f"({', '.join(names)}), {len(args)} given")
    given = dict(zip(names, args))
    for k, v in kw.items():
        if k not in names or k in given:
            raise TypeError(f"scipy.stats.{name}: unexpected or repeated parameter {k!r}")
        given[k] = v
    missing = [s for s in dist.shapes if s not in given]
    if missing:
        raise TypeError(f"scipy.stats.{name}: missing shape parameter(s) {', '.join(missing)}")
    return ([_float64(given[s]) for s in dist.shapes], given.get("loc", 0),
            given.get("scale", 1))


def _method(name: str, dist: Dist, method: str):
    fill = _FILL[method]

    def call(x, *args, **kw):
        shapes, loc, scale = _bind(name, dist, args, kw)
        # (comparisons and numpy functions: on constants they compute in numpy, so a condition
        # of constants is known here)
        x, loc = array_from(x), array_from(loc)
        if dist.discrete:
            z = _float64(x - loc)
        else:
            scale = array_from(scale)
            if not np.issubdtype(dtype_of(scale), np.floating):  # log(5) in float64, as numpy
                scale = _float64(scale)
            z = _float64((x - loc) / scale, x)
        shapes_ok = dist.argcheck(*shapes) if dist.argcheck else _positive(shapes)
        scale_ok = True if dist.discrete else scale > 0
        valid = _and(shapes_ok, scale_ok)
        lo, hi = dist.support(*shapes)
        inside, at_one = _support(dist, method, z, lo, hi)
        cond = _and(valid, inside)
        nan = np.isnan(z) if _all_true(valid) else np.logical_or(np.logical_not(valid),
                                                                 np.isnan(z))
        if not _all_true(cond):  # stand-ins where the result is filled in
            z = ops.where(cond, z, dist.inside)
        if not _all_true(shapes_ok):
            shapes = [ops.where(shapes_ok, s, v) for s, v in zip(shapes, dist.safe)]
        if not _all_true(scale_ok):
            scale = ops.where(scale_ok, scale, 1.0)
        out = _formula(dist, method, z, shapes, scale)
        if not _all_true(cond):
            out = ops.where(cond, out, fill)
        if at_one is not None:
            out = ops.where(_and(valid, at_one), 1.0, out)
        return out if _all_true(cond) else ops.where(nan, math.nan, out)
    call.__name__ = method
    return call


def _positive(shapes):
    out = True
    for s in shapes:
        out = _and(out, s > 0)
    return out


def _support(dist: Dist, method: str, z, lo, hi):
    """The entries to compute and those that are 1 (cdf above, sf below the support)."""
    if dist.discrete:
        return _and(_and(z >= lo, z <= hi), np.floor(z) == z), None
    if (lo, hi) == (-math.inf, math.inf):  # (a continuous support is two numbers)
        return True, None  # (all reals: -inf and inf give the formula's limits)
    if method in ("cdf", "sf") or dist.open_support:
        inside = _and(z > lo, z < hi)
    else:
        inside = _and(z >= lo, z <= hi)
    return inside, {"cdf": lambda: z >= hi, "sf": lambda: z <= lo}.get(method, lambda: None)()


def _formula(dist: Dist, method: str, z, shapes, scale):
    if method in ("logpdf", "logpmf"):
        out = dist.logpdf(z, *shapes)
        return out if dist.discrete else ops.sub(out, ops.log(scale))
    if method in ("pdf", "pmf"):
        out = dist.pdf(z, *shapes) if dist.pdf else ops.exp(dist.logpdf(z, *shapes))
        return out if dist.discrete else ops.div(out, scale)
    return getattr(dist, method)(z, *shapes)


class Frozen:
    """`scipy.stats.t(df, loc, scale)` and the like called with traced parameters: its
    methods take x (k). One subclass per distribution (`name`, `dist`)."""

    name: str
    dist: Dist

    def __init__(self, *args, **kw):
        _bind(self.name, self.dist, args, kw)  # (scipy checks them when freezing too)
        self._args, self._kw = args, kw

    def __getattr__(self, method):
        if method.startswith("_"):
            raise AttributeError(method)
        if method not in self.dist.methods:
            raise _unsupported(f"scipy.stats.{self.name}(...).{method}", self.dist.methods,
                               AttributeError)
        fn = _method(self.name, self.dist, method)
        return lambda x: fn(x, *self._args, **self._kw)


def _unsupported(what: str, methods, base=UnsupportedError):
    err = UnsupportedError(f"{what} is not supported on llgrad values (supported: "
                           f"{', '.join(methods)})", loc=user_loc(),
                           fix="compute it outside the differentiated function, or write "
                               "it with numpy/scipy.special functions llgrad supports")
    return err if base is UnsupportedError else base(str(err))


def _refuse(name: str, method: str, methods):
    def refuse(*args, **kw):
        raise _unsupported(f"scipy.stats.{name}.{method}", methods)
    refuse.refused = True  # (docs/gen_numpy_support.py lists what is supported)
    return refuse


# scipy's other public methods of a distribution, refused by name
_OTHERS = ("cdf", "sf", "logcdf", "logsf", "ppf", "isf", "rvs", "stats", "moment", "entropy",
           "expect", "median", "mean", "var", "std", "interval", "support")
_CONTINUOUS_ONLY = ("pdf", "logpdf", "fit", "fit_loc_scale", "nnlf")


# ---- multivariate_normal.logpdf, pdf ----------------------------------------------------------
def _mvn_logpdf(x, mean=None, cov=1, allow_singular=False):
    """scipy's multivariate_normal.logpdf: x (..., d) or one point, mean (d,), cov a number,
    a (d,) diagonal or (d, d) matrix (positive definite: a Cholesky factor; scipy takes
    pseudo-determinants with allow_singular, which is refused)."""
    if allow_singular:
        raise UnsupportedError("multivariate_normal.logpdf(allow_singular=True) is not "
                               "supported on llgrad values", loc=user_loc())
    cov = _float64(cov)
    if mean is None:
        d = 1 if len(shape_of(cov)) < 2 else shape_of(cov)[0]
        mean = np.zeros(d)
    mean = ops.reshape(_float64(mean), (-1,))
    d = shape_of(mean)[0]
    x = _float64(x)
    if len(shape_of(x)) == 0:  # scipy's _process_quantiles
        x = ops.reshape(x, (1,))
    if len(shape_of(x)) == 1:
        x = ops.reshape(x, (-1, 1) if d == 1 else (1, -1))
    dev = ops.sub(x, mean)
    if len(shape_of(cov)) < 2:  # a number or the diagonal: variances
        var = ops.broadcast_to(cov, (d,))
        logdet = ops.sum(ops.log(var))
        maha = ops.sum(ops.div(ops.square(dev), var), -1)
    else:
        lower = ops.cholesky(cov)
        logdet = ops.mul(ops.sum(ops.log(ops.diagonal(lower))), 2.0)
        flat = ops.reshape(dev, (-1, d))
        white = ops.solve_triangular(lower, ops.transpose(flat), upper=False)
        maha = ops.reshape(ops.sum(ops.square(white), 0), shape_of(dev)[:-1])
    out = ops.mul(ops.add(ops.add(maha, logdet), d * math.log(2 * math.pi)), -0.5)
    return ops.squeeze(out) if 1 in shape_of(out) else out  # (scipy's _squeeze_output)


def _mvn_pdf(x, mean=None, cov=1, allow_singular=False):
    return ops.exp(_mvn_logpdf(x, mean, cov, allow_singular))


_MVN = {"logpdf": _mvn_logpdf, "pdf": _mvn_pdf}


class FrozenMvn:
    """`multivariate_normal(mean, cov)` with traced parameters."""

    def __init__(self, mean=None, cov=1, allow_singular=False, seed=None):
        self._args = (mean, cov, allow_singular)

    def __getattr__(self, method):
        if method.startswith("_"):
            raise AttributeError(method)
        if method not in _MVN:
            raise _unsupported(f"scipy.stats.multivariate_normal(...).{method}", tuple(_MVN),
                               AttributeError)
        return lambda x: _MVN[method](x, *self._args)


SCIPY: dict = {"scipy.stats:multivariate_normal": FrozenMvn}
SCIPY.update((f"scipy.stats:multivariate_normal.{m}", fn) for m, fn in _MVN.items())
for _name, _dist in {**CONTINUOUS, **DISCRETE}.items():
    SCIPY[f"scipy.stats:{_name}"] = type(f"{_name}_frozen", (Frozen,),
                                         {"name": _name, "dist": _dist})
    for _m in _OTHERS + (("pmf", "logpmf") if _dist.discrete else _CONTINUOUS_ONLY):
        SCIPY[f"scipy.stats:{_name}.{_m}"] = (
            _method(_name, _dist, _m) if _m in _dist.methods else
            _refuse(_name, _m, _dist.methods))
for _m in ("rvs", "cdf", "logcdf", "entropy", "fit"):
    SCIPY[f"scipy.stats:multivariate_normal.{_m}"] = _refuse("multivariate_normal", _m,
                                                             tuple(_MVN))
