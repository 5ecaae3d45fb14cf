"""Corpus programs from recommender systems, embeddings, convolutional nets, survival analysis
and robust / ranking statistics (see tests/corpus/programs.py), written as tutorials and
papers write them: gathers by index arrays, normalisation by hand, convolution by
sliding windows and by loops, pooling by reshape, losses with temperatures and masks."""
from __future__ import annotations

import math

import numpy as np
import scipy.special

from tests.corpus.registry import program


# ---- recommenders and embeddings ---------------------------------------------------------------
def _mf_args(rng):
    n_users, n_items, k, n = 7, 9, 3, 40
    users, items = rng.integers(0, n_users, n), rng.integers(0, n_items, n)
    return ((0.1 * rng.standard_normal((n_users, k)), 0.1 * rng.standard_normal((n_items, k)),
             np.zeros(n_users), np.zeros(n_items)),
            users, items, rng.integers(1, 6, n).astype(float))


@program(_mf_args)
def matrix_factorization_biases(params, users, items, ratings, reg=0.05):
    """Collaborative filtering (Koren's SVD++-less model): user and item factors and biases
    gathered by the rating's index arrays, a global mean, L2 on the factors."""
    P, Q, bu, bi = params
    mu = ratings.mean()
    pred = mu + bu[users] + bi[items] + np.sum(P[users] * Q[items], axis=1)
    err = ratings - pred
    return np.mean(err ** 2) + reg * (np.sum(P ** 2) + np.sum(Q ** 2) + np.sum(bu ** 2))


def _sgns_args(rng):
    V, d, n, k = 12, 4, 16, 3
    return ((0.3 * rng.standard_normal((V, d)), 0.3 * rng.standard_normal((V, d))),
            rng.integers(0, V, n), rng.integers(0, V, n), rng.integers(0, V, (n, k)))


def log_sigmoid(x):
    return -np.logaddexp(0, -x)


@program(_sgns_args)
def word2vec_negative_sampling(embeddings, centers, contexts, negatives):
    """Skip-gram with negative sampling (Mikolov et al. 2013): a centre word's input vector
    against its context's output vector and k sampled negatives', by einsum."""
    W_in, W_out = embeddings
    v = W_in[centers]                      # (n, d)
    u_pos = W_out[contexts]                # (n, d)
    u_neg = W_out[negatives]               # (n, k, d)
    pos = log_sigmoid(np.sum(v * u_pos, axis=1))
    neg = np.sum(log_sigmoid(-np.einsum("nkd,nd->nk", u_neg, v)), axis=1)
    return -np.mean(pos + neg)


def _bt_args(rng):
    n_players, n_games = 6, 30
    a = rng.integers(0, n_players, n_games)
    b = (a + rng.integers(1, n_players, n_games)) % n_players
    return np.zeros(n_players), a, b, rng.random(n_games) < 0.6


@program(_bt_args)
def bradley_terry_ratings(ratings, player_a, player_b, a_won, prior=0.1):
    """Bradley-Terry ratings: the log-likelihood of the observed wins with Elo's logistic
    curve on the rating difference (base 10, scale 400 / 4), and a Gaussian prior."""
    diff = (ratings[player_a] - ratings[player_b]) * math.log(10) / 4
    p_a = 1 / (1 + np.exp(-diff))
    ll = np.where(a_won, np.log(p_a), np.log(1 - p_a))
    return -np.sum(ll) + prior * np.sum(ratings ** 2)


# ---- networks by hand --------------------------------------------------------------------------
def _norm_args(rng):
    d_in, h = 5, 6
    params = {"W1": 0.5 * rng.standard_normal((d_in, h)), "gamma_bn": np.ones(h),
              "beta_bn": np.zeros(h), "gamma_ln": np.ones(h), "beta_ln": np.zeros(h),
              "w2": 0.5 * rng.standard_normal(h)}
    return params, rng.standard_normal((16, d_in)), rng.standard_normal(16)


def batch_norm(x, gamma, beta, eps=1e-5):
    mu = x.mean(axis=0)
    var = x.var(axis=0)
    return gamma * (x - mu) / np.sqrt(var + eps) + beta


def layer_norm(x, gamma, beta, eps=1e-5):
    mu = x.mean(axis=-1, keepdims=True)
    var = ((x - mu) ** 2).mean(axis=-1, keepdims=True)
    return gamma * (x - mu) / np.sqrt(var + eps) + beta


@program(_norm_args)
def batchnorm_layernorm_mlp(params, X, y):
    """A two-layer MLP with batch norm and layer norm written out by hand (the CS231n
    assignment's forward pass), tanh between them."""
    h = X @ params["W1"]
    h = batch_norm(h, params["gamma_bn"], params["beta_bn"])
    h = np.tanh(h)
    h = layer_norm(h, params["gamma_ln"], params["beta_ln"])
    return np.mean((h @ params["w2"] - y) ** 2)


def _conv1d_args(rng):
    return 0.3 * rng.standard_normal(5), rng.standard_normal(40), rng.standard_normal(36)


@program(_conv1d_args)
def conv1d_sliding_window(kernel, signal, target):
    """A 1-D 'valid' convolution by np.lib.stride_tricks.sliding_window_view and a matrix-vector
    product with the flipped kernel, fitted to a target signal."""
    windows = np.lib.stride_tricks.sliding_window_view(signal, len(kernel))
    out = windows @ kernel[::-1]
    return np.mean((out - target) ** 2)


def _conv2d_args(rng):
    return 0.3 * rng.standard_normal((3, 3)), rng.standard_normal((10, 10)), rng.standard_normal(16)


