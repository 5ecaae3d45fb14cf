"""gradcheck / gradgradcheck: compare the analytical Jacobian (from vjps through the engine)
with central finite differences, as torch.autograd.gradcheck does.

Inputs are perturbed in place and restored bit for bit; nothing here changes the graph.
See Note [Jacobian layout] and Note [Fast mode].
"""
from __future__ import annotations

import warnings

import numpy as np

from llgrad.runtime.autograd.grad_mode import enable_grad
from llgrad.runtime.errors import AutogradError

__all__ = ["gradcheck", "gradgradcheck", "GradcheckError"]


class GradcheckError(AutogradError):
    """Raised by gradcheck / gradgradcheck when a check fails (a RuntimeError)."""


# Note [Jacobian layout]
# As in PyTorch, the Jacobian of output i with respect to input j is stored input-major: an
# (input numel, output numel) matrix whose row k is d out_i / d in_j[k]. The report prints it in
# that layout and names elements by their multi-index in the input and output tensors.


def _as_tuple(x):
    return tuple(x) if isinstance(x, (tuple, list)) else (x,)


def _is_tensor(x) -> bool:
    from llgrad.runtime.tensor import Tensor
    return isinstance(x, Tensor)


def _diff_outputs(out):
    return tuple(o for o in _as_tuple(out) if _is_tensor(o) and o.requires_grad)


def _float_outputs(out):
    return tuple(o for o in _as_tuple(out) if _is_tensor(o) and o._data.dtype.kind == "f")


def _check_inputs(inputs):
    diff = [i for i, x in enumerate(inputs) if _is_tensor(x) and x.requires_grad]
    if not diff:
        raise ValueError("gradcheck expects at least one input tensor to require gradient, but "
                         "none of the them have requires_grad=True.\n  How to fix: create the "
                         "inputs with requires_grad=True (e.g. lg.randn(3, dtype=lg.float64, "
                         "requires_grad=True))")
    low = []
    for i in diff:
        dt = inputs[i]._data.dtype
        if dt.kind != "f":
            raise ValueError(f"gradcheck: input {i} requires grad but has dtype {dt}")
        if dt != np.float64:
            low.append(i)
            warnings.warn(
                f"Input #{i} requires gradient and is not a double precision floating point "
                f"(it is {inputs[i].dtype}). This check will likely fail if all the inputs are "
                f"not of double precision floating point: finite differences in float32 carry a "
                f"rounding error of about 1e-7/eps. Use x.double() for gradcheck.",
                UserWarning, stacklevel=3)
    return diff, low


def _evaluate(func, inputs):
    # Grad mode stays on (as in PyTorch): gradgradcheck's function calls autograd.grad.
    with enable_grad():
        return tuple(np.array(o._data, dtype=np.float64) for o in _float_outputs(func(*inputs)))


def _numerical_columns(func, inputs, j, eps):
    """Yield (k, [d out_i / d in_j[k] for each float output i]) by central differences."""
    x = inputs[j]
    if not x._data.flags.writeable:
        x._data = x._data.copy()
    flat = x._data.reshape(-1)
    if not np.shares_memory(flat, x._data):
        raise GradcheckError(f"gradcheck: input {j} is not contiguous; pass x.clone()")
    for k in range(flat.size):
        orig = flat[k].copy()
        flat[k] = orig + eps
        plus = _evaluate(func, inputs)
        flat[k] = orig - eps
        minus = _evaluate(func, inputs)
        flat[k] = orig
        yield k, [((p - m) / (2 * eps)).reshape(-1) for p, m in zip(plus, minus)]


def _numerical_jacobian(func, inputs, diff, n_out_sizes, eps):
    """jac[i][j]: (numel in_j, numel out_i) numerical Jacobian (see Note [Jacobian layout])."""
    jac = [[None] * len(inputs) for _ in n_out_sizes]
    for j in diff:
        n = inputs[j]._data.size
        for i, m in enumerate(n_out_sizes):
            jac[i][j] = np.zeros((n, m))
        for k, cols in _numerical_columns(func, inputs, j, eps):
            for i, c in enumerate(cols):
                jac[i][j][k] = c
    return jac


