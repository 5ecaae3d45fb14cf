"""Reductions: reduce_sum/max/min/prod and argmax/argmin primitives, and the composites mean,
var, std, logsumexp, softmax, log_softmax and vector_norm (one eager node each, as in PyTorch;
the compiler sees their `decompose`, so they need no lowering).

Reductions take `axes` (a sorted tuple of non-negative ints) and `keepdims`.
"""
from __future__ import annotations

import numpy as np

from llgrad.runtime.aval import I64, Aval, aval_str, normalize_axes
from llgrad.runtime.errors import ShapeError
from llgrad.runtime.ops import elementwise as ew
from llgrad.runtime.ops._util import dtype_of, operands, shape_of
from llgrad.runtime.prim import Primitive, bind, register
from llgrad.runtime.promotion import float_of


def _reduced_shape(shape, axes, keepdims):
    if keepdims:
        return tuple(1 if i in axes else d for i, d in enumerate(shape))
    return tuple(d for i, d in enumerate(shape) if i not in axes)


def _reduce_shape_rule(x, axes, keepdims, dtype=None):
    return Aval(_reduced_shape(x.shape, axes, keepdims), dtype or x.dtype)


def _expand_back(g, x, axes, keepdims):
    """Broadcast a reduction's cotangent (or output) back to the input's shape."""
    from llgrad.runtime.ops.shape import broadcast_to, reshape
    if not keepdims:
        g = reshape(g, _reduced_shape(shape_of(x), axes, True))
    return broadcast_to(g, shape_of(x))


def _sum_vjp(g, out, x, axes, keepdims):
    return _expand_back(g, x, axes, keepdims)


def _extremum_vjp(g, out, x, axes, keepdims):
    # The gradient goes to the extremal elements, shared evenly among ties (PyTorch's amax);
    # where the result is NaN (numpy's max propagates it), to the NaN elements, shared evenly
    # (PyTorch's max(): evenly_distribute_backward), not NaN everywhere from 0 / 0.
    out = _expand_back(out, x, axes, keepdims)
    hit = ew.logical_or(ew.eq(x, out), ew.logical_and(ew.ne(x, x), ew.ne(out, out)))
    mask = ew.astype(hit, dtype_of(x))
    count = reduce_sum(mask, axes, True)
    return ew.mul(_expand_back(g, x, axes, keepdims), ew.div(mask, count))


def _no_identity(x, axes, what: str) -> None:
    """numpy's error for a max/min/argmax/argmin over an axis of length 0 (shapes are static,
    so it is raised while tracing, where compiled code would return the identity -inf)."""
    empty = [a for a in axes if x.shape[a] == 0]
    if empty:
        raise ShapeError(f"{what}: {aval_str(x.shape, x.dtype)} has length 0 along axis "
                         f"{empty[0]}", fix="make sure the array is not empty along the "
                         "reduced axes (shapes are static: test x.shape / x.size in Python "
                         "before reducing)")


def _extremum_shape(ufunc: str):
    def rule(x, axes, keepdims):
        _no_identity(x, axes, f"zero-size array to reduction operation {ufunc} which has no "
                              f"identity")
        return _reduce_shape_rule(x, axes, keepdims)
    return rule


def _prod_vjp(g, out, x, axes, keepdims):
    # d prod / d x_i = product of the others; exact with zeros (no division by x).
    return ew.mul(_expand_back(g, x, axes, keepdims), _prod_of_others(x, axes))


def _prod_of_others(x, axes):
    from llgrad.runtime.ops.shape import broadcast_to
    # One zero: its slot gets the product of the non-zeros; two or more zeros: all slots 0.
    zero = ew.eq(x, 0)
    nz = ew.where(zero, 1.0, x)
    prod_nz = broadcast_to(reduce_prod(nz, axes, True), shape_of(x))
    nzeros = broadcast_to(reduce_sum(ew.astype(zero, I64), axes, True), shape_of(x))
    others_no_zero = ew.div(prod_nz, nz)
    return ew.where(ew.eq(nzeros, 0), others_no_zero,
                    ew.where(ew.logical_and(ew.eq(nzeros, 1), zero), prod_nz, 0.0))


def _keeps_batch(batched, shapes, outs, params) -> bool:
    """A reduction keeps the examples of a batch (axis 0) apart unless it reduces axis 0."""
    return 0 not in params["axes"]


