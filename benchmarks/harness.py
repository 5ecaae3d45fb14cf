"""A small benchmark harness: workloads, implementations, interleaved timing, checks, tables.

Vocabulary
----------
* A :class:`Workload` is one computation (``elementwise``, ``gmm``, ...): it owns its inputs
  (``make_inputs()``, seeded), a plain-numpy float64 reference forward (``forward(**inputs)``)
  and the names of the inputs the gradient is taken with respect to (``wrt``).
* An :class:`Impl` is one system's version of it (``llgrad``, ``torch``, ``jax``, ...).
  ``Impl.setup(inputs)`` does whatever preparation the system needs and returns a zero-argument
  callable; each call of that callable is one timed unit of work and returns either
  ``(value, (grad_wrt_0, grad_wrt_1, ...))`` (kind ``"v+g"``) or just ``value``
  (kind ``"fwd"``, e.g. the Numba-compiled forward). Results must be materialised (JAX:
  ``block_until_ready``). ``setup`` raises :class:`Skip` when the peer is not importable
  (:func:`need` does this); any other exception in setup or in the first call marks the
  implementation as an error, with the reason printed, and the run goes on.

Protocol per workload
---------------------
1. For each implementation: ``first call`` = ``setup()`` + the first invocation (for llgrad
   this is trace + compile, for JAX the jit compile, for Numba the njit compile). The result
   of that first call is checked once: the value against the numpy reference, the gradient
   by a directional central finite difference of the numpy reference (one random direction
   per ``wrt`` input), and the full gradient against the first implementation that passed.
   An implementation that fails its check is reported and not timed.
2. Warm-up and calibration: a few calls give a per-call estimate; the inner repetition count
   is chosen so that one sample lasts at least ``min_sample`` seconds (default 20 ms).
   Implementations whose second call takes longer than ``slow_call`` seconds count that call
   as their first sample, and take only as many samples as fit a per-implementation time
   budget (at least one).
3. Timing is interleaved: round r takes sample r of every implementation, in a freshly
   shuffled order, so machine noise falls on all implementations alike. ``gc.collect()`` runs
   before (not inside) each sample.
4. Report: median and IQR (seconds per call), the ratio of each median to the reference
   column (``llgrad`` unless told otherwise; when it is missing, the workload's fallback), the
   first-call time, and the workload's goals (from the issues) evaluated on this run.
"""

from __future__ import annotations

import gc
import importlib
import json
import math
import os
import platform
import random
import sys
import time
import traceback
import types
from dataclasses import dataclass, field
from typing import Any, Callable, Optional, Sequence

import numpy as np

__all__ = [
    "Skip", "need", "rebind", "to_numpy", "Impl", "Workload", "Goal", "Options",
    "run_workload", "format_results", "results_to_json",
]


# --------------------------------------------------------------------------------------
# Helpers for implementations
# --------------------------------------------------------------------------------------

import_seconds = 0.0   # time spent importing peers in need(): not part of "first call"


class Skip(Exception):
    """Raised by ``Impl.setup`` when the implementation cannot run here (peer not installed)."""


def need(module: str, attr: Optional[str] = None):
    """Import ``module`` (and check ``attr`` exists) or raise :class:`Skip` saying why.

    JAX is configured for float64 (``jax_enable_x64``) the first time it is imported here,
    so that JAX runs the same float64 workloads as everyone else. Time spent importing is
    excluded from the "first call" column.
    """
    global import_seconds
    t0 = time.perf_counter()
    try:
        mod = importlib.import_module(module)
    except Exception as exc:  # ImportError, but also broken installs
        raise Skip(f"cannot import {module}: {type(exc).__name__}: {exc}") from None
    finally:
        import_seconds += time.perf_counter() - t0
    if module == "jax":
        mod.config.update("jax_enable_x64", True)
    if module == "torch" and _threads() is not None:
        mod.set_num_threads(_threads())
    if attr is not None and not hasattr(mod, attr):
        raise Skip(f"{module} has no attribute {attr!r} yet")
    return mod


