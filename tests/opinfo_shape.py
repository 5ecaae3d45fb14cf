"""OpSpecs of the scan, sort, structural and contraction primitives and functions (issue 11):
merged into OP_DB / FUNC_DB by tests/opinfo.py. Samples include empty and 1x1 shapes where
numpy allows them, ties for the arg-scans and sorts (which carry no gradient, or whose gradient
goes to the input the value came from), and zeros for cumprod's gradient."""
from __future__ import annotations

import numpy as np

import llgrad as lg
from llgrad.runtime import ops

from opinfo import OpSpec, Sample, make_input


def _s(*specs):
    """specs: (shapes, args after the arrays, kwargs) -> samples of real inputs."""
    def make(rng, dtype):
        return [Sample(tuple(make_input(rng, s, "real", dtype) for s in shapes) + tuple(rest),
                       dict(kw)) for shapes, rest, kw in specs]
    return make


def _ties(rng, shape, dtype):
    return np.asarray(np.round(rng.standard_normal(shape) * 1.5), dtype)


def _with_zeros(rng, dtype):
    x = make_input(rng, (3, 5), "real", dtype)
    x[0, 1] = 0.0           # one zero in a row
    x[1, 2] = x[1, 3] = 0.0  # two zeros in a row
    x[2, 0] = 0.0
    return [Sample((x, 1)), Sample((x, 0)), Sample((make_input(rng, (6,), "real", dtype), 0)),
            Sample((make_input(rng, (0, 3), "real", dtype), 0)),
            Sample((make_input(rng, (1, 1), "real", dtype), 1))]


def _linrec_ref(a, b, axis, reverse):
    a, b = np.moveaxis(a, axis, 0), np.moveaxis(b, axis, 0)
    y = b.copy()
    n = b.shape[0]
    for k in (range(n - 2, -1, -1) if reverse else range(1, n)):
        y[k] = (a[k + 1] * y[k + 1] if reverse else a[k] * y[k - 1]) + b[k]
    return np.moveaxis(y, 0, axis)


def _iir_ref(v, a, axis, reverse):  # scipy.signal.lfilter's denominator (a0 = 1)
    from scipy.signal import lfilter
    v = np.flip(v, axis) if reverse else v
    y = lfilter([1.0], np.concatenate([[1.0], a]), v, axis).astype(v.dtype)
    return np.flip(y, axis) if reverse else y


def _iir_samples(rng, dtype):
    def m(*s):
        return make_input(rng, s, "real", dtype)
    a = lambda p: np.asarray(0.4 * rng.standard_normal(p), dtype)  # noqa: E731 (stable)
    return [Sample((m(6), a(2), 0, False)), Sample((m(6), a(3), 0, True)),
            Sample((m(3, 5), a(1), 1, False)), Sample((m(4, 2, 3), a(2), 0, True)),
            Sample((m(2, 2), a(3), 1, False)), Sample((m(3), a(0), 0, False))]


def _cumarg_ref(better):
    def ref(x, dim):  # PyTorch's cummax/cummin indices: the later index on ties
        x = np.moveaxis(x, dim, 0)
        out = np.zeros(x.shape, np.int64)
        best = x[0].copy()
        for k in range(1, x.shape[0]):
            take = better(x[k], best) | (x[k] == best)
            best = np.where(take, x[k], best)
            out[k] = np.where(take, k, out[k - 1])
        return np.moveaxis(out, 0, dim)
    return ref


def _arg_samples(rng, dtype):
    return [Sample((_ties(rng, (4, 6), dtype), 1)), Sample((_ties(rng, (5, 3), dtype), 0)),
            Sample((_ties(rng, (7,), dtype), 0)), Sample((_ties(rng, (2, 3, 4), dtype), 1))]


def _sort_ref(x, dim=-1, descending=False):
    if descending:
        return np.take_along_axis(x, np.argsort(-x, dim, kind="stable"), dim)
    return np.sort(x, dim)


def _argsort_ref(x, dim=-1, descending=False):
    return np.argsort(-x if descending else x, dim, kind="stable").astype(np.int64)