def _vjp(outputs, diff_inputs, i, g):
    """Gradients of <g, outputs[i]> w.r.t. diff_inputs, as float64 arrays (zeros if unused)."""
    from llgrad.runtime.autograd import grad
    from llgrad.runtime.tensor import Tensor
    # Every output gets a gradient (zeros but for output i), so None grad_outputs are only
    # exercised by the undefined-grad check, which reports them clearly.
    gos = tuple(Tensor._wrap(g.astype(o._data.dtype)) if k == i else
                Tensor._wrap(np.zeros_like(o._data)) for k, o in enumerate(outputs))
    grads = grad(outputs, diff_inputs, gos, retain_graph=True, allow_unused=True)
    res = []
    for gi, x in zip(grads, diff_inputs):
        if gi is None:
            res.append(np.zeros(x._data.size))
            continue
        if gi._data.shape != x._data.shape:
            raise GradcheckError(f"Gradient has shape mismatch: the gradient for an input of "
                                 f"shape {list(x._data.shape)} has shape "
                                 f"{list(gi._data.shape)}")
        res.append(np.array(gi._data, dtype=np.float64).reshape(-1))
    return res


def _analytical_jacobian(outputs, inputs, diff, nondet_tol):
    diff_inputs = tuple(inputs[j] for j in diff)
    jac = [[None] * len(inputs) for _ in outputs]
    for i, out in enumerate(outputs):
        m = out._data.size
        for j in diff:
            jac[i][j] = np.zeros((inputs[j]._data.size, m))
        for c in range(m):
            g = np.zeros(m)
            g[c] = 1.0
            g = g.reshape(out._data.shape)
            rows = _vjp(outputs, diff_inputs, i, g)
            again = _vjp(outputs, diff_inputs, i, g)
            for j, r, r2 in zip(diff, rows, again):
                if np.max(np.abs(r - r2), initial=0.0) > nondet_tol:
                    raise GradcheckError(
                        f"Backward is not reentrant, i.e., running backward with same input and "
                        f"grad_output multiple times gives different values, although "
                        f"analytical gradient matches numerical gradient. The tolerance for "
                        f"nondeterminism was {nondet_tol}.",
                        fix="make backward deterministic, or pass nondet_tol=")
                jac[i][j][:, c] = r
    return jac


def _fmt(a: np.ndarray) -> str:
    return np.array2string(a, precision=6, threshold=64, edgeitems=3, max_line_width=100,
                           suppress_small=False)


def _index(shape, flat):
    return tuple(int(v) for v in np.unravel_index(flat, shape)) if shape else ()


def _mismatch(i, j, num, ana, inputs, outputs, eps, low, fast=""):
    diff = np.abs(num - ana)
    k, c = np.unravel_index(int(np.argmax(diff)), diff.shape)
    in_idx, out_idx = _index(inputs[j]._data.shape, k), _index(outputs[i]._data.shape, c)
    msg = (f"Jacobian mismatch for output {i} with respect to input {j}{fast},\n"
           f"numerical:{_fmt(num)}\nanalytical:{_fmt(ana)}\n"
           f"  (rows: elements of input {j} {list(inputs[j]._data.shape)}, columns: elements "
           f"of output {i} {list(outputs[i]._data.shape)})\n"
           f"  largest difference {diff[k, c]:.6g} at d output[{i}]{list(out_idx)} / "
           f"d input[{j}]{list(in_idx)}: numerical {num[k, c]:.8g}, analytical "
           f"{ana[k, c]:.8g}")
    if low:
        names = ", ".join(f"{t} ({inputs[t].dtype})" for t in low)
        msg += (f"\n  Note: input(s) {names} are not float64. Central differences in float32 "
                f"have a rounding error of about 1e-7/eps = {1.2e-7 / eps:.1e} (relative), so at "
                f"eps={eps:g} this check can fail from float32 rounding alone.")
        fix = "convert the inputs with .double() (or use a larger eps, e.g. 1e-3, for float32)"
    else:
        fix = ("check the backward of the function (a custom Function's backward or a VJP "
               "rule) for this input; if the function is not smooth at this point, move the "
               "inputs away from the kink")
    return GradcheckError(msg, fix=fix)


