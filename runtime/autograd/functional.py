"""Functional higher-level autograd API, as torch.autograd.functional: jacobian, hessian, vjp,
jvp (the double-vjp trick), hvp, vhp. Inputs and outputs are a Tensor or a tuple of Tensors;
results nest like PyTorch's (see each function). Nothing here touches the caller's tensors'
.grad; inputs are detached copies unless create_graph=True. jacobian(vectorize=True) is in
vectorized.py (Note [Vectorized jacobian]).
"""
from __future__ import annotations

import numpy as np

from llgrad.runtime.autograd.grad_mode import enable_grad, set_grad_enabled
from llgrad.runtime.autograd.state import STATE
from llgrad.runtime.autograd.vectorized import BATCHED, vectorized_jacobian

__all__ = ["vjp", "jvp", "jacobian", "hessian", "hvp", "vhp"]


def _tensor_cls():
    from llgrad.runtime.tensor import Tensor
    return Tensor


def _as_tuple(inp, arg_name, fn_name):
    Tensor = _tensor_cls()
    is_tuple = isinstance(inp, tuple)
    items = inp if is_tuple else (inp,)
    for i, el in enumerate(items):
        if not isinstance(el, Tensor):
            if is_tuple:
                raise TypeError(f"The {arg_name} given to {fn_name} must be either a Tensor or "
                                f"a tuple of Tensors but the value at index {i} has type "
                                f"{type(el).__name__}.")
            raise TypeError(f"The {arg_name} given to {fn_name} must be either a Tensor or a "
                            f"tuple of Tensors but the given {arg_name} has type "
                            f"{type(el).__name__}.")
    return is_tuple, items


def _tuple_postprocess(res, to_unpack):
    if isinstance(to_unpack, tuple):
        if not to_unpack[1]:
            res = tuple(el[0] for el in res)
        if not to_unpack[0]:
            res = res[0]
    elif not to_unpack:
        res = res[0]
    return res


def _grad_preprocess(inputs, create_graph, need_graph):
    # With create_graph, a view keeps the link to the caller's graph; otherwise a fresh leaf.
    out = []
    for inp in inputs:
        if create_graph and inp.requires_grad:
            out.append(inp.view_as(inp))
        else:
            t = inp.detach()
            out.append(t.requires_grad_(need_graph) if t.is_floating_point() else t)
    return tuple(out)


def _grad_postprocess(inputs, create_graph):
    if isinstance(inputs[0], tuple):
        return tuple(_grad_postprocess(i, create_graph) for i in inputs)
    return inputs if create_graph else tuple(i.detach() for i in inputs)


def _validate_v(v, other, is_other_tuple):
    if len(other) != len(v):
        if is_other_tuple:
            raise RuntimeError(f"v is a tuple of invalid length: should be {len(other)} but got "
                               f"{len(v)}.")
        raise RuntimeError("The given v should contain a single Tensor.")
    for idx, (el_v, el_other) in enumerate(zip(v, other)):
        if tuple(el_v.shape) != tuple(el_other.shape):
            prepend = f"Entry {idx} in " if is_other_tuple else ""
            raise RuntimeError(f"{prepend}v has invalid size: should be "
                               f"{list(el_other.shape)} but got {list(el_v.shape)}.")


_STRICT_MSG = {
    "hessian": "The hessian of the user-provided function with respect to input {i} is "
               "independent of the input. This is not allowed in strict mode. You should ensure "
               "that your function is thrice differentiable and that the hessian depends on the "
               "inputs.",
    "jacobian": "While computing the hessian, found that the jacobian of the user-provided "
                "function with respect to input {i} is independent of the input. This is not "
                "allowed in strict mode. You should ensure that your function is twice "
                "differentiable and that the jacobian depends on the inputs (this would be "
                "violated by a linear function for example).",
    "grad_inputs": "The gradient with respect to input {i} is independent of the inputs of the "
                   "user-provided function. This is not allowed in strict mode.",
    "outputs": "Output {i} of the user-provided function does not require gradients. The "
               "outputs must be computed in a differentiable manner from the input when running "
               "in strict mode.",
}