def _gather_samples(rng, dtype):
    x = make_input(rng, (3, 4), "real", dtype)
    return [Sample((x, np.array([[0, 3, 3], [1, 1, 0], [2, 0, 1]]), 1)),
            Sample((x, np.array([[2, 0, 0, 1]]), 0)),
            Sample((make_input(rng, (5,), "real", dtype), np.array([4, 4, 0]), 0))]


def _pad_ref(x, pad, value=0.0):
    pairs = [(0, 0)] * x.ndim
    for k in range(len(pad) // 2):
        pairs[x.ndim - 1 - k] = (pad[2 * k], pad[2 * k + 1])
    return np.pad(x, pairs, constant_values=value)


def _cross_samples(rng, dtype):
    def m(s):
        return make_input(rng, s, "real", dtype)
    return [Sample((m((3,)), m((3,)), 0)), Sample((m((4, 3)), m((4, 3)), 1)),
            Sample((m((3, 2)), m((3, 2)), 0))]


SHAPE_OPS: list[OpSpec] = [
    OpSpec("cumsum", lambda x, d: lg.cumsum(x, d), lambda x, d: np.cumsum(x, d), samples=_s(
        (((5,),), (0,), {}), (((3, 4),), (1,), {}), (((3, 4),), (0,), {}),
        (((2, 3, 4),), (1,), {}), (((0, 3),), (0,), {}), (((1, 1),), (1,), {})),
        tol={np.dtype(np.float32): (1e-5, 1e-6)}),
    OpSpec("linrec", lambda a, b, axis, rev: ops.linrec(a, b, axis, rev), _linrec_ref,
           samples=_s((((5,), (5,)), (0, False), {}), (((5,), (5,)), (0, True), {}),
                      (((3, 4), (3, 4)), (1, False), {}), (((2, 3, 4), (2, 3, 4)), (0, True), {}),
                      (((1, 1), (1, 1)), (1, False), {})),
           tol={np.dtype(np.float32): (1e-5, 1e-6)}),
    OpSpec("iir", lambda v, a, axis, rev: ops.iir(v, a, axis, rev), _iir_ref,
           samples=_iir_samples, tol={np.dtype(np.float32): (1e-5, 1e-6)}),
    OpSpec("cumprod", lambda x, d: x.cumprod(d), lambda x, d: np.cumprod(x, d),
           samples=_with_zeros, tol={np.dtype(np.float32): (1e-5, 1e-6)}),
    OpSpec("cummax", lambda x, d: x.cummax(d).values, lambda x, d: np.maximum.accumulate(x, d),
           samples=_s((((3, 5),), (1,), {}), (((4, 3),), (0,), {}), (((6,),), (0,), {}),
                      (((1, 1),), (0,), {}))),
    OpSpec("cummin", lambda x, d: x.cummin(d).values, lambda x, d: np.minimum.accumulate(x, d),
           samples=_s((((3, 5),), (1,), {}), (((2, 3, 4),), (2,), {}))),
    OpSpec("cumargmax", lambda x, d: x.cummax(d).indices, _cumarg_ref(np.greater),
           samples=_arg_samples, nondiff=True, order=0),
    OpSpec("cumargmin", lambda x, d: x.cummin(d).indices, _cumarg_ref(np.less),
           samples=_arg_samples, nondiff=True, order=0),
    OpSpec("argsort", lambda x, d, **kw: x.argsort(d, **kw), _argsort_ref,
           samples=lambda rng, dt: _arg_samples(rng, dt) + [
               Sample((_ties(rng, (40,), dt), 0), {"descending": True}),
               Sample((_ties(rng, (3, 37), dt), 1))], nondiff=True, order=0),
    OpSpec("sort", lambda x, d, **kw: lg.sort(x, d, **kw).values, _sort_ref, samples=_s(
        (((3, 5),), (1,), {}), (((4, 3),), (0,), {}), (((33,),), (0,), {"descending": True}),
        (((2, 3, 4),), (-1,), {}), (((0, 4),), (1,), {}), (((1, 1),), (0,), {}))),
    OpSpec("gather", lambda x, i, d: lg.take_along_dim(x, lg.tensor(i), d),
           lambda x, i, d: np.take_along_axis(x, i, d), samples=_gather_samples),
    OpSpec("flip", lambda x, d: x.flip(d), lambda x, d: np.flip(x, d), samples=_s(
        (((3, 4),), ((0,),), {}), (((3, 4),), ((1,),), {}), (((2, 3, 4),), ((0, 2),), {}),
        (((5,),), ((0,),), {}), (((0, 2),), ((1,),), {}))),
    OpSpec("roll", lambda x, s, d: x.roll(s, d), lambda x, s, d: np.roll(x, s, d), samples=_s(
        (((3, 4),), (1, 1), {}), (((3, 4),), (-5, 0), {}), (((2, 3, 4),), ((1, 2), (0, 2)), {}),
        (((5,),), (7, 0), {}), (((3, 4),), (2, None), {}))),
    OpSpec("tril", lambda x, k: x.tril(k), np.tril, samples=_s(
        (((4, 4),), (0,), {}), (((3, 5),), (1,), {}), (((5, 3),), (-1,), {}),
        (((2, 3, 4),), (0,), {}), (((1, 1),), (0,), {}))),
    OpSpec("triu", lambda x, k: x.triu(k), np.triu, samples=_s(
        (((4, 4),), (0,), {}), (((3, 5),), (-2,), {}), (((2, 4, 3),), (1,), {}))),
    OpSpec("diagonal", lambda x, *a: x.diagonal(*a), lambda x, *a: np.diagonal(x, *a),
           samples=_s((((4, 4),), (), {}), (((3, 5),), (1,), {}), (((5, 3),), (-2,), {}),
                      (((2, 3, 4),), (-1, 1, 2), {}), (((1, 1),), (), {}),
                      (((3, 3),), (4,), {}))),
    OpSpec("trace", lambda x, *a: ops.trace(x, *a), lambda x, *a: np.asarray(np.trace(x, *a)),
           samples=_s((((4, 4),), (), {}), (((3, 5),), (1,), {}), (((2, 3, 4),), (0, 1, 2), {}),
                      (((1, 1),), (), {}))),
    OpSpec("diag_embed", lambda v, k: lg.diag(v, k), np.diag, samples=_s(
        (((4,),), (0,), {}), (((3,),), (1,), {}), (((3,),), (-2,), {}), (((1,),), (0,), {}))),
    OpSpec("constant_pad_nd", lambda x, p, **kw: lg.nn.functional.pad(x, p, **kw), _pad_ref,
           samples=_s((((3, 4),), ((1, 2),), {}), (((2, 3, 4),), ((1, 0, 0, 2),), {"value": 0.5}),
                      (((5,),), ((2, 2),), {}), (((1, 1),), ((0, 1, 1, 0),), {}))),
    OpSpec("linalg_cross", lambda a, b, d: lg.cross(a, b, dim=d),
           lambda a, b, d: np.cross(a, b, axis=d), samples=_cross_samples),
]


def _np(fn):
    return lambda *a, **kw: fn(*a, **kw)


SHAPE_FUNCS: list[OpSpec] = [
    OpSpec("einsum", lambda s, *xs: lg.einsum(s, *xs), lambda s, *xs: np.einsum(s, *xs),
           samples=lambda rng, dt: [
               Sample((s,) + tuple(make_input(rng, sh, "real", dt) for sh in shapes))
               for s, shapes in [("ij,jk->ik", ((2, 3), (3, 4))), ("ii->i", ((3, 3),)),
                                 ("ii", ((3, 3),)), ("bij,bjk->bik", ((2, 2, 3), (2, 3, 2))),
                                 ("ij,ij->i", ((3, 4), (3, 4))), ("i,j->ij", ((3,), (2,))),
                                 ("...ij,...jk", ((2, 2, 3), (3, 2)))]],
           tol={np.dtype(np.float32): (1e-5, 1e-6)}),
    OpSpec("tensordot", lambda a, b, d: lg.tensordot(a, b, d), np.tensordot, samples=_s(
        (((2, 3, 4), (3, 4, 5)), (2,), {}), (((3, 4), (4, 3)), (([0], [1]),), {}))),
    OpSpec("kron", lambda a, b: lg.kron(a, b), np.kron, [((2, 3), (3, 2)), ((3,), (2, 2))]),
    OpSpec("inner", _np(ops.inner), np.inner, [((3, 4), (2, 4)), ((4,), (4,))]),
    OpSpec("median", lambda x, **kw: ops.median(x, **kw),
           lambda x, **kw: np.median(x, **kw), samples=_s(
               (((7,),), (), {}), (((3, 4),), (), {"axis": 1}),
               (((3, 4),), (), {"axis": 0, "keepdims": True}),
               (((2, 3, 4),), (), {"axis": (0, 2)}))),
    OpSpec("quantile", lambda x, q, **kw: ops.quantile(x, q, **kw),
           lambda x, q, **kw: np.quantile(x, q, **kw), samples=_s(
               (((7,),), (0.3,), {}), (((3, 5),), ([0.0, 0.25, 0.9, 1.0],), {"axis": 1}),
               (((4, 3),), (0.5,), {"axis": 0, "keepdims": True})),
           tol={np.dtype(np.float32): (1e-5, 1e-6)}),
    OpSpec("diff", lambda x, **kw: lg.diff(x, **kw),
           lambda x, n=1, dim=-1: np.diff(x, n, dim), samples=_s(
               (((6,),), (), {}), (((3, 5),), (), {"n": 2, "dim": 1}),
               (((4, 3),), (), {"dim": 0}), (((3,),), (), {"n": 3}))),
    OpSpec("tile", lambda x, r: lg.tile(x, r), np.tile, samples=_s(
        (((2, 3),), ((2, 1),), {}), (((3,),), ((2, 2),), {}), (((2, 3),), ((2,),), {}))),
    OpSpec("repeat_interleave", lambda x, r, **kw: x.repeat_interleave(r, **kw),
           lambda x, r, dim=None: np.repeat(x, r, dim), samples=_s(
               (((2, 3),), (2,), {"dim": 1}), (((3, 2),), ([1, 0, 2],), {"dim": 0}),
               (((2, 2),), (3,), {}))),
    OpSpec("pad_modes", lambda x, p, m: lg.nn.functional.pad(x, p, mode=m),
           lambda x, p, m: np.pad(x, [(0, 0)] * (x.ndim - 1) + [p], {
               "reflect": "reflect", "replicate": "edge", "circular": "wrap"}[m]),
           samples=_s((((2, 5),), ((2, 3), "reflect"), {}), (((2, 4),), ((1, 3), "replicate"), {}),
                      (((3, 4),), ((2, 1), "circular"), {}))),
    OpSpec("take", lambda x, i, **kw: ops.take(x, i, **kw),
           lambda x, i, **kw: np.take(x, i, **kw), samples=lambda rng, dt: [
               Sample((make_input(rng, (3, 4), "real", dt), np.array([0, 11, 5, 5]))),
               Sample((make_input(rng, (3, 4), "real", dt), np.array([[2, 0]])), {"axis": 1}),
               Sample((make_input(rng, (5,), "real", dt), np.array([-1, 7])), {"mode": "wrap"}),
               Sample((make_input(rng, (5,), "real", dt), np.array([-3, 9])), {"mode": "clip"})]),
    OpSpec("average", lambda x, **kw: ops.average(x, **kw), lambda x, **kw: np.average(x, **kw),
           samples=lambda rng, dt: [
               Sample((make_input(rng, (3, 4), "real", dt),), {"axis": 1, "weights": np.asarray(
                   [1.0, 2.0, 0.5, 1.5], dt)}), Sample((make_input(rng, (3, 4), "real", dt),))]),
]
