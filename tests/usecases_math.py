"""Use cases (as tests/usecases.py, whose roles name the arguments) for numpy's elementwise
math, scipy.special and the numpy conversion functions (issue 11). Imported by usecases.py, so
tests/e2e/test_differentiate.py runs each four ways."""
from __future__ import annotations

import numpy as np
import scipy.integrate
import scipy.linalg
import scipy.ndimage
import scipy.optimize
import scipy.signal
import scipy.spatial.distance
import scipy.special
import scipy.stats
from scipy.special import expit

from tests.usecases import usecase

CONVERTS = "numpy's conversions (np.asarray, ...) turn a Tensor into a plain ndarray"
SCIPY_PYTHON = "scipy's Python functions convert a Tensor with np.asarray (no eager gradient)"


# ---- elementwise ufuncs ---------------------------------------------------------------------
@usecase
def ufunc_hyperbolic(x, p):
    return (np.sum(np.sinh(x) * np.cosh(0.5 * x)) + np.sum(np.arcsinh(3.0 * x))
            + np.sum(np.arccosh(p + 1.0)) + np.sum(np.arctanh(x / (np.abs(x) + 1.5))))


@usecase
def ufunc_inverse_trig(x, w):
    return (np.sum(np.arcsin(x / 3.0) * w) + np.sum(np.arccos(w / 3.0))
            + np.sum(np.arctan(x) ** 2) + np.sum(np.arctan2(x, w)) + np.sum(np.arctan2(x, 2.0)))


@usecase
def ufunc_exp_log_bases(x, p, w):
    return (np.sum(np.exp2(x) * np.log2(p)) + np.sum(np.log10(p) ** 2) + np.sum(np.cbrt(p))
            + np.sum(np.logaddexp(x, w)) + np.sum(np.logaddexp2(x, 1.0)))


@usecase
def ufunc_hypot_copysign_fmod(x, w, p):
    return (np.sum(np.hypot(x, w)) + np.sum(np.copysign(p, x) * w)
            + np.sum(np.fmod(3.0 * x, p) * p) + np.sum(np.fmod(x, 0.3)))


@usecase
def ufunc_rounding(x, p):
    return (np.sum(np.ceil(2.0 * x) * x) + np.sum(np.trunc(3.0 * x) * p)
            + np.sum(np.fix(2.5 * x) * x) + np.sum(np.rint(4.0 * x) * x)
            + np.sum(np.round(x, 2) * p) + np.sum(np.around(x * 10.0, -1) * x))


@usecase
def ufunc_angles_and_friends(x, p, w):
    return (np.sum(np.reciprocal(p) * np.positive(x)) + np.sum(np.sinc(x) * w)
            + np.sum(np.deg2rad(x) + np.radians(w) ** 2) + np.sum(np.rad2deg(x) * 0.01)
            + np.sum(np.degrees(w) * x) * 0.01 + np.sum(np.heaviside(x, 0.5) * w))


@usecase
def ufunc_predicates(x, w):
    y = np.where(x > 0.0, x, np.inf)
    z = np.where(w > 0.0, w, np.nan)
    keep = np.isfinite(y) & ~np.isnan(z) | np.isinf(y) & np.signbit(w)
    near = np.isclose(x, w, atol=0.5) | np.isclose(z, z, equal_nan=True)
    return (np.sum(np.where(keep, x * w, 0.0)) + np.sum(np.nan_to_num(z, nan=0.5) * x)
            + np.sum(np.nan_to_num(y, posinf=2.0) * w) + np.sum(np.where(near, x, 0.0))
            + np.where(np.allclose(x, w, rtol=0.1), 1.0, 2.0) * np.sum(w))


# ---- complex intermediates and np.fft ------------------------------------------------------
@usecase
def fft_transforms(x, w, m, t):
    return (np.sum(np.abs(np.fft.rfft(x)) ** 2) + np.sum(np.fft.irfft(np.fft.rfft(x)
                                                                      * np.fft.rfft(w), 4))
            + np.sum(np.real(np.fft.ifft(np.fft.fft(x) * (1 + 2j))) * w)
            + np.sum(np.abs(np.fft.fft2(m))) + np.sum(np.imag(np.fft.ifft2(m * 1j + m)) ** 2)
            + np.sum(np.fft.irfft2(np.fft.rfft2(m) * 0.5, s=(3, 4)) * m)
            + np.sum(np.abs(np.fft.fftn(t, axes=(0, 2)))) + np.sum(np.real(np.fft.ifftn(t)) * t)
            + np.sum(np.fft.irfftn(np.fft.rfftn(t) * (0.5 + 1j), (2, 3, 4)) ** 2)
            + np.sum(np.fft.fftshift(x) * w) + np.sum(np.abs(np.fft.ifftshift(np.fft.fft(w)))))


