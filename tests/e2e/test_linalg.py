"""numpy.linalg and scipy.linalg inside `llgrad.differentiate` (issue 11): each use against plain
numpy/scipy (value) and central differences (gradient), through the interpreter and natively;
a Gaussian-process marginal likelihood and a Bayesian linear regression evidence; batches,
float32, second derivatives; and the errors (LinAlgError at the user's line, compiled and
eager, and shape errors naming both shapes)."""
from __future__ import annotations

import re

import numpy as np
import pytest
import scipy.linalg as sl

import llgrad
from llgrad.runtime.errors import LinAlgError, ShapeError, UnsupportedError
from tests.e2e.conftest import compiled, finite_differences

R = np.random.default_rng(7)


def _spd(a):
    return a @ a.T + a.shape[0] * np.eye(a.shape[0])


# ---- the two models the issue names --------------------------------------------------------------
def gp_nlml(log_params, X, y):
    """Negative log marginal likelihood of a GP with an RBF kernel (lengthscale, signal and
    noise scale as logs): Cholesky and triangular solves, as GP code writes it."""
    ell, sf, sn = np.exp(log_params[0]), np.exp(log_params[1]), np.exp(log_params[2])
    d = X[:, None, :] - X[None, :, :]
    n = y.shape[0]
    K = sf ** 2 * np.exp(-0.5 * np.sum(d * d, axis=-1) / ell ** 2) + (sn ** 2) * np.eye(n)
    L = np.linalg.cholesky(K)
    alpha = sl.solve_triangular(L, y, lower=True)
    return 0.5 * alpha @ alpha + np.sum(np.log(np.diag(L))) + 0.5 * n * np.log(2 * np.pi)


def gp_nlml_cho(log_params, X, y):
    """The same with scipy's cho_factor / cho_solve and the log determinant from slogdet."""
    ell, sf, sn = np.exp(log_params)
    d = X[:, None, :] - X[None, :, :]
    K = sf ** 2 * np.exp(-0.5 * np.sum(d * d, axis=-1) / ell ** 2) + sn ** 2 * np.eye(len(y))
    c, lower = sl.cho_factor(K, lower=True)
    alpha = sl.cho_solve((c, lower), y)
    return 0.5 * y @ alpha + 0.5 * np.linalg.slogdet(K)[1]


def blr_evidence(log_ab, Phi, t):
    """Minus the log evidence of Bayesian linear regression (Bishop 3.86): slogdet and solve."""
    alpha, beta = np.exp(log_ab[0]), np.exp(log_ab[1])
    n, m = Phi.shape
    A = alpha * np.eye(m) + beta * Phi.T @ Phi
    mean = beta * np.linalg.solve(A, Phi.T @ t)
    r = t - Phi @ mean
    E = 0.5 * beta * r @ r + 0.5 * alpha * mean @ mean
    _, logdet = np.linalg.slogdet(A)
    return -(0.5 * m * np.log(alpha) + 0.5 * n * np.log(beta) - E - 0.5 * logdet
             - 0.5 * n * np.log(2 * np.pi))


X12 = R.standard_normal((12, 2))
Y12 = np.sin(X12.sum(1)) + 0.1 * R.standard_normal(12)
PHI = R.standard_normal((15, 4))
T15 = PHI @ R.standard_normal(4) + 0.3 * R.standard_normal(15)
MODELS = [(gp_nlml, (np.array([0.2, 0.1, -1.0]), X12, Y12)),
          (gp_nlml_cho, (np.array([-0.1, 0.3, -0.8]), X12, Y12)),
          (blr_evidence, (np.array([0.5, 1.2]), PHI, T15))]


@pytest.mark.parametrize("fn,args", MODELS, ids=[m[0].__name__ for m in MODELS])
def test_models_value_and_gradient(fn, args, mode):
    value, grad = compiled(fn, 0).value_and_grad(*args)
    np.testing.assert_allclose(value, fn(*args), rtol=1e-12)
    np.testing.assert_allclose(grad, finite_differences(fn, args, (0,))[0], rtol=1e-6,
                               atol=1e-8)


