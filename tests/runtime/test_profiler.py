"""The autograd profiler: table columns and units, nesting (self time), record_function,
group_by_input_shape, Chrome trace, zero-cost when off."""
from __future__ import annotations

import json
import threading

import pytest

import llgrad as lg
from llgrad.autograd import Function
from llgrad.autograd.profiler import format_time, profile, record_function
from llgrad.runtime.autograd.state import PROFILER


class Sq(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx, g):
        x, = ctx.saved_tensors
        return 2 * x * g


def run(prof_kwargs=None):
    x = lg.randn(8, 4, requires_grad=True)
    w = lg.randn(4, 3, requires_grad=True)
    with profile(**(prof_kwargs or {})) as prof:
        for _ in range(3):
            with record_function("step"):
                Sq.apply(x @ w).sum().backward()
    return prof


def test_records_forward_ops_backward_nodes_and_functions():
    prof = run()
    avg = {e.key: e for e in prof.key_averages()}
    for name in ("lg::matmul", "lg::reduce_sum", "Sq", "SqBackward", "SumBackward0",
                 "AccumulateGrad", "step"):
        assert name in avg, name
    assert avg["step"].count == 3 and avg["AccumulateGrad"].count == 6
    assert any(k.endswith("Backward0") for k in avg)


def test_table_columns_units_and_footer():
    table = run().key_averages().table(sort_by="self_cpu_time_total", row_limit=4)
    lines = table.splitlines()
    header = lines[1].split()
    assert " ".join(header) == ("Name Self CPU % Self CPU CPU total % CPU total CPU time avg "
                                "# of Calls")
    assert lines[-1].startswith("Self CPU time total: ")
    assert lines[-1].endswith(("us", "ms", "s"))
    rows = [ln for ln in lines[3:-2]]
    assert len(rows) == 4
    assert all("%" in r for r in rows)
    # sorted by self time: the first row's Self CPU % is the largest
    pcts = [float(r.split()[1].rstrip("%")) for r in rows]
    assert pcts == sorted(pcts, reverse=True)


def test_nesting_self_time_excludes_children():
    prof = run()
    ev = {e.key: e for e in prof.key_averages()}
    step = ev["step"]
    assert step.cpu_time_total > step.self_cpu_time_total
    total = prof.key_averages().self_cpu_time_total
    assert abs(step.cpu_time_total - total) / total < 0.05  # everything ran inside "step"


def test_record_function_as_decorator_and_sort_keys():
    @record_function("my_fn")
    def f(x):
        return x * 2

    with profile() as prof:
        f(lg.ones(2))
    assert [e.key for e in prof.key_averages()] == ["my_fn", "lg::mul"]
    for key in ("cpu_time_total", "cpu_time", "count", "self_cpu_time_total"):
        prof.key_averages().table(sort_by=key)
    with pytest.raises(ValueError, match="unknown key; use one of"):
        prof.key_averages().table(sort_by="cuda_memory")


def test_group_by_input_shape():
    prof = run({"record_shapes": True})
    table = prof.key_averages(group_by_input_shape=True).table(row_limit=100)
    assert "Input Shapes" in table and "[[8, 4], [4, 3]]" in table
    with pytest.raises(RuntimeError, match="record_shapes=True"):
        run().key_averages(group_by_input_shape=True)


def test_chrome_trace(tmp_path):
    prof = run({"record_shapes": True})
    path = tmp_path / "trace.json"
    prof.export_chrome_trace(str(path))
    data = json.loads(path.read_text())
    xs = [e for e in data["traceEvents"] if e["ph"] == "X"]
    assert xs and all({"name", "ts", "dur", "pid", "tid"} <= set(e) for e in xs)
    assert all(e["dur"] >= 0 for e in xs)
    steps = sorted((e for e in xs if e["name"] == "step"), key=lambda e: e["ts"])
    inner = [e for e in xs if steps[0]["ts"] <= e["ts"] < steps[0]["ts"] + steps[0]["dur"]]
    assert len(inner) > 5


def test_off_costs_nothing_and_profilers_nest():
    assert PROFILER[0] is None
    with profile() as outer:
        lg.ones(2) * 2
        with profile() as inner:
            lg.ones(2) + 1
        assert PROFILER[0] is outer
    assert PROFILER[0] is None
    assert [e.key for e in inner.key_averages()] == ["lg::add"]
    assert [e.key for e in outer.key_averages()] == ["lg::mul"]
    with profile(enabled=False) as p:
        assert PROFILER[0] is None
    with pytest.raises(RuntimeError, match="Profiler didn't finish running"):
        with profile() as p:
            p.key_averages()


def test_threads_nest_separately():
    def work():
        with record_function("worker"):
            lg.ones(3) * 3

    with profile() as prof:
        ts = [threading.Thread(target=work) for _ in range(2)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
    ev = {e.key: e for e in prof.key_averages()}
    assert ev["worker"].count == 2 and ev["lg::mul"].count == 2


def test_format_time_and_aliases():
    assert format_time(12.3456) == "12.346us"
    assert format_time(1234.5) == "1.234ms" or format_time(1234.5) == "1.235ms"
    assert format_time(2.5e6) == "2.500s"
    import llgrad.profiler
    assert lg.profiler.profile is profile and llgrad.profiler.record_function is record_function
