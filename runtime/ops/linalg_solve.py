"""Solving with matrices: the cholesky, triangular_solve, solve, inv and slogdet primitives
(numpy/scipy eagerly, LAPACK in compiled code: codegen/lowerings/linalg.py), the composites
det and cholesky_solve (one eager node each, decomposed for the compiler), and the functions
built on them (PyTorch's names; broadcasting batch dimensions).

Primitives take stacks of matrices (..., n, n) and (..., n, k) with equal batch dimensions and
one float dtype. VJP rules are the standard matrix identities written with these ops, so they
run eagerly, on IR values and differentiably under create_graph. See Note [Symmetric
gradients].
"""
from __future__ import annotations

import numpy as np

from llgrad.runtime.aval import Aval, aval_str
from llgrad.runtime.errors import DTypeError, LinAlgError, ShapeError, user_loc
from llgrad.runtime.ops import elementwise as ew
from llgrad.runtime.ops._util import dtype_of, operands, shape_of
from llgrad.runtime.ops.linalg import matmul
from llgrad.runtime.ops.shape import broadcast_to, reshape, swapaxes
from llgrad.runtime.ops.structure import tril, triu
from llgrad.runtime.prim import Primitive, bind, register

# Note [Symmetric gradients]
# numpy's cholesky and eigh read one triangle of their input (the lower one by default) and
# assume the matrix is symmetric. Their gradients here are those of f((A + A^T) / 2): a
# symmetric matrix, as in JAX, PyTorch and HIPS autograd. Where the input is symmetric by
# construction (a kernel matrix, X^T X + c I), every perturbation of the parameters moves it
# symmetrically, so the chain rule through it gives the exact derivative. Finite differences of
# the raw function, perturbing one entry of one triangle, measure something else (twice the
# off-diagonal entries of one triangle, none of the other's); the tests perturb symmetrically.


# ---- shape rules --------------------------------------------------------------------------------
def _need_float(name: str, *avals) -> None:
    for a in avals:
        if np.dtype(a.dtype) not in (np.float32, np.float64):
            raise DTypeError(f"{name}: expected float32 or float64 matrices, got "
                             f"{aval_str(a.shape, a.dtype)}",
                             fix="cast the operand with .astype(np.float64)")


def need_square(name: str, a) -> int:
    """n for a stack of n x n matrices `a` (an Aval or value); a ShapeError otherwise."""
    s = tuple(a.shape)
    if len(s) < 2 or s[-1] != s[-2]:
        raise ShapeError(f"{name}: expected a square matrix (or a stack of them, shape "
                         f"(..., n, n)), got {aval_str(s, _dt(a))}",
                         fix="only square matrices have an inverse, a determinant, a Cholesky "
                         "factor or symmetric eigenvalues; check which axes hold the matrix")
    return s[-1]


def _dt(a):
    return a.dtype if isinstance(a, Aval) else dtype_of(a)


def _square_rule(name):
    def rule(a, **params):
        need_square(name, a)
        _need_float(name, a)
        return Aval(tuple(a.shape), a.dtype)
    return rule


def _system_rule(name):
    """(..., n, n) and (..., n, k) with equal batch dims and dtypes -> (..., n, k)."""
    def rule(a, b, **params):
        n = need_square(name, a)
        _need_float(name, a, b)
        if len(b.shape) < 2 or tuple(b.shape[:-2]) != tuple(a.shape[:-2]) or b.shape[-2] != n \
                or a.dtype != b.dtype:
            raise ShapeError(f"{name}: the matrix {aval_str(a.shape, a.dtype)} and the right-hand "
                             f"side {aval_str(b.shape, b.dtype)} do not fit (it needs {n} rows)",
                             fix="the right-hand side has one row per row of the matrix")
        return Aval(tuple(b.shape), b.dtype)
    return rule


def _numpy_errors(fn):
    """`fn` (an impl) raising numpy's LinAlgError as llgrad's, located at the user's line."""
    def impl(*args, **params):
        try:
            return fn(*args, **params)
        except np.linalg.LinAlgError as e:
            raise LinAlgError.numpy(str(e), user_loc()) from None
    return impl


