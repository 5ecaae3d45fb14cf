"""The autograd profiler (torch.autograd.profiler): `profile` records every forward primitive
(`lg::mul`), backward node (`MulBackward0`, `AccumulateGrad`), custom Function and
`record_function` range with wall time; `key_averages().table()` and `export_chrome_trace()`.

The eager runtime calls `PROFILER[0].begin(name, arrays)` / `.end()` only while a profiler is
active, so nothing is paid when none is (PROFILER[0] is None). Ranges nest per thread; a
range's self time excludes its children.
"""
from __future__ import annotations

import json
import os
import threading
import time
from collections import OrderedDict

from llgrad.runtime.autograd.state import PROFILER

__all__ = ["profile", "record_function", "EventList", "FunctionEvent", "FunctionEventAvg"]


def format_time(us: float) -> str:
    """Human time units, as PyTorch prints them: 1.234s, 12.345ms, 123.456us."""
    if us >= 1e6:
        return f"{us / 1e6:.3f}s"
    if us >= 1e3:
        return f"{us / 1e3:.3f}ms"
    return f"{us:.3f}us"


class FunctionEvent:
    """One recorded range: name, start and duration (microseconds), self time, input shapes."""

    __slots__ = ("name", "start_us", "cpu_time_total", "self_cpu_time_total", "input_shapes",
                 "thread", "depth")

    def __init__(self, name, start_us, cpu_time_total, self_cpu_time_total, input_shapes,
                 thread, depth):
        self.name, self.start_us = name, start_us
        self.cpu_time_total, self.self_cpu_time_total = cpu_time_total, self_cpu_time_total
        self.input_shapes, self.thread, self.depth = input_shapes, thread, depth

    key = property(lambda self: self.name)
    count = property(lambda self: 1)
    cpu_time = property(lambda self: self.cpu_time_total)

    def __repr__(self) -> str:
        return (f"<FunctionEvent name={self.name} cpu_time_total={format_time(self.cpu_time_total)}"
                f" self_cpu_time_total={format_time(self.self_cpu_time_total)}>")


class FunctionEventAvg:
    """Events with one key (name, and input shapes when grouped by them), summed."""

    def __init__(self, key, input_shapes=None):
        self.key, self.input_shapes = key, input_shapes
        self.count = 0
        self.cpu_time_total = self.self_cpu_time_total = 0.0

    def add(self, ev: FunctionEvent) -> None:
        self.count += 1
        self.cpu_time_total += ev.cpu_time_total
        self.self_cpu_time_total += ev.self_cpu_time_total

    @property
    def cpu_time(self) -> float:
        return self.cpu_time_total / self.count if self.count else 0.0

    @property
    def self_cpu_time(self) -> float:
        return self.self_cpu_time_total / self.count if self.count else 0.0

    def __repr__(self) -> str:
        return (f"<FunctionEventAvg key={self.key} count={self.count} "
                f"cpu_time_total={format_time(self.cpu_time_total)} "
                f"self_cpu_time_total={format_time(self.self_cpu_time_total)}>")


_SORT_KEYS = ("self_cpu_time_total", "cpu_time_total", "cpu_time", "self_cpu_time", "count")