def test_gp_gradient_is_the_closed_form():
    # d nlml / dK = (K^-1 - alpha alpha^T) / 2: the chain rule through the Cholesky VJP
    X, y = X12, Y12
    Kmat = _spd(R.standard_normal((12, 12)))

    def nlml_of_k(K):
        L = np.linalg.cholesky(K)
        a = sl.solve_triangular(L, y, lower=True)
        return 0.5 * a @ a + np.sum(np.log(np.diag(L)))
    g = llgrad.differentiate(nlml_of_k).grad(Kmat)
    alpha = np.linalg.solve(Kmat, y)
    np.testing.assert_allclose(g, 0.5 * (np.linalg.inv(Kmat) - np.outer(alpha, alpha)),
                               rtol=1e-10, atol=1e-12)
    assert X.shape == (12, 2)


# ---- each function, one small use --------------------------------------------------------------
A4, B42, V4 = R.standard_normal((4, 4)), R.standard_normal((4, 2)), R.standard_normal(4)
W4 = R.standard_normal((4, 4))
S53 = R.standard_normal((5, 3))
BATCH = R.standard_normal((2, 3, 3))


def _wsum(x):
    return np.sum(x * np.linspace(0.5, 1.5, np.size(x)).reshape(np.shape(x)))


USES = {  # name: (function of the arguments, arguments)
    "inv": (lambda a: _wsum(np.linalg.inv(a + 4 * np.eye(4))), (A4,)),
    "det": (lambda a: np.linalg.det(a + 4 * np.eye(4)), (A4,)),
    "slogdet": (lambda a: np.linalg.slogdet(a + 4 * np.eye(4))[1], (A4,)),
    "solve_matrix": (lambda a, b: _wsum(np.linalg.solve(a + 4 * np.eye(4), b)), (A4, B42)),
    "solve_vector": (lambda a, b: _wsum(np.linalg.solve(a + 4 * np.eye(4), b)), (A4, V4)),
    "cholesky": (lambda a: _wsum(np.linalg.cholesky(a @ a.T + 4 * np.eye(4))), (A4,)),
    "cholesky_upper": (lambda a: _wsum(np.linalg.cholesky(a @ a.T + 4 * np.eye(4),
                                                          upper=True)), (A4,)),
    "eigh": (lambda a: _wsum(np.linalg.eigh(a + a.T)[0]) + _wsum(np.linalg.eigh(a + a.T)[1]
                                                                 ** 2), (A4,)),
    "eigvalsh": (lambda a: _wsum(np.linalg.eigvalsh(a + a.T, UPLO="U")), (A4,)),
    "svd": (lambda a: _wsum(np.linalg.svd(a, full_matrices=False)[1])
            + _wsum(np.linalg.svd(a, full_matrices=False)[0] ** 2), (S53,)),
    "svd_values": (lambda a: _wsum(np.linalg.svd(a, compute_uv=False)), (S53,)),
    "qr": (lambda a: _wsum(np.linalg.qr(a)[0]) + _wsum(np.linalg.qr(a)[1]), (S53,)),
    "qr_r": (lambda a: _wsum(np.linalg.qr(a.T, mode="r")), (S53,)),
    "matrix_power": (lambda a: _wsum(np.linalg.matrix_power(a / 4, 5)), (A4,)),
    "matrix_power_neg": (lambda a: _wsum(np.linalg.matrix_power(a + 4 * np.eye(4), -2)), (A4,)),
    "pinv": (lambda a: _wsum(np.linalg.pinv(a)), (S53,)),
    "norms": (lambda a: sum(np.linalg.norm(a, o) for o in ("fro", "nuc", 2, -2, 1, -1, np.inf,
                                                           -np.inf)), (S53,)),
    "norm_axes": (lambda a: _wsum(np.linalg.norm(a.reshape(1, 5, 3), 2, axis=(1, 2))
                                  + np.linalg.norm(a, axis=0)), (S53,)),
    "batched_solve_det": (lambda a, b: _wsum(np.linalg.solve(a + 3 * np.eye(3), b))
                          + _wsum(np.linalg.det(a + 3 * np.eye(3))), (BATCH, BATCH[0])),
    "batched_cholesky": (lambda a: _wsum(np.linalg.cholesky(a @ a.transpose(0, 2, 1)
                                                            + 3 * np.eye(3))), (BATCH,)),
}




