"""Forward mode and the Jacobians built on it, compiled: `jvp`, `jacfwd`, `jacrev`, `hessian`
(forward over reverse) and `hvp`, as JAX spells them (`argnums` an int or a tuple).

Each is a traced function: called on arrays it compiles (one native call per signature, its
loops staged); called while another function is traced it inlines its IR, so they compose
(`jacfwd(grad(f))` is the Hessian: forward mode over the reverse sweep, tapes included,
transform/jvp.py). A Jacobian is one sweep batched over the basis vectors (Note [Batched
Jacobians]).
"""
from __future__ import annotations

import types
from typing import Callable

import numpy as np

from llgrad.runtime import ops
from llgrad.runtime.aval import Aval
from llgrad.runtime.errors import DTypeError, ShapeError
from llgrad.tracer import signature as sig
from llgrad.tracer.tracing import bind_arguments, trace
from llgrad.transform import ad
from llgrad.transform.basis import peel_basis
from llgrad.transform.builder import Builder, current
from llgrad.transform.inline import inline
from llgrad.transform.jvp import jvp_function
from llgrad.transform.vmap import vmap_function
from llgrad.transform.passes.pipeline import optimize

# Note [Batched Jacobians]
# jacfwd is one forward-mode pass batched over all the basis vectors of an input: the JVP
# function of f mapped by transform/vmap.py over its tangent, applied to the identity. jacrev
# is one reverse sweep batched over the basis of an output's cotangent. Each op runs once on
# n-row arrays (a matrix-vector product becomes one matrix-matrix product), and the whole
# Jacobian is one native call with no Python per row (the former `jacobian` made one native
# call per row from a Python loop; a staged loop over the basis, the step before this, ran
# the sweep n times). Batching cannot fail here: the batch is the tangent (cotangent), so
# loop trip counts and branch predicates, which depend on the primal values only, are the same
# for the whole batch (transform/vmap.py's only errors are about those). `jacobian` takes
# forward mode when the inputs have fewer elements than the outputs, reverse mode otherwise.


def _traced(tree) -> bool:
    from llgrad.compose import is_traced_call
    return is_traced_call(tree, {})


def _trace_leaves(f, args: tuple):
    """(the optimised unfused IR of f(*args), its leaves, the trace)."""
    tr = trace(f, args, {})
    leaves = sig.flatten(tuple(bind_arguments(f, args, {})[1]))[0]
    return optimize(tr.fn, fuse=False), leaves, tr


def _float_leaves(fn, tr, argnums, what) -> list[int]:
    """The leaves of arguments `argnums`; all must be float (they are differentiated)."""
    ks = [k for k, o in enumerate(tr.leaf_owner) if o in argnums]
    for k in ks:
        if fn.params[k].aval.dtype.kind != "f":
            raise DTypeError(f"{what}: argument {tr.arg_names[tr.leaf_owner[k]]!r} holds a "
                             f"{fn.params[k].aval.dtype} array, which has no derivative",
                             fix="pass float arrays (x.astype(np.float64)) or choose other "
                             "argnums")
    return ks


def inline_jvp(f: Callable, args: tuple, tangents: dict):
    """Inside a trace: (trace, f's outputs, their tangents) as IR values; `tangents` maps
    leaf indices of args to their tangents (other leaves, and integer ones, are fixed)."""
    fn, leaves, tr = _trace_leaves(f, args)
    wrt = sorted(k for k in tangents if fn.params[k].aval.dtype.kind == "f")
    jf = optimize(jvp_function(fn, wrt), fuse=False)
    b = current()
    ts = [ops.astype(b.lift(tangents[k]), fn.params[k].aval.dtype) for k in wrt]
    outs = inline(jf, [b.lift(x) for x in leaves] + ts)
    n = len(fn.outputs)
    return tr, outs[:n], outs[n:]


def _vjp_function(f: Callable, args: tuple, j: int, wrt: list[int]):
    """(the reverse sweep of f's output leaf j: a function of args' leaves and that output's
    cotangent yielding <out_j, ct> and the cotangents of leaves `wrt`; the leaves)."""
    fn, leaves, _ = _trace_leaves(f, args)
    b = Builder(f"{fn.name}_vjp", loc=None)
    with b:
        ps = [b.param(p.aval, p.name) for p in fn.params]
        c = b.param(fn.outputs[j].aval, "ct")
        y = inline(fn, ps)[j]
        b.fn.body.results = [ops.sum(ops.mul(ops.astype(y, np.float64),
                                             ops.astype(c, np.float64)))]
    return optimize(ad.grad_function(b.fn, wrt), fuse=False), leaves


def _argnums(argnums) -> tuple[tuple[int, ...], bool]:
    single = not isinstance(argnums, (tuple, list))
    nums = (argnums,) if single else tuple(argnums)
    if not nums or not all(isinstance(a, int) for a in nums):
        raise TypeError(f"argnums must be an int or a tuple of ints, got {argnums!r}")
    return nums, single


