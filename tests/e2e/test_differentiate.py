"""Every use case (tests/usecases.py) four ways: plain Python value, eager llgrad runtime
value+grad, compiled value+grad (native and LLGRAD_DISABLE_JIT=1), central differences."""
from __future__ import annotations

import numpy as np
import pytest

import llgrad
import llgrad as lg
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


# ---- pytrees, wrt, the functional forms ---------------------------------------------------
def pytree_loss(params, data, scale=1.0):
    w, b = params["w"], params["b"]
    x, (y, extra) = data
    r = x @ w + b - y
    return scale * np.mean(r ** 2) + 0.1 * np.sum(extra[0] ** 2) + params["layers"][1] ** 2


def _pytree_args(rng):
    params = {"w": rng.standard_normal(4), "b": 0.5, "layers": [rng.standard_normal(2), 1.5]}
    data = (rng.standard_normal((3, 4)), (rng.standard_normal(3), [rng.standard_normal(2)]))
    return params, data


def test_pytree_gradients_mirror_structure(rng):
    params, data = _pytree_args(rng)
    f = compiled(pytree_loss, (0, 1, 2))
    value, (gp, gd, gs) = f.value_and_grad(params, data, 2.0)
    np.testing.assert_allclose(value, pytree_loss(params, data, 2.0), **TIGHT)
    assert set(gp) == {"w", "b", "layers"} and isinstance(gp["layers"], list)
    assert type(gp["b"]) is float and type(gp["layers"][1]) is float and type(gs) is float
    assert isinstance(gd, tuple) and isinstance(gd[1], tuple) and isinstance(gd[1][1], list)
    np.testing.assert_array_equal(gp["layers"][0], np.zeros(2))  # unused leaf: zeros
    # every leaf against finite differences of the flattened function
    leaves = [params["w"], params["b"], params["layers"][0], params["layers"][1], data[0],
              data[1][0], data[1][1][0], 2.0]

    def flat(w, b, l0, l1, x, y, e0, scale):
        return pytree_loss({"w": w, "b": b, "layers": [l0, l1]}, (x, (y, [e0])), scale)
    fd = finite_differences(flat, leaves, range(len(leaves)))
    got = [gp["w"], gp["b"], gp["layers"][0], gp["layers"][1], gd[0], gd[1][0], gd[1][1][0], gs]
    for g, n in zip(got, fd):
        np.testing.assert_allclose(g, n, **FD)
    # the eager runtime agrees on the dict/tuple structure too
    tw = lg.tensor(params["w"], requires_grad=True)
    out = pytree_loss({**params, "w": tw}, data, 2.0)
    out.backward()
    np.testing.assert_allclose(gp["w"], tw.grad.numpy(), **TIGHT)


def test_pytree_result_structure(rng):
    @llgrad.differentiate
    def f(x):
        return {"sum": np.sum(x), "parts": (x * 2, [np.max(x)])}
    x = rng.standard_normal(3)
    out = f(x)
    assert set(out) == {"sum", "parts"} and type(out["sum"]) is float
    assert isinstance(out["parts"], tuple) and type(out["parts"][0]) is np.ndarray
    np.testing.assert_allclose(out["parts"][0], x * 2)
    assert type(out["parts"][1][0]) is float


def affine(w, x, b, n):
    return np.sum(np.tanh(x @ w + b)) * n


@pytest.mark.parametrize("wrt,expect", [
    (0, "w"), (2, "b"), (-2, "b"), ("x", "x"), ((0,), ("w",)), ((0, 2), ("w", "b")),
    (("w", "b"), ("w", "b")), (("b", 1), ("b", "x")), (["x", "w"], ("x", "w"))],
    ids=str)
