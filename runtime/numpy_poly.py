"""Polynomials on llgrad values, with numpy's signatures: np.vander, np.polyfit, np.polyder,
np.polyint, np.polyadd, np.polysub, np.polymul and numpy.polynomial.polynomial's polyvander,
polyval and polyfit. Each is numpy's own formula over existing primitives (powers by repeated
multiplication, the least-squares solve of the column-scaled Vandermonde matrix by
np.linalg.lstsq), so values are numpy's and gradients follow. A rank-deficient fit is an error (lstsq's, Note in runtime/numpy_linalg.py) where
numpy warns. `FUNCTIONS` joins runtime/numpy_api.FUNCTIONS; numpy.polynomial's functions do
not dispatch to llgrad (the tracer calls them: runtime/numpy_api `traced_forms`) and are named
lazily, `LAZY` (numpy.polynomial loads on first use: Note [Lazily named functions])."""
from __future__ import annotations

import numpy as np

from llgrad.runtime import ops
from llgrad.runtime.errors import UnsupportedError, user_loc
from llgrad.runtime.numpy_linalg import _np_lstsq
from llgrad.runtime.ops._util import as_operand, dtype_of, shape_of


def _operand(x):
    return as_operand(x) if not isinstance(x, (list, tuple)) else np.asarray(x)


def _floating(x):
    x = _operand(x)
    return x if dtype_of(x).kind == "f" else ops.astype(x, np.float64)


def _powers(x, n: int):
    """The (len(x), n) matrix of x^0, x^1, ..., x^(n-1), each power the previous times x (as
    numpy's vander and polyvander compute them)."""
    m = shape_of(x)[0]
    ones = np.ones((m, min(n, 1)), dtype_of(x))
    if n <= 1:
        return ops.add(ones, ops.mul(ops.reshape(x, (m, 1)), 0)) if n else ones
    rep = ops.broadcast_to(ops.reshape(x, (m, 1)), (m, n - 1))
    return ops.concatenate([ones, ops.cumprod(rep, 1)], 1)


def vander(x, N=None, increasing=False):
    """np.vander: the columns x^(N-1), ..., x, 1 (x^0 first when increasing)."""
    x = _operand(x)
    if len(shape_of(x)) != 1:
        raise ValueError("x must be a one-dimensional array or sequence.")
    v = _powers(x, shape_of(x)[0] if N is None else int(N))
    return v if increasing else ops.flip(v, 1)


def _fit(x, y, deg, rcond, full, w, increasing: bool, name: str):
    """numpy's least-squares polynomial fit: lstsq of the Vandermonde matrix (weighted rows),
    its columns scaled to unit norm; coefficients highest power first unless `increasing`."""
    if np.ndim(deg) != 0:
        raise UnsupportedError(f"{name} with a list of degrees is not supported on llgrad "
                               "values", loc=user_loc(), fix="pass the highest degree")
    order = int(deg) + 1
    x, y = _floating(x), _floating(y)
    if deg < 0:
        raise ValueError("expected deg >= 0")
    if len(shape_of(x)) != 1:
        raise TypeError("expected 1D vector for x")
    if shape_of(x)[0] == 0:
        raise TypeError("expected non-empty vector for x")
    if len(shape_of(y)) not in (1, 2):
        raise TypeError("expected 1D or 2D array for y")
    if shape_of(x)[0] != shape_of(y)[0]:
        raise TypeError("expected x and y to have same length")
    if rcond is None:
        rcond = shape_of(x)[0] * np.finfo(dtype_of(x)).eps
    lhs, rhs = _powers(x, order), y
    if not increasing:
        lhs = ops.flip(lhs, 1)
    if w is not None:
        w = _floating(w)
        if len(shape_of(w)) != 1:
            raise TypeError("expected a 1-d array for weights")
        if shape_of(w)[0] != shape_of(y)[0]:
            raise TypeError("expected w and y to have the same length")
        col = ops.reshape(w, (-1, 1))
        lhs, rhs = ops.mul(lhs, col), ops.mul(rhs, col if len(shape_of(y)) == 2 else w)
    scale = ops.sqrt(ops.sum(ops.mul(lhs, lhs), 0))
    if increasing:  # numpy.polynomial leaves a zero column as it is
        scale = ops.where(ops.eq(scale, 0.0), 1.0, scale)
    c, resids, rank, s = _np_lstsq(ops.div(lhs, scale), rhs, rcond)
    c = ops.div(c, scale if len(shape_of(c)) == 1 else ops.reshape(scale, (-1, 1)))
    if not full:
        return c
    return (c, [resids, rank, s, rcond]) if increasing else (c, resids, rank, s, rcond)


