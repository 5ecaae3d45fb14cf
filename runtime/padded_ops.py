"""What a Padded value (runtime/padded.py, Note [Slices of loop-dependent length]) supports:
elementwise ops, dot/matmul/vdot/inner/outer, sum/mean/prod/max/min/var/std, np.linalg.norm
(2-norm), transposes, indexing of its static axes and adding axes; everything else raises
naming the line. Each operation works on the padded data and returns a Padded, or a plain
value once no axis of run-time length is left.
"""
from __future__ import annotations

import numpy as np

from llgrad.runtime import ops
from llgrad.runtime.errors import ShapeError, user_loc
from llgrad.runtime.ops._util import as_operand, dtype_of, shape_of
from llgrad.runtime.ops.index import has_traced_bounds
from llgrad.runtime.padded import _FIX, Padded, _integer
from llgrad.runtime.prim import bind, is_value


def _wrap(data, lengths: dict, pad=None, like=None):
    if not lengths:
        return data
    return Padded(data, lengths, pad, source=getattr(like, "source", None))


def _ndim(a) -> int:
    return a.ndim if type(a) is Padded else len(shape_of(a)) if is_value(a) else np.ndim(a)


def _extent(a, axis: int) -> int:
    return (a.data.shape if type(a) is Padded else shape_of(a) if is_value(a)
            else np.shape(a))[axis]


# ---- lengths ---------------------------------------------------------------------------------
def agree(first, other, what: str):
    """Two run-time lengths that must be equal (numpy raises otherwise): equal keys need no
    test, else a `check` op raises numpy's ValueError at run time."""
    if first[1] == other[1]:
        return
    from llgrad.runtime.ops.control import check_p
    of = "values selected by boolean masks" if "mask" in (first[1][0], other[1][0]) else \
        "slices with traced bounds"
    bind(check_p, ops.ne(first[0], other[0]), exc=ValueError,
         args=(f"{what}: the lengths of {of} differ (operands could not be broadcast)",))


def _require(length, extent: int, what: str):
    """A run-time length numpy requires to be the static `extent`."""
    agree(length, (np.int64(extent), ("c", np.dtype(np.int64).str, np.int64(extent).tobytes())),
          what)


def _fit_static(data, axis: int, length, extent: int, have: int, what: str):
    """Data of run-time `length` along `axis` (padded to `have`) where numpy needs the static
    `extent`: a run-time check that they agree, then the data cut to `extent`."""
    if have < extent:
        raise ShapeError(f"{what}: a slice of at most {have} entries cannot match an axis of "
                         f"{extent}", loc=user_loc(), fix=_FIX)
    _require(length, extent, what)
    return data if have == extent else ops.slice_axis(data, axis, 0, extent)


def mask(p: Padded, axes, fill):
    """p's data with the padding along `axes` (its dynamic axes among them) set to `fill`."""
    data = p.data
    axes = [a for a in axes if a in p.lengths]
    if not axes or p.pad is not None and (p.pad == fill or np.isnan(p.pad) and np.isnan(fill)):
        return data
    keep = None
    for a in axes:
        n = p.data.shape[a]
        inside = ops.lt(np.arange(n, dtype=np.int64).reshape(
            (n,) + (1,) * (p.ndim - a - 1)), p.lengths[a][0])
        keep = inside if keep is None else ops.logical_and(keep, inside)
    return ops.where(keep, data, np.asarray(fill, dtype_of(data)))


