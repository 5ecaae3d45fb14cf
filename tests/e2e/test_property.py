"""Random straight-line programs over the primitives (hypothesis): compiled native code ==
the reference interpreter (LLGRAD_DISABLE_JIT=1) == the eager runtime == numpy, for values
and gradients.

A program is a list of steps; each step applies one operation (elementwise unary or binary,
a reduction, reshape/transpose, matmul, indexing) to values computed so far, and the result
is appended. `run_program` interprets the steps as plain numpy code, so the same program
runs on numpy arrays, on llgrad Tensors, and under the tracer (where the Python-level
dispatch runs at trace time and only the array operations are recorded).
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import llgrad
from tests.e2e.conftest import eager

INPUT_SHAPES = [(3, 4), (4,), (3,)]


# ---- the operations (module-level functions: the tracer converts the user's own code) ------
def u_exp(a):
    return np.exp(np.tanh(a))


def u_sin(a):
    return np.sin(a)


def u_tanh(a):
    return np.tanh(a)


def u_sqrt(a):
    return np.sqrt(a * a + 1.0)


def u_log(a):
    return np.log(a * a + 0.5)


def u_square(a):
    return a ** 2


def u_abs(a):
    return np.abs(a) + 0.1 * a


def u_neg(a):
    return -a * 0.5 + 1.0


def b_add(a, b):
    return a + b


def b_sub(a, b):
    return a - b


def b_mul(a, b):
    return a * b


def b_div(a, b):
    return a / (1.0 + b * b)


def b_max(a, b):
    return np.maximum(a, b)


def b_min(a, b):
    return np.minimum(a, b)


def b_where(a, b):
    return np.where(a > b, a, b * 0.5)


def r_sum(a, axis, keepdims):
    return np.sum(a, axis=axis, keepdims=keepdims)


def r_mean(a, axis, keepdims):
    return np.mean(a, axis=axis, keepdims=keepdims)


def r_max(a, axis, keepdims):
    return np.max(a, axis=axis, keepdims=keepdims)


def r_min(a, axis, keepdims):
    return np.min(a, axis=axis, keepdims=keepdims)


def s_transpose(a):
    return a.T


def s_flatten(a):
    return np.reshape(a, (-1,))


def s_reshape_rows(a):
    return np.reshape(a, (a.shape[0], -1, 1))[:, :, 0]


def m_matmul(a, b):
    return a @ b


def i_slice(a):
    return a[1:]


def i_reverse(a):
    return a[::-1]


def i_gather(a):
    return a[np.array([1, 0, 1])]


def i_newaxis(a):
    return a[:, None] * 1.0


UNARY = [u_exp, u_sin, u_tanh, u_sqrt, u_log, u_square, u_abs, u_neg]
BINARY = [b_add, b_sub, b_mul, b_div, b_max, b_min, b_where]
REDUCE = [r_sum, r_mean, r_max, r_min]


def run_program(steps, *inputs):
    vals = list(inputs)
    for fn, operands, params in steps:
        vals.append(fn(*[vals[i] for i in operands], **params))
    first, last = vals[len(inputs)], vals[-1]
    return np.sum(np.sin(last)) + 0.1 * np.sum(first)


def program(x, y, z):
    return run_program(STEPS[0], x, y, z)


STEPS: list = [None]  # the program under test (a module global: `program` has fixed source)


# ---- drawing programs ----------------------------------------------------------------------
def _broadcastable(sa, sb) -> bool:
    try:
        np.broadcast_shapes(sa, sb)
        return True
    except ValueError:
        return False


@st.composite
def programs(draw, max_steps=5):
    shapes = list(INPUT_SHAPES)
    steps = []
    for _ in range(draw(st.integers(1, max_steps))):
        kinds = ["unary", "binary", "shape", "index"] + (["reduce"] if len(shapes[-1]) else [])
        if any(len(s) >= 1 for s in shapes):
            kinds.append("matmul")
        kind = draw(st.sampled_from(kinds))
        i = draw(st.integers(0, len(shapes) - 1))
        s = shapes[i]
        if kind == "reduce" and not s:
            kind = "unary"
        if kind == "unary":
            step, out = (draw(st.sampled_from(UNARY)), (i,), {}), s
        elif kind == "binary":
            partners = [j for j, t in enumerate(shapes) if _broadcastable(s, t)]
            j = draw(st.sampled_from(partners))
            step, out = (draw(st.sampled_from(BINARY)), (i, j), {}), np.broadcast_shapes(
                s, shapes[j])
        elif kind == "reduce":
            axis = draw(st.sampled_from([None] + list(range(len(s)))
                                        + ([(0, 1)] if len(s) == 2 else [])))
            keep = draw(st.booleans())
            step = (draw(st.sampled_from(REDUCE)), (i,), {"axis": axis, "keepdims": keep})
            out = np.sum(np.zeros(s), axis=axis, keepdims=keep).shape
        elif kind == "shape":
            fns = [s_flatten] + ([s_transpose, s_reshape_rows] if len(s) == 2 else [])
            fn = draw(st.sampled_from(fns))
            step, out = (fn, (i,), {}), fn(np.zeros(s)).shape
        elif kind == "index":
            fns = ([i_slice, i_reverse] if len(s) >= 1 and s[0] >= 2 else []) + \
                  ([i_gather] if len(s) >= 1 and s[0] >= 2 else []) + \
                  ([i_newaxis] if len(s) == 1 else [])
            if not fns:
                step, out = (u_sin, (i,), {}), s
            else:
                fn = draw(st.sampled_from(fns))
                step, out = (fn, (i,), {}), fn(np.zeros(s)).shape
        else:  # matmul: a partner whose first dim fits our last
            partners = [j for j, t in enumerate(shapes)
                        if len(s) >= 1 and len(t) >= 1 and len(s) + len(t) <= 4
                        and t[0 if len(t) == 1 else -2] == s[-1]]
            if not partners:
                step, out = (u_tanh, (i,), {}), s
            else:
                j = draw(st.sampled_from(partners))
                step, out = (m_matmul, (i, j), {}), (np.zeros(s) @ np.zeros(shapes[j])).shape
        steps.append(step)
        shapes.append(tuple(out))
    return steps


def describe(steps) -> str:
    return "; ".join(f"v{len(INPUT_SHAPES) + k} = {fn.__name__}"
                     f"({', '.join(f'v{i}' for i in ops)}{', ' if p else ''}"
                     f"{', '.join(f'{a}={b}' for a, b in p.items())})"
                     for k, (fn, ops, p) in enumerate(steps))


TIGHT = dict(rtol=1e-9, atol=1e-10)


@settings(max_examples=50, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(steps=programs(), seed=st.integers(0, 2 ** 16))
def test_random_programs_compiled_interp_eager_agree(steps, seed):
    rng = np.random.default_rng(seed)
    args = [rng.standard_normal(s) for s in INPUT_SHAPES]
    STEPS[0] = steps
    expected = program(*args)
    wrt = (0, 1, 2)
    f = llgrad.differentiate(program, wrt=wrt)
    note = describe(steps)
    value, grads = f.value_and_grad(*args)
    np.testing.assert_allclose(value, expected, **TIGHT, err_msg=note)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("LLGRAD_DISABLE_JIT", "1")
        iv, ig = f.value_and_grad(*args)
    ev, eg = eager(program, args, wrt)
    np.testing.assert_allclose(iv, value, **TIGHT, err_msg=note)
    np.testing.assert_allclose(ev, value, **TIGHT, err_msg=note)
    for k, (g, gi, ge) in enumerate(zip(grads, ig, eg)):
        assert g.shape == args[k].shape, note
        np.testing.assert_allclose(g, gi, **TIGHT, err_msg=f"d/dv{k} native vs interp: {note}")
        np.testing.assert_allclose(g, ge, **TIGHT, err_msg=f"d/dv{k} native vs eager: {note}")


def sum_of_0d_used_twice(x):
    v = np.sum(x)
    return np.sum(np.sin(v)) + v


def test_sum_of_a_0d_value_used_twice():
    # Found by the property test: a reduction over no axes used to reach codegen, whose group
    # planner mis-lowered it (KeyError); simplify now removes it (it is the identity).
    x = np.linspace(0.1, 0.5, 3)
    value, grad = llgrad.differentiate(sum_of_0d_used_twice).value_and_grad(x)
    assert value == pytest.approx(np.sin(np.sum(x)) + np.sum(x))
    np.testing.assert_allclose(grad, np.cos(np.sum(x)) + 1.0)
