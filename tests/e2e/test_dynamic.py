"""The dynamic path (tracer/dynamic.py): functions that concretise traced values.

`float(t)`, `t.item()`, `bool(t)` in code llgrad did not convert, `int(t)` as a range bound or
a shape, a Python list indexed by a traced value, and a numpy.random draw switch the function
to per-call eager tracing. Results must be identical to plain Python; concretised values are constants (no
gradient flows through them, as in PyTorch); each distinct graph (branch pattern) is compiled
once and reused; `inspect().path` says `dynamic` and names the file:line of the concretisation.
"""
from __future__ import annotations

import inspect

import numpy as np
import pytest

import llgrad
from tests.fd import numerical_vjp

FILE = __file__.rsplit("/", 1)[-1]


def line_of(fn, text: str) -> int:
    lines, first = inspect.getsourcelines(fn)
    return first + next(k for k, s in enumerate(lines) if text in s)


# ---- the functions ------------------------------------------------------------------------------
def uses_float(x):
    c = float(np.sum(x))
    return np.sum(np.sin(x) * c)


def uses_item(x):
    m = np.max(x).item()
    if m > 0.5:
        return np.sum(x ** 2) * m
    return np.sum(x) * m


relu = lambda v: v * bool(v > 0)  # noqa: E731  (bool() of a traced value, in a lambda)


def bool_in_lambda(x):
    s = 0.0
    for i in range(x.shape[0]):
        s = s + relu(x[i]) * (i + 1)
    return s


def int_range_bound(x):
    n = int(np.sum(x > 0))
    s = 0.0
    for i in range(n):
        s = s + np.exp(x[i])
    return s


def int_shape(x):
    n = int(np.sum(x > 0))
    z = np.ones(n) * 2.0
    return np.sum(x[:n] * z) + np.sum(x ** 2)


COEFS = [1.0, -2.0, 3.0, 0.5]


def list_indexed_by_traced(x):
    k = np.argmax(x)
    return COEFS[k] * np.sum(x ** 2)


def branchy_python(x):
    t = float(x[0])
    s = np.sum(x)
    if t > 0:
        s = s * 2.0
    if t > 1:
        s = s + np.sum(x ** 2)
    return s


CASES = [uses_float, uses_item, bool_in_lambda, int_range_bound, int_shape,
         list_indexed_by_traced, branchy_python]


# ---- values and gradients -----------------------------------------------------------------------
@pytest.mark.parametrize("fn", CASES, ids=lambda f: f.__name__)
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_value_identical_to_python(fn, seed, mode):
    x = np.random.default_rng(seed).uniform(-1, 1.5, 4)
    d = llgrad.differentiate(fn)
    assert d(x) == pytest.approx(fn(x), rel=1e-12, abs=1e-14)
    assert d.value_and_grad(x)[0] == pytest.approx(fn(x), rel=1e-12, abs=1e-14)


def _frozen(fn, x):
    """`fn` with its float()/item() concretisations frozen at their values at x."""
    if fn is uses_float:
        c = float(np.sum(x))
        return lambda y: np.sum(np.sin(y) * c)
    if fn is uses_item:
        m = float(np.max(x))
        return (lambda y: np.sum(y ** 2) * m) if m > 0.5 else (lambda y: np.sum(y) * m)
    return fn  # int/bool/index concretisations are locally constant


@pytest.mark.parametrize("fn", CASES, ids=lambda f: f.__name__)
@pytest.mark.parametrize("seed", [0, 1])
def test_grad_treats_concretised_values_as_constants(fn, seed, mode):
    x = np.random.default_rng(seed).uniform(-1, 1.5, 4)
    g = llgrad.differentiate(fn).grad(x)
    num = numerical_vjp(_frozen(fn, x), [x], np.float64(1.0), [0])[0]
    np.testing.assert_allclose(g, num, rtol=1e-6, atol=1e-8)


