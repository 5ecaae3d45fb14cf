"""The control-flow corpus (tests/cf_corpus.py) compiled: values against plain Python,
gradients against central finite differences and the eager runtime; trace counts; unrolled
loops; tape memory of long loops.

Every case runs twice: through the reference interpreter (LLGRAD_DISABLE_JIT=1) and natively.
"""
from __future__ import annotations

import re
import warnings

import numpy as np
import pytest

import llgrad
from llgrad.tracer.tracing import UnrollWarning
from tests import cf_corpus
from tests.fd import numerical_vjp

CASES = cf_corpus.CASES


def _wrt_tuple(c):
    return c.wrt if isinstance(c.wrt, tuple) else (c.wrt,)


def _compiled(c):
    return llgrad.differentiate(c.fn, wrt=c.wrt)


def _call(c, d, what, *args):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore" if c.unrolls else "error", UnrollWarning)
        return (getattr(d, what) if what else d)(*args)


def _as_float_args(args, wrt):
    return tuple(np.asarray(a, np.float64) if i in wrt and isinstance(a, float) else a
                 for i, a in enumerate(args))


@pytest.mark.parametrize("name", sorted(CASES))
def test_value_matches_python(name, mode):
    c = CASES[name]
    args = c.args()
    expected = c.fn(*args)
    got = _call(c, _compiled(c), None, *args)
    np.testing.assert_allclose(np.asarray(got), np.asarray(expected), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("name", sorted(CASES))
def test_grad_matches_finite_differences(name, mode):
    c = CASES[name]
    args = c.args()
    wrt = _wrt_tuple(c)
    value, grads = _call(c, _compiled(c), "value_and_grad", *args)
    grads = grads if isinstance(c.wrt, tuple) else (grads,)
    np.testing.assert_allclose(np.asarray(value), np.asarray(c.fn(*args)), rtol=1e-10,
                               atol=1e-12)
    num = numerical_vjp(c.fn, list(args), np.float64(1.0), list(wrt))
    rtol, atol = c.fd_tol
    for i, g, n in zip(wrt, grads, num):
        if isinstance(args[i], float):
            assert isinstance(g, float), f"gradient of a Python float is {type(g)}"
        np.testing.assert_allclose(np.asarray(g), n.reshape(np.shape(g)), rtol=rtol, atol=atol,
                                   err_msg=f"{name}: d/d arg {i}")


def _eager_grads(c, args):
    wrt = _wrt_tuple(c)
    ts = [llgrad.tensor(np.asarray(a, np.float64), requires_grad=True) if i in wrt else a
          for i, a in enumerate(args)]
    out = c.fn(*ts)
    out.backward()
    return [ts[i].grad.numpy() for i in wrt]


EAGER = sorted(n for n, c in CASES.items() if c.eager)


@pytest.mark.parametrize("name", EAGER)
def test_grad_matches_eager(name, monkeypatch):
    monkeypatch.setenv("LLGRAD_DISABLE_JIT", "1")
    c = CASES[name]
    args = c.args()
    grads = llgrad.differentiate(c.fn, wrt=_wrt_tuple(c)).grad(*args) if not c.unrolls else None
    if grads is None:
        with pytest.warns(UnrollWarning):
            grads = llgrad.differentiate(c.fn, wrt=_wrt_tuple(c)).grad(*args)
    for g, e in zip(grads, _eager_grads(c, args)):
        np.testing.assert_allclose(np.asarray(g), e.reshape(np.shape(g)), rtol=1e-9, atol=1e-12)


def test_corpus_size_and_kinds():
    assert len(CASES) >= 60
    kinds = {k for c in CASES.values() for k in c.kinds}
    for k in ("if", "elif", "ternary", "and", "or", "not", "chained compare", "for", "static",
              "traced bound", "for rows", "while", "break", "continue", "return in if",
              "return in loop", "nested loops", "piecewise", "rk4", "rnn", "lstm", "newton",
              "setitem", "augassign", "tuple unpacking", "helper"):
        assert k in kinds, k


# ---- trace counts -------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["recurrence", "nested_loops_cond", "newton_sqrt", "lstm",
                                  "early_return_loop", "for_traced_stop", "for_rows_cond",
                                  "while_traced_limit"])
def test_staged_traces_once_per_signature(name, monkeypatch):
    monkeypatch.setenv("LLGRAD_DISABLE_JIT", "1")
    c = CASES[name]
    d = _compiled(c)
    a0, a1 = c.args(0), c.args(1)
    for args in (a0, a1, a0):
        d(*args)
        d.grad(*args)
    assert d.cache_info() == {"signatures": 1, "traces": 1}
    assert d.inspect(*a0).path == "staged"


