"""IR-building test functions with control flow (transform/control.py helpers), shared by
the AD tests (tests/transform) and the codegen tests (tests/codegen)."""
import numpy as np

from llgrad.transform import control

def recurrence(x):
    body = lambda i, s: 0.9 * s + np.sin(x[i]) * x[i - 1]  # noqa: E731
    return control.for_loop(1, x.shape[0], 1, body, np.float64(0.0))[0]


def nested(x, w):
    def outer(i, s):
        def inner(j, t):
            return t * 0.5 + w[j] * np.sin(x[i] + t)
        t, = control.for_loop(0, w.shape[0], 1, inner, s)
        return t + x[i] ** 2
    return control.for_loop(0, x.shape[0], 1, outer, np.float64(0.1))[0]


def cond_in_loop(x):
    def body(i, s):
        return control.cond(x[i] > 0, lambda a: a + x[i] ** 2, lambda a: a * x[i], s)[0]
    return control.for_loop(0, x.shape[0], 1, body, np.float64(1.0))[0]


def rnn(w, x):
    def body(t, h):
        return np.tanh(w @ h + x[t])
    h, = control.for_loop(0, x.shape[0], 1, body, np.zeros(3))
    return np.sum(h ** 2)


def loop_in_cond(x):
    def yes(a):
        return control.for_loop(0, 3, 1, lambda i, s: s * a + x[i], a)[0]
    return control.cond(np.sum(x) > 0, yes, lambda a: np.exp(a), x[0])[0]