# ---- elementwise ---------------------------------------------------------------------------
def elementwise(prim, args, params):
    """An elementwise primitive with Padded operands: broadcast as numpy does, with lengths
    that must agree checked, and an operand of static extent > 1 along a run-time axis
    requiring that length (then the axis is static again)."""
    nd = max(_ndim(a) for a in args)
    datas = [a.data if type(a) is Padded else a for a in args]
    uses: dict = {}  # result axis -> [(arg index, its axis)] for operands padded there
    for k, a in enumerate(args):
        if type(a) is Padded:
            for ax in a.lengths:
                uses.setdefault(ax + nd - a.ndim, []).append((k, ax))
    lengths, broadcast = {}, set()
    name = f"np.{prim.name}"
    for r, used in sorted(uses.items()):
        dyn = {k for k, _ in used}
        statics = {_extent(a, r - nd + _ndim(a)) for k, a in enumerate(args)
                   if k not in dyn and r - nd + _ndim(a) >= 0} - {1}
        if len(statics) > 1:
            raise ShapeError(f"{name}: operands of extents {sorted(statics)} do not broadcast",
                             loc=user_loc())
        ones = [(k, ax) for k, ax in used if args[k].data.shape[ax] == 1]
        if ones and (statics or len(ones) < len(used)):  # `x[i:i + 1]` next to a longer axis
            for k, ax in ones:  # broadcasts when its length is 1 (numpy fails on 0)
                _require(args[k].lengths[ax], 1, name)
                broadcast.add(k)
            used = [u for u in used if u not in ones]
            if not used:
                continue
        first = args[used[0][0]].lengths[used[0][1]]
        for k, ax in used[1:]:
            agree(first, args[k].lengths[ax], name)
        for k, ax in used:
            have = args[k].data.shape[ax]
            if statics:
                datas[k] = _fit_static(datas[k], ax, first, min(statics), have, name)
            else:
                least = min(args[j].data.shape[b] for j, b in used)
                if have > least:
                    datas[k] = ops.slice_axis(datas[k], ax, 0, least)
        if not statics:
            lengths[r] = first
    out = bind(prim, *datas, **params)
    pad = None if broadcast else _pad(prim, args, params, lengths, nd)
    return _wrap(out, lengths, pad, next(a for a in args if type(a) is Padded))


def _pad(prim, args, params, lengths, nd):
    """The result's padding when every operand's is a known number along all of `lengths`
    (the others are constant scalars): prim on those numbers."""
    vals = []
    for a in args:
        if type(a) is Padded:
            if a.pad is None or {ax + nd - a.ndim for ax in a.lengths} != set(lengths):
                return None
            vals.append(np.asarray(a.pad, a.dtype))
        elif is_value(a) or np.size(a) != 1:
            return None
        else:
            vals.append(np.asarray(a).reshape(()))
    with np.errstate(all="ignore"):
        out = prim.impl(*vals, **params)
    return np.asarray(out).item()


# ---- contractions ----------------------------------------------------------------------------
def contract(a, b, kind: str):
    """a @ b (matmul) or np.dot(a, b) for operands of at most two axes: the contracted axis,
    if of run-time length, is masked to 0 on both sides."""
    a = a if type(a) is Padded else as_operand(a)
    b = b if type(b) is Padded else as_operand(b)
    na, nb = _ndim(a), _ndim(b)
    p = a if type(a) is Padded else b
    if na == 0 or nb == 0:
        if kind == "matmul":
            raise ValueError("matmul: Input operand does not have enough dimensions")
        return ops.mul(a, b)
    if na > 2 or nb > 2:
        raise p.refuse(f"np.{kind} of arrays of more than two axes", shape=False)
    ca, cb = na - 1, 0 if nb == 1 else nb - 2
    la = a.lengths.get(ca) if type(a) is Padded else None
    lb = b.lengths.get(cb) if type(b) is Padded else None
    da = a.data if type(a) is Padded else a
    db = b.data if type(b) is Padded else b
    what = f"np.{kind}"
    if la is not None and lb is not None:
        agree(la, lb, what)
        da, db = mask(a, [ca], 0), mask(b, [cb], 0)
        m = min(_extent(a, ca), _extent(b, cb))
        da = da if _extent(a, ca) == m else ops.slice_axis(da, ca, 0, m)
        db = db if _extent(b, cb) == m else ops.slice_axis(db, cb, 0, m)
    elif la is not None:
        da = _fit_static(da, ca, la, _extent(b, cb), _extent(a, ca), what)
    elif lb is not None:
        db = _fit_static(db, cb, lb, _extent(a, ca), _extent(b, cb), what)
    out = ops.matmul(da, db) if kind == "matmul" else ops.dot(da, db)
    lengths = {}
    if na == 2 and type(a) is Padded and 0 in a.lengths:
        lengths[0] = a.lengths[0]
    if nb == 2 and type(b) is Padded and 1 in b.lengths:
        lengths[0 if na == 1 else 1] = b.lengths[1]
    return _wrap(out, lengths, like=p)