def _reduction(name, impl, vjp, saves, numpy=(), node_name=None, shape=_reduce_shape_rule,
               linear=None):
    return register(Primitive(name, "reduce", impl, shape, (vjp,), saves=saves,
                              numpy=numpy, node_name=node_name, batch=_keeps_batch,
                              linear=linear))


def _variant(op):
    # PyTorch names a reduction over every dim (no dim given) `<op>Backward0` and one over
    # given dims `<op>Backward1`. Axes arrive normalised, so "the result is 0-d and not
    # keepdim" stands in for "no dim given" (a 1-d x.sum(0) is named SumBackward0 here).
    names = (op + "Backward0", op + "Backward1")
    return lambda out_shape, axes, keepdims, **_: names[out_shape != () or keepdims]


reduce_sum_p = _reduction(
    "reduce_sum", lambda x, axes, keepdims: np.sum(x, axis=axes, keepdims=keepdims), _sum_vjp,
    saves=(), node_name=_variant("Sum"), linear="linear")
reduce_max_p = _reduction(
    "reduce_max", lambda x, axes, keepdims: np.max(x, axis=axes, keepdims=keepdims),
    _extremum_vjp, saves=(0, -1), node_name="AmaxBackward0", shape=_extremum_shape("maximum"))
reduce_min_p = _reduction(
    "reduce_min", lambda x, axes, keepdims: np.min(x, axis=axes, keepdims=keepdims),
    _extremum_vjp, saves=(0, -1), node_name="AminBackward0", shape=_extremum_shape("minimum"))
reduce_prod_p = _reduction(
    "reduce_prod", lambda x, axes, keepdims: np.prod(x, axis=axes, keepdims=keepdims),
    _prod_vjp, saves=(0,), node_name=_variant("Prod"))


def _lse_impl(x, axes, keepdims):
    m = np.max(x, axis=axes, keepdims=True, initial=-np.inf)  # -inf (then 0) when empty
    m = np.where(np.isfinite(m), m, 0).astype(x.dtype, copy=False)
    with np.errstate(divide="ignore"):  # all -inf: log(0) = -inf, the right answer
        s = np.log(np.sum(np.exp(x - m), axis=axes, keepdims=True)) + m
    return s if keepdims else np.squeeze(s, axis=axes)


def _lse_vjp(g, out, x, axes, keepdims):
    # d lse / dx = softmax(x) = exp(x - lse)
    return ew.mul(_expand_back(g, x, axes, keepdims),
                  ew.exp(ew.sub(x, _expand_back(out, x, axes, keepdims))))


def _lse_decompose(x, axes, keepdims):
    # The same computation with primitives: max-shifted (the shift carries no gradient);
    # over an empty axis there is no max to shift by, and the sum of nothing gives -inf.
    if any(shape_of(x)[a] == 0 for a in axes):
        m = 0.0
    else:
        m = ew.stop_gradient(bind(reduce_max_p, x, axes=axes, keepdims=True))
        m = ew.where(ew.logical_and(ew.gt(m, -np.inf), ew.lt(m, np.inf)), m, 0.0)
    s = ew.add(ew.log(reduce_sum(ew.exp(ew.sub(x, m)), axes, True)), m)
    if not keepdims:
        from llgrad.runtime.ops.shape import reshape
        s = reshape(s, _reduced_shape(shape_of(x), axes, False))
    return s


logsumexp_p = register(Primitive(
    "logsumexp", "reduce", _lse_impl, _reduce_shape_rule, (_lse_vjp,), saves=(0, -1),
    decompose=_lse_decompose, batch=_keeps_batch,
    node_name="LogsumexpBackward0"))


# ---- composites: one eager node each (PyTorch's names), decomposed for the compiler ----------
# Each impl computes exactly what its decomposition does (sum / n for mean, ...), so eager and
# compiled values agree, and the VJP rules are PyTorch's (mean_backward, var_backward, ...).
def _count(x, axes):
    n = 1
    for a in axes:
        n *= shape_of(x)[a]
    return n


def _mean_impl(x, axes, keepdims):
    return np.true_divide(np.sum(x, axis=axes, keepdims=keepdims),
                          np.asarray(float(_count(x, axes)), x.dtype))


def _mean_vjp(g, out, x, axes, keepdims):
    return _expand_back(ew.div(g, float(_count(x, axes))), x, axes, keepdims)


