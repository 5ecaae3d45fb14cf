"""The scipy.stats distributions llgrad computes, one `Dist` each: scipy's standardised
formulas (its `_logpdf`, `_pdf`, `_cdf`, `_sf`, `_argcheck` and support, as in
scipy/stats/_continuous_distns.py and _discrete_distns.py) written with llgrad's ops, so each
is differentiable in x and in every parameter. runtime/scipy_stats.py wraps them in scipy's
public methods (loc/scale, argument checks, support, frozen distributions).

A cdf/sf is given only where it is exact from existing primitives (norm, expon, laplace,
logistic, lognorm, cauchy); t, gamma and beta's need incomplete beta/gamma functions.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from llgrad.runtime import ops

_LOG_PI = math.log(math.pi)
_LOG_SQRT_2PI = 0.5 * math.log(2 * math.pi)
_SQRT_2PI = math.sqrt(2 * math.pi)
_INF = math.inf


@dataclass(frozen=True)
class Dist:
    """A distribution as scipy's rv_continuous / rv_discrete subclasses define it."""

    shapes: tuple[str, ...]     # scipy's shape parameters, in order (df; a, b; mu; n, p)
    logpdf: Callable            # standardised log density (logpmf) of z and the shapes
    discrete: bool = False
    pdf: Callable | None = None  # (else exp(logpdf))
    cdf: Callable | None = None
    sf: Callable | None = None
    argcheck: Callable | None = None  # the shapes' valid values (else: all positive)
    support: Callable = lambda *shapes: (-_INF, _INF)  # noqa: E731
    open_support: bool = False  # (lognorm: the density is -inf at 0, as scipy)
    # finite stand-ins computed where a result is filled in (a NaN there would make where's
    # gradient NaN): a point inside the support and a valid value of each shape
    inside: float = 0.0
    safe: tuple = field(default=())

    @property
    def methods(self) -> tuple[str, ...]:
        if self.discrete:
            return ("logpmf", "pmf")
        return ("logpdf", "pdf") + (("cdf",) if self.cdf else ()) + (("sf",) if self.sf else ())


# ---- continuous ----------------------------------------------------------------------------
def _log_poch_half(a):
    """log(Gamma(a + 1/2) / Gamma(a)) (scipy: log(poch(a, 1/2))): log(sqrt(pi)) - betaln(a,
    1/2) below 100, exact there; above, the expansion 1/2 log a - 1/8a + 1/192a^3 - 1/640a^5
    + 17/14336a^7 (from B_k(1/2); the next term is below 1e-20), where gammaln's difference
    would cancel."""
    small = ops.lt(a, 100.0)
    near = ops.sub(0.5 * math.log(math.pi), ops.betaln(ops.where(small, a, 1.0), 0.5))
    b = ops.where(small, 100.0, a)
    r = ops.div(1.0, b)
    r2 = ops.mul(r, r)
    series = ops.mul(r, ops.add(-1 / 8, ops.mul(r2, ops.add(1 / 192, ops.mul(
        r2, ops.add(-1 / 640, ops.mul(r2, 17 / 14336)))))))
    return ops.where(small, near, ops.add(ops.mul(ops.log(b), 0.5), series))


def _t_logpdf(z, df):
    return ops.sub(ops.sub(_log_poch_half(ops.mul(df, 0.5)),
                           ops.mul(ops.add(ops.log(df), _LOG_PI), 0.5)),
                   ops.mul(ops.mul(ops.add(df, 1.0), 0.5), ops.log1p(ops.div(ops.mul(z, z), df))))


def _cauchy_logpdf(z):
    # scipy's two forms: log1p(z^2) below 1, 2 log|z| + log1p(1/z^2) above (no overflow)
    absz = ops.abs(z)
    small = ops.lt(absz, 1.0)
    near = ops.log1p(ops.square(ops.where(small, absz, 0.5)))
    big = ops.where(small, 2.0, absz)
    far = ops.add(ops.mul(ops.log(big), 2.0), ops.log1p(ops.square(ops.div(1.0, big))))
    return ops.sub(-_LOG_PI, ops.where(small, near, far))


def _lognorm_logpdf(z, s):
    logz = ops.log(z)
    return ops.sub(ops.div(ops.mul(logz, logz), ops.mul(ops.mul(s, s), -2.0)),
                   ops.add(ops.add(ops.log(s), logz), _LOG_SQRT_2PI))


def _laplace_cdf(z):
    return ops.where(ops.gt(z, 0), ops.sub(1.0, ops.mul(ops.exp(ops.neg(z)), 0.5)),
                     ops.mul(ops.exp(z), 0.5))


