"""Checkpointed loops beyond the top-level static `for` (transform/checkpoint.py): one loop
marked with `llgrad.checkpointed` (nested, in a branch, over rows), the "log" schedule
(Note [Logarithmic checkpointing]) and while loops (Note [Checkpointed while loops]): values
and gradients equal the plain loop's and finite differences, and the tapes shrink as
promised (from the stats, or the longest tape the interpreter fills)."""
from __future__ import annotations

import numpy as np
import pytest

import llgrad
from llgrad.runtime.errors import UnsupportedError
from llgrad.runtime.ops.control import Tape
from llgrad.runtime.ops.elementwise import sin_p
from tests.e2e.conftest import finite_differences
from tests.e2e.test_checkpoint import recurrence


def marked_first(x):
    s = x[0]
    for i in llgrad.checkpointed(range(1, len(x))):  # checkpointed
        s = 0.9 * s + np.sin(x[i]) * x[i - 1]
    t = s
    for i in range(1, len(x)):  # not checkpointed
        t = 0.5 * t + np.cos(x[i] * t)
    return s + t


def marked_inner(w, x):
    s = w * 0.0
    for r in range(3):
        for i in llgrad.checkpointed(range(x.shape[0]), schedule=4):
            s = np.cos(s) * w * 0.5 + x[i] * (r + 1) * 0.1
    return np.sum(s * s)


def marked_in_branch(w, x):
    s = w * 1.0
    if np.sum(w) > 0.0:
        for i in llgrad.checkpointed(range(x.shape[0]), schedule="log"):
            s = np.sin(s * x[i]) + w
    else:
        s = s * 2.0
    return np.sum(s)


def marked_rows_nested(w, xs):
    h = w * 0.0
    for row in llgrad.checkpointed(xs):  # the rows of an array
        for k in llgrad.checkpointed(range(5), schedule=2):
            h = np.tanh(h * w + row * 0.3 + k * 0.01)
    return np.sum(h ** 2)


def marked_while(x):
    s = x * 0.0 + 1.0
    c = 0
    while llgrad.checkpointed(c < 23, schedule=4):
        s = np.sin(s) * x + 0.1
        c = c + 1
    return np.sum(s)


def traced_while(x):
    s = x * 0.5
    while llgrad.checkpointed(np.sum(s * s) < 40.0, schedule=3):  # the test is traced
        s = s * 1.1 + np.sin(s) * 0.05
    return np.sum(np.cos(s))


def broken_for(x):
    s = x * 0.0
    for i in llgrad.checkpointed(range(40), schedule=5):  # break: a while loop
        s = np.cos(s) + x * 0.1
        if np.sum(s) > 1e6:
            break
    return np.sum(s)


CASES = [
    (marked_first, lambda r: (r.normal(size=30),), 0),
    (marked_inner, lambda r: (r.normal(size=2), r.normal(size=11)), (0, 1)),
    (marked_in_branch, lambda r: (np.abs(r.normal(size=3)), r.normal(size=13)), (0, 1)),
    (marked_rows_nested, lambda r: (r.normal(size=3), r.normal(size=(9, 3))), (0, 1)),
    (marked_while, lambda r: (r.normal(size=4),), 0),
    (traced_while, lambda r: (np.abs(r.normal(size=3)) + 0.5,), 0),
    (broken_for, lambda r: (r.normal(size=3),), 0),
]


@pytest.mark.parametrize("fn,make,wrt", CASES, ids=[c[0].__name__ for c in CASES])
def test_marked_loops_give_the_plain_gradient(fn, make, wrt, mode, monkeypatch):
    args = make(np.random.default_rng(5))
    f = llgrad.differentiate(fn, wrt=wrt)
    value, grads = f.value_and_grad(*args)
    with monkeypatch.context() as m:  # the same loops unmarked
        m.setattr(llgrad, "checkpointed", lambda v, schedule=None: v, raising=False)
        v0, g0 = llgrad.differentiate(fn, wrt=wrt).value_and_grad(*args)
    np.testing.assert_allclose(value, fn(*args), rtol=1e-12)  # as Python: the marker is a no-op
    np.testing.assert_allclose(value, v0, rtol=1e-12)
    wrt = wrt if isinstance(wrt, tuple) else (wrt,)
    grads, g0 = (grads, g0) if len(wrt) > 1 else ((grads,), (g0,))
    for g, h, k in zip(grads, g0, wrt):
        np.testing.assert_allclose(g, h, rtol=1e-11, atol=1e-13)
        np.testing.assert_allclose(g, finite_differences(fn, args, [k])[0], rtol=1e-6,
                                   atol=1e-8)
    if mode == "native":
        st = f.inspect(*args).stats
        assert st["checkpointed loops"] == (2 if fn is marked_rows_nested else 1)