def test_dynamic_and_staged_give_the_same_numbers(mode):
    def staged(x):
        s = np.sum(x)
        if x[0] > 0:
            s = s * 2.0
        if x[0] > 1:
            s = s + np.sum(x ** 2)
        return s
    for seed in range(4):
        x = np.random.default_rng(seed).uniform(-1, 2, 4)
        ds, dd = llgrad.differentiate(staged), llgrad.differentiate(branchy_python)
        vs, gs = ds.value_and_grad(x)
        vd, gd = dd.value_and_grad(x)
        assert vs == vd
        np.testing.assert_array_equal(gs, gd)
        assert ds.inspect(x).path == "staged"
        assert dd.inspect(x).path.startswith("dynamic")


# ---- path reporting -----------------------------------------------------------------------------
@pytest.mark.parametrize("fn, text, why", [
    (uses_float, "c = float(np.sum(x))", r"float\(\)"),
    (uses_item, "m = np.max(x).item()", r"\.item\(\)"),
    (bool_in_lambda, "relu = lambda", r"bool\(\)"),
    (int_range_bound, "n = int(np.sum(x > 0))", r"int\(\)"),
    (list_indexed_by_traced, "return COEFS[k]", r"index"),
], ids=lambda v: getattr(v, "__name__", None))
def test_inspect_path_names_the_concretisation(fn, text, why, monkeypatch):
    monkeypatch.setenv("LLGRAD_DISABLE_JIT", "1")
    x = np.array([0.3, -0.2, 0.9, 0.1])
    d = llgrad.differentiate(fn)
    path = str(d.inspect(x).path)
    assert path.startswith("dynamic"), path
    assert f"{FILE}:{line_of(fn, text) if fn is not bool_in_lambda else _lambda_line()}" \
        in path, path
    import re
    assert re.search(why, path), path


def _lambda_line() -> int:
    src = open(__file__).read().splitlines()
    return 1 + next(k for k, s in enumerate(src) if s.startswith("relu = lambda"))


# ---- guards: different branch patterns -> different cached graphs ---------------------------------
def test_branch_patterns_get_their_own_graphs(monkeypatch):
    monkeypatch.setenv("LLGRAD_DISABLE_JIT", "1")
    d = llgrad.differentiate(branchy_python)
    neg, mid, big = (np.array([-0.5, 1.0, 2.0]), np.array([0.5, 1.0, 2.0]),
                     np.array([1.5, 1.0, 2.0]))
    for x in (neg, mid, neg, big, mid, big, neg):
        v, g = d.value_and_grad(x)
        assert v == branchy_python(x)
    assert len(d._graphs) == 3
    assert d.cache_info()["traces"] == 7  # traced eagerly per call (the dynamic path)
    # the same pattern with other numbers reuses its graph
    d.value_and_grad(np.array([-3.0, 0.1, 0.2]))
    assert len(d._graphs) == 3


def test_range_bound_patterns(monkeypatch):
    monkeypatch.setenv("LLGRAD_DISABLE_JIT", "1")
    d = llgrad.differentiate(int_range_bound)
    xs = [np.array([1.0, 1.0, -1.0, -1.0]), np.array([1.0, 1.0, 1.0, -1.0]),
          np.array([2.0, 3.0, -1.0, -2.0])]
    for x in xs:
        assert d(x) == int_range_bound(x)
        np.testing.assert_allclose(d.grad(x), np.where(np.arange(4) < np.sum(x > 0),
                                                       np.exp(x), 0.0))
    assert len(d._graphs) == 2


def test_dynamic_graph_cache_is_bounded(monkeypatch):
    monkeypatch.setenv("LLGRAD_DISABLE_JIT", "1")
    d = llgrad.differentiate(int_range_bound)
    d.max_dynamic_graphs = 2
    for n in range(5):
        x = np.where(np.arange(4) < n, 1.0, -1.0)
        assert d(x) == int_range_bound(x)
    assert len(d._graphs) <= 2


# ---- element writes and Python statements on the dynamic path ------------------------------------
def writes_into_buffer(x):
    c = float(np.sum(x))
    y = np.zeros(3)
    for i in range(3):
        y[i] = x[i] * c
    return np.sum(y ** 2)


def traced_slice_bounds(x):
    y = np.zeros(6)
    for i in range(3):
        k = np.sum(x > 10.0) + i  # a traced int: a slice of run-time position and length
        y[2 * k:2 * k + 2] = x[i] * np.array([1.0, -1.0])
    return np.sum(y * np.arange(6))


