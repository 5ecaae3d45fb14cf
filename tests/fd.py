"""Central finite differences, the gradient oracle of the runtime tests.

A test utility until llgrad.autograd.gradcheck lands (issue 2); it compares the vector-Jacobian
product that llgrad computes with the directional derivatives of the numpy reference.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

# Tolerances per dtype for comparing a value with its numpy reference: (rtol, atol).
TOL = {np.dtype(np.float64): (1e-10, 1e-12), np.dtype(np.float32): (1e-5, 1e-6)}
# Tolerances for an analytic gradient against central differences in float64.
FD_TOL = (1e-6, 1e-8)


def numerical_vjp(f: Callable[..., np.ndarray], args: Sequence[np.ndarray], v: np.ndarray,
                  wrt: Sequence[int], eps: float = 1e-6) -> list[np.ndarray]:
    """d/d args[i] of sum(v * f(*args)) for i in `wrt`, by central differences in float64."""
    args = [np.array(a, dtype=np.float64) if i in wrt else a for i, a in enumerate(args)]
    grads = []
    for i in wrt:
        x = args[i]
        g = np.zeros_like(x)
        flat, gflat = x.reshape(-1), g.reshape(-1)
        for k in range(flat.size):
            old = flat[k]
            flat[k] = old + eps
            hi = np.sum(v * np.asarray(f(*args), dtype=np.float64))
            flat[k] = old - eps
            lo = np.sum(v * np.asarray(f(*args), dtype=np.float64))
            flat[k] = old
            gflat[k] = (hi - lo) / (2 * eps)
        grads.append(g)
    return grads


def assert_close(actual, expected, rtol: float, atol: float, what: str = "") -> None:
    actual, expected = np.asarray(actual), np.asarray(expected)
    assert actual.shape == expected.shape, f"{what}: shape {actual.shape} != {expected.shape}"
    np.testing.assert_allclose(actual, expected, rtol=rtol, atol=atol, err_msg=what)


def numerical_grad_tree(f: Callable, args: Sequence, argnum: int, eps: float = 1e-6):
    """d f(*args) / d args[argnum] by central differences, with the structure of that argument
    (a pytree: llgrad.runtime.pytree); its array leaves get arrays, Python floats floats,
    static entries None."""
    from llgrad.runtime import pytree
    leaves, struct = pytree.flatten(args[argnum])

    def at(new_leaves):
        full = list(args)
        full[argnum] = pytree.unflatten(struct, new_leaves)
        return float(f(*full))

    grads = []
    for k, leaf in enumerate(leaves):
        if isinstance(leaf, float):
            hi, lo = list(leaves), list(leaves)
            hi[k], lo[k] = leaf + eps, leaf - eps
            grads.append((at(hi) - at(lo)) / (2 * eps))
        elif isinstance(leaf, np.ndarray) and leaf.dtype.kind == "f":
            g = np.zeros_like(leaf, dtype=np.float64)
            for i in range(leaf.size):
                hi, lo = list(leaves), list(leaves)
                hi[k], lo[k] = leaf.astype(np.float64), leaf.astype(np.float64)
                hi[k].flat[i] += eps
                lo[k].flat[i] -= eps
                g.flat[i] = (at(hi) - at(lo)) / (2 * eps)
            grads.append(g)
        elif isinstance(leaf, np.ndarray):
            grads.append(np.zeros_like(leaf))  # an int or bool array: a zero gradient
        else:
            grads.append(None)  # a static entry (int, str, ...): no gradient
    return pytree.unflatten(struct, grads)
