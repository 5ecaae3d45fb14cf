"""`llgrad.checkpoint(fn)`: a helper whose forward values are recomputed in the backward
instead of stored (as `jax.checkpoint` / `torch.utils.checkpoint`).

A checkpointed call is a custom derivative rule (runtime/custom.py) whose residuals are its
arguments and whose backward recomputes the helper and differentiates it (Note
[Checkpointed helpers]). Loops have a schedule of their own: `@differentiate(checkpoint=...)`
for the top-level ones, `llgrad.checkpointed(range(n))` for one loop (tracer/checkpointed.py,
transform/checkpoint.py).
"""
from __future__ import annotations

import functools
from typing import Callable

import numpy as np

from llgrad.runtime import pytree
from llgrad.runtime.custom import CustomCall, _check_closed_over, eager_call, traced_class
from llgrad.runtime.errors import user_loc
from llgrad.tracer.checkpointed import checkpointed  # noqa: F401  (llgrad.checkpointed)

# Note [Checkpointed helpers]
# `checkpoint(fn)(*args)` runs fn as usual for its value, but what the backward needs of it
# is only its arguments: its backward runs fn again on them and differentiates that run.
# Compiled, the forward's ops are ordinary ops, and the custom_vjp op's bwd region holds the
# joint forward+backward of <fn(*xs), g> (the inlined value_and_grad of a small objective, so
# fn's own loops and branches are staged and differentiated as anywhere else). In a staged
# loop this keeps fn's intermediate values off the loop's tapes: the reverse sweep reads
# only fn's arguments and outputs, and recomputes the rest per iteration (dce removes the
# tapes nobody reads; tests/e2e/test_checkpoint.py measures it). In straight-line code the
# joint is one kernel, and common-subexpression elimination may share the forward's values
# with the recomputation, as XLA may without barriers: the numbers are the same either way.
# Eagerly, fn runs under no_grad (no graph, no saved tensors) and the node's backward reruns
# it with grad enabled from detached copies of its arguments; a second derivative
# (create_graph=True) through it is refused there, not silently wrong.


def checkpoint(fn: Callable) -> Callable:
    """`fn` with its forward values recomputed in the backward instead of stored.

    Works eagerly (tensors that require grad) and inside `@llgrad.differentiate` functions;
    gradients are those of `fn` itself. Use it on the body of a long loop to keep the
    loop's tape to the helper's arguments and results.

    Example:
        >>> import numpy as np, llgrad
        >>> @llgrad.checkpoint
        ... def cell(h, w):
        ...     return np.tanh(np.sin(h * w) + h)
        >>> @llgrad.differentiate
        ... def f(w, h):
        ...     for _ in range(100):
        ...         h = cell(h, w)
        ...     return np.sum(h)
    """
    return _Checkpointed(fn)


class _Checkpointed:
    def __init__(self, fn: Callable):
        functools.update_wrapper(self, fn)
        self.fn = fn

    def __call__(self, *args):
        traced = traced_class(args)
        if traced is not None:
            return traced._lg_custom_vjp(self._call(args, _traced_bwd))
        from llgrad.runtime.autograd.state import STATE
        if STATE.grad_enabled and pytree.any_leaf(
                lambda x: getattr(x, "requires_grad", False) is True, args):
            return eager_call(self._call(args, _eager_bwd))
        return self.fn(*args)

    def _call(self, args, bwd) -> CustomCall:
        fn = self.fn

        def fwd(run, *a):
            if traced_class(a) is None:  # eager: no graph, nothing saved
                from llgrad.runtime.autograd.grad_mode import no_grad
                with no_grad():
                    return run(fn, *a), a
            from llgrad.transform.builder import current
            region = current().region
            n0 = len(region.ops)
            out = run(fn, *a)
            _check_reads(fn, region.ops[n0:], pytree.tree_leaves(a))
            return out, a

        name = getattr(fn, "__name__", "checkpoint")
        return CustomCall(f"checkpoint({name})", self, args, fwd,
                          lambda run, res, g: bwd(fn, res, g),
                          tuple(True for _ in args), user_loc())


def _check_reads(fn, fwd_ops, args) -> None:
    """Refuse a helper whose ops read a traced value that is not an argument (a closure or
    global holding one): the recomputation runs from the arguments alone."""
    from llgrad.runtime.errors import UnsupportedError
    defined = {id(x) for x in args}
    for top in fwd_ops:
        for op in [top] + [o for r in top.regions for o in r.walk()]:
            defined.update(id(v) for v in op.outputs)
            defined.update(id(p) for r in op.regions for p in r.params)
    for top in fwd_ops:
        for v in list(top.inputs) + [v for r in top.regions for v in r.free_values()]:
            if id(v) not in defined:
                raise UnsupportedError(
                    f"checkpoint({getattr(fn, '__name__', 'fn')}) reads a traced value "
                    f"that is not one of its arguments (a closure or global holding one): "
                    f"its backward recomputes it from the arguments alone", loc=top.loc,
                    fix="pass the value to the helper as an argument")