def _cache_of(f, key):
    """(the dict holding f's compiled forward-mode entries, the key of `key` in it).

    The dict is an attribute of f (of a bound method's object), so the entries, which hold
    f, die with it: a cycle the collector frees (a global table would keep every function
    ever passed, a lambda made per call included)."""
    owner = f.__self__ if isinstance(f, types.MethodType) else f
    attrs = getattr(owner, "__dict__", None)
    if attrs is None:
        return None, None
    return attrs.setdefault("_lg_forward_cache", {}), (getattr(f, "__func__", None), key)


def _compiled(f, key, make):
    """A Differentiable of the traced entry `make()` for `f`, made once per (f, key)."""
    from llgrad.api import Differentiable
    cache, k = _cache_of(f, key)
    if cache is None:  # nowhere to keep it: compiled per call
        return Differentiable(make())
    d = cache.get(k)
    if d is None:
        d = cache[k] = Differentiable(make())
    return d


# ---- jvp -------------------------------------------------------------------------------------
def jvp(f: Callable, primals, tangents):
    """(f(*primals), the derivative of f at primals along tangents), by forward mode, compiled.

    `primals` and `tangents` are tuples of equal structure (tangents of the float leaves; a
    tangent of an integer argument is ignored). Like `jax.jvp`.

    Example:
        >>> import numpy as np, llgrad
        >>> y, t = llgrad.jvp(lambda x: x * np.sin(x), (np.array([0.0, 1.0]),),
        ...                   (np.array([1.0, 1.0]),))
        >>> t  # sin(x) + x cos(x)
        array([0.        , 1.38177329])
    """
    primals, tangents = tuple(primals), tuple(tangents)
    if len(primals) != len(tangents):
        raise TypeError(f"jvp: {len(primals)} primals but {len(tangents)} tangents")
    for k, (p, t) in enumerate(zip(primals, tangents)):
        ps, ts = sig.flatten(p)[0], sig.flatten(t)[0]
        if len(ps) != len(ts) or any(np.shape(a) != np.shape(b) for a, b in zip(ps, ts)):
            raise ShapeError(f"jvp: tangent {k} does not have the structure and shapes of "
                             f"primal {k}", fix="give one tangent per primal, shaped like it")
    if _traced((primals, tangents)):
        return _jvp_traced(f, primals, tangents)
    entry = _compiled(f, "jvp", lambda: _jvp_entry(f))
    return entry(primals, tangents)


def _jvp_entry(f):
    def jvp_of(primals, tangents):
        return _jvp_traced(f, primals, tangents)
    return jvp_of


def _jvp_traced(f, primals, tangents):
    tleaves = sig.flatten(tuple(tangents))[0]
    tr, outs, touts = inline_jvp(f, primals, dict(enumerate(tleaves)))
    return sig.unflatten(tr.out_struct, outs), sig.unflatten(tr.out_struct, touts)


# ---- Jacobians -------------------------------------------------------------------------------
def jacfwd(f: Callable, argnums=0) -> Callable:
    """The Jacobian of `f` by forward mode (the JVPs along all the input's basis vectors as
    one batched sweep), shaped out.shape + arg.shape; a tuple over `argnums` when it is a
    tuple. Like `jax.jacfwd`."""
    return _jacobian(f, argnums, "jacfwd")


def jacrev(f: Callable, argnums=0) -> Callable:
    """The Jacobian of `f` by reverse mode (the reverse sweeps for all the output's basis
    cotangents as one batched sweep), shaped out.shape + arg.shape. Like `jax.jacrev`."""
    return _jacobian(f, argnums, "jacrev")


def _jacobian(f, argnums, mode):
    """mode: "jacfwd", "jacrev", or "auto" (the one with fewer basis vectors)."""
    nums, single = _argnums(argnums)

    def jac(*args):
        if _traced(args):
            return _jacobian_traced(f, args, nums, single, mode)
        entry = _compiled(f, (mode, nums, single),
                          lambda: _jacobian_entry(f, nums, single, mode))
        return entry(*args)
    jac.__name__ = f"{mode}_{getattr(f, '__name__', 'f')}"
    return jac


def _jacobian_entry(f, nums, single, mode):
    def jacobian_of(*args):
        return _jacobian_traced(f, args, nums, single, mode)
    return jacobian_of


def _jacobian_traced(f, args, nums, single, mode):
    b = current()
    fn, _, tr = _trace_leaves(f, args)
    ks = _float_leaves(fn, tr, nums, mode)
    outs = [v.aval for v in fn.outputs]
    xs = [fn.params[k].aval for k in ks]
    if mode == "auto":
        mode = "jacfwd" if _size(xs) < _size(outs) else "jacrev"
    if mode == "jacfwd":  # jac[j][i]: output j, input leaf i
        cols = [_fwd_columns(b, f, args, k, x, outs) for k, x in zip(ks, xs)]
        jac = [[c[j] for c in cols] for j in range(len(outs))]
    else:
        jac = [_rev_rows(b, f, args, j, out, ks, xs) for j, out in enumerate(outs)]
    per_out = []
    for row in jac:
        res = [sig.unflatten_gradient(sig.arg_struct(tr.in_struct, a),
                             [r for k, r in zip(ks, row) if tr.leaf_owner[k] == a])
               for a in nums]
        per_out.append(res[0] if single else tuple(res))
    return sig.unflatten(tr.out_struct, per_out)


