"""OpSpecs of the linear-algebra primitives and functions (issue 11): merged into OP_DB /
FUNC_DB by tests/opinfo.py.

Samples are well conditioned by construction: x + n I for solve/inv/det, x x^T + n I for
cholesky, triangles with a dominant diagonal, symmetric matrices and rectangular ones whose
eigenvalues / singular values are spread apart (their gradients divide by the gaps). cholesky
and eigh read one triangle and have symmetric gradients (Note [Symmetric gradients] in
runtime/ops/linalg_solve.py), so their ops symmetrise the input first: finite differences of
the composition are then the true derivative.
"""
from __future__ import annotations

import numpy as np
import scipy.linalg as sl

import llgrad as lg
from llgrad.runtime import ops

from opinfo import OpSpec, Sample, make_input


def _mT(x):
    return np.swapaxes(x, -1, -2) if isinstance(x, np.ndarray) else x.transpose(-1, -2)


def _spd(x):
    """x x^T + n I, for ndarrays and Tensors alike."""
    n = x.shape[-1]
    return x @ _mT(x) + np.eye(n, dtype=_np_dtype(x)) * n


def _sym(x):
    return (x + _mT(x)) * 0.5


def _np_dtype(x):
    return x.dtype if isinstance(x, np.ndarray) else x.detach().numpy().dtype


def _dominant(rng, shape, dtype):
    """A random matrix plus n I (well conditioned, sign of det positive)."""
    x = make_input(rng, shape, "real", dtype)
    return (x + np.eye(shape[-1], dtype=dtype) * shape[-1]).astype(dtype)


def _spread(rng, shape, dtype):
    """A matrix with singular values (eigenvalues, when square and symmetrised) well apart."""
    *batch, m, n = shape
    k = min(m, n)
    q1 = np.linalg.qr(rng.standard_normal((*batch, m, m)))[0][..., :k]
    q2 = np.linalg.qr(rng.standard_normal((*batch, n, n)))[0][..., :k]
    s = 1.0 + np.arange(k) * 0.7 * (1 + rng.random(k))
    return ((q1 * s) @ _mT(q2)).astype(dtype)


def _batched_ref(fn):
    def ref(*arrays, **kw):
        batch = arrays[0].shape[:-2]
        if not batch:
            return fn(*arrays, **kw)
        outs = [fn(*(a[i] for a in arrays), **kw) for i in np.ndindex(batch)]
        return np.stack(outs).reshape(batch + outs[0].shape)
    return ref


def _trsolve_ref(a, b, lower, trans, unit_diagonal):
    return _batched_ref(lambda a, b: sl.solve_triangular(
        a, b, trans=int(trans), lower=lower, unit_diagonal=unit_diagonal))(a, b)


def _trsolve_samples(rng, dtype):
    out = []
    for shapes, lower, trans, unit in [(((4, 4), (4, 2)), True, False, False),
                                       (((4, 4), (4, 3)), False, True, False),
                                       (((3, 3), (3, 2)), True, True, True),
                                       (((2, 3, 3), (2, 3, 1)), False, False, False),
                                       (((1, 1), (1, 2)), True, False, False)]:
        a = _dominant(rng, shapes[0], dtype)
        out.append(Sample((a, make_input(rng, shapes[1], "real", dtype), lower, trans, unit)))
    return out


def _square_samples(*shapes, make=_dominant):
    return lambda rng, dt: [Sample((make(rng, s, dt),)) for s in shapes]


def _with_negative_det(rng, dt):
    x = _dominant(rng, (3, 3), dt)
    x[0] *= -1
    return _square_samples((4, 4), (2, 3, 3), (1, 1))(rng, dt) + [Sample((x,))]


def _system_samples(rng, dt):
    return [Sample((_dominant(rng, a, dt), make_input(rng, b, "real", dt)))
            for a, b in [((3, 3), (3, 2)), ((2, 4, 4), (2, 4, 3)), ((3, 3), (3,)),
                         ((2, 3, 3), (3, 1))]]


def _cho_solve_samples(rng, dt):
    out = []
    for (bs, ls), upper in [(((4, 2), (4, 4)), False), (((3, 3), (3, 3)), True),
                            (((2, 3, 1), (2, 3, 3)), False)]:
        l_ = _dominant(rng, ls, dt)
        out.append(Sample((make_input(rng, bs, "real", dt), l_, upper)))
    return out


def _cho_solve_ref(b, l_, upper):
    return _batched_ref(lambda b, l_: sl.cho_solve((l_, not upper), b))(b, l_)


def _decomp_samples(*shapes):
    return lambda rng, dt: [Sample((_spread(rng, s, dt),)) for s in shapes]


F32_LOOSE = {np.dtype(np.float32): (1e-4, 1e-5)}

