"""First-call time (trace + AD + compile), split by phase: ``python -m benchmarks.compile_time``.

Each case runs in a fresh Python process (so each pays the process's one-time costs, shown
apart), with a timeout per case so the script always finishes. For llgrad the table shows
the first ``value_and_grad`` call's wall time and its phases from ``inspect().stats``
(trace, IR passes + AD, lowering to LLVM IR, LLVM optimisation, machine code, one-time
set-up), its CPU time (which a loaded machine inflates less), the path taken (staged /
dynamic) and the second call; beside it JAX's ``jit(value_and_grad)`` first call (wall and
CPU) and second call on the same function when JAX is installed. Below the table, issue 12's
goals, by wall and by CPU time: every first call under 1 s, at most 1.3x growth per doubling
of T or n along a staged series, no first call slower than JAX's.

Options: ``--only a,b`` (case names or prefixes), ``--timeout S`` (per case, default 120),
``--no-jax``, ``--json PATH``. Every system runs on one thread, as in ``benchmarks.run``.
The cases: a tanh RNN (hidden 16, batch 8) built with a list and ``np.stack`` and with a
preallocated ``preds[t] = h``, at T = 5..80; an LSTM at
T = 8, 40; a hand-written Cholesky factorisation and triangular solve at n = 10, 25, 50; a
plain-numpy MLP (784-128-10) and softmax regression; and the compiled benchmark workloads
(benchmarks/workloads).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import types

from ._threads import set_threads

if __name__ == "__main__":  # one thread for every system (as benchmarks.run), before numpy
    set_threads(1)

import numpy as np  # noqa: E402

# ---------------------------------------------------------------- the user functions ----


def rnn_append(Wx, Wh, b, xs):
    hs = []
    h = np.zeros((xs.shape[1], Wh.shape[0]))
    for t in range(xs.shape[0]):
        h = np.tanh(xs[t] @ Wx + h @ Wh + b)
        hs.append(h)
    return np.sum(np.stack(hs) ** 2)


def rnn_prealloc(Wx, Wh, b, xs):
    preds = np.zeros((xs.shape[0], xs.shape[1], Wh.shape[0]))
    h = np.zeros((xs.shape[1], Wh.shape[0]))
    for t in range(xs.shape[0]):
        h = np.tanh(xs[t] @ Wx + h @ Wh + b)
        preds[t] = h
    return np.sum(preds ** 2)


def _rnn_prealloc_jax(Wx, Wh, b, xs):
    preds = np.zeros((xs.shape[0], xs.shape[1], Wh.shape[0]))
    h = np.zeros((xs.shape[1], Wh.shape[0]))
    for t in range(xs.shape[0]):
        h = np.tanh(xs[t] @ Wx + h @ Wh + b)
        preds = preds.at[t].set(h)
    return np.sum(preds ** 2)


def sigmoid(z):
    return 1.0 / (1.0 + np.exp(-z))


def lstm(Wx, Wh, b, xs):
    H = Wh.shape[0]
    h = np.zeros((xs.shape[1], H))
    c = np.zeros((xs.shape[1], H))
    for t in range(xs.shape[0]):
        z = xs[t] @ Wx + h @ Wh + b
        i, f, o = sigmoid(z[:, :H]), sigmoid(z[:, H:2 * H]), sigmoid(z[:, 2 * H:3 * H])
        c = f * c + i * np.tanh(z[:, 3 * H:])
        h = o * np.tanh(c)
    return np.sum(h * h)


def cholesky_solve(A, y):
    n = A.shape[0]
    L = np.zeros_like(A)
    for j in range(n):
        L[j, j] = np.sqrt(A[j, j] - np.sum(L[j, :j] ** 2))
        for i in range(j + 1, n):
            L[i, j] = (A[i, j] - np.sum(L[i, :j] * L[j, :j])) / L[j, j]
    z = np.zeros_like(y)
    for i in range(n):
        z[i] = (y[i] - np.sum(L[i, :i] * z[:i])) / L[i, i]
    return np.sum(z ** 2)


def _cholesky_solve_jax(A, y):
    n = A.shape[0]
    L = np.zeros_like(A)
    for j in range(n):
        L = L.at[j, j].set(np.sqrt(A[j, j] - np.sum(L[j, :j] ** 2)))
        for i in range(j + 1, n):
            L = L.at[i, j].set((A[i, j] - np.sum(L[i, :j] * L[j, :j])) / L[j, j])
    z = np.zeros_like(y)
    for i in range(n):
        z = z.at[i].set((y[i] - np.sum(L[i, :i] * z[:i])) / L[i, i])
    return np.sum(z ** 2)


def softmax_regression(W, b, X, Y):
    logits = X @ W + b
    z = logits - np.max(logits, axis=1, keepdims=True)
    return -np.sum(Y * (z - np.log(np.sum(np.exp(z), axis=1, keepdims=True)))) / X.shape[0]


# ---------------------------------------------------------------------------- cases ----
_RNG = lambda: np.random.default_rng(0)  # noqa: E731


def _rnn_inputs(T, hidden=16, batch=8, inputs=4):
    r = _RNG()
    return (r.standard_normal((inputs, hidden)) / 2, r.standard_normal((hidden, hidden)) / 4,
            np.zeros(hidden), r.standard_normal((T, batch, inputs)))


def _lstm_inputs(T, hidden=16, batch=8, inputs=4):
    r = _RNG()
    return (r.standard_normal((inputs, 4 * hidden)) / 2,
            r.standard_normal((hidden, 4 * hidden)) / 4, np.zeros(4 * hidden),
            r.standard_normal((T, batch, inputs)))


def _spd(n):
    r = _RNG()
    m = r.standard_normal((n, n))
    return m @ m.T + n * np.eye(n), r.standard_normal(n)


def _mlp_case():
    from benchmarks.workloads.eager import _mlp_inputs, mlp_loss
    i = _mlp_inputs()
    return mlp_loss, tuple(i[k] for k in ("W1", "b1", "W2", "b2", "X", "Y")), (0, 1, 2, 3), None


def _softmax_case():
    r = _RNG()
    X = r.standard_normal((64, 784))
    Y = np.eye(10)[r.integers(0, 10, 64)]
    W = r.standard_normal((784, 10)) * 0.01
    return softmax_regression, (W, np.zeros(10), X, Y), (0, 1), None


def _workload_case(name):
    def make():
        from benchmarks.workloads import BY_NAME
        from benchmarks.workloads._common import positional
        w = BY_NAME[name]
        fn = w.forward
        if name == "eager_overhead":
            from benchmarks.workloads.eager import chain as fn
        inputs = w.make_inputs()
        names = list(__import__("inspect").signature(fn).parameters)
        return fn, tuple(positional(fn, inputs)), tuple(names.index(k) for k in w.wrt), name
    return make


CASES: dict = {}
for _T in (5, 10, 20, 40, 80):
    CASES[f"rnn_append_T{_T}"] = (lambda T=_T: (rnn_append, _rnn_inputs(T), (0, 1, 2), None))
for _T in (5, 10, 20, 40, 80):
    CASES[f"rnn_prealloc_T{_T}"] = (lambda T=_T: (rnn_prealloc, _rnn_inputs(T), (0, 1, 2),
                                                  _rnn_prealloc_jax))
for _T in (8, 40):
    CASES[f"lstm_T{_T}"] = (lambda T=_T: (lstm, _lstm_inputs(T), (0, 1, 2), None))
for _n in (10, 25, 50):
    CASES[f"cholesky_n{_n}"] = (lambda n=_n: (cholesky_solve, _spd(n), (0, 1),
                                              _cholesky_solve_jax))
CASES["mlp_784_128_10"] = _mlp_case
CASES["softmax_regression"] = _softmax_case
for _name in ("gmm", "elementwise", "recurrence", "lorenz_rk4", "newton", "rnn",
              "eager_overhead"):
    CASES[f"workload_{_name}"] = _workload_case(_name)

# ------------------------------------------------------------------------ the children ----
_PHASES = (("trace", ("trace time",)), ("IR+AD", ("optimize time", "autodiff time")),
           ("lower", ("lowering time (joint)",)), ("LLVM", ("llvm optimize time (joint)",
                                                            "llvm parse time (joint)")),
           ("mc", ("machine code time (joint)",)))


def _child_llgrad(name: str) -> dict:
    import llgrad
    fn, args, wrt, _ = CASES[name]()
    f = llgrad.differentiate(fn, wrt=wrt)
    t0, c0 = time.perf_counter(), time.process_time()
    f.value_and_grad(*args)
    first, cpu = time.perf_counter() - t0, time.process_time() - c0
    t0 = time.perf_counter()
    f.value_and_grad(*args)
    second = time.perf_counter() - t0
    from llgrad.compiled import Compiled
    staged = [c for c in f._cache.values() if isinstance(c, Compiled)]  # (not a signature
    graphs = staged or list(f._graphs.values())  # sent to the dynamic path): else its last graph
    stats = dict(graphs[-1].stats)
    out = {"first": first, "cpu": cpu, "second": second, "path": stats.get("path", "?").split(" (")[0],
           "ops": stats.get("ops (traced)"), "joint ops": stats.get("ops (forward+backward)"),
           "level": stats.get("opt level (joint)"),
           "once": sum(v for k, v in stats.items() if k.startswith("one-time: "))}
    for label, keys in _PHASES:
        out[label] = sum(stats.get(k, 0.0) for k in keys)
    return out


def _jaxify(fn):
    """`fn` with `np` bound to jax.numpy, and so every function of this module it calls."""
    import jax.numpy as jnp
    g = dict(fn.__globals__, np=jnp)
    for k, v in list(g.items()):
        if isinstance(v, types.FunctionType) and v.__module__ == fn.__module__:
            g[k] = types.FunctionType(v.__code__, g, v.__name__, v.__defaults__)
    return g[fn.__name__] if fn.__name__ in g else types.FunctionType(fn.__code__, g)


def _child_jax(name: str) -> dict:
    import jax
    jax.config.update("jax_enable_x64", True)
    fn, args, wrt, alt = CASES[name]()
    if isinstance(alt, str):  # a workload: its own idiomatic JAX version
        from benchmarks.workloads import BY_NAME
        w = BY_NAME[alt]
        impl = next((i for i in w.impls if i.name == "jax"), None)
        if impl is None:
            return {"error": "no JAX version"}
        run = impl.setup(w.make_inputs())
    else:
        g = jax.jit(jax.value_and_grad(_jaxify(alt or fn), argnums=wrt))
        run = lambda: jax.block_until_ready(g(*args))  # noqa: E731
    t0, c0 = time.perf_counter(), time.process_time()
    run()
    first, cpu = time.perf_counter() - t0, time.process_time() - c0
    t0 = time.perf_counter()
    run()
    return {"first": first, "cpu": cpu, "second": time.perf_counter() - t0}


def _spawn(name: str, impl: str, timeout: float) -> dict:
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    cmd = [sys.executable, "-m", "benchmarks.compile_time", "--child", name, "--impl", impl]
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=root)
    except subprocess.TimeoutExpired:
        return {"error": f"timeout ({timeout:.0f} s)"}
    if r.returncode != 0:
        tail = (r.stderr.strip().splitlines() or ["?"])[-1]
        return {"error": tail[:60]}
    return json.loads(r.stdout.strip().splitlines()[-1])


# ------------------------------------------------------------------------------ table ----
def _ms(v) -> str:
    if v is None:
        return "-"
    return f"{v * 1e3:.0f}" if v >= 0.01 else f"{v * 1e3:.1f}"


def _row(name: str, lg: dict, jx: dict | None) -> str:
    if "error" in lg:
        cells = [lg["error"]] + [""] * 11
    else:
        cells = [lg["path"], f"{lg['ops']}/{lg['joint ops']}", f"O{lg['level']}"
                 if lg["level"] is not None else "-", _ms(lg["first"]), _ms(lg["cpu"])]
        cells += [_ms(lg[label]) for label, _ in _PHASES] + [_ms(lg["once"]), _ms(lg["second"])]
    if jx is not None:
        cells += [jx["error"], "", ""] if "error" in jx else \
            [_ms(jx["first"]), _ms(jx["cpu"]), _ms(jx["second"])]
    return f"{name:20s} " + " ".join(f"{c:>9s}" for c in cells)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.compile_time", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", help="comma-separated case names or prefixes")
    ap.add_argument("--timeout", type=float, default=120.0, help="seconds per case and system")
    ap.add_argument("--no-jax", action="store_true")
    ap.add_argument("--json", metavar="PATH")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--impl", default="llgrad", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        out = (_child_jax if args.impl == "jax" else _child_llgrad)(args.child)
        print(json.dumps(out, default=str))
        return 0
    names = list(CASES)
    if args.only:
        keys = [k.strip() for k in args.only.split(",") if k.strip()]
        names = [n for n in names if any(n == k or n.startswith(k) for k in keys)]
    try:
        import jax  # noqa: F401
        use_jax = not args.no_jax
    except ImportError:
        use_jax = False
    head = ["path", "ops/joint", "level", "first", "cpu", *(label for label, _ in _PHASES),
            "once", "second"] + (["jax 1st", "jax cpu", "jax 2nd"] if use_jax else [])
    print("first-call wall time by phase, ms (each case in a fresh process; 'once' = one-time "
          "imports and JIT set-up, included in 'first'; 'cpu' = the first call's CPU time)")
    print(f"{'case':20s} " + " ".join(f"{h:>9s}" for h in head))
    results = {}
    for name in names:
        lg = _spawn(name, "llgrad", args.timeout)
        jx = _spawn(name, "jax", args.timeout) if use_jax else None
        results[name] = {"llgrad": lg, "jax": jx}
        print(_row(name, lg, jx), flush=True)
    for line in goals(results):
        print(line)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1, default=str)
    return 0


# The staged series and their sizes, for the growth goal.
_SERIES = {"rnn_append_T": (5, 10, 20, 40, 80), "rnn_prealloc_T": (5, 10, 20, 40, 80),
           "lstm_T": (8, 40), "cholesky_n": (10, 25, 50)}


def goals(results: dict) -> list[str]:
    """Issue 12's benchmark goals on `results`, by wall time and by CPU time (which a loaded
    machine inflates less): every first call under 1 s; at most 1.3x growth per doubling of
    T or n along a staged series; at least as fast as JAX's first call."""
    out = ["goals (wall / cpu):"]
    ok = {k: v["llgrad"] for k, v in results.items() if "error" not in v["llgrad"]}
    for key in ("first", "cpu"):
        slow = [f"{k} {_ms(v[key])} ms" for k, v in ok.items() if v[key] >= 1.0]
        out.append(f"  first call < 1 s ({key}): " + ("PASS" if not slow else
                                                      "FAIL: " + ", ".join(slow)))
        worst = []
        for prefix, sizes in _SERIES.items():
            for a, b in zip(sizes, sizes[1:]):
                ra, rb = ok.get(f"{prefix}{a}"), ok.get(f"{prefix}{b}")
                if ra and rb and ra["path"] == rb["path"] == "staged":
                    per_doubling = (rb[key] / ra[key]) ** (1 / np.log2(b / a))
                    worst.append((per_doubling, f"{prefix}{a}->{b} {per_doubling:.2f}x"))
        bad = [w for g, w in worst if g > 1.3]
        out.append(f"  growth <= 1.3x per doubling ({key}): " + (
            "PASS" if not bad else "FAIL: " + ", ".join(bad)) + (
            f" (worst {max(worst)[1]})" if worst else ""))
        slower = [k for k, v in results.items() if k in ok and v.get("jax")
                  and "error" not in v["jax"] and _against_jax(k, ok[k], key) > v["jax"][key]]
        out.append(f"  first call <= JAX's ({key}): " + ("PASS" if not slower else
                                                         "FAIL: " + ", ".join(slower)))
    return out


def _against_jax(name: str, lg: dict, key: str) -> float:
    """llgrad's first call as comparable with JAX's: a workload's JAX version moves its
    inputs to the device in its setup (`jax_vg`), so its backend is initialised before the
    timed first call; llgrad's one-time set-up (llvmlite, the JIT) is left out there too."""
    return lg[key] - lg["once"] if name.startswith("workload_") else lg[key]


if __name__ == "__main__":
    sys.exit(main())
