"""Corpus programs from machine learning and statistics (see tests/corpus/programs.py): losses
the way course notes and papers write them, likelihoods with scipy.special, and sequence
models filtered in log space."""
from __future__ import annotations

import math
from collections import namedtuple
from dataclasses import dataclass

import numpy as np
import scipy.special
from scipy.special import expit, gammaln, logsumexp, xlogy

from tests.corpus.registry import program


# ---- losses ------------------------------------------------------------------------------------
def _svm_args(rng):
    return 0.01 * rng.standard_normal((6, 4)), rng.standard_normal((20, 6)), rng.integers(0, 4, 20)


@program(_svm_args)
def multiclass_svm_loss(W, X, y, reg=0.1):
    """cs231n's vectorised multiclass SVM loss: margins zeroed at the correct class by fancy
    assignment, integer labels, a keyword default for the regularisation."""
    num_train = X.shape[0]
    scores = X.dot(W)
    correct = scores[np.arange(num_train), y]
    margins = np.maximum(0, scores - correct[:, np.newaxis] + 1.0)
    margins[np.arange(num_train), y] = 0
    loss = np.sum(margins) / num_train
    return loss + reg * np.sum(W * W)


def _focal_args(rng):
    return rng.standard_normal(30), (rng.random(30) > 0.7).astype(np.int64)


@program(_focal_args)
def binary_focal_loss(logits, targets, alpha=0.25, gamma=2.0):
    """Focal loss (Lin et al. 2017) with scipy's expit, integer targets compared with 1, and
    np.clip against log(0)."""
    p = expit(logits)
    p_t = np.where(targets == 1, p, 1 - p)
    alpha_t = np.where(targets == 1, alpha, 1 - alpha)
    p_t = np.clip(p_t, 1e-7, 1 - 1e-7)
    return np.mean(-alpha_t * (1 - p_t) ** gamma * np.log(p_t))


def _triplet_args(rng):
    anchors = [rng.standard_normal(5) for _ in range(6)]
    return (0.3 * rng.standard_normal((5, 3)), anchors, rng.standard_normal((6, 5)),
            rng.standard_normal((6, 5)))


def _embed(W, x):
    z = x @ W
    return z / np.linalg.norm(z)


@program(_triplet_args)
def triplet_margin_loss(W, anchors, positives, negatives, margin=0.5):
    """Triplet loss over a Python list of anchor arrays, embeddings by a helper function,
    pairs zipped in a list comprehension."""
    losses = [max(0.0, np.sum((_embed(W, a) - _embed(W, p)) ** 2)
                  - np.sum((_embed(W, a) - _embed(W, n)) ** 2) + margin)
              for a, p, n in zip(anchors, positives, negatives)]
    return sum(losses) / len(losses)


def _contrastive_args(rng):
    z1 = rng.standard_normal((8, 4))
    return z1, z1 + 0.3 * rng.standard_normal((8, 4))


@program(_contrastive_args, wrt=(0, 1))
def info_nce_loss(z1, z2, temperature=0.5):
    """SimCLR's NT-Xent: cosine similarities of 2N views, the diagonal masked out with a
    boolean eye, positives picked by fancy indexing, scipy's logsumexp."""
    z = np.concatenate([z1, z2], axis=0)
    z = z / np.linalg.norm(z, axis=1, keepdims=True)
    sim = z @ z.T / temperature
    n = z1.shape[0]
    sim = np.where(np.eye(2 * n, dtype=bool), -np.inf, sim)
    pos = np.concatenate([np.arange(n, 2 * n), np.arange(n)])
    return np.mean(logsumexp(sim, axis=1) - sim[np.arange(2 * n), pos])


def _vae_args(rng):
    D, H, Z = 6, 5, 2
    params = {"enc_W": 0.3 * rng.standard_normal((D, H)), "enc_b": np.zeros(H),
              "mu_W": 0.3 * rng.standard_normal((H, Z)),
              "logvar_W": 0.3 * rng.standard_normal((H, Z)),
              "dec_W": 0.3 * rng.standard_normal((Z, D)), "dec_b": np.zeros(D)}
    x = (rng.random((10, D)) > 0.5).astype(np.float64)
    return params, x, rng.standard_normal((10, Z))


@program(_vae_args)
def vae_negative_elbo(params, x, eps):
    """A Bernoulli VAE's negative ELBO with the reparameterisation trick on given noise: a dict
    of weights, softplus by np.logaddexp, the likelihood with scipy's xlogy."""
    h = np.tanh(x @ params["enc_W"] + params["enc_b"])
    mu, logvar = h @ params["mu_W"], h @ params["logvar_W"]
    z = mu + np.exp(0.5 * logvar) * eps
    probs = expit(z @ params["dec_W"] + params["dec_b"])
    log_lik = np.sum(xlogy(x, probs) + xlogy(1 - x, 1 - probs), axis=1)
    kl = -0.5 * np.sum(1 + logvar - mu ** 2 - np.exp(logvar), axis=1)
    return np.mean(kl - log_lik)