def _close(a, n, atol, rtol) -> bool:
    return bool(np.all(np.abs(a - n) <= atol + rtol * np.abs(n)))


# Note [Fast mode]
# fast_mode=True checks v^T J u instead of J: u is a random unit vector over the inputs and v
# one over the outputs (uniform entries, as in PyTorch). Per input j one jvp by central
# differences along u_j (two function evaluations, all outputs at once), per output i one vjp
# with v_i; the scalars v_i . (J_ij u_j) are compared with atol scaled by sum(u_j) * sum(v_i)
# (an all-atol error matrix seen through the projections). A failure is reported with the
# full (slow-mode) Jacobians of the failing pair.

def _fast_check(func, inputs, outputs, req, diff, eps, atol, rtol, rng):
    diff_inputs = tuple(inputs[j] for j in diff)
    us = {}
    for j in diff:
        u = rng.uniform(0, 1, inputs[j]._data.size)
        us[j] = u / np.linalg.norm(u) if u.size else u
    vs = []
    for o in outputs:
        v = rng.uniform(0, 1, o._data.size)
        vs.append(v / np.linalg.norm(v) if v.size else v)
    # numerical: J u_j per input j (all outputs at once)
    jvps = {}
    for j in diff:
        x = inputs[j]
        if not x._data.flags.writeable:
            x._data = x._data.copy()
        orig = x._data.copy()
        step = (eps * us[j]).reshape(x._data.shape)
        x._data[...] = orig + step
        plus = _evaluate(func, inputs)
        x._data[...] = orig - step
        minus = _evaluate(func, inputs)
        x._data[...] = orig
        jvps[j] = [((p - m) / (2 * eps)).reshape(-1) for p, m in zip(plus, minus)]
    for i, out in enumerate(outputs):
        rows = _vjp(outputs, diff_inputs, i, vs[i].reshape(out._data.shape))
        for j, r in zip(diff, rows):
            ana = float(r @ us[j])
            num = float(vs[i] @ jvps[j][req[i]])
            tol = atol * float(us[j].sum()) * float(vs[i].sum())
            if not abs(ana - num) <= tol + rtol * abs(num):
                return i, j, num, ana
    return None


def _undefined_grad_check(func, inputs, diff):
    from llgrad.runtime.autograd.engine import run_backward
    from llgrad.runtime.tensor import Tensor
    diff_inputs = tuple(inputs[j] for j in diff)

    def check(outs, grads):
        try:
            with enable_grad():
                res = run_backward(outs, grads, False, False, inputs=diff_inputs,
                                   accumulate=False, allow_unused=True)
        except Exception as e:
            raise GradcheckError(
                "Expected backward function to handle undefined output grads (a None gradient "
                f"for some outputs), but it raised {type(e).__name__}: {e}",
                fix="in a custom Function with ctx.set_materialize_grads(False), treat a None "
                "grad_output as zeros; or pass check_undefined_grad=False") from e
        for k, g in zip(diff, res):
            if g is not None and np.any(g._data != 0):
                raise GradcheckError(
                    f"Expected all input grads to be undefined or zero when all output grads "
                    f"are undefined or zero, but the gradient for input {k} is nonzero.",
                    fix="return None or zeros from backward when grad_output is None")

    with enable_grad():
        outs = _diff_outputs(func(*inputs))
    if not outs:
        return
    check(outs, [None] * len(outs))
    if len(outs) > 1:
        for u in range(len(outs)):
            with enable_grad():
                outs = _diff_outputs(func(*inputs))
            check(outs, [None if k == u else Tensor._wrap(np.zeros_like(o._data))
                         for k, o in enumerate(outs)])