class EventList(list):
    """A list of events (or averages) that prints as PyTorch's profiler table."""

    def __init__(self, items=(), with_shapes: bool = False):
        super().__init__(items)
        self._with_shapes = with_shapes

    @property
    def self_cpu_time_total(self) -> float:
        return sum(e.self_cpu_time_total for e in self)

    def table(self, sort_by: str | None = None, row_limit: int = 100, max_name_column_width=55,
              header: str | None = None, top_level_events_only: bool = False) -> str:
        """The table: Name, Self CPU %, Self CPU, CPU total %, CPU total, CPU time avg,
        # of Calls (and Input Shapes when grouped by them), then "Self CPU time total"."""
        rows = list(self)
        if top_level_events_only:
            rows = [e for e in rows if getattr(e, "depth", 0) == 0]
        if sort_by is not None:
            if sort_by not in _SORT_KEYS:
                raise ValueError(f"table(sort_by={sort_by!r}): unknown key; use one of "
                                 f"{', '.join(_SORT_KEYS)}")
            rows.sort(key=lambda e: getattr(e, sort_by), reverse=True)
        total_self = self.self_cpu_time_total
        if row_limit is not None and row_limit > 0:
            rows = rows[:row_limit]
        names = [str(e.key) for e in rows]
        name_w = min(max([len("Name")] + [len(n) for n in names]) + 2, max_name_column_width)
        cols = ["Self CPU %", "Self CPU", "CPU total %", "CPU total", "CPU time avg",
                "# of Calls"]
        widths = [12] * len(cols)
        shapes = self._with_shapes
        if shapes:
            cols.append("Input Shapes")
            widths.append(max([12] + [len(str(e.input_shapes)) for e in rows]) + 2)
        line = "-" * name_w + "  " + "  ".join("-" * w for w in widths) + "  "

        def fmt_row(name, values):
            name = name if len(name) <= name_w else name[:name_w - 3] + "..."
            return f"{name:>{name_w}}  " + "  ".join(f"{v:>{w}}" for v, w in zip(values, widths)) \
                + "  "

        pct = (lambda x: f"{100 * x / total_self:.2f}%") if total_self > 0 else \
            (lambda x: "0.00%")
        out = []
        if header:
            out.append("=" * len(line))
            out.append(header)
        out += [line, fmt_row("Name", cols), line]
        for n, e in zip(names, rows):
            vals = [pct(e.self_cpu_time_total), format_time(e.self_cpu_time_total),
                    pct(e.cpu_time_total), format_time(e.cpu_time_total),
                    format_time(e.cpu_time), str(e.count)]
            if shapes:
                vals.append(str(e.input_shapes))
            out.append(fmt_row(n, vals))
        out.append(line)
        out.append(f"Self CPU time total: {format_time(total_self)}")
        return "\n".join(out) + "\n"

    def __str__(self) -> str:
        return self.table()

    def key_averages(self, group_by_input_shape: bool = False) -> "EventList":
        groups: OrderedDict = OrderedDict()
        for ev in self:
            shapes = str(ev.input_shapes) if group_by_input_shape else None
            k = (ev.name, shapes)
            avg = groups.get(k)
            if avg is None:
                avg = groups[k] = FunctionEventAvg(
                    ev.name, ev.input_shapes if group_by_input_shape else None)
            avg.add(ev)
        return EventList(groups.values(), with_shapes=group_by_input_shape)

    def total_average(self) -> FunctionEventAvg:
        avg = FunctionEventAvg("Total")
        for e in self:
            avg.count += e.count
            avg.cpu_time_total += e.cpu_time_total
            avg.self_cpu_time_total += e.self_cpu_time_total
        return avg