Layer = namedtuple("Layer", "W b")


class MLP:
    """A model object called like a function: a list of namedtuple layers, ReLU between."""

    def __init__(self, layers):
        self.layers = layers

    def __call__(self, x):
        for layer in self.layers[:-1]:
            x = np.maximum(x @ layer.W + layer.b, 0.0)
        last = self.layers[-1]
        return x @ last.W + last.b


def _mlp_class_args(rng):
    sizes = [4, 8, 8, 3]
    layers = [Layer(rng.standard_normal((m, n)) / np.sqrt(m), 0.1 * rng.standard_normal(n))
              for m, n in zip(sizes[:-1], sizes[1:])]
    return layers, rng.standard_normal((16, 4)), rng.integers(0, 3, 16)


@program(_mlp_class_args)
def mlp_class_cross_entropy(layers, X, labels):
    """Cross-entropy of an MLP object built inside the function from a list of namedtuples,
    with scipy.special.log_softmax."""
    logits = MLP(layers)(X)
    logp = scipy.special.log_softmax(logits, axis=1)
    return -np.take_along_axis(logp, labels[:, None], axis=1).mean()


# ---- likelihoods -------------------------------------------------------------------------------
@dataclass
class NegBinParams:
    log_mu: np.ndarray
    log_alpha: float


def _negbin_args(rng):
    return NegBinParams(np.log(rng.uniform(1, 5, 12)), -0.5), rng.poisson(3.0, 12)


@program(_negbin_args)
def negative_binomial_nll(params, counts):
    """NB2 negative log-likelihood (Cameron & Trivedi) with gammaln and integer counts; the
    parameters are a dataclass with an array field and a float field."""
    mu = np.exp(params.log_mu)
    r = 1.0 / np.exp(params.log_alpha)
    ll = (gammaln(counts + r) - gammaln(r) - gammaln(counts + 1)
          + r * np.log(r / (r + mu)) + counts * np.log(mu / (r + mu)))
    return -np.sum(ll)


def _student_args(rng):
    X = np.column_stack([np.ones(25), rng.standard_normal(25)])
    y = X @ np.array([0.5, 2.0]) + rng.standard_t(3, 25)
    return np.array([0.0, 1.0, 0.0, 1.0]), X, y


@program(_student_args)
def student_t_regression_nll(theta, X, y):
    """Robust regression with Student-t errors: coefficients, log scale and log degrees of
    freedom unpacked from one vector, np.asarray on the inputs."""
    X, y = np.asarray(X, dtype=float), np.asarray(y, dtype=float)
    beta, log_sigma, log_nu = theta[:2], theta[2], theta[3]
    sigma, nu = np.exp(log_sigma), np.exp(log_nu)
    z = (y - X @ beta) / sigma
    ll = (gammaln((nu + 1) / 2) - gammaln(nu / 2) - 0.5 * np.log(nu * np.pi) - log_sigma
          - (nu + 1) / 2 * np.log1p(z ** 2 / nu))
    return -ll.sum()


def _mvn_args(rng):
    L = np.tril(rng.standard_normal((3, 3)), -1) + np.diag(np.exp(0.2 * rng.standard_normal(3)))
    return rng.standard_normal(3), L, rng.standard_normal((20, 3))


def mvn_logpdf(x, mean, cov):
    """log N(x; mean, cov) for rows of x, the textbook way: slogdet and inv."""
    d = mean.shape[0]
    sign, logdet = np.linalg.slogdet(cov)
    diff = x - mean
    maha = np.einsum("ni,ij,nj->n", diff, np.linalg.inv(cov), diff)
    return -0.5 * (d * np.log(2 * np.pi) + logdet + maha)


@program(_mvn_args, wrt=(0, 1))
def multivariate_normal_nll(mean, L, x):
    """A full-covariance Gaussian fitted by its Cholesky factor, with a helper written as
    tutorials write it (np.linalg.slogdet, np.linalg.inv, a three-operand einsum)."""
    assert L.shape == (mean.shape[0],) * 2, f"factor shape {L.shape} does not match {mean.shape}"
    return -np.sum(mvn_logpdf(x, mean, L @ L.T))


def _mixture_args(rng):
    x = np.concatenate([rng.normal(-2, 0.5, 15), rng.normal(1.5, 1.0, 25)])
    return np.array([0.0, 0.0]), np.array([-1.0, 1.0]), np.array([0.0, 0.0]), x


