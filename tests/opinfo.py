"""OP_DB: one OpSpec per primitive in REGISTRY, the single per-op test table (PyTorch's OpInfo).

An OpSpec says how to call the primitive through the user-facing API (`op`, on Tensors), the
numpy reference (`ref`, on ndarrays), which sample inputs to use (shapes and an input domain
such as "positive" for log), tolerances, the gradient order to check, and skips with reasons.
FUNC_DB is the same for composite ops functions (mean, softmax, stack, ...) built on the
primitives. Consumers: tests/test_registry.py, tests/runtime/test_ops.py (and codegen tests).
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

import llgrad as lg
from llgrad.runtime import ops
from llgrad.runtime.ops.index import normalize_key, scatter_add_p
from llgrad.runtime.ops.window import dynamic_window_p, window_update_p
from llgrad.runtime.prim import bind


@dataclass
class Sample:
    """One call: ndarray args become Tensors for `op` (other args pass through), kwargs as is."""

    args: tuple
    kwargs: dict = field(default_factory=dict)
    desc: str = ""

    def __repr__(self) -> str:
        if self.desc:
            return self.desc
        parts = [f"{a.dtype}{list(a.shape)}" if isinstance(a, np.ndarray) else repr(a)
                 for a in self.args]
        parts += [f"{k}={v!r}" for k, v in self.kwargs.items()]
        return ", ".join(parts)


@dataclass
class OpSpec:
    """How to test one primitive (or one composite ops function)."""

    name: str                    # primitive name (REGISTRY key) or function name for FUNC_DB
    op: Callable                 # op(*tensors_and_values, **kwargs) through the public API
    ref: Callable                # the same on numpy arrays
    shapes: list = field(default_factory=list)   # tuples of input shapes (default samples)
    domain: tuple | str = "real"  # per input: real positive away0 unit clip bool int
    samples: Callable | None = None  # samples(rng, dtype) -> list[Sample], instead of shapes
    nondiff: bool = False        # outputs carry no gradient
    order: int = 2               # highest derivative order checked (0 = none)
    wrt: tuple | None = None     # which args to differentiate (default: floating ndarrays)
    tol: dict = field(default_factory=dict)      # dtype -> (rtol, atol) for values
    fd_eps: float = 1e-6
    fd_tol: tuple = (1e-6, 1e-8)
    dtypes: tuple = (np.float32, np.float64)
    skips: dict = field(default_factory=dict)    # test name -> reason
    structural: str = ""         # non-empty: not an array op (IR control flow); the reason

    def make_samples(self, rng: np.random.Generator, dtype) -> list[Sample]:
        if self.samples is not None:
            return self.samples(rng, np.dtype(dtype))
        out = []
        for shapes in self.shapes:
            doms = self.domain if isinstance(self.domain, tuple) else (self.domain,) * len(shapes)
            out.append(Sample(tuple(make_input(rng, s, d, dtype) for s, d in zip(shapes, doms))))
        return out


def make_input(rng: np.random.Generator, shape, domain: str, dtype) -> np.ndarray:
    """Random input of `shape` in `domain`, as `dtype` (bool/int domains keep their own)."""
    if domain == "bool":
        return np.asarray(rng.random(shape) < 0.5)
    if domain == "int":
        return np.asarray(rng.integers(-3, 4, size=shape), dtype=np.int64)
    if domain == "real":
        x = rng.standard_normal(shape)
    elif domain == "positive":
        x = rng.uniform(0.5, 2.0, shape)
    elif domain == "away0":  # |x| >= 0.3: away from the kink of abs/relu/sign
        x = rng.uniform(0.3, 2.0, shape) * rng.choice([-1.0, 1.0], shape)
    elif domain == "unit":
        x = rng.uniform(-0.9, 0.9, shape)
    elif domain == "clip":  # away from the clamp bounds +-0.5
        x = rng.uniform(0.1, 0.4, shape) * rng.choice([-1.0, 1.0], shape) + \
            rng.choice([0.0, 1.0], shape) * np.sign(rng.standard_normal(shape))
    else:
        raise ValueError(f"unknown domain {domain}")
    return np.asarray(x, dtype=dtype)


UNARY = [(), (5,), (3, 4), (2, 3, 4)]
BINARY = [((3, 4), (3, 4)), ((3, 4), (4,)), ((2, 1, 4), (3, 1)), ((), (2, 3)), ((3, 4), ()),
          ((4, 1), (1, 3))]


def _unary(name, fn, ref, domain="real", **kw):
    return OpSpec(name, fn, ref, [(s,) for s in UNARY], domain, **kw)


def _binary(name, fn, ref, domain=("real", "real"), **kw):
    return OpSpec(name, fn, ref, list(BINARY), domain, **kw)


def _cmp(name, fn, ref):
    return OpSpec(name, fn, ref, list(BINARY), nondiff=True, order=0)


# ---- index samples ------------------------------------------------------------------------
def _getitem_samples(rng, dtype):
    x = make_input(rng, (4, 5, 3), "real", dtype)
    idx = np.array([3, 0, 3, 1])  # a repeat: the gradient must accumulate (scatter-add)
    keys = [1, -1, slice(1, 3), slice(None, None, -2), (Ellipsis, 1), (None, 2), (1, None, 2),
            (slice(None), 2, slice(0, 2)), idx, (idx, slice(None), 0),
            (slice(None), np.array([[0, 4], [2, 2]])), (idx, np.array([0, 1, 2, 4])),
            np.array([True, False, True, True]), x[..., 0] > 0, (Ellipsis, None)]
    return [Sample((x, k), desc=f"x[{k!r}]".replace("\n", "")) for k in keys]


def _scatter_add_samples(rng, dtype):
    out = []
    for key, shape in [((np.array([2, 0, 2]),), (4, 3)), ((slice(1, 3),), (4, 3)),
                       ((1, slice(None, None, 2)), (3, 5))]:
        k, idx = normalize_key(key)
        probe = np.zeros(shape)[key]
        out.append(Sample((make_input(rng, probe.shape, "real", dtype), k, tuple(idx), shape),
                          desc=f"scatter_add {key!r} -> {shape}"))
    return out


def _scatter_add(g, key, idx, shape):
    return bind(scatter_add_p, g, *idx, key=key, shape=shape)


def _scatter_add_ref(g, key, idx, shape):
    from llgrad.runtime.ops.index import numpy_key
    z = np.zeros(shape, g.dtype)
    np.add.at(z, numpy_key(key, idx), g)
    return z


def _index_put_samples(rng, dtype):
    x = make_input(rng, (4, 3), "real", dtype)
    return [Sample((x, (1,), make_input(rng, (3,), "real", dtype))),
            Sample((x, (slice(0, 4, 2), 1), make_input(rng, (2,), "real", dtype))),
            Sample((x, (np.array([0, 3]),), make_input(rng, (1, 3), "real", dtype))),
            Sample((x, (slice(None), 2), make_input(rng, (), "real", dtype)))]


def _index_put_ref(x, key, v):
    out = x.copy()
    out[key] = v
    return out


# (start, length, axis, size, stride): inside, past the end, before the start, reversed,
# empty, strided, longer than the window
_WINDOWS = [(1, 3, 0, 5, 1), (3, 4, 0, 5, 1), (-1, 3, 1, 4, 1), (4, 3, 0, 3, -1),
            (2, 0, 1, 4, 1), (0, 2, 1, 2, 2), (0, 9, 0, 2, 1)]


def _window_samples(rng, dtype):
    x = make_input(rng, (5, 4), "real", dtype)
    return [Sample((x, np.int64(s), np.int64(n)), dict(axis=a, size=z, stride=st))
            for s, n, a, z, st in _WINDOWS]


def _window_ref(x, start, length, axis, size, stride):
    xs = np.moveaxis(x, axis, 0)
    out = np.zeros((size,) + xs.shape[1:], x.dtype)
    for k in range(min(size, int(length))):
        if 0 <= start + k * stride < xs.shape[0]:
            out[k] = xs[start + k * stride]
    return np.moveaxis(out, 0, axis)


def _window_update_samples(rng, dtype):
    x = make_input(rng, (5, 4), "real", dtype)
    out = []
    for s, n, a, z, st in _WINDOWS:
        shape = (z, 4) if a == 0 else (5, z)
        out.append(Sample((x, make_input(rng, shape, "real", dtype), np.int64(s), np.int64(n)),
                          dict(axis=a, stride=st)))
    return out


def _window_update_ref(x, v, start, length, axis, stride):
    out = np.moveaxis(x.copy(), axis, 0)
    vs = np.moveaxis(v, axis, 0)
    for k in range(min(vs.shape[0], int(length))):
        if 0 <= start + k * stride < out.shape[0]:
            out[start + k * stride] = vs[k]
    return np.moveaxis(out, 0, axis)


# ---- shape samples ------------------------------------------------------------------------
def _samples(*specs):
    """specs: (shapes, kwargs) pairs -> a samples function with real-valued inputs."""
    def make(rng, dtype):
        return [Sample(tuple(make_input(rng, s, "real", dtype) for s in shapes), dict(kw))
                for shapes, kw in specs]
    return make


def _cat_samples(rng, dtype):
    def m(*shapes):
        return tuple(make_input(rng, s, "real", dtype) for s in shapes)
    return [Sample(m((2, 3), (4, 3)), {"dim": 0}), Sample(m((2, 3), (2, 1), (2, 2)), {"dim": 1}),
            Sample(m((2, 3, 1), (2, 3, 2)), {"dim": -1}), Sample(m((3,), (3,)), {"dim": 0})]


def _red(fn):
    """numpy reduction with PyTorch's (dim, keepdim) spelling."""
    def ref(x, dim=None, keepdim=False):
        return fn(x, axis=dim, keepdims=keepdim)
    return ref