def _threads() -> int | None:
    """torch's thread count: OMP_NUM_THREADS as `set_threads` left it; None when unset
    (`--threads default`: torch keeps its own)."""
    n = os.environ.get("OMP_NUM_THREADS")
    return int(n) if n else None


def rebind(fn: Callable, **names) -> Callable:
    """Return a copy of ``fn`` whose module globals have ``names`` replaced.

    Used to run the *same* plain-numpy source under HIPS autograd (``np=autograd.numpy``) or
    JAX (``np=jax.numpy``). Every function defined in ``fn``'s module is re-created against the
    new globals too, so helper functions called by ``fn`` see the replacement as well.
    """
    old = fn.__globals__
    new = dict(old)
    modname = old.get("__name__")
    for key, val in old.items():
        if isinstance(val, types.FunctionType) and val.__module__ == modname:
            new[key] = types.FunctionType(val.__code__, new, val.__name__, val.__defaults__,
                                          val.__closure__)
    new.update(names)
    same = new.get(fn.__name__)
    if isinstance(same, types.FunctionType) and same.__code__ is fn.__code__:
        return same
    return types.FunctionType(fn.__code__, new, fn.__name__, fn.__defaults__, fn.__closure__)


def to_numpy(x) -> np.ndarray:
    """Convert a torch / JAX / llgrad / autograd / python value to a float64 numpy array."""
    if hasattr(x, "detach"):
        x = x.detach()
    if hasattr(x, "cpu") and not isinstance(x, np.ndarray):
        try:
            x = x.cpu()
        except Exception:
            pass
    if hasattr(x, "numpy") and not isinstance(x, np.ndarray):
        x = x.numpy()
    return np.asarray(x, dtype=np.float64)


# --------------------------------------------------------------------------------------
# Data model
# --------------------------------------------------------------------------------------

@dataclass
class Impl:
    """One system's implementation of a workload."""
    name: str
    setup: Callable[[dict], Callable[[], Any]]
    kind: str = "v+g"            # "v+g": value and gradient; "fwd": forward only; other: shown
    note: str = ""               # shown under the table (e.g. "fixed 12 iterations")
    check: bool = True           # False: do not compare results (e.g. a different algorithm)
    # The seconds the last call took by its own account (e.g. a child process's time after
    # its imports), instead of the wall time around the call.
    timer: Optional[Callable[[], float]] = None


@dataclass
class Goal:
    """A target from the issues, evaluated on one run.

    ``what``: ``"ratio"`` -> median(impl) / median(peer) <= ``limit``;
    ``"first_call"`` -> first-call seconds of impl <= ``limit``.
    """
    what: str
    impl: str
    peer: Optional[str] = None
    limit: float = 1.0
    text: str = ""

    @staticmethod
    def faster(impl: str, peer: str, text: str = "") -> "Goal":
        return Goal("ratio", impl, peer, 1.0, text or f"{impl} faster than {peer}")

    @staticmethod
    def at_most(impl: str, peer: str, factor: float, text: str = "") -> "Goal":
        return Goal("ratio", impl, peer, factor, text or f"{impl} <= {factor:g}x {peer}")

    @staticmethod
    def speedup(impl: str, peer: str, factor: float, text: str = "") -> "Goal":
        return Goal("ratio", impl, peer, 1.0 / factor,
                    text or f"{impl} >= {factor:g}x faster than {peer}")

    @staticmethod
    def first_call(impl: str, seconds: float, text: str = "") -> "Goal":
        return Goal("first_call", impl, None, seconds,
                    text or f"{impl} first call < {seconds:g} s")


