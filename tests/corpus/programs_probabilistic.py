"""Corpus programs (see tests/corpus/programs.py) from probabilistic modelling, sequence models,
ranking and image processing, written as their papers and notebooks write them: normalizing
flows with their log-determinants, a GRU unrolled over a sequence, a linear-chain CRF's forward
algorithm, ListNet and RankNet losses, a mixture density network, a Matern GP, the eight
schools, HMC's leapfrog, reparameterised variational inference, and image filters by explicit
kernel loops and bilinear sampling."""
from __future__ import annotations

import math
from collections import namedtuple

import numpy as np
import scipy.linalg
import scipy.signal
import scipy.special
import scipy.stats

from tests.corpus.registry import program


# ---- normalizing flows -------------------------------------------------------------------------
def _planar_args(rng):
    K, d = 3, 2
    flows = [{"u": 0.5 * rng.standard_normal(d), "w": rng.standard_normal(d),
              "b": 0.1 * rng.standard_normal()} for _ in range(K)]
    return flows, rng.standard_normal((10, d))


@program(_planar_args)
def planar_flow_kl(flows, z0):
    """Rezende & Mohamed's planar flows f(z) = z + u tanh(w.z + b) applied in sequence to base
    samples, log|det| = log|1 + u.psi(z)| accumulated; a Monte Carlo KL to a banana target."""
    z = z0
    log_q = np.sum(scipy.stats.norm.logpdf(z0), axis=1)
    for layer in flows:
        u, w, b = layer["u"], layer["w"], layer["b"]
        a = z @ w + b
        psi = (1 - np.tanh(a) ** 2)[:, None] * w
        log_q = log_q - np.log(np.abs(1 + psi @ u))
        z = z + np.outer(np.tanh(a), u)
    log_p = -0.5 * (z[:, 0] ** 2 / 4 + (z[:, 1] - 0.5 * z[:, 0] ** 2) ** 2)
    return np.mean(log_q - log_p)


