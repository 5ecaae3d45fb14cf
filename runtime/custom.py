"""Custom derivatives: `custom_vjp` (JAX's) and the compiled form of `autograd.Function`.

A custom rule is a forward `fwd(*args) -> (out, residuals)` and a backward
`bwd(residuals, g) -> one cotangent per argument`. Eagerly, a call on tensors that require
grad becomes one graph node (`CustomVJPBackward`) whose backward runs `bwd`; under a
compiler trace (an argument of a traced value class), the value class's `_lg_custom_vjp`
receives a `CustomCall` and records it (tracer/custom.py). Either way `bwd` runs on the same
kind of values as the rest of the program, so it is differentiated like any other code:
second derivatives go through `bwd` (Note [Custom rules are differentiable]).
"""
from __future__ import annotations

import functools
import inspect
import threading
from typing import Callable

import numpy as np

from llgrad.runtime import pytree
from llgrad.runtime.autograd.graph import FREED, Node, freed_error
from llgrad.runtime.autograd.state import STATE
from llgrad.runtime.errors import AutogradError, user_loc

# Note [Custom rules are differentiable]
# As in JAX, the residuals are computed by `fwd` on differentiable values and `bwd` is
# ordinary code on differentiable values: eagerly, `fwd` runs with grad enabled (so the
# residuals remember how they depend on the inputs) and `bwd` runs under the engine's
# create_graph mode; compiled, `fwd`'s ops are ordinary ops and `bwd`'s ops are spliced into
# the backward pass (transform/ad.py), where a second AD pass differentiates them. So
# grad(grad(f)) differentiates `bwd` (with the residuals' true derivatives), never `fwd`
# twice; a `bwd` written with non-differentiable steps gives their derivative (zero), as
# it would in JAX.


class CustomCall:
    """One call of a custom rule, as the interpretations see it.

    `fwd(run, *args) -> (out, residuals)` and `bwd(run, residuals, g) -> tuple` with one
    cotangent (None, or the argument's structure) per argument; `run(f, *a)` calls the user's
    own function `f` (the tracer converts it, so its control flow is compiled).
    `diff[i]` says whether argument i may get a gradient.
    """

    __slots__ = ("name", "owner", "args", "fwd", "bwd", "diff", "loc", "non_diff", "reduce")

    def __init__(self, name, owner, args, fwd, bwd, diff, loc=None, non_diff=None,
                 reduce=False):
        self.name, self.owner, self.args = name, owner, args
        self.fwd, self.bwd, self.diff, self.loc = fwd, bwd, diff, loc
        self.non_diff = non_diff  # non_diff(out) -> ids of outputs without gradient
        self.reduce = reduce  # a cotangent may broadcast to its argument (Function's rule)


def traced_class(args):
    """The value class of the highest-level traced value among `args`' leaves, or None."""
    best = [None, 0]

    def visit(x) -> bool:
        t = type(x)
        lv = getattr(t, "_lg_level", 0)
        if lv > best[1] and hasattr(t, "_lg_custom_vjp"):
            best[:] = [t, lv]
        return False
    pytree.any_leaf(visit, args)
    return best[0]


_TLS = threading.local()


def in_forward(owner) -> bool:
    """True while `owner`'s own fwd runs (a fwd that calls the function computes its value)."""
    return owner in getattr(_TLS, "active", ())


class active:
    """Context: `owner`'s fwd is running (See in_forward)."""

    def __init__(self, owner):
        self.owner = owner

    def __enter__(self):
        _TLS.active = getattr(_TLS, "active", ()) + (self.owner,)

    def __exit__(self, *exc):
        _TLS.active = _TLS.active[:-1]


