"""Functions whose converted source is pinned in tests/golden/convert_<name>.py."""

import numpy as np


def piecewise(x):
    if x > 0:
        y = np.sin(x)
    elif x > -1:
        y = x * x
    else:
        y = 0.0
    return y


def recurrence(x, n):
    s = 0.0
    for i in range(1, n):
        if x[i] < 0:
            continue
        s = 0.9 * s + np.sin(x[i]) * x[i - 1]
    return s


def search(x, tol):
    i = 0
    while i < len(x) and not abs(x[i]) < tol:
        if x[i] > 10:
            return -1
        x[i] = x[i] / 2
        i += 1
    return i
