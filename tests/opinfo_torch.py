"""OpSpecs of PyTorch's gather/scatter family, addmm and F.linear (issue 15): merged into
OP_DB / FUNC_DB by tests/opinfo.py. The numpy references are written from PyTorch's
definitions (out[i][j] = x[index[i][j]][j] for gather along dim 0, ...); index samples repeat
an index (scatter_add adds both, scatter keeps the last write) and use an index smaller than
the input along the other dimensions (PyTorch reads only that part)."""
from __future__ import annotations

import numpy as np

import llgrad as lg

from opinfo import OpSpec, Sample, make_input


def _positions(idx, dim):
    """The input positions PyTorch's gather/scatter pair with idx's elements."""
    grid = list(np.indices(idx.shape))
    grid[dim] = idx
    return tuple(grid)


def _part(a, shape):
    return a[tuple(slice(0, n) for n in shape)]


def _gather_ref(x, dim, idx):
    return x[_positions(idx, dim)]


def _scatter_ref(x, dim, idx, src):
    out = x.copy()
    out[_positions(idx, dim)] = _part(src, idx.shape)  # numpy: the last write wins
    return out


def _scatter_add_ref(x, dim, idx, src):
    out = x.copy()
    np.add.at(out, _positions(idx, dim), _part(src, idx.shape))
    return out


def _index_samples(rng, dtype):
    def m(*s):
        return make_input(rng, s, "real", dtype)
    return [Sample((m(3, 4), 1, np.array([[0, 3, 3], [1, 1, 0], [2, 0, 1]]), m(3, 3))),
            Sample((m(3, 4), 0, np.array([[2, 0, 0, 1], [1, 2, 2, 0]]), m(2, 5))),
            Sample((m(4, 5), 1, np.array([[4], [0], [2]]), m(3, 2))),  # index smaller
            Sample((m(5,), 0, np.array([4, 0, 4]), m(3,))),
            Sample((m(2, 3, 4), 2, np.array([[[1, 0]], [[3, 3]]]), m(2, 1, 2)))]


def _scatter_samples(rng, dtype):  # (as _index_samples, without repeated writes to one place
    def m(*s):                     # for scatter's gradient check: the last write wins there)
        return make_input(rng, s, "real", dtype)
    return [Sample((m(3, 4), 1, np.array([[0, 3, 2], [1, 2, 0], [2, 0, 1]]), m(3, 3))),
            Sample((m(3, 4), 0, np.array([[2, 0, 0, 1], [1, 2, 1, 0]]), m(2, 5))),
            Sample((m(4, 5), 1, np.array([[4], [0], [2]]), m(3, 2))),
            Sample((m(5,), 0, np.array([4, 0, 1]), m(3,))),
            Sample((m(5,), 0, np.array([4, 0, 4]), m(3,))),  # a repeat: the last write wins
            Sample((m(2, 3, 4), 2, np.array([[[1, 0]], [[3, 2]]]), m(2, 1, 2)))]


def _index_select_samples(rng, dtype):
    def m(*s):
        return make_input(rng, s, "real", dtype)
    return [Sample((m(4, 3), 0, np.array([3, 0, 3]))), Sample((m(2, 5), 1, np.array([4]))),
            Sample((m(2, 3, 4), 2, np.array([0, 1, 2, 3, 0]))), Sample((m(6,), 0, np.array([5, 1])))]


def _addmm_samples(rng, dtype):
    def m(*s):
        return make_input(rng, s, "real", dtype)
    return [Sample((m(4,), m(3, 2), m(2, 4))), Sample((m(3, 4), m(3, 5), m(5, 4))),
            Sample((m(3, 1), m(3, 2), m(2, 2)), {"beta": 0.5, "alpha": -2.0}),
            Sample((m(), m(1, 3), m(3, 1)))]


def _addmm_ref(bias, a, b, beta=1, alpha=1):
    return beta * bias + alpha * (a @ b)


