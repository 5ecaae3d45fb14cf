"""Small functions with Python control flow, one construct each (or a few, nested).

Each entry of CASES is (function, list of argument tuples). The converted function must
return what the original returns on each argument tuple (or raise the same exception type).
"""

import math

import numpy as np

SCALE = 3.0
_calls = []


def helper_abs(v):
    if v < 0:
        return -v
    return v


def helper_recursive(n):
    if n <= 1:
        return 1
    return n * helper_recursive(n - 1)


def helper_gen(n):
    for i in range(n):
        yield i * i


def if_else(x):
    if x > 0:
        y = x * 2
    else:
        y = -x
    return y


def elif_chain(x):
    if x < -1:
        r = "low"
    elif x < 1:
        r = "mid"
    elif x < 3:
        r = "high"
    else:
        r = "top"
    return r


def if_no_else(x):
    y = 1
    if x > 0:
        y = y + x
    return y


def nested_if(x, y):
    if x > 0:
        if y > 0:
            q = 1
        else:
            q = 4
    else:
        q = 2 if y > 0 else 3
    return q


def early_return_if(x):
    if x > 0:
        return x
    return -x * 2


def early_return_nested(x, y):
    if x > 0:
        if y > 0:
            return "both"
        z = "x only"
    else:
        z = "none"
    return z


def return_none_path(x):
    if x > 0:
        return x


def for_range_sum(n):
    s = 0
    for i in range(n):
        s += i * i
    return s


def for_range_step(a, b):
    out = []
    for i in range(a, b, 2):
        out.append(i)
    return out


def for_rows(x):
    total = np.zeros(x.shape[1])
    for row in x:
        total = total + row * 2
    return total


def for_break(x):
    k = -1
    for i in range(len(x)):
        if x[i] > 2:
            k = i
            break
    return k


def for_continue(x):
    s = 0.0
    for v in x:
        if v < 0:
            continue
        s += v
    return s


def for_else(n):
    found = None
    for i in range(2, n):
        if n % i == 0:
            found = i
            break
    else:
        found = -1
    return found


def for_else_no_break(n):
    s = 0
    for i in range(n):
        s += i
    else:
        s = -s
    return s


def nested_loops_break_continue(n):
    pairs = []
    for i in range(n):
        if i == 3:
            continue
        for j in range(n):
            if j > i:
                break
            if (i + j) % 2:
                continue
            pairs.append((i, j))
        if len(pairs) > 6:
            break
    return pairs


def return_in_loop(x):
    for i, v in enumerate(x):
        if v > 1.5:
            return i
    return -1


def return_in_while(n):
    i = 0
    while True:
        if i * i >= n:
            return i
        i += 1


def while_loop(x):
    steps = 0
    while x > 1:
        x = x / 2
        steps += 1
    return steps, x


def while_else(n):
    i = 0
    while i < n:
        if i == 5:
            break
        i += 1
    else:
        i = 100
    return i


def while_newton(a):
    x = a
    while abs(x * x - a) > 1e-10:
        x = 0.5 * (x + a / x)
    return x


def and_or_values(a, b):
    return (a and b), (a or b), (not a)


def short_circuit(x):
    _calls.clear()

    def probe(tag, v):
        _calls.append(tag)
        return v

    r = probe("a", x > 0) and probe("b", x > 1) or probe("c", x < -1)
    return r, list(_calls)


def ternary_nested(x):
    return "pos" if x > 0 else ("zero" if x == 0 else "neg")


def chained_compare(x):
    return 0 < x <= 5, 1 < x < 2 < 3


def chained_compare_once(x):
    _calls.clear()

    def mid():
        _calls.append(1)
        return x

    r = 0 < mid() < 10
    return r, len(_calls)


def aug_assign(x):
    y = x
    y += 1
    y *= 3
    y -= 2
    y /= 4
    return y


def subscript_loop(x):
    y = np.zeros_like(x)
    for i in range(1, len(x)):
        y[i] = y[i - 1] + x[i]
    return y


def subscript_aug(x):
    acc = np.zeros(3)
    for i in range(len(x)):
        acc[i % 3] += x[i]
    return acc


def subscript_slice(x):
    y = x.copy()
    y[1:3] = 0.0
    y[::2] *= 2
    return y


def subscript_alias(x):
    y = x
    y[0] = 99.0
    return x


def tuple_unpack(n):
    a, b = 0, 1
    for _ in range(n):
        a, b = b, a + b
    return a


def helper_calls(x):
    total = 0.0
    for v in x:
        total += helper_abs(v)
    return total, helper_recursive(5)


def closure_read(x):
    k = 3

    def scaled(v):
        if v > 0:
            return v * k
        return v

    return scaled(x) + scaled(-x)


def closure_counter(n):
    count = 0

    def inc():
        nonlocal count
        count += 1

    for _ in range(n):
        inc()
    return count


def default_args(x, scale=2.0, *, shift=1.0):
    if x > 0:
        x = x * scale
    return x + shift


def mutable_default(x, acc=[]):  # noqa: B006 (the point of the test)
    acc.append(x)
    return len(acc) > 0


def uses_globals(x):
    if x > 0:
        return x * SCALE
    return math.sqrt(-x)


def generator_helper(n):
    return sum(helper_gen(n))


def maybe_undefined(x):
    if x > 0:
        y = 1
    return y


