"""Compile-time structure of the generated code: outlined loops and matmuls (one function per
distinct loop), kernel segments, memcpy copies, and the optimisation level chosen from the
plan. Every structural variant is also checked for the same numbers as the interpreter."""
from __future__ import annotations

import re

import numpy as np
import pytest

import llgrad
from llgrad.codegen import lower, outline
from llgrad.transform.passes import fuse
from llgrad.runtime import config
from tests import cf_corpus
from tests.usecases import USECASES, float_argnums, make_args

WEIGHTS = [np.full((8, 8), 0.05 * (k + 1)) for k in range(40)]  # per-step constants


def _joint_ir(f, *args) -> str:
    f.value_and_grad(*args)
    return next(iter(f._cache.values())).modules["joint"].llvm_ir


def _functions(llvm_ir: str) -> dict[str, int]:
    """Function name -> number of lines of its definition."""
    out, name, n = {}, None, 0
    for line in llvm_ir.splitlines():
        m = re.match(r'define .*@"?([\w.]+)"?\(', line)
        if m:
            name, n = m.group(1), 0
        n += 1
        if line == "}" and name:
            out[name], name = n, None
    return out


def unrolled_rnn(Wx, Wh, b, xs):
    hs = []
    h = np.zeros((xs.shape[1], Wh.shape[0]))
    for t in range(xs.shape[0]):
        h = np.tanh(xs[t] @ Wx + h @ Wh + b + 0.0 * len(hs))  # len(hs): unrolled, on purpose
        hs.append(h)
    return np.sum(np.stack(hs) ** 2)


def _rnn_args(T):
    r = np.random.default_rng(0)
    return (r.standard_normal((4, 16)) / 2, r.standard_normal((16, 16)) / 4, np.zeros(16),
            r.standard_normal((T, 8, 4)))


@pytest.fixture
def native(monkeypatch):
    monkeypatch.delenv("LLGRAD_DISABLE_JIT", raising=False)


def _check_against_interp(f, args, monkeypatch):
    v, g = f.value_and_grad(*args)
    monkeypatch.setenv("LLGRAD_DISABLE_JIT", "1")
    ref = llgrad.differentiate(f.fn, wrt=f.wrt)
    rv, rg = ref.value_and_grad(*args)
    monkeypatch.delenv("LLGRAD_DISABLE_JIT")
    np.testing.assert_allclose(v, rv, rtol=1e-12)
    for a, b in zip(g if isinstance(g, tuple) else (g,), rg if isinstance(rg, tuple) else (rg,)):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)


@pytest.mark.filterwarnings("ignore::llgrad.PerformanceWarning")
def test_unrolled_iterations_share_one_function_per_loop_and_matmul(native, monkeypatch):
    f4, f8 = (llgrad.differentiate(unrolled_rnn, wrt=(0, 1, 2)) for _ in range(2))
    small, big = _functions(_joint_ir(f4, *_rnn_args(4))), _functions(_joint_ir(f8, *_rnn_args(8)))
    outlined = lambda fns: sorted(n for n in fns if n.startswith("llgrad.")
                                  and not n.endswith(("body", "joint")))  # noqa: E731
    assert any(n.startswith("llgrad.mm.f64.8x16x16") for n in outlined(big))
    assert any(n.startswith("llgrad.loop") for n in outlined(big))
    # twice the steps: no new functions, and each shared function is called twice as often
    assert outlined(small) == outlined(big)
    ir8 = next(iter(f8._cache.values())).modules["joint"].llvm_ir
    assert ir8.count('call void @"llgrad.mm.f64.8x16x16.nn"') == 8
    assert next(iter(f8._cache.values())).stats["loops shared (joint)"] > 0
    _check_against_interp(f8, _rnn_args(8), monkeypatch)


def _weights_chain(x):
    for w in WEIGHTS:  # a Python list: unrolled, one product per weight
        x = np.tanh(x @ w) + x * 0.5
    return np.sum(x)


def test_no_llvm_function_grows_with_the_program(native, monkeypatch):
    monkeypatch.setattr(lower, "SEGMENT_OPS", 16)
    x = np.random.default_rng(1).standard_normal((8, 8))
    fns = _functions(_joint_ir(llgrad.differentiate(_weights_chain), x))
    assert any(".part" in n for n in fns)  # the kernel runs in segments
    assert max(fns.values()) < 1500, sorted(fns.items(), key=lambda kv: -kv[1])[:3]
    _check_against_interp(llgrad.differentiate(_weights_chain), (x,), monkeypatch)