def polyfit(x, y, deg, rcond=None, full=False, w=None, cov=False):
    """np.polyfit (cov=False): the least-squares coefficients, highest power first."""
    if cov:
        raise UnsupportedError("np.polyfit(cov=True) is not supported on llgrad values",
                               loc=user_loc(), fix="leave cov=False")
    return _fit(x, y, deg, rcond, full, w, False, "np.polyfit")


def poly_polyfit(x, y, deg, rcond=None, full=False, w=None):
    """numpy.polynomial.polynomial.polyfit: the coefficients, lowest power first."""
    return _fit(x, y, deg, rcond, full, w, True, "numpy.polynomial.polynomial.polyfit")


def poly_polyval(x, c, tensor=True):
    """numpy.polynomial.polynomial.polyval: sum_k c[k] x^k by Horner's rule, as numpy; with
    c n-D and tensor=True, each column of c evaluated at every x."""
    c, x = _floating(c), _operand(x)
    if len(shape_of(c)) > 1 and tensor:
        c = ops.reshape(c, tuple(shape_of(c)) + (1,) * len(shape_of(x)))
    y = ops.add(c[-1], ops.mul(x, 0))
    for i in range(2, shape_of(c)[0] + 1):
        y = ops.add(c[-i], ops.mul(y, x))
    return y


def poly_polyvander(x, deg):
    """numpy.polynomial.polynomial.polyvander: the columns 1, x, ..., x^deg."""
    x = _floating(x)
    return ops.reshape(_powers(ops.reshape(x, (-1,)), int(deg) + 1),
                       tuple(shape_of(x)) + (int(deg) + 1,))


def polyder(p, m=1):
    """np.polyder: the m-th derivative's coefficients (highest power first)."""
    m = int(m)
    if m < 0:
        raise ValueError("Order of derivative must be positive (see polyint)")
    p = _operand(p)
    for _ in range(m):
        n = shape_of(p)[0] - 1
        p = ops.mul(p[:-1], np.arange(n, 0, -1))
    return p


def polyint(p, m=1, k=None):
    """np.polyint: the m-th antiderivative's coefficients, integration constants k."""
    m = int(m)
    if m < 0:
        raise ValueError("Order of integral must be positive (see polyder)")
    k = np.zeros(m) if k is None else k
    k = ops.reshape(_operand(k), (-1,))
    if shape_of(k)[0] == 1 and m > 1:
        k = ops.broadcast_to(k, (m,))
    if shape_of(k)[0] < m:
        raise ValueError("k must be a scalar or a rank-1 array of length 1 or >m.")
    p = _operand(p)
    for i in range(m):
        p = ops.concatenate([ops.div(p, np.arange(shape_of(p)[0], 0, -1)), k[i:i + 1]], 0)
    return p


def _aligned(a1, a2):
    """a1 and a2 (1-D) padded at the front with zeros to one length."""
    a1, a2 = ops.reshape(_operand(a1), (-1,)), ops.reshape(_operand(a2), (-1,))
    d = shape_of(a2)[0] - shape_of(a1)[0]
    if d > 0:
        a1 = ops.concatenate([np.zeros(d, dtype_of(a1)), a1], 0)
    elif d < 0:
        a2 = ops.concatenate([np.zeros(-d, dtype_of(a2)), a2], 0)
    return a1, a2


def _roots(p):
    """np.roots is refused: its roots are complex in general (the eigenvalues of the
    companion matrix), and llgrad differentiates real results."""
    raise UnsupportedError(
        "np.roots is not supported on llgrad values: the roots of a polynomial are complex in "
        "general (eigenvalues of its companion matrix), and llgrad has no general eigenvalue "
        "solver or complex results", loc=user_loc(),
        fix="for a quadratic, write its roots with the formula (-b +- np.sqrt(b**2 - 4*a*c)) "
        "/ (2*a) where they are real; or compute the roots outside the differentiated "
        "function and differentiate a real function of them (implicit function theorem)")


_roots.refused = True  # (docs/numpy_support.md lists it as not supported)
FUNCTIONS = {
    np.roots: _roots,
    np.vander: vander, np.polyfit: polyfit, np.polyder: polyder, np.polyint: polyint,
    np.polyadd: lambda a1, a2: ops.add(*_aligned(a1, a2)),
    np.polysub: lambda a1, a2: ops.sub(*_aligned(a1, a2)),
    np.polymul: lambda a1, a2: np.convolve(*(ops.reshape(_operand(a), (-1,)) for a in (a1, a2))),
}
LAZY = {"numpy.polynomial.polynomial.polyfit": poly_polyfit,
        "numpy.polynomial.polynomial.polyval": poly_polyval,
        "numpy.polynomial.polynomial.polyvander": poly_polyvander}
