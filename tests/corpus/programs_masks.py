"""Corpus programs built on boolean masks computed from the data (see tests/corpus/programs.py):
losses over the entries a condition selects, missing values skipped with ~np.isnan, rows
filtered before a product, and writes through masks, as tutorials write them
(runtime/padded_masks.py, Note [Boolean masks of data-dependent length])."""
from __future__ import annotations

import numpy as np

from tests.corpus.programs import program


def _svm_args(rng):
    X = rng.standard_normal((30, 5))
    y = np.where(X[:, 0] + 0.5 * rng.standard_normal(30) > 0, 1.0, -1.0)
    return 0.3 * rng.standard_normal(5), X, y


@program(_svm_args)
def linear_svm_hinge(w, X, y, C=1.0):
    """A soft-margin linear SVM's objective: only the margins that are violated count."""
    margins = 1 - y * (X @ w)
    return 0.5 * np.dot(w, w) + C * np.sum(margins[margins > 0]) / len(y)


def _missing_args(rng):
    X = rng.standard_normal((25, 3))
    y = X @ np.array([1.0, -2.0, 0.5]) + 0.1 * rng.standard_normal(25)
    y[rng.choice(25, 6, replace=False)] = np.nan  # unobserved targets
    return rng.standard_normal(3), X, y


@program(_missing_args)
def regression_with_missing_targets(w, X, y):
    """Mean squared error over the observed targets only."""
    observed = ~np.isnan(y)
    pred = X @ w
    return np.mean((pred[observed] - y[observed]) ** 2)


def _rows_args(rng):
    X = rng.standard_normal((20, 4))
    X[[3, 11], 2] = np.nan  # two incomplete rows
    return rng.standard_normal(4), X, rng.standard_normal(20)


@program(_rows_args)
def complete_case_least_squares(w, X, y):
    """Least squares on the complete rows: X[rows_ok] @ w (drops the rows with a NaN)."""
    rows_ok = ~np.isnan(X).any(axis=1)
    r = X[rows_ok] @ w - y[rows_ok]
    return r @ r / 2 + 0.01 * np.linalg.norm(w) ** 2


def _huber_args(rng):
    X = rng.standard_normal((40, 3))
    y = X @ np.array([0.5, -1.0, 2.0]) + rng.standard_t(2, 40)
    return np.zeros(3) + 0.1, X, y


@program(_huber_args)
def huber_by_masks(w, X, y, delta=1.0):
    """The Huber loss written with a mask for each regime instead of np.where."""
    r = y - X @ w
    small = np.abs(r) <= delta
    quadratic = 0.5 * r[small] ** 2
    linear = delta * (np.abs(r[~small]) - 0.5 * delta)
    return (quadratic.sum() + linear.sum()) / len(y)


def _triplet_args(rng):
    return rng.standard_normal(6), rng.standard_normal((12, 6)), rng.standard_normal((12, 6))


@program(_triplet_args)
def triplet_loss_hard_examples(anchor, pos, neg, margin=1.0):
    """A triplet loss averaged over the triplets that still violate the margin (the
    'batch-hard' trick of FaceNet): np.mean of the positive losses."""
    d_pos = np.sum((pos - anchor) ** 2, axis=1)
    d_neg = np.sum((neg - anchor) ** 2, axis=1)
    losses = d_pos - d_neg + margin
    active = losses > 0
    return np.mean(losses[active]) + 0.1 * np.max(d_pos[active])


def _clip_args(rng):
    return rng.standard_normal((6, 5)), rng.standard_normal(5)


@program(_clip_args)
def masked_updates_of_activations(H, scale):
    """In-place updates people write on activations: ReLU as H[H < 0] = 0, a boost of the
    large ones, sign flips of whole rows, then a per-column standardisation of the kept rows."""
    H = H.copy()
    H[H < 0] = 0
    H[H > 1] *= 2
    flip = H[:, 0] < 0.2
    H[flip] = -H[flip] * scale
    kept = H[np.abs(H[:, 1]) < 2.5]
    z = (kept - kept.mean(axis=0)) / (kept.std(axis=0) + 1.0)
    return np.sum(z ** 2 * scale) + np.sum(H ** 2)


def _attention_args(rng):
    return rng.standard_normal((5, 5)), np.tril(np.ones((5, 5))) > 0


@program(_attention_args)
def causal_softmax_by_mask(scores, allowed):
    """Causal attention weights: the scores of future positions set to -inf through a mask,
    then a row softmax; their entropy."""
    s = scores.copy()
    s[~allowed] = -np.inf
    s = s - s.max(axis=1, keepdims=True)
    p = np.exp(s) / np.exp(s).sum(axis=1, keepdims=True)
    return -np.sum(p[allowed] * np.log(p[allowed]))
