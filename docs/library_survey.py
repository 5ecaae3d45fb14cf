"""Try numpy and scipy functions common in tutorials on traced values, as a new user would:
each inside `llgrad.differentiate`, its value checked against the library's and its gradient
against central differences. Prints one line per function: ok (with the errors), or the
error llgrad gives (an UnsupportedError should name this file's line).

    python docs/library_survey.py          # all
    python docs/library_survey.py ndimage  # those whose name contains "ndimage"
"""
from __future__ import annotations

import sys
import warnings

import numpy as np
import scipy.linalg
import scipy.ndimage as nd
import scipy.signal as sg
import scipy.special as sp
import scipy.stats as st

import llgrad

R = np.random.default_rng(0)
V = R.uniform(0.2, 0.9, 8)            # a vector in (0, 1)
M = R.standard_normal((4, 4))         # a matrix
IMG = R.standard_normal((6, 7))       # an image
SPD = M @ M.T + 4 * np.eye(4)         # symmetric positive definite
K3 = np.array([[0.0, 1.0, 0.0], [1.0, -4.0, 1.0], [0.0, 1.0, 0.0]])

# name -> (function of one traced argument, argument)
CASES = {
    # scipy.ndimage
    "scipy.ndimage.gaussian_filter": (lambda a: nd.gaussian_filter(a, 1.0), IMG),
    "scipy.ndimage.gaussian_filter1d": (lambda v: nd.gaussian_filter1d(v, 1.0), V),
    "scipy.ndimage.convolve": (lambda a: nd.convolve(a, K3), IMG),
    "scipy.ndimage.correlate": (lambda a: nd.correlate(a, K3), IMG),
    "scipy.ndimage.uniform_filter": (lambda a: nd.uniform_filter(a, 3), IMG),
    "scipy.ndimage.uniform_filter1d": (lambda v: nd.uniform_filter1d(v, 3), V),
    "scipy.ndimage.shift": (lambda a: nd.shift(a, (0.5, 1.0)), IMG),
    "scipy.ndimage.zoom": (lambda a: nd.zoom(a, 2), IMG),
    "scipy.ndimage.laplace": (lambda a: nd.laplace(a), IMG),
    "scipy.ndimage.sobel": (lambda a: nd.sobel(a), IMG),
    "scipy.ndimage.map_coordinates(order=1)": (
        lambda a: nd.map_coordinates(a, [[0.5, 2.2], [1.5, 3.1]], order=1), IMG),
    "scipy.ndimage.map_coordinates": (lambda a: nd.map_coordinates(a, [[0.5, 2.2], [1.5, 3.1]]),
                                      IMG),
    "scipy.ndimage.median_filter": (lambda a: nd.median_filter(a, 3), IMG),
    # scipy.signal
    "scipy.signal.convolve": (lambda v: sg.convolve(v, [1.0, 2.0, 1.0]), V),
    "scipy.signal.correlate": (lambda v: sg.correlate(v, [1.0, 2.0, 1.0]), V),
    "scipy.signal.convolve2d": (lambda a: sg.convolve2d(a, K3, mode="same"), IMG),
    "scipy.signal.correlate2d": (lambda a: sg.correlate2d(a, K3), IMG),
    "scipy.signal.fftconvolve": (lambda v: sg.fftconvolve(v, [1.0, 2.0, 1.0]), V),
    "scipy.signal.sosfilt": (lambda v: sg.sosfilt(sg.butter(2, 0.3, output="sos"), v), V),
    "scipy.signal.savgol_filter": (lambda v: sg.savgol_filter(v, 5, 2), V),
    "scipy.signal.medfilt": (lambda v: sg.medfilt(v, 3), V),
    "scipy.signal.detrend": (lambda v: sg.detrend(v), V),
    "scipy.signal.deconvolve": (lambda v: sg.deconvolve(v, [1.0, 0.5])[0], V),
    "scipy.signal.hilbert": (lambda v: np.abs(sg.hilbert(v)), V),
    "scipy.signal.welch": (lambda v: sg.welch(v, nperseg=4)[1], V),
    # scipy.special
    "scipy.special.expit": (lambda v: sp.expit(v), V),
    "scipy.special.gammaincc": (lambda v: sp.gammaincc(2.0, v), V),
    "scipy.special.gammainc": (lambda v: sp.gammainc(2.0, v), V),
    "scipy.special.i0": (lambda v: sp.i0(v), V),
    "scipy.special.i0e": (lambda v: sp.i0e(v), V),
    "scipy.special.i1": (lambda v: sp.i1(v), V),
    "scipy.special.i1e": (lambda v: sp.i1e(v), V),
    "scipy.special.betainc": (lambda v: sp.betainc(2.0, 3.0, v), V),
    "scipy.special.kv": (lambda v: sp.kv(1.5, v), V),
    "scipy.special.jv": (lambda v: sp.jv(1.0, v), V),
    "scipy.special.comb": (lambda v: sp.comb(5.0, v), V),
    "scipy.special.binom": (lambda v: sp.binom(5.0, v), V),
    "scipy.special.zeta": (lambda v: sp.zeta(v + 1.5, 1.0), V),
    "scipy.special.entr": (lambda v: sp.entr(v), V),
    "scipy.special.rel_entr": (lambda v: sp.rel_entr(v, V[::-1]), V),
    "scipy.special.kl_div": (lambda v: sp.kl_div(v, V[::-1]), V),
    "scipy.special.huber": (lambda v: sp.huber(0.5, v), V),
    "scipy.special.sinc": (lambda v: np.sinc(v), V),
    "scipy.special.multigammaln": (lambda v: sp.multigammaln(v + 2.0, 2), V),
    "scipy.special.ndtri": (lambda v: sp.ndtri(v), V),
    "scipy.special.erfcx": (lambda v: sp.erfcx(v), V),
    "scipy.special.dawsn": (lambda v: sp.dawsn(v), V),
    "scipy.special.exprel": (lambda v: sp.exprel(v), V),
    "scipy.special.softplus": (lambda v: sp.softplus(v), V),
    # scipy.stats
    "scipy.stats.zscore": (lambda v: st.zscore(v), V),
    "scipy.stats.skew": (lambda v: st.skew(v), V),
    "scipy.stats.kurtosis": (lambda v: st.kurtosis(v), V),
    "scipy.stats.pearsonr": (lambda v: st.pearsonr(v, V ** 2)[0], V),
    "scipy.stats.pearsonr(pvalue)": (lambda v: st.pearsonr(v, V ** 2).pvalue, V),
    "scipy.stats.entropy": (lambda v: st.entropy(v), V),
    "scipy.stats.gmean": (lambda v: st.gmean(v), V),
    "scipy.stats.hmean": (lambda v: st.hmean(v), V),
    "scipy.stats.sem": (lambda v: st.sem(v), V),
    "scipy.stats.moment": (lambda v: st.moment(v, 3), V),
    "scipy.stats.norm.logpdf": (lambda v: st.norm.logpdf(v, 0.5, 2.0), V),
    "scipy.stats.beta.logpdf": (lambda v: st.beta.logpdf(v, 2.0, 3.0), V),
    "scipy.stats.dirichlet.logpdf": (lambda v: st.dirichlet.logpdf(v[:3] / np.sum(v[:3]),
                                                                   [1.0, 2.0, 3.0]), V),
    "scipy.stats.multivariate_normal.logpdf": (
        lambda v: st.multivariate_normal.logpdf(v[:4], np.zeros(4), SPD), V),
    # scipy.linalg
    "scipy.linalg.cho_factor": (lambda a: scipy.linalg.cho_factor(a @ a.T + 4 * np.eye(4))[0],
                                M),
    "scipy.linalg.lu_factor": (lambda a: scipy.linalg.lu_factor(a + 4 * np.eye(4))[0], M),
    "scipy.linalg.lu_solve": (lambda a: scipy.linalg.lu_solve(scipy.linalg.lu_factor(a), V[:4]),
                              M),
    "scipy.linalg.sqrtm": (lambda a: scipy.linalg.sqrtm(a @ a.T + np.eye(4)), M),
    "scipy.linalg.logm": (lambda a: scipy.linalg.logm(a @ a.T + np.eye(4)), M),
    "scipy.linalg.solve_triangular": (lambda a: scipy.linalg.solve_triangular(
        np.triu(a) + 4 * np.eye(4), V[:4]), M),
    "scipy.linalg.block_diag": (lambda a: scipy.linalg.block_diag(a, a[:2, :2]), M),
    "scipy.linalg.toeplitz": (lambda v: scipy.linalg.toeplitz(v), V),
    "scipy.linalg.circulant": (lambda v: scipy.linalg.circulant(v), V),
    "scipy.linalg.det": (lambda a: scipy.linalg.det(a), M),
    # numpy
    "np.histogram(weights=)": (lambda v: np.histogram(V, bins=3, weights=v)[0], V),
    "np.histogram(traced data)": (lambda v: np.histogram(v, bins=3)[0] * 1.0, V),
    "np.percentile": (lambda v: np.percentile(v, [25.0, 50.0, 90.0]), V),
    "np.percentile(method=nearest)": (lambda v: np.percentile(v, 30.0, method="nearest"), V),
    "np.quantile(axis=)": (lambda a: np.quantile(a, 0.3, axis=0), M),
    "np.nanpercentile": (lambda v: np.nanpercentile(v, 40.0), V),
    "np.nanmedian": (lambda v: np.nanmedian(v), V),
    "np.nanquantile(axis=)": (lambda a: np.nanquantile(np.where(a > 1.0, np.nan, a), 0.3, axis=0),
                              M),
    "np.median": (lambda a: np.median(a, axis=1), M),
    "np.linalg.pinv": (lambda a: np.linalg.pinv(a), M),
    "np.linalg.cond": (lambda a: np.linalg.cond(a), M),
    "np.linalg.matrix_rank": (lambda a: np.linalg.matrix_rank(a) * 1.0 + np.sum(a), M),
    "np.linalg.multi_dot": (lambda a: np.linalg.multi_dot([a, a.T, a]), M),
    "np.linalg.eigvalsh": (lambda a: np.linalg.eigvalsh(a + a.T), M),
    "np.linalg.matrix_power": (lambda a: np.linalg.matrix_power(a, 3), M),
    "np.triu_indices": (lambda a: a[np.triu_indices(4, 1)], M),
    "np.tril_indices_from": (lambda a: a[np.tril_indices_from(a)], M),
    "np.unique(constant)": (lambda v: v[: len(np.unique(np.array([1, 2, 2, 3])))], V),
    "np.unique(traced)": (lambda v: np.unique(np.round(v, 1)), V),
    "np.cross": (lambda v: np.cross(v[:3], v[3:6]), V),
    "np.kron": (lambda a: np.kron(a[:2, :2], a), M),
    "np.convolve": (lambda v: np.convolve(v, [1.0, 2.0, 1.0], mode="same"), V),
    "np.correlate": (lambda v: np.correlate(v, [1.0, 2.0, 1.0], mode="full"), V),
    "np.interp": (lambda v: np.interp(V, np.linspace(0, 1, 8), v), V),
    "np.interp(traced x)": (lambda v: np.interp(v, np.linspace(0, 1, 8), V), V),
    "np.cov": (lambda a: np.cov(a), M),
    "np.corrcoef": (lambda a: np.corrcoef(a), M),
    "np.fft.rfft": (lambda v: np.abs(np.fft.rfft(v)), V),
    "np.fft.irfft": (lambda v: np.fft.irfft(np.fft.rfft(v)), V),
    "np.roll": (lambda v: np.roll(v, 2), V),
    "np.polyder": (lambda v: np.polyder(v), V),
    "np.polyint": (lambda v: np.polyint(v), V),
    "np.polymul": (lambda v: np.polymul(v[:3], v[3:6]), V),
    "np.roots": (lambda v: np.roots(v[:3]), V),
    "np.trapezoid": (lambda v: np.trapezoid(v), V),
    "np.digitize(weights of bins)": (lambda v: v[np.digitize(V, [0.3, 0.6])], V),
    "np.searchsorted": (lambda v: v * np.searchsorted(np.sort(v), 0.5), V),
    "np.clip": (lambda v: np.clip(v, 0.3, 0.7), V),
    "np.logspace": (lambda v: np.logspace(0.0, 1.0, 4) * v[:4], V),
    "np.einsum(path)": (lambda a: np.einsum("ij,jk,kl->il", a, a, a, optimize=True), M),
    "np.pad(reflect)": (lambda v: np.pad(v, 2, mode="reflect"), V),
    "np.put_along_axis": (lambda v: np.take_along_axis(v, np.argsort(v), 0), V),
    "np.lib.stride_tricks.sliding_window_view": (
        lambda v: np.lib.stride_tricks.sliding_window_view(v, 3).sum(1), V),
}