def mT(x):
    """The matrix transpose of a stack of matrices (a view)."""
    return swapaxes(x, -1, -2)


def _eye(x):
    n = shape_of(x)[-1]
    return np.eye(n, dtype=dtype_of(x))


def _batched(fn, *arrays):
    """fn applied to each matrix of equally batched stacks (scipy's 2-D routines)."""
    batch = arrays[0].shape[:-2]
    if not batch:
        return fn(*arrays)
    outs = [fn(*(a[i] for a in arrays)) for i in np.ndindex(batch)]
    return np.stack(outs).reshape(batch + outs[0].shape)


# ---- cholesky -----------------------------------------------------------------------------------
def _cholesky_vjp(g, out, a):
    # Murray 2016 (arXiv:1602.07527): gA = sym(L^-T Phi(L^T gL) L^-1), Phi = tril with the
    # diagonal halved; symmetric (Note [Symmetric gradients]).
    n = shape_of(out)[-1]
    phi = (np.tri(n) - 0.5 * np.eye(n)).astype(dtype_of(out))
    p = ew.mul(matmul(mT(out), g), phi)
    s = triangular_solve(out, p, lower=True, trans=True)             # L^-T P
    s = mT(triangular_solve(out, mT(s), lower=True, trans=True))     # (L^-T P) L^-1
    return ew.mul(ew.add(s, mT(s)), 0.5)


cholesky_p = register(Primitive(
    "cholesky", "linalg", _numpy_errors(np.linalg.cholesky), _square_rule("cholesky"),
    (_cholesky_vjp,), node_name="LinalgCholeskyExBackward0"))


# ---- triangular_solve: op(A) X = B, A triangular ------------------------------------------------
def _trsolve_impl(a, b, lower, trans, unit_diagonal):
    if a.shape[-1] == 0 or b.shape[-1] == 0:
        return np.zeros(b.shape, b.dtype)
    from scipy.linalg import solve_triangular
    return _batched(lambda a2, b2: solve_triangular(
        a2, b2, trans=int(trans), lower=lower, unit_diagonal=unit_diagonal,
        check_finite=False), a, b)


def _triangle(x, lower, unit_diagonal):
    """The part of `x` a triangular solve reads (its gradient lives there only)."""
    k = 1 if unit_diagonal else 0
    return tril(x, -k) if lower else triu(x, k)


def _trsolve_vjp_a(g, out, a, b, lower, trans, unit_diagonal):
    gb = triangular_solve(a, g, lower, not trans, unit_diagonal)
    ga = matmul(gb, mT(out)) if not trans else matmul(out, mT(gb))
    return ew.neg(_triangle(ga, lower, unit_diagonal))


triangular_solve_p = register(Primitive(
    "triangular_solve", "linalg", _numpy_errors(_trsolve_impl),
    _system_rule("triangular_solve"),
    (_trsolve_vjp_a,
     lambda g, out, a, b, lower, trans, unit_diagonal: triangular_solve(
         a, g, lower, not trans, unit_diagonal)),
    node_name="LinalgSolveTriangularBackward0"))


def triangular_solve(a, b, lower: bool, trans: bool = False, unit_diagonal: bool = False):
    """X with op(A) X = B (op(A) = A^T when `trans`), reading only A's lower or upper
    triangle (and not its diagonal when `unit_diagonal`): the primitive, equal batch dims."""
    return bind(triangular_solve_p, a, b, lower=bool(lower), trans=bool(trans),
                unit_diagonal=bool(unit_diagonal))


# ---- solve, inv, slogdet --------------------------------------------------------------------------
solve_p = register(Primitive(
    "solve", "linalg", _numpy_errors(np.linalg.solve), _system_rule("solve"),
    (lambda g, out, a, b: ew.neg(matmul(bind(solve_p, mT(a), g), mT(out))),
     lambda g, out, a, b: bind(solve_p, mT(a), g)),
    node_name="LinalgSolveExBackward0"))

inv_p = register(Primitive(
    "inv", "linalg", _numpy_errors(np.linalg.inv), _square_rule("inv"),
    (lambda g, out, a: ew.neg(matmul(matmul(mT(out), g), mT(out))),),
    node_name="LinalgInvExBackward0"))


