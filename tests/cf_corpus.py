"""The control-flow corpus of issue 5: functions with Python control flow on traced values.

Each `Case` holds a plain-numpy function, a maker of its arguments (from a seeded rng), the
arguments it is differentiated with respect to, and whether it also runs on llgrad's eager
tensors. The oracles (tests/e2e/test_control_flow.py): the compiled value equals the function
run as plain Python on numpy arrays; the gradient equals central finite differences in
float64 and, where `eager`, the eager runtime's `.backward()`.

Inputs are drawn so that no branch condition sits within finite-difference reach of its
switching point (the functions are smooth at the drawn points).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np


@dataclass
class Case:
    fn: Callable
    make_args: Callable[[np.random.Generator], tuple]
    wrt: Any = 0
    eager: bool = True  # also expressible on eager tensors (no numpy buffer updated in place)
    fd_tol: tuple = (1e-6, 1e-8)
    kinds: tuple = ()
    unrolls: bool = False  # the trace unrolls a loop (UnrollWarning expected)
    marks: list = field(default_factory=list)

    @property
    def name(self) -> str:
        return self.fn.__name__

    def args(self, seed: int = 0) -> tuple:
        return self.make_args(np.random.default_rng(seed))


CASES: dict[str, Case] = {}


def case(make_args, wrt=0, eager=True, fd_tol=(1e-6, 1e-8), kinds=(), unrolls=False):
    def deco(fn):
        assert fn.__name__ not in CASES, fn.__name__
        CASES[fn.__name__] = Case(fn, make_args, wrt, eager, fd_tol, tuple(kinds), unrolls)
        return fn
    return deco


def vec(n, lo=-1.0, hi=1.0):
    return lambda r: (r.uniform(lo, hi, n),)


def mat(m, n, lo=-1.0, hi=1.0):
    return lambda r: (r.uniform(lo, hi, (m, n)),)


def away(r, n, cut, margin=0.05, lo=-1.0, hi=1.0):
    """n uniform values in (lo, hi), none within `margin` of `cut`."""
    x = r.uniform(lo, hi, n)
    near = np.abs(x - cut) < margin
    x[near] = cut + np.where(x[near] >= cut, margin, -margin) * 2
    return x


# ---- helpers (the user's own functions with control flow; converted on call) ------------------
def h_clip(v, lo, hi):
    if v < lo:
        return lo
    if v > hi:
        return hi
    return v


def h_smooth_abs(v):
    if v > 0:
        r = v
    else:
        r = -v
    return r


def h_poly(coefs, t):
    acc = 0.0
    for k in range(coefs.shape[0]):
        acc = acc * t + coefs[k]
    return acc


def h_sigmoid(z):
    return 1.0 / (1.0 + np.exp(-z))


def h_lorenz(u, sigma, rho, beta):
    return np.stack([sigma * (u[1] - u[0]),
                     u[0] * (rho - u[2]) - u[1],
                     u[0] * u[1] - beta * u[2]])


# ---- if / elif / else on traced values ---------------------------------------------------------
@case(vec(5), kinds=("if",))
def if_else(x):
    s = np.sum(x)
    if s > 0:
        y = np.sin(s) * x
    else:
        y = np.cos(s) * x * 2.0
    return np.sum(y ** 2)


@case(vec(4), kinds=("if",))
def if_no_else(x):
    y = x * 1.5
    if np.max(x) > 0.2:
        y = y * np.exp(x)
    return np.sum(y)


@case(lambda r: (away(r, 1, 0.0, lo=-3, hi=3)[0] * np.ones(3) + r.uniform(0, .1, 3),),
      kinds=("elif", "piecewise"))
def elif_chain(x):
    s = np.mean(x)
    if s < -1.5:
        r = s * 0.1
    elif s < 0.0:
        r = s ** 2
    elif s < 1.5:
        r = np.sin(s)
    else:
        r = np.log(s)
    return r * np.sum(x)


@case(lambda r: (away(r, 3, 0.0),), kinds=("if", "nested"))
def nested_if(x):
    a, b = x[0], x[1]
    if a > 0:
        if b > 0:
            out = a * b
        else:
            out = a - b
    else:
        if b > 0:
            out = np.exp(a) + b
        else:
            out = a * a * b
    return out * x[2]


@case(lambda r: (away(r, 2, 0.0), away(r, 2, 0.0)), wrt=(0, 1), kinds=("if",))
def if_two_args(x, y):
    if np.sum(x * y) > 0:
        z = x * y
    else:
        z = x + y
    return np.sum(z ** 3)


@case(lambda r: (away(r, 6, 0.0),), kinds=("if", "int/float merge"))
def if_python_scalar_merge(x):
    s = np.sum(x)
    if s > 0:
        k = 2
    else:
        k = 0.5
    return s * k


# ---- ternaries, and/or/not, chained comparisons -------------------------------------------------
@case(vec(4), kinds=("ternary",))
def ternary(x):
    s = np.sum(x)
    y = s * s if s > 0.1 else -s
    return y + np.sum(x * y)


@case(lambda r: (away(r, 1, 0.5, lo=-2, hi=2) * np.ones(2),), kinds=("ternary", "nested"))
def ternary_nested(x):
    s = x[0]
    return s ** 3 if s > 0.5 else (np.sin(s) if s > -0.5 else s * 2.0)


@case(lambda r: (away(r, 2, 0.0),), kinds=("and",))
def and_cond(x):
    if x[0] > 0 and x[1] > 0:
        r = x[0] * x[1]
    else:
        r = x[0] + x[1]
    return r


@case(lambda r: (away(r, 2, 0.0),), kinds=("or",))
def or_cond(x):
    if x[0] > 0 or x[1] > 0:
        r = np.exp(x[0] + x[1])
    else:
        r = x[0] * x[1]
    return r


@case(lambda r: (away(r, 3, 0.0),), kinds=("not",))
def not_cond(x):
    if not x[0] > 0:
        r = x[1] * 3.0
    else:
        r = x[2] ** 2
    return r


@case(lambda r: (away(r, 3, 0.0),), kinds=("and", "or", "not"))
def and_or_not_mixed(x):
    a, b, c = x[0], x[1], x[2]
    if (a > 0 and not b > 0) or c > 0:
        r = a * b * c
    else:
        r = a + b + c
    return r


@case(lambda r: (away(r, 4, 0.0),), kinds=("and", "value"))
def and_or_as_values(x):
    m = (x[0] > 0) and (x[1] > 0)
    n = (x[2] > 0) or (x[3] > 0)
    if m:
        r = x[0] + x[1]
    else:
        r = x[2] * 2.0
    if n:
        r = r * x[3]
    return r


@case(lambda r: (np.array([-0.8, -0.2, 0.3, 0.9]) + r.uniform(0, 0.05, 4),),
      kinds=("chained compare",))
def chained_compare(x):
    total = 0.0
    for i in range(4):
        if -0.5 < x[i] < 0.5:
            total = total + x[i] ** 2
        else:
            total = total + np.abs(x[i])
    return total


@case(lambda r: (away(r, 5, 0.0),), kinds=("chained compare", "ternary"))
def chained_compare_ternary(x):
    s = np.sum(x)
    lo, hi = -0.2, 0.2
    return s * s if lo < s < hi else s * 0.5


# ---- for over range ----------------------------------------------------------------------------
@case(vec(6), kinds=("for", "static"))
def recurrence(x):
    s = 0.0
    for i in range(1, x.shape[0]):
        s = 0.9 * s + np.sin(x[i]) * x[i - 1]
    return s


@case(vec(5), kinds=("for", "static"))
def for_static_small(x):
    s = x[0]
    for i in range(3):
        s = s * 0.5 + x[i + 1]
    return s


@case(vec(7), kinds=("for", "step"))
def for_range_step_reverse(x):
    s = 0.0
    for i in range(x.shape[0] - 1, -1, -2):
        s = s * 0.7 + x[i] ** 2
    return s


@case(lambda r: (away(r, 8, 0.0),), kinds=("for", "traced bound"))
def for_traced_stop(x):
    n = np.sum(x > 0)
    s = 0.0
    for i in range(n):
        s = s + x[i] * (i + 1)
    return s


@case(lambda r: (r.uniform(-1, 0.5, 4),), kinds=("for", "traced bound", "zero trips"))
def for_traced_zero_trips(x):
    b = np.sum(x) * 0.1
    for i in range(np.sum(x > 0.7)):
        b = np.sin(x[i])
    return b


@case(lambda r: (away(r, 8, 0.0),), kinds=("for", "traced bound"))
def for_traced_start_stop(x):
    a = np.sum(x > 0.5)
    b = a + 3
    s = 1.0
    for i in range(a, b):
        s = s * (1.0 + 0.1 * x[i])
    return s


@case(vec(5), kinds=("for", "loop index"))
def loop_index_arithmetic(x):
    s = 0.0
    for i in range(x.shape[0]):
        s = s + i * x[i] + 0.5 * i * i * x[i] ** 2
    return s


@case(vec(6), kinds=("for", "if on index"))
def cond_on_loop_index(x):
    s = 0.0
    for i in range(x.shape[0]):
        if i < 3:
            s = s + x[i]
        else:
            s = s * x[i]
    return s


@case(vec(6), kinds=("for", "horner"))
def horner_reverse(x):
    t = np.sum(x) * 0.3
    acc = 0.0
    for k in range(x.shape[0] - 1, -1, -1):
        acc = acc * t + x[k]
    return acc


@case(vec(7), eager=False, kinds=("for", "mod index", "setitem"))
def loop_index_mod(x):
    acc = np.zeros(3)
    s = 0.0
    for i in range(x.shape[0]):
        if i % 2 == 0:
            s = s + x[i] * (i // 2 + 1)
        acc[i % 3] += x[i] ** 2 * (-1) ** (i % 2)
    return s + np.sum(acc * np.array([1.0, 2.0, 3.0]))


# ---- for over array rows -----------------------------------------------------------------------
@case(mat(5, 3), kinds=("for rows",))
def for_rows(X):
    s = 0.0
    for row in X:
        s = s + np.sum(row ** 2) * 0.5 + np.sin(s)
    return s


@case(lambda r: (r.uniform(-1, 1, (4, 3)), r.uniform(-1, 1, 3)), wrt=(0, 1),
      kinds=("for rows", "if"))
def for_rows_cond(X, w):
    total = 0.0
    for row in X:
        z = np.dot(row, w)
        if z > 0:
            total = total + z ** 2
        else:
            total = total + 0.1 * z
    return total


@case(lambda r: (r.uniform(-1, 1, (4, 3)),), kinds=("for rows", "vector carry"))
def for_rows_vector_carry(X):
    acc = np.zeros(3)
    for row in X:
        acc = 0.5 * acc + np.tanh(row + acc)
    return np.sum(acc ** 2)


@case(lambda r: (r.uniform(-1, 1, (4, 3)),), kinds=("for rows", "enumerate"))
def for_rows_enumerate(X):
    s = 0.0
    for i, row in enumerate(X):
        s = s + (i + 1) * np.sum(row * row)
    return s


# ---- while ------------------------------------------------------------------------------------
@case(lambda r: (r.uniform(0.5, 1.0, 3),), kinds=("while",))
def while_grow(x):
    s = np.sum(x)
    while s < 20.0:
        s = s * 1.7 + 0.1 * np.sum(x)
    return s


@case(lambda r: (r.uniform(0.1, 0.3, 4),), kinds=("while", "counter"))
def while_counter_and(x):
    i = 0
    s = 0.0
    while i < 4 and s < 0.5:
        s = s + x[i]
        i = i + 1
    return s * i


@case(lambda r: (r.uniform(1.0, 4.0, 3),), wrt=0, fd_tol=(1e-6, 1e-8), kinds=("while", "newton"))
def newton_sqrt(x):
    a = np.sum(x * x) + 1.0
    y = a
    while np.abs(y * y - a) > 1e-12 * a:
        y = y - (y * y - a) / (2.0 * y)
    return y


@case(lambda r: (r.uniform(0.5, 1.5, 2),), fd_tol=(1e-5, 1e-7), kinds=("while", "newton"))
def newton_cubic(p):
    # root of t^3 + p0 t - p1 (monotone for p0 > 0)
    t = 1.0
    f = t ** 3 + p[0] * t - p[1]
    while np.abs(f) > 1e-13:
        t = t - f / (3.0 * t ** 2 + p[0])
        f = t ** 3 + p[0] * t - p[1]
    return t


@case(lambda r: (r.uniform(0.2, 0.8, 1),), fd_tol=(1e-5, 1e-7), kinds=("while", "fixed point"))
def fixed_point_cos(x):
    t = x[0]
    nxt = np.cos(t)
    while np.abs(nxt - t) > 1e-13:
        t = nxt
        nxt = np.cos(t) * (0.5 + 0.5 * x[0])
    return t


@case(lambda r: (r.uniform(0.1, 0.3, 5),), kinds=("while", "traced counter"))
def while_traced_limit(x):
    n = np.sum(x > 0.2)
    i = 0
    s = 0.0
    while i < n:
        s = s + x[i] ** 2
        i = i + 1
    return s


# ---- break / continue ---------------------------------------------------------------------------
@case(lambda r: (r.uniform(0.3, 0.6, 8),), kinds=("for", "break"))
def for_break(x):
    s = 0.0
    for i in range(x.shape[0]):
        s = s + x[i] ** 2
        if s > 0.8:
            break
    return s


@case(lambda r: (away(r, 8, 0.0),), kinds=("for", "continue"))
def for_continue(x):
    s = 0.0
    for i in range(x.shape[0]):
        if x[i] < 0:
            continue
        s = s + np.sin(x[i]) * 2.0
    return s


@case(lambda r: (away(r, 8, 0.0, lo=-1, hi=2),), kinds=("for", "break", "continue"))
def break_and_continue(x):
    s = 0.0
    for v in x:
        if v < 0:
            continue
        s = s + v * v
        if s > 3.0:
            break
    return s


@case(lambda r: (r.uniform(0.2, 0.5, 6),), kinds=("while", "break"))
def while_true_break(x):
    s = 0.0
    i = 0
    while True:
        s = s + x[i] * (i + 1)
        i = i + 1
        if s > 4.0:
            break
    return s


@case(lambda r: (away(r, 6, 0.0),), kinds=("while", "continue"))
def while_continue(x):
    i = 0
    s = 0.0
    while i < 6:
        i = i + 1
        if x[i - 1] < 0:
            continue
        s = s + x[i - 1] ** 3
    return s


@case(lambda r: (r.uniform(0.1, 0.4, (4, 5)),), kinds=("nested", "break inner"))
def nested_break_inner(X):
    total = 0.0
    for i in range(X.shape[0]):
        row = 0.0
        for j in range(X.shape[1]):
            row = row + X[i, j]
            if row > 0.6:
                break
        total = total + row * (i + 1)
    return total


# ---- early return --------------------------------------------------------------------------------
@case(lambda r: (away(r, 4, 0.0),), kinds=("return in if",))
def early_return_if(x):
    s = np.sum(x)
    if s > 0:
        return s * 2.0
    return -s ** 2


@case(lambda r: (away(r, 3, 0.0),), kinds=("return in if", "nested"))
def early_return_nested(x):
    if x[0] > 0:
        if x[1] > 0:
            return x[0] * x[1]
        return x[0] - x[2]
    elif x[2] > 0:
        return np.exp(x[2])
    return x[0] * x[1] * x[2]


@case(lambda r: (r.uniform(0.2, 0.5, 8),), kinds=("return in loop",))
def early_return_loop(x):
    s = 0.0
    for i in range(x.shape[0]):
        s = s + x[i] * x[i]
        if s > 0.5:
            return s * (i + 1)
    return s


@case(lambda r: (r.uniform(0.2, 0.5, 6),), kinds=("return in while",))
def early_return_while(x):
    s = 1.0
    i = 0
    while i < 6:
        s = s * (1.0 + x[i])
        if s > 3.0:
            return s - i
        i = i + 1
    return s


@case(lambda r: (r.uniform(0.1, 0.3, (3, 4)),), kinds=("return in nested loop",))
def early_return_nested_loop(X):
    s = 0.0
    for i in range(X.shape[0]):
        for j in range(X.shape[1]):
            s = s + X[i, j] * (j + 1)
            if s > 2.0:
                return s * s
    return s


# ---- nested loops and conds ---------------------------------------------------------------------
@case(lambda r: (r.uniform(-1, 1, (3, 4)), r.uniform(-1, 1, 4)), wrt=(0, 1),
      kinds=("nested loops",))
def nested_loops_matvec(A, x):
    total = 0.0
    for i in range(A.shape[0]):
        acc = 0.0
        for j in range(A.shape[1]):
            acc = acc + A[i, j] * x[j]
        total = total + np.tanh(acc)
    return total


@case(lambda r: (away(r, 12, 0.0).reshape(3, 4),), kinds=("nested loops", "if"))
def nested_loops_cond(A):
    total = 0.0
    for i in range(A.shape[0]):
        for j in range(A.shape[1]):
            if A[i, j] > 0:
                total = total + A[i, j] * (i + j)
            else:
                total = total - 0.5 * A[i, j] ** 2
    return total


@case(lambda r: (away(r, 5, 0.0),), kinds=("if", "loop in branch"))
def loop_inside_branch(x):
    s = np.sum(x)
    if s > 0:
        acc = 0.0
        for i in range(x.shape[0]):
            acc = acc + x[i] * s
    else:
        acc = 1.0
        for i in range(x.shape[0]):
            acc = acc * (1.0 + 0.1 * x[i])
    return acc


@case(lambda r: (r.uniform(0.5, 1.0, 3),), kinds=("while in for",))
def while_in_for(x):
    total = 0.0
    for i in range(3):
        v = x[i]
        while v < 4.0:
            v = v * 1.9
        total = total + v
    return total


@case(lambda r: (r.uniform(-1, 1, (3, 3)),), kinds=("nested loops", "triple"))
def triple_loop(A):
    s = 0.0
    for i in range(3):
        for j in range(3):
            for k in range(3):
                s = s + A[i, j] * A[j, k] * A[k, i]
    return s


# Inner loops whose tapes the outer forward keeps (Note [Stacked inner tapes] in
# transform/loop_ad.py): trip counts that differ per outer iteration, expensive ops (taped
# outputs and residuals) inside, vector rows, a while in a while, three levels, a break, two
# inner loops in one body, and a loop in a branch of a loop.
@case(lambda r: (r.uniform(-1, 1, 5),), kinds=("nested loops", "triangular", "stacked"))
def triangular_sin(x):
    s = 0.0
    for i in range(x.shape[0]):
        acc = x[i]
        for j in range(i):
            acc = np.sin(acc) * x[j] + 0.5 * acc
        s = s + acc * acc
    return s


@case(lambda r: (r.uniform(1.0, 3.0, 4),), kinds=("while in while", "stacked"))
def while_in_while(x):
    total = 0.0
    k = 0
    while k < x.shape[0]:
        v = x[k]
        while v < 10.0:
            v = v * 1.7 + np.exp(-v)
        total = total + np.log(v) * x[k]
        k += 1
    return total


@case(lambda r: (r.uniform(-1, 1, (2, 3)), r.uniform(0.5, 1.0, 3)), wrt=(0, 1),
      kinds=("nested loops", "triple", "while", "stacked"))
def three_levels_while_middle(A, w):
    s = 0.0
    for i in range(A.shape[0]):
        t = 0.1
        n = 0
        while n < 2:
            for j in range(A.shape[1]):
                t = np.tanh(t + A[i, j] * w[j])
            n += 1
        s = s + t * w[i]
    return s


@case(lambda r: (r.uniform(-1, 1, (3, 4)), r.uniform(-1, 1, 4)), wrt=(0, 1),
      kinds=("nested loops", "vector carry", "stacked"))
def inner_vector_carry(A, h0):
    total = 0.0
    for i in range(A.shape[0]):
        h = h0
        for j in range(A.shape[1]):
            h = np.tanh(h * A[i, j] + 0.3)
        total = total + np.sum(h * h)
    return total


@case(lambda r: (r.uniform(0.2, 1.0, (3, 5)),), kinds=("nested loops", "break", "stacked"))
def inner_break_varies(A):
    total = 0.0
    for i in range(A.shape[0]):
        acc = 0.0
        for j in range(A.shape[1]):
            acc = acc + np.sqrt(A[i, j]) * (i + 1)
            if acc > 1.5:
                break
        total = total + acc * acc
    return total


@case(lambda r: (r.uniform(-1, 1, 5),), kinds=("nested loops", "two inner", "stacked"))
def two_inner_loops(x):
    total = 0.0
    for i in range(x.shape[0]):
        a = x[i]
        for j in range(3):
            a = np.sin(a) + 0.1 * x[j]
        b = a
        k = 0
        while k < i + 1:
            b = b * 0.9 + np.cos(b)
            k += 1
        total = total + a * b
    return total


@case(lambda r: (away(r, 4, 0.0),), kinds=("loop in branch in loop",))
def loop_in_branch_in_loop(x):
    total = 0.0
    for i in range(x.shape[0]):
        if x[i] > 0:
            p = 1.0
            for j in range(3):
                p = p * np.cos(x[i] * (j + 1))
            total = total + p
        else:
            total = total - x[i] ** 2
    return total


@case(lambda r: (away(r, 6, 0.0),), kinds=("ternary in loop",))
def ternary_in_loop(x):
    s = 0.0
    for i in range(x.shape[0]):
        s = s + (x[i] * 2.0 if x[i] > 0 else x[i] ** 2)
    return s


@case(lambda r: (r.uniform(-1, 1, 6),), kinds=("loop", "max"))
def running_max(x):
    m = x[0]
    for i in range(1, x.shape[0]):
        if x[i] > m:
            m = x[i]
    return m * np.sum(x)


# ---- piecewise functions -----------------------------------------------------------------------
@case(lambda r: (np.array([-1.7, -0.6, 0.2, 0.8, 1.3, 1.9]),),
      kinds=("piecewise", "huber"))
def huber(x):
    total = 0.0
    for i in range(x.shape[0]):
        a = np.abs(x[i])
        if a <= 1.0:
            total = total + 0.5 * x[i] ** 2
        else:
            total = total + a - 0.5
    return total


@case(lambda r: (away(r, 5, 0.0, lo=-2, hi=2),), kinds=("piecewise", "helper"))
def piecewise_helper_abs(x):
    s = 0.0
    for i in range(x.shape[0]):
        s = s + h_smooth_abs(x[i]) * x[i]
    return s


@case(lambda r: (np.array([-0.9, -0.3, 0.1, 0.4, 0.7, -0.6]),),
      kinds=("piecewise", "helper", "early return"))
def piecewise_clip(x):
    s = 0.0
    for i in range(x.shape[0]):
        s = s + h_clip(x[i], -0.5, 0.5) * (i + 1)
    return s


@case(lambda r: (away(r, 1, 0.0, lo=-2, hi=2),), kinds=("piecewise", "softplus"))
def softplus_branch(x):
    v = x[0]
    if v > 0:
        r = v + np.log1p(np.exp(-v))
    else:
        r = np.log1p(np.exp(v))
    return r


# ---- element updates, augmented assignment, tuple unpacking -------------------------------------
@case(vec(6), eager=False, kinds=("setitem",))
def setitem_loop(x):
    y = np.zeros(x.shape[0])
    for i in range(1, x.shape[0]):
        y[i] = x[i] * x[i - 1] + y[i - 1] * 0.5
    return np.sum(y ** 2)


@case(vec(6), eager=False, kinds=("setitem", "augassign"))
def setitem_accumulate(x):
    acc = np.zeros(3)
    for i in range(x.shape[0]):
        acc[i - 3 * (i > 2)] += x[i] ** 2
    return np.sum(acc * np.array([1.0, 2.0, 3.0]))


@case(vec(5), eager=False, kinds=("setitem", "prefix sum"))
def prefix_sum(x):
    y = np.zeros_like(x)
    y[0] = x[0]
    for i in range(1, x.shape[0]):
        y[i] = y[i - 1] + x[i]
    return np.sum(np.sin(y))


@case(lambda r: (away(r, 6, 0.0),), eager=False, kinds=("setitem", "if"))
def setitem_in_branches(x):
    y = np.zeros(6)
    for i in range(6):
        if x[i] > 0:
            y[i] = x[i] ** 2
        else:
            y[i] = -x[i] * 0.5
    return np.sum(y * x)


@case(lambda r: (r.uniform(-1, 1, (3, 4)),), eager=False, kinds=("setitem", "rows"))
def setitem_rows(X):
    Y = np.zeros((3, 4))
    for i in range(3):
        Y[i, :] = np.tanh(X[i] * (i + 1))
    return np.sum(Y * X)


@case(vec(4), kinds=("augassign",))
def aug_assign(x):
    s = 1.0
    t = 0.0
    for i in range(x.shape[0]):
        s *= 1.0 + x[i] * 0.5
        t += s
        t -= 0.1 * x[i]
        s /= 1.1
    return s + t


@case(vec(6), kinds=("tuple unpacking",))
def fibonacci_like(x):
    a, b = x[0], x[1]
    for i in range(2, x.shape[0]):
        a, b = b, 0.5 * a + 0.4 * b + x[i]
    return a * b


@case(vec(4), kinds=("tuple unpacking", "swap"))
def swap_in_branch(x):
    a, b = x[0], x[1]
    for i in range(4):
        if x[i] > 0.0:
            a, b = b, a
        a = a + 0.1 * x[i]
    return a * 2.0 + b


@case(lambda r: (np.array([-0.8, -0.2, 0.3, 0.9]) + r.uniform(0, 0.05, 4),), eager=False,
      kinds=("setitem", "elif", "constant writes"))
def setitem_constants_in_branches(x):
    y = np.zeros_like(x)
    for i in range(x.shape[0]):
        if x[i] < -0.5:
            y[i] = -1.0
        elif x[i] < 0.5:
            y[i] = x[i] * 2
        else:
            y[i] = 1.0
    return np.sum(y * x)


@case(lambda r: (away(r, 3, 0.0),), eager=False, kinds=("setitem", "if", "constant writes"))
def setitem_constant_one_branch(x):
    y = np.zeros(3)
    if x[0] > 0:
        y[0] = 1.0
    return np.sum(y * x)


@case(lambda r: (r.uniform(-1, 1, 3),), eager=False, kinds=("setitem", "traced bound",
                                                            "constant writes"))
def setitem_constant_in_traced_loop(x):
    y = np.zeros(3)
    for i in range(np.sum(x > -10.0)):
        y[0] += 1.0
    return np.sum(y * x)


@case(lambda r: (away(r, 3, 0.0),), kinds=("if", "array constants"))
def array_constants_per_branch(x):
    if x[0] > 0:
        w = np.array([1.0, 2.0, 3.0])
    else:
        w = np.array([-1.0, 0.5, 0.0])
    return np.sum(w * x)


# ---- helpers with control flow -----------------------------------------------------------------
@case(lambda r: (r.uniform(-1, 1, 4), r.uniform(-1, 1, 3)), wrt=(0, 1), kinds=("helper", "loop"))
def helper_poly(c, x):
    s = 0.0
    for i in range(x.shape[0]):
        s = s + h_poly(c, x[i]) ** 2
    return s


@case(vec(4), kinds=("helper", "closure"))
def closure_helper(x):
    scale = np.sum(x)

    def inner(v):
        if v > 0:
            return v * scale
        return v

    s = 0.0
    for i in range(x.shape[0]):
        s = s + inner(x[i])
    return s


# ---- integrators and recurrent nets ------------------------------------------------------------
@case(lambda r: (10.0, 28.0, 8.0 / 3.0), wrt=(0, 1, 2), fd_tol=(1e-5, 1e-7),
      kinds=("rk4", "lorenz"))
def lorenz_rk4(sigma, rho, beta):
    u = np.array([1.0, 1.0, 1.0])
    dt = 0.01
    for _ in range(40):
        k1 = h_lorenz(u, sigma, rho, beta)
        k2 = h_lorenz(u + 0.5 * dt * k1, sigma, rho, beta)
        k3 = h_lorenz(u + 0.5 * dt * k2, sigma, rho, beta)
        k4 = h_lorenz(u + dt * k3, sigma, rho, beta)
        u = u + dt / 6.0 * (k1 + 2.0 * k2 + 2.0 * k3 + k4)
    return np.sum(u ** 2)


@case(lambda r: (r.uniform(0.5, 1.5, 2),), kinds=("euler", "oscillator"))
def damped_oscillator(p):
    x, v = 1.0, 0.0
    dt = 0.05
    for _ in range(30):
        a = -p[0] * x - p[1] * v
        x, v = x + dt * v, v + dt * a
    return x * x + v * v


@case(lambda r: (r.uniform(-.5, .5, (4, 4)), r.uniform(-.5, .5, (4, 3)),
                 r.uniform(-1, 1, (6, 3))), wrt=(0, 1), kinds=("rnn",))
def rnn_tanh(W, U, xs):
    h = np.zeros(4)
    for t in range(xs.shape[0]):
        h = np.tanh(W @ h + U @ xs[t])
    return np.sum(h ** 2)


@case(lambda r: (r.uniform(-.5, .5, (4, 4)), r.uniform(-.5, .5, (4, 3)),
                 r.uniform(-1, 1, (5, 3))), wrt=(0, 1, 2), kinds=("rnn", "rows"))
def rnn_rows_loss(W, U, xs):
    h = np.zeros(4)
    loss = 0.0
    for x_t in xs:
        h = np.tanh(W @ h + U @ x_t)
        loss = loss + np.sum(h) ** 2
    return loss


@case(lambda r: (r.uniform(-.5, .5, (16, 4)), r.uniform(-.5, .5, (16, 3)),
                 r.uniform(-1, 1, (5, 3))), wrt=(0, 1), kinds=("lstm",))
def lstm(Wh, Wx, xs):
    H = 4
    h = np.zeros(H)
    c = np.zeros(H)
    for t in range(xs.shape[0]):
        z = Wh @ h + Wx @ xs[t]
        i = h_sigmoid(z[0:H])
        f = h_sigmoid(z[H:2 * H])
        o = h_sigmoid(z[2 * H:3 * H])
        g = np.tanh(z[3 * H:4 * H])
        c = f * c + i * g
        h = o * np.tanh(c)
    return np.sum(h ** 2) + np.sum(c)


@case(lambda r: (r.uniform(0.2, 0.4, 1),), kinds=("logistic map",))
def logistic_map(r_):
    x = 0.3
    for _ in range(20):
        x = (3.0 + r_[0]) * x * (1.0 - x)
    return x


@case(lambda r: (r.uniform(-1, 1, (3, 3)),), kinds=("power iteration",))
def power_iteration(A):
    M = A @ A.T + np.eye(3)
    v = np.ones(3)
    for _ in range(15):
        w = M @ v
        v = w / np.sqrt(np.sum(w * w))
    return v @ (M @ v)


@case(lambda r: (r.uniform(-1, 1, 3), r.uniform(-1, 1, (5, 3)), r.uniform(-1, 1, 5)),
      kinds=("gradient descent",))
def inner_gradient_descent(w0, X, y):
    w = w0
    for _ in range(5):
        g = X.T @ (X @ w - y) / 5.0
        w = w - 0.1 * g
    return np.sum((X @ w - y) ** 2)


@case(lambda r: (r.uniform(-1, 1, (3, 4)), r.uniform(-1, 1, (3, 4)), r.uniform(-1, 1, 3)),
      wrt=(0,), kinds=("design example",))
def design_loss(x, w_, y):
    w = w_.T
    z = x @ w
    total = 0.0
    for i in range(y.shape[0]):
        if z[i, 0] > 0:
            total = total + (z[i, 2] - y[i]) ** 2
        else:
            total = total + 0.1 * z[i, 1] ** 2
    return total / y.shape[0]


# ---- plain-Python control flow around traced code (static decisions) --------------------------
@case(lambda r: (r.uniform(-1, 1, (3, 2)),), kinds=("static if", "static for"))
def static_shape_decisions(X):
    if X.ndim == 2 and X.shape[0] > X.shape[1]:
        X = X.T
    s = 0.0
    for k in range(len(X)):
        if k == 0:
            s = s + np.sum(X[k])
        else:
            s = s * np.sum(X[k] ** 2)
    return s


@case(vec(4), kinds=("for-else",))
def for_else_static(x):
    s = 0.0
    for k in range(3):
        s = s + x[k]
    else:
        s = s * 2.0
    return s


@case(vec(5), kinds=("python list",))
def list_append_stack(x):
    hs = []
    h = 0.0
    for i in range(x.shape[0]):
        h = np.tanh(h + x[i])
        hs.append(h)
    return np.sum(np.stack(hs) ** 2)


@case(vec(5), kinds=("python list",))
def list_reads_back(x):
    hs = [x[0], x[1]]
    for i in range(2, x.shape[0]):
        hs.append(np.tanh(hs[-2] + x[i]))  # an item appended two iterations ago: carried
    return np.sum(np.stack(hs) ** 2)


@case(vec(5), kinds=("python list",), unrolls=True)
def list_reads_back_by_a_slice(x):
    hs = [x[0], x[1]]
    for i in range(2, x.shape[0]):
        hs.append(np.tanh(sum(hs[-2:]) + x[i]))  # a slice of it: unrolled
    return np.sum(np.stack(hs) ** 2)


@case(vec(4), kinds=("shape change",), unrolls=True)
def growing_carry(x):
    h = x[:1]
    for i in range(1, x.shape[0]):
        h = np.concatenate([h, h[-1:] * x[i]])
    return np.sum(h)