REDUCE = [(((3, 4, 2),), {}), (((3, 4, 2),), {"dim": 1}), (((3, 4, 2),), {"dim": -1}),
          (((3, 4, 2),), {"dim": (0, 2)}), (((3, 4, 2),), {"dim": 1, "keepdim": True}),
          (((5,),), {"dim": 0}), (((),), {})]
REDUCE_INT = [(s, kw) for s, kw in REDUCE if not isinstance(kw.get("dim"), tuple)]


def _argref(fn):
    def ref(x, dim=None, keepdim=False):
        return np.asarray(fn(x) if dim is None else fn(x, axis=dim, keepdims=keepdim), np.int64)
    return ref


MATMUL = [((3, 4), (4, 5)), ((4,), (4, 5)), ((3, 4), (4,)), ((4,), (4,)), ((2, 3, 4), (4, 5)),
          ((2, 1, 3, 4), (5, 4, 2)), ((3, 4), (2, 4, 5)), ((1, 1), (1, 1))]

_TAPE = "loop tapes of the IR's reverse mode (See Note [Loop tapes]): tested in tests/transform"
_STRUCT = "IR control flow (regions): evaluated by transform/interp.py, tested in tests/transform"

def _lse_ref(x, dim=None, keepdim=False):
    m = np.max(x, axis=dim, keepdims=True)
    r = np.log(np.sum(np.exp(x - m), axis=dim, keepdims=True)) + m
    return r if keepdim else np.squeeze(r, axis=dim) if dim is not None else r.reshape(())