def test_new_signature_traces_again(monkeypatch):
    monkeypatch.setenv("LLGRAD_DISABLE_JIT", "1")
    d = llgrad.differentiate(cf_corpus.recurrence)
    d(np.ones(5)), d(np.ones(6)), d(np.ones(5)), d.grad(np.ones(6))
    assert d.cache_info() == {"signatures": 2, "traces": 2}


def test_traced_loops_are_loops_not_copies(monkeypatch):
    monkeypatch.setenv("LLGRAD_DISABLE_JIT", "1")
    d = llgrad.differentiate(cf_corpus.recurrence)
    small = d.inspect(np.ones(5)).stats["ops (traced)"]
    big = d.inspect(np.ones(500)).stats["ops (traced)"]
    assert small == big
    assert "for_loop" in str(d.inspect(np.ones(5)).graph)


def test_traced_condition_is_cond_op(monkeypatch):
    monkeypatch.setenv("LLGRAD_DISABLE_JIT", "1")
    d = llgrad.differentiate(cf_corpus.if_else)
    assert "cond" in str(d.inspect(np.ones(5)).graph)
    d2 = llgrad.differentiate(cf_corpus.newton_sqrt)
    assert "while_loop" in str(d2.inspect(np.ones(3)).graph)


# ---- unrolled loops -----------------------------------------------------------------------------
@pytest.mark.parametrize("name", sorted(n for n, c in CASES.items() if c.unrolls))
def test_unrolled_loop_warns_once_with_line(name, monkeypatch):
    monkeypatch.setenv("LLGRAD_DISABLE_JIT", "1")
    c = CASES[name]
    d = _compiled(c)
    args = c.args()
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        d(*args)
        d.grad(*args)
        d(*c.args(1))
    unroll = [x for x in w if issubclass(x.category, UnrollWarning)]
    assert len(unroll) == 1, [str(x.message) for x in unroll]
    msg = str(unroll[0].message)
    assert "cf_corpus.py:" in msg and "unrolled" in msg
    assert unroll[0].filename.endswith("cf_corpus.py")
    lines, first = __import__("inspect").getsourcelines(c.fn)
    loop_line = first + next(k for k, s in enumerate(lines) if s.strip().startswith("for "))
    assert unroll[0].lineno == loop_line, msg
    assert f"cf_corpus.py:{loop_line}" in msg


def test_unroll_reasons(monkeypatch):
    monkeypatch.setenv("LLGRAD_DISABLE_JIT", "1")
    with pytest.warns(UnrollWarning, match=r"reads the list `hs` it appends to"):
        llgrad.differentiate(cf_corpus.list_reads_back_by_a_slice)(np.ones(5))
    with pytest.warns(UnrollWarning, match=r"changes the shape/dtype of `h` from f64\[1\] to "
                                           r"f64\[2\]"):
        llgrad.differentiate(cf_corpus.growing_carry)(np.ones(3))


def _shrinking_tree(s0, n=4):
    v = np.maximum(1.0 - s0 * np.ones(n + 1), 0.0)
    for i in range(n - 1, -1, -1):
        s = s0 * 1.1 ** np.arange(i + 1)  # a shape from the counter
        v = np.maximum(0.5 * (v[1:] + v[:-1]), 1.0 - s)
    return v[0]


def _indexes_a_list(w, n=3):
    ws = [w[:k + 1] * k for k in range(n)]  # (of one shape, they would be stacked)
    t = 0.0
    for i in range(n):
        t = t + np.sum(ws[i] ** 2)  # a Python list at the counter
    return t


def test_unroll_reasons_name_the_line_that_needs_the_counter(monkeypatch):
    """A shape taken from the loop counter and a Python list indexed by it get different
    reasons and fixes (before, both said 'e.g. to index a list' and advised np.stack)."""
    monkeypatch.setenv("LLGRAD_DISABLE_JIT", "1")
    line = _shrinking_tree.__code__.co_firstlineno + 3
    with pytest.warns(UnrollWarning, match=rf"as a Python value at line {line} \(as a shape .*"
                                           r"mask the part in use"):
        llgrad.differentiate(_shrinking_tree)(0.5)
    line = _indexes_a_list.__code__.co_firstlineno + 4
    with pytest.warns(UnrollWarning, match=rf"indexes a Python list with the loop index at line "
                                           rf"{line}.*np\.stack\(Ws\)"):
        llgrad.differentiate(_indexes_a_list)(np.ones(3))
    line = _counter_in_a_list.__code__.co_firstlineno + 3
    with pytest.warns(UnrollWarning, match=rf"as a Python value at line {line} .*in a list of "
                                           r"numbers given to numpy.*np\.array\(\[i, 2\]\) "
                                           r"keeps it traced"):
        llgrad.differentiate(_counter_in_a_list)(np.ones(3))


