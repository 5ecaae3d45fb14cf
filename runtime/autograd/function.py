"""Custom autograd Functions: `forward(ctx, ...)`/`backward(ctx, ...)` static methods and
`apply`, with the ctx API of PyTorch (save_for_backward, saved_tensors, needs_input_grad,
mark_non_differentiable, mark_dirty, set_materialize_grads). The ctx is the graph node."""
from __future__ import annotations

import numpy as np

from llgrad.runtime.autograd.graph import _SEQ, FREED, Node, SavedTensor, _sum_to, freed_error
from llgrad.runtime.autograd.state import PROFILER, STATE
from llgrad.runtime.errors import AutogradError


class FunctionCtx(Node):
    """The `ctx` of a custom Function, which is also its backward node (`<Name>Backward`)."""

    _function = None

    def __init__(self):
        super().__init__(())
        self.needs_input_grad = ()
        self._saved = None
        self._non_diff = ()
        self._dirty = ()
        self.materialize_grads = True
        self.out_meta = None
        self.n_outputs = 1
        self._in_meta = ()

    def name(self) -> str:
        return type(self).__name__

    def save_for_backward(self, *tensors) -> None:
        """Save tensors (or None) for backward; read them back with `ctx.saved_tensors`."""
        from llgrad.runtime.tensor import Tensor
        for t in tensors:
            if t is not None and not isinstance(t, Tensor):
                raise TypeError(f"save_for_backward can only save tensors, but argument "
                                f"{tensors.index(t)} is of type {type(t).__name__}; store "
                                f"other values as attributes of ctx")
        self._saved = tensors

    @property
    def saved_tensors(self) -> tuple:
        if self._saved is FREED:
            raise freed_error(self)
        if self._saved is None:
            return ()
        return tuple(s.unpack(self) if isinstance(s, SavedTensor) else s for s in self._saved)

    def mark_non_differentiable(self, *tensors) -> None:
        self._non_diff = tensors

    def mark_dirty(self, *tensors) -> None:
        self._dirty = tensors

    def set_materialize_grads(self, value: bool) -> None:
        self.materialize_grads = bool(value)

    @property
    def materialize(self):
        return self.materialize_grads

    def release(self) -> None:
        if self._saved:
            self._saved = FREED

    def apply(self, grads: list) -> list:
        from llgrad.runtime.tensor import Tensor
        fn = self._function
        if self.materialize_grads:
            grads = [Tensor._wrap(np.zeros(*m)) if g is None else g
                     for g, m in zip(grads, self.out_meta)]
        result = fn.backward(self, *grads)
        if not isinstance(result, tuple):
            result = (result,)
        n_in = len(self._in_meta)
        if len(result) > n_in and all(r is None for r in result[n_in:]):
            result = result[:n_in]
        if len(result) != n_in:
            raise AutogradError(f"function {self.name()} returned an incorrect number of "
                                f"gradients (expected {n_in}, got {len(result)})",
                                fix=f"return one gradient per forward input (None for "
                                f"inputs that need no gradient) from {fn.__name__}.backward")
        out = []
        for i, (g, meta) in enumerate(zip(result, self._in_meta)):
            if g is None:
                out.append(None)
                continue
            if meta is None:
                raise AutogradError(
                    f"function {self.name()} returned a gradient different than None at "
                    f"position {i}, but the corresponding forward input was not a Tensor",
                    fix="return None for non-tensor inputs")
            if not isinstance(g, Tensor):
                g = Tensor._wrap(np.asarray(g, dtype=meta[1]))
            if g._data.shape != meta[0]:
                reduced = _sum_to(g, meta[0])
                if reduced._data.shape != meta[0]:
                    raise AutogradError(
                        f"Function {self.name()} returned an invalid gradient at index {i} - "
                        f"got {list(g._data.shape)} but expected shape compatible with "
                        f"{list(meta[0])}", fix="return a gradient of the input's shape")
                g = reduced
            out.append(g if self.needs_input_grad[i] else None)
        return out


class _FunctionMeta(type):
    def __init__(cls, name, bases, attrs):
        super().__init__(name, bases, attrs)
        cls._backward_cls = type(name + "Backward", (FunctionCtx,), {"_function": cls})