def _var_ref(x, dim=None, unbiased=True, keepdim=False):
    return np.var(x, axis=dim, ddof=1 if unbiased else 0, keepdims=keepdim)


def _softmax_ref(x, dim=-1):
    e = np.exp(x - x.max(axis=dim, keepdims=True))
    return e / e.sum(axis=dim, keepdims=True)

def _norm_ref(x, ord=2, dim=None, keepdim=False):
    a = np.abs(x)
    if ord == np.inf:
        return np.max(a, axis=dim, keepdims=keepdim)
    return np.sum(a ** ord, axis=dim, keepdims=keepdim) ** (1 / ord)


def _mse_ref(x, t, reduction="mean"):
    loss = (x - t) * (x - t)
    return loss if reduction == "none" else loss.sum() if reduction == "sum" else loss.mean()


def _nll_samples(rng, dtype):
    w = rng.uniform(0.5, 2.0, 4).astype(dtype)

    def s(shape, target, **kw):
        return Sample((make_input(rng, shape, "real", dtype), np.asarray(target, np.int64)), kw)
    return [s((3, 4), [0, 3, 1]), s((3, 4), [0, 3, 1], reduction="sum"),
            s((3, 4), [2, 2, 1], reduction="none"), s((3, 4), [0, 3, -100], weight=w),
            s((3, 4), [0, 3, 1], weight=w, ignore_index=3, reduction="sum"),
            s((2, 4, 3), [[0, 1, 2], [3, 3, 0]]),
            s((2, 4, 3), [[0, 1, 2], [3, 3, 0]], weight=w, reduction="none"), s((4,), 2)]


def _nll_ref(x, t, weight=None, ignore_index=-100, reduction="mean"):
    c = x.shape[0] if x.ndim == 1 else x.shape[1]
    logp = x.reshape(1, c) if x.ndim == 1 else np.moveaxis(x, 1, -1).reshape(-1, c)
    tt = t.reshape(-1)
    keep = tt != ignore_index
    safe = np.where(keep, tt, 0)
    w = keep * (1.0 if weight is None else weight[safe])
    loss = (-logp[np.arange(tt.size), safe] * w).astype(x.dtype)
    if reduction == "none":
        return loss.reshape(t.shape)
    return loss.sum() if reduction == "sum" else (loss.sum() / w.sum()).astype(x.dtype)