def _slogdet_impl(a):
    sign, logabsdet = np.linalg.slogdet(a)
    return np.asarray(sign), np.asarray(logabsdet)


def _slogdet_rule(a):
    need_square("slogdet", a)
    _need_float("slogdet", a)
    batch = Aval(tuple(a.shape[:-2]), a.dtype)
    return batch, batch


def _times_inv_t(g, a):
    """g (one number per matrix) times A^-T: the gradient of log|det A| scaled by g."""
    return ew.mul(reshape(g, shape_of(g) + (1, 1)), mT(bind(inv_p, a)))


slogdet_p = register(Primitive(
    "slogdet", "linalg", _slogdet_impl, _slogdet_rule,
    (lambda g, out, a: None if g[1] is None else _times_inv_t(g[1], a),),
    multiple_results=True, node_name="LinalgSlogdetBackward0"))


def _det_decompose(a):
    sign, logabsdet = bind(slogdet_p, a)
    return ew.mul(sign, ew.exp(logabsdet))  # numpy's det is sign * exp(logabsdet) too


det_p = register(Primitive(
    "det", "linalg", lambda a: np.asarray(np.linalg.det(a)),
    lambda a: _slogdet_rule(a)[0], (lambda g, out, a: _times_inv_t(ew.mul(g, out), a),),
    decompose=_det_decompose, node_name="LinalgDetBackward0"))


# ---- cholesky_solve: (L L^T) X = B, or (U^T U) X = B ----------------------------------------
def _cho_solve(b, l_, upper, solve):
    y = solve(l_, b, not upper, upper)  # L Y = B, or U^T Y = B
    return solve(l_, y, not upper, not upper)


def _cho_solve_vjp_l(g, out, b, l_, upper):
    # A = L L^T: gA = -A^-1 g X^T (A symmetric), gL = (gA + gA^T) L; only L's triangle is
    # read (the other may hold anything, as scipy's cho_factor leaves it)
    c = matmul(bind(cholesky_solve_p, g, l_, upper=upper), mT(out))
    c = ew.add(c, mT(c))
    t = _triangle(l_, not upper, False)
    return ew.neg(_triangle(matmul(t, c) if upper else matmul(c, t), not upper, False))


cholesky_solve_p = register(Primitive(
    "cholesky_solve", "linalg",
    lambda b, l_, upper: _cho_solve(b, l_, upper, lambda a, r, lo, t: _numpy_errors(
        _trsolve_impl)(a, r, lo, t, False)),
    lambda b, l_, upper: _system_rule("cholesky_solve")(l_, b),
    (lambda g, out, b, l_, upper: bind(cholesky_solve_p, g, l_, upper=upper),
     _cho_solve_vjp_l),
    decompose=lambda b, l_, upper: _cho_solve(b, l_, upper, triangular_solve),
    node_name="CholeskySolveBackward0"))


# ---- the functions (PyTorch's names and argument conventions) ---------------------------------
def _matrices(name, *xs):
    """Operands promoted to one float dtype (ints -> float64, as numpy's linalg does)."""
    xs, dt = operands(*xs)
    if dt.kind in "biu":
        xs, dt = [ew.astype(x, np.float64) for x in xs], np.dtype(np.float64)
    for x in xs:
        _need_float(name, Aval(shape_of(x), dt))
    return xs


def _need_rows(name, a, b, vector: bool) -> None:
    n, sb = need_square(name, a), shape_of(b)
    if (sb[-1:] if vector else sb[-2:-1]) != (n,):
        raise ShapeError(f"{name}: the matrix {aval_str(shape_of(a), dtype_of(a))} and the "
                         f"right-hand side {aval_str(sb, dtype_of(b))} do not fit (it needs {n} "
                         f"rows)", fix="the right-hand side has one row per row of the matrix"
                         + ("" if vector else ", and is a matrix (..., n, k)"))


