"""Plain numpy functions of float64 arrays (the composite corpus of the transform tests).
Each entry: (function, argument factory rng -> list of arrays); output 0 is a scalar."""
from __future__ import annotations

import numpy as np


def elementwise(x):
    return np.sum(np.exp(-x ** 2) * np.sin(3 * x) + np.log1p(x ** 2))


def broadcasting(x, w):
    return np.sum(np.tanh(x[:, None] * w + 1.0))


def mlp(w, x):
    h = np.tanh(x @ w)
    return np.mean(h ** 2)


def reductions(x):
    return np.max(x, axis=0).sum() + np.min(x) * 0.5 + np.prod(x[0]) - np.mean(x, axis=1).sum()


def shapes(x):
    y = x.reshape(3, 2).T
    z = np.concatenate([y, y * 2.0], axis=1)
    return np.sum(z ** 3) + np.sum(np.transpose(x))


def indexing(x):
    return np.sum(x[1:-1] * x[:-2]) + x[0] * x[-1] + np.sum(x[np.array([0, 2, 2])])


def select(x, y):
    return np.sum(np.where(x > 0, x * y, -y) + np.maximum(x, y) - np.minimum(x, 0.1) +
                  np.abs(x) + np.clip(y, -0.5, 0.5))


def softmax_ce(x):
    m = np.max(x)
    e = np.exp(x - m)
    return -np.log(e[1] / np.sum(e))


def powers(x, y):
    return np.sum(np.power(np.abs(x) + 1.0, y) + np.sqrt(np.abs(y) + 1.0) / (x ** 2 + 1.0))


CASES = {
    "elementwise": (elementwise, lambda r: [r.normal(size=5)]),
    "broadcasting": (broadcasting, lambda r: [r.normal(size=3), r.normal(size=(3, 4))]),
    "mlp": (mlp, lambda r: [r.normal(size=(4, 3)), r.normal(size=(5, 4))]),
    "reductions": (reductions, lambda r: [r.normal(size=(3, 4))]),
    "shapes": (shapes, lambda r: [r.normal(size=(2, 3))]),
    "indexing": (indexing, lambda r: [r.normal(size=6)]),
    "select": (select, lambda r: [r.normal(size=6), r.normal(size=6)]),
    "softmax_ce": (softmax_ce, lambda r: [r.normal(size=4)]),
    "powers": (powers, lambda r: [r.normal(size=4), r.normal(size=4)]),
}