@usecase
def complex_parts_and_angles(x, w, p):
    z = x + 1j * w
    return (np.sum(np.angle(z) * p) + np.sum(np.real(np.conjugate(z) * z))
            + np.sum(np.imag(z * z / p)) + np.sum(np.angle(x) * w) + np.sum(np.real(x) * p)
            + np.sum(np.imag(x) + np.conjugate(x) * p) + np.iscomplexobj(z) * np.sum(w)
            + np.isrealobj(x) * np.sum(p ** 2))


# ---- scipy.special ------------------------------------------------------------------------
@usecase
def scipy_special_ufuncs(x, p, w):
    return (np.sum(scipy.special.erf(x) * w) + np.sum(scipy.special.erfc(x))
            + np.sum(scipy.special.gammaln(p + x * 0.1)) + np.sum(scipy.special.digamma(p))
            + np.sum(scipy.special.psi(p + 1.0)) + np.sum(scipy.special.logit(p / 3.0))
            + np.sum(expit(x) * w) + np.sum(scipy.special.expit(w))
            + np.sum(scipy.special.xlogy(x, p)) + np.sum(scipy.special.xlog1py(w, p))
            + np.sum(scipy.special.ndtr(x) * w))


@usecase(eager=SCIPY_PYTHON)
def scipy_special_functions(m, x, w):
    return (np.sum(scipy.special.logsumexp(m, axis=1)) + scipy.special.logsumexp(x)
            + scipy.special.logsumexp(x, b=np.abs(w) + 0.5)
            + np.sum(scipy.special.logsumexp(m, axis=0, keepdims=True) * x)
            + np.sum(scipy.special.softmax(m, axis=0) * m) + np.sum(scipy.special.softmax(x) * w)
            + np.sum(scipy.special.log_softmax(m, axis=1) * m))


@usecase(eager=SCIPY_PYTHON)
def scipy_stats_norm(x, w, p):
    d = scipy.stats.norm(w[0], p[0])
    return (np.sum(scipy.stats.norm.cdf(x) * w) + np.sum(scipy.stats.norm.sf(x, w, p))
            + np.sum(scipy.stats.norm.pdf(x, loc=w[1])) + np.sum(scipy.stats.norm.logpdf(x, w, p))
            + np.sum(d.logpdf(x)) + np.sum(d.cdf(x) * w))


@usecase
def scipy_special_likelihood_ufuncs(x, p, w):
    return (np.sum(scipy.special.betaln(p, w * w + 0.5)) + np.sum(scipy.special.beta(p, 2.5))
            + np.sum(scipy.special.gamma(p) * w) + np.sum(scipy.special.log_expit(x) * w)
            + np.sum(scipy.special.log_ndtr(3.0 * x)))


@usecase(eager=SCIPY_PYTHON)
def scipy_stats_continuous(x, w, p):
    q = p / (p + 1.0)
    d, g, b = scipy.stats.t(p[0] + 1.0, w[0], p[1]), scipy.stats.gamma(p[2]), \
        scipy.stats.beta(p[0], p[3], scale=1.5)
    return (np.sum(scipy.stats.t.logpdf(x, p[0] + 1.0, w[0], p[1]) + scipy.stats.t.pdf(x, 3.0))
            + np.sum(d.logpdf(x) + g.logpdf(p) + b.pdf(q) + scipy.special.polygamma(0, p))
            + np.sum(scipy.stats.gamma.logpdf(p, p[2], scale=p[3]) + scipy.stats.gamma.pdf(p, 2.0))
            + np.sum(scipy.stats.beta.logpdf(q, p[0], p[1]) + scipy.stats.beta.pdf(q, 2.0, p[2]))
            + np.sum(scipy.stats.lognorm.logpdf(p, p[0]) + scipy.stats.lognorm.pdf(p, 0.5, w[1])
                     + scipy.stats.lognorm.cdf(p, p[1]) + scipy.stats.lognorm.sf(p, 0.7) * w)
            + np.sum(scipy.stats.lognorm(p[3]).logpdf(p)))