# Refused on purpose, with a clear error naming this file's line (the report's reason).
EXPECTED_REFUSALS = {
    "scipy.ndimage.map_coordinates": "order=3 (the default cubic spline): order 0 and 1 only",
    "scipy.special.zeta": "no derivative in x (and no llgrad version)",
    "scipy.linalg.logm": "no llgrad version",
    "np.histogram(traced data)": "edges computed from the data",
    "np.unique(traced)": "a result of data-dependent length",
    "np.roots": "complex roots",
}


def _fd(f, x, eps=1e-6):
    g = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        xp, xm = x.copy(), x.copy()
        xp[i] += eps
        xm[i] -= eps
        g[i] = (np.sum(f(xp)) - np.sum(f(xm))) / (2 * eps)
    return g


def survey(name: str, f, x) -> str:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            want = np.asarray(f(x), dtype=np.float64)
        except Exception as e:  # noqa: BLE001
            return f"reference fails: {type(e).__name__}: {e}"
        d = llgrad.differentiate(lambda x: np.sum(f(x)))
        try:
            got = np.asarray(llgrad.differentiate(f)(x), dtype=np.float64) \
                if want.ndim else d(x)
            value, grad = d.value_and_grad(x)
        except Exception as e:  # noqa: BLE001
            msg = str(e).splitlines()
            here = "names its line" if any(__file__ in m for m in msg) else "NO LINE"
            return f"{type(e).__name__} ({here}): {msg[0][:150]}"
        verr = np.max(np.abs(got - want)) / max(1.0, np.max(np.abs(want)))
        fd = _fd(f, x)
        gerr = np.max(np.abs(grad - fd)) / max(1.0, np.max(np.abs(fd)))
        status = "ok" if verr < 1e-8 and gerr < 1e-5 else "WRONG"
        return f"{status} (value err {verr:.1e}, gradient err {gerr:.1e})"


def main(argv: list[str]) -> int:
    counts = {"ok": 0, "refused as expected": 0, "other": 0}
    for name, (f, x) in CASES.items():
        if argv and not any(a in name for a in argv):
            continue
        line = survey(name, f, x)
        if line.startswith("ok"):
            counts["ok"] += 1
        elif name in EXPECTED_REFUSALS and "(names its line)" in line:
            counts["refused as expected"] += 1
            line = f"refused as expected ({EXPECTED_REFUSALS[name]}): {line}"
        else:
            counts["other"] += 1
        print(f"{name:45s} {line}", flush=True)
    print(", ".join(f"{v} {k}" for k, v in counts.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
