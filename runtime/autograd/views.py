"""Views and in-place updates: the graph of a base tensor follows writes made through its views.

A view (`y[:2]`, `y.T`, `y.reshape(...)`, a `split` piece: a shape or index op whose numpy result
shares the operand's buffer) remembers its root base and the ops that make it from the base
(`steps`). An in-place op on a view writes through to the base, so the base's value changes
and so must its graph: as PyTorch does, the base's grad_fn becomes a `CopySlices` node whose
gradient goes to the op's result inside the view and to the base's old value outside it; the
view's grad_fn is then rebuilt by replaying its steps on the rebased base. Every other live
view of that base is rebuilt the same way after any in-place op on the base or on one of its
views (their values may have changed too), so a gradient never flows through a stale graph.
"""
from __future__ import annotations

import weakref

import numpy as np

from llgrad.runtime.autograd.graph import Node
from llgrad.runtime.autograd.state import STATE
from llgrad.runtime.errors import AutogradError, InternalError


def record(out, operand, prim, args, params, index=None) -> None:
    """Mark `out` (a Tensor sharing `operand`'s buffer) as a view made by `prim`: `out._view` is
    (root base, steps, grad mode at creation), a step being (prim, other operands, params,
    result index or None). Views made with grad on are registered with the base (weakly) so
    `refresh` can find them. This runs for every view op: keep it lean."""
    step = (prim, args[1:], params, index)
    parent = operand._view
    if parent is None:
        base, steps = operand, (step,)
    else:
        base, steps = parent[0], parent[1] + (step,)
    grad_mode = STATE.grad_enabled
    out._view = (base, steps, grad_mode)
    if not grad_mode:
        return
    views = base._views
    if views is None:
        views = base._views = []
    elif len(views) >= 64 and len(views) & (len(views) - 1) == 0:  # prune dead refs, amortised
        views[:] = [r for r in views if r() is not None]
    views.append(weakref.ref(out))


def replay(x, steps):
    """Apply a view's steps to `x`: a Tensor (recorded, so differentiable) or an ndarray."""
    for prim, rest, params, index in steps:
        if isinstance(x, np.ndarray):
            x = prim.impl(x, *[getattr(a, "_data", a) for a in rest], **params)
        else:
            x = prim.bind(x, *rest, **params)
        if index is not None:
            x = x[index]
    return x


class CopySlices(Node):
    """The grad_fn of a base after an in-place op on one of its views: the gradient inside the
    view goes to the op's result (next_functions[1]), the rest to the base's old value
    (next_functions[0])."""

    __slots__ = ("steps", "outside")

    def __init__(self, base_edge, result_edge, steps, shape):
        super().__init__((base_edge, result_edge))
        self.steps = steps
        outside = np.ones(shape, dtype=bool)
        inside = replay(outside, steps)
        if not np.may_share_memory(inside, outside):
            raise InternalError("CopySlices: replaying a view's steps on a mask made a copy")
        inside[...] = False
        self.outside = outside

    def apply(self, grads: list) -> list:
        from llgrad.runtime import ops
        g = grads[0]
        return [ops.where(self.outside, g, np.zeros((), g._data.dtype)), replay(g, self.steps)]


def check_inplace(t, op: str) -> None:
    """Raise PyTorch's errors for in-place ops a view's graph cannot follow."""
    view = t._view
    if view is None or not STATE.grad_enabled:
        return
    base, _, grad_mode = view
    if base._grad_fn is None and base._requires_grad:
        raise AutogradError(
            f"a view of a leaf Variable that requires grad is being used in an in-place "
            f"operation ({op}).", fix="clone the leaf first (x.clone()), or wrap the update "
            "in `with llgrad.no_grad():`")
    if not grad_mode and base._requires_grad:
        raise AutogradError(
            f"a view was created in no_grad mode and is being modified in place ({op}) with "
            f"grad mode enabled; its base requires grad, so the gradient would be wrong",
            fix="create the view with grad mode enabled, or do the update under no_grad")


def rebase(t, result, edge_of) -> None:
    """After an in-place op wrote `result` through view `t`: the base's grad_fn becomes a
    CopySlices node and `t`'s (and the base's other live views') grad_fn are rebuilt on it.
    `edge_of(tensor)` is the tensor's (node, output_nr) edge."""
    base, steps, _ = t._view
    tensor_result = hasattr(result, "_grad_fn")
    if not (base._requires_grad or (tensor_result and result._requires_grad)):
        return
    result_edge = edge_of(result) if tensor_result and result._requires_grad else (None, 0)
    node = CopySlices(edge_of(base) if base._requires_grad else (None, 0), result_edge,
                      steps, base._data.shape)
    base._grad_fn, base._output_nr, base._requires_grad = node, 0, True
    refresh(base)


def refresh(base) -> None:
    """Rebuild the grad_fn of `base`'s live views on its current graph."""
    if not base._requires_grad:
        return
    for ref in list(base._views or ()):
        v = ref()
        if v is None:
            continue
        fresh = replay(base, v._view[1])
        v._grad_fn, v._output_nr, v._requires_grad = fresh._grad_fn, fresh._output_nr, True