def _linear_samples(rng, dtype):
    def m(*s):
        return make_input(rng, s, "real", dtype)
    return [Sample((m(3, 4), m(2, 4), m(2))), Sample((m(2, 3, 4), m(5, 4), m(5))),
            Sample((m(4,), m(2, 4), m(2))), Sample((m(3, 4), m(2, 4)))]


def _linear_ref(x, w, b=None):
    return x @ w.T + (0 if b is None else b)


def _topk_ref(x, k, dim=-1, largest=True):
    order = np.argsort(-x if largest else x, dim, kind="stable")
    return np.take_along_axis(x, np.take(order, np.arange(k), dim), dim)


def _topk_samples(rng, dtype):
    def m(*s):
        return make_input(rng, s, "real", dtype)
    return [Sample((m(3, 5), 2)), Sample((m(4, 3), 3), {"dim": 0}),
            Sample((m(6,), 1), {"largest": False}), Sample((m(2, 3, 4), 4), {"dim": 2})]


def _index_add_ref(x, dim, idx, src, alpha=1):
    out = x.copy()
    np.add.at(np.moveaxis(out, dim, 0), idx, alpha * np.moveaxis(src, dim, 0))
    return out


TORCH_OPS: list[OpSpec] = [
    OpSpec("scatter_along", lambda x, d, i, s: lg.scatter(x, d, i, s), _scatter_ref,
           samples=_scatter_samples),
    OpSpec("scatter_along_add", lambda x, d, i, s: x.scatter_add(d, i, s), _scatter_add_ref,
           samples=_index_samples),
    OpSpec("index_select", lambda x, d, i: x.index_select(d, i),
           lambda x, d, i: np.take(x, i, d), samples=_index_select_samples),
    OpSpec("addmm", lambda c, a, b, **kw: lg.addmm(c, a, b, **kw), _addmm_ref,
           samples=_addmm_samples, tol={np.dtype(np.float32): (1e-5, 1e-6)}),
]

TORCH_FUNCS: list[OpSpec] = [
    OpSpec("torch_gather", lambda x, d, i, s: x.gather(d, i), lambda x, d, i, s: _gather_ref(
        x, d, i), samples=_index_samples, wrt=(0,)),
    OpSpec("scatter_value", lambda x, d, i, s: x.scatter(d, i, 0.5),
           lambda x, d, i, s: _scatter_ref(x, d, i, np.full(i.shape, 0.5, x.dtype)),
           samples=_index_samples, wrt=(0,)),
    OpSpec("index_add", lambda x, d, i, s: lg.index_add(x, d, i, s, alpha=2.0),
           lambda x, d, i, s: _index_add_ref(x, d, i, s, 2.0), samples=lambda rng, dt: [
               Sample((make_input(rng, (4, 3), "real", dt), 0, np.array([3, 0, 3]),
                       make_input(rng, (3, 3), "real", dt))),
               Sample((make_input(rng, (2, 5), "real", dt), 1, np.array([4, 1]),
                       make_input(rng, (2, 2), "real", dt)))]),
    OpSpec("topk", lambda x, k, **kw: x.topk(k, **kw).values, _topk_ref, samples=_topk_samples),
    OpSpec("linear", lambda *a: lg.nn.functional.linear(*a), _linear_ref,
           samples=_linear_samples, tol={np.dtype(np.float32): (1e-5, 1e-6)}),
    OpSpec("masked_fill", lambda x, m: x.masked_fill(m, 2.5),
           lambda x, m: np.where(m, np.asarray(2.5, x.dtype), x), [((3, 4), (4,))],
           ("real", "bool")),
    OpSpec("unbind", lambda x: x.unbind(1), lambda x: tuple(np.moveaxis(x, 1, 0)), [((3, 4),)]),
    OpSpec("narrow", lambda x: x.narrow(1, 1, 2), lambda x: x[:, 1:3], [((3, 4),)]),
    OpSpec("select", lambda x: lg.select(x, 0, -1), lambda x: x[-1], [((3, 4),)]),
]