def _counter_in_a_list(w):
    t = 0.0
    for i in range(3):
        t = t + w[i] * np.prod([i, 2])  # (numpy converts the list: it needs the number)
    return t


def test_the_counter_in_an_array_built_from_a_list_stays_one_loop():
    """np.array([i, 2]) builds a traced array: the loop stays one loop (it was unrolled)."""
    def f(w):
        t = 0.0
        for i in range(3):
            t = t + w[i] * np.prod(np.array([i, 2]))
        return t
    with warnings.catch_warnings():
        warnings.simplefilter("error", UnrollWarning)
        assert llgrad.differentiate(f)(np.ones(3)) == f(np.ones(3))


# ---- memory of long loops -----------------------------------------------------------------------
def long_scalar_loop(x):
    s = 0.0
    t = 1.0
    for i in range(1000000):
        s = 0.999 * s + np.sin(x[0]) * t
        t = 0.5 * t + 1e-3
    return s


def _tape_bytes(ir_text: str) -> int:
    total = 0
    for ln in ir_text.splitlines():
        m = re.search(r"= tape_new .*rows=(\d+)", ln)
        if m:
            elem = re.search(r"%\S+: (\w+)\[([\d, ]*)\] = tape_new", ln)
            dims = [int(d) for d in elem.group(2).split(",") if d.strip()]
            total += int(np.prod(dims)) * np.dtype(elem.group(1).replace("f", "float")
                                                      .replace("i", "int")).itemsize
    return total


def test_long_loop_tape_is_o_iterations_times_carried(monkeypatch):
    """A 1e6-iteration scalar loop is one loop op and its tape holds the carried scalars only:
    at most 8 bytes x iterations x carried scalars (s and t), as `inspect().stats` reports and
    as the joint IR's tape_new ops say.
    """
    monkeypatch.setenv("LLGRAD_DISABLE_JIT", "1")
    d = llgrad.differentiate(long_scalar_loop)
    ins = d.inspect(np.ones(1))
    assert ins.stats["ops (traced)"] < 30
    nbytes = _tape_bytes(str(ins.backward_ir))
    assert 8 * 999_999 <= nbytes <= 8 * 1_000_000 * 2, nbytes
    assert ins.stats["tape bytes (static)"] == nbytes
    assert 1 <= ins.stats["tapes"] <= 2


def nonlinear_recurrence(x):
    s = x[0] * 0.5  # traced from the start: the loop is not peeled
    for i in range(x.shape[0]):
        s = np.sin(s) + x[i]
    return s


def nonlinear_recurrence_traced_trips(x):
    s = 0.0
    for i in range(np.sum(x > 0.0)):
        s = np.sin(s) + x[i]
    return s


def test_stats_report_tape_bytes(monkeypatch):
    monkeypatch.setenv("LLGRAD_DISABLE_JIT", "1")
    stats = llgrad.differentiate(nonlinear_recurrence).inspect(np.ones(10)).stats
    assert stats["tapes"] == 1 and stats["tape bytes (static)"] == 10 * 8
    assert "tapes (growing)" not in stats
    stats = llgrad.differentiate(cf_corpus.recurrence).inspect(np.ones(10)).stats
    # s is not needed; sin(x[i]) (read by the mul's rule) and cos(x[i]) (sin's residual) are
    # taped, one row per iteration of range(1, 10) (none peeled; Note [Loop tapes])
    assert stats["tapes"] == 2 and stats["tape bytes (static)"] == 2 * 9 * 8
    stats = llgrad.differentiate(nonlinear_recurrence_traced_trips).inspect(np.ones(10)).stats
    assert stats["tapes"] == 1 and stats["tapes (growing)"] == 1
    assert stats["tape bytes (static)"] == 0


def _loop_ops(fn) -> int:
    return sum(op.prim.name in ("for_loop", "while_loop") for op in fn.walk())


@pytest.mark.parametrize("name", sorted(
    [n for n, c in CASES.items() if "stacked" in c.kinds]
    + ["while_in_for", "nested_loops_matvec", "triple_loop", "nested_break_inner"]))
def test_inner_loops_run_once_per_sweep(name, monkeypatch):
    """Note [Stacked inner tapes]: the joint function holds each loop twice, its forward and
    its reverse sweep; the outer reverse sweep does not rerun (re-tape) the inner loops."""
    monkeypatch.setenv("LLGRAD_DISABLE_JIT", "1")
    c = CASES[name]
    ins = _compiled(c).inspect(*c.args())
    assert _loop_ops(ins._c.joint) == 2 * _loop_ops(ins._c.forward)