class profile:
    """Context manager that records forward ops, backward nodes and user ranges (CPU wall time).

    Args:
        enabled: record (True) or do nothing at all (False).
        record_shapes: record the input shapes of each op (see key_averages(
            group_by_input_shape=True)).
        use_cuda, profile_memory, with_stack, with_flops: accepted for PyTorch compatibility;
            llgrad runs on the CPU and records none of these.

    Ranges are recorded from every thread (each thread nests its own ranges). Profilers nest:
    the inner one is active until it exits.

    Example:
        >>> import llgrad as lg
        >>> x = lg.ones(3, requires_grad=True)
        >>> with lg.autograd.profiler.profile() as prof:
        ...     (x * 2).sum().backward()
        >>> print(prof.key_averages().table(sort_by="self_cpu_time_total"))  # doctest: +SKIP
    """

    def __init__(self, enabled: bool = True, *, use_cuda: bool = False,
                 record_shapes: bool = False, profile_memory: bool = False,
                 with_stack: bool = False, with_flops: bool = False, use_kineto: bool = False,
                 activities=None, schedule=None, on_trace_ready=None):
        self.enabled = enabled
        self.record_shapes = record_shapes
        self._events: list = []
        self._local = threading.local()
        self._lock = threading.Lock()
        self._t0 = 0
        self._prev = None
        self._entered = False
        self.function_events: EventList | None = None

    # -- the protocol the runtime calls ---------------------------------------------------
    def begin(self, name: str, arrays=None) -> None:
        stack = getattr(self._local, "stack", None)
        if stack is None:
            stack = self._local.stack = []
        shapes = None
        if self.record_shapes:
            shapes = [list(getattr(a, "shape", ())) for a in arrays] if arrays else []
        # [name, start_ns, children_ns, shapes]
        stack.append([name, time.perf_counter_ns(), 0, shapes])

    def end(self) -> None:
        t = time.perf_counter_ns()
        stack = self._local.stack
        name, start, children, shapes = stack.pop()
        dur = t - start
        if stack:
            stack[-1][2] += dur
        ev = FunctionEvent(name, (start - self._t0) / 1e3, dur / 1e3, (dur - children) / 1e3,
                           shapes, threading.get_ident(), len(stack))
        with self._lock:
            self._events.append(ev)

    # -- context manager ------------------------------------------------------------------
    def __enter__(self):
        if not self.enabled:
            return self
        if self._entered:
            raise RuntimeError("profiler context manager is not reentrant")
        self._entered = True
        self._prev = PROFILER[0]
        self._t0 = time.perf_counter_ns()
        PROFILER[0] = self
        return self

    def __exit__(self, *exc):
        if not self.enabled:
            return False
        PROFILER[0] = self._prev
        self._entered = False
        self.function_events = EventList(sorted(self._events, key=lambda e: e.start_us))
        return False

    def _check_finished(self) -> None:
        if self.function_events is None:
            raise RuntimeError("Profiler didn't finish running: read the results after the "
                               "`with profile() as prof:` block has exited")

    def events(self) -> EventList:
        self._check_finished()
        return self.function_events

    def key_averages(self, group_by_input_shape: bool = False,
                     group_by_stack_n: int = 0) -> EventList:
        """Events averaged by name (and by input shapes with group_by_input_shape=True, which
        needs record_shapes=True)."""
        self._check_finished()
        if group_by_input_shape and not self.record_shapes:
            raise RuntimeError("key_averages(group_by_input_shape=True) needs the shapes: "
                               "profile with record_shapes=True")
        return self.function_events.key_averages(group_by_input_shape)

    def table(self, sort_by=None, row_limit=100, **kw) -> str:
        self._check_finished()
        return self.function_events.table(sort_by=sort_by, row_limit=row_limit, **kw)

    def total_average(self) -> FunctionEventAvg:
        self._check_finished()
        return self.function_events.total_average()

    @property
    def self_cpu_time_total(self) -> float:
        self._check_finished()
        return self.function_events.self_cpu_time_total

    def __str__(self) -> str:
        return self.table() if self.function_events is not None else "<unfinished profile>"

    def export_chrome_trace(self, path: str) -> None:
        """Write the events as Chrome trace JSON ("X" complete events, microseconds), which
        chrome://tracing and https://ui.perfetto.dev open."""
        self._check_finished()
        pid = os.getpid()
        tids = {}
        events = []
        for ev in self.function_events:
            tid = tids.setdefault(ev.thread, len(tids))
            rec = {"name": ev.name, "ph": "X", "cat": "cpu_op", "ts": round(ev.start_us, 3),
                   "dur": round(ev.cpu_time_total, 3), "pid": pid, "tid": tid, "args": {}}
            if ev.input_shapes is not None:
                rec["args"]["Input Shapes"] = ev.input_shapes
            events.append(rec)
        meta = [{"name": "process_name", "ph": "M", "pid": pid, "tid": 0,
                 "args": {"name": "llgrad"}}]
        meta += [{"name": "thread_name", "ph": "M", "pid": pid, "tid": t,
                  "args": {"name": f"thread {t}"}} for t in tids.values()]
        with open(path, "w") as f:
            json.dump({"traceEvents": meta + events, "displayTimeUnit": "ms"}, f)


class record_function:
    """Label a range of user code in the profile (a context manager or decorator).

    Example:
        >>> import llgrad as lg
        >>> with lg.autograd.profiler.profile() as prof:
        ...     with lg.autograd.profiler.record_function("my_block"):
        ...         y = lg.ones(2) * 2
        >>> [e.key for e in prof.key_averages()][0]
        'my_block'
    """

    def __init__(self, name: str, args: str | None = None):
        self.name = name
        self._prof = None

    def __enter__(self):
        self._prof = PROFILER[0]
        if self._prof is not None:
            self._prof.begin(self.name)
        return self

    def __exit__(self, *exc):
        if self._prof is not None:
            self._prof.end()
            self._prof = None
        return False

    def __call__(self, fn):
        import functools

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with record_function(self.name):
                return fn(*args, **kwargs)
        return wrapper