OP_DB: list[OpSpec] = [
    # arithmetic
    _binary("add", lambda x, y: x + y, np.add),
    _binary("sub", lambda x, y: x - y, np.subtract),
    _binary("mul", lambda x, y: x * y, np.multiply),
    _binary("div", lambda x, y: x / y, np.divide, ("real", "away0")),
    _unary("neg", lambda x: -x, np.negative),
    _binary("pow", lambda x, y: x ** y, np.power, ("positive", "real")),
    # math
    _unary("exp", lambda x: x.exp(), np.exp),
    _unary("log", lambda x: x.log(), np.log, "positive"),
    _unary("log1p", lambda x: x.log1p(), np.log1p, "unit"),
    _unary("expm1", lambda x: x.expm1(), np.expm1),
    _unary("sin", lambda x: x.sin(), np.sin),
    _unary("cos", lambda x: x.cos(), np.cos),
    _unary("tan", lambda x: x.tan(), np.tan, "unit"),
    _unary("tanh", lambda x: x.tanh(), np.tanh),
    _unary("sqrt", lambda x: x.sqrt(), np.sqrt, "positive"),
    _unary("abs", lambda x: abs(x), np.abs, "away0"),
    _unary("sign", lambda x: x.sign(), np.sign, "away0"),
    _unary("floor", lambda x: x.floor(), np.floor, "away0", order=1),
    OpSpec("floor_divide", lambda x, y: x // y, np.floor_divide, list(BINARY),
           ("real", "away0"), nondiff=True, order=0),
    _binary("remainder", lambda x, y: x % y, np.remainder, ("real", "away0"), order=1),
    _unary("sigmoid", lambda x: x.sigmoid(), lambda x: 1 / (1 + np.exp(-x))),
    _unary("relu", lambda x: x.relu(), lambda x: np.maximum(x, 0), "away0"),
    _binary("maximum", lambda x, y: lg.maximum(x, y), np.maximum),
    _binary("minimum", lambda x, y: lg.minimum(x, y), np.minimum),
    OpSpec("clip", lambda x, **kw: x.clamp(**kw),
           lambda x, min=None, max=None: np.clip(x, min, max),
           samples=lambda rng, dt: [
               Sample((make_input(rng, (3, 4), "clip", dt),), {"min": -0.5, "max": 0.5}),
               Sample((make_input(rng, (6,), "clip", dt),), {"min": -0.5}),
               Sample((make_input(rng, (2, 3), "clip", dt),), {"max": 0.5})]),
    OpSpec("where", lambda c, x, y: lg.where(c, x, y), np.where,
           [((3, 4), (3, 4), (3, 4)), ((3, 4), (4,), ()), ((3, 1), (1, 4), (3, 4))],
           ("bool", "real", "real")),
    OpSpec("astype", lambda x, dtype: x.to(dtype), lambda x, dtype: x.astype(dtype.np),
           samples=lambda rng, dt: [
               Sample((make_input(rng, (3, 4), "real", dt), lg.float64 if dt == np.float32
                       else lg.float32)),
               Sample((make_input(rng, (5,), "real", dt), lg.int64))],
           fd_eps=1e-3, fd_tol=(1e-3, 1e-5), order=1,
           tol={np.dtype(np.float64): (1e-6, 1e-7)}),
    _unary("copy", lambda x: x.clone(), np.copy),
    _unary("stop_gradient", lambda x: ops.stop_gradient(x), lambda x: x, nondiff=True, order=0),
    # comparisons and logic
    _cmp("lt", lambda x, y: x < y, np.less),
    _cmp("le", lambda x, y: x <= y, np.less_equal),
    _cmp("gt", lambda x, y: x > y, np.greater),
    _cmp("ge", lambda x, y: x >= y, np.greater_equal),
    _cmp("eq", lambda x, y: x == y, np.equal),
    _cmp("ne", lambda x, y: x != y, np.not_equal),
    OpSpec("logical_and", lambda a, b: a & b, np.logical_and, list(BINARY), ("bool", "bool"),
           nondiff=True, order=0),
    OpSpec("logical_or", lambda a, b: a | b, np.logical_or, list(BINARY), ("bool", "bool"),
           nondiff=True, order=0),
    OpSpec("logical_not", lambda a: ~a, np.logical_not, [(s,) for s in UNARY], "bool",
           nondiff=True, order=0),
    # indexing
    OpSpec("getitem", lambda x, key: x[key], lambda x, key: x[key], samples=_getitem_samples),
    OpSpec("scatter_add", _scatter_add, _scatter_add_ref, samples=_scatter_add_samples),
    OpSpec("dynamic_window", lambda x, s, n, **kw: bind(dynamic_window_p, x, s, n, **kw),
           _window_ref, samples=_window_samples),
    OpSpec("window_update", lambda x, v, s, n, **kw: bind(window_update_p, x, v, s, n, **kw),
           _window_update_ref, samples=_window_update_samples),
    OpSpec("index_put", lambda x, key, v: ops.setitem(x, key, v), _index_put_ref,
           samples=_index_put_samples),
    # shape
    OpSpec("reshape", lambda x, shape: x.reshape(shape), lambda x, shape: x.reshape(shape),
           samples=lambda rng, dt: [
               Sample((make_input(rng, s, "real", dt), t)) for s, t in
               [((2, 3, 4), (6, 4)), ((2, 3, 4), (-1,)), ((2, 3, 4), (4, -1, 2)), ((), (1, 1)),
                ((6,), (3, 2))]]),
    OpSpec("transpose", lambda x, perm: x.permute(*perm), lambda x, perm: x.transpose(perm),
           samples=lambda rng, dt: [
               Sample((make_input(rng, s, "real", dt), p)) for s, p in
               [((3, 4), (1, 0)), ((2, 3, 4), (2, 0, 1)), ((2, 3, 4), (0, 2, 1))]]),
    OpSpec("broadcast_to", lambda x, shape: x.expand(*shape), np.broadcast_to,
           samples=lambda rng, dt: [
               Sample((make_input(rng, s, "real", dt), t)) for s, t in
               [((3, 1), (2, 3, 4)), ((), (3,)), ((4,), (3, 4)), ((1, 1), (2, 5))]]),
    OpSpec("concatenate", lambda *xs, dim: lg.cat(xs, dim),
           lambda *xs, dim: np.concatenate(xs, dim), samples=_cat_samples),
    # linear algebra
    OpSpec("matmul", lambda a, b: a @ b, np.matmul, list(MATMUL),
           tol={np.dtype(np.float32): (1e-5, 1e-5)}),
    # reductions
    OpSpec("reduce_sum", lambda x, **kw: x.sum(**kw), _red(np.sum), samples=_samples(*REDUCE),
           tol={np.dtype(np.float32): (1e-5, 1e-5)}),
    OpSpec("reduce_max", lambda x, **kw: x.amax(**kw), _red(np.max), samples=_samples(*REDUCE)),
    OpSpec("reduce_min", lambda x, **kw: x.amin(**kw), _red(np.min), samples=_samples(*REDUCE)),
    OpSpec("reduce_prod", lambda x, **kw: x.prod(**kw), _red(np.prod), samples=_samples(*REDUCE)),
    OpSpec("argmax", lambda x, **kw: x.argmax(**kw), _argref(np.argmax),
           samples=_samples(*REDUCE_INT), nondiff=True, order=0),
    OpSpec("argmin", lambda x, **kw: x.argmin(**kw), _argref(np.argmin),
           samples=_samples(*REDUCE_INT), nondiff=True, order=0),
    # IR-only structural primitives
    OpSpec("constant", None, None, structural="an IR literal: created by the tracer, evaluated "
           "by transform/interp.py; its shape rule is checked in tests/test_registry.py"),
    OpSpec("cond", None, None, structural=_STRUCT),
    OpSpec("for_loop", None, None, structural=_STRUCT),
    OpSpec("while_loop", None, None, structural=_STRUCT),
    OpSpec("fusion", None, None, structural=_STRUCT),
    OpSpec("check", None, None, structural="raises the user's exception (Note [Checks]): "
           "tested in tests/e2e/test_raise.py and tests/transform"),
    OpSpec("custom_vjp", None, None, structural="a custom derivative rule's call (regions): "
           "made by tracer/custom.py, removed before codegen; tested in "
           "tests/e2e/test_custom_vjp.py"),
    OpSpec("tape_new", None, None, structural=_TAPE),
    OpSpec("tape_push", None, None, structural=_TAPE),
    OpSpec("tape_get", None, None, structural=_TAPE),
    OpSpec("logsumexp", lambda x, **kw: x.logsumexp(**kw), _lse_ref, samples=_samples(
        (((3, 4),), {"dim": 1}), (((3, 4),), {"dim": 0, "keepdim": True}),
        (((2, 3, 4),), {"dim": (0, 2)}))),
    OpSpec("mean", lambda x, **kw: x.mean(**kw), _red(np.mean), samples=_samples(*REDUCE)),
    OpSpec("var", lambda x, **kw: x.var(**kw), _var_ref, samples=_samples(
        (((3, 4),), {}), (((3, 4),), {"dim": 1}), (((3, 4),), {"dim": 0, "unbiased": False}),
        (((2, 3, 4),), {"dim": (0, 2), "keepdim": True})), tol={np.dtype(np.float32): (1e-4, 1e-5)}),
    OpSpec("std", lambda x, **kw: x.std(**kw),
           lambda x, **kw: np.sqrt(_var_ref(x, **kw)), samples=_samples(
               (((3, 4),), {}), (((3, 4),), {"dim": 1, "keepdim": True})),
           tol={np.dtype(np.float32): (1e-4, 1e-5)}),
    OpSpec("softmax", lambda x, **kw: x.softmax(**kw), _softmax_ref, samples=_samples(
        (((3, 4),), {"dim": 1}), (((3, 4),), {"dim": 0}), (((5,),), {}))),
    OpSpec("log_softmax", lambda x, **kw: x.log_softmax(**kw),
           lambda x, dim=-1: np.log(_softmax_ref(x, dim)), samples=_samples(
               (((3, 4),), {"dim": 1}), (((2, 3, 4),), {"dim": 0}))),
    OpSpec("square", lambda x: x.square(), np.square, [((3, 4),)]),
    OpSpec("rsqrt", lambda x: x.rsqrt(), lambda x: 1 / np.sqrt(x), [((3, 4),)], "positive"),
    OpSpec("vector_norm", lambda x, *a, **kw: lg.linalg.vector_norm(x, *a, **kw), _norm_ref,
           samples=_samples((((3, 4),), {}), (((3, 4),), {"dim": 1}),
                            (((3, 4),), {"ord": 1, "dim": 0, "keepdim": True}),
                            (((2, 3, 4),), {"ord": 3, "dim": (0, 2)}),
                            (((3, 4),), {"ord": np.inf, "dim": 1}), (((5,),), {})),
           tol={np.dtype(np.float32): (1e-5, 1e-6)}),
    # losses (composites: one eager node each, decomposed for the compiler)
    OpSpec("mse_loss", lambda x, t, **kw: lg.nn.functional.mse_loss(x, t, **kw), _mse_ref,
           samples=_samples((((3, 4), (3, 4)), {}), (((3, 4), (3, 4)), {"reduction": "sum"}),
                            (((2, 3, 4), (2, 3, 4)), {"reduction": "none"}),
                            (((3, 4), (4,)), {"reduction": "none"}), (((3, 4), ()), {}),
                            (((), ()), {"reduction": "sum"})),
           tol={np.dtype(np.float32): (1e-5, 1e-6)}),
    OpSpec("nll_loss", lambda x, t, **kw: lg.nn.functional.nll_loss(x, t, **kw), _nll_ref,
           samples=_nll_samples, tol={np.dtype(np.float32): (1e-5, 1e-6)}),
]