def test_only_the_marked_loop_is_checkpointed():
    x = np.random.default_rng(0).normal(size=400)
    st = llgrad.differentiate(marked_first).inspect(x).stats
    whole = llgrad.differentiate(recurrence).inspect(x).stats["tape bytes (static)"]
    plain = st["tape bytes (static, without checkpointing)"]
    # the unmarked loop keeps its tapes (about the recurrence's, one value more per row),
    # the marked one (as large unmarked) shrinks to O(sqrt n)
    assert whole < st["tape bytes (static)"] < plain - 0.8 * whole


def nonlinear(x):  # the reverse sweep reads the carried state (cos(s)): it is taped
    s = x[0]
    for i in range(1, len(x)):
        s = np.sin(s) * 0.9 + x[i] * x[i - 1]
    return s


def _stats(fn, n, **kw):
    x = np.random.default_rng(0).normal(size=n)
    return llgrad.differentiate(fn, **kw).inspect(x).stats


def test_log_schedule_tape_grows_as_log_n():
    small, large = _stats(nonlinear, 1_000, checkpoint="log"), \
        _stats(nonlinear, 64_000, checkpoint="log")
    sqrt = _stats(nonlinear, 64_000, checkpoint="sqrt")["tape bytes (static)"]
    # 64x the iterations: log4(64) = 3 more levels of at most 2 * 4 + 1 rows of 8 bytes
    assert large["tape bytes (static)"] - small["tape bytes (static)"] <= 3 * 9 * 8
    assert large["tape bytes (static)"] < sqrt / 10
    plain = large["tape bytes (static, without checkpointing)"]
    assert large["tape bytes (static)"] < plain / 1000


def _longest_tape(monkeypatch, fn, *args, **kw) -> int:
    """The most rows any tape held while the interpreter ran fn's gradient."""
    monkeypatch.setenv("LLGRAD_DISABLE_JIT", "1")
    most = [0]
    push = Tape.push

    def counting(self, x, *mask):
        most[0] = max(most[0], self.n + 1)
        return push(self, x, *mask)

    monkeypatch.setattr(Tape, "push", counting)
    llgrad.differentiate(fn, **kw).grad(*args)
    return most[0]


def newton(a, k=None):
    x = a * 0.0 + 1.0
    c = 0
    while c < 400:  # a staged while loop (c is carried)
        x = 0.5 * (x + a / x) + 0.001 * np.sin(x)
        c = c + 1
    return np.sum(x)


def test_while_loop_tapes_shrink(monkeypatch):
    a = np.array([2.0, 3.0])
    plain = _longest_tape(monkeypatch, newton, a)
    segmented = _longest_tape(monkeypatch, newton, a, checkpoint=20)
    assert plain >= 400
    assert segmented <= 21  # 20 segments of 20 iterations: O(n/k + k)
    g, g0 = (llgrad.differentiate(newton, checkpoint=c).grad(a) for c in (20, None))
    np.testing.assert_allclose(g, g0, rtol=1e-12)
    np.testing.assert_allclose(g, finite_differences(newton, (a,), [0])[0], rtol=1e-6)


def test_log_schedule_reruns_at_most_log_n_levels(monkeypatch):
    x = np.random.default_rng(1).normal(size=1025) * 0.5
    assert _longest_tape(monkeypatch, nonlinear, x) >= 1024
    assert _longest_tape(monkeypatch, nonlinear, x, checkpoint="sqrt") <= 33
    assert _longest_tape(monkeypatch, nonlinear, x, checkpoint="log") <= 5
    sins = [0]
    impl = sin_p.impl

    def counting(*a, **k):
        sins[0] += 1
        return impl(*a, **k)

    object.__setattr__(sin_p, "impl", counting)  # a frozen record: no monkeypatch.setattr
    try:
        llgrad.differentiate(nonlinear, checkpoint="log").grad(x)
    finally:
        object.__setattr__(sin_p, "impl", impl)
    # 1024 -> 256 -> 64 -> 16 -> 4: the forward once, then once more per level
    assert 1024 * 4 <= sins[0] <= 1024 * 5