# scipy's functions do not dispatch: the tracer maps them where converted code calls them, so
# they are used from functions with source (lambdas in a table are not converted)
def sp_solve_triangular(a, b):
    return _wsum(sl.solve_triangular(a + 4 * np.eye(4), b, lower=True)) \
        + _wsum(sl.solve_triangular(a + 4 * np.eye(4), b, trans=1, unit_diagonal=True))


def sp_solve_triangular_T(a, b):
    return _wsum(sl.solve_triangular(a + 4 * np.eye(4), b, trans="T", lower=True))


def sp_cholesky(a):
    return _wsum(sl.cholesky(a @ a.T + 4 * np.eye(4)))


def sp_cho_solve(a, b):
    return _wsum(sl.cho_solve(sl.cho_factor(a @ a.T + 4 * np.eye(4)), b))


def sp_cho_factor_lower(a):
    return _wsum(sl.cho_factor(a @ a.T + 4 * np.eye(4), lower=True)[0])


def sp_solve_pos(a, b):
    return _wsum(sl.solve(a @ a.T + 4 * np.eye(4), b, assume_a="pos"))


def sp_solve_sym(a, b):
    return _wsum(sl.solve(a + a.T + 9 * np.eye(4), b, assume_a="sym", lower=True))


def sp_solve_gen(a, b):
    return _wsum(sl.solve(a + 4 * np.eye(4), b, transposed=True))


def sp_inv_det(a):
    return _wsum(sl.inv(a + 4 * np.eye(4))) + sl.det(a + 4 * np.eye(4))


USES.update({f.__name__: (f, args) for f, args in [
    (sp_solve_triangular, (A4, B42)), (sp_solve_triangular_T, (A4, V4)), (sp_cholesky, (A4,)),
    (sp_cho_solve, (A4, B42)), (sp_cho_factor_lower, (A4,)), (sp_solve_pos, (A4, V4)),
    (sp_solve_sym, (A4, B42)), (sp_solve_gen, (A4, B42)), (sp_inv_det, (A4,))]})


@pytest.mark.parametrize("name", list(USES))
def test_use_value_and_gradient(name):  # natively (the interpreter: test_lower_ops, models)
    fn, args = USES[name]
    wrt = tuple(range(len(args)))
    value, grads = compiled(fn, wrt).value_and_grad(*args)
    np.testing.assert_allclose(value, fn(*args), rtol=1e-10)
    for g, e in zip(grads, finite_differences(fn, args, wrt)):
        np.testing.assert_allclose(g, e, rtol=1e-6, atol=1e-7)


def _decompositions(x):
    w, v = np.linalg.eigh(x)
    u, s, vh = np.linalg.svd(x[:, :4])
    q, r = np.linalg.qr(x[:4])
    return w, v, u, s, vh, q, r, np.linalg.cholesky(x @ x.T + np.eye(6, dtype=x.dtype))


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_compiled_results_are_numpys(dtype, mode):
    # eigenvectors and singular vectors with numpy's signs (the routines are called as numpy
    # calls them); float32 results are numpy's float32 results (computed in float64)
    a = R.standard_normal((6, 6))
    x = (a + a.T).astype(dtype)
    for got, want in zip(compiled(_decompositions, 0)(x), _decompositions(x)):
        assert got.dtype == want.dtype
        np.testing.assert_allclose(got, want, rtol=1e-6 if dtype == np.float32 else 1e-13,
                                   atol=1e-6 if dtype == np.float32 else 1e-13)


def _f32_model(a):
    k = a @ a.T + np.eye(4, dtype=np.float32)
    return np.sum(np.linalg.inv(k) * a) + np.linalg.slogdet(k)[1] \
        + np.sum(sl.solve_triangular(np.linalg.cholesky(k), a, lower=True))


def test_float32_gradients_stay_float32(mode):
    a = R.standard_normal((4, 4)).astype(np.float32)
    value, grad = compiled(_f32_model, 0).value_and_grad(a)
    assert grad.dtype == np.float32
    np.testing.assert_allclose(value, _f32_model(a), rtol=1e-5)
    expected = finite_differences(_f32_model, (a.astype(np.float64),), (0,))[0]
    np.testing.assert_allclose(grad, expected, rtol=1e-3, atol=1e-4)