@dataclass
class Workload:
    """A computation, its reference, and its implementations."""
    name: str
    description: str
    make_inputs: Callable[[], dict]
    forward: Callable[..., Any]            # numpy reference: forward(**inputs) -> float (or
    #                                        arrays, for forward-only workloads)
    wrt: Sequence[str]
    impls: list
    goals: list = field(default_factory=list)
    fallback_ref: Optional[str] = None     # ratio column when llgrad is absent
    llgrad_ref: str = "llgrad"             # which row "--ref llgrad" means in this workload
    value_rtol: float = 1e-9
    fd_rtol: float = 1e-5
    grad_rtol: float = 1e-7
    per_item: Optional[tuple] = None       # (count, unit): also print time per unit
    issue: str = ""


@dataclass
class Options:
    samples: int = 15
    min_sample: float = 0.02       # seconds per sample (inner repetitions adapt to this)
    slow_call: float = 1.0         # calls slower than this skip warm-up ...
    budget: float = 20.0           # ... and take at most this many seconds of samples
    check: bool = True
    ref: str = "llgrad"
    seed: int = 0
    verbose: bool = True
    threads: int | str = 1          # or "default" (benchmarks/_threads.py)

    @staticmethod
    def quick() -> "Options":
        return Options(samples=5, budget=6.0, slow_call=0.5)


@dataclass
class ImplResult:
    name: str
    kind: str
    status: str = "ok"             # ok | skipped | error | wrong
    reason: str = ""
    note: str = ""
    first_call: float = float("nan")
    inner: int = 0
    samples: list = field(default_factory=list)   # seconds per call
    check: str = ""

    @property
    def median(self) -> float:
        return float(np.median(self.samples)) if self.samples else float("nan")

    @property
    def iqr(self) -> float:
        if len(self.samples) < 2:
            return float("nan")
        q75, q25 = np.percentile(self.samples, [75, 25])
        return float(q75 - q25)


@dataclass
class WorkloadResult:
    workload: Workload
    impls: list
    ref: Optional[str]
    goals: list = field(default_factory=list)   # (text, measured, limit, verdict)
    seconds: float = 0.0

    def get(self, name: str) -> Optional[ImplResult]:
        for r in self.impls:
            if r.name == name:
                return r
        return None


# --------------------------------------------------------------------------------------
# Checking
# --------------------------------------------------------------------------------------

def _values(x) -> np.ndarray:
    """A value (a number, an array, or a tuple/list of them) as one flat float64 array."""
    if isinstance(x, (tuple, list)):
        return np.concatenate([_values(v) for v in x]) if x else np.zeros(0)
    return to_numpy(x).ravel()


def _split(out, kind: str):
    if kind == "fwd":
        return _values(out), None
    value, grads = out
    if not isinstance(grads, (tuple, list)):
        grads = (grads,)
    return _values(value), tuple(to_numpy(g) for g in grads)