def _traced_bwd(fn, args, g) -> tuple:
    """The cotangents of `args` on IR values: the inlined joint of <fn(*args), g>."""
    from llgrad.api import Differentiable
    from llgrad.transform import ir
    leaves, struct = pytree.flatten(args)
    diff = [k for k, x in enumerate(leaves) if isinstance(x, ir.Value) and
            x.aval.dtype.kind == "f"]
    if not diff:
        return (None,) * len(args)
    others = [x for k, x in enumerate(leaves) if k not in diff]
    obj = Differentiable(_objective(fn, struct, diff), wrt=0)
    _, grads = obj.value_and_grad([leaves[k] for k in diff], others, g)
    full = [None] * len(leaves)
    for k, gk in zip(diff, grads):
        full[k] = gk
    return _per_argument(args, full)


def _objective(fn, struct, diff):
    def checkpoint_objective(xs, others, g):
        return _inner(_rerun(fn, struct, diff, xs, others), g)
    return checkpoint_objective


def _rerun(fn, struct, diff, xs, others):
    """fn on the arguments rebuilt from their differentiated and other leaves (converted, so
    its control flow is staged)."""
    from llgrad.tracer.operators import converted_call
    it, ot = iter(xs), iter(others)
    leaves = [next(it) if k in diff else next(ot) for k in range(len(xs) + len(others))]
    return converted_call(fn, tuple(pytree.unflatten(struct, leaves)), None)


def _inner(out, g):
    """sum over the float leaves of out * g: the objective whose gradient is the VJP."""
    total = 0.0
    for o, c in zip(pytree.tree_leaves(out), pytree.tree_leaves(g)):
        if c is not None and getattr(getattr(o, "aval", None), "dtype", np.dtype("O")).kind == "f":
            total = total + np.sum(o * c)
    return total


def _per_argument(args, leaf_cts) -> tuple:
    """One cotangent per argument (its structure; None where nothing flows)."""
    out, k = [], 0
    for a in args:
        n = len(pytree.tree_leaves(a))
        cts = leaf_cts[k:k + n]
        k += n
        if all(c is None for c in cts):
            out.append(None)
        else:
            out.append(pytree.unflatten(pytree.flatten(a)[1],
                                        [c if c is not None else np.zeros(np.shape(x))
                                         for c, x in zip(cts, pytree.tree_leaves(a))]))
    return tuple(out)


def _eager_bwd(fn, args, g) -> tuple:
    """Rerun fn with grad enabled on detached copies of the tensors that require grad (the
    rerun's graph ends there) and differentiate that run."""
    from llgrad.runtime import autograd
    from llgrad.runtime.autograd.grad_mode import enable_grad
    from llgrad.runtime.autograd.state import STATE
    from llgrad.runtime.errors import AutogradError
    from llgrad.runtime.tensor import Tensor
    name = f"checkpoint({getattr(fn, '__name__', 'fn')})"
    if STATE.grad_enabled:  # the engine's create_graph mode
        raise AutogradError(
            f"{name}: a second derivative through a checkpointed helper is not supported "
            f"eagerly (create_graph=True)", loc=user_loc(),
            fix="call the helper without llgrad.checkpoint for higher derivatives, or "
            "compile the function (@llgrad.differentiate), where checkpointed helpers are "
            "differentiable twice")
    leaves, struct = pytree.flatten(args)
    copies = [x.detach().requires_grad_() if isinstance(x, Tensor) and x.requires_grad
              else x for x in leaves]
    inputs = [c for c, x in zip(copies, leaves) if c is not x]
    with enable_grad():
        out = fn(*pytree.unflatten(struct, copies))
        outs, cts = [], []
        for o, c in zip(pytree.tree_leaves(out), pytree.tree_leaves(g)):
            if isinstance(o, Tensor) and o.requires_grad and c is not None:
                outs.append(o)
                cts.append(c)
        _check_closed_over(CustomCall(name, fn, args, None, None, (), user_loc()), outs,
                           inputs)
        grads = autograd.grad(outs, inputs, grad_outputs=cts, allow_unused=True) \
            if outs else [None] * len(inputs)
    by_id = {id(c): gr for c, gr in zip(inputs, grads)}
    return _per_argument(args, [by_id.get(id(c)) for c in copies])


__all__ = ["checkpoint", "checkpointed"]