@usecase(eager=SCIPY_PYTHON)
def scipy_stats_location_scale(x, w, p):
    total = (np.sum(scipy.stats.expon(-1.0, p[0]).logpdf(p) * w)
             + np.sum(scipy.stats.laplace(w[1], p[1]).logpdf(x) * w)
             + np.sum(scipy.stats.logistic(w[1], p[1]).cdf(x) * w)
             + np.sum(scipy.stats.cauchy(w[1], scale=p[1]).logpdf(x) * w))
    return (total + np.sum(scipy.stats.expon.logpdf(p, scale=p[0]) + scipy.stats.expon.pdf(p)
                           + scipy.stats.expon.cdf(p, w[0]) + scipy.stats.expon.sf(p) * w)
            + np.sum(scipy.stats.laplace.logpdf(x, w, p) + scipy.stats.laplace.pdf(x, w[0])
                     + scipy.stats.laplace.cdf(x, scale=p) + scipy.stats.laplace.sf(x) * w)
            + np.sum(scipy.stats.logistic.logpdf(x, w) + scipy.stats.logistic.pdf(x, 0.0, p)
                     + scipy.stats.logistic.cdf(x) * w + scipy.stats.logistic.sf(x, w[2]))
            + np.sum(scipy.stats.cauchy.logpdf(x, w, p) + scipy.stats.cauchy.pdf(x, w[3])
                     + scipy.stats.cauchy.cdf(x, scale=p) * w + scipy.stats.cauchy.sf(x)))


@usecase(eager=SCIPY_PYTHON)
def scipy_stats_counts_and_multivariate(m, x, w, p):
    k = np.array([0.0, 1.0, 3.0, 2.0])
    prob = expit(w)
    cov = np.diag(p) + 0.1
    return (np.sum(scipy.stats.poisson.logpmf(k, p) + scipy.stats.poisson.pmf(k, p[0]))
            + np.sum(scipy.stats.binom.logpmf(k, 4, prob) + scipy.stats.binom.pmf(k, 5, prob[0]))
            + np.sum(scipy.stats.nbinom.logpmf(k, p, prob) + scipy.stats.nbinom.pmf(k, 2.5, 0.4))
            + np.sum(scipy.stats.poisson(p[1]).logpmf(k) + scipy.stats.binom(6, prob[1]).pmf(k)
                     + scipy.stats.nbinom(p[2], prob[2]).logpmf(k))
            + np.sum(scipy.stats.multivariate_normal.logpdf(m, x, cov))
            + np.sum(scipy.stats.multivariate_normal(x, p).logpdf(m))
            + np.sum(scipy.stats.multivariate_normal.pdf(m, x, cov)))


@usecase(eager=SCIPY_PYTHON)
def scipy_rosenbrock(x):
    return scipy.optimize.rosen(x)


# ---- conversions --------------------------------------------------------------------------
@usecase(eager=CONVERTS)
def conversions(x, w, a):
    u = np.asarray(x) * np.asanyarray(w) + np.ascontiguousarray(x) * np.asfortranarray(w)
    v = np.array(x) + np.copy(w) + x.copy() + np.array(w, dtype=np.float64)
    r = np.array([x[0], a * a, 1.0, w[2]])
    sign = np.float32(w[3]) > 0  # (a float32 value has no useful finite differences)
    return (np.sum(u * v) + np.sum(r * x) + np.float64(a * x[1]) + sign * a
            + np.sum(x.astype(np.result_type(x, 1.0)))
            + np.sum(np.asarray([[x[1], 2.0], [a, w[0]]]) ** 2))


@usecase(eager=CONVERTS)
def lists_of_traced_values(x, w, a):
    b = x[0] * w[1]
    return (np.sum([1.0, a * a, b]) + np.mean([x[2], 2.0 * a]) + np.max([b, a, x[3]])
            + np.sum(np.stack([x[0], a, 1.0]) * w[1:]) + np.sum(np.concatenate([x, [a, b]]))
            + np.sum(np.array([x, w]) * x) + np.prod([a, b]))


# ---- finite differences, integrals, NaN-skipping extrema ---------------------------------------
@usecase
def nan_extrema_and_gradients(m, x, p):
    holes = np.where(m > 1.5, np.nan, m)
    return (np.sum(np.nanmax(holes, axis=1)) + np.nanmin(holes) + np.sum(np.gradient(x) * x)
            + np.sum(np.gradient(m, axis=1) ** 2) + np.sum(np.gradient(x, np.cumsum(p)) * p)
            + np.sum(np.gradient(x, 0.5) ** 2) + np.sum(np.ediff1d(x, to_begin=0.5) ** 2))