CONTINUOUS = {
    "norm": Dist((), lambda z: ops.sub(ops.mul(ops.mul(z, z), -0.5), _LOG_SQRT_2PI),
                 pdf=lambda z: ops.div(ops.exp(ops.mul(ops.mul(z, z), -0.5)), _SQRT_2PI),
                 cdf=ops.ndtr, sf=lambda z: ops.ndtr(ops.neg(z))),
    "t": Dist(("df",), _t_logpdf, safe=(1.0,)),
    "gamma": Dist(("a",), lambda z, a: ops.sub(ops.sub(ops.xlogy(ops.sub(a, 1.0), z), z),
                                               ops.lgamma(a)),
                  support=lambda a: (0.0, _INF), inside=1.0, safe=(1.0,)),
    "beta": Dist(("a", "b"), lambda z, a, b: ops.sub(
        ops.add(ops.xlog1py(ops.sub(b, 1.0), ops.neg(z)), ops.xlogy(ops.sub(a, 1.0), z)),
        ops.betaln(a, b)), support=lambda a, b: (0.0, 1.0), inside=0.5, safe=(1.0, 1.0)),
    "expon": Dist((), ops.neg, pdf=lambda z: ops.exp(ops.neg(z)),
                  cdf=lambda z: ops.neg(ops.expm1(ops.neg(z))), sf=lambda z: ops.exp(ops.neg(z)),
                  support=lambda: (0.0, _INF), inside=1.0),
    # (log(0.5) - |z|: scipy's log(pdf) is -inf beyond |z| = 745, this is not)
    "laplace": Dist((), lambda z: ops.sub(-math.log(2.0), ops.abs(z)),
                    pdf=lambda z: ops.mul(ops.exp(ops.neg(ops.abs(z))), 0.5),
                    cdf=_laplace_cdf, sf=lambda z: _laplace_cdf(ops.neg(z))),
    "logistic": Dist((), lambda z: ops.sub(ops.neg(ops.abs(z)), ops.mul(
        ops.log1p(ops.exp(ops.neg(ops.abs(z)))), 2.0)),
        cdf=ops.sigmoid, sf=lambda z: ops.sigmoid(ops.neg(z))),
    "lognorm": Dist(("s",), _lognorm_logpdf, cdf=lambda z, s: ops.ndtr(ops.div(ops.log(z), s)),
                    sf=lambda z, s: ops.ndtr(ops.neg(ops.div(ops.log(z), s))),
                    support=lambda s: (0.0, _INF), open_support=True, inside=1.0, safe=(1.0,)),
    "cauchy": Dist((), _cauchy_logpdf,
                   pdf=lambda z: ops.div(1.0 / math.pi, ops.add(ops.mul(z, z), 1.0)),
                   cdf=lambda z: ops.div(ops.arctan2(1.0, ops.neg(z)), math.pi),
                   sf=lambda z: ops.div(ops.arctan2(1.0, z), math.pi)),
}


# ---- discrete -------------------------------------------------------------------------------
# (argchecks with comparisons and numpy functions: on constants they compute in numpy)
def _all(*conditions):
    out = conditions[0]
    for c in conditions[1:]:
        out = np.logical_and(out, c)
    return out



def _poisson_logpmf(k, mu):
    return ops.sub(ops.sub(ops.xlogy(k, mu), ops.lgamma(ops.add(k, 1.0))), mu)


def _binom_logpmf(k, n, p):
    comb = ops.sub(ops.lgamma(ops.add(n, 1.0)),
                   ops.add(ops.lgamma(ops.add(k, 1.0)), ops.lgamma(ops.add(ops.sub(n, k), 1.0))))
    return ops.add(comb, ops.add(ops.xlogy(k, p), ops.xlog1py(ops.sub(n, k), ops.neg(p))))


def _nbinom_logpmf(k, n, p):
    coeff = ops.sub(ops.sub(ops.lgamma(ops.add(n, k)), ops.lgamma(ops.add(k, 1.0))),
                    ops.lgamma(n))
    return ops.add(coeff, ops.add(ops.mul(n, ops.log(p)), ops.xlog1py(k, ops.neg(p))))


DISCRETE = {
    "poisson": Dist(("mu",), _poisson_logpmf, discrete=True, argcheck=lambda mu: mu >= 0,
                    support=lambda mu: (0.0, _INF), safe=(1.0,)),
    "binom": Dist(("n", "p"), _binom_logpmf, discrete=True,
                  argcheck=lambda n, p: _all(n >= 0, np.floor(n) == n, p >= 0, p <= 1),
                  support=lambda n, p: (0.0, n), safe=(1.0, 0.5)),
    "nbinom": Dist(("n", "p"), _nbinom_logpmf, discrete=True,
                   argcheck=lambda n, p: _all(n > 0, p > 0, p <= 1),
                   support=lambda n, p: (0.0, _INF), safe=(1.0, 0.5)),
}
