"""Every use case (tests/usecases.py) four ways: plain Python value, eager llgrad runtime
value+grad, compiled value+grad (native and LLGRAD_DISABLE_JIT=1), central differences."""
from __future__ import annotations

import numpy as np
import pytest

from tests.e2e.conftest import compiled, eager, finite_differences
from tests.usecases import USECASES, float_argnums, make_args

# compiled vs numpy/eager in float64: same formulas, possibly reassociated sums
TIGHT = dict(rtol=1e-9, atol=1e-11)
FD = dict(rtol=1e-6, atol=1e-7)
F32 = dict(rtol=2e-5, atol=2e-6)


def _setup(uc, dtype=np.float64):
    args = make_args(uc.fn, np.random.default_rng(0), dtype)
    wrt = float_argnums(uc.fn)
    return args, wrt, compiled(uc.fn, wrt)


def _check_grad_types(grads, args, wrt):
    assert isinstance(grads, tuple) and len(grads) == len(wrt)
    for g, i in zip(grads, wrt):
        if isinstance(args[i], float):
            assert type(g) is float, f"argument {i} is a Python float; its gradient is {type(g)}"
        else:
            assert type(g) is np.ndarray, type(g)
            assert g.shape == args[i].shape and g.dtype == args[i].dtype, (g.shape, g.dtype)


@pytest.mark.parametrize("uc", USECASES, ids=repr)
def test_value_matches_numpy(uc):
    args, wrt, f = _setup(uc)
    expected = uc.fn(*args)
    value = f(*args)
    assert type(value) is float, f"a scalar result is a Python float, got {type(value)}"
    np.testing.assert_allclose(value, expected, **TIGHT)


@pytest.mark.parametrize("uc", USECASES, ids=repr)
def test_grad_matches_finite_differences_and_eager(uc):
    args, wrt, f = _setup(uc)
    value, grads = f.value_and_grad(*args)
    _check_grad_types(grads, args, wrt)
    np.testing.assert_allclose(value, uc.fn(*args), **TIGHT)
    fd = finite_differences(uc.fn, args, wrt)
    for i, g, n in zip(wrt, grads, fd):
        np.testing.assert_allclose(g, n, **FD, err_msg=f"d/d arg {i} vs finite differences")
    if uc.eager is None:
        ev, eg = eager(uc.fn, args, wrt)
        np.testing.assert_allclose(value, ev, **TIGHT, err_msg="value vs eager")
        for i, g, e in zip(wrt, grads, eg):
            np.testing.assert_allclose(g, e, **TIGHT, err_msg=f"d/d arg {i} vs eager")


@pytest.mark.parametrize("uc", USECASES, ids=repr)
def test_interpreter_matches_native(uc, monkeypatch):
    args, wrt, f = _setup(uc)
    native_v, native_g = f.value_and_grad(*args)
    native_plain = f(*args)
    monkeypatch.setenv("LLGRAD_DISABLE_JIT", "1")
    v, g = f.value_and_grad(*args)
    assert f.inspect(*args).llvm_ir.startswith("(LLGRAD_DISABLE_JIT=1")
    _check_grad_types(g, args, wrt)
    np.testing.assert_allclose(v, native_v, **TIGHT)
    np.testing.assert_allclose(f(*args), native_plain, **TIGHT)
    for a, b in zip(g, native_g):
        np.testing.assert_allclose(a, b, **TIGHT)


@pytest.mark.parametrize("uc", [u for u in USECASES if u.float32], ids=repr)
def test_float32(uc):
    """float32 inputs: values close to numpy's float32 result, float32 gradients close to
    float64 ones (and to the eager runtime in float32)."""
    args, wrt, f = _setup(uc, np.float32)
    expected = uc.fn(*args)
    value, grads = f.value_and_grad(*args)
    _check_grad_types(grads, args, wrt)
    np.testing.assert_allclose(value, expected, rtol=1e-4, atol=1e-5)
    args64 = [np.asarray(a, np.float64) if isinstance(a, np.ndarray) and a.dtype.kind == "f"
              else a for a in args]
    _, grads64 = compiled(uc.fn, wrt).value_and_grad(*args64)
    for g, g64 in zip(grads, grads64):
        np.testing.assert_allclose(g, g64, rtol=1e-4, atol=1e-5)
    if uc.eager is None:
        ev, eg = eager(uc.fn, args, wrt)
        np.testing.assert_allclose(value, ev, **F32)
        for g, e in zip(grads, eg):
            np.testing.assert_allclose(g, e, **F32)