def test_second_derivative_compiled():
    # the Hessian of log det(A A^T + I) (Cholesky), compiled twice over, vs differences of the
    # gradient
    def logdet(a):
        return 2 * np.sum(np.log(np.diag(np.linalg.cholesky(a @ a.T + np.eye(3)))))
    a = R.standard_normal((3, 3))
    h = llgrad.hessian(logdet)(a)
    g = llgrad.differentiate(logdet).grad
    eps = 1e-5
    num = np.zeros((3, 3, 3, 3))
    for idx in np.ndindex(3, 3):
        e = np.zeros((3, 3))
        e[idx] = eps
        num[(...,) + idx] = (g(a + e) - g(a - e)) / (2 * eps)
    np.testing.assert_allclose(np.asarray(h).reshape(9, 9), num.reshape(9, 9), rtol=1e-5,
                               atol=1e-7)


def test_eigenvalue_gradient_with_repeated_eigenvalues_is_finite(mode):
    # a function of the eigenvalues alone never divides by the (zero) gaps
    def f(a):
        return np.sum(np.linalg.eigvalsh(a @ a.T) ** 2)
    a = np.eye(3)
    g = compiled(f, 0).grad(a)
    np.testing.assert_allclose(g, 4 * a @ a.T @ a, rtol=1e-12)


# ---- errors ---------------------------------------------------------------------------------------
def _not_pd(a):
    return np.sum(np.linalg.cholesky(a))  # the line the error names


def _singular(a, b):
    return np.sum(np.linalg.solve(a, b))


def _singular_triangular(a, b):
    return np.sum(sl.solve_triangular(a, b, lower=True))


NOT_PD = np.array([[1.0, 2.0], [2.0, 1.0]])


@pytest.mark.parametrize("fn,args,message", [
    (_not_pd, (NOT_PD,), "Matrix is not positive definite"),
    (_not_pd, (np.stack([np.eye(2), NOT_PD]),), "Matrix is not positive definite"),
    (_singular, (np.ones((3, 3)), np.ones(3)), "Singular matrix"),
    (_singular_triangular, (np.array([[1.0, 0.0], [1.0, 0.0]]), np.ones(2)),
     "singular matrix: resolution failed at diagonal 1"),
], ids=["cholesky", "cholesky_batch", "solve", "solve_triangular"])
def test_linalg_errors_name_the_line(fn, args, message, mode):
    with pytest.raises(np.linalg.LinAlgError, match=re.escape(message)) as info:
        llgrad.differentiate(fn)(*args)
    assert isinstance(info.value, LinAlgError)
    line = fn.__code__.co_firstlineno + 1
    assert f"test_linalg.py:{line}" in str(info.value) and "How to fix" in str(info.value)


def test_linalg_errors_in_eager_mode_name_the_line():
    with pytest.raises(LinAlgError, match="Matrix is not positive definite") as info:
        llgrad.linalg.cholesky(llgrad.tensor(NOT_PD))
    assert "test_linalg.py" in str(info.value)
    with pytest.raises(LinAlgError, match="Singular matrix"):
        np.linalg.inv(llgrad.tensor(np.ones((2, 2)), requires_grad=True))


def test_shape_errors_show_both_shapes():
    with pytest.raises(ShapeError, match=re.escape("inv: expected a square matrix")
                       + r".*f64\[2,3\]"):
        llgrad.differentiate(lambda a: np.sum(np.linalg.inv(a)))(np.ones((2, 3)))
    with pytest.raises(ShapeError, match=re.escape("the matrix f64[3,3] and the right-hand side "
                                                   "f64[4] do not fit")):
        llgrad.differentiate(_singular)(np.eye(3), np.ones(4))
    with pytest.raises(ShapeError, match=r"f64\[3,3\] and the right-hand side f64\[2,2\]"):
        llgrad.linalg.solve(llgrad.tensor(np.eye(3)), llgrad.tensor(np.eye(2)))


def _banded(a):
    return np.sum(sl.solve(a, a, assume_a="banded"))