def test_loop_in_a_branch_is_rerun_by_the_reverse_sweep(monkeypatch):
    """Stacking covers loops at the top of a loop body; one under a cond is recomputed (run
    again by the outer reverse sweep: one more loop op)."""
    monkeypatch.setenv("LLGRAD_DISABLE_JIT", "1")
    c = CASES["loop_in_branch_in_loop"]
    ins = _compiled(c).inspect(*c.args())
    assert _loop_ops(ins._c.forward) == 2  # the outer loop and the inner one, none peeled
    assert _loop_ops(ins._c.joint) == 2 * _loop_ops(ins._c.forward) + 1


# ---- minimal repros of bugs outside the tracer (transform/) ---------------------------------------
def test_ad_stores_carried_value_yielded_by_inner_cond():
    from llgrad.transform import ad, control, interp
    from llgrad.transform.builder import Builder
    b = Builder("g", loc=None)
    with b:
        x = b.param(((4,), np.float64), "x")

        def body(i, s, flag):
            s2 = s + x[i] ** 2
            f2, = control.cond(s2 > 0.8, lambda: np.bool_(True), lambda: flag)
            return s2, f2
        s, _ = control.for_loop(0, 4, 1, body, np.float64(0.0), np.bool_(False))
        b.fn.body.results = [s]
    g = ad.grad_function(b.fn, [0])
    xv = np.array([0.3, 0.5, 0.7, 0.2])
    value, grad = interp.run(g, xv)
    np.testing.assert_allclose(grad, 2 * xv)


def test_fuse_respects_values_captured_by_cond():
    from llgrad.transform import control, interp
    from llgrad.transform.builder import Builder
    from llgrad.transform.passes.pipeline import optimize
    b = Builder("f", loc=None)
    with b:
        x = b.param(((3,), np.float64), "x")
        a = x * 1.5
        c, = control.cond(np.max(x) > 0.2, lambda: a * np.exp(x), lambda: a)
        b.fn.body.results = [np.sum(c * a)]
    xv = np.array([0.1, 0.5, -0.3])
    a = xv * 1.5
    np.testing.assert_allclose(interp.run(optimize(b.fn), xv)[0], np.sum(a * np.exp(xv) * a))


def test_ad_zero_trip_loop_passes_init_gradient():
    from llgrad.transform import ad, control, interp
    from llgrad.transform.builder import Builder
    b = Builder("h", loc=None)
    with b:
        x = b.param(((3,), np.float64), "x")
        n = np.sum(x > 0.7)  # a traced trip count: 0 here
        out, = control.for_loop(0, n, 1, lambda i, c: np.sin(x[i]), np.sum(x) * 0.1)
        b.fn.body.results = [out]
    g = ad.grad_function(b.fn, [0])
    _, grad = interp.run(g, np.array([0.1, 0.2, 0.3]))
    np.testing.assert_allclose(grad, np.full(3, 0.1))


def const_mutated_after_use(x):
    c = np.ones(3)
    s = np.sum(x * c)
    c[0] = 5.0
    return s + np.sum(c)


def test_constant_array_mutated_after_use(monkeypatch):
    monkeypatch.setenv("LLGRAD_DISABLE_JIT", "1")
    x = np.array([1.0, 2.0, 3.0])
    assert llgrad.differentiate(const_mutated_after_use)(x) == const_mutated_after_use(x)


WEIGHTS = [0.5, 1.5, 2.0]


def loop_indexing_a_list(x):
    y = x
    for k in range(3):
        y = np.tanh(y * WEIGHTS[k])
    return np.sum(y)


def test_loop_index_used_on_a_python_list_unrolls_and_stays_staged(monkeypatch):
    # See Note [Unrolled loops]: the index is needed as a Python int, so the static-range loop
    # is unrolled (one warning naming the line); the function stays on the staged path.
    monkeypatch.delenv("LLGRAD_DISABLE_JIT", raising=False)
    x = np.array([0.3, -0.2])
    f = llgrad.differentiate(loop_indexing_a_list)
    with pytest.warns(UserWarning, match=r"test_control_flow.py:\d+ is unrolled .* loop index"):
        grad = f.grad(x)
    np.testing.assert_allclose(grad, fd_grad_simple(loop_indexing_a_list, x), rtol=1e-6)
    assert f.inspect(x).path == "staged"


def fd_grad_simple(f, x, eps=1e-6):
    return np.array([(f(x + eps * e) - f(x - eps * e)) / (2 * eps) for e in np.eye(x.size)])