def outer(a, b):
    """np.outer of two vectors, one or both Padded: a[:, None] * b[None, :]."""
    for v in (a, b):
        if _ndim(v) != 1:
            p = a if type(a) is Padded else b
            raise p.refuse("np.outer of arrays that are not vectors", shape=False)
    return ops.mul(_expand(a, 1), _expand(b, 0))


def _expand(v, axis: int):
    """v with a new axis of extent 1 at `axis`."""
    if type(v) is not Padded:
        return ops.unsqueeze(as_operand(v), axis)
    lengths = {ax + (ax >= axis): n for ax, n in v.lengths.items()}
    return Padded(ops.unsqueeze(v.data, axis), lengths, v.pad, v.source, v.loc)


# ---- reductions ------------------------------------------------------------------------------
_FILL = {"sum": 0, "mean": 0, "prod": 1}


def reduce(p: Padded, kind: str, axis=None, dtype=None, out=None, keepdims=False, **kw):
    """np.sum/mean/prod/max/min over axes of `p`; the padding of the reduced axes is masked
    with the reduction's identity. max/min of an empty slice raise numpy's ValueError."""
    from llgrad.runtime.aval import normalize_axes
    from llgrad.runtime.numpy_api import FUNCTIONS
    from llgrad.runtime.ops.elementwise import _extreme
    if out is not None or kw:
        raise p.refuse(f"np.{kind}({', '.join(['out'] * (out is not None) + list(kw))}=...)",
                       shape=False)
    axes = tuple(range(p.ndim)) if axis is None else normalize_axes(axis, p.ndim)
    dt = np.dtype(dtype) if dtype is not None else p.dtype
    fill = _FILL.get(kind, _extreme(dt, kind == "min") if kind in ("max", "min") else 0)
    data = mask(p, axes, fill)
    empty = [p.lengths[a][0] for a in axes if a in p.lengths]
    if kind in ("max", "min") and empty:
        from llgrad.runtime.ops.control import check_p
        bad = ops.eq(empty[0], 0)
        for length in empty[1:]:
            bad = ops.logical_or(bad, ops.eq(length, 0))
        name = "maximum" if kind == "max" else "minimum"
        bind(check_p, bad, exc=ValueError,
             args=(f"zero-size array to reduction operation {name} which has no identity",))
    if kind == "mean":
        from llgrad.runtime.promotion import NUMPY
        ft = NUMPY.float_of(dt)
        total = FUNCTIONS[np.sum](data, axis=axes, dtype=ft, keepdims=keepdims)
        result = ops.div(total, ops.astype(_count(p, axes), ft))
    else:
        result = FUNCTIONS[getattr(np, kind)](data, axis=axes, dtype=dtype, keepdims=keepdims)
    lengths = {(a if keepdims else a - sum(r < a for r in axes)): n
               for a, n in p.lengths.items() if a not in axes}
    pad = 0 if kind == "sum" and p.pad == 0 else None
    return _wrap(result, lengths, pad, p)


def _count(p: Padded, axes):
    """How many entries of p the reduction over `axes` takes (an int64 value)."""
    count = np.int64(np.prod([p.data.shape[a] for a in axes if a not in p.lengths],
                             dtype=np.int64))
    for a in axes:
        if a in p.lengths:
            count = ops.mul(count, p.lengths[a][0])
    return count


