"""Every user-facing error of the straight-line compiler: what went wrong (pinned with
`match=`), where in the user's source (this file's file:line, not llgrad's), how to fix it."""
from __future__ import annotations

import functools
import inspect
import math
import re

import numpy as np
import pytest

import llgrad
from llgrad.runtime.errors import (ConcretizationError, DTypeError, LLGradError, ShapeError,
                                   UnsupportedError)


def where(fn, marker: str | None = None) -> str:
    """`file:line` of the first line of `fn` containing `marker` (default: its first line)."""
    lines, start = inspect.getsourcelines(fn)
    if marker is None:
        return f"{__file__}:{start}"
    for i, line in enumerate(lines):
        if marker in line:
            return f"{__file__}:{start + i}"
    raise AssertionError(f"{marker!r} not in {fn.__name__}")


def assert_points_at(exc: pytest.ExceptionInfo, fn, marker=None) -> None:
    msg = str(exc.value)
    loc = where(fn, marker)
    assert loc in msg, f"expected {loc} in the message:\n{msg}"
    assert "/llgrad/" not in msg.split("How to fix")[0].replace(loc, ""), msg


X = np.linspace(0.5, 2.0, 4)
M = np.ones((3, 4))


# ---- the differentiated output must be a scalar ------------------------------------------
def vector_out(x):
    y = np.sin(x)
    return y * 2  # the vector result


def two_outputs(x):
    return np.sum(x), x ** 2  # two results


def test_non_scalar_output_names_the_shape():
    f = llgrad.differentiate(vector_out)
    np.testing.assert_allclose(f(X), vector_out(X))  # the value is fine
    with pytest.raises(ShapeError, match=r"vector_out must return a scalar to be "
                       r"differentiated; it returned f64\[4\]") as e:
        f.grad(X)
    assert_points_at(e, vector_out, "the vector result")
    assert "How to fix: reduce the output" in str(e.value)
    with pytest.raises(ShapeError, match=re.escape("it returned f64[], f64[4]")) as e:
        llgrad.value_and_grad(two_outputs)(X)
    assert_points_at(e, two_outputs, "two results")
    with pytest.raises(ShapeError, match=re.escape("it returned f32[4]")):
        f.grad(X.astype(np.float32))


# ---- unsupported numpy functions ---------------------------------------------------------
def uses_fft(x):
    return np.sum(np.fft.hfft(x))  # (np.fft.fft is supported; its Hermitian form is not)


def uses_i0(x):
    return np.sum(np.i0(x))


def uses_eig(m):
    return np.sum(np.linalg.eig(m)[0])


def uses_ufunc_method(x):
    return np.sum(np.add.reduceat(x, [0, 2]))


def uses_spacing(x):
    return np.sum(np.spacing(x))


def uses_digitize(x):
    return np.sum(x[np.digitize(x, x) - 1])


@pytest.mark.parametrize("fn,name,arg", [
    (uses_fft, "np.fft.hfft", X), (uses_i0, "np.i0", X),
    (uses_eig, "np.linalg.eig", np.eye(3) * 2), (uses_ufunc_method, "np.add.reduceat", X),
    (uses_digitize, "np.digitize", X), (uses_spacing, "np.spacing", X)],
    ids=lambda p: p if isinstance(p, str) else "")
def test_unsupported_numpy_function_names_it_and_the_line(fn, name, arg):
    with pytest.raises(UnsupportedError,
                       match=re.escape(name) + r" is not supported on llgrad values") as e:
        llgrad.differentiate(fn).grad(arg)
    assert_points_at(e, fn, "np.")
    assert "How to fix" in str(e.value)


def uses_out(x):
    y = np.empty(4)
    np.exp(x, out=y)
    return np.sum(y)


def uses_ufunc_where(x):
    return np.sum(np.exp(x, where=x > 1))


@pytest.mark.parametrize("fn,what,marker", [
    (uses_out, "out= is not supported", "out=y"),
    (uses_ufunc_where, "where=/dtype= ufunc arguments are not supported", "where=")],
    ids=["out=", "where="])
def test_unsupported_arguments_and_operators(fn, what, marker):
    with pytest.raises(UnsupportedError, match=re.escape(what)) as e:
        llgrad.differentiate(fn)(X)
    assert_points_at(e, fn, marker)


to_array = functools.partial(np.asarray)  # (a partial object runs unconverted: library code)


def converts_to_numpy(x):
    return np.sum(to_array(x) ** 2)


def _terms(x):
    return [x[0], x[1] * x[1], 2.0]


def sums_a_list_variable(x):
    terms = _terms(x)  # (a list the converter cannot see is one: `terms = [...]` would do)
    return np.sum(terms)


def test_conversion_to_numpy_array_is_an_error_not_a_lost_gradient():
    with pytest.raises(ConcretizationError, match="its gradient would be lost") as e:
        llgrad.differentiate(converts_to_numpy).grad(X)
    assert_points_at(e, converts_to_numpy, "to_array(x)")


def test_list_variable_passed_to_numpy_is_an_error_at_the_users_line():
    """numpy converts a list held in a variable itself (np.sum([...]) written out is built as
    an array): the error names the user's line, never a frame inside numpy, and the fix."""
    with pytest.raises(ConcretizationError, match=r"np\.array\(\[\.\.\.\]\)") as e:
        llgrad.differentiate(sums_a_list_variable).grad(X)
    assert_points_at(e, sums_a_list_variable, "np.sum(terms)")
    assert "numpy" not in str(e.value).split("\n")[1]