LINALG_OPS: list[OpSpec] = [
    OpSpec("cholesky", lambda x: lg.linalg.cholesky(_spd(x)),
           lambda x: np.linalg.cholesky(_spd(x)), samples=_square_samples(
               (3, 3), (2, 4, 4), (1, 1), make=lambda r, s, d: make_input(r, s, "real", d)),
           tol=F32_LOOSE),
    OpSpec("triangular_solve", lambda a, b, lo, t, u: ops.triangular_solve(a, b, lo, t, u),
           _trsolve_ref, samples=_trsolve_samples, tol=F32_LOOSE),
    OpSpec("solve", lambda a, b: lg.linalg.solve(a, b), np.linalg.solve,
           samples=_system_samples, tol=F32_LOOSE),
    OpSpec("inv", lambda a: lg.linalg.inv(a), np.linalg.inv,
           samples=_square_samples((3, 3), (2, 4, 4), (1, 1)), tol=F32_LOOSE),
    OpSpec("slogdet", lambda a: tuple(lg.linalg.slogdet(a)),
           lambda a: tuple(np.linalg.slogdet(a)), samples=_with_negative_det, tol=F32_LOOSE),
    OpSpec("det", lambda a: lg.linalg.det(a), np.linalg.det, samples=_with_negative_det,
           tol=F32_LOOSE),
    OpSpec("cholesky_solve", lambda b, l_, upper: lg.cholesky_solve(b, l_, upper),
           _cho_solve_ref, samples=_cho_solve_samples, tol=F32_LOOSE),
    OpSpec("eigh", lambda x, **kw: tuple(lg.linalg.eigh(_sym(x), **kw)),
           lambda x, **kw: tuple(np.linalg.eigh(_sym(x), **kw)), samples=lambda rng, dt: [
               Sample((_spread(rng, s, dt),), kw) for s, kw in [
                   ((4, 4), {}), ((3, 3), {"UPLO": "U"}), ((2, 3, 3), {}), ((1, 1), {})]],
           tol=F32_LOOSE),
    OpSpec("svd", lambda x: tuple(lg.linalg.svd(x, full_matrices=False)),
           lambda x: tuple(np.linalg.svd(x, full_matrices=False)),
           samples=_decomp_samples((4, 4), (5, 3), (3, 5), (2, 4, 3), (1, 1)), tol=F32_LOOSE),
    OpSpec("qr", lambda x, **kw: tuple(lg.linalg.qr(x, **kw)),
           lambda x, **kw: tuple(np.linalg.qr(x, **kw)), samples=lambda rng, dt: [
               Sample((_spread(rng, s, dt),), kw) for s, kw in [
                   ((4, 4), {}), ((5, 3), {}), ((3, 5), {}), ((2, 4, 3), {}),
                   ((3, 5), {"mode": "complete"}), ((1, 1), {})]], tol=F32_LOOSE),
]


def _matrix_power_samples(rng, dt):
    return [Sample((_dominant(rng, (3, 3), dt) / 3, k)) for k in (0, 1, 2, 3, 5, 6, -1, -3)] \
        + [Sample((_dominant(rng, (2, 3, 3), dt) / 3, 4))]


def _norm_samples(rng, dt):
    return [Sample((_spread(rng, s, dt), o)) for s in [(4, 3), (2, 3, 4)]
            for o in ("fro", "nuc", 2, -2, 1, -1, np.inf, -np.inf)]


LINALG_FUNCS: list[OpSpec] = [
    OpSpec("matrix_power", lambda a, k: lg.linalg.matrix_power(a, k), np.linalg.matrix_power,
           samples=_matrix_power_samples, tol=F32_LOOSE),
    OpSpec("matrix_norm", lambda a, o: lg.linalg.matrix_norm(a, o),
           lambda a, o: np.asarray(np.linalg.norm(a, o, axis=(-2, -1))),
           samples=_norm_samples, tol=F32_LOOSE),
    OpSpec("pinv", lambda a: lg.linalg.pinv(a), lambda a: np.linalg.pinv(a, rtol=None),
           samples=_decomp_samples((4, 4), (5, 3), (3, 5), (2, 4, 3)), tol=F32_LOOSE),
    OpSpec("eigvalsh", lambda a: lg.linalg.eigvalsh(_sym(a)),
           lambda a: np.linalg.eigvalsh(_sym(a)), samples=_decomp_samples((4, 4), (2, 3, 3)),
           tol=F32_LOOSE),
    OpSpec("svdvals", lambda a: lg.linalg.svdvals(a),
           lambda a: np.linalg.svd(a, compute_uv=False),
           samples=_decomp_samples((4, 3), (2, 3, 5)), tol=F32_LOOSE),
    OpSpec("solve_triangular_right", lambda a, b: lg.linalg.solve_triangular(
        a, b, upper=True, left=False), lambda a, b: _mT(sl.solve_triangular(
            a, _mT(b), lower=False, trans=1)), samples=lambda rng, dt: [
        Sample((_dominant(rng, (3, 3), dt), make_input(rng, (2, 3), "real", dt)))],
        tol=F32_LOOSE),
    OpSpec("cholesky_upper", lambda x: lg.linalg.cholesky(_spd(x), upper=True),
           lambda x: np.linalg.cholesky(_spd(x), upper=True),
           samples=_square_samples((3, 3), make=lambda r, s, d: make_input(r, s, "real", d)),
           tol=F32_LOOSE),
]