# scans, sorting, structure and contractions (issue 11): tests/opinfo_shape.py
from opinfo_shape import SHAPE_FUNCS, SHAPE_OPS  # noqa: E402

OP_DB += SHAPE_OPS
# ---- numpy's elementwise math and scipy.special (issue 11) --------------------------------
def _draw(rng, shape, domain, dtype):
    """make_input plus the domains of this block: above1 (arccosh), prob (logit), gamma
    (reals away from the poles 0, -1, -2, ... of lgamma/digamma)."""
    if domain == "above1":
        x = rng.uniform(1.2, 3.0, shape)
    elif domain == "prob":
        x = rng.uniform(0.05, 0.95, shape)
    elif domain == "gamma":
        x = rng.integers(-3, 4, shape) + rng.uniform(0.2, 0.8, shape)
    else:
        return make_input(rng, shape, domain, dtype)
    return np.asarray(x, dtype=dtype)


def _math(name, op, ref, domain="real", shapes=None, **kw):
    """An OpSpec over UNARY (one domain) or BINARY (a tuple of domains) shapes."""
    binary = isinstance(domain, tuple)
    shapes = shapes or (list(BINARY) if binary else [(s,) for s in UNARY])
    doms = domain if binary else (domain,)

    def samples(rng, dt):
        return [Sample(tuple(_draw(rng, sh, d, dt) for sh, d in zip(shs, doms)))
                for shs in shapes]
    return OpSpec(name, op, ref, samples=samples, **kw)