mean_p = register(Primitive(
    "mean", "reduce", _mean_impl, _reduce_shape_rule, (_mean_vjp,), saves=(),
    decompose=lambda x, axes, keepdims: ew.div(reduce_sum(x, axes, keepdims),
                                               float(_count(x, axes))),
    batch=_keeps_batch,
    node_name=_variant("Mean")))


def _var_shape(x, axes, correction, keepdims):
    return _reduce_shape_rule(x, axes, keepdims)


def _var_denominator(x, axes, correction):
    return float(max(_count(x, axes) - correction, 0))


def _var_impl(x, axes, correction, keepdims):
    c = x - _mean_impl(x, axes, True)
    return np.true_divide(np.sum(c * c, axis=axes, keepdims=keepdims),
                          np.asarray(_var_denominator(x, axes, correction), x.dtype))


def _var_vjp(g, out, x, axes, correction, keepdims):
    # d var / dx = 2 (x - mean) / (n - correction); the mean's own gradient sums to zero.
    d = _var_denominator(x, axes, correction)
    g = ew.mul(g, 2.0 / d if d else np.inf)
    return ew.mul(_expand_back(g, x, axes, keepdims), ew.sub(x, mean(x, axes, keepdim=True)))


def _var_decompose(x, axes, correction, keepdims):
    centred = ew.sub(x, mean(x, axes, keepdim=True))
    ss = reduce_sum(ew.mul(centred, centred), axes, keepdims)
    return ew.div(ss, _var_denominator(x, axes, correction))


var_p = register(Primitive(
    "var", "reduce", _var_impl, _var_shape, (_var_vjp,), saves=(0,),
    decompose=_var_decompose, batch=_keeps_batch,
    node_name="VarBackward0"))


def _std_vjp(g, out, x, axes, correction, keepdims):
    # d std / dx = (x - mean) / ((n - correction) std)
    g = ew.div(g, ew.mul(out, _var_denominator(x, axes, correction)))
    return ew.mul(_expand_back(g, x, axes, keepdims), ew.sub(x, mean(x, axes, keepdim=True)))


std_p = register(Primitive(
    "std", "reduce", lambda x, **p: np.sqrt(_var_impl(x, **p)), _var_shape, (_std_vjp,),
    saves=(0, -1), decompose=lambda x, **p: ew.sqrt(_var_decompose(x, **p)),
    batch=_keeps_batch,
    node_name="StdBackward0"))


def _same_shape(x, axes):
    return Aval(x.shape, x.dtype)


def _lse_kept(x, axes):
    return bind(logsumexp_p, x, axes=axes, keepdims=True)


softmax_p = register(Primitive(
    "softmax", "reduce", lambda x, axes: np.exp(x - _lse_impl(x, axes, True)), _same_shape,
    (lambda g, out, x, axes: ew.mul(out, ew.sub(g, reduce_sum(ew.mul(g, out), axes, True))),),
    saves=(-1,), decompose=lambda x, axes: ew.exp(ew.sub(x, _lse_kept(x, axes))),
    batch=_keeps_batch,
    node_name="SoftmaxBackward0"))
log_softmax_p = register(Primitive(
    "log_softmax", "reduce", lambda x, axes: x - _lse_impl(x, axes, True), _same_shape,
    (lambda g, out, x, axes: ew.sub(g, ew.mul(ew.exp(out), reduce_sum(g, axes, True))),),
    saves=(-1,), decompose=lambda x, axes: ew.sub(x, _lse_kept(x, axes)),
    batch=_keeps_batch,
    node_name="LogSoftmaxBackward0"))


def _norm_impl(x, ord, axes, keepdims):
    if ord == 2:
        r = np.sqrt(np.sum(x * x, axis=axes, keepdims=keepdims))
    elif ord == 0:
        r = np.sum((x != 0).astype(x.dtype), axis=axes, keepdims=keepdims)
    elif ord == 1:
        r = np.sum(np.abs(x), axis=axes, keepdims=keepdims)
    elif ord == np.inf:
        r = np.max(np.abs(x), axis=axes, keepdims=keepdims)
    elif ord == -np.inf:
        r = np.min(np.abs(x), axis=axes, keepdims=keepdims)
    else:
        # np.power on arrays, not a numpy scalar's ** (libm's pow): the same bits as the
        # decomposition's pow ops.
        s = np.asarray(np.sum(np.power(np.abs(x), ord), axis=axes, keepdims=keepdims))
        r = np.power(s, 1.0 / ord)
    return np.asarray(r).astype(x.dtype, copy=False)


