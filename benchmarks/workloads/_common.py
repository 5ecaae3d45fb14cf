"""Implementation factories shared by the workloads.

Most workloads are written once as a plain numpy function (the way a user writes it for
``@llgrad.differentiate``); that one function is also the float64 reference forward, and the
factories below derive the HIPS autograd and JAX versions from the same source (by rebinding
``np``) where that is the idiomatic way to use those systems. Hand-written PyTorch, JAX and
Numba versions live beside each workload where the idiom differs (``lax.scan``, per-step tensor
ops, explicit loops).

Each factory returns an :class:`~benchmarks.harness.Impl` whose ``setup(inputs)`` returns the
zero-argument callable that the harness times.
"""

from __future__ import annotations

import inspect

import numpy as np

from ..harness import Impl, need, rebind


def positional(fn, inputs: dict) -> list:
    """The values of ``inputs`` in the order of ``fn``'s parameters."""
    return [inputs[p] for p in inspect.signature(fn).parameters]


# ---------------------------------------------------------------------------- llgrad ----

def llgrad_compiled(fn, wrt, name: str = "llgrad", note: str = "") -> Impl:
    """THE llgrad SLOT for compiled workloads: ``llgrad.differentiate(fn, wrt=...)``.

    ``fn`` is the plain numpy function exactly as a user writes it; the first call traces and
    compiles (that is the "first call" column), later calls run the cached native code.
    """
    wrt = tuple(wrt)

    def setup(inputs):
        llgrad = need("llgrad", "differentiate")
        f = llgrad.differentiate(fn, wrt=wrt)
        args = positional(fn, inputs)
        return lambda: f.value_and_grad(*args)

    return Impl(name, setup, "v+g", note)


def llgrad_forward(fn, name: str = "llgrad", note: str = "") -> Impl:
    """llgrad's compiled forward, ``llgrad.differentiate(fn)(*args)``: the value only (for
    workloads whose result is an array, which has no gradient)."""
    def setup(inputs):
        llgrad = need("llgrad", "differentiate")
        f = llgrad.differentiate(fn)
        args = positional(fn, inputs)
        return lambda: f(*args)

    return Impl(name, setup, "fwd", note)


# -------------------------------------------------------------------------- autograd ----

def autograd_vg(fn, wrt, convert=None, name: str = "autograd", note: str = "") -> Impl:
    """HIPS autograd ``value_and_grad`` of ``fn`` run with ``np = autograd.numpy``.

    ``convert``: optional ``{input_name: function}`` applied to inputs before the call (e.g.
    pass a vector as a Python list where autograd's array indexing would be quadratic).
    """
    wrt = tuple(wrt)

    def setup(inputs):
        autograd = need("autograd")
        anp = need("autograd.numpy")
        f = rebind(fn, np=anp)
        vals = dict(inputs)
        for k, c in (convert or {}).items():
            vals[k] = c(vals[k])
        params = list(inspect.signature(fn).parameters)
        fixed = {k: v for k, v in vals.items() if k not in wrt}

        def g(ws):
            return f(**fixed, **dict(zip(wrt, ws)))

        vg = autograd.value_and_grad(g)
        ws = tuple(vals[k] for k in wrt)
        assert all(k in params for k in wrt)

        def run():
            v, gs = vg(ws)
            return v, tuple(np.asarray(x) for x in gs)
        return run

    return Impl(name, setup, "v+g", note)


# ------------------------------------------------------------------------------- jax ----

def jax_vg(fn_or_builder, wrt, *, from_numpy=True, name: str = "jax", note: str = "") -> Impl:
    """JAX ``jit(value_and_grad(f, argnums=wrt))``.

    ``from_numpy=True``: ``fn_or_builder`` is the plain numpy function, run with
    ``np = jax.numpy``. Otherwise it is ``builder(jax, jnp, lax) -> f`` with ``f`` taking the
    same parameters as the workload's inputs.
    """
    wrt = tuple(wrt)

    def setup(inputs):
        jax = need("jax")
        jnp = need("jax.numpy")
        if from_numpy:
            f, params = rebind(fn_or_builder, np=jnp), list(inspect.signature(fn_or_builder).parameters)
        else:
            f = fn_or_builder(jax, jnp, jax.lax)
            params = list(inspect.signature(f).parameters)
        argnums = tuple(params.index(k) for k in wrt)
        # non-array arguments (Python scalars) are compile-time constants, as a user writes it
        static = tuple(i for i, p in enumerate(params) if not isinstance(inputs[p], np.ndarray))
        vg = jax.jit(jax.value_and_grad(f, argnums=argnums), static_argnums=static)
        args = [jnp.asarray(inputs[p]) if isinstance(inputs[p], np.ndarray) else inputs[p]
                for p in params]

        def run():
            return jax.block_until_ready(vg(*args))
        return run

    return Impl(name, setup, "v+g", note)


# ------------------------------------------------------------------------- forwards ----

def numba_fwd(fn, name: str = "numba-fwd", note: str = "", helpers=()) -> Impl:
    """Numba ``njit`` (fastmath off, parallel off) of ``fn``: the compiled-forward baseline.

    ``helpers``: names of functions in ``fn``'s module that ``fn`` calls; they are njit'd too.
    """
    def setup(inputs):
        numba = need("numba")
        jit = lambda f: numba.njit(f, fastmath=False, parallel=False, cache=False)  # noqa: E731
        f = fn
        if helpers:
            f = rebind(fn, **{h: jit(fn.__globals__[h]) for h in helpers})
        jf = jit(f)
        args = positional(fn, inputs)
        return lambda: jf(*args)

    return Impl(name, setup, "fwd", note)


def numpy_fwd(fn, name: str = "numpy-fwd", note: str = "") -> Impl:
    """The plain numpy forward (no gradient): the interpreter/numpy floor."""
    def setup(inputs):
        args = positional(fn, inputs)
        return lambda: fn(*args)

    return Impl(name, setup, "fwd", note)