def loop_var_after_loop(n):
    for i in range(n):
        pass
    return i


def comprehension_and_lambda(x):
    sq = [v * v for v in x if v > 0]
    f = lambda t: t + 1 if t > 2 else t  # noqa: E731
    return [f(v) for v in sq]


def raises_inside(x):
    if x > 0:
        raise ValueError("positive")
    return x


def numpy_piecewise(x):
    out = np.empty_like(x)
    for i in range(x.shape[0]):
        if x[i] > 1:
            out[i] = np.log(x[i])
        elif x[i] > -1:
            out[i] = x[i] ** 2
        else:
            out[i] = np.exp(x[i])
    return out


def docstring_return(x):
    """Docstring stays first."""
    for v in range(3):
        if v == x:
            return "hit"
    return "miss"


def try_plain(x):
    try:
        y = 1 / x
    except ZeroDivisionError:
        y = 0.0
    return y


def try_branches(x):
    # names first bound by an `if` inside each block of a try (scipy.linalg.logm's shape: a
    # `nonlocal` of the branch functions had no binding, a SyntaxError at conversion)
    try:
        if x > 0:
            t = 1 / x
        else:
            t = -1.0
    except ZeroDivisionError:
        if x == 0:
            u = 0.0
        return u
    else:
        if t > 1:
            v = t
        else:
            v = 2 * t
    finally:
        if x > 5:
            w = 1
        t = t + 1
    return t + v + (w if x > 5 else 0)


def with_branch(x):
    with np.errstate(divide="ignore"):
        if x > 0:
            t = 1 / x
        else:
            t = 0.0
    return t


def del_plain(x):
    y = x + 1
    del y
    return x


GLOBAL_COUNTER = 0


def global_write(x):
    global GLOBAL_COUNTER
    if x > 0:
        GLOBAL_COUNTER = GLOBAL_COUNTER + 1
    return GLOBAL_COUNTER


def walrus_while(x):
    items = list(x)
    n = 0
    while (v := (items.pop() if items else None)) is not None:
        n += v
    return n


_x = np.array([0.5, -1.0, 2.0, 3.0, -0.5])

CASES = [
    (if_else, [(1.0,), (-2.0,), (0.0,)]),
    (elif_chain, [(-3,), (0,), (2,), (7,)]),
    (if_no_else, [(2,), (-1,)]),
    (nested_if, [(1, 1), (1, -1), (-1, 1), (-1, -1)]),
    (early_return_if, [(3,), (-3,)]),
    (early_return_nested, [(1, 1), (1, -1), (-1, 0)]),
    (return_none_path, [(1,), (-1,)]),
    (for_range_sum, [(0,), (5,)]),
    (for_range_step, [(0, 7), (3, 4), (5, 1)]),
    (for_rows, [(np.arange(6.0).reshape(3, 2),)]),
    (for_break, [(_x,), (np.zeros(3),)]),
    (for_continue, [(_x,)]),
    (for_else, [(9,), (7,), (2,)]),
    (for_else_no_break, [(4,)]),
    (nested_loops_break_continue, [(3,), (6,)]),
    (return_in_loop, [(_x,), (np.zeros(2),)]),
    (return_in_while, [(0,), (10,), (16,)]),
    (while_loop, [(40.0,), (0.5,)]),
    (while_else, [(3,), (9,)]),
    (while_newton, [(2.0,), (9.0,)]),
    (and_or_values, [(0, 3), (2, 0), ([], "x"), (1, 1)]),
    (short_circuit, [(2,), (0.5,), (-2,), (0,)]),
    (ternary_nested, [(1,), (0,), (-1,)]),
    (chained_compare, [(1.5,), (6,), (0,)]),
    (chained_compare_once, [(5,), (-1,)]),
    (aug_assign, [(1.0,), (np.array([1.0, 2.0]),)]),
    (subscript_loop, [(np.arange(5.0),)]),
    (subscript_aug, [(np.arange(7.0),)]),
    (subscript_slice, [(np.arange(6.0),)]),
    (subscript_alias, [(np.arange(3.0),)]),
    (tuple_unpack, [(0,), (10,)]),
    (helper_calls, [(_x,)]),
    (closure_read, [(2.0,)]),
    (closure_counter, [(4,)]),
    (default_args, [(1.0,), (-1.0,)]),
    (uses_globals, [(2.0,), (-4.0,)]),
    (generator_helper, [(4,)]),
    (maybe_undefined, [(1,), (-1,)]),
    (loop_var_after_loop, [(3,), (0,)]),
    (comprehension_and_lambda, [(_x,)]),
    (raises_inside, [(1,), (-1,)]),
    (numpy_piecewise, [(np.array([2.0, 0.5, -3.0]),)]),
    (docstring_return, [(1,), (5,)]),
    (try_plain, [(2.0,), (0,)]),
    (try_branches, [(2.0,), (0.25,), (-1.0,), (6.0,)]),
    (with_branch, [(2.0,), (-1.0,)]),
    (del_plain, [(1,)]),
    (walrus_while, [([1, 2, 3],)]),
]


class Model:
    def __init__(self, k):
        self.k = k

    def scale(self, v):
        if v > 0:
            return v * self.k
        return v

    def total(self, x):
        s = 0.0
        for v in x:
            s += self.scale(v)
        return s
