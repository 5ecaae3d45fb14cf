"""Functions run with Fake traced arguments in test_convert_staging.py (line numbers matter)."""

import numpy as np


def branch(x):
    if x > 0:
        y = x * 2
    else:
        y = -x
    return y


def range_loop(x, n):
    s = x * 0
    for i in range(n):
        s = s + x * i
    return s


def while_halving(x):
    steps = 0
    while x > 1:
        x = x / 2
        steps = steps + 1
    return steps


def early_return(x):
    if x > 0:
        return x
    return -x


def break_on_traced(x):
    s = 0
    for i in range(4):
        if x[i] > 2:
            break
        s = s + x[i]
    return s


def one_branch_only(x):
    if x > 0:
        z = 1
    return z


def element_update(x):
    y = np.zeros(3)
    for i in range(3):
        y[i] = x * i
    return y


def logic(x):
    return (x > 0) and (x < 5), not (x > 0), 0 < x < 5


def unsupported_try(x):
    try:
        y = x + 1
    except ValueError:
        y = 0
    return y


def unsupported_with(x, cm):
    with cm:
        y = x + 1
    return y


def unsupported_del(x):
    y = x + 1
    del x
    return y


G = None


def unsupported_global(x):
    global G
    G = x * 2
    return x


def nonlocal_in_helper(x):
    out = None

    def inner():
        nonlocal out
        out = x * 2
    inner()
    return out


def unsupported_yield(x):
    yield x
