"""`vmap(f, in_axes, out_axes)`: f mapped over an axis of its arguments, compiled, as JAX
spells it. f is traced once on one example's shapes and its IR batched (transform/vmap.py):
one native call for the whole batch, no Python loop over the examples.

Called on arrays it compiles (once per signature); called while another function is traced
it inlines the batched IR, so it composes with `grad`, `jvp`, the Jacobians and itself.
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from llgrad.forward import _compiled, _trace_leaves, _traced
from llgrad.runtime import ops
from llgrad.runtime.errors import ShapeError, UnsupportedError, user_loc
from llgrad.tracer import signature as sig
from llgrad.tracer.tracing import bind_arguments
from llgrad.transform.builder import current
from llgrad.transform.inline import inline
from llgrad.transform.passes.pipeline import optimize
from llgrad.transform.vmap import vmap_function


def vmap(f: Callable, in_axes=0, out_axes=0) -> Callable:
    """f mapped over axis `in_axes` of its arguments, results stacked on axis `out_axes`.

    Args:
        in_axes: an int (the mapped axis of every array argument), None (not mapped), or a
            tuple with one int or None per positional argument (applied to all its leaves).
        out_axes: an int or None (an output that does not depend on a mapped argument), or a
            tuple with one per output of a tuple-returning f.

    Example:
        >>> import numpy as np, llgrad
        >>> llgrad.vmap(lambda x, w: x @ w, in_axes=(0, None))(np.ones((4, 3)), np.ones(3))
        array([3., 3., 3., 3.])
    """
    for a in (in_axes if isinstance(in_axes, (tuple, list)) else (in_axes,)):
        if a is not None and not isinstance(a, int):
            raise TypeError(f"vmap: in_axes must be an int, None or a tuple of them, got "
                            f"{in_axes!r}")

    def vmapped(*args):
        if _traced(args):
            return _vmap_traced(f, args, in_axes, out_axes)
        key = ("vmap", _hashable(in_axes), _hashable(out_axes))
        entry = _compiled(f, key, lambda: _entry(f, in_axes, out_axes))
        return entry(*args)
    vmapped.__name__ = f"vmap_{getattr(f, '__name__', 'f')}"
    return vmapped


def _hashable(axes):
    return tuple(axes) if isinstance(axes, list) else axes


def _entry(f, in_axes, out_axes):
    def vmap_of(*args):
        return _vmap_traced(f, args, in_axes, out_axes)
    vmap_of.__name__ = f"vmap_{getattr(f, '__name__', 'f')}"
    return vmap_of


def _axes_per_arg(in_axes, n_args: int) -> list:
    if not isinstance(in_axes, (tuple, list)):
        return [in_axes] * n_args
    if len(in_axes) != n_args:
        raise ValueError(f"vmap: in_axes has {len(in_axes)} entries for {n_args} arguments")
    return list(in_axes)


def _vmap_traced(f, args, in_axes, out_axes):
    b = current()
    axes = _axes_per_arg(in_axes, len(args))
    n, moved = None, []
    for k, (a, ax) in enumerate(zip(args, axes)):
        if ax is None:
            moved.append(a)
            continue
        leaves, struct = sig.flatten(a)
        new = []
        for x in leaves:
            x = b.lift(x)
            rank = len(x.aval.shape)
            if not -rank <= ax < rank:
                raise ShapeError(f"vmap: in_axes {ax} of argument {k} is out of range for its "
                                 f"shape {list(x.aval.shape)}",
                                 fix="map an axis the argument has (or None)")
            x = ops.movedim(x, ax, 0) if ax % rank else x
            if n is None:
                n = x.aval.shape[0]
            elif x.aval.shape[0] != n:
                raise ShapeError(f"vmap: mapped axes of different sizes ({n} and "
                                 f"{x.aval.shape[0]}, argument {k})",
                                 fix="give all mapped arguments the same batch size")
            new.append(x)
        moved.append(sig.unflatten(struct, new) if leaves else a)
    if n is None:
        raise ValueError("vmap: in_axes maps no array argument")
    mapped = [ax is not None for ax in axes]
    examples = [_example(a) if m else a for a, m in zip(moved, mapped)]
    fn, _, tr = _trace_leaves(f, tuple(examples))
    full = sig.flatten(tuple(bind_arguments(f, tuple(moved), {})[1]))[0]
    owners = _param_owners(f, args)
    batched = [owners[k] is not None and mapped[owners[k]] for k in range(len(fn.params))]
    vfn, out_batched = vmap_function(fn, batched, n)
    outs = inline(optimize(vfn, fuse=False), [b.lift(x) for x in full])
    return sig.unflatten(tr.out_struct, _place(outs, out_batched, fn, n, out_axes, tr))


def _example(a):
    """One example of a mapped argument (its batch axis moved to 0): for tracing f only."""
    leaves, struct = sig.flatten(a)
    return sig.unflatten(struct, [ops.getitem(x, 0) for x in leaves])


def _param_owners(f, args) -> list:
    """The positional argument each leaf of f's bound arguments comes from (None: a
    default value)."""
    owners = []
    for k, v in enumerate(bind_arguments(f, tuple(args), {})[1]):
        owners += [k if k < len(args) else None] * len(sig.flatten(v)[0])
    return owners


def _place(outs, out_batched, fn, n, out_axes, tr) -> list:
    """Each output with its batch axis at its out_axes (broadcast when not batched)."""
    top = tr.out_struct
    per_top = isinstance(out_axes, (tuple, list))
    leaf_axes = []
    if per_top:
        kids = getattr(top, "children", None)
        if kids is None or len(kids) != len(out_axes):
            raise ValueError(f"vmap: out_axes {out_axes!r} does not match f's outputs")
        for kid, ax in zip(kids, out_axes):
            leaf_axes += [ax] * len(sig.leaf_specs(kid))
    else:
        leaf_axes = [out_axes] * len(outs)
    res = []
    for x, bt, v, ax in zip(outs, out_batched, fn.outputs, leaf_axes):
        if ax is None:
            if bt:
                raise ValueError("vmap: out_axes is None for an output that depends on a "
                                 "mapped argument")
            res.append(x)
            continue
        if not bt:
            x = ops.broadcast_to(x, (n,) + tuple(v.aval.shape))
        res.append(ops.movedim(x, 0, ax) if ax % (len(v.aval.shape) + 1) else x)
    return res


# Note [np.vectorize on traced values]
# `np.vectorize(f)(x, y)` calls the Python function f once per element of the broadcast
# arguments; numpy builds the result from the numbers f returns, so on traced values it loses
# the graph. Traced, it is vmap: the mapped arguments are broadcast to one shape, flattened,
# f is traced once on one element (its `if`s become selects, Note [Ragged tapes]) and
# batched, and each result is reshaped back. `excluded` arguments are passed whole, as numpy
# does; keyword arguments must be excluded or scalars. One difference stays: without
# `otypes`, numpy takes the result's dtype from f's result on the first element (an `int` 0
# returned there truncates every float result); the traced result has the dtype of f's
# traced result, which promotes its branches. `signature=` (generalised ufuncs) is refused.
def vectorized(vf, args: tuple, kwargs: dict):
    """`vf(*args, **kwargs)` for a numpy.vectorize `vf` called on traced values (Note
    [np.vectorize on traced values])."""
    from llgrad.tracer.operators import is_traced
    name = getattr(vf.pyfunc, "__name__", "f")
    if vf.signature is not None:
        raise UnsupportedError(f"np.vectorize({name}, signature={vf.signature!r}) on traced "
                               f"values", loc=user_loc(3),
                               fix="call the function on the core arrays in a loop, or use "
                               "llgrad.vmap(f) over the batch axis")
    excluded = vf.excluded
    for k, v in kwargs.items():
        if is_traced(v) or k not in excluded and np.ndim(v) != 0:
            raise UnsupportedError(f"np.vectorize({name}) called with the keyword argument "
                                   f"{k!r}, a traced value or an array", loc=user_loc(3),
                                   fix=f"pass {k!r} positionally (np.vectorize({name}, "
                                   f"excluded={{n}}) for one passed whole)")
    mapped = [k not in excluded for k in range(len(args))]
    if not any(mapped):
        return vf.pyfunc(*args, **kwargs)
    b = current()
    vals = [b.lift(a) if m else a for a, m in zip(args, mapped)]
    shape = np.broadcast_shapes(*[v.aval.shape for v, m in zip(vals, mapped) if m])
    n = int(np.prod(shape, dtype=np.int64))
    if n == 0 and not vf.otypes:
        raise ValueError("cannot call `vectorize` on size 0 inputs unless `otypes` is set")
    flat = [ops.reshape(ops.broadcast_to(v, shape), (n,)) if m else v
            for v, m in zip(vals, mapped)]
    f = vf.pyfunc if not kwargs else _with_keywords(vf.pyfunc, kwargs)
    outs = _vmap_traced(f, tuple(flat), tuple(0 if m else None for m in mapped), 0)
    many = isinstance(outs, tuple)
    outs = [ops.reshape(o, shape) for o in (outs if many else (outs,))]
    if vf.otypes:
        outs = [ops.astype(o, np.dtype(t)) for o, t in zip(outs, vf.otypes)]
    return tuple(outs) if many else outs[0]


def _with_keywords(f, kwargs: dict):
    """f with keyword arguments bound, converted when called as converted code calls it."""
    from llgrad.tracer.operators import converted_call
    return lambda *args: converted_call(f, args, kwargs)


# Note [np.apply_along_axis on traced values]
# numpy calls func1d once per 1-D slice along `axis` and builds the result from what it
# returns (np.asanyarray: a traced result would be converted, its graph lost). Traced, it is
# vmap: the other axes are flattened into one batch axis, func1d (converted, as converted code
# calls it) is traced once on one slice and batched, and the result's axes take the place of
# `axis`, as numpy places them. A tuple result is stacked, as np.asanyarray would.
def along_axis(func1d, axis, arr, *args, **kwargs):
    """np.apply_along_axis(func1d, axis, arr, *args, **kwargs) for a traced `arr`."""
    from llgrad.tracer.operators import converted_call
    x = current().lift(arr)
    shape = tuple(x.aval.shape)
    axis = int(axis)
    if not -len(shape) <= axis < len(shape):
        raise np.exceptions.AxisError(axis, len(shape))
    axis %= len(shape)
    rest = shape[:axis] + shape[axis + 1:]
    n = int(np.prod(rest, dtype=np.int64))
    if n == 0:
        raise ValueError("Cannot apply_along_axis when any iteration dimensions are 0")
    rows = ops.reshape(ops.movedim(x, axis, -1), (n, shape[axis]))

    def one(row):
        out = converted_call(func1d, (row, *args), kwargs)
        return ops.stack(list(out), 0) if isinstance(out, (tuple, list)) else out
    out = _vmap_traced(one, (rows,), (0,), 0)
    core = tuple(out.aval.shape[1:])
    out = ops.reshape(out, rest + core)  # numpy: the result's axes where `axis` was
    return ops.transpose(out, list(range(axis)) + list(range(len(rest), len(rest) + len(core)))
                         + list(range(axis, len(rest))))
