"""Elementwise numerics that must equal numpy's to the bit, compiled natively and through the
interpreter: float `//` and `%` (numpy's divmod, not floor(x / y)) on values near integers,
signed zeros, infinities, NaN and zero divisors."""
from __future__ import annotations

import itertools

import numpy as np
import pytest

import llgrad

SPECIAL = [0.0, -0.0, 1.0, -1.0, 0.1, -0.1, 0.3, 2.5, -2.5, 7.0, 1e30, -1e-30, np.inf,
           -np.inf, np.nan]


def _pairs(dtype):
    a, b = zip(*itertools.product(SPECIAL, SPECIAL))
    return np.array(a, dtype=dtype), np.array(b, dtype=dtype)


def _assert_same_bits(actual, expected):
    np.testing.assert_array_equal(actual, expected)  # NaN where numpy has NaN
    np.testing.assert_array_equal(np.signbit(actual), np.signbit(expected))  # and -0.0


def floordiv(a, b):
    return a // b


def remainder(a, b):
    return a % b


def floor_divide(a, b):
    return np.floor_divide(a, b)


def np_remainder(a, b):
    return np.remainder(a, b)


def both(a, b):
    return a // b, a % b


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("fn", [floordiv, remainder, floor_divide, np_remainder, both],
                         ids=lambda f: f.__name__)
def test_float_floordiv_and_remainder_equal_numpys(fn, dtype, mode):
    a, b = _pairs(dtype)
    with np.errstate(all="ignore"):
        expected = fn(a, b)
        actual = llgrad.differentiate(fn)(a, b)  # the interpreter warns as numpy does
    for got, want in zip(*((actual, expected) if fn is both else ((actual,), (expected,)))):
        assert got.dtype == want.dtype
        _assert_same_bits(got, want)


def test_floordiv_near_integers_is_not_floor_of_the_quotient(mode):
    # 1.0 / 0.1 rounds to 10.0, but 0.1 is a little more than a tenth: numpy's 1.0 // 0.1 is 9.
    f = llgrad.differentiate(lambda x: np.sum(1.0 // x))
    assert f(np.array([0.1])) == np.sum(1.0 // np.array([0.1])) == 9.0
    rng = np.random.default_rng(0)
    b = rng.choice([0.1, 0.2, 0.3, 0.7, 1.1, -0.1, -0.3], size=200)
    a = b * rng.integers(-50, 50, size=200)  # exact quotients, rounded: the hard cases
    g = llgrad.differentiate(lambda x, y: (x // y, x % y, 2.5 // y, x % 0.3))
    for got, want in zip(g(a, b), (a // b, a % b, 2.5 // b, a % 0.3)):
        _assert_same_bits(got, want)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_floordiv_over_magnitudes_equals_numpys(dtype, mode):
    """Quotients from tiny to past 2**53 (numpy's algorithm and the exact floor quotient part
    there; Note [Float floor division]), random signs, an odd size (vector and scalar lanes)."""
    rng = np.random.default_rng(3)
    n = 4001
    a = (rng.choice([-1, 1], n) * 10.0 ** rng.uniform(-8, 20, n)).astype(dtype)
    b = (rng.choice([-1, 1], n) * 10.0 ** rng.uniform(-8, 8, n)).astype(dtype)
    b[::7] = (a[::7] / rng.integers(1, 1000, a[::7].size)).astype(dtype)  # near-integer
    g = llgrad.differentiate(both)
    with np.errstate(all="ignore"):
        for got, want in zip(g(a, b), both(a, b)):
            _assert_same_bits(got, want)


def test_python_float_floordiv_in_compiled_code(mode):
    f = llgrad.differentiate(lambda x, s: np.sum(x) * (s // 0.1) + s % 0.1)
    assert f(np.ones(2), 1.0) == 2.0 * (1.0 // 0.1) + 1.0 % 0.1


# ---- integer ** negative integer ---------------------------------------------------------------
def int_power(x, n):
    return np.sum(x * (np.array([2, 3]) ** n))  # the line the error names


def int_power_loop(x):
    total = x * 0.0
    for i in range(-2, 2):
        total = total + x * (np.array([2, 3]) ** i)  # the line the error names
    return np.sum(total)


@pytest.mark.parametrize("fn,args", [(int_power, (np.ones(2), np.array([1, -1]))),
                                     (int_power, (np.ones(2), np.array(-2))),
                                     (int_power_loop, (np.ones(2),))],
                         ids=["array", "0-d", "loop-counter"])
def test_integer_to_a_negative_traced_power_raises_as_numpy(fn, args, mode):
    with pytest.raises(ValueError, match="Integers to negative integer powers are not allowed"):
        fn(*args)  # numpy's error
    d = llgrad.differentiate(fn)
    line = fn.__code__.co_firstlineno + (1 if fn is int_power else 3)
    for call in (d, d.grad):
        with pytest.raises(ValueError, match="Integers to negative integer powers are not "
                           "allowed") as e:
            call(*args)
        assert f"{__file__}:{line}" in "".join(getattr(e.value, "__notes__", []))


def test_integer_to_a_nonnegative_traced_power_is_unchanged(mode):
    x, n = np.array([0.5, 2.0]), np.array([3, 0])
    value, grad = llgrad.differentiate(int_power).value_and_grad(x, n)
    assert value == int_power(x, n)
    np.testing.assert_array_equal(grad, np.array([2, 3]) ** n)