def test_loops_differing_in_a_constant_or_its_sign_are_not_shared():
    f = outline._freeze
    assert len({f(0.0), f(-0.0), f(1), f(1.0), f(True), f(np.float32(1.0))}) == 6
    assert f({"dtype": np.dtype("f8")}) != f({"dtype": np.dtype("f4")})
    assert f(np.zeros(3)) != f(np.zeros(4)) and f(np.zeros(3)) == f(np.zeros(3))


def test_outlined_loops_keep_their_constants(native, monkeypatch):
    monkeypatch.setattr(outline, "OUTLINE_MIN_ELEMENTS", 1)
    x = np.linspace(0.5, 1.5, 100)
    f = llgrad.differentiate(lambda x: np.sum(x * 2.0) + 3.0 * np.sum((x * -2.0) ** 2))
    _check_against_interp(f, (x,), monkeypatch)


@pytest.mark.parametrize("uc", USECASES, ids=repr)
def test_every_use_case_with_everything_outlined_and_segmented(uc, native, monkeypatch):
    """The smallest thresholds: each loop its own function, each unit its own segment, at
    most two ops per fused loop; the numbers are the interpreter's."""
    monkeypatch.setattr(outline, "BIG_PLAN", 1)
    monkeypatch.setattr(lower, "SEGMENT_OPS", 1)
    monkeypatch.setattr(fuse, "MAX_GROUP_OPS", 2)
    args = make_args(uc.fn, np.random.default_rng(0))
    _check_against_interp(llgrad.differentiate(uc.fn, wrt=float_argnums(uc.fn)), args,
                          monkeypatch)


def _concat(x, w):
    return np.sum(np.concatenate([x, w, x]) ** 2)


def test_dense_copies_are_memcpy(native):
    x, w = np.ones(300), np.arange(300.0)
    ir_text = _joint_ir(llgrad.differentiate(_concat, wrt=(0, 1)), x, w)
    assert "llvm.memcpy" in ir_text


def _gather(v, idx):
    return np.sum(v[idx] ** 2)


def _elementwise(x):
    return np.sum(np.exp(-x * x) * np.sin(x))


def _cumsum(v):
    return np.sum(np.cumsum(v) * 1e-3)


def _staged_rnn(Wx, Wh, b, xs):
    preds = np.zeros((xs.shape[0], xs.shape[1], Wh.shape[0]))
    h = np.zeros((xs.shape[1], Wh.shape[0]))
    for t in range(xs.shape[0]):
        h = np.tanh(xs[t] @ Wx + h @ Wh + b)
        preds[t] = h  # a slab written at t: nothing for the vectoriser
    return np.sum(preds ** 2)


def _forward_substitution(L, y):
    n = y.shape[0]
    z = np.zeros_like(y)
    for i in range(n):
        s = y[i]
        for j in range(i + 1, n):  # at most n trips (codegen/ranges.py), and so its sweep
            s = s - L[j, i] * z[i] * 1e-3 * y[j]
        z[i] = s / L[i, i]
    return np.sum(z ** 2)


def _triangular_solve(L, y):
    n = y.shape[0]
    z = np.zeros_like(y)
    for i in range(n):  # windows of run-time length, z[:i]: runtime/padded.py
        z[i] = (y[i] - np.sum(L[i, :i] * z[:i])) / L[i, i]
    return np.sum(z ** 2)


def _lower_triangular(n):
    r = np.random.default_rng(0)
    return np.tril(r.standard_normal((n, n))) + n * np.eye(n), r.standard_normal(n)