def cotangents(call: CustomCall, cts, error: Callable) -> list:
    """The cotangents `bwd` returned, one per leaf of the arguments (None: zero).

    `error(what, fix)` builds the exception for a malformed result.
    """
    n = len(call.args)
    if isinstance(cts, list):
        cts = tuple(cts)
    if not isinstance(cts, tuple) or len(cts) != n:
        got = f"a tuple of {len(cts)}" if isinstance(cts, tuple) else f"a {type(cts).__name__}"
        raise error(f"the backward of {call.name} returned {got}; it must return a tuple with "
                    f"one cotangent per argument ({n})",
                    "return (ct_x,) for one argument, and None for an argument without "
                    "gradient")
    out = []
    for i, (arg, ct) in enumerate(zip(call.args, cts)):
        leaves, struct = pytree.flatten(arg)
        if ct is None or not call.diff[i]:
            out += [None] * len(leaves)
            continue
        ct_leaves, ct_struct = pytree.flatten(ct, is_leaf=lambda x: x is None)
        if ct_struct != struct:
            raise error(f"the backward of {call.name} returned a cotangent for argument {i} "
                        f"whose structure differs from the argument's",
                        "return a cotangent with the structure of the argument (or None)")
        for a, c in zip(leaves, ct_leaves):
            if c is not None and _shape(a) != _shape(c) and not (
                    call.reduce and _sums_to(_shape(c), _shape(a))):
                raise error(f"the backward of {call.name} returned a cotangent of shape "
                            f"{list(_shape(c))} for argument {i} of shape {list(_shape(a))}",
                            "return cotangents of the arguments' shapes")
            out.append(c)
    return out


def _sums_to(shape, to) -> bool:
    """Whether a gradient of `shape` sums to `to` (`to` broadcasts to `shape`)."""
    try:
        return np.broadcast_shapes(shape, to) == shape
    except ValueError:
        return False


def _shape(x) -> tuple:
    shape = getattr(x, "shape", None)
    return tuple(shape) if shape is not None else np.shape(x)


def _meta(x) -> tuple:
    """(shape, dtype) of an array, tensor or number."""
    return _shape(x), getattr(getattr(x, "_data", x), "dtype", np.dtype(np.float64))


class custom_vjp:
    """A function with a custom vector-Jacobian product, as `jax.custom_vjp`.

    `f = custom_vjp(f); f.defvjp(fwd, bwd)`: `fwd(*args)` returns `(out, residuals)` (its
    `out` is the value), `bwd(residuals, g)` returns a tuple with one cotangent per argument
    (None for an argument without gradient; with `nondiff_argnums`, `bwd(*those_args,
    residuals, g)` returns cotangents of the other arguments only). Works eagerly (tensors that
    require grad) and inside `@llgrad.differentiate` functions; see Note [Custom rules are
    differentiable] for second derivatives.

    Example:
        >>> import numpy as np
        >>> @custom_vjp
        ... def clip_gradient(x):
        ...     return x
        >>> clip_gradient.defvjp(lambda x: (x, None),
        ...                      lambda res, g: (np.clip(g, -1.0, 1.0),))
    """

    def __init__(self, fun: Callable, nondiff_argnums=()):
        functools.update_wrapper(self, fun)
        self.fun, self.nondiff_argnums = fun, tuple(nondiff_argnums)
        self.fwd = self.bwd = None
        try:
            self._signature = inspect.signature(fun)
        except (TypeError, ValueError):
            self._signature = None

    def defvjp(self, fwd: Callable, bwd: Callable, symbolic_zeros: bool = False) -> None:
        """Set the forward (value and residuals) and backward (cotangents) rules."""
        if symbolic_zeros:
            raise NotImplementedError("custom_vjp: symbolic_zeros=True is not supported")
        self.fwd, self.bwd = fwd, bwd

    def _positional(self, args, kwargs) -> tuple:
        if not kwargs:
            return args
        if self._signature is None:
            raise TypeError(f"{self.__name__}: keyword arguments need an inspectable signature")
        bound = self._signature.bind(*args, **kwargs)
        bound.apply_defaults()
        return tuple(bound.args) + tuple(bound.kwargs.values())

    def _call(self, args) -> CustomCall:
        nd = self.nondiff_argnums
        fwd, bwd = self.fwd, self.bwd

        def run_bwd(run, res, g):
            cts = run(bwd, *[args[i] for i in nd], res, g)
            if not nd:
                return cts
            cts = tuple(cts) if isinstance(cts, (tuple, list)) else (cts,)
            it = iter(cts)  # too few or too many: cotangents() reports it
            full = [None if i in nd else next(it, None) for i in range(len(args))]
            return tuple(full) + tuple(it)
        return CustomCall(getattr(self, "__name__", "custom_vjp"), self, args,
                          lambda run, *a: run(fwd, *a), run_bwd,
                          tuple(i not in nd for i in range(len(args))), user_loc())

    def __call__(self, *args, **kwargs):
        if self.fwd is None:
            raise TypeError(f"custom_vjp function {self.__name__} has no rules: call "
                            f"{self.__name__}.defvjp(fwd, bwd) first")
        args = self._positional(args, kwargs)
        traced = traced_class(args)
        if traced is not None:
            return traced._lg_custom_vjp(self._call(args))
        if in_forward(self) or not (STATE.grad_enabled and _requires_grad(args)):
            return self.fun(*args)
        return eager_call(self._call(args))