def gradcheck(func, inputs, *, eps: float = 1e-6, atol: float = 1e-5, rtol: float = 1e-3,
              raise_exception: bool = True, nondet_tol: float = 0.0,
              check_undefined_grad: bool = True, check_grad_dtypes: bool = False,
              check_batched_grad: bool = False, check_backward_ad: bool = True,
              fast_mode: bool = False, masked=None) -> bool:
    """Check the gradients computed by autograd against central finite differences.

    For every input that requires grad and every floating-point output, the numerical Jacobian
    ((f(x + eps e_k) - f(x - eps e_k)) / 2 eps, one column per input element) is compared with
    the analytical one (one vjp per output element through `llgrad.autograd.grad`) using
    `|analytical - numerical| <= atol + rtol * |numerical|`. Inputs should be float64: other
    float dtypes give a warning, since finite differences in float32 are unreliable at small eps.

    Args:
        func: a function of `inputs` returning a Tensor or a tuple of Tensors (custom
            `Function.apply` works; non-tensor arguments are passed through unchanged).
        inputs: a Tensor or a tuple of arguments; tensors with requires_grad=True are checked.
        eps: finite-difference step.
        atol, rtol: absolute and relative tolerance.
        raise_exception: raise `GradcheckError` on failure (default) or return False.
        nondet_tol: tolerance for differences between two backward runs with the same input.
        check_undefined_grad: also check that backward handles undefined (None) output grads.
        fast_mode: compare random projections v^T J u instead of full Jacobians (one jvp by
            differences per input and one vjp per output). See Note [Fast mode].

    Returns:
        True if all checks pass (False on failure when raise_exception=False).

    Raises:
        GradcheckError: (a RuntimeError) naming the output/input pair, with the numerical and
            analytical Jacobians, the largest difference and where it is.

    Example:
        >>> import llgrad as lg
        >>> x = lg.randn(3, dtype=lg.float64, requires_grad=True)
        >>> lg.autograd.gradcheck(lg.sin, (x,))
        True
    """
    inputs = _as_tuple(inputs)
    try:
        diff, low = _check_inputs(inputs)
        with enable_grad():
            outputs = _float_outputs(func(*inputs))
        sizes = [o._data.size for o in outputs]
        req = [k for k, o in enumerate(outputs) if o.requires_grad]
        routs = tuple(outputs[k] for k in req)
        num = None
        if len(routs) < len(outputs) or (check_backward_ad and routs and not fast_mode):
            num = _numerical_jacobian(func, inputs, diff, sizes, eps)
        for i, o in enumerate(outputs):
            if not o.requires_grad:  # its Jacobian must be zero numerically
                for j in diff:
                    if not np.allclose(num[i][j], 0.0, atol=atol):
                        raise GradcheckError(
                            f"Numerical gradient for function expected to be zero: output {i} "
                            f"does not require grad, yet it changes with input {j}",
                            fix="the function cuts the graph (detach(), .numpy(), no_grad, "
                            "float()/item()) on the way to this output")
        if check_backward_ad and routs:
            if fast_mode:
                from llgrad.runtime.creation import _rng
                bad = _fast_check(func, inputs, routs, req, diff, eps, atol, rtol, _rng())
                if bad is not None:
                    i, j, num_s, ana_s = bad
                    num = _numerical_jacobian(func, inputs, diff, sizes, eps)
                    ana = _analytical_jacobian(routs, inputs, diff, nondet_tol)
                    raise _mismatch(req[i], j, num[req[i]][j], ana[i][j], inputs, outputs, eps,
                                    low, fast=f" (fast mode: v^T J u numerical {num_s:.8g} vs "
                                    f"analytical {ana_s:.8g}; full Jacobians below)")
            else:
                ana = _analytical_jacobian(routs, inputs, diff, nondet_tol)
                for i in range(len(routs)):
                    for j in diff:
                        if not _close(ana[i][j], num[req[i]][j], atol, rtol):
                            raise _mismatch(req[i], j, num[req[i]][j], ana[i][j], inputs,
                                            outputs, eps, low)
            if check_grad_dtypes:
                from llgrad.runtime.autograd import grad
                with enable_grad():
                    outs = _diff_outputs(func(*inputs))
                gs = grad(outs, tuple(inputs[j] for j in diff),
                          tuple(_ones_like(o) for o in outs), allow_unused=True)
                for j, g in zip(diff, gs):
                    if g is not None and g._data.dtype != inputs[j]._data.dtype:
                        raise GradcheckError(f"Gradient has dtype mismatch: input {j} is "
                                             f"{inputs[j].dtype}, its gradient {g.dtype}")
        if check_undefined_grad and check_backward_ad:
            _undefined_grad_check(func, inputs, diff)
    except GradcheckError:
        if raise_exception:
            raise
        return False
    return True


