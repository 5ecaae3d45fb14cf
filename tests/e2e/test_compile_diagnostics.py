"""What a compile tells the user: phase times in inspect().stats, one PerformanceWarning per
slow path (unrolled loop, dynamic path, retracing) with line, reason, cost and rewrite, and
the compile log (LLGRAD_LOG=compiles / llgrad.config.update("log_compiles", True))."""
from __future__ import annotations

import inspect
import re
import logging
import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pytest

import llgrad
from llgrad.runtime import config
from llgrad.runtime.errors import DynamicPathWarning, RetraceWarning, UnrollWarning

SCALE = 2.0
PHASES = ("trace time", "optimize time", "autodiff time", "lowering time (joint)",
          "llvm parse time (joint)", "llvm optimize time (joint)", "machine code time (joint)",
          "codegen time (joint)")


def _line(fn, text: str) -> int:
    lines, first = inspect.getsourcelines(fn)
    return first + next(k for k, s in enumerate(lines) if text in s)


def loss(x, w):
    return np.sum(np.tanh(x * w) * SCALE)


def appends(x):
    hs = []
    for k in range(6):
        x = np.sin(x) + 0.1 * k
        hs.append(x[: k + 1])  # a different length each iteration: cannot be staged
    return np.sum(np.concatenate(hs))


def dynamic(x):
    k = int(np.sum(x > 0))
    return np.sum(x[:k] ** 2)


@pytest.fixture
def native(monkeypatch):
    monkeypatch.delenv("LLGRAD_DISABLE_JIT", raising=False)


@pytest.fixture
def log_compiles(caplog):
    config.update("log_compiles", True)
    caplog.set_level(logging.WARNING, logger="llgrad")
    yield caplog
    config.update("log_compiles", None)


def _messages(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "llgrad"]


# ---- phases -----------------------------------------------------------------------------
def test_stats_have_every_phase(native):
    f = llgrad.differentiate(loss)
    f.value_and_grad(np.ones(3), np.ones(3))
    stats = f.inspect(np.ones(3), np.ones(3)).stats
    for key in PHASES:
        assert isinstance(stats[key], float) and stats[key] >= 0, key
    assert stats["opt level (joint)"] in (0, 1, 2)
    assert "trace time" in str(stats) and " ms" in str(stats)


def test_one_time_costs_are_reported_by_the_compile_that_paid_them():
    code = """
        import numpy as np, llgrad
        def f(x):
            return np.sum(np.sin(x))
        def g(x):
            return np.sum(np.cos(x))
        a, b = llgrad.differentiate(f), llgrad.differentiate(g)
        a.value_and_grad(np.ones(3)); b.value_and_grad(np.ones(3))
        first = next(iter(a._cache.values())).stats
        second = next(iter(b._cache.values())).stats
        assert first["one-time: imports"] > 0 and first["one-time: JIT set-up"] > 0
        assert "one-time: support module" not in first  # its functions came with f's
        assert not [k for k in second if k.startswith("one-time")], second
    """
    r = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                       text=True, timeout=120, env={"PATH": "/usr/bin:/bin"})
    assert r.returncode == 0, r.stderr


# ---- warnings ---------------------------------------------------------------------------
def test_unrolled_loop_warns_once_with_line_reason_cost_and_fix(native):
    f = llgrad.differentiate(appends)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        f(np.ones(3))
        f.grad(np.ones(3))
        f(np.ones(3))
    got = [x for x in w if issubclass(x.category, UnrollWarning)]
    assert len(got) == 1, [str(x.message) for x in got]
    line = _line(appends, "for k in range(6)")
    assert (got[0].filename, got[0].lineno) == (__file__, line)
    assert issubclass(UnrollWarning, llgrad.PerformanceWarning)
    assert issubclass(llgrad.PerformanceWarning, UserWarning)
    assert re.search(
        rf"the loop at {re.escape(__file__)}:{line} is unrolled at trace time because it "
        r"appends an array whose shape changes across iterations \(a slice of loop-dependent "
        r"length\) to the list `hs` \(`\.append\(\)` at .*\); it compiles one copy of the body "
        r"per iteration: 6 copies, ~[\d.]+ ms each \([\d.]+ ms in all for this signature\)\. "
        r"To compile it as one loop: give the loop's variables one shape",
        str(got[0].message)), str(got[0].message)


