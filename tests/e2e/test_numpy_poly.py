"""np.vander, np.polyfit and numpy.polynomial.polynomial's polyfit, polyval and polyvander
inside `llgrad.differentiate`: values against numpy, gradients against central differences
(float64), with respect to the data, the abscissae and the coefficients; and the errors."""
from __future__ import annotations

import numpy as np
import numpy.polynomial.polynomial as P
import pytest

import llgrad
from llgrad.runtime.errors import LinAlgError, UnsupportedError
from tests.e2e.conftest import compiled, finite_differences

R = np.random.default_rng(24)
Y = R.standard_normal(16)
X = np.arange(16.0)
W = R.uniform(0.5, 2.0, 16)
Y2 = R.standard_normal((16, 2))
C = R.standard_normal(4)


def fit(y):  # the brief's example
    return np.sum(np.polyfit(np.arange(16.0), y, 2) * [1.0, 2.0, 3.0])


def fit_weighted_full(y):
    c, res, rank, s, rcond = np.polyfit(X, y, 3, w=W, full=True)
    return np.sum(c) + res[0] + np.sum(s) + rank + rcond


def fit_traced_abscissae(x):
    return np.sum(np.polyfit(x, Y2, 2) ** 2)


def vanders(x):
    return (np.sum(np.vander(x, 4) * np.arange(4.0)) + np.sum(np.vander(x) ** 2)
            + np.sum(np.vander(x, 3, increasing=True)))


def poly_fit(y):
    c, (res, rank, s, rcond) = P.polyfit(X, y, 1, w=W, full=True)
    return np.sum(P.polyfit(X, y, 2) * [1.0, 2.0, 3.0]) + np.sum(c) + res[0]


def poly_values(c):
    return np.sum(P.polyval(Y, c) ** 2) + np.sum(P.polyval(Y[:3], np.outer(c, c[:2])))


def poly_at(x):
    return np.sum(P.polyval(x, C) ** 2) + np.sum(P.polyvander(x, 3) ** 2)


CASES = [(fit, Y), (fit_weighted_full, Y), (fit_traced_abscissae, X / 8 + 0.1 * Y),
         (vanders, Y[:5]), (poly_fit, Y), (poly_values, C), (poly_at, Y[:5])]


@pytest.mark.parametrize("fn,arg", CASES, ids=[c[0].__name__ for c in CASES])
def test_value_and_gradient(fn, arg):
    value, grad = compiled(fn, 0).value_and_grad(arg)
    assert value == pytest.approx(fn(arg), rel=1e-12)
    fd = finite_differences(fn, (arg,), (0,))[0]
    np.testing.assert_allclose(grad, fd, rtol=1e-6, atol=1e-7 * np.abs(fd).max())


def test_arrays_against_numpy(mode):
    for f, arg in [(lambda y: np.polyfit(X, y, 2, w=W), Y), (lambda y: np.polyfit(X, y, 1), Y2),
                   (lambda x: np.vander(x, 3), Y[:4]), (lambda y: P.polyfit(X, y, 3), Y),
                   (lambda c: P.polyval(Y[:5], c), C)]:
        np.testing.assert_allclose(llgrad.differentiate(f)(arg), f(arg), rtol=1e-11,
                                   atol=1e-13)


def test_errors():
    with pytest.raises(UnsupportedError, match=r"np.polyfit\(cov=True\)(.*\n)*.*"
                       r"test_numpy_poly.py:\d+"):
        llgrad.differentiate(lambda y: np.sum(np.polyfit(X, y, 2, cov=True)[0]))(Y)
    with pytest.raises(TypeError, match="expected x and y to have same length"):
        llgrad.differentiate(lambda y: np.sum(np.polyfit(X[:5], y, 2)))(Y)
    with pytest.raises(ValueError, match="expected deg >= 0"):
        llgrad.differentiate(lambda y: np.sum(np.polyfit(X, y, -1)))(Y)
    with pytest.raises(UnsupportedError, match="list of degrees"):
        llgrad.differentiate(lambda y: np.sum(P.polyfit(X, y, [0, 2])))(Y)
    # numpy warns of a rank-deficient fit (and returns a least-norm one); llgrad refuses it
    with pytest.raises(LinAlgError, match="rank-deficient"):
        llgrad.differentiate(lambda y: np.sum(np.polyfit(np.ones(16), y, 2)))(Y)
