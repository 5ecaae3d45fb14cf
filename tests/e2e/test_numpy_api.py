"""The numpy surface on traced values: every function llgrad dispatches
(runtime/numpy_api.FUNCTIONS) is exercised by a use case (tests/usecases.py), and numpy
functions outside it are errors naming the function, never a silent fallback."""
from __future__ import annotations

import inspect
import re

import numpy as np
import pytest

import llgrad
from llgrad.runtime.errors import DTypeError, UnsupportedError
from llgrad.runtime.numpy_api import CONVERSIONS, FUNCTIONS, LAZY, numpy_name
from tests import usecases, usecases_math
from tests.e2e.conftest import finite_differences

# names a use case may spell differently (aliases of one numpy object)
ALIASES = {"np.absolute": ("np.abs(", "np.absolute("), "np.amax": ("np.amax(", "np.max("),
           "np.amin": ("np.amin(", "np.min(")}


def _usecase_source() -> str:
    from tests import usecases_linalg, usecases_shape
    return (inspect.getsource(usecases) + inspect.getsource(usecases_shape)
            + inspect.getsource(usecases_math) + inspect.getsource(usecases_linalg))


# (scipy's names wait in LAZY until scipy is imported; CONVERSIONS are called by the tracer)
# (methods refused by name, scipy.stats.t.ppf, are errors naming what is supported)
SUPPORTED = ({numpy_name(f) for f, g in list(FUNCTIONS.items()) + list(CONVERSIONS.items())
              if not getattr(g, "refused", False)}
             | {n.replace(":", ".") for n, g in LAZY.items()
                if not getattr(g, "refused", False)})  # ("scipy.stats:norm.cdf")


@pytest.mark.parametrize("name", sorted(SUPPORTED))
def test_every_supported_numpy_function_has_a_usecase(name):
    src = _usecase_source()
    spellings = ALIASES.get(name, (name + "(",))
    assert any(s in src for s in spellings), f"no use case calls {name}; add one to " \
                                             f"tests/usecases.py"


OPERATORS = ["+", "-", "*", "/", "**", "@", "%", "//", "<", "<=", ">", ">=", "==", "!=", "&",
             "|", "~", "abs(", "len(", ".T", ".shape", ".reshape(", ".transpose(", "[idx]",
             "[:, None]", "[1:-1]", "math."]


@pytest.mark.parametrize("op", OPERATORS)
def test_every_operator_has_a_usecase(op):
    src = _usecase_source().split("# ---- elementwise ufuncs")[1]
    assert op in src


# numpy functions commonly used in numeric code that llgrad does not support: each is an
# error naming it and the user's line (see test_compile_errors.py for the full message)
UNSUPPORTED = [
    (lambda x: np.nanmedian(x), "np.nanmedian"), (lambda x: np.digitize(x, x), "np.digitize"),
    (lambda x: np.unique(x), "np.unique"),
    (lambda x: np.fft.hfft(x), "np.fft.hfft"), (lambda x: np.frexp(x)[0], "np.frexp"),
    (lambda x: np.i0(x), "np.i0"), (lambda x: np.trim_zeros(x), "np.trim_zeros"),
    (lambda x: np.partition(x, 1), "np.partition"),
    (lambda x: np.maximum.reduceat(x, [0, 2]), "np.maximum.reduceat"),
    (lambda x: np.subtract.accumulate(x), "np.subtract.accumulate"),
    (lambda x: np.spacing(x), "np.spacing"),
    (lambda x: np.nextafter(x, 2.0), "np.nextafter"), (lambda x: np.sort_complex(x), "np.sort_complex"),
    (lambda x: np.float_power(x, 2.0), "np.float_power"),
    (lambda x: np.ldexp(x, 2), "np.ldexp"),
    (lambda x: x[np.where(x > 0.7)], "np.where(condition) with one argument"),
]


def _unsupported_case(k):
    fn, _ = UNSUPPORTED[k]

    def f(x):
        return np.sum(fn(x))
    return f


@pytest.mark.parametrize("k", range(len(UNSUPPORTED)), ids=[n for _, n in UNSUPPORTED])
def test_unsupported_numpy_functions_raise_naming_them(k):
    name = UNSUPPORTED[k][1]
    with pytest.raises(UnsupportedError, match=re.escape(name) + " is not supported"):
        llgrad.differentiate(_unsupported_case(k)).grad(np.linspace(0.5, 1.0, 4))


@pytest.mark.parametrize("k", range(len(UNSUPPORTED)), ids=[n for _, n in UNSUPPORTED])
def test_unsupported_numpy_functions_raise_in_the_eager_runtime_too(k):
    name = UNSUPPORTED[k][1]
    x = llgrad.tensor(np.linspace(0.5, 1.0, 4), requires_grad=True)
    with pytest.raises(UnsupportedError, match=re.escape(name) + " is not supported"):
        UNSUPPORTED[k][0](x)


