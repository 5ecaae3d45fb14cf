"""llgrad.autograd: the engine's public API (backward, grad), custom Functions, grad modes,
anomaly mode, and the tools built on them (gradcheck, functional, profiler)."""
from __future__ import annotations

from llgrad.runtime.autograd.anomaly_mode import (  # noqa: F401
    detect_anomaly, is_anomaly_enabled, set_detect_anomaly,
)
from llgrad.runtime.autograd.engine import run_backward
from llgrad.runtime.autograd.function import Function, FunctionCtx  # noqa: F401
from llgrad.runtime.autograd.grad_mode import (  # noqa: F401
    enable_grad, inference_mode, is_grad_enabled, no_grad, set_grad_enabled,
)
from llgrad.runtime.errors import AutogradError

# Imported here so llgrad/__init__'s _alias registers them as llgrad.autograd.<name>.
from llgrad.runtime.autograd import functional, profiler  # noqa: E402,F401
from llgrad.runtime.autograd.gradcheck import gradcheck, gradgradcheck  # noqa: E402,F401


def _as_tuple(x):
    if x is None:
        return None
    return tuple(x) if isinstance(x, (tuple, list)) else (x,)


def _make_grads(outputs, grad_outputs):
    from llgrad.runtime.tensor import Tensor
    import numpy as np
    grads = []
    for i, (t, g) in enumerate(zip(outputs, grad_outputs)):
        if g is None:
            if t._data.size != 1:
                raise AutogradError(
                    f"grad can be implicitly created only for scalar outputs (output {i} has "
                    f"shape {list(t._data.shape)})",
                    fix="pass gradient=/grad_outputs= with a tensor of the output's shape, or "
                    "reduce the output first (e.g. y.sum().backward())")
            g = Tensor._wrap(np.ones(t._data.shape, t._data.dtype))
        elif not isinstance(g, Tensor):
            g = Tensor._wrap(np.asarray(g, dtype=t._data.dtype))
        elif g._data.shape != t._data.shape and g._data.size != t._data.size:
            raise AutogradError(f"Mismatch in shape: grad_output[{i}] has a shape of "
                                f"{list(g._data.shape)} and output[{i}] has a shape of "
                                f"{list(t._data.shape)}.")
        grads.append(g)
    return grads


def backward(tensors, grad_tensors=None, retain_graph=None, create_graph=False,
             grad_variables=None, inputs=None) -> None:
    """Accumulate the gradients of `tensors` into the `.grad` of graph leaves (or `inputs`)."""
    tensors = _as_tuple(tensors)
    grads = _as_tuple(grad_tensors if grad_tensors is not None else grad_variables) or \
        (None,) * len(tensors)
    if retain_graph is None:
        retain_graph = create_graph
    inputs = _as_tuple(inputs)
    if inputs is not None and not inputs:
        raise AutogradError("'inputs' argument to backward() cannot be empty.")
    run_backward(tensors, _make_grads(tensors, grads), retain_graph, create_graph,
                 inputs=inputs, accumulate=True)


def grad(outputs, inputs, grad_outputs=None, retain_graph=None, create_graph=False,
         only_inputs=True, allow_unused=False, is_grads_batched=False, materialize_grads=False):
    """Gradients of `outputs` w.r.t. `inputs`, returned (not accumulated into `.grad`)."""
    outputs = _as_tuple(outputs)
    inputs_t = _as_tuple(inputs)
    grads = _as_tuple(grad_outputs) or (None,) * len(outputs)
    if retain_graph is None:
        retain_graph = create_graph
    result = run_backward(outputs, _make_grads(outputs, grads), retain_graph, create_graph,
                          inputs=inputs_t, accumulate=False,
                          allow_unused=allow_unused or materialize_grads)
    if materialize_grads:
        from llgrad.runtime.creation import zeros_like
        result = tuple(zeros_like(t) if g is None else g for g, t in zip(result, inputs_t))
    return result