def _check_requires_grad(inputs, input_type, strict):
    if not strict:
        return
    for i, inp in enumerate(inputs):
        if inp is None:
            raise RuntimeError(f"The output of the user-provided function is independent of "
                               f"input {i}. This is not allowed in strict mode.")
        if not inp.requires_grad:
            raise RuntimeError(_STRICT_MSG[input_type].format(i=i))


def _autograd_grad(outputs, inputs, grad_outputs=None, create_graph=False, retain_graph=None):
    """autograd.grad that skips outputs not requiring grad (None for every input if none do)."""
    from llgrad.runtime.autograd import grad
    if grad_outputs is None:
        grad_outputs = (None,) * len(outputs)
    pairs = [(o, g) for o, g in zip(outputs, grad_outputs) if o is not None and o.requires_grad]
    if not pairs:
        return (None,) * len(inputs)
    return grad(tuple(p[0] for p in pairs), inputs, tuple(p[1] for p in pairs),
                allow_unused=True, create_graph=create_graph, retain_graph=retain_graph)


_FILL_MSG = {
    "back": "The output of the user-provided function is independent of input {i}. This is not "
            "allowed in strict mode.",
    "back_trick": "The gradient with respect to the input is independent of entry {i} in the "
                  "grad_outputs when using the double backward trick to compute forward mode "
                  "gradients. This is not allowed in strict mode.",
    "double_back": "The jacobian of the user-provided function is independent of input {i}. "
                   "This is not allowed in strict mode.",
    "double_back_trick": "The hessian of the user-provided function is independent of entry {i} "
                         "in the grad_jacobian. This is not allowed in strict mode as it "
                         "prevents from using the double backward trick to replace forward mode "
                         "AD.",
}


def _zeros_like(t):
    return _tensor_cls()._wrap(np.zeros_like(t._data))


def _fill_in_zeros(grads, refs, strict, create_graph, stage):
    res = []
    for i, (g, ref) in enumerate(zip(grads, refs)):
        if g is None:
            if strict:
                raise RuntimeError(_FILL_MSG[stage].format(i=i))
            g = _zeros_like(ref)
        elif strict and create_graph and not g.requires_grad:
            what = "hessian" if "double" in stage else "jacobian"
            raise RuntimeError(f"The {what} of the user-provided function is independent of "
                               f"input {i}. This is not allowed in strict mode when "
                               f"create_graph=True.")
        res.append(g)
    return tuple(res)


def _single_element_v(inputs_or_outputs, what):
    if len(inputs_or_outputs) != 1 or inputs_or_outputs[0].numel() != 1:
        raise RuntimeError(f"The vector v can only be None if the {what} returns a single "
                           f"Tensor with a single element." if what == "user-provided function"
                           else f"The vector v can only be None if the {what} is a single "
                           f"Tensor with a single element.")


def vjp(func, inputs, v=None, create_graph=False, strict=False):
    """Vector-Jacobian product of `func` at `inputs` with `v` (the shape of the outputs).

    Returns:
        (func_output, vjp): vjp has the structure of `inputs`.

    Example:
        >>> import llgrad as lg
        >>> out, g = lg.autograd.functional.vjp(lambda x: x ** 2, lg.ones(3), lg.ones(3))
        >>> g
        tensor([2., 2., 2.])
    """
    with enable_grad():
        is_inputs_tuple, inputs = _as_tuple(inputs, "inputs", "vjp")
        inputs = _grad_preprocess(inputs, create_graph=create_graph, need_graph=True)
        outputs = func(*inputs)
        is_outputs_tuple, outputs = _as_tuple(outputs, "outputs of the user-provided function",
                                              "vjp")
        _check_requires_grad(outputs, "outputs", strict=strict)
        if v is not None:
            _, v = _as_tuple(v, "v", "vjp")
            v = _grad_preprocess(v, create_graph=create_graph, need_graph=False)
            _validate_v(v, outputs, is_outputs_tuple)
        else:
            _single_element_v(outputs, "user-provided function")
    with set_grad_enabled(True if create_graph else STATE.grad_enabled):
        grad_res = _autograd_grad(outputs, inputs, v, create_graph=create_graph)
        res = _fill_in_zeros(grad_res, inputs, strict, create_graph, "back")
    outputs = _grad_postprocess(outputs, create_graph)
    res = _grad_postprocess(res, create_graph)
    return (_tuple_postprocess(outputs, is_outputs_tuple),
            _tuple_postprocess(res, is_inputs_tuple))