def _ones_like(t):
    from llgrad.runtime.tensor import Tensor
    return Tensor._wrap(np.ones_like(t._data))


def gradgradcheck(func, inputs, grad_outputs=None, *, eps: float = 1e-6, atol: float = 1e-5,
                  rtol: float = 1e-3, gen_non_contig_grad_outputs: bool = False,
                  raise_exception: bool = True, nondet_tol: float = 0.0,
                  check_undefined_grad: bool = True, check_grad_dtypes: bool = False,
                  check_batched_grad: bool = False, fast_mode: bool = False,
                  masked=None) -> bool:
    """Check second-order gradients: gradcheck of (inputs, grad_outputs) -> vjp(func).

    The gradients of `func`'s outputs (weighted by `grad_outputs`, random in [-1, 1) with the
    outputs' shapes and dtypes when None) w.r.t. the inputs that require grad are computed with
    `create_graph=True` and checked with `gradcheck` against finite differences, with respect to
    both the inputs and the grad_outputs.

    Example:
        >>> import llgrad as lg
        >>> x = lg.randn(3, dtype=lg.float64, requires_grad=True)
        >>> lg.autograd.gradgradcheck(lambda x: x ** 3, (x,))
        True
    """
    from llgrad.runtime.autograd import grad
    from llgrad.runtime.creation import _rng
    from llgrad.runtime.tensor import Tensor
    inputs = _as_tuple(inputs)
    if grad_outputs is None:
        with enable_grad():
            outs = _diff_outputs(func(*inputs))
        grad_outputs = tuple(
            Tensor._wrap(_rng().uniform(-1, 1, o._data.shape).astype(o._data.dtype))
            .requires_grad_(True) for o in outs)
    else:
        grad_outputs = _as_tuple(grad_outputs)
    n = len(grad_outputs)
    diff_idx = [i for i, x in enumerate(inputs) if _is_tensor(x) and x.requires_grad]

    def new_func(*args):
        ins, gos = args[:-n] if n else args, args[-n:] if n else ()
        outs = _diff_outputs(func(*ins))
        gi = grad(outs, tuple(ins[i] for i in diff_idx), gos, create_graph=True,
                  allow_unused=True)
        return tuple(g for g in gi if g is not None)

    return gradcheck(new_func, inputs + tuple(grad_outputs), eps=eps, atol=atol, rtol=rtol,
                     raise_exception=raise_exception, nondet_tol=nondet_tol,
                     check_undefined_grad=check_undefined_grad,
                     check_grad_dtypes=check_grad_dtypes, fast_mode=fast_mode)