def var(p: Padded, axis=None, dtype=None, out=None, ddof=0, keepdims=False, std=False, **kw):
    """np.var/np.std: the masked sum of squared deviations from the mean over the run-time
    count less ddof (numpy's formula: inf or nan when ddof >= count, as numpy)."""
    from llgrad.runtime.aval import normalize_axes
    from llgrad.runtime.promotion import NUMPY
    name = "std" if std else "var"
    if out is not None or kw:
        raise p.refuse(f"np.{name}({', '.join(['out'] * (out is not None) + list(kw))}=...)",
                       shape=False)
    axes = tuple(range(p.ndim)) if axis is None else normalize_axes(axis, p.ndim)
    ft = NUMPY.float_of(np.dtype(dtype) if dtype is not None else p.dtype)
    d = ops.sub(ops.astype(p, ft), reduce(p, "mean", axes, ft, keepdims=True))
    total = reduce(ops.mul(d, d), "sum", axes, keepdims=keepdims)
    dof = ops.maximum(ops.sub(_count(p, axes), np.int64(ddof)), np.int64(0))
    result = ops.div(total, ops.astype(dof, ft))
    return ops.sqrt(result) if std else result


def norm(p: Padded, ord=None, axis=None, keepdims=False):
    """np.linalg.norm: the 2-norm of a vector or the Frobenius norm (ord None, 2 or 'fro')."""
    matrix = (axis is None and p.ndim == 2) or isinstance(axis, tuple) and len(axis) == 2
    if not (ord is None or ord == "fro" and matrix or ord == 2 and not matrix):
        raise p.refuse(f"np.linalg.norm(ord={ord!r})", shape=False)
    if p.ndim > 2 and axis is None:
        raise p.refuse("np.linalg.norm of more than two axes", shape=False)
    return ops.sqrt(reduce(ops.mul(p, p), "sum", axis, keepdims=keepdims))


# ---- indexing ------------------------------------------------------------------------------
def getitem(p: Padded, key):
    """p[key] for keys that index only its static axes (integers, slices), add axes (None)
    or take all of an axis of run-time length (`:`)."""
    key = key if type(key) is tuple else (key,)
    real = sum(1 for k in key if k is not None and k is not Ellipsis)
    full, axis, out_axis, lengths = [], 0, 0, {}
    for k in key:
        if k is Ellipsis:
            for _ in range(p.ndim - real):
                if axis in p.lengths:
                    lengths[out_axis] = p.lengths[axis]
                full.append(slice(None))
                axis, out_axis = axis + 1, out_axis + 1
            continue
        if k is None:
            full.append(None)
            out_axis += 1
            continue
        if axis in p.lengths:
            if not (type(k) is slice and k == slice(None)):
                raise p.refuse("indexing an axis of run-time length (other than with `:`)",
                               shape=False)
            lengths[out_axis] = p.lengths[axis]
        elif not (type(k) is slice and not has_traced_bounds(k) or _integer(k)):
            raise p.refuse("indexing it with arrays or traced slice bounds", shape=False)
        full.append(k)
        axis += 1
        out_axis += type(k) is slice
    for a in range(axis, p.ndim):
        if a in p.lengths:
            lengths[out_axis + a - axis] = p.lengths[a]
    return _wrap(ops.getitem(p.data, tuple(full)), lengths, p.pad, p)


def transpose(p: Padded, axes=None):
    perm = tuple(reversed(range(p.ndim))) if axes is None else tuple(
        int(a) % p.ndim for a in axes)
    lengths = {j: p.lengths[perm[j]] for j in range(p.ndim) if perm[j] in p.lengths}
    return Padded(ops.transpose(p.data, perm), lengths, p.pad, p.source, p.loc)


