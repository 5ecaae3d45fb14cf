"""scipy.stats.norm's methods on llgrad values (`scipy.stats.norm.cdf(d1)`, as finance and
statistics code writes the normal distribution) and the frozen `norm(loc, scale)`. scipy's
methods convert their arguments with np.asarray, so the tracer calls these instead
(runtime/numpy_api.py `traced_forms`; the names are resolved once scipy.stats is imported, Note
[Lazily named functions]). A frozen distribution holds its own copy of `norm`, whose methods
are found by class and name.

Each follows scipy's rv_continuous: z = (x - loc) / scale as arrays, then in float64; the
standard density or distribution function of z; NaN where scale <= 0 (scipy's badvalue).
"""
from __future__ import annotations

import math

import numpy as np

from llgrad.runtime import ops
from llgrad.runtime.conversions import array_from
from llgrad.runtime.ops._util import dtype_of
from llgrad.runtime.prim import is_value

_SQRT_2PI = math.sqrt(2 * math.pi)
_LOG_SQRT_2PI = math.log(_SQRT_2PI)


def _standardised(x, loc, scale):
    x, loc, scale = array_from(x), array_from(loc), array_from(scale)  # (scipy's np.asarray)
    z = ops.div(ops.sub(x, loc), scale)
    return ops.astype(z, np.promote_types(dtype_of(x), np.float64))


def _valid(out, scale):
    """`out`, NaN where the scale is not positive (as scipy)."""
    if not is_value(scale) and np.all(np.asarray(scale) > 0):
        return out
    return ops.where(ops.gt(scale, 0), out, math.nan)


def _norm_method(standard, log_scale=False, per_scale=False):
    def method(x, loc=0, scale=1):
        out = standard(_standardised(x, loc, scale))
        if per_scale:  # a density: pdf(z) / scale
            out = ops.div(out, scale)
        if log_scale:  # a log density: logpdf(z) - log(scale)
            out = ops.sub(out, ops.log(array_from(scale)))
        return _valid(out, scale)
    return method


def _logpdf(z):
    return ops.sub(ops.mul(ops.mul(z, z), -0.5), _LOG_SQRT_2PI)


_METHODS = {
    "cdf": _norm_method(ops.ndtr),
    "sf": _norm_method(lambda z: ops.ndtr(ops.neg(z))),
    "pdf": _norm_method(lambda z: ops.div(ops.exp(ops.mul(ops.mul(z, z), -0.5)), _SQRT_2PI),
                        per_scale=True),
    "logpdf": _norm_method(_logpdf, log_scale=True),
}


class FrozenNorm:
    """`scipy.stats.norm(loc, scale)` called with traced parameters: its methods take x."""

    def __init__(self, loc=0, scale=1):
        self.loc, self.scale = loc, scale

    def __getattr__(self, name):
        method = _METHODS.get(name)
        if method is None:
            raise AttributeError(f"scipy.stats.norm(...).{name} is not supported on llgrad "
                                 f"values (supported: {', '.join(_METHODS)})")
        return lambda x: method(x, self.loc, self.scale)


SCIPY = {"scipy.stats:norm": FrozenNorm}
SCIPY.update((f"scipy.stats:norm.{name}", method) for name, method in _METHODS.items())