def _norm_vjp(g, out, x, ord, axes, keepdims):
    # PyTorch's norm_backward: 0 where the norm is 0; the inf-norms share ties evenly.
    g, out = _expand_back(g, x, axes, keepdims), _expand_back(out, x, axes, keepdims)
    if ord == 0:
        return ew.mul(g, 0.0)
    if ord == 1:
        return ew.mul(g, ew.sign(x))
    if ord in (np.inf, -np.inf):  # a NaN norm (no |x| equals it) gives 0 (PyTorch)
        hit = ew.eq(ew.abs(x), out)
        mask = ew.astype(hit, dtype_of(x))
        count = reduce_sum(mask, axes, True)
        share = ew.div(g, ew.where(ew.eq(count, 0.0), 1.0, count))
        return ew.where(hit, ew.mul(share, ew.sign(x)), 0.0)
    zero = ew.eq(out, 0.0)
    safe = ew.where(zero, 1.0, out)  # no 0/0 (and no warning) where the mask gives 0 anyway
    if ord == 2:
        scaled = ew.div(x, safe)
    else:  # x |x|^(p-2) / norm^(p-1)
        scaled = ew.div(ew.mul(x, ew.pow(ew.abs(x), ord - 2.0)), ew.pow(safe, ord - 1.0))
    return ew.where(zero, 0.0, ew.mul(g, scaled))


def _root_at_zero_is_zero(s, root):
    """root(s) for s >= 0, with gradient 0 where s == 0 (PyTorch's norm_backward) instead of
    0 * inf = nan: the inner where keeps root's rule away from 0; values are unchanged."""
    zero = ew.eq(s, 0.0)  # (not s > 0: a nan must stay nan)
    return ew.where(zero, 0.0, root(ew.where(zero, 1.0, s)))


# Note [Infinity norms of NaN]
# max |x| is NaN when x holds a NaN, and PyTorch's gradient of such a norm is 0 everywhere.
# Decomposed as max(abs(x)), the gradient would follow reduce_max's rule (the NaN entries get
# it) and then abs's (g * sign(NaN) = NaN). So the decomposition takes the max of |x| with
# the NaNs replaced by 0 and puts NaN back with a `where` on "this slice has a NaN": the value
# is numpy's, the NaN slices get no gradient and no NaN arithmetic reaches it.
def _norm_decompose(x, ord, axes, keepdims):
    if ord == 2:
        return _root_at_zero_is_zero(reduce_sum(ew.mul(x, x), axes, keepdims), ew.sqrt)
    if ord == 0:
        return reduce_sum(ew.astype(ew.ne(x, 0.0), dtype_of(x)), axes, keepdims)
    if ord in (np.inf, -np.inf):  # See Note [Infinity norms of NaN]
        nan = ew.ne(x, x)
        a = ew.abs(ew.where(nan, 0.0, x))
        m = bind(reduce_max_p if ord > 0 else reduce_min_p, a, axes=axes, keepdims=keepdims)
        has_nan = ew.gt(reduce_sum(ew.astype(nan, I64), axes, keepdims), 0)
        return ew.where(has_nan, np.nan, m)
    a = ew.abs(x)
    if ord == 1:
        return reduce_sum(a, axes, keepdims)
    return _root_at_zero_is_zero(reduce_sum(ew.pow(a, ord), axes, keepdims),
                                 lambda s: ew.pow(s, 1.0 / ord))


vector_norm_p = register(Primitive(
    "vector_norm", "reduce", _norm_impl,
    lambda x, ord, axes, keepdims: _reduce_shape_rule(x, axes, keepdims), (_norm_vjp,),
    saves=(0, -1), decompose=_norm_decompose, batch=_keeps_batch,
    node_name="LinalgVectorNormBackward0"))


def _arg_impl(fn):
    def impl(x, axis, keepdims):
        r = fn(x, axis=axis, keepdims=keepdims) if axis is not None else fn(x)
        return np.asarray(r, dtype=np.int64)
    return impl


def _arg_shape(name):
    def rule(x, axis, keepdims):
        axes = tuple(range(len(x.shape))) if axis is None else (axis,)
        _no_identity(x, axes, f"attempt to get {name} of an empty sequence")
        return Aval(_reduced_shape(x.shape, axes, keepdims and axis is not None), I64)
    return rule


argmax_p = register(Primitive("argmax", "reduce", _arg_impl(np.argmax), _arg_shape("argmax"),
                              nondiff=True, numpy=np.argmax))
