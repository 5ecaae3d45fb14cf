"""A script for tests/cli: `llgrad inspect` must import it without running its __main__ block."""
import numpy as np

import llgrad


def loss(w, x, scale, n):
    z = np.tanh(x @ w)
    return scale * np.sum(z ** 2) / n


@llgrad.differentiate(wrt="b")
def decorated(a, b):
    return np.sum(a * np.exp(b))


if __name__ == "__main__":
    raise SystemExit("the __main__ block of inspect_fixture.py ran")