class _Checker:
    """Holds the reference value and finite-difference data of one workload (computed once)."""

    def __init__(self, w: Workload, inputs: dict, seed: int):
        self.w = w
        ref_inputs = {k: (np.asarray(v, dtype=np.float64)
                          if isinstance(v, np.ndarray) and v.dtype.kind == "f" else v)
                      for k, v in inputs.items()}
        self.value = _values(w.forward(**ref_inputs))
        rng = np.random.default_rng(seed + 12345)
        self.fd = {}       # name -> (direction, directional derivative)
        for name in w.wrt:
            x = np.asarray(ref_inputs[name], dtype=np.float64)
            v = rng.standard_normal(x.shape)
            h = 1e-6 * max(1.0, float(np.sqrt(np.mean(x ** 2))))
            plus = dict(ref_inputs, **{name: x + h * v})
            minus = dict(ref_inputs, **{name: x - h * v})
            d = (float(w.forward(**plus)) - float(w.forward(**minus))) / (2 * h)
            self.fd[name] = (v, d)
        self.first_grads = None
        self.first_name = None

    def check(self, name: str, kind: str, out) -> str:
        """Return "" when ``out`` is right, else a message saying what is wrong."""
        w = self.w
        value, grads = _split(out, kind)
        if value.shape != self.value.shape:
            return f"{value.size} values, the numpy reference has {self.value.size}"
        if not np.allclose(value, self.value, rtol=w.value_rtol, atol=1e-12):
            if value.size == 1:
                return f"value {value[0]!r} != numpy reference {self.value[0]!r}"
            return (f"values differ from the numpy reference (max abs diff "
                    f"{float(np.max(np.abs(value - self.value))):.3g})")
        if grads is None:
            return ""
        if len(grads) != len(w.wrt):
            return f"{len(grads)} gradients returned, expected {len(w.wrt)} ({', '.join(w.wrt)})"
        for gname, g in zip(w.wrt, grads):
            v, d = self.fd[gname]
            if g.shape != v.shape and g.size == v.size:
                g = g.reshape(v.shape)
            if g.shape != v.shape:
                return f"grad {gname}: shape {g.shape}, expected {v.shape}"
            dd = float(np.sum(g * v))
            if abs(dd - d) > w.fd_rtol * max(abs(d), abs(dd), 1e-12):
                return (f"grad {gname}: directional derivative {dd:.10g} != central "
                        f"difference {d:.10g}")
        if self.first_grads is None:
            self.first_grads, self.first_name = grads, name
        else:
            for gname, g, g0 in zip(w.wrt, grads, self.first_grads):
                g = g.reshape(g0.shape)
                scale = float(np.max(np.abs(g0))) if g0.size else 0.0
                if not np.allclose(g, g0, rtol=w.grad_rtol, atol=w.grad_rtol * scale + 1e-300):
                    err = float(np.max(np.abs(g - g0)))
                    return (f"grad {gname} differs from {self.first_name}'s "
                            f"(max abs diff {err:.3g}, max |g| {scale:.3g})")
        return ""


# --------------------------------------------------------------------------------------
# Running
# --------------------------------------------------------------------------------------

def _log(opts: Options, msg: str):
    if opts.verbose:
        print(msg, file=sys.stderr, flush=True)


def _short(exc: BaseException) -> str:
    msg = f"{type(exc).__name__}: {exc}"
    msg = " ".join(msg.split())
    return msg if len(msg) < 160 else msg[:157] + "..."


def _seconds(fn, timer, inner: int = 1) -> float:
    """Seconds per call of `inner` calls of `fn`: wall time, or what `timer` reports."""
    if timer is not None:
        total = 0.0
        for _ in range(inner):
            fn()
            total += timer()
        return total / inner
    t0 = time.perf_counter()
    for _ in range(inner):
        fn()
    return (time.perf_counter() - t0) / inner