@pytest.mark.parametrize("fn, args, level", [
    (_elementwise, (np.ones(100_000),), 1),
    (_gather, (np.ones(100_000), np.arange(100_000) % 7), 2),
    (_gather, (np.ones(100), np.arange(100) % 7), 1),  # small: O1 costs little
    (_cumsum, (np.ones(100_000),), 2),
    (unrolled_rnn, _rnn_args(5), 0),  # little work, much IR: the light pipeline
    (_staged_rnn, _rnn_args(5), 0),
    (_staged_rnn, _rnn_args(80), 0),  # light per line of IR: the same level as at T=5
    (_staged_rnn, _rnn_args(320), 1),  # (not O2: its slab writes are no scatters)
    (_forward_substitution, (np.eye(10) + 1.0, np.ones(10)), 0),
    (_triangular_solve, _lower_triangular(10), 2),  # Note [Loops over windows of run-time
    (_triangular_solve, _lower_triangular(50), 2),  # length]
])
@pytest.mark.filterwarnings("ignore::llgrad.PerformanceWarning")
def test_optimisation_level_is_chosen_from_the_plan(fn, args, level, native):
    f = llgrad.differentiate(fn)
    f.value_and_grad(*args)
    assert next(iter(f._cache.values())).stats["opt level (joint)"] == level


def test_loops_over_windows_compile_the_same_code_at_every_size(native):
    """Issue 12: the triangular solve's compile does not grow with n: the same IR and
    optimisation level, as much LLVM IR, at n = 10, 25 and 50 (Note [Loops over windows of run-time
    length] in codegen/compile.py), and the staged path."""
    seen, lines_at = set(), []
    for n in (10, 25, 50):
        f = llgrad.differentiate(_triangular_solve, wrt=(0, 1))
        f.value_and_grad(*_lower_triangular(n))
        ins = f.inspect(*_lower_triangular(n))
        st, lines = ins.stats, ins.llvm_ir.count("\n")
        assert st["path"] == "staged"
        seen.add((st["ops (traced)"], st["ops (forward+backward)"], st["opt level (joint)"]))
        lines_at.append(lines)
    assert len(seen) == 1, seen
    assert max(lines_at) <= 1.05 * min(lines_at), lines_at  # (loop tails: shapes differ)


def test_opt_level_can_be_forced(native, monkeypatch):
    monkeypatch.setenv("LLGRAD_OPT_LEVEL", "3")
    f = llgrad.differentiate(_elementwise)
    f.value_and_grad(np.ones(10))
    assert next(iter(f._cache.values())).stats["opt level (joint)"] == 3
    monkeypatch.delenv("LLGRAD_OPT_LEVEL")
    config.update("opt_level", 0)
    try:
        g = llgrad.differentiate(_elementwise)
        np.testing.assert_allclose(g.grad(np.ones(10)), f.grad(np.ones(10)), rtol=1e-14)
        assert next(iter(g._cache.values())).stats["opt level (joint)"] == 0
    finally:
        config.update("opt_level", None)
    with pytest.raises(ValueError, match="opt_level must be 0, 1, 2, 3 or None"):
        config.update("opt_level", 4)
    monkeypatch.setenv("LLGRAD_OPT_LEVEL", "fast")
    with pytest.raises(ValueError, match="LLGRAD_OPT_LEVEL='fast': use 0, 1, 2 or 3"):
        config.opt_level()


@pytest.mark.parametrize("name", sorted(cf_corpus.CASES))
@pytest.mark.filterwarnings("ignore::llgrad.PerformanceWarning")
def test_control_flow_corpus_with_everything_outlined_and_segmented(name, native, monkeypatch):
    """Loops and conditions in segments (their 0-d values in the segments' shared array),
    every loop outlined; the numbers are the interpreter's."""
    monkeypatch.setattr(outline, "BIG_PLAN", 1)
    monkeypatch.setattr(lower, "SEGMENT_OPS", 1)
    c = cf_corpus.CASES[name]
    _check_against_interp(llgrad.differentiate(c.fn, wrt=c.wrt), c.args(), monkeypatch)


STEPS = tuple(range(1500))


def _many_reads(x):
    s = 0.0
    for k in STEPS:  # a Python tuple: 1500 reads of x, whose gradient is one long sum
        s = s + x[k] * (k % 7)
    return s


def test_a_gradient_summing_thousands_of_scatters_compiles(native, monkeypatch):
    """The planner follows a sum of 1500 scattered reads without recursing per term (it hit
    Python's recursion limit)."""
    x = np.linspace(-1.0, 1.0, len(STEPS))
    f = llgrad.differentiate(_many_reads)
    np.testing.assert_allclose(f.grad(x), [k % 7 for k in STEPS], rtol=1e-12)
    _check_against_interp(f, (x,), monkeypatch)