# -- what stays unsupported ----------------------------------------------------------------
def sqrt_while(x):
    c = 0
    while llgrad.checkpointed(c < 10):
        x = np.sin(x)
        c = c + 1
    return np.sum(x)


def runtime_log(x, n):
    s = x * 0.0
    for i in llgrad.checkpointed(range(n), schedule="log"):
        s = np.sin(s + x * i)
    return np.sum(s)


def runtime_sqrt(x, n):
    s = x * 0.0
    for i in llgrad.checkpointed(range(1, n)):  # sqrt of the trip count, counted at run time
        s = np.sin(s * 0.9 + x * i * 0.01)
    return np.sum(s)


def runtime_bounds_k(x, n, m):
    s = x * 0.0
    for i in llgrad.checkpointed(range(n, m), schedule=4):  # n, m traced: a while loop
        s = np.sin(s + x * i * 0.01)
    for i in llgrad.checkpointed(range(m, n, -3), schedule=2):
        s = np.cos(s * x + i * 0.01)
    return np.sum(s)


@pytest.mark.parametrize("n,m", [(3, 40), (5, 5), (7, 3)])
def test_marked_loop_with_runtime_bounds(n, m, monkeypatch):
    x = np.linspace(0.5, 1.5, 3)
    args = (x, np.array(n), np.array(m))
    f = llgrad.differentiate(runtime_bounds_k)
    v, g = f.value_and_grad(*args)
    np.testing.assert_allclose(v, runtime_bounds_k(x, n, m), rtol=1e-12)
    np.testing.assert_allclose(g, finite_differences(runtime_bounds_k, args, [0])[0],
                               rtol=1e-6, atol=1e-8)
    assert f.inspect(*args).stats["checkpointed loops"] == 2
    if (n, m) == (3, 40):
        assert _longest_tape(monkeypatch, runtime_bounds_k, *args) <= 10


@pytest.mark.parametrize("n", [0, 2, 5, 400])
def test_marked_loop_with_runtime_bounds_sqrt(n, mode):
    x = np.linspace(0.5, 1.5, 3)
    args = (x, np.array(n))
    f = llgrad.differentiate(runtime_sqrt)
    v, g = f.value_and_grad(*args)
    np.testing.assert_allclose(v, runtime_sqrt(x, n), rtol=1e-12)
    np.testing.assert_allclose(g, finite_differences(runtime_sqrt, args, [0])[0], rtol=1e-6,
                               atol=1e-8)


def test_runtime_sqrt_segments(monkeypatch):
    args = (np.linspace(0.5, 1.5, 3), np.array(401))
    assert _longest_tape(monkeypatch, runtime_sqrt, *args) <= 21  # k = 21 for n = 400


def test_unsupported_marks_name_the_line():
    with pytest.raises(UnsupportedError, match=r'schedule="sqrt"\) on a while loop(.|\n)*'
                       r'test_checkpoint_loops.py:\d+(.|\n)*checkpointed\(test, schedule=k\)'):
        llgrad.differentiate(sqrt_while).grad(np.ones(3))
    with pytest.raises(UnsupportedError, match=r'schedule="log"\) on a loop whose trip count '
                       r"is known only at run time(.|\n)*test_checkpoint_loops.py:\d+(.|\n)*"
                       r'schedule="sqrt"'):
        llgrad.differentiate(runtime_log).grad(np.ones(5), np.array(4))  # a traced n
    with pytest.raises(UnsupportedError, match="schedule='sqr' is not a checkpoint schedule"):
        llgrad.checkpointed(range(3), schedule="sqr")


def test_marker_runs_as_python_and_eagerly():
    assert list(llgrad.checkpointed(range(2, 5))) == [2, 3, 4]
    assert len(llgrad.checkpointed(range(7), 3)) == 7
    assert not llgrad.checkpointed(np.float64(0.0) > 1.0, 4)
    w = llgrad.tensor(np.linspace(0.1, 0.5, 3), requires_grad=True)
    xs = np.linspace(-1.0, 1.0, 27).reshape(9, 3)
    out = marked_rows_nested(w, xs)
    out.backward()
    g = llgrad.differentiate(marked_rows_nested).grad(w.detach().numpy(), xs)
    np.testing.assert_allclose(w.grad.numpy(), g, rtol=1e-12)