def run_workload(w: Workload, opts: Options) -> WorkloadResult:
    """Check and time every implementation of ``w`` (interleaved); evaluate its goals."""
    t_start = time.perf_counter()
    _log(opts, f"== {w.name}: {w.description}")
    inputs = w.make_inputs()
    checker = _Checker(w, inputs, opts.seed) if opts.check else None
    results, fns = [], {}
    timers = {impl.name: impl.timer for impl in w.impls}

    # 1. setup + first call + check
    for impl in w.impls:
        r = ImplResult(impl.name, impl.kind, note=impl.note)
        results.append(r)
        try:
            gc.collect()
            imp0 = import_seconds
            t0 = time.perf_counter()
            fn = impl.setup(inputs)
            out = fn()
            r.first_call = time.perf_counter() - t0 - (import_seconds - imp0)
            if impl.timer is not None:
                r.first_call = impl.timer()
        except Skip as exc:
            r.status, r.reason = "skipped", str(exc)
            _log(opts, f"   {impl.name:14s} skipped: {exc}")
            continue
        except Exception as exc:
            r.status, r.reason = "error", _short(exc)
            _log(opts, f"   {impl.name:14s} error: {r.reason}")
            if os.environ.get("BENCH_TRACEBACK"):
                traceback.print_exc()
            continue
        if checker is not None and impl.check:
            try:
                problem = checker.check(impl.name, impl.kind, out)
            except Exception as exc:
                problem = f"result not understood: {_short(exc)}"
            if problem:
                r.status, r.reason = "wrong", problem
                _log(opts, f"   {impl.name:14s} WRONG: {problem}")
                continue
            r.check = "ok"
        elif not impl.check:
            r.check = "not checked"
        fns[impl.name] = fn
        _log(opts, f"   {impl.name:14s} first call {_fmt_time(r.first_call)}  check {r.check or 'off'}")

    # 2. warm-up and calibration
    plan = {}
    for r in results:
        if r.name not in fns:
            continue
        fn, timer = fns[r.name], timers[r.name]
        est = _seconds(fn, timer)             # second call: compile-free estimate
        if est > opts.slow_call or timer is not None:  # slow (a process): that call was
            r.samples.append(est)                      # the warm-up and sample 1
        else:
            times, spent = [], 0.0
            while len(times) < 3 or (spent < 0.2 and len(times) < 50):
                dt = _seconds(fn, timer)
                times.append(dt)
                spent += dt
            est = max(min(times), 1e-9)
        r.inner = 1 if timer is not None else max(1, math.ceil(opts.min_sample / est))
        per_sample = est * r.inner
        nsamp = opts.samples
        if per_sample * opts.samples > opts.budget:
            nsamp = max(1, min(opts.samples, int(opts.budget / per_sample)))
        plan[r.name] = nsamp

    # 3. interleaved sampling
    rng = random.Random(opts.seed)
    order = [r for r in results if r.name in plan]
    rounds = max(plan.values(), default=0)
    for k in range(rounds):
        rng.shuffle(order)
        for r in order:
            if len(r.samples) >= plan[r.name]:
                continue
            gc.collect()
            r.samples.append(_seconds(fns[r.name], timers[r.name], r.inner))
    fns.clear()

    ref = None
    for cand in (w.llgrad_ref if opts.ref == "llgrad" else opts.ref, w.fallback_ref):
        rr = next((r for r in results if r.name == cand), None)
        if rr is not None and rr.samples:
            ref = cand
            break
    res = WorkloadResult(w, results, ref, seconds=time.perf_counter() - t_start)
    res.goals = [_eval_goal(g, res) for g in w.goals]
    return res


def _eval_goal(g: Goal, res: WorkloadResult):
    a = res.get(g.impl)
    if g.what == "first_call":
        if a is None or a.status != "ok":
            return (g.text, None, g.limit, f"n/a ({g.impl} {a.status if a else 'absent'})")
        v = a.first_call
        return (g.text, v, g.limit, "PASS" if v <= g.limit else "FAIL")
    b = res.get(g.peer)
    for who, r in ((g.impl, a), (g.peer, b)):
        if r is None or not r.samples:
            return (g.text, None, g.limit, f"n/a ({who} {r.status if r else 'absent'})")
    v = a.median / b.median
    return (g.text, v, g.limit, "PASS" if v <= g.limit else "FAIL")


# --------------------------------------------------------------------------------------
# Reporting
# --------------------------------------------------------------------------------------

def _fmt_time(s: float) -> str:
    if s is None or not math.isfinite(s):
        return "-"
    if s >= 1:
        return f"{s:.2f} s"
    if s >= 1e-3:
        return f"{s * 1e3:.2f} ms"
    if s >= 1e-6:
        return f"{s * 1e6:.1f} us"
    return f"{s * 1e9:.1f} ns"


def _fmt_ratio(x: float) -> str:
    if not math.isfinite(x):
        return "-"
    if x >= 100:
        return f"{x:,.0f}x"
    if x >= 10:
        return f"{x:.1f}x"
    if x >= 0.1:
        return f"{x:.2f}x"
    return f"{x:.2g}x"