@usecase(eager=SCIPY_PYTHON)
def scipy_integrate_trapezoids(x, p, m):
    grid = np.cumsum(p)
    return (scipy.integrate.trapezoid(x ** 2, grid) + scipy.integrate.trapezoid(m, dx=0.5)[1]
            + np.sum(scipy.integrate.cumulative_trapezoid(x, grid, initial=0) * p)
            + np.sum(scipy.integrate.cumulative_trapezoid(m, dx=0.5, axis=0) ** 2))


@usecase
def unwrapped_phases(x, m):
    return np.sum(np.unwrap(4.0 * x) * x) + np.sum(np.unwrap(3.0 * m, axis=0) ** 2)


@usecase(eager=SCIPY_PYTHON)
def scipy_signal_convolve2d(m, s):
    return (np.sum(scipy.signal.convolve2d(m, s) ** 2)
            + np.sum(scipy.signal.convolve2d(m, s[:2, :2], mode="same", boundary="symm") * m))


@usecase
def sorted_traced_scalars(x, w):
    s = sorted([x[0], x[1] * w[0], x[2], w[3]])
    return s[0] + 2.0 * s[1] + 3.0 * s[2] + 4.0 * s[3] + max(sorted([w[1], x[3]])[0], w[2])


@usecase(eager="np.apply_along_axis has no eager form (numpy's own builds a numpy array)")
def apply_along_axis(m, w):
    def rownorm(r, scale):
        return np.sqrt(np.sum(r * r)) * scale
    return (np.sum(np.apply_along_axis(rownorm, 1, m, 2.0) * w[:3])
            + np.sum(np.apply_along_axis(lambda c: np.cumsum(c) * c, 0, m) ** 2))


@usecase(eager="np.piecewise has no eager form (numpy's own fills a numpy array)")
def piecewise(x, p):
    def soft(t, a):
        return a * np.log1p(t * t)
    return (np.sum(np.piecewise(x, [x < 0, x >= 0], [lambda t: t ** 2, np.sin]) * p)
            + np.sum(np.piecewise(x, [x > 0.5], [soft, lambda t, a: 0.5 * t], 1.5) ** 2)
            + np.sum(np.piecewise(p, [p < 1.0, p > 1.5], [0.0, np.log, lambda t: t * t])))


@usecase
def scipy_erfinv(x, p):
    return (np.sum(scipy.special.erfinv(np.tanh(x)) * p)
            + np.sum(scipy.special.erfinv(p / 2.5 - 0.1) ** 2))


# ---- scipy.spatial.distance, scipy.signal, scipy.ndimage, scipy.stats' moments ---------------
@usecase(eager=SCIPY_PYTHON)
def scipy_distances(m, k):
    d = scipy.spatial.distance.cdist(m, k.T, "sqeuclidean")
    return (np.sum(d) + np.sum(scipy.spatial.distance.cdist(m, m)) * 0.5
            + np.sum(scipy.spatial.distance.pdist(m, "cityblock"))
            + np.sum(scipy.spatial.distance.squareform(scipy.spatial.distance.pdist(k)) ** 2))


@usecase(eager=SCIPY_PYTHON)
def scipy_signal_filters(x, w, m, s):
    return (np.sum(scipy.signal.lfilter([1.0], [1.0, -0.5], x) ** 2)
            + np.sum(scipy.signal.lfilter(w[:2], [1.0, 0.3], m, axis=0) * m)
            + np.sum(scipy.signal.filtfilt([0.5, 0.5], [1.0, -0.2], m, padlen=2) ** 2)
            + np.sum(scipy.signal.convolve(x, w) ** 2) + np.sum(scipy.signal.correlate(x, w[:2]))
            + np.sum(scipy.signal.fftconvolve(m, s[:2, :2], "same") ** 2)
            + np.sum(scipy.signal.convolve2d(m, s, "same") * m)
            + np.sum(scipy.signal.correlate2d(m, s[:2], boundary="symm") ** 2))


@usecase(eager=SCIPY_PYTHON)
def scipy_ndimage_filters(x, m, s):
    return (np.sum(scipy.ndimage.gaussian_filter(m, 1.0) ** 2)
            + np.sum(scipy.ndimage.gaussian_filter1d(x, 0.7) * x)
            + np.sum(scipy.ndimage.uniform_filter(m, 2) ** 2)
            + np.sum(scipy.ndimage.uniform_filter1d(x, 3) ** 2)
            + np.sum(scipy.ndimage.convolve(m, s) * m)
            + np.sum(scipy.ndimage.correlate(m, s[:2], mode="wrap") ** 2)
            + np.sum(scipy.ndimage.convolve1d(x, [1.0, 2.0]) ** 2)
            + np.sum(scipy.ndimage.correlate1d(m, [1.0, -1.0], axis=0, mode="nearest") ** 2)
            + np.sum(scipy.ndimage.laplace(m) ** 2) + np.sum(scipy.ndimage.sobel(m) ** 2)
            + np.sum(scipy.ndimage.prewitt(m, 0) * m))


