"""Three small functions whose text IR is pinned in tests/golden/e2e_*.ir (test_inspect.py).
Kept in their own module so the source lines in the IR's comments stay put."""
import numpy as np


def softplus_sum(x):
    return np.sum(np.log1p(np.exp(x)))


def linear_mse(w, m, y):
    r = m @ w - y
    return np.mean(r ** 2)


def gather_clip(x, idx, a):
    z = np.clip(x[idx] * a, -1.0, 1.0)
    return np.sum(z[1:] * z[:-1])