def _special(name):
    import scipy.special
    return getattr(scipy.special, name)


def _trigamma_ref(x):
    return _special("polygamma")(1, x).astype(x.dtype)


def _with_constants(constants: tuple, domain: str):
    """Samples of a function whose first arguments are constants (an order v, a shape a: no
    derivative) and whose last is an array of `domain`."""
    def samples(rng, dt):
        return [Sample((*constants, _draw(rng, sh, domain, dt))) for sh in UNARY]
    return samples


def _in_dtype_of_last(name):
    """scipy.special's `name` with the dtype of its array argument (scipy has float64 loops
    only: llgrad's primitive keeps float32 as torch.special does)."""
    def ref(*xs):
        return _special(name)(*xs).astype(xs[-1].dtype)
    return ref


_AWAY = ("away0", "away0")
NUMPY_MATH_DB: list[OpSpec] = [
    _math("sinh", lambda x: x.sinh(), np.sinh),
    _math("cosh", lambda x: x.cosh(), np.cosh),
    _math("arcsin", lambda x: x.asin(), np.arcsin, "unit"),
    _math("arccos", lambda x: x.acos(), np.arccos, "unit"),
    _math("arctan", lambda x: x.atan(), np.arctan),
    _math("arcsinh", lambda x: x.asinh(), np.arcsinh),
    _math("arccosh", lambda x: x.acosh(), np.arccosh, "above1"),
    _math("arctanh", lambda x: x.atanh(), np.arctanh, "unit"),
    _math("arctan2", lambda y, x: lg.atan2(y, x), np.arctan2, _AWAY),
    _math("exp2", lambda x: x.exp2(), np.exp2),
    _math("log2", lambda x: x.log2(), np.log2, "positive"),
    _math("log10", lambda x: x.log10(), np.log10, "positive"),
    _math("cbrt", lambda x: ops.cbrt(x), np.cbrt, "away0"),
    _math("logaddexp", lambda x, y: lg.logaddexp(x, y), np.logaddexp, ("real", "real")),
    _math("logaddexp2", lambda x, y: lg.logaddexp2(x, y), np.logaddexp2, ("real", "real")),
    _math("hypot", lambda x, y: lg.hypot(x, y), np.hypot, _AWAY),
    _math("copysign", lambda x, y: lg.copysign(x, y), np.copysign, _AWAY),
    _math("fmod", lambda x, y: lg.fmod(x, y), np.fmod, ("real", "away0"), order=1),
    _math("ceil", lambda x: x.ceil(), np.ceil, "away0", order=1),
    _math("trunc", lambda x: x.trunc(), np.trunc, "away0", order=1),
    _math("rint", lambda x: x.round(), np.rint, "away0", order=1),
    _math("erf", lambda x: x.erf(), _special("erf")),
    _math("erfc", lambda x: x.erfc(), _special("erfc")),
    _math("lgamma", lambda x: x.lgamma(), _special("gammaln"), "gamma"),
    # digamma' = trigamma, whose own derivative is not provided: first order only
    _math("digamma", lambda x: x.digamma(), _special("digamma"), "gamma", order=1),
    _math("trigamma", lambda x: x.detach().polygamma(1), _trigamma_ref, "gamma", order=0,
          tol={np.dtype(np.float32): (1e-4, 1e-5)}),
    _math("logit", lambda x: x.logit(), _special("logit"), "prob"),
    _math("ndtr", lambda x: lg.special.ndtr(x), _special("ndtr")),
    _math("log_ndtr", lambda x: lg.special.log_ndtr(x), _special("log_ndtr")),
    _math("erfinv", lambda x: lg.special.erfinv(x), _special("erfinv"), "unit"),
    # gamma'' needs trigamma, whose own derivative is not provided: order 2 is the most
    _math("gamma", lambda x: lg.special.gamma(x), _special("gamma"), "gamma"),
    _math("xlogy", lambda x, y: lg.xlogy(x, y), _special("xlogy"), ("real", "positive")),
    _math("xlog1py", lambda x, y: lg.special.xlog1py(x, y), _special("xlog1py"),
          ("real", "unit")),
    # scipy's own C functions (runtime/ops/special_scipy.py); order and shape parameters
    # (the first arguments) have no derivative: only the last one is differentiated
    _math("i0", lambda x: lg.special.i0(x), _special("i0")),
    _math("i0e", lambda x: lg.special.i0e(x), _special("i0e"), "away0"),
    _math("i1", lambda x: lg.special.i1(x), _special("i1")),
    _math("i1e", lambda x: lg.special.i1e(x), _special("i1e"), "away0"),
    _math("ndtri", lambda x: lg.special.ndtri(x), _special("ndtri"), "prob"),
    _math("erfcx", lambda x: lg.special.erfcx(x), _special("erfcx")),
    _math("dawsn", lambda x: lg.special.dawsn(x), _special("dawsn")),
    _math("exprel", lambda x: lg.special.exprel(x), _special("exprel")),
    _math("binom", lambda n, k: lg.special.binom(n, k), _special("binom"),
          ("positive", "positive")),
    *(OpSpec(name, getattr(lg.special, name), _in_dtype_of_last(name),
             samples=_with_constants((1.3,), "positive")) for name in (
                 "gammainc", "gammaincc", "kv", "kve", "jv")),
    OpSpec("betainc", lg.special.betainc, _in_dtype_of_last("betainc"),
           samples=_with_constants((1.5, 2.5), "prob")),
]
OP_DB += NUMPY_MATH_DB