def test_wrt_forms(wrt, expect, rng):
    args = dict(w=rng.standard_normal(4), x=rng.standard_normal((3, 4)), b=0.3, n=2)
    f = llgrad.differentiate(affine, wrt=wrt)
    g = f.grad(*args.values())
    fd = dict(zip("wxb", finite_differences(affine, list(args.values()), [0, 1, 2])))
    if isinstance(expect, str):
        assert not isinstance(g, tuple)
        g, expect = (g,), (expect,)
    assert isinstance(g, tuple) and len(g) == len(expect)
    for gi, name in zip(g, expect):
        assert type(gi) is (float if name == "b" else np.ndarray)
        np.testing.assert_allclose(gi, fd[name], **FD)


def test_wrt_default_is_first_argument(rng):
    w, x = rng.standard_normal(4), rng.standard_normal((3, 4))
    g = llgrad.differentiate(affine).grad(w, x, 0.3, 2)
    np.testing.assert_allclose(g, finite_differences(affine, [w, x, 0.3, 2], [0])[0], **FD)


def test_keyword_arguments(rng):
    w, x = rng.standard_normal(4), rng.standard_normal((3, 4))
    f = llgrad.differentiate(affine, wrt="b")
    v, g = f.value_and_grad(w, x, n=2, b=0.3)
    assert v == pytest.approx(affine(w, x, 0.3, 2), rel=1e-12) and type(g) is float


def test_functional_grad_and_value_and_grad(rng):
    w, x = rng.standard_normal(4), rng.standard_normal((3, 4))
    fd = finite_differences(affine, [w, x, 0.3, 2], [0, 1, 2])
    g = llgrad.grad(affine)(w, x, 0.3, 2)
    np.testing.assert_allclose(g, fd[0], **FD)
    gx, gb = llgrad.grad(affine, argnums=(1, 2))(w, x, 0.3, 2)
    np.testing.assert_allclose(gx, fd[1], **FD)
    assert gb == pytest.approx(fd[2], rel=1e-6)
    v, gb = llgrad.value_and_grad(affine, argnums=2)(w, x, 0.3, 2)
    assert type(v) is float and v == pytest.approx(affine(w, x, 0.3, 2), rel=1e-12)
    assert type(gb) is float
    # the functional forms accept a Differentiable too (keeping its function)
    d = llgrad.differentiate(affine, wrt=1)
    np.testing.assert_allclose(llgrad.grad(d, argnums=0)(w, x, 0.3, 2), fd[0], **FD)
    np.testing.assert_allclose(llgrad.grad(d, argnums=1)(w, x, 0.3, 2), fd[1], **FD)


def test_decorator_forms(rng):
    @llgrad.differentiate
    def f1(x):
        return np.sum(x ** 3)

    @llgrad.differentiate(wrt=("y",))
    def f2(x, y):
        return np.sum(x * y ** 2)
    x, y = rng.standard_normal(3), rng.standard_normal(3)
    np.testing.assert_allclose(f1.grad(x), 3 * x ** 2, **TIGHT)
    (gy,) = f2.grad(x, y)
    np.testing.assert_allclose(gy, 2 * x * y, **TIGHT)
    assert f1.__name__ == "f1" and f2.__wrapped__.__name__ == "f2"


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.int64, np.bool_], ids=str)
def test_results_are_numpy_or_python(dtype):
    @llgrad.differentiate
    def f(x):
        return x * 1, x[0], np.sum(x)
    x = np.array([1, 0, 1]).astype(dtype)
    vec, first, total = f(x)
    rvec, rfirst, rtotal = f.fn(x)
    assert type(vec) is np.ndarray and vec.dtype == rvec.dtype
    np.testing.assert_array_equal(vec, rvec)
    if dtype == np.float64:  # float64 scalars come back as Python floats (the same number)
        assert type(first) is float and type(total) is float
    else:  # numpy scalars, of numpy's dtype (a float32 is not turned into a float)
        assert type(first) is type(rfirst) and type(total) is type(rtotal)
    assert first == rfirst and total == rtotal