# ---- writing into an array -----------------------------------------------------------------
def fit_value(v, dtype, target: tuple, lengths: dict):
    """The value written by `x[key] = v` as an array of the padded `target` shape whose
    run-time lengths (`lengths`, axis -> length) are those of the written window."""
    if type(v) is not Padded:
        v = as_operand(v)
    v = ops.astype(v, dtype)
    nd, vnd = len(target), _ndim(v)
    if vnd > nd:
        raise ShapeError(f"could not broadcast a value of {vnd} axes into {nd}", loc=user_loc())
    data, vlen = (v.data, v.lengths) if type(v) is Padded else (v, {})
    if vnd < nd:
        data = ops.reshape(data, (1,) * (nd - vnd) + tuple(shape_of(data)))
        vlen = {a + nd - vnd: n for a, n in vlen.items()}
    from llgrad.runtime.ops.window import dynamic_window_p
    what = "x[...] = value"
    for r in range(nd):
        have = shape_of(data)[r]
        if r in lengths and r in vlen:
            agree(lengths[r], vlen[r], what)
            if have != target[r]:  # re-pad to the window's extent
                data = bind(dynamic_window_p, data, np.int64(0), vlen[r][0], axis=r,
                            size=target[r], stride=1)
        elif r in lengths and have != 1:  # a static extent written into a window
            if have > target[r]:
                raise ShapeError(f"{what}: a value of {have} entries cannot fit a window of "
                                 f"at most {target[r]}", loc=user_loc(), fix=_FIX)
            _require(lengths[r], have, what)
            if have != target[r]:
                data = bind(dynamic_window_p, data, np.int64(0), np.int64(have), axis=r,
                            size=target[r], stride=1)
        elif r in vlen:
            data = _fit_static(data, r, vlen[r], target[r], have, what)
    return ops.broadcast_to(data, target)


# ---- numpy dispatch ------------------------------------------------------------------------
def _reduction(kind):
    if kind in ("max", "min"):  # np.max(a, axis, out, keepdims, ...)
        return lambda a, axis=None, out=None, keepdims=False, **kw: reduce(
            a, kind, axis, None, out, keepdims, **kw)
    return lambda a, axis=None, dtype=None, out=None, keepdims=False, **kw: reduce(
        a, kind, axis, dtype, out, keepdims, **kw)


_FUNCTIONS = {
    np.dot: lambda a, b, out=None: contract(a, b, "dot"),
    np.matmul: lambda a, b: contract(a, b, "matmul"),
    np.vdot: lambda a, b: contract(a, b, "dot"),
    np.inner: lambda a, b: contract(a, b, "dot"),
    np.outer: lambda a, b, out=None: outer(a, b),
    np.sum: _reduction("sum"), np.mean: _reduction("mean"), np.prod: _reduction("prod"),
    np.max: _reduction("max"), np.amax: _reduction("max"),
    np.min: _reduction("min"), np.amin: _reduction("min"),
    np.var: var, np.std: lambda a, *args, **kw: var(a, *args, std=True, **kw),
    np.linalg.norm: lambda x, ord=None, axis=None, keepdims=False: norm(x, ord, axis, keepdims),
    np.transpose: lambda a, axes=None: transpose(a, axes),
}
_ELEMENTWISE = (np.where, np.clip, np.copy)  # numpy functions that map to elementwise ops
# functions of their first argument: that is the Padded
_OF_FIRST = (np.sum, np.mean, np.prod, np.max, np.amax, np.min, np.amin, np.transpose,
             np.var, np.std, np.linalg.norm)
_VECTOR_ONLY = (np.vdot, np.inner)


def numpy_call(p: Padded, fn, func, args, kwargs, method: str):
    """A numpy function or ufunc called with a Padded among its arguments."""
    from llgrad.runtime.arraylike import _locate
    from llgrad.runtime.errors import LLGradError
    from llgrad.runtime.numpy_api import FUNCTIONS, numpy_name
    if kwargs.get("out") is not None:
        raise p.refuse(f"{numpy_name(func)}(out=...)", shape=False)
    impl = _FUNCTIONS.get(fn)
    if fn in _VECTOR_ONLY and any(_ndim(a) != 1 for a in args):
        impl = None
    if impl is None and (isinstance(fn, np.ufunc) or fn in _ELEMENTWISE):
        impl = FUNCTIONS.get(fn)  # elementwise: reaches Padded._lg_process
    if impl is None:
        name = numpy_name(func) + ("" if method == "__call__" else f".{method}")
        raise p.refuse(name, shape=False)
    if fn in _OF_FIRST and (not args or type(args[0]) is not Padded):
        raise p.refuse(numpy_name(func), shape=False)  # a Padded among other arguments
    try:
        return impl(*args, **kwargs)
    except LLGradError as e:
        raise _locate(e) from None

