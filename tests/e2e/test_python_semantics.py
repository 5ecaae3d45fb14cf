"""Python's own semantics on traced values, compiled natively and through the interpreter:
builtins (max/min) raise where Python raises, `assert` compiles to a check, exception
messages format numbers as Python does; what stays unsupported is an error at the user's line.
"""
from __future__ import annotations

import functools
import warnings

import numpy as np
import pytest

import llgrad
from llgrad.runtime.errors import ShapeError, UnsupportedError
from tests.e2e.conftest import finite_differences


def _line(fn, offset=1) -> str:
    return f"{__file__}:{fn.__code__.co_firstlineno + offset}"


# ---- max(a, b) / min(a, b) ---------------------------------------------------------------------
def max_of_array(x):
    return np.sum(max(x, 0.5))


def min_of_arrays(x):
    return np.sum(min(x, x * 2.0))


def max_of_one_element_arrays(x):
    return np.sum(max(x[:1], x[1:2]))


@pytest.mark.parametrize("fn", [max_of_array, min_of_arrays], ids=lambda f: f.__name__)
def test_max_of_arrays_raises_as_python(fn, mode):
    x = np.array([0.1, 0.9])
    with pytest.raises(ValueError, match="truth value of an array with more than one element"):
        fn(x)  # Python's error
    with pytest.raises(ShapeError, match="truth value of an array with more than one element "
                       "is ambiguous") as e:
        llgrad.differentiate(fn)(x)
    assert isinstance(e.value, ValueError) and "np.m" in e.value.fix
    assert e.value.loc.describe().startswith(_line(fn))


def scalar_extrema(x, a):
    return max(x[0], x[1]) + min(x[1], a) * max(2.0, a) + min(x[2], x[2])  # ties: the first


@pytest.mark.parametrize("a", [0.3, 2.5])
def test_max_of_scalars_is_pythons(a, mode):
    x = np.array([0.1, 0.9, 1.5])
    d = llgrad.differentiate(scalar_extrema, wrt=(0, 1))
    value, grads = d.value_and_grad(x, a)
    assert value == scalar_extrema(x, a)
    for g, fd in zip(grads, finite_differences(scalar_extrema, [x, a], (0, 1))):
        np.testing.assert_allclose(g, fd, atol=1e-8)
    x = np.array([0.4, 0.9])
    assert llgrad.differentiate(max_of_one_element_arrays)(x) == max_of_one_element_arrays(x)


def extrema_of_several(x, a):
    h = min(0.5, x[0] / (1.0 + abs(x[1])), a - x[2])  # an adaptive step: min of three
    return (h * max([x[0], x[1], a]) + min((x[2], x[2], 2.0)) + max(x[1], 0.2, 0.3)
            + max(x[i] * a for i in range(3)) + min(v for v in (1.0, 2.0)))


@pytest.mark.parametrize("a", [0.3, 2.5, 5.0])
def test_max_and_min_of_several_or_of_a_list_are_pythons(a, mode):
    """min(a, b, c), max([a, b, c]) and max(generator) bool()-ed each comparison of a traced
    scalar, so the function took the dynamic path; now they fold pairwise as Python does
    (ties: the first)."""
    x = np.array([0.8, -0.4, 1.5])
    d = llgrad.differentiate(extrema_of_several, wrt=(0, 1))
    value, grads = d.value_and_grad(x, a)
    assert value == extrema_of_several(x, a)
    assert d.inspect(x, a).path == "staged"
    for g, fd in zip(grads, finite_differences(extrema_of_several, [x, a], (0, 1))):
        np.testing.assert_allclose(g, fd, atol=1e-8)
    with pytest.raises(ShapeError, match="truth value of an array with more than one"):
        llgrad.differentiate(lambda x: np.sum(min(x[0], x, 1.0)))(x)


def test_max_of_one_element_arrays_of_different_shapes_is_refused(mode):
    def f(x):
        return np.sum(max(x[:1], x[1]))
    with pytest.raises(UnsupportedError, match="depends on the values"):
        llgrad.differentiate(f)(np.array([0.4, 0.9]))


# ---- a traced value written into a numpy array held in an attribute or a container ----------
class Holder:
    def __init__(self):
        self.buf = np.zeros(3)


HOLDER, TABLE = Holder(), {"w": np.zeros(3)}


def writes_attribute_array(x):
    HOLDER.buf[0] = x[0]
    return np.sum(HOLDER.buf * x)


def writes_item_array(x):
    TABLE["w"][1:] = x[1:] * 2.0
    return np.sum(TABLE["w"])


@pytest.mark.parametrize("fn", [writes_attribute_array, writes_item_array],
                         ids=lambda f: f.__name__)
def test_traced_value_into_an_attribute_array_is_refused_at_its_line(fn, mode):
    with pytest.raises(UnsupportedError, match="numpy cannot hold a traced value") as e:
        llgrad.differentiate(fn)(np.ones(3))
    assert e.value.loc.describe().startswith(_line(fn))
    assert "buf = obj.buf.copy()" in e.value.fix
    assert not HOLDER.buf.any() and not TABLE["w"].any()