def test_dynamic_path_warns_once_with_line_cost_and_fix():
    f = llgrad.differentiate(dynamic)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        for _ in range(3):
            f.grad(np.array([1.0, -1.0, 2.0]))
    got = [x for x in w if issubclass(x.category, DynamicPathWarning)]
    assert len(got) == 1, [str(x.message) for x in got]
    line = _line(dynamic, "int(np.sum")
    assert (got[0].filename, got[0].lineno) == (__file__, line)
    assert re.search(rf"dynamic takes the dynamic path at {re.escape(__file__)}:{line} because "
                     r"int\(\) of a traced value.* It is traced again on every call: ~[\d.]+ ms "
                     r"per call instead of ~10 us for compiled code\. To stay compiled: \S",
                     str(got[0].message)), str(got[0].message)
    assert f.inspect(np.ones(3)).path.startswith("dynamic")


def number_then_math(x):
    return float(x[0]) ** 2 + np.sum(x)


def test_dynamic_path_of_a_conversion_to_a_number_says_no_gradient_flows_through_it():
    # DESIGN: a concretised value is a constant from then on (as in PyTorch); the warning
    # says so where it happens, so the missing term of the gradient is never a surprise.
    f = llgrad.differentiate(number_then_math)
    x = np.array([3.0, 1.0, 2.0])
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        v, g = f.value_and_grad(x)
    assert v == number_then_math(x) and np.array_equal(g, np.ones(3))
    got = [str(m.message) for m in w if issubclass(m.category, DynamicPathWarning)]
    assert len(got) == 1 and re.search(
        r"because float\(\) of a traced value.* To stay compiled: keep it an array \(x\[0\] "
        r"rather than float\(x\[0\]\).*no gradient flows through it, as in PyTorch", got[0]), got


def test_performance_warnings_can_be_silenced_by_category():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        warnings.filterwarnings("ignore", category=llgrad.PerformanceWarning)
        llgrad.differentiate(dynamic).grad(np.ones(3))
        llgrad.differentiate(appends).grad(np.ones(3))


def test_retracing_on_most_calls_warns_once_with_the_reason(no_jit):
    f = llgrad.differentiate(loss)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        for n in range(1, 13):
            f(np.ones(n), np.ones(n))
    got = [x for x in w if issubclass(x.category, RetraceWarning)]
    assert len(got) == 1, [str(x.message) for x in got]
    msg = str(got[0].message)
    assert "loss was traced 8 times in its last 10 calls" in msg
    assert re.search(r"argument 'x' changed from f64\[\d+\] to f64\[\d+\].*each shape of x "
                     r"compiles separately", msg), msg
    assert got[0].lineno == _line(loss, "def loss")


def scaled(x, n):
    return np.sum(x) * n


def test_retrace_of_a_static_argument_names_it(no_jit):
    f = llgrad.differentiate(scaled)
    with pytest.warns(RetraceWarning, match=r"argument 'n' changed from static 6 to static 7.*"
                                            r"n is a static argument"):
        for n in range(10):
            f(np.ones(3), n)


def test_occasional_retraces_do_not_warn(no_jit):
    f = llgrad.differentiate(loss)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RetraceWarning)
        for n in range(1, 12):
            for _ in range(3):  # each new shape, then two calls of compiled code
                f(np.ones(n), np.ones(n))


# ---- the compile log --------------------------------------------------------------------
def test_log_first_call_and_phases(native, log_compiles):
    f = llgrad.differentiate(loss)
    f.value_and_grad(np.ones(3), np.ones(3))
    msgs = _messages(log_compiles)
    assert "llgrad: tracing loss (first call)" in msgs
    compiled = [m for m in msgs if m.startswith("llgrad: compiled loss (joint, (f64[3], f64[3]))")]
    assert len(compiled) == 1, msgs
    for part in ("trace", "IR passes", "autodiff", "lowering", "LLVM optimisation",
                 "machine code"):
        assert re.search(rf"{part} [\d.]+ ms", compiled[0]), (part, compiled[0])