@program(_conv2d_args)
def conv2d_loops_maxpool(kernel, image, w_out):
    """A 2-D cross-correlation by explicit loops over the kernel's offsets (shifted slices of
    the image), ReLU, 2x2 max pooling by reshape, then a linear read-out."""
    kh, kw = kernel.shape
    H, W = image.shape
    out = np.zeros((H - kh + 1, W - kw + 1))
    for i in range(kh):
        for j in range(kw):
            out += kernel[i, j] * image[i:i + H - kh + 1, j:j + W - kw + 1]
    act = np.maximum(out, 0)
    h, w = act.shape
    pooled = act.reshape(h // 2, 2, w // 2, 2).max(axis=(1, 3))
    return np.tanh(pooled.ravel() @ w_out)


def _avgpool_args(rng):
    return 0.3 * rng.standard_normal((2, 3)), rng.standard_normal((4, 12))


@program(_avgpool_args)
def conv1d_channels_avgpool(weights, x):
    """A multi-channel 1-D convolution as a sum over taps with np.einsum on shifted slices,
    average pooling by reshape, global average and a squared-norm loss."""
    c_out, k = weights.shape
    L = x.shape[1] - k + 1
    feats = sum(np.einsum("o,cl->ol", weights[:, t], x[:, t:t + L]) for t in range(k))
    pooled = feats.reshape(c_out, L // 2, 2).mean(axis=-1)
    return np.sum(np.tanh(pooled) ** 2)


# ---- classification losses ---------------------------------------------------------------------
def _ls_args(rng):
    X = rng.standard_normal((12, 5))
    return (0.2 * rng.standard_normal((5, 4)), X, rng.integers(0, 4, 12),
            (rng.random((12, 5)) > 0.2) / 0.8)


@program(_ls_args)
def dropout_label_smoothing(W, X, labels, keep_mask, eps=0.1):
    """Inverted dropout with a given mask on the inputs, then cross-entropy against
    label-smoothed one-hot targets built with np.eye."""
    n_classes = W.shape[1]
    logits = (X * keep_mask) @ W
    logp = logits - scipy.special.logsumexp(logits, axis=1, keepdims=True)
    targets = np.eye(n_classes)[labels] * (1 - eps) + eps / n_classes
    return -np.sum(targets * logp) / len(labels)


def _kd_args(rng):
    X = rng.standard_normal((10, 6))
    return (0.2 * rng.standard_normal((6, 3)), X, 2 * rng.standard_normal((10, 3)),
            rng.integers(0, 3, 10))


def softmax(z, T=1.0):
    z = z / T
    z = z - z.max(axis=-1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=-1, keepdims=True)


@program(_kd_args)
def knowledge_distillation(W, X, teacher_logits, labels, T=3.0, alpha=0.7):
    """Hinton et al.'s distillation loss: KL(teacher || student) at temperature T scaled by
    T**2, mixed with the hard-label cross-entropy."""
    logits = X @ W
    p_t = softmax(teacher_logits, T)
    p_s = softmax(logits, T)
    kl = np.sum(p_t * (np.log(p_t) - np.log(p_s)), axis=1).mean()
    hard = -np.mean(np.log(softmax(logits)[np.arange(len(labels)), labels]))
    return alpha * T ** 2 * kl + (1 - alpha) * hard


def _ordinal_args(rng):
    X = rng.standard_normal((25, 3))
    return np.array([0.3, -0.2, 0.5, -1.0, 0.0, 0.0]), X, rng.integers(0, 4, 25)


@program(_ordinal_args)
def ordinal_cumulative_logit(theta, X, y, n_classes=4):
    """Proportional-odds (cumulative logit) regression: increasing cut-points built from a
    first value and exp'd gaps by np.cumsum, class probabilities as differences of the
    cumulative sigmoids padded with 0 and 1."""
    beta, raw = theta[:3], theta[3:]
    cuts = np.cumsum(np.concatenate([raw[:1], np.exp(raw[1:])]))
    eta = X @ beta
    cum = scipy.special.expit(cuts[None, :] - eta[:, None])
    cum = np.hstack([np.zeros((len(y), 1)), cum, np.ones((len(y), 1))])
    probs = np.diff(cum, axis=1)
    assert probs.shape[1] == n_classes, f"expected {n_classes} classes, got {probs.shape[1]}"
    return -np.sum(np.log(probs[np.arange(len(y)), y]))


def _elo_args(rng):
    n_players, n_games = 5, 40
    a = rng.integers(0, n_players, n_games)
    b = (a + rng.integers(1, n_players, n_games)) % n_players
    initial = np.array([1500.0, 1520.0, 1480.0, 1500.0, 1510.0])
    return initial, 24.0, a, b, rng.random(n_games) < 0.55


@program(_elo_args, wrt=(0, 1), fd_eps=1e-4)
def elo_sequential_updates(initial, k_factor, winners, losers, outcome):
    """Elo ratings updated game by game (`for a, b, won in zip(...)`), each game's expected
    score logged; the log loss of the predictions, as rating-system tutorials tune K."""
    ratings = initial.copy()
    log_loss = 0.0
    for a, b, won in zip(winners, losers, outcome):
        expected = 1 / (1 + 10 ** ((ratings[b] - ratings[a]) / 400))
        score = 1.0 if won else 0.0
        log_loss -= score * np.log(expected) + (1 - score) * np.log(1 - expected)
        ratings[a] += k_factor * (score - expected)
        ratings[b] -= k_factor * (score - expected)
    return log_loss / len(winners)