class Function(metaclass=_FunctionMeta):
    """Base class for custom differentiable operations (PyTorch's torch.autograd.Function).

    Example:
        >>> import llgrad as lg
        >>> class Exp(lg.autograd.Function):
        ...     @staticmethod
        ...     def forward(ctx, i):
        ...         result = i.exp()
        ...         ctx.save_for_backward(result)
        ...         return result
        ...     @staticmethod
        ...     def backward(ctx, grad_output):
        ...         result, = ctx.saved_tensors
        ...         return grad_output * result
        >>> Exp.apply(lg.tensor([1.], requires_grad=True))
        tensor([2.7183], grad_fn=<ExpBackward>)
    """

    @staticmethod
    def forward(ctx, *args, **kwargs):
        raise NotImplementedError("subclasses of Function implement forward(ctx, ...)")

    @staticmethod
    def backward(ctx, *grad_outputs):
        raise NotImplementedError("subclasses of Function implement backward(ctx, ...)")

    @classmethod
    def apply(cls, *args, **kwargs):
        from llgrad.runtime import custom
        from llgrad.runtime.tensor import Tensor, _edge
        traced = custom.traced_class(args)
        if traced is not None:  # inside a compiled function: a custom rule of the trace
            return traced._lg_custom_vjp(custom.function_call(cls, args, kwargs))
        ctx = cls._backward_cls()
        ctx.needs_input_grad = tuple(isinstance(a, Tensor) and a._requires_grad for a in args)
        prof = PROFILER[0]
        if prof is not None:
            prof.begin(cls.__name__, [a._data for a in args if isinstance(a, Tensor)])
        prev = STATE.grad_enabled
        STATE.grad_enabled = False
        try:
            outputs = cls.forward(ctx, *args, **kwargs)
        finally:
            STATE.grad_enabled = prev
            if prof is not None:
                prof.end()
        is_tuple = isinstance(outputs, tuple)
        outs = outputs if is_tuple else (outputs,)
        if not (prev and any(ctx.needs_input_grad)):
            ctx._saved = _saved_entries(ctx, ())
            return outputs
        ctx.next_functions = tuple(_edge(a) if isinstance(a, Tensor) else (None, 0) for a in args)
        ctx._seq = next(_SEQ)  # newer than the nodes its edges point at (engine._needed)
        ctx._in_meta = tuple((a._data.shape, a._data.dtype) if isinstance(a, Tensor) else None
                             for a in args)
        ctx.out_meta = [(o._data.shape, o._data.dtype) if isinstance(o, Tensor) else ((), float)
                        for o in outs]
        ctx.n_outputs = len(outs)
        non_diff = {id(t) for t in ctx._non_diff}
        dirty = {id(t) for t in ctx._dirty}
        wrapped = []
        for i, o in enumerate(outs):
            if not isinstance(o, Tensor):
                wrapped.append(o)
            elif id(o) in non_diff:
                wrapped.append(Tensor._wrap(o._data, vc=o._vc))
            elif id(o) in dirty:
                if o._grad_fn is None and o._requires_grad:
                    raise AutogradError("a leaf Variable that requires grad has been used in "
                                        "an in-place operation.", fix="clone() it first")
                o._grad_fn, o._output_nr, o._requires_grad = ctx, i, True
                wrapped.append(o)
            else:
                wrapped.append(Tensor._wrap(o._data, ctx, i, o._vc))
        ctx._saved = _saved_entries(ctx, outs)
        return tuple(wrapped) if is_tuple else wrapped[0]


def _saved_entries(ctx, outs):
    if not ctx._saved:
        return ctx._saved
    out_ids = {id(o): i for i, o in enumerate(outs)}
    entries = []
    for t in ctx._saved:
        if t is None:
            entries.append(None)
        elif id(t) in out_ids and out_ids[id(t)] == 0 and t._grad_fn is not ctx:
            s = SavedTensor(t, is_output=True)
            entries.append(s)
        else:
            entries.append(SavedTensor(t))
    return tuple(entries)