def jvp(func, inputs, v=None, create_graph=False, strict=False):
    """Jacobian-vector product of `func` at `inputs` with `v` (the shape of the inputs).

    Computed by forward mode (dual tensors, forward_ad); with `create_graph` or `strict`, by
    the double-vjp trick (u -> J^T u is linear, so differentiating it with respect to u
    gives J v), which keeps the result differentiable and reports unused inputs.

    Returns:
        (func_output, jvp): jvp has the structure of the outputs.

    Example:
        >>> import llgrad as lg
        >>> out, t = lg.autograd.functional.jvp(lambda x: x ** 2, lg.ones(2), lg.ones(2))
        >>> t
        tensor([2., 2.])
    """
    with enable_grad():
        is_inputs_tuple, inputs = _as_tuple(inputs, "inputs", "jvp")
        inputs = _grad_preprocess(inputs, create_graph=create_graph, need_graph=True)
        if v is not None:
            _, v = _as_tuple(v, "v", "jvp")
            v = _grad_preprocess(v, create_graph=create_graph, need_graph=False)
            _validate_v(v, inputs, is_inputs_tuple)
            if not create_graph and not strict:
                return _forward_jvp(func, inputs, v)
        else:
            _single_element_v(inputs, "input to the user-provided function")
        outputs = func(*inputs)
        is_outputs_tuple, outputs = _as_tuple(outputs, "outputs of the user-provided function",
                                              "jvp")
        _check_requires_grad(outputs, "outputs", strict=strict)
        # The backward is linear in grad_outputs, so their value does not matter.
        grad_outputs = tuple(_zeros_like(o).requires_grad_(True) for o in outputs)
        grad_inputs = _autograd_grad(outputs, inputs, grad_outputs, create_graph=True)
        _check_requires_grad(grad_inputs, "grad_inputs", strict=strict)
    with set_grad_enabled(True if create_graph else STATE.grad_enabled):
        grad_res = _autograd_grad(grad_inputs, grad_outputs, v, create_graph=create_graph)
        res = _fill_in_zeros(grad_res, outputs, strict, create_graph, "back_trick")
    outputs = _grad_postprocess(outputs, create_graph)
    res = _grad_postprocess(res, create_graph)
    return (_tuple_postprocess(outputs, is_outputs_tuple),
            _tuple_postprocess(res, is_outputs_tuple))


def _forward_jvp(func, inputs, v):
    from llgrad.runtime.autograd import forward_ad as fwad
    with fwad.dual_level():
        outputs = func(*(fwad.make_dual(x.detach(), t) for x, t in zip(inputs, v)))
        is_outputs_tuple, outputs = _as_tuple(outputs, "outputs of the user-provided function",
                                              "jvp")
        parts = [fwad.unpack_dual(o) for o in outputs]
    outs = tuple(p.primal.detach() for p in parts)
    res = tuple(_zeros_like(o) if p.tangent is None else p.tangent.detach()
                for p, o in zip(parts, outs))
    return _tuple_postprocess(outs, is_outputs_tuple), _tuple_postprocess(res, is_outputs_tuple)