def _full_svd(a):
    return np.sum(np.linalg.svd(a)[0])  # the line the gradient error names


def _complete_qr(a):
    return np.sum(np.linalg.qr(a, "complete")[0])  # the line the gradient error names


def test_unsupported_gradients_say_so(mode):
    for fn, what in [(_full_svd, r"svd\(full_matrices=True\)"),
                     (_complete_qr, r"qr\(mode='complete'\) of a tall matrix")]:
        with pytest.raises(UnsupportedError, match=what) as info:
            compiled(fn, 0).grad(S53)
        assert f"test_linalg.py:{fn.__code__.co_firstlineno + 1}" in str(info.value)
    # eagerly too, at the forward's line
    t = llgrad.tensor(S53, requires_grad=True)
    u = llgrad.linalg.svd(t).U  # this line
    with pytest.raises(UnsupportedError, match="use full_matrices=False") as info:
        u.sum().backward()
    assert f"test_linalg.py:{info.tb.tb_frame.f_lineno - 3}" in str(info.value)
    # the values of full SVD and complete QR are numpy's (differentiate traces the gradient
    # with the value, so a function of them is refused there)
    t = llgrad.tensor(S53)
    for got, want in zip(llgrad.linalg.svd(t) + llgrad.linalg.qr(t, "complete"),
                         np.linalg.svd(S53) + np.linalg.qr(S53, "complete")):
        np.testing.assert_array_equal(got.numpy(), want)


def test_unsupported_solver_kind():
    with pytest.raises(UnsupportedError, match=r"assume_a='banded'"):
        llgrad.differentiate(_banded)(np.eye(2))


# ---- the compiler's other paths ------------------------------------------------------------------
def _loop_of_solves(a, b):
    x = b
    for i in range(3):  # a staged loop: solves taped per iteration for the reverse sweep
        x = np.linalg.solve(a + (i + 4.0) * np.eye(4), x) * 2.0 + np.linalg.slogdet(
            a + 4.0 * np.eye(4))[1]
    return np.sum(x * x)


def _dynamic(a, b):
    if float(np.linalg.det(a + 4 * np.eye(4))) > 0:  # concretised: the dynamic path
        return np.sum(sl.solve_triangular(np.linalg.cholesky(a @ a.T + np.eye(4)), b,
                                          lower=True))
    return np.sum(b)


@pytest.mark.parametrize("fn", [_loop_of_solves, _dynamic])
def test_loops_and_the_dynamic_path(fn, mode):
    args = (A4, V4)
    value, grads = compiled(fn, (0, 1)).value_and_grad(*args)
    np.testing.assert_allclose(value, fn(*args), rtol=1e-12)
    for g, e in zip(grads, finite_differences(fn, args, (0, 1))):
        np.testing.assert_allclose(g, e, rtol=1e-6, atol=1e-7)


def test_a_second_process_loads_lapack_calls_from_the_disk_cache(tmp_path):
    import os
    import subprocess
    import sys
    import textwrap
    script = tmp_path / "gp_script.py"
    script.write_text(textwrap.dedent("""
        import numpy as np, scipy.linalg, llgrad
        @llgrad.differentiate(cache=True)
        def f(a, y):
            L = np.linalg.cholesky(a @ a.T + np.eye(3))
            w, v = np.linalg.eigh(a + a.T)
            return np.sum(scipy.linalg.solve_triangular(L, y, lower=True)) + np.sum(w)
        a = np.arange(9.0).reshape(3, 3) / 9
        v, g = f.value_and_grad(a, np.ones(3))
        print(repr(v), repr(float(g.sum())), f.inspect(a, np.ones(3)).stats.get("disk cache", "miss"))
    """))
    env = dict(os.environ, LLGRAD_CACHE_DIR=str(tmp_path / "cache"))
    env.pop("LLGRAD_DISABLE_JIT", None)
    runs = [subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                           env=env, timeout=120, check=False) for _ in range(2)]
    assert all(r.returncode == 0 for r in runs), runs[-1].stderr
    (v1, g1, s1), (v2, g2, s2) = (r.stdout.split() for r in runs)
    assert (s1, s2) == ("miss", "hit") and (v1, g1) == (v2, g2)