def _size(avals) -> int:
    return sum(int(np.prod(a.shape, dtype=np.int64)) for a in avals)


def _to_jacobian(acc, out: Aval, x: Aval, rows_are_inputs: bool):
    """(n, *out) rows of tangents, or (m, *x) rows of cotangents -> out.shape + x.shape."""
    if rows_are_inputs and out.shape:
        m = len(out.shape)
        acc = ops.transpose(acc, tuple(range(1, m + 1)) + (0,))
    return ops.reshape(acc, tuple(out.shape) + tuple(x.shape))


def _eye(n: int, aval: Aval):
    """The n basis vectors of `aval`'s shape, stacked: (n, *aval.shape)."""
    return np.eye(n, dtype=aval.dtype).reshape((n,) + tuple(aval.shape))


def _batched_sweep(fn, leaves, n: int, basis):
    """Inside a trace: fn (params `leaves`, then one tangent or cotangent) mapped over the
    `n` basis vectors `basis` fed to its last param; its outputs as (n, *aval) arrays (Note
    [Batched Jacobians])."""
    vfn, out_b = vmap_function(fn, [False] * len(leaves) + [True], n)
    vfn = optimize(vfn, fuse=False)
    if peel_basis(vfn, vfn.params[-1]):  # Note [Products with the basis]
        vfn = optimize(vfn, fuse=False)
    b = current()
    outs = inline(vfn, [b.lift(x) for x in leaves] + [b.const(basis)])
    return [o if bt else ops.broadcast_to(o, (n,) + tuple(v.aval.shape))
            for o, bt, v in zip(outs, out_b, fn.outputs)]


def _fwd_columns(b, f, args, k, x: Aval, outs: list) -> list:
    """The JVPs along every basis vector of input leaf k, in one batched sweep: the
    Jacobian of each output."""
    n = int(np.prod(x.shape, dtype=np.int64))
    fn, leaves, _ = _trace_leaves(f, args)
    jf = optimize(jvp_function(fn, [k]), fuse=False)
    tangents = _batched_sweep(jf, leaves, n, _eye(n, x))[len(outs):]
    return [_to_jacobian(ops.astype(t, np.result_type(o.dtype, x.dtype)), o, x, True)
            for t, o in zip(tangents, outs)]


def _rev_rows(b, f, args, j, out: Aval, ks, xs) -> list:
    """The reverse sweeps for every basis cotangent of output j, in one batched sweep: its
    Jacobian per input."""
    m = int(np.prod(out.shape, dtype=np.int64))
    if out.dtype.kind != "f":
        raise DTypeError(f"jacrev: {getattr(f, '__name__', 'f')} returns {out.dtype} values, "
                         f"which have no derivative", fix="return a float array")
    joint, leaves = _vjp_function(f, args, j, ks)
    cts = _batched_sweep(joint, leaves, m, _eye(m, out))[1:]
    return [_to_jacobian(ops.astype(g, x.dtype), out, x, False) for g, x in zip(cts, xs)]


# ---- second derivatives ----------------------------------------------------------------------
def _grad_of(f, argnums):
    """`llgrad.grad(f, argnums)`, the same object for the same f (so its compiled Hessians
    and Hessian-vector products are cached with it)."""
    from llgrad.api import grad
    cache, k = _cache_of(f, ("grad", argnums))
    if cache is None:
        return grad(f, argnums)
    g = cache.get(k)
    if g is None:
        g = cache[k] = grad(f, argnums)
    return g


def hessian(f: Callable, argnums=0) -> Callable:
    """The Hessian of a scalar `f`, forward mode over its reverse-mode gradient (`jacfwd`
    of `grad`), compiled; through staged loops too (forward over the reverse sweep). A
    nested tuple over `argnums` when it is a tuple. Like `jax.hessian`."""
    nums, single = _argnums(argnums)
    return jacfwd(_grad_of(f, nums[0] if single else nums), argnums)


def hvp(f: Callable, argnums: int = 0) -> Callable:
    """`hvp(f)(*args, v)`: the Hessian of scalar `f` (w.r.t. argument `argnums`) times `v`,
    as the JVP of its gradient along v (forward over reverse), compiled."""
    from llgrad.runtime import pytree
    if not isinstance(argnums, int):
        raise TypeError(f"hvp: argnums must be an int, got {argnums!r}")
    g = _grad_of(f, argnums)

    def run(*args_and_v):
        *args, v = args_and_v
        tangents = [pytree.tree_map(_zero, a) for a in args]
        tangents[argnums] = v
        return jvp(g, tuple(args), tuple(tangents))[1]
    return run


def _zero(x):
    """The zero tangent of a leaf (arrays and floats); other values stay as they are."""
    return np.zeros_like(x) if isinstance(x, (np.ndarray, float, np.floating)) else x