def format_results(results: list) -> str:
    """Render the results of several workloads as one plain-text report."""
    lines = []
    for res in results:
        w = res.workload
        lines.append("")
        head = f"{w.name}: {w.description}"
        if w.issue:
            head += f"  [{w.issue}]"
        lines.append(head)
        ref = res.get(res.ref) if res.ref else None
        refcol = f"/ {res.ref}" if res.ref else "/ ref"
        cols = ["impl", "kind", "first call", "median", "IQR", "n x inner", refcol]
        if w.per_item:
            cols.append(f"per {w.per_item[1]}")
        rows = []
        for r in res.impls:
            if r.status != "ok":
                rows.append([r.name, r.kind, _fmt_time(r.first_call) if r.status == "wrong" else "-",
                             r.status.upper() if r.status != "skipped" else "skipped", "", "", ""]
                            + ([""] if w.per_item else []))
                continue
            ratio = r.median / ref.median if ref is not None else float("nan")
            row = [r.name, r.kind, _fmt_time(r.first_call), _fmt_time(r.median),
                   _fmt_time(r.iqr), f"{len(r.samples)} x {r.inner}", _fmt_ratio(ratio)]
            if w.per_item:
                row.append(_fmt_time(r.median / w.per_item[0]))
            rows.append(row)
        widths = [max(len(str(x)) for x in col) for col in zip(cols, *rows)]
        fmt = "  ".join(f"{{:{'<' if i < 2 else '>'}{wd}}}" for i, wd in enumerate(widths))
        lines.append("  " + fmt.format(*cols))
        lines.append("  " + "  ".join("-" * wd for wd in widths))
        for row in rows:
            lines.append("  " + fmt.format(*row))
        for r in res.impls:
            if r.status != "ok":
                lines.append(f"    {r.name}: {r.status}: {r.reason}")
            elif r.note:
                lines.append(f"    {r.name}: {r.note}")
        if res.goals:
            lines.append("  goals:")
            for text, val, limit, verdict in res.goals:
                meas = "" if val is None else (f" (measured {_fmt_time(val)})" if "first call" in text
                                               else f" (measured {_fmt_ratio(val)}, limit {_fmt_ratio(limit)})")
                lines.append(f"    [{verdict}] {text}{meas}")
    return "\n".join(lines) + "\n"


def _versions() -> dict:
    out = {"python": platform.python_version(), "numpy": np.__version__}
    for mod in ("torch", "jax", "autograd", "numba", "llgrad", "llvmlite"):
        m = sys.modules.get(mod)
        if m is not None:
            out[mod] = getattr(m, "__version__", "?")
    return out


def results_to_json(results: list, opts: Options) -> dict:
    """A JSON-ready dict with every sample, the environment and the goals."""
    return {
        "machine": {"platform": platform.platform(), "processor": platform.processor(),
                    "cpus": os.cpu_count()},
        "versions": _versions(),
        "options": vars(opts),
        "workloads": {
            res.workload.name: {
                "description": res.workload.description,
                "issue": res.workload.issue,
                "reference": res.ref,
                "seconds": res.seconds,
                "impls": {
                    r.name: {
                        "kind": r.kind, "status": r.status, "reason": r.reason,
                        "note": r.note, "check": r.check,
                        "first_call_s": None if not math.isfinite(r.first_call) else r.first_call,
                        "median_s": r.median if r.samples else None,
                        "iqr_s": r.iqr if len(r.samples) > 1 else None,
                        "inner": r.inner, "samples_s": r.samples,
                        "ratio_to_ref": (r.median / res.get(res.ref).median
                                         if r.samples and res.ref else None),
                    } for r in res.impls
                },
                "goals": [{"goal": t, "measured": v, "limit": lim, "verdict": verdict}
                          for t, v, lim, verdict in res.goals],
            } for res in results
        },
    }


def write_json(path: str, results: list, opts: Options):
    with open(path, "w") as fh:
        json.dump(results_to_json(results, opts), fh, indent=1)
