"""Composition of compiled functions with everything else.

- Called while another function is being traced, a `Differentiable` is inlined into the
  caller's IR: its value as ops, its gradient as the AD-generated forward+backward ops, so
  `grad(grad(f))`, `hessian` and `hvp` are the AD pass applied to IR that already holds a
  backward.
- Called on llgrad tensors that require grad, it becomes one node of the eager graph
  (`CompiledFunctionBackward`), whose backward is a compiled vector-Jacobian product.
- `jacobian`: compiled, one reverse sweep per output row (llgrad/forward.py has jacfwd,
  jacrev, hessian and hvp as single staged loops).
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from llgrad import diagnostics
from llgrad.runtime.autograd.function import Function
from llgrad.runtime.autograd.graph import Node
from llgrad.runtime.autograd.state import STATE
from llgrad.runtime import pytree
from llgrad.runtime.errors import AutogradError, UnsupportedError
from llgrad.runtime.tensor import Tensor, _edge
from llgrad.tracer import signature as sig
from llgrad.tracer.tracing import _convertible, bind_arguments, call_with, trace
from llgrad.transform import ad, ir
from llgrad.transform.inline import inline
from llgrad.transform.passes import substitute
from llgrad.transform.passes.pipeline import optimize


def is_traced_call(args, kwargs) -> bool:
    return pytree.any_leaf(_is_ir_value, (args, kwargs))


def _is_ir_value(x) -> bool:
    return isinstance(x, ir.Value)


def _requires_grad(x) -> bool:
    return isinstance(x, Tensor) and x.requires_grad


def needs_eager_node(args, kwargs) -> bool:
    from llgrad.runtime.autograd.state import STATE
    return STATE.grad_enabled and pytree.any_leaf(_requires_grad, (args, kwargs))


# -- inlining ------------------------------------------------------------------------------
def inline_value_and_grad(d, args, kwargs, wrt_args, single):
    """`d.value_and_grad(*args)` on IR values: its joint IR spliced into the caller."""
    from llgrad.api import _assemble, _wrt_leaves
    tr = trace(d.fn, args, kwargs)
    diagnostics.warn_unrolled([u for u in tr.unrolled
                               if d._monitor.first(("unroll", str(u[0])))])
    wrt_leaves = _wrt_leaves(tr, wrt_args)
    outer = _lift_free_values(tr.fn)
    joint = optimize(ad.grad_function(optimize(tr.fn, fuse=False), wrt_leaves), fuse=False)
    outs = inline(joint, _leaves_of_call(d, args, kwargs) + outer)
    n_out = len(tr.fn.outputs)
    value = sig.unflatten(tr.out_struct, outs[:n_out])
    return value, _assemble(tr, outs[n_out:], wrt_leaves, wrt_args, single, to_python=False)


def _lift_free_values(fn: ir.Function) -> list:
    """The caller's values `fn` reads (a closure over the caller's traced `w`: `llgrad.grad(
    lambda v: np.sum(w * v ** 2))(w)` inside a traced function), made parameters after its
    own: a function stands alone for AD and the passes (constants of its gradient, they are
    inputs of the caller's, which differentiates through them). Returns them, to pass."""
    free = [v for v in fn.body.free_values() if isinstance(v, ir.Value)]
    params = [ir.Value(v.aval, v.name) for v in free]
    substitute(fn.body, {v.id: p for v, p in zip(free, params)})
    fn.body.params.extend(params)
    return free


def _leaves_of_call(d, args, kwargs):
    _, values = bind_arguments(d.fn, args, kwargs)
    return sig.flatten(tuple(values))[0]


# -- dual tensors (eager forward mode) -----------------------------------------------------
def has_dual(args, kwargs) -> bool:
    from llgrad.runtime.autograd import forward_ad
    return pytree.any_leaf(forward_ad.is_dual, (args, kwargs))


def dual_call(d, args, kwargs):
    """A compiled function called on dual tensors: its value and tangent from one compiled
    forward-mode call (llgrad.jvp), returned as a dual tensor."""
    from llgrad.forward import jvp
    from llgrad.runtime.autograd import forward_ad
    names, values = bind_arguments(d.fn, args, kwargs)
    if any(n.startswith("*") for n in names):
        raise UnsupportedError(f"{d.__name__}: keyword-only arguments with dual tensors",
                               fix="pass them positionally")
    primals = pytree.tree_map(lambda x: forward_ad.primal_array(x), tuple(values))
    tangents = pytree.tree_map(lambda x: forward_ad.tangent_array(x), tuple(values))
    out, tangent = jvp(d.fn, primals, tangents)
    if not isinstance(out, (np.ndarray, float, np.floating)):
        raise UnsupportedError(
            f"{d.__name__}: a compiled function called on dual tensors must return one "
            f"array or number (got {type(out).__name__})", fix="return a single array")
    return forward_ad.make_dual(Tensor._wrap(np.array(out)),
                                Tensor._wrap(np.array(tangent, dtype=np.asarray(out).dtype)))


# -- eager graphs --------------------------------------------------------------------------
_SLOT = "__lg_tensor_slot__"


def _vjp_objective(fn):
    fn = _convertible(fn)  # converted as a traced function is (its writes into new arrays)

    def vjp_objective(tensor_arrays, ct, names, template):
        it = iter(tensor_arrays)
        values = _fill(template, it)
        return np.sum(call_with(fn, list(names), values) * ct)
    return vjp_objective


def _fill(obj, it):
    return pytree.tree_map(lambda x: next(it) if isinstance(x, str) and x == _SLOT else x, obj)


def _template(obj, grads: list):
    """Arguments with each tensor that requires grad replaced by a slot (collected in order)."""
    def slot(x):
        if not isinstance(x, Tensor):
            return x
        if x.requires_grad:
            grads.append(x)
            return _SLOT
        return x.detach()._data
    return pytree.tree_map(slot, obj)


class CompiledFunction(Function):
    """A compiled function as one node of an eager graph (`CompiledFunctionBackward`)."""

    @staticmethod
    def forward(ctx, d, names, template, *tensors):
        ctx.d, ctx.names, ctx.template = d, names, template
        arrays = [t._data for t in tensors]
        value = call_with(d, list(names), _fill(template, iter(arrays)))
        if not isinstance(value, (np.ndarray, float, int, np.floating)):
            raise UnsupportedError(
                f"{d.__name__}: a compiled function inside an eager graph must return one "
                f"array or number (got {type(value).__name__})",
                fix="return a single array, or call it outside the graph")
        ctx.save_for_backward(*tensors)
        out = np.asarray(value, dtype=tensors[0]._data.dtype if tensors else None)
        return Tensor._wrap(np.array(out))

    @staticmethod
    def backward(ctx, grad_output):
        tensors = ctx.saved_tensors
        vjp = ctx.d._vjp_differentiable()
        arrays = [t._data for t in tensors]
        grads = vjp.grad(arrays, np.asarray(grad_output._data), tuple(ctx.names), ctx.template)
        # The gradient is computed natively: with create_graph it must not pass for a constant.
        twice = STATE.grad_enabled and (grad_output.requires_grad or
                                        any(t.requires_grad for t in tensors))
        node = _OnceDifferentiable(ctx.d.__name__, [grad_output, *tensors]) if twice else None
        return (None, None, None) + tuple(Tensor._wrap(np.asarray(g, dtype=t._data.dtype), node)
                                          for g, t in zip(grads, tensors))


class _OnceDifferentiable(Node):
    """grad_fn of a compiled function's gradient taken with create_graph=True inside an eager
    graph: a backward pass that reaches it raises (as PyTorch's `once_differentiable`), so a
    second derivative is never silently dropped."""

    def __init__(self, fname: str, inputs):
        super().__init__(tuple(_edge(t) for t in inputs if t.requires_grad))
        self.fname = fname

    def apply(self, grads: list) -> list:
        raise AutogradError(
            f"the gradient of the compiled function {self.fname} was taken with "
            f"create_graph=True inside an eager graph, and llgrad cannot differentiate it a "
            f"second time there", loc=self.loc,
            fix="take both derivatives in compiled code (llgrad.grad(llgrad.grad(f)), "
            "llgrad.hessian(f), llgrad.hvp(f)), or run f on eager tensors without "
            "@differentiate")


def eager_call(d, args, kwargs):
    names, values = bind_arguments(d.fn, args, kwargs)
    grads: list = []
    template = _template(tuple(values), grads)
    return CompiledFunction.apply(d, tuple(names), template, *grads)


def vjp_differentiable(fn):
    from llgrad.api import Differentiable
    return Differentiable(_vjp_objective(fn), wrt=0)


# -- jacobian ------------------------------------------------------------------------------
def _split(d, args, kwargs, argnums):
    """(names, values, x, template with a slot at argument `argnums`)."""
    names, values = bind_arguments(d.fn, args, kwargs)
    template = list(values)
    x = template[argnums]
    template[argnums] = _SLOT
    return tuple(names), values, x, tuple(template)


def jacobian(f: Callable, argnums: int = 0) -> Callable:
    """The Jacobian of `f` w.r.t. argument `argnums`, shaped out.shape + in.shape, compiled:
    called with positional arguments, `jacfwd` or `jacrev`, whichever has fewer basis
    vectors (llgrad/forward.py: one batched sweep); with keyword arguments, or for a
    Differentiable, one native reverse sweep per output element."""
    from llgrad.api import Differentiable
    from llgrad.forward import _jacobian
    d = f if isinstance(f, Differentiable) else Differentiable(f, wrt=argnums)
    batched = None if isinstance(f, Differentiable) else _jacobian(f, argnums, "auto")

    def jac(*args, **kwargs):
        if batched is not None and not kwargs:
            return batched(*args)
        names, values, x, template = _split(d, args, kwargs, argnums)
        out = np.asarray(call_with(d, list(names), values))
        vjp = d._vjp_differentiable()
        rows = []
        for k in range(out.size):
            ct = np.zeros(out.shape, out.dtype)
            ct.flat[k] = 1.0
            rows.append(np.asarray(vjp.grad([x], ct, names, template)[0]))
        shape = out.shape + np.shape(x)
        return np.stack(rows).reshape(shape) if rows else np.zeros(shape)
    return jac