def _requires_grad(args) -> bool:
    return pytree.any_leaf(lambda x: getattr(x, "requires_grad", False) is True, args)


# -- eager ----------------------------------------------------------------------------------
def _plain(f, *args):
    return f(*args)


def eager_call(call: CustomCall):
    """Run `call` on tensors: fwd's value, with one CustomVJPBackward node for its tensors."""
    from llgrad.runtime.tensor import Tensor, _edge
    arg_leaves = pytree.tree_leaves(call.args)
    inputs = [k for k, x in enumerate(arg_leaves) if isinstance(x, Tensor) and x.requires_grad]
    with active(call.owner):
        result = call.fwd(_plain, *call.args)
    out, res = _pair(call, result, lambda what, fix: AutogradError(what, loc=call.loc,
                                                                    fix=fix))
    leaves, struct = pytree.flatten(out)
    outs = [k for k, o in enumerate(leaves) if isinstance(o, Tensor) and
            o._data.dtype.kind == "f"]
    _check_closed_over(call, [leaves[k] for k in outs], [arg_leaves[k] for k in inputs])
    node = CustomVJPBackward(call, res, struct, leaves, outs, inputs,
                             tuple(_edge(arg_leaves[k]) for k in inputs))
    new = list(leaves)
    for nr, k in enumerate(outs):
        new[k] = Tensor._wrap(leaves[k]._data, node, nr)
    return pytree.unflatten(struct, new)


def _check_closed_over(call, outs, inputs) -> None:
    """Raise if fwd's outputs depend on a tensor that requires grad other than the inputs
    (a closure or global of the rule): its gradient would be lost (tracer/custom.py refuses
    the same in compiled code)."""
    from llgrad.runtime.autograd.graph import AccumulateGrad
    from llgrad.runtime.tensor import _edge
    stop = {id(_edge(t)[0]) for t in inputs}
    todo, seen = [o._grad_fn for o in outs if o._grad_fn is not None], set()
    while todo:
        node = todo.pop()
        if node is None or id(node) in stop or id(node) in seen:
            continue
        seen.add(id(node))
        if isinstance(node, AccumulateGrad):
            raise AutogradError(
                f"{call.name} has a custom derivative rule, and its forward uses a tensor that "
                f"requires grad but is not one of its arguments: the rule gives no gradient "
                f"for it", loc=call.loc, fix="pass the tensor to the function as an argument "
                "(and return its cotangent from the backward)")
        todo.extend(n for n, _ in node.next_functions)


def _pair(call, result, error):
    if not (isinstance(result, (tuple, list)) and len(result) == 2):
        raise error(f"the forward of {call.name} must return a pair (output, residuals), got "
                    f"a {type(result).__name__}", "return `out, residuals` from fwd")
    return result