@usecase(eager=SCIPY_PYTHON)
def scipy_moments_and_entropies(m, x, p):
    return (np.sum(scipy.stats.moment(m, 3)) + np.sum(scipy.stats.skew(m, axis=1))
            + np.sum(scipy.stats.kurtosis(m)) + np.sum(scipy.stats.zscore(m) * m)
            + np.sum(scipy.special.entr(p)) + np.sum(scipy.special.rel_entr(p, p[::-1]))
            + np.sum(scipy.special.kl_div(p[::-1], p)) + np.sum(scipy.special.huber(1.0, x))
            + np.sum(scipy.special.pseudo_huber(p, x)))


@usecase
def histogram_weights(w):
    data = np.array([0.1, 0.7, 0.35, 1.0])
    return (np.sum(np.histogram(data, 3, weights=w)[0] * [1.0, 2.0, 3.0])
            + np.sum(np.histogram(data, [0.0, 0.5, 1.0], weights=w * w, density=True)[0]))


@usecase
def scipy_special_bessel_and_incomplete(x, p, w):
    return (np.sum(scipy.special.i0(x) * w) + np.sum(scipy.special.i0e(x))
            + np.sum(scipy.special.i1(x) ** 2) + np.sum(scipy.special.i1e(p) * w)
            + np.sum(scipy.special.ndtri(p / 2.5)) + np.sum(scipy.special.erfcx(x) * w)
            + np.sum(scipy.special.dawsn(x)) + np.sum(scipy.special.exprel(x) * w)
            + np.sum(scipy.special.gammainc(2.0, p)) + np.sum(scipy.special.gammaincc(1.5, p))
            + np.sum(scipy.special.kv(1.5, p) * w) + np.sum(scipy.special.kve(0.5, p))
            + np.sum(scipy.special.jv(1.0, x) * w) + np.sum(scipy.special.jn(2, x))
            + np.sum(scipy.special.binom(5.0, p)) + np.sum(scipy.special.betainc(2.0, 3.0, p / 2.5)))


@usecase(eager=SCIPY_PYTHON)
def scipy_stats_summaries_and_matrices(x, p, s, w):
    return (scipy.stats.entropy(p) + scipy.stats.gmean(p) + scipy.stats.hmean(p)
            + scipy.stats.sem(x) + scipy.stats.pearsonr(x, w).statistic
            + np.sum(scipy.special.comb(5.0, p)) + np.sum(scipy.linalg.block_diag(s, x[:2]) ** 2)
            + np.sum(scipy.linalg.toeplitz(x) * s[0, 0]) + np.sum(scipy.linalg.circulant(w) ** 2)
            + np.sum(scipy.linalg.sqrtm(s @ s.T + np.eye(3)) * s)
            + np.sum(scipy.linalg.lu_factor(s + 3.0 * np.eye(3))[0] ** 2)
            + np.sum(scipy.linalg.lu_solve(scipy.linalg.lu_factor(s + 3.0 * np.eye(3)), x[:3])))


@usecase(eager=SCIPY_PYTHON)
def nan_order_statistics_and_signal_filters(m, x, s):
    holes = np.where(m > 1.5, np.nan, m)
    sos = np.array([[0.2, 0.3, 0.1, 1.0, -0.2, 0.1]])
    return (np.nansum(np.nanmedian(holes, axis=1)) + np.nansum(np.nanpercentile(holes, 30.0))
            + np.nansum(np.nanquantile(holes, [0.2, 0.9], axis=0))
            + np.sum(scipy.signal.sosfilt(sos, x) ** 2) + np.sum(scipy.signal.detrend(m) ** 2)
            + np.sum(scipy.signal.savgol_filter(x, 3, 1) * x)
            + np.sum(scipy.signal.medfilt(m) * m) + np.sum(scipy.ndimage.median_filter(m, 2))
            + np.sum(scipy.ndimage.shift(m, (0.5, -0.3)) ** 2)
            + np.sum(scipy.ndimage.zoom(s, 1.5, order=1))
            + np.sum(scipy.ndimage.map_coordinates(m, [[0.5, 1.2], [2.5, 0.3]], order=1))
            + np.sum(np.abs(scipy.signal.hilbert(x)))
            + np.sum(scipy.signal.welch(x, nperseg=4)[1]))