def jacobian(func, inputs, create_graph=False, strict=False, vectorize=False,
             strategy="reverse-mode"):
    """The Jacobian of `func` at `inputs`.

    Returns:
        For one input and one output, a Tensor of shape `output.shape + input.shape`. With a
        tuple of inputs (or outputs), a tuple with one entry per input (or output); with both,
        `result[i][j]` is the Jacobian of output i with respect to input j.

    vectorize=True computes all rows in one batched backward where that is provably the same
    as one backward per row, and otherwise falls back to the row loop with a warning.
    See Note [Vectorized jacobian] in runtime/autograd/vectorized.py.

    Example:
        >>> import llgrad as lg
        >>> lg.autograd.functional.jacobian(lambda x: 2 * x, lg.ones(2))
        tensor([[2., 0.],
                [0., 2.]])
    """
    if strategy != "reverse-mode":
        raise NotImplementedError(f"jacobian: strategy={strategy!r} is not supported; llgrad "
                                  f"computes Jacobians in reverse mode (strategy='reverse-mode')")
    with enable_grad():
        is_inputs_tuple, inputs = _as_tuple(inputs, "inputs", "jacobian")
        inputs = _grad_preprocess(inputs, create_graph=create_graph, need_graph=True)
        outputs = func(*inputs)
        is_outputs_tuple, outputs = _as_tuple(outputs, "outputs of the user-provided function",
                                              "jacobian")
        _check_requires_grad(outputs, "outputs", strict=strict)
        if vectorize:
            if strict:
                raise RuntimeError("llgrad.autograd.functional.jacobian: `strict=True` and "
                                   "`vectorized=True` are not supported together. Please "
                                   "either set `strict=False` or `vectorize=False`.")
            jac = vectorized_jacobian(func, inputs, outputs, create_graph)
            if jac is not None:
                jac = _grad_postprocess(jac, create_graph)
                return _tuple_postprocess(jac, (is_outputs_tuple, is_inputs_tuple))
        jac = tuple(_jacobian_rows(i, out, inputs, create_graph, strict)
                    for i, out in enumerate(outputs))
        jac = _grad_postprocess(jac, create_graph)
        return _tuple_postprocess(jac, (is_outputs_tuple, is_inputs_tuple))


def _jacobian_rows(i, out, inputs, create_graph, strict):
    """One vjp per element of `out` (a one-hot grad_output), stacked into out.shape + in.shape."""
    from llgrad.runtime import ops
    Tensor = _tensor_cls()
    rows = [[] for _ in inputs]
    n = out.numel()
    for k in range(n):
        onehot = np.zeros(n, out._data.dtype)
        onehot[k] = 1
        vj = _autograd_grad((out,), inputs, (Tensor._wrap(onehot.reshape(out.shape)),),
                            retain_graph=True, create_graph=create_graph)
        for j, (g, inp) in enumerate(zip(vj, inputs)):
            if g is None:
                if strict:
                    raise RuntimeError(f"Output {i} of the user-provided function is "
                                       f"independent of input {j}. This is not allowed in "
                                       f"strict mode.")
                g = _zeros_like(inp)
            elif strict and create_graph and not g.requires_grad:
                raise RuntimeError(f"The jacobian of the user-provided function is independent "
                                   f"of input {j}. This is not allowed in strict mode when "
                                   f"create_graph=True.")
            rows[j].append(g)
    res = []
    for r, inp in zip(rows, inputs):
        if not r:
            res.append(Tensor._wrap(np.zeros(tuple(out.shape) + tuple(inp.shape),
                                             inp._data.dtype)))
        else:
            res.append(ops.reshape(ops.stack(r, 0), tuple(out.shape) + tuple(inp.shape)))
    return tuple(res)


def hessian(func, inputs, create_graph=False, strict=False, vectorize=False,
            outer_jacobian_strategy="reverse-mode"):
    """The Hessian of a scalar function `func` at `inputs`.

    Returns:
        For one input, a Tensor of shape `input.shape + input.shape`; for a tuple of inputs,
        `result[i][j]` is the block of second derivatives w.r.t. inputs i and j.

    Example:
        >>> import llgrad as lg
        >>> lg.autograd.functional.hessian(lambda x: (x ** 2).sum(), lg.ones(2))
        tensor([[2., 0.],
                [0., 2.]])
    """
    Tensor = _tensor_cls()
    is_inputs_tuple, inputs = _as_tuple(inputs, "inputs", "hessian")
    if outer_jacobian_strategy != "reverse-mode":
        raise NotImplementedError(f"hessian: outer_jacobian_strategy="
                                  f"{outer_jacobian_strategy!r} is not supported; use "
                                  f"'reverse-mode'")

    def ensure_single_output_function(*inp):
        out = func(*inp)
        is_out_tuple, t_out = _as_tuple(out, "outputs of the user-provided function",
                                        "hessian")
        _check_requires_grad(t_out, "outputs", strict=strict)
        if is_out_tuple or not isinstance(out, Tensor):
            raise RuntimeError("The function given to hessian should return a single Tensor")
        if out.numel() != 1:
            raise RuntimeError(f"The Tensor returned by the function given to hessian should "
                               f"contain a single element (it has shape {list(out.shape)})")
        return out.reshape(())

    def jac_func(*inp):
        if getattr(BATCHED, "on", False):  # batched call: per-example gradients in one vjp
            out = func(*inp)
            n = inp[0].shape[0]
            if not isinstance(out, Tensor) or out.numel() != n:
                raise RuntimeError("not batched")
            g = _autograd_grad((out,), inp, (Tensor._wrap(np.ones_like(out._data)),),
                               create_graph=True)
            return tuple(_zeros_like(i) if gi is None else gi for gi, i in zip(g, inp))
        jac = jacobian(ensure_single_output_function, inp, create_graph=True)
        _check_requires_grad(jac, "jacobian", strict=strict)
        return jac

    res = jacobian(jac_func, inputs, create_graph=create_graph, strict=strict,
                   vectorize=vectorize)
    return _tuple_postprocess(res, (is_inputs_tuple, is_inputs_tuple))