def broadcast_batch(name, a, b):
    """a (..., n, n) and b (..., n, k) with their batch dimensions broadcast."""
    sa, sb = shape_of(a), shape_of(b)
    _need_rows(name, a, b, False)
    try:
        batch = tuple(np.broadcast_shapes(sa[:-2], sb[:-2]))
    except ValueError:
        raise ShapeError(f"{name}: batch dimensions of {aval_str(sa, dtype_of(a))} and "
                         f"{aval_str(sb, dtype_of(b))} cannot be broadcast") from None
    return broadcast_to(a, batch + sa[-2:]), broadcast_to(b, batch + sb[-2:])


def _rhs(name, a, b, vector: bool, fn):
    """fn(A, B) for a right-hand side that may be a vector (solved as one column)."""
    a, b = _matrices(name, a, b)
    _need_rows(name, a, b, vector)
    if vector:
        b = reshape(b, shape_of(b) + (1,))
    a, b = broadcast_batch(name, a, b)
    x = fn(a, b)
    return reshape(x, shape_of(x)[:-1]) if vector else x


def cholesky(a, upper: bool = False):
    """The lower (or upper) Cholesky factor; reads that triangle of `a`."""
    a, = _matrices("cholesky", a)
    if upper:
        return mT(bind(cholesky_p, mT(a)))
    return bind(cholesky_p, a)


def solve_triangular(a, b, *, upper: bool, left: bool = True, unitriangular: bool = False):
    """torch.linalg.solve_triangular: X with A X = B (or X A = B when not `left`)."""
    a, b = _matrices("solve_triangular", a, b)
    if left:
        return _rhs("solve_triangular", a, b, False, lambda a, b: triangular_solve(
            a, b, not upper, False, unitriangular))
    # X A = B  <=>  A^T X^T = B^T
    return mT(_rhs("solve_triangular", a, mT(b), False, lambda a, bt: triangular_solve(
        a, bt, not upper, True, unitriangular)))


def solve(a, b, *, left: bool = True):
    """torch.linalg.solve: B is a (batch of) vector(s) when B.ndim == 1 or B.shape equals
    A.shape[:-1]."""
    a, b = _matrices("solve", a, b)
    sa, sb = shape_of(a), shape_of(b)
    if not left:  # X A = B  <=>  A^T X^T = B^T
        return mT(_rhs("solve", mT(a), mT(b), False, lambda a, b: bind(solve_p, a, b)))
    vector = len(sb) == 1 or (len(sb) == len(sa) - 1 and sb == sa[:-1])
    return _rhs("solve", a, b, vector, lambda a, b: bind(solve_p, a, b))


def inv(a):
    a, = _matrices("inv", a)
    return bind(inv_p, a)


def det(a):
    a, = _matrices("det", a)
    return bind(det_p, a)


def slogdet(a):
    """(sign, log|det A|) as a namedtuple (`sign`, `logabsdet`), as numpy and PyTorch."""
    from llgrad.runtime.ops.linalg_spectral import SlogdetResult
    a, = _matrices("slogdet", a)
    return SlogdetResult(*bind(slogdet_p, a))


def cholesky_solve(B, L, upper: bool = False):
    """torch.cholesky_solve: X with (L L^T) X = B given the Cholesky factor L (or, when
    `upper`, with (U^T U) X = B); reads only L's triangle."""
    B, L = _matrices("cholesky_solve", B, L)
    L, B = broadcast_batch("cholesky_solve", L, B)
    return bind(cholesky_solve_p, B, L, upper=bool(upper))


def matrix_power(a, n: int):
    """A^n by repeated squaring (numpy's order of products); inv(A)^|n| for n < 0."""
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)):
        raise TypeError(f"matrix_power: the exponent must be an integer, got {n!r}")
    a, = _matrices("matrix_power", a)
    need_square("matrix_power", a)
    n = int(n)
    if n == 0:  # the identity (numpy's, even where A holds inf or nan); no gradient
        return ew.where(True, _eye(a), ew.stop_gradient(a))
    if n < 0:
        a, n = inv(a), -n
    if n <= 3:
        return a if n == 1 else matmul(a, a) if n == 2 else matmul(matmul(a, a), a)
    z = result = None
    while n > 0:
        z = a if z is None else matmul(z, z)
        n, bit = divmod(n, 2)
        if bit:
            result = z if result is None else matmul(result, z)
    return result