@program(_mixture_args, wrt=(0, 1, 2))
def gaussian_mixture_1d_nll(logit_w, means, log_sd, x):
    """A two-component 1-D mixture: weights by softmax, the component log densities broadcast
    as a (n, k) table, scipy's logsumexp with b= weights."""
    w = scipy.special.softmax(logit_w)
    sd = np.exp(log_sd)
    log_dens = -0.5 * ((x[:, None] - means) / sd) ** 2 - log_sd - 0.5 * np.log(2 * np.pi)
    return -logsumexp(log_dens, b=w, axis=1).sum()


def _hmm_args(rng):
    return (rng.standard_normal(3), rng.standard_normal((3, 3)), rng.standard_normal((3, 4)),
            rng.integers(0, 4, 15))


@program(_hmm_args, wrt=(0, 1, 2))
def hmm_forward_log_space(pi_logits, A_logits, B_logits, obs):
    """The HMM forward algorithm in log space (Rabiner, with logsumexp): row-normalised
    log parameters, a loop over an integer observation sequence."""
    log_pi = pi_logits - logsumexp(pi_logits)
    log_A = A_logits - logsumexp(A_logits, axis=1, keepdims=True)
    log_B = B_logits - logsumexp(B_logits, axis=1, keepdims=True)
    log_alpha = log_pi + log_B[:, obs[0]]
    for t in range(1, len(obs)):
        log_alpha = logsumexp(log_alpha[:, None] + log_A, axis=0) + log_B[:, obs[t]]
    return -logsumexp(log_alpha)


def _arma_args(rng):
    e = rng.standard_normal(60)
    y = np.zeros(60)
    for t in range(1, 60):
        y[t] = 0.6 * y[t - 1] + e[t] + 0.3 * e[t - 1]
    return np.array([0.0, 0.5, 0.2, 0.0]), y


@program(_arma_args)
def arma11_conditional_nll(params, y):
    """ARMA(1,1) conditional Gaussian likelihood (Box-Jenkins CSS): the innovations are a
    Python list appended step by step, each reading the one before."""
    c, phi, theta, log_s2 = params
    errors = [0.0]
    for t in range(1, len(y)):
        errors.append(y[t] - c - phi * y[t - 1] - theta * errors[-1])
    e = np.array(errors[1:])
    n = len(e)
    return 0.5 * n * (np.log(2 * np.pi) + log_s2) + 0.5 * np.sum(e ** 2) / np.exp(log_s2)


# ---- Python styles -------------------------------------------------------------------------------
Params = namedtuple("Params", ["w", "b"])


def _gen_args(rng):
    X = rng.standard_normal((10, 3))
    return Params(rng.standard_normal(3), 0.1), X, rng.standard_normal(10)


@program(_gen_args)
def generator_sum_loss(params, X, y):
    """Squared error as Python's sum() of a generator over zip(X, y), the scale math.exp of a
    float field of a namedtuple."""
    scale = math.exp(params.b)
    return sum((scale * xi @ params.w - yi) ** 2 for xi, yi in zip(X, y)) / len(y)


def _gauss_ll(x, mu, log_sigma, **unused):
    return -0.5 * np.sum(((x - mu) / np.exp(log_sigma)) ** 2) - np.sum(log_sigma) * x.shape[0]


def _kw_args(rng):
    return {"mu": rng.standard_normal(3), "log_sigma": np.zeros(3)}, rng.standard_normal((12, 3))


@program(_kw_args)
def kwargs_unpacked_params(params, x):
    """A dict of parameters passed on as **params to a helper that takes **unused."""
    return -_gauss_ll(x, **params)


def _f32_args(rng):
    return rng.standard_normal((5, 4)).astype(np.float32), rng.integers(0, 4, 5)


@program(_f32_args, value_tol=(1e-5, 1e-6), fd_eps=1e-3, fd_tol=(2e-2, 1e-3))
def float32_logits_cross_entropy(logits, labels):
    """float32 logits all the way (finite differences in float32 too): the methods .max /
    .sum / .clip, a one-hot by np.eye(..., dtype=np.float32)[labels]."""
    z = logits - logits.max(axis=1, keepdims=True)
    p = np.exp(z) / np.exp(z).sum(axis=1, keepdims=True)
    onehot = np.eye(4, dtype=np.float32)[labels]
    return -(onehot * np.log(p.clip(1e-7, 1.0))).sum() / len(labels)


def _enum_args(rng):
    return rng.standard_normal(6),


@program(_enum_args)
def enumerate_with_continue(x):
    """enumerate with `continue` on odd positions and an if on each traced element."""
    total = 0.0
    for k, v in enumerate(x):
        if k % 2 == 1:
            continue
        if v > 0:
            total += v ** 2
        else:
            total -= 0.5 * v
    return total