def _scalar_output(outputs, name):
    Tensor = _tensor_cls()
    if len(outputs) != 1 or not isinstance(outputs[0], Tensor):
        raise RuntimeError(f"The function given to {name} should return a single Tensor")
    if outputs[0].numel() != 1:
        raise RuntimeError(f"The Tensor returned by the function given to {name} should "
                           f"contain a single element")


def vhp(func, inputs, v=None, create_graph=False, strict=False):
    """Vector-Hessian product v^T H of a scalar function `func` at `inputs`.

    Returns:
        (func_output, vhp): vhp has the structure of `inputs`.

    Example:
        >>> import llgrad as lg
        >>> _, r = lg.autograd.functional.vhp(lambda x: (x ** 3).sum(), lg.ones(2), lg.ones(2))
        >>> r
        tensor([6., 6.])
    """
    return _second_order(func, inputs, v, create_graph, strict, "vhp")


def hvp(func, inputs, v=None, create_graph=False, strict=False):
    """Hessian-vector product H v of a scalar function `func` at `inputs` (double-vjp trick).

    Returns:
        (func_output, hvp): hvp has the structure of `inputs`.

    Example:
        >>> import llgrad as lg
        >>> _, r = lg.autograd.functional.hvp(lambda x: (x ** 3).sum(), lg.ones(2), lg.ones(2))
        >>> r
        tensor([6., 6.])
    """
    return _second_order(func, inputs, v, create_graph, strict, "hvp")


def _second_order(func, inputs, v, create_graph, strict, name):
    with enable_grad():
        is_inputs_tuple, inputs = _as_tuple(inputs, "inputs", name)
        inputs = _grad_preprocess(inputs, create_graph=create_graph, need_graph=True)
        if v is not None:
            _, v = _as_tuple(v, "v", name)
            v = _grad_preprocess(v, create_graph=create_graph, need_graph=False)
            _validate_v(v, inputs, is_inputs_tuple)
        else:
            _single_element_v(inputs, "input to the user-provided function")
        outputs = func(*inputs)
        is_outputs_tuple, outputs = _as_tuple(outputs, "outputs of the user-provided function",
                                              name)
        _check_requires_grad(outputs, "outputs", strict=strict)
        if is_outputs_tuple:
            raise RuntimeError(f"The function given to {name} should return a single Tensor")
        _scalar_output(outputs, name)
        jac = _autograd_grad(outputs, inputs, create_graph=True)
        _check_requires_grad(jac, "jacobian", strict=strict)
        if name == "hvp":
            grad_jac = tuple(_zeros_like(i).requires_grad_(True) for i in inputs)
            double_back = _autograd_grad(jac, inputs, grad_jac, create_graph=True)
            _check_requires_grad(jac, "hessian", strict=strict)
    with set_grad_enabled(True if create_graph else STATE.grad_enabled):
        if name == "hvp":
            grad_res = _autograd_grad(double_back, grad_jac, v, create_graph=create_graph)
            res = _fill_in_zeros(grad_res, inputs, strict, create_graph, "double_back_trick")
        else:
            grad_res = _autograd_grad(jac, inputs, v, create_graph=create_graph)
            res = _fill_in_zeros(grad_res, inputs, strict, create_graph, "double_back")
    outputs = _grad_postprocess(outputs, create_graph)
    res = _grad_postprocess(res, create_graph)
    return (_tuple_postprocess(outputs, is_outputs_tuple),
            _tuple_postprocess(res, is_inputs_tuple))