# linear algebra (issue 11): tests/opinfo_linalg.py
from opinfo_linalg import LINALG_FUNCS, LINALG_OPS  # noqa: E402

OP_DB += LINALG_OPS
# neural-network layers (issue 15): tests/opinfo_nn.py
from opinfo_nn import NN_OPS  # noqa: E402

OP_DB += NN_OPS

# PyTorch's gather/scatter family, addmm (issue 15): tests/opinfo_torch.py
from opinfo_torch import TORCH_FUNCS, TORCH_OPS  # noqa: E402

OP_DB += TORCH_OPS
OPS = {s.name: s for s in OP_DB}


def _split_ref(x, size, dim=0):
    n = x.shape[dim]
    edges = list(range(size, n, size)) if isinstance(size, int) else list(np.cumsum(size)[:-1])
    return tuple(np.split(x, edges, axis=dim))


def _repeat_ref(x, *reps):
    return np.tile(x, reps)


_R = "real"
FUNC_DB: list[OpSpec] = [
    OpSpec("norm", lambda x, *a, **kw: x.norm(*a, **kw),
           lambda x, p="fro", dim=None, keepdim=False: _norm_ref(
               x, 2 if p == "fro" else p, dim, keepdim), samples=_samples(
               (((3, 4),), {}), (((3, 4),), {"p": 2, "dim": 1}), (((3, 4),), {"p": 1}),
               (((2, 3, 4),), {"dim": (1, 2), "keepdim": True})),
           tol={np.dtype(np.float32): (1e-5, 1e-6)}),
    OpSpec("stack", lambda *xs, dim=0: lg.stack(xs, dim), lambda *xs, dim=0: np.stack(xs, dim),
           samples=_samples((((3,), (3,)), {}), (((2, 3), (2, 3), (2, 3)), {"dim": 1}),
                            (((2, 3), (2, 3)), {"dim": -1}))),
    OpSpec("split", lambda x, s, dim=0: x.split(s, dim), _split_ref,
           samples=lambda rng, dt: [
               Sample((make_input(rng, (5, 3), _R, dt), 2)),
               Sample((make_input(rng, (2, 6), _R, dt), [1, 2, 3]), {"dim": 1})]),
    OpSpec("squeeze", lambda x, **kw: x.squeeze(**kw),
           lambda x, dim=None: np.squeeze(x, axis=dim), samples=_samples(
               (((1, 3, 1),), {}), (((1, 3, 1),), {"dim": 0}), (((1, 3, 1),), {"dim": -1}))),
    OpSpec("unsqueeze", lambda x, d: x.unsqueeze(d), lambda x, d: np.expand_dims(x, d),
           samples=lambda rng, dt: [Sample((make_input(rng, (3, 4), _R, dt), d))
                                    for d in (0, 1, 2, -1)]),
    OpSpec("flatten", lambda x, **kw: x.flatten(**kw),
           lambda x, start_dim=0, end_dim=-1: x.reshape(
               x.shape[:start_dim] + (-1,) + x.shape[end_dim % x.ndim + 1:]) if x.ndim else
           x.reshape(1), samples=_samples(
               (((2, 3, 4),), {}), (((2, 3, 4),), {"start_dim": 1}), (((),), {}))),
    OpSpec("repeat", lambda x, *r: x.repeat(*r), _repeat_ref, samples=lambda rng, dt: [
        Sample((make_input(rng, (2, 3), _R, dt), 2, 1)),
        Sample((make_input(rng, (3,), _R, dt), 2, 2))]),
    OpSpec("expand", lambda x, *s: x.expand(*s), lambda x, *s: np.broadcast_to(
        x, tuple(d if d != -1 else x.shape[i - (len(s) - x.ndim)] for i, d in enumerate(s))),
        samples=lambda rng, dt: [Sample((make_input(rng, (3, 1), _R, dt), 2, -1, 4))]),
    OpSpec("transpose_dims", lambda x, a, b: x.transpose(a, b), np.swapaxes,
           samples=lambda rng, dt: [Sample((make_input(rng, (2, 3, 4), _R, dt), 0, 2))]),
    OpSpec("T", lambda x: x.T, lambda x: x.T, [((3, 4),), ((2, 3, 4),)]),
    OpSpec("t", lambda x: x.t(), lambda x: x.T, [((3, 4),), ((3,),)]),
    OpSpec("view_as", lambda x, y: x.view_as(y), lambda x, y: x.reshape(y.shape),
           [((3, 4), (2, 6))], wrt=(0,)),
    OpSpec("dot", lambda a, b: lg.dot(a, b), np.dot, [((4,), (4,))]),
    OpSpec("outer", lambda a, b: lg.outer(a, b), np.outer, [((3,), (4,))]),
    OpSpec("max_dim", lambda x, d: x.max(d).values, lambda x, d: x.max(axis=d),
           samples=lambda rng, dt: [Sample((make_input(rng, (3, 4), _R, dt), 1))]),
    OpSpec("min_dim", lambda x, d: x.min(d).values, lambda x, d: x.min(axis=d),
           samples=lambda rng, dt: [Sample((make_input(rng, (3, 4), _R, dt), 0))]),
    OpSpec("max_all", lambda x: x.max(), np.max, [((3, 4),)]),
    OpSpec("masked_fill", lambda x, m: x.masked_fill(m, 0.5),
           lambda x, m: np.where(m, np.asarray(0.5, x.dtype), x), [((3, 4), (3, 4))],
           (_R, "bool")),
    OpSpec("reciprocal", lambda x: x.reciprocal(), np.reciprocal, [((3, 4),)], "away0"),
    OpSpec("chunk", lambda x: x.chunk(2), lambda x: tuple(np.array_split(x, 2)), [((5, 2),)]),
    OpSpec("sub_alpha", lambda x, y: x.sub(y, alpha=2), lambda x, y: x - 2 * y,
           [((3,), (3,))]),
    OpSpec("pow_scalar", lambda x: x ** 3, lambda x: x ** 3, [((4,),)]),
    OpSpec("rpow", lambda x: 2 ** x, lambda x: 2 ** x, [((4,),)]),
    OpSpec("rsub", lambda x: 1 - x, lambda x: 1 - x, [((4,),)]),
    OpSpec("rdiv", lambda x: 1 / x, lambda x: 1 / x, [((4,),)], "away0"),
]
FUNC_DB += SHAPE_FUNCS