# ---- shape mismatches show both shapes ---------------------------------------------------
def add_mismatch(x, m):
    return np.sum(x + m[:, :3])


def matmul_mismatch(x, m):
    return np.sum(m @ x[:3])


def dot_mismatch(x, m):
    return np.sum(np.dot(x, m))


def concat_mismatch(x, m):
    return np.sum(np.concatenate([x, m]))


def reshape_mismatch(x, m):
    return np.sum(m.reshape(5, 2) @ x[:2])


def stack_mismatch(x, m):
    return np.sum(np.stack([x, m[0, :3]]))


def where_mismatch(x, m):
    return np.sum(np.where(x > 0, m[:, :3], x))


@pytest.mark.parametrize("fn,pattern", [
    (add_mismatch, r"shapes \[4\] and \[3, 3\]"),
    (matmul_mismatch, r"shapes \[3, 4\] and \[3\]"),
    (dot_mismatch, r"\[4\] and \[3, 4\]"),
    (concat_mismatch, r"f64\[4\], f64\[3,4\]"),
    (reshape_mismatch, r"\[3, 4\] into \[5, 2\]|12 elements into \(5, 2\)"),
    (stack_mismatch, r"f64\[4\], f64\[3\]"),
    (where_mismatch, r"\[4\].*\[3, 3\]|\[3, 3\].*\[4\]")],
    ids=lambda p: p.__name__ if callable(p) else "")
def test_shape_mismatch_shows_both_shapes(fn, pattern):
    with pytest.raises(ShapeError, match=pattern) as e:
        llgrad.differentiate(fn).grad(X, M)
    assert_points_at(e, fn, "return")


# ---- what can be differentiated ----------------------------------------------------------
def scaled(x, n, a=1.0):
    return np.sum(x ** 2) * n * a


def test_differentiating_wrt_an_int_argument():
    f = llgrad.differentiate(scaled, wrt=1)
    assert f(X, 3) == pytest.approx(scaled(X, 3))  # the value is fine
    with pytest.raises(DTypeError, match=r"cannot differentiate with respect to argument "
                       r"'n' \(static 3\).*static arguments such as ints have no gradient") as e:
        f.grad(X, 3)
    assert_points_at(e, scaled)
    assert "How to fix: pass n as a float" in str(e.value)
    with pytest.raises(DTypeError, match="argument 'n'"):
        llgrad.grad(scaled, argnums="n")(X, 3)
    # as a float it is differentiable
    assert llgrad.grad(scaled, argnums=1)(X, 3.0) == pytest.approx(np.sum(X ** 2))


def test_differentiating_wrt_an_int_array():
    with pytest.raises(DTypeError, match=r"argument 'x' of dtype int64") as e:
        llgrad.grad(scaled)(np.arange(4), 2)
    assert_points_at(e, scaled)
    assert "x.astype(np.float64)" in str(e.value)


@pytest.mark.parametrize("wrt,pattern", [
    ("q", r"wrt='q' is not a parameter of scaled \(parameters: x, n, a\)"),
    (("x", "y"), r"wrt='y' is not a parameter of scaled"),
    (3, r"wrt=3 is out of range for a call of scaled with 3 arguments")], ids=str)
def test_wrong_wrt(wrt, pattern):
    f = llgrad.differentiate(scaled, wrt=wrt)
    with pytest.raises(ValueError, match=pattern) as e:
        f.grad(X, 2)
    assert_points_at(e, scaled)


def test_wrt_of_a_wrong_type():
    with pytest.raises(TypeError, match=r"wrt must be an int, a parameter name, or a tuple"):
        llgrad.differentiate(scaled, wrt=1.5).grad(X, 2)


def returns_nothing(x):
    y = np.sum(x)  # noqa: F841


def returns_a_string(x):
    return "done"


@pytest.mark.parametrize("fn,what", [(returns_nothing, r"returned a NoneType \(a missing "
                                                        r"return statement\?\)"),
                                     (returns_a_string, r"returned a str")], ids=str)
def test_bad_return_values(fn, what):
    with pytest.raises(UnsupportedError, match=fn.__name__ + " " + what) as e:
        llgrad.differentiate(fn)(X)
    assert_points_at(e, fn)


def test_unsupported_argument_dtype():
    with pytest.raises(DTypeError, match=r"argument `x` is an array of dtype float16"):
        llgrad.differentiate(scaled)(X.astype(np.float16), 2)


def test_wrong_number_of_arguments():
    with pytest.raises(TypeError, match=r"scaled\(\): missing a required argument: 'n'"):
        llgrad.differentiate(scaled)(X)


def test_errors_are_llgrad_errors_with_a_fix():
    with pytest.raises(LLGradError) as e:
        llgrad.differentiate(uses_i0)(X)
    assert e.value.loc is not None and e.value.loc.line == int(where(uses_i0, "np.").rsplit(
        ":", 1)[1])
    assert e.value.fix


# ---- known bugs ---------------------------------------------------------------------------
def math_on_traced_scalar(x, a):
    return np.sum(x) * math.exp(a)


def test_math_on_a_traced_scalar_is_differentiated_or_an_error():
    f = llgrad.differentiate(math_on_traced_scalar, wrt=1)
    try:
        g = f.grad(X, 0.3)
    except LLGradError:
        return  # an error would be acceptable: never a silently wrong gradient
    assert g == pytest.approx(np.sum(X) * math.exp(0.3))