def writes_a_copy(x):
    buf = HOLDER.buf.copy()
    buf[0] = x[0]
    HOLDER.buf[1] = 4.0  # a number into the array: Python's store, while tracing
    return np.sum(buf * x)


def test_the_fix_works(mode):
    try:
        value, grad = llgrad.differentiate(writes_a_copy).value_and_grad(np.ones(3) * 2.0)
    finally:
        HOLDER.buf[:] = 0.0
    assert value == 4.0
    np.testing.assert_array_equal(grad, [4.0, 0.0, 0.0])


# ---- exception messages formatted on the dynamic path -------------------------------------------
def raises_with_python_numbers(x, a):
    for i in range(2):
        if x[i] > a:
            raise ValueError(f"x[{i!r}] = {x[i]!r} exceeds a = {a!r} ({a * 2!r}, {x[0]})")
    return np.sum(x) * a


def test_python_numbers_in_messages_format_as_python(mode):
    x = np.array([0.25, 1.5])
    with pytest.raises(ValueError) as expected:
        raises_with_python_numbers(x, 0.5)
    with pytest.raises(ValueError) as e:
        llgrad.differentiate(raises_with_python_numbers)(x, 0.5)
    assert str(e.value) == str(expected.value) == (
        "x[1] = np.float64(1.5) exceeds a = 0.5 (1.0, 0.25)")


def logs_with_a_format_spec(x):
    loss = np.sum(x ** 2)
    message = f"loss {loss:.3f}, first {x[0]:>8.2e}"  # a training log line
    return loss + 0.0 * len(message)


def test_a_format_spec_needs_the_number_and_takes_the_dynamic_path(mode):
    """f"{loss:.3f}" raised a TypeError ("unsupported format string passed to
    Value.__format__"); it needs the number, as float() does: the dynamic path, with a
    warning naming the line and how to stay compiled."""
    x = np.array([0.25, 1.5])
    d = llgrad.differentiate(logs_with_a_format_spec)
    with pytest.warns(llgrad.PerformanceWarning, match=r"formatting with the format spec "
                      r"'\.3f'.*format numbers outside the differentiated function"):
        value, g = d.value_and_grad(x)
    assert value == logs_with_a_format_spec(x)
    np.testing.assert_array_equal(g, 2 * x)
    assert d.inspect(x).path.startswith("dynamic")


# ---- functions made by decorators with functools.wraps -----------------------------------------
def scaled(factor):
    def decorate(fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            return factor * fn(*args, **kwargs)
        return wrapper
    return decorate


def with_namespace(fn):  # (scipy's array-API layer: get_xp(np) passes xp=np)
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        return fn(*args, xp=np, **kwargs)
    return wrapper


@scaled(2.0)
def doubled_energy(x):
    return np.sum(x ** 2)


@with_namespace
def namespaced_cumsum(x, xp):
    return xp.cumsum(x)


def uses_decorated_helpers(x):
    return doubled_energy(x) + np.sum(namespaced_cumsum(x) * x)


@pytest.mark.parametrize("fn", [uses_decorated_helpers, doubled_energy], ids=lambda f: f.__name__)
def test_a_decorated_function_runs_its_wrapper(fn, mode):
    """The converter read the source through inspect.unwrap, so a function made by a
    functools.wraps decorator ran as the function it wraps: doubled_energy gave half its
    value (a wrong answer), and a wrapper's added argument was missing (a TypeError)."""
    x = np.array([0.5, -1.5, 2.0])
    value, g = llgrad.differentiate(fn).value_and_grad(x)
    assert value == pytest.approx(fn(x), rel=1e-14)
    np.testing.assert_allclose(g, finite_differences(fn, [x], (0,))[0], atol=1e-8)


# ---- contexts that only set how errors and warnings are reported -------------------------------
def rodrigues_errstate(rot_vecs, points):
    theta = np.linalg.norm(rot_vecs, axis=1)[:, np.newaxis]
    with np.errstate(invalid="ignore"):  # (the SciPy cookbook's bundle adjustment)
        v = np.nan_to_num(rot_vecs / theta)
        if np.sum(theta) > 0.0:
            v = v * 1.0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        c = np.cos(theta)
    return np.sum(c * points + np.sin(theta) * np.cross(v, points))


def test_errstate_and_catch_warnings_may_surround_traced_code(mode):
    """`with np.errstate(...)` was refused as a `with` on traced values; it and
    warnings.catch_warnings only set how errors and warnings are reported."""
    r, p = np.array([[0.1, 0.2, -0.3], [0.0, 0.0, 0.0]]), np.array([[1.0, 2.0, 3.0]] * 2)
    d = llgrad.differentiate(rodrigues_errstate)
    value, g = d.value_and_grad(r, p)
    with np.errstate(invalid="ignore"):
        assert value == pytest.approx(rodrigues_errstate(r, p), rel=1e-14)
        fd = finite_differences(rodrigues_errstate, [r, p], (0,))[0]
    np.testing.assert_allclose(g[0], fd[0], atol=1e-8)  # (the zero vector: no gradient)
    assert d.inspect(r, p).path == "staged"