argmin_p = register(Primitive("argmin", "reduce", _arg_impl(np.argmin), _arg_shape("argmin"),
                              nondiff=True, numpy=np.argmin))


# ---- the ops API ------------------------------------------------------------------------------
def _axes(x, dim):
    return normalize_axes(dim, len(shape_of(x)))


def reduce_sum(x, axes, keepdims=False):
    return bind(reduce_sum_p, x, axes=axes, keepdims=keepdims)


def reduce_prod(x, axes, keepdims=False):
    return bind(reduce_prod_p, x, axes=axes, keepdims=keepdims)


def sum(x, dim=None, keepdim=False, dtype=None):
    (x,), dt = operands(x)
    if dtype is not None:
        x = ew.astype(x, dtype)
    elif dt.kind in "bi":
        x = ew.astype(x, I64)
    return reduce_sum(x, _axes(x, dim), keepdim)


def prod(x, dim=None, keepdim=False):
    """The product over `dim`; bools and ints multiply in int64 (numpy and PyTorch)."""
    (x,), dt = operands(x)
    if dt.kind in "bi" and dt != I64:
        x = ew.astype(x, I64)
    return reduce_prod(x, _axes(x, dim), keepdim)


def amax(x, dim=None, keepdim=False):
    (x,), _ = operands(x)
    return bind(reduce_max_p, x, axes=_axes(x, dim), keepdims=keepdim)


def amin(x, dim=None, keepdim=False):
    (x,), _ = operands(x)
    return bind(reduce_min_p, x, axes=_axes(x, dim), keepdims=keepdim)


def argmax(x, dim=None, keepdim=False):
    return bind(argmax_p, x, axis=None if dim is None else _axes(x, dim)[0], keepdims=keepdim)


def argmin(x, dim=None, keepdim=False):
    return bind(argmin_p, x, axis=None if dim is None else _axes(x, dim)[0], keepdims=keepdim)


def _floating(x):
    """x in the float dtype its rules compute means and norms in (promotion.float_of)."""
    (x,), dt = operands(x)
    return ew.astype(x, float_of(x))


def mean(x, dim=None, keepdim=False):
    x = _floating(x)
    return bind(mean_p, x, axes=_axes(x, dim), keepdims=keepdim)


def var(x, dim=None, unbiased=True, keepdim=False, correction=None):
    x = _floating(x)
    correction = (1 if unbiased else 0) if correction is None else correction
    return bind(var_p, x, axes=_axes(x, dim), correction=correction, keepdims=keepdim)


def std(x, dim=None, unbiased=True, keepdim=False, correction=None):
    x = _floating(x)
    correction = (1 if unbiased else 0) if correction is None else correction
    return bind(std_p, x, axes=_axes(x, dim), correction=correction, keepdims=keepdim)


def logsumexp(x, dim=None, keepdim=False):
    """log(sum(exp(x))) over `dim`, stable for large and -inf inputs (one primitive)."""
    x = _floating(x)
    return bind(logsumexp_p, x, axes=_axes(x, dim), keepdims=keepdim)


def log_softmax(x, dim=-1):
    x = _floating(x)
    return bind(log_softmax_p, x, axes=_axes(x, dim))


def softmax(x, dim=-1):
    x = _floating(x)
    return bind(softmax_p, x, axes=_axes(x, dim))


def vector_norm(x, ord=2, dim=None, keepdim=False, *, dtype=None):
    """The `ord`-norm of x over `dim` (all dims by default): (sum |x|^ord)^(1/ord); ord may be
    inf, -inf (max, min of |x|) or 0 (the count of non-zeros). As torch.linalg.vector_norm."""
    x = _floating(x) if dtype is None else ew.astype(x, dtype)
    return bind(vector_norm_p, x, ord=float(ord), axes=_axes(x, dim), keepdims=keepdim)


def norm(x, p="fro", dim=None, keepdim=False, dtype=None):
    """torch.norm: a vector norm over `dim` (all dims by default); p='fro' is the 2-norm."""
    if isinstance(p, str):
        if p != "fro" or not (dim is None or isinstance(dim, int) or len(dim) <= 2):
            raise NotImplementedError(f"norm(p={p!r}): only vector norms are supported; "
                                      "use p='fro', p=2 or another number")
        p = 2.0
    return vector_norm(x, 2.0 if p is None else p, dim, keepdim, dtype=dtype)