def test_python_float_argument_gets_float_gradient():
    f = llgrad.differentiate(lambda_free_scalar, wrt=(0, 1))
    ga, gb = f.grad(0.5, 2.0)
    assert type(ga) is float and type(gb) is float
    assert ga == pytest.approx(2.0 * 0.5 * 2.0 + 1.0) and gb == pytest.approx(0.25)


def lambda_free_scalar(a, b):
    return a * a * b + a


def test_lambda_is_supported(rng):
    x = rng.standard_normal(3)
    g = llgrad.grad(lambda x: np.sum(np.sin(x)))(x)
    np.testing.assert_allclose(g, np.cos(x), **TIGHT)


# ---- the cache -----------------------------------------------------------------------------
def cached_fn(x, n, a):
    return np.sum(x ** n) * a


def test_same_signature_does_not_retrace(rng):
    f = llgrad.differentiate(cached_fn)
    x = rng.standard_normal(4)
    assert f.cache_info() == {"signatures": 0, "traces": 0}
    f(x, 2, 1.0)
    f.grad(x, 2, 1.0)
    f.value_and_grad(rng.standard_normal(4), 2, 3.5)  # new values, same signature
    assert f.cache_info() == {"signatures": 1, "traces": 1}


@pytest.mark.parametrize("change", ["shape", "dtype", "static int", "int vs float", "wrt"])
def test_new_signature_retraces(change, rng):
    f = llgrad.differentiate(cached_fn)
    x = rng.standard_normal(4)
    f.grad(x, 2, 1.0)
    again = {"shape": lambda: f.grad(rng.standard_normal(5), 2, 1.0),
             "dtype": lambda: f.grad(x.astype(np.float32), 2, 1.0),
             "static int": lambda: f.grad(x, 3, 1.0),
             "int vs float": lambda: f(x, 2, 1),
             "wrt": lambda: llgrad.grad(f, argnums=2)(x, 2, 1.0)}[change]
    again()
    if change == "wrt":  # a new Differentiable: its own cache
        assert f.cache_info()["traces"] == 1
        return
    assert f.cache_info() == {"signatures": 2, "traces": 2}
    f.grad(x, 2, 1.0)
    again()
    assert f.cache_info() == {"signatures": 2, "traces": 2}


def test_static_int_values_give_their_own_code(rng):
    f = llgrad.differentiate(cached_fn)
    x = rng.standard_normal(4)
    for n in (1, 2, 3):
        np.testing.assert_allclose(f(x, n, 1.0), cached_fn(x, n, 1.0), **TIGHT)
        np.testing.assert_allclose(f.grad(x, n, 1.0), n * x ** (n - 1), **TIGHT)
    assert f.cache_info()["signatures"] == 3


def test_disable_jit_runs_the_same_trace_through_the_interpreter(rng, monkeypatch):
    f = llgrad.differentiate(cached_fn)
    x = rng.standard_normal(4)
    native = f.grad(x, 2, 1.0)
    monkeypatch.setenv("LLGRAD_DISABLE_JIT", "1")
    interp = f.grad(x, 2, 1.0)
    assert f.cache_info() == {"signatures": 1, "traces": 1}
    assert "LLGRAD_DISABLE_JIT" in f.inspect(x, 2, 1.0).llvm_ir
    np.testing.assert_allclose(native, interp, **TIGHT)


def test_a_numpy_ufunc_is_differentiated_as_it_is():
    # bind_arguments filled in the ufunc's defaults, and numpy rejects dtype= with signature=
    x = np.linspace(-1.0, 1.0, 5)
    f = llgrad.differentiate(np.sin)
    np.testing.assert_allclose(f(x), np.sin(x))
    np.testing.assert_allclose(llgrad.grad(np.tanh)(0.3), 1.0 - np.tanh(0.3) ** 2)
    v, g = llgrad.differentiate(np.exp).value_and_grad(0.5)
    np.testing.assert_allclose([v, g], [np.exp(0.5)] * 2, rtol=1e-15)