def test_log_new_signature_names_the_argument(no_jit, log_compiles):
    f = llgrad.differentiate(loss)
    f(np.ones(3), np.ones(3))
    f(np.ones(3), np.ones(3))  # compiled: not traced, not logged
    f(np.ones(4), np.ones(4))
    traces = [m for m in _messages(log_compiles) if "tracing" in m]
    assert traces == ["llgrad: tracing loss (first call)",
                      "llgrad: tracing loss (argument 'x' changed from f64[3] to f64[4])"]


def test_log_failed_guard_names_the_global(no_jit, log_compiles, monkeypatch):
    f = llgrad.differentiate(loss)
    f(np.ones(3), np.ones(3))
    monkeypatch.setitem(globals(), "SCALE", 3.0)
    assert f(np.ones(3), np.ones(3)) == pytest.approx(3.0 * np.sum(np.tanh(np.ones(3))))
    assert ("llgrad: tracing loss (global 'SCALE' changed (a value the compiled code holds "
            "as a constant))") in _messages(log_compiles)


def test_log_dynamic_graphs(no_jit, log_compiles):
    f = llgrad.differentiate(dynamic)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DynamicPathWarning)
        f(np.array([1.0, -1.0, 2.0]))
        f(np.array([1.0, -1.0, 2.0]))  # the same graph: not new
        f(np.array([1.0, 1.0, 2.0]))
    msgs = _messages(log_compiles)
    assert any(m.startswith("llgrad: dynamic takes the dynamic path for (f64[3]): int() of a "
                            "traced value") for m in msgs), msgs
    assert [m.split(" (")[0] for m in msgs if "new dynamic graph" in m] == [
        "llgrad: dynamic: new dynamic graph #1", "llgrad: dynamic: new dynamic graph #2"]


def test_without_log_compiles_the_records_are_debug(no_jit, caplog):
    caplog.set_level(logging.DEBUG, logger="llgrad")
    llgrad.differentiate(loss)(np.ones(3), np.ones(3))
    records = [r for r in caplog.records if r.name == "llgrad"]
    assert records and all(r.levelno == logging.DEBUG for r in records)


def test_log_compiles_from_the_environment(no_jit, monkeypatch, caplog):
    monkeypatch.setenv("LLGRAD_LOG", "compiles")
    caplog.set_level(logging.WARNING, logger="llgrad")
    llgrad.differentiate(loss)(np.ones(3), np.ones(3))
    assert "llgrad: tracing loss (first call)" in _messages(caplog)


def test_config_update_refuses_unknown_options():
    with pytest.raises(ValueError, match="llgrad.config has no option 'log_compile'; options: "
                                         "log_compiles, opt_level"):
        llgrad.config.update("log_compile", True)




APPENDS = llgrad.differentiate(appends)


def uses_appends(x):
    value, grad = APPENDS.value_and_grad(x)  # inlined into this trace
    return value + np.sum(grad)


def test_unrolled_loop_inside_an_inlined_gradient_warns_once(no_jit):
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        f = llgrad.differentiate(uses_appends)
        f(np.ones(3))
        f(np.ones(4))
    got = [x for x in w if issubclass(x.category, UnrollWarning)]
    assert len(got) == 1 and got[0].lineno == _line(appends, "for k in range(6)"), \
        [str(x.message) for x in got]
    assert "6 copies" in str(got[0].message)


def test_a_function_without_source_warns_that_its_control_flow_is_not_compiled(no_jit):
    ns: dict = {}
    exec("import numpy as np\ndef nosrc(x):\n    return np.sum(x * 2.0)\n", ns)
    with pytest.warns(llgrad.PerformanceWarning, match="the source of nosrc is not available"):
        assert llgrad.differentiate(ns["nosrc"])(np.ones(3)) == 6.0


def test_a_trace_past_the_op_cap_stops_at_the_users_line(monkeypatch):
    # a function without source runs its loops as Python while tracing: one body per step
    from llgrad.transform import builder
    monkeypatch.setattr(builder, "MAX_TRACE_OPS", 500)
    ns = {"np": np}
    exec("def many(x):\n    s = 0.0\n    for i in range(10000):\n        s = s + np.sin(x)\n"
         "    return s\n", ns)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", llgrad.PerformanceWarning)
        with pytest.raises(llgrad.errors.LLGradError,
                           match=r"(?s)the trace of many has grown past 500 operations.*"
                                 r"at <string>:4 .*How to fix: define the function in a \.py"):
            llgrad.differentiate(ns["many"]).grad(1.0)