def _special_values(rng, dt):
    x = make_input(rng, (3, 4), "real", dt)
    x.flat[[0, 3, 5, 6, 10]] = [np.nan, np.inf, -np.inf, -0.0, 0.0]
    return [Sample((x,)), Sample((make_input(rng, (), "real", dt),))]


def _heaviside_samples(rng, dt):
    x = make_input(rng, (3, 4), "away0", dt)
    x.flat[[1, 7]] = 0.0
    return [Sample((x, make_input(rng, (4,), "real", dt))),
            Sample((x, make_input(rng, (), "real", dt)))]


_SPECIAL = dict(samples=_special_values, nondiff=True, order=0)
NUMPY_MATH_FUNCS: list[OpSpec] = [
    OpSpec("round_decimals", lambda x: x.round(decimals=2), lambda x: np.round(x, 2),
           [((3, 4),), ((),)], order=1),
    OpSpec("round_negative_decimals", lambda x: lg.round(x * 100, decimals=-1),
           lambda x: np.round(x * 100, -1), [((3, 4),)], order=1),
    OpSpec("sinc", lambda x: x.sinc(), np.sinc, [((3, 4),), ((),)]),
    OpSpec("deg2rad", lambda x: x.deg2rad(), np.deg2rad, [((3, 4),)], order=1),
    OpSpec("rad2deg", lambda x: x.rad2deg(), np.rad2deg, [((3, 4),)], order=1),
    OpSpec("positive", lambda x: lg.positive(x), np.positive, [((3, 4),)], order=1),
    # (finite replacements: the default +-1.8e308 swamps central differences)
    OpSpec("nan_to_num", lambda x: x.nan_to_num(posinf=7.0, neginf=-7.0),
           lambda x: np.nan_to_num(x, posinf=7.0, neginf=-7.0), samples=_special_values,
           order=1),
    OpSpec("heaviside", lambda x, v: x.heaviside(v), np.heaviside, samples=_heaviside_samples,
           order=1, wrt=(1,)),  # d/dx is a Dirac delta at 0: zero, and no fd to check
    OpSpec("isnan", lambda x: x.isnan(), np.isnan, **_SPECIAL),
    OpSpec("isinf", lambda x: x.isinf(), np.isinf, **_SPECIAL),
    OpSpec("isfinite", lambda x: x.isfinite(), np.isfinite, **_SPECIAL),
    OpSpec("signbit", lambda x: x.signbit(), np.signbit, **_SPECIAL),
]
FUNC_DB += NUMPY_MATH_FUNCS
FUNC_DB += SHAPE_FUNCS + LINALG_FUNCS + TORCH_FUNCS