def _realnvp_args(rng):
    d, h = 4, 8
    params = {"W1": 0.3 * rng.standard_normal((d // 2, h)), "b1": np.zeros(h),
              "Ws": 0.3 * rng.standard_normal((h, d // 2)), "Wt": 0.3 * rng.standard_normal((h, d // 2))}
    return params, rng.standard_normal((12, d))


@program(_realnvp_args)
def realnvp_coupling_nll(params, x):
    """One RealNVP affine coupling layer (Dinh et al.): the first half conditions a tanh-bounded
    scale and a shift of the second half; NLL under a standard normal plus the log-det sum s."""
    d = x.shape[1] // 2
    x1, x2 = x[:, :d], x[:, d:]
    h = np.tanh(x1 @ params["W1"] + params["b1"])
    s = np.tanh(h @ params["Ws"])
    t = h @ params["Wt"]
    y = np.concatenate([x1, x2 * np.exp(s) + t], axis=1)
    log_det = np.sum(s, axis=1)
    log_pz = -0.5 * np.sum(y ** 2, axis=1) - 0.5 * y.shape[1] * np.log(2 * np.pi)
    return -np.mean(log_pz + log_det)


# ---- sequence models ---------------------------------------------------------------------------
def sigmoid(x):
    return 1 / (1 + np.exp(-x))


def gru_cell(x, h, p):
    """One GRU step (Cho et al. 2014), weights in a dict."""
    z = sigmoid(x @ p["Wz"] + h @ p["Uz"] + p["bz"])
    r = sigmoid(x @ p["Wr"] + h @ p["Ur"] + p["br"])
    h_tilde = np.tanh(x @ p["Wh"] + (r * h) @ p["Uh"] + p["bh"])
    return (1 - z) * h + z * h_tilde


def _gru_args(rng):
    d, H, T = 3, 5, 8
    p = {}
    for g in "zrh":
        p["W" + g] = 0.4 * rng.standard_normal((d, H))
        p["U" + g] = 0.4 * rng.standard_normal((H, H))
        p["b" + g] = np.zeros(H)
    return p, rng.standard_normal((T, d)), rng.standard_normal(T), 0.3 * rng.standard_normal(H)


@program(_gru_args)
def gru_sequence_regression(p, xs, ys, w_out):
    """A GRU unrolled over a sequence, a linear read-out at every step, mean squared error."""
    h = np.zeros(p["Uz"].shape[0])
    preds = []
    for t in range(xs.shape[0]):
        h = gru_cell(xs[t], h, p)
        preds.append(h @ w_out)
    return np.mean((np.array(preds) - ys) ** 2)


def _crf_args(rng):
    T, K = 7, 4
    return rng.standard_normal((T, K)), 0.5 * rng.standard_normal((K, K)), rng.integers(0, K, T)


@program(_crf_args, wrt=(0, 1))
def crf_negative_log_likelihood(emissions, transitions, tags):
    """A linear-chain CRF's NLL: the log partition by the forward algorithm in log space
    (logsumexp over the previous tag), minus the gold path's score."""
    T = emissions.shape[0]
    alpha = emissions[0]
    for t in range(1, T):
        alpha = scipy.special.logsumexp(alpha[:, None] + transitions, axis=0) + emissions[t]
    log_Z = scipy.special.logsumexp(alpha)
    score = emissions[0, tags[0]]
    for t in range(1, T):
        score += transitions[tags[t - 1], tags[t]] + emissions[t, tags[t]]
    return log_Z - score


# ---- ranking -----------------------------------------------------------------------------------
Query = namedtuple("Query", ["features", "relevance"])


def _listnet_args(rng):
    queries = [Query(rng.standard_normal((n, 4)), rng.integers(0, 4, n).astype(float))
               for n in (5, 7, 6)]
    return 0.1 * rng.standard_normal(4), queries


@program(_listnet_args)
def listnet_top_one(w, queries):
    """ListNet (Cao et al. 2007): cross-entropy between the top-one probabilities of the
    relevance labels and of the scores, summed over queries of different lengths."""
    loss = 0.0
    for q in queries:
        scores = q.features @ w
        p_true = scipy.special.softmax(q.relevance)
        loss -= np.sum(p_true * scipy.special.log_softmax(scores))
    return loss / len(queries)


def _ranknet_args(rng):
    n = 8
    return 0.1 * rng.standard_normal(5), rng.standard_normal((n, 5)), rng.integers(0, 3, n)


@program(_ranknet_args)
def lambdarank_pairwise(w, X, relevance, sigma=1.0):
    """RankNet's pairwise logistic loss over all pairs from np.triu_indices, each weighted by
    |delta NDCG| of swapping the pair (LambdaRank-style), pairs of equal relevance masked out."""
    s = X @ w
    n = len(s)
    i, j = np.triu_indices(n, k=1)
    gains = 2.0 ** relevance - 1
    ranks = np.argsort(np.argsort(-s))
    discounts = 1.0 / np.log2(ranks + 2.0)
    ideal = np.sum(np.sort(gains)[::-1] / np.log2(np.arange(n) + 2.0))
    delta_ndcg = np.abs((gains[i] - gains[j]) * (discounts[i] - discounts[j])) / ideal
    S = np.sign(relevance[i] - relevance[j])
    pair_loss = np.logaddexp(0, -sigma * S * (s[i] - s[j]))
    mask = S != 0
    return np.sum(delta_ndcg[mask] * pair_loss[mask])


# ---- probabilistic models ------------------------------------------------------------------------
def _mdn_args(rng):
    H, K = 10, 3
    params = {"W1": 0.5 * rng.standard_normal((1, H)), "b1": np.zeros(H),
              "W_pi": 0.3 * rng.standard_normal((H, K)), "W_mu": rng.standard_normal((H, K)),
              "W_sigma": 0.3 * rng.standard_normal((H, K))}
    x = rng.uniform(-1, 1, (20, 1))
    return params, x, np.sin(3 * x[:, 0]) + 0.1 * rng.standard_normal(20)


@program(_mdn_args)
def mixture_density_network(params, x, y):
    """Bishop's mixture density network: a tanh hidden layer emitting mixture logits, means and
    log standard deviations; NLL of y by logsumexp over the components."""
    h = np.tanh(x @ params["W1"] + params["b1"])
    log_pi = scipy.special.log_softmax(h @ params["W_pi"], axis=1)
    mu = h @ params["W_mu"]
    log_sigma = h @ params["W_sigma"]
    z = (y[:, None] - mu) / np.exp(log_sigma)
    log_comp = -0.5 * z ** 2 - log_sigma - 0.5 * np.log(2 * np.pi)
    return -np.mean(scipy.special.logsumexp(log_pi + log_comp, axis=1))


def matern52(X1, X2, lengthscales, variance):
    """The ARD Matern 5/2 kernel, distances of the scaled inputs by broadcasting."""
    d = (X1[:, None, :] - X2[None, :, :]) / lengthscales
    r = np.sqrt(np.sum(d ** 2, axis=-1))
    return variance * (1 + math.sqrt(5) * r + 5.0 / 3.0 * r ** 2) * np.exp(-math.sqrt(5) * r)


def _matern_args(rng):
    X = rng.uniform(0, 3, (12, 2))
    return np.array([0.0, 0.3, 0.0, -2.0]), X, np.sin(X[:, 0]) * np.cos(X[:, 1])


@program(_matern_args)
def gp_matern52_nll(log_params, X, y):
    """GP regression's negative log marginal likelihood with an ARD Matern 5/2 kernel, solved by
    scipy.linalg.cho_factor / cho_solve."""
    lengthscales = np.exp(log_params[:2])
    variance, noise = np.exp(log_params[2]), np.exp(log_params[3])
    K = matern52(X, X, lengthscales, variance) + noise * np.eye(len(X))
    c, low = scipy.linalg.cho_factor(K, lower=True)
    alpha = scipy.linalg.cho_solve((c, low), y)
    return 0.5 * y @ alpha + np.sum(np.log(np.diag(c))) + 0.5 * len(y) * math.log(2 * math.pi)


def _schools_args(rng):
    y = np.array([28.0, 8.0, -3.0, 7.0, -1.0, 1.0, 18.0, 12.0])
    sigma = np.array([15.0, 10.0, 16.0, 11.0, 9.0, 11.0, 10.0, 18.0])
    return {"mu": 4.0, "log_tau": 1.2, "theta_tilde": rng.standard_normal(8)}, y, sigma


@program(_schools_args)
def eight_schools_noncentred(params, y, sigma):
    """The eight schools (Rubin 1981) non-centred: theta = mu + tau theta_tilde; log posterior
    with a half-Cauchy prior on tau, the log-Jacobian of tau = exp(log_tau) added."""
    mu, log_tau, theta_tilde = params["mu"], params["log_tau"], params["theta_tilde"]
    tau = np.exp(log_tau)
    theta = mu + tau * theta_tilde
    lp = scipy.stats.norm.logpdf(mu, 0, 5)
    lp += scipy.stats.cauchy.logpdf(tau, 0, 5) + np.log(2) + log_tau
    lp += np.sum(scipy.stats.norm.logpdf(theta_tilde))
    lp += np.sum(scipy.stats.norm.logpdf(y, theta, sigma))
    return -lp


def _banana_potential(q):
    return 0.5 * q[0] ** 2 / 4 + 0.5 * (q[1] - 0.3 * q[0] ** 2) ** 2


def _banana_grad(q):
    r = q[1] - 0.3 * q[0] ** 2
    return np.array([q[0] / 4 - 0.6 * q[0] * r, r])


def _hmc_args(rng):
    return rng.standard_normal(2), rng.standard_normal(2), 0.15


@program(_hmc_args, wrt=(0, 2))
def hmc_leapfrog_energy_error(q, p, step_size, n_steps=12):
    """The energy error of one HMC trajectory (Neal 2011, Figure 2) on a banana density with a
    hand-written gradient: half step, full steps, half step; what step-size adaptation tunes."""
    H0 = _banana_potential(q) + 0.5 * p @ p
    p = p - step_size * _banana_grad(q) / 2
    for i in range(n_steps):
        q = q + step_size * p
        if i != n_steps - 1:
            p = p - step_size * _banana_grad(q)
    p = p - step_size * _banana_grad(q) / 2
    H1 = _banana_potential(q) + 0.5 * p @ p
    return (H1 - H0) ** 2


def _vi_args(rng):
    n, d, S = 30, 3, 16
    X = rng.standard_normal((n, d))
    y = (X @ np.array([1.0, -2.0, 0.5]) + rng.standard_normal(n) > 0).astype(float)
    return np.zeros(d), np.full(d, -1.0), X, y, rng.standard_normal((S, d))


@program(_vi_args, wrt=(0, 1))
def bayesian_logreg_reparam_elbo(mu, log_sigma, X, y, eps, prior_scale=2.0):
    """Negative ELBO of mean-field Gaussian VI for Bayesian logistic regression by the
    reparameterisation trick w = mu + sigma * eps, with the Gaussian entropy in closed form."""
    sigma = np.exp(log_sigma)
    w = mu + sigma * eps                                   # (S, d)
    logits = X @ w.T                                       # (n, S)
    loglik = np.sum(y[:, None] * logits - np.logaddexp(0, logits), axis=0)
    log_prior = np.sum(scipy.stats.norm.logpdf(w, 0, prior_scale), axis=1)
    entropy = np.sum(log_sigma) + 0.5 * len(mu) * (1 + np.log(2 * np.pi))
    return -(np.mean(loglik + log_prior) + entropy)


# ---- image processing --------------------------------------------------------------------------
def gaussian_kernel(sigma, radius):
    x = np.arange(-radius, radius + 1)
    k = np.exp(-x[:, None] ** 2 / (2 * sigma ** 2) - x[None, :] ** 2 / (2 * sigma ** 2))
    return k / k.sum()


def _blur_args(rng):
    return rng.random((8, 8)), 1.2, rng.random((8, 8))


@program(_blur_args, wrt=(0, 1))
def gaussian_blur_loops(img, sigma, target, radius=2):
    """A Gaussian blur by explicit loops over the kernel's offsets on an edge-padded image (as
    image-processing courses write convolution), compared with a target."""
    k = gaussian_kernel(sigma, radius)
    padded = np.pad(img, radius, mode="edge")
    h, w = img.shape
    out = np.zeros_like(img)
    for dy in range(2 * radius + 1):
        for dx in range(2 * radius + 1):
            out += k[dy, dx] * padded[dy:dy + h, dx:dx + w]
    return np.mean((out - target) ** 2)


SOBEL_X = np.array([[-1, 0, 1], [-2, 0, 2], [-1, 0, 1]], dtype=float)


def _sobel_args(rng):
    return (rng.random((9, 9)),)


@program(_sobel_args)
def sobel_edge_energy(img, eps=1e-3):
    """Sobel gradients by a 3x3 correlation written with nested loops over output pixels, the
    gradient magnitude's mean (a total-variation-like edge energy)."""
    sobel_y = SOBEL_X.T
    H, W = img.shape
    gx = np.zeros((H - 2, W - 2))
    gy = np.zeros((H - 2, W - 2))
    for i in range(H - 2):
        for j in range(W - 2):
            patch = img[i:i + 3, j:j + 3]
            gx[i, j] = np.sum(patch * SOBEL_X)
            gy[i, j] = np.sum(patch * sobel_y)
    return np.mean(np.sqrt(gx ** 2 + gy ** 2 + eps))


def bilinear_sample(img, xs, ys):
    """Bilinear interpolation at fractional pixel coordinates (spatial-transformer style)."""
    x0 = np.floor(xs).astype(int)
    y0 = np.floor(ys).astype(int)
    x1 = np.clip(x0 + 1, 0, img.shape[1] - 1)
    y1 = np.clip(y0 + 1, 0, img.shape[0] - 1)
    x0 = np.clip(x0, 0, img.shape[1] - 1)
    y0 = np.clip(y0, 0, img.shape[0] - 1)
    wa = (x1 - xs) * (y1 - ys)
    wb = (x1 - xs) * (ys - y0)
    wc = (xs - x0) * (y1 - ys)
    wd = (xs - x0) * (ys - y0)
    return wa * img[y0, x0] + wb * img[y1, x0] + wc * img[y0, x1] + wd * img[y1, x1]


def _bilinear_args(rng):
    img = rng.random((6, 7))
    return img, np.array([0.1, 0.05]), rng.uniform(1, 4.5, 10), rng.uniform(1, 3.5, 10)


@program(_bilinear_args, wrt=(0, 1))
def bilinear_shift_registration(img, shift, xs, ys):
    """Image registration by a sub-pixel shift: the image sampled bilinearly at shifted
    coordinates compared with the unshifted samples."""
    moved = bilinear_sample(img, xs + shift[0], ys + shift[1])
    ref = bilinear_sample(img, xs + 0.3, ys - 0.2)
    return np.sum((moved - ref) ** 2)


# ---- more: graph attention, image gradients -------------------------------------------------
def _gat_args(rng):
    n, d, h = 6, 3, 4
    A = (rng.random((n, n)) < 0.4).astype(float)
    A = np.maximum(A, A.T)
    np.fill_diagonal(A, 1.0)
    return ({"W": 0.5 * rng.standard_normal((d, h)), "a": 0.5 * rng.standard_normal(2 * h)},
            A, rng.standard_normal((n, d)), rng.standard_normal((n, h)))


@program(_gat_args)
def gat_masked_softmax(params, A, X, target):
    """A graph attention layer (Velickovic et al.): LeakyReLU scores for every pair, non-edges
    set to -inf before a row softmax, as the reference implementations mask them."""
    H = X @ params["W"]
    h = H.shape[1]
    e = (H @ params["a"][:h])[:, None] + (H @ params["a"][h:])[None, :]
    e = np.where(e > 0, e, 0.2 * e)
    e = np.where(A > 0, e, -np.inf)
    e = e - e.max(axis=1, keepdims=True)
    att = np.exp(e) / np.exp(e).sum(axis=1, keepdims=True)
    out = np.tanh(att @ H)
    return np.mean((out - target) ** 2)


def _tv_args(rng):
    clean = np.outer(np.linspace(0, 1, 8), np.ones(9))
    return clean + 0.1 * rng.standard_normal((8, 9)), clean


@program(_tv_args)
def tv_denoise_np_gradient(u, noisy, lam=0.1, eps=1e-6):
    """ROF-style denoising energy: fidelity plus a smoothed total variation, the image's
    gradients taken with np.gradient (central differences, one-sided at the edges)."""
    gy, gx = np.gradient(u)
    return 0.5 * np.sum((u - noisy) ** 2) + lam * np.sum(np.sqrt(gx ** 2 + gy ** 2 + eps))


def _unsharp_args(rng):
    return rng.random((9, 8)), 0.7, rng.random((9, 8))


@program(_unsharp_args, wrt=(0, 1))
def unsharp_mask_convolve2d(img, amount, target):
    """Unsharp masking: a binomial blur by scipy.signal.convolve2d with symmetric boundaries,
    the image plus `amount` times its high-pass part, compared with a sharp target."""
    kernel = np.outer([1, 4, 6, 4, 1], [1, 4, 6, 4, 1]) / 256.0
    blurred = scipy.signal.convolve2d(img, kernel, mode="same", boundary="symm")
    sharpened = img + amount * (img - blurred)
    return np.mean((sharpened - target) ** 2)


def _crn_args(rng):
    X = rng.standard_normal((25, 3))
    return np.zeros(3), np.full(3, -1.0), X, X @ np.array([0.5, -1.0, 2.0]) + rng.standard_normal(25)


@program(_crn_args, wrt=(0, 1))
def vi_common_random_numbers(mu, log_sigma, X, y, noise=1.0, n_samples=20):
    """Mean-field VI for Bayesian linear regression with common random numbers: the noise is
    drawn from a generator seeded inside the loss, so every evaluation sees the same draws."""
    rng = np.random.default_rng(1234)
    eps = rng.standard_normal((n_samples, len(mu)))
    w = mu + np.exp(log_sigma) * eps
    resid = y[None, :] - w @ X.T
    loglik = -0.5 * np.sum(resid ** 2, axis=1) / noise ** 2
    log_prior = -0.5 * np.sum(w ** 2, axis=1)
    return -(np.mean(loglik + log_prior) + np.sum(log_sigma))