class CustomVJPBackward(Node):
    """The eager node of a custom rule: its backward runs the rule's `bwd`."""

    __slots__ = ("call", "res", "struct", "leaves", "outs", "inputs", "dtypes", "out_meta",
                 "n_outputs", "materialize")

    def __init__(self, call, res, struct, leaves, outs, inputs, edges):
        super().__init__(edges)
        self.call, self.res, self.struct, self.outs, self.inputs = call, res, struct, outs, \
            inputs
        self.leaves = [_meta(x) for x in leaves]
        args = pytree.tree_leaves(call.args)
        self.dtypes = {k: args[k]._data.dtype for k in inputs}
        self.out_meta = [self.leaves[k] for k in outs]
        self.n_outputs = len(outs)
        self.materialize = True

    def name(self) -> str:
        return "CustomVJPBackward"

    def release(self) -> None:
        self.res = FREED

    def apply(self, grads: list) -> list:
        from llgrad.runtime.tensor import Tensor
        if self.res is FREED:
            raise freed_error(self)
        gs = [Tensor._wrap(np.zeros(*m)) for m in self.leaves]
        for nr, k in enumerate(self.outs):
            if grads[nr] is not None:
                gs[k] = grads[nr]
        g = pytree.unflatten(self.struct, gs)
        cts = cotangents(self.call, self.call.bwd(_plain, self.res, g),
                         lambda what, fix: AutogradError(what, loc=self.call.loc, fix=fix))
        out = []
        for k in self.inputs:
            c = cts[k]
            out.append(None if c is None else c if isinstance(c, Tensor) else
                       Tensor._wrap(np.asarray(c, dtype=self.dtypes[k])))
        return out


# -- autograd.Function in compiled code -------------------------------------------------------
class TracedCtx:
    """The `ctx` of an `autograd.Function` applied to traced values: saved values are the
    residuals of the compiled custom rule (See autograd/function.py)."""

    def __init__(self, needs_input_grad):
        self.needs_input_grad = needs_input_grad
        self._saved = self._non_diff = ()
        self.materialize_grads = True  # cotangents of unused outputs are always zeros

    def save_for_backward(self, *values) -> None:
        self._saved = values

    @property
    def saved_tensors(self) -> tuple:
        return tuple(self._saved)

    def mark_non_differentiable(self, *values) -> None:
        self._non_diff = values

    def mark_dirty(self, *values) -> None:
        pass  # an in-place update of a traced value is refused where it happens

    def set_materialize_grads(self, value: bool) -> None:
        self.materialize_grads = bool(value)


def function_call(cls, args, kwargs) -> CustomCall:
    """`cls.apply(*args, **kwargs)` (an autograd.Function) as a custom rule."""
    diff = tuple(getattr(type(a), "_lg_level", 0) > 0 and
                 getattr(getattr(a, "dtype", None), "kind", "") == "f" for a in args)
    ctx = TracedCtx(diff)
    state = {}

    def fwd(run, *a):
        out = run(cls.forward, ctx, *a, **kwargs)
        state["tuple"] = isinstance(out, tuple)
        return out, ctx

    def bwd(run, ctx_, g):
        grads = run(cls.backward, ctx_, *(g if state["tuple"] else (g,)))
        grads = grads if isinstance(grads, tuple) else (grads,)
        n = len(args)
        if len(grads) > n and all(r is None for r in grads[n:]):
            grads = grads[:n]
        for i, (a, gr) in enumerate(zip(args, grads)):
            if gr is not None and getattr(type(a), "_lg_level", -1) < 0:
                raise AutogradError(
                    f"function {cls.__name__}Backward returned a gradient different than None "
                    f"at position {i}, but the corresponding forward input was not a Tensor",
                    loc=user_loc(), fix="return None for non-tensor inputs")
        return tuple(None if not d else gr for gr, d in zip(grads, diff)) + grads[len(diff):]

    def non_diff(out):
        return {id(v) for v in ctx._non_diff}
    return CustomCall(cls.__name__, cls, tuple(args), fwd, bwd, diff, user_loc(), non_diff,
                      reduce=True)


def stop_gradient(x):
    """`x` with no gradient flowing back through it (jax.lax.stop_gradient; eagerly,
    `Tensor.detach`). Works on pytrees of arrays, tensors and traced values."""
    from llgrad.runtime import ops

    def stop(v):
        if getattr(type(v), "_lg_level", -1) >= 0:
            return ops.stop_gradient(v)
        return v
    return pytree.tree_map(stop, x)


__all__ = ["custom_vjp", "CustomCall", "CustomVJPBackward", "stop_gradient"]