def test_writes_into_numpy_buffer_keep_their_gradient(mode):
    """numpy's `y[i] = t` would call float(t) and silently drop the gradient; the dynamic path
    runs the converted function, where the write is a functional update."""
    x = np.array([0.3, 0.5, 0.7])
    d = llgrad.differentiate(writes_into_buffer)
    c = float(np.sum(x))
    assert d(x) == pytest.approx(writes_into_buffer(x), rel=1e-12)
    np.testing.assert_allclose(d.grad(x), 2 * c * c * x)
    assert d.inspect(x).path.startswith("dynamic")


def test_slice_with_traced_bounds_is_staged_and_exact(mode):
    """Note [Slices of loop-dependent length] (runtime/padded.py); this went dynamic before."""
    x = np.array([0.3, -0.5, 0.7])
    d = llgrad.differentiate(traced_slice_bounds)
    assert d(x) == pytest.approx(traced_slice_bounds(x), rel=1e-12)
    np.testing.assert_allclose(d.grad(x), [-1.0, -1.0, -1.0])
    assert d.inspect(x).path == "staged"


def try_after_concretisation(x):
    c = float(x[0])
    try:
        r = np.sum(x) / c
    except ZeroDivisionError:
        r = np.sum(x)
    return r


def test_python_statements_run_on_the_dynamic_path(mode):
    x = np.array([2.0, 1.0, 1.0])
    d = llgrad.differentiate(try_after_concretisation)
    assert d(x) == 2.0
    np.testing.assert_allclose(d.grad(x), [0.5, 0.5, 0.5])


def scale_by_concrete_sum(x):
    s = float(np.sum(x))  # concretised: a constant of this call's graph
    return np.sum(np.sin(x)) * s


def test_dynamic_graphs_compile_only_when_they_recur(monkeypatch):
    # Note [Compile on reuse]: a graph seen once runs through the interpreter.
    monkeypatch.delenv("LLGRAD_DISABLE_JIT", raising=False)
    f = llgrad.differentiate(scale_by_concrete_sum)
    x = np.array([0.1, 0.2, 0.3])
    g1 = f.grad(x)
    (c,) = f._graphs.values()
    assert c.modules == {}
    g2 = f.grad(x)  # the same graph again: now native
    assert set(c.modules) == {"joint"}
    np.testing.assert_allclose(g1, g2, rtol=1e-14)
    np.testing.assert_allclose(g1, np.cos(x) * np.sum(x), rtol=1e-12)  # s is a constant
    f.grad(x + 1.0)  # a new constant: a new graph, interpreted
    assert len(f._graphs) == 2 and sum(bool(c.modules) for c in f._graphs.values()) == 1


def noisy_loss(x):
    noise = np.random.standard_normal(x.shape[0])
    s = 0.0
    for i in range(x.shape[0]):
        s = s + np.sin(x[i]) * (1.0 + 0.1 * np.random.rand())
    return s + np.sum(x * noise)


_RNG = np.random.default_rng(7)


def generator_loss(x):
    return np.sum(x * _RNG.standard_normal(x.shape[0]))


def test_random_draws_run_per_call_as_in_python(mode):
    """Note [Random draws run per call]: a draw switches the function to the dynamic path,
    so every call draws new numbers (and a seed gives Python's numbers exactly)."""
    x = np.array([0.3, 0.5, -0.2])
    d = llgrad.differentiate(noisy_loss)
    np.random.seed(1)
    expected = [noisy_loss(x) for _ in range(3)]
    np.random.seed(1)
    assert [float(d(x)) for _ in range(3)] == expected
    np.random.seed(2)
    value, grad = d.value_and_grad(x)

    def seeded(a):
        np.random.seed(2)
        return noisy_loss(a)
    assert value == seeded(x)
    np.testing.assert_allclose(grad, numerical_vjp(seeded, [x], 1.0, wrt=[0])[0], atol=1e-7)
    path = d.inspect(x).path
    assert path.startswith("dynamic") and "drawing random numbers" in path
    assert f"{FILE}:" in path
    g = llgrad.differentiate(generator_loss)
    assert len({float(g(x)) for _ in range(3)}) == 3  # a Generator's method draws per call