def test_creation_functions_inside_are_constants():
    @llgrad.differentiate
    def f(x):
        return np.sum(x * np.arange(4.0) + np.eye(4)[0] + np.full(4, 2.0) * np.zeros(4))
    x = np.ones(4)
    assert f(x) == pytest.approx(np.sum(x * np.arange(4.0)) + 1.0)
    np.testing.assert_allclose(f.grad(x), np.arange(4.0))


def test_keyword_spellings():
    @llgrad.differentiate
    def f(m):
        return (np.sum(a=m, axis=-1, keepdims=True).sum() + np.clip(m, a_min=0.0, a_max=0.5).sum()
                + np.reshape(m, shape=(-1,))[0] + np.concatenate((m, m), axis=-1).sum()
                + np.stack([m[0], m[1]], axis=-1).sum() + np.mean(m, axis=(0, 1))
                + m.clip(min=0.25).sum() + m.clip(max=0.5).sum() + m.clip(-0.5, 0.5).sum())
    m = np.linspace(-1.0, 1.0, 12).reshape(3, 4)
    assert f(m) == pytest.approx(f.fn(m))


def test_norms_of_more_than_two_axes_are_refused():
    t = np.ones((2, 2, 2))
    with pytest.raises(ValueError, match="improper number of dimensions to norm"):
        llgrad.differentiate(lambda a: np.linalg.norm(a, axis=(0, 1, 2))).grad(t)
    with pytest.raises(ValueError, match="Invalid norm order 'fro' for vectors"):
        llgrad.differentiate(lambda a: np.linalg.norm(a, "fro", axis=0)).grad(t)


@pytest.mark.parametrize("fn", [np.bitwise_and, np.bitwise_xor, np.invert])
def test_bitwise_functions_on_integers_are_refused_at_the_users_line(fn):
    # logical on booleans (a use case); bitwise on integers, which llgrad does not compute
    def f(x):
        k = (x > 0).astype(np.int64)
        return np.sum(x * fn(k) if fn is np.invert else x * fn(k, k))

    with pytest.raises(DTypeError, match=rf"np\.{fn.__name__} on int64: llgrad "
                       r"computes it on booleans only(.|\n)*test_numpy_api\.py"):
        llgrad.differentiate(f)(np.ones(3))


def test_poly1d_of_traced_coefficients_names_polyval():
    """numpy's poly1d trims its coefficients by value (the error named np.trim_zeros)."""
    with pytest.raises(UnsupportedError, match=r"(?s)np.poly1d of traced coefficients.*"
                                               r"test_numpy_api.py.*np.polyval"):
        llgrad.grad(lambda c: np.sum(np.poly1d(c)(np.arange(3.0))))(np.ones(3))
    x = np.arange(3.0)  # a poly1d of constants is numpy's own
    assert llgrad.differentiate(lambda c: np.sum(np.poly1d([1.0, 2.0])(x) * c))(
        np.ones(3)) == pytest.approx(np.sum(np.poly1d([1.0, 2.0])(x)))


def test_bincount_of_traced_indices_is_refused_naming_add_at():
    """Its length would depend on the indices' values (constant indices are supported:
    tests/usecases_shape.py bincount_weights)."""
    with pytest.raises(UnsupportedError, match=r"(?s)np.bincount of traced indices.*"
                                               r"test_numpy_api.py.*np.add.at"):
        llgrad.grad(lambda w, i: np.sum(np.bincount(i, weights=w)))(np.ones(4),
                                                                    np.array([0, 1, 1, 3]))


def test_array_attributes_people_read(mode):
    """x.mT, x.flat[k] (reads), x.itemsize, x.nbytes and x.strides (of a C-contiguous array,
    as a fresh numpy array has) on traced values; writes through x.flat are refused."""
    def f(x):
        return (x.flat[4] * x.itemsize + np.sum(x.mT[0] ** 2) + x.nbytes
                + sum(v * v for v in x.flat) + x.strides[0] / x.strides[1] + len(x.flat))

    x = np.arange(6.0).reshape(2, 3)
    value, grad = llgrad.value_and_grad(f)(x)
    assert value == pytest.approx(f(x))
    np.testing.assert_allclose(grad, finite_differences(f, (x,), (0,))[0], rtol=1e-6)

    def write(x):
        x.flat[0] = 1.0
        return x.sum()

    with pytest.raises(UnsupportedError, match="x.flat.k. = v changes x in place"):
        llgrad.grad(write)(x)
    with pytest.raises(UnsupportedError, match="np.nonzero is not supported"):
        llgrad.grad(lambda x: np.sum(x[x.nonzero()]))(x)
