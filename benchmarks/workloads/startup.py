"""Process start to first gradient (issue 6): ``cold_start``.

Each timed call starts a fresh Python process that runs a script file: it imports the system,
builds the gradient of ``chain100`` (a 101-op function: 25 blocks of ``sin, *, +, *`` on a
float64 vector of 16, then ``sum``) and prints the value and gradient as JSON; the parent
parses and checks it. The time therefore includes interpreter start-up and imports, which is
what a user waits for when a script runs.

* ``llgrad-cold``: ``@llgrad.differentiate(cache=True)`` with ``LLGRAD_CACHE_DIR`` pointing at a
  new empty directory for every call (trace + compile every time).
* ``llgrad-warm``: the same, with one cache directory that the first call fills; later calls
  load the converted source and the compiled object from disk.
* ``llgrad-cold*``, ``llgrad-warm*``: the same two, counted after imports (issue 12's
  restated goal: warm* <= 15% of cold*; from process start, the floor of starting Python and
  importing numpy made the old goal, warm < 20% of cold, unreachable). Each is the first
  call's wall time in the child (``differentiate`` + ``value_and_grad``), with every module
  a cold call imports (llgrad loads its tracer and llvmlite on first use, and the lowering
  only when something is compiled; recorded by one cold child in setup) imported before the
  clock starts, less the time it still spent importing (none, unless the path differs), as
  ``python -X importtime`` reports it. Importing first, rather than only subtracting the
  imports' time, keeps work that runs beside an import on another thread (the JIT's set-up:
  Note [JIT set-up in the background]) from hiding in time that is subtracted. The import
  of llgrad itself is measured by ``python -X importtime -c "import llgrad"`` (goal: 50 ms
  of its own).
* ``jax``: ``jit(value_and_grad)`` in a fresh process (JAX's persistent cache off, its default).
* ``torch``: eager, in a fresh process.
* ``python+numpy``: ``import numpy`` and nothing else: the floor.

Like a user's program, the scripts live in their own directory (written once per run of the
harness), next to a module ``chain.py`` that holds ``chain100``'s source; they import nothing
from this benchmark package, whose own imports (harness, the other workloads) a user never
pays for.

Bytecode: the children run as an installed program does, from compiled bytecode. An
installation has ``.pyc`` files for every module (pip compiles them), but llgrad here is an
editable checkout, and a machine may set ``PYTHONDONTWRITEBYTECODE``, in which case Python
recompiles every llgrad module from source in every process (~100 ms: a cost no installed
user pays, and one that hides everything else this benchmark measures). So setup compiles the
checkout's packages and ``chain.py`` with ``compileall`` (a no-op when up to date;
``__pycache__`` is git-ignored), and the children run without ``PYTHONDONTWRITEBYTECODE``. This
is the same for every implementation; numpy, JAX and torch come with their bytecode.
"""

from __future__ import annotations

import atexit
import compileall
import inspect
import json
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np

from ..harness import Goal, Impl, Workload, need

N_BLOCKS = 25
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def chain100(x):
    """Plain numpy user code: 25 blocks x 4 ops + sum = 101 ops."""
    for _ in range(N_BLOCKS):
        a = np.sin(x)
        a = a * 0.001
        x = x + a
        x = x * 0.9999
    return np.sum(x)


PACKAGES = ("llgrad", "runtime", "tracer", "transform", "codegen")  # the checkout's packages

_MARK = "llgrad-bench: call"
_PRELUDE = f"""
import json, sys
sys.path.insert(0, {ROOT!r})
import numpy as np
x = np.linspace(-1.0, 1.0, 16)
"""

SCRIPTS = {
    "llgrad": _PRELUDE + """
import importlib, os, time
import llgrad
from chain import chain100
for name in os.environ.get("LLGRAD_BENCH_PRELOAD", "").split():
    try:  # (the * rows: what the call would import, imported before the clock starts)
        importlib.import_module(name)
    except ImportError:
        pass
before = set(sys.modules)
print(_MARK, file=sys.stderr, flush=True)  # (imports after this are the call's)
t0 = time.perf_counter()
f = llgrad.differentiate(chain100, cache=True)
v, g = f.value_and_grad(x)
call = time.perf_counter() - t0
print(_MARK, file=sys.stderr, flush=True)
print(json.dumps({"value": float(v), "grad": np.asarray(g).tolist(), "call": call,
                  "modules": sorted(set(sys.modules) - before)}))
""".replace("_MARK", repr(_MARK)),
    "jax": _PRELUDE + """
import types
import jax
jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp
from chain import chain100
chain100 = types.FunctionType(chain100.__code__, dict(chain100.__globals__, np=jnp))
v, g = jax.jit(jax.value_and_grad(chain100))(jnp.asarray(x))
print(json.dumps({"value": float(v), "grad": np.asarray(g).tolist()}))
""",
    "torch": _PRELUDE + """
import torch
t = torch.tensor(x, requires_grad=True)
y = t
for _ in range(25):
    a = y.sin()
    a = a * 0.001
    y = y + a
    y = y * 0.9999
y = y.sum()
y.backward()
print(json.dumps({"value": y.item(), "grad": t.grad.numpy().tolist()}))
""",
    "numpy": _PRELUDE + """
print(json.dumps({"value": 0.0, "grad": []}))
""",
}

_SCRIPT_DIR: list = []


def _script_dir() -> str:
    """The directory of the child scripts and ``chain.py``, written and byte-compiled once per
    harness process (removed at exit), with the checkout's packages byte-compiled too."""
    if not _SCRIPT_DIR:
        d = tempfile.mkdtemp(prefix="llgrad-bench-startup-")
        atexit.register(shutil.rmtree, d, ignore_errors=True)
        with open(os.path.join(d, "chain.py"), "w") as f:
            f.write(f"import numpy as np\n\nN_BLOCKS = {N_BLOCKS}\n\n\n"
                    + inspect.getsource(chain100))
        for name, text in SCRIPTS.items():
            with open(os.path.join(d, f"run_{name}.py"), "w") as f:
                f.write(text)
        for pkg in PACKAGES:
            compileall.compile_dir(os.path.join(ROOT, pkg), quiet=1)
        compileall.compile_file(os.path.join(d, "chain.py"), quiet=1)
        _SCRIPT_DIR.append(d)
    return _SCRIPT_DIR[0]


_AFTER_IMPORTS: list = [float("nan")]  # the last llgrad child's call, less its imports
_CALL_MODULES: list = [[]]  # the modules the last llgrad child's call imported


def _spawn(script: str, env_extra=None):
    env = dict(os.environ, **(env_extra or {}))
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # run from bytecode, as installed (see above)
    path = os.path.join(_script_dir(), f"run_{script}.py")
    timing = ["-X", "importtime"] if script == "llgrad" else []
    proc = subprocess.run([sys.executable, *timing, path], capture_output=True, text=True,
                          env=env, timeout=600)
    if proc.returncode != 0:
        tail = proc.stderr.strip().splitlines()[-1:] or ["(no stderr)"]
        raise RuntimeError(f"subprocess failed: {tail[0]}")
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    if "call" in out:
        _AFTER_IMPORTS[0] = out["call"] - _import_seconds(proc.stderr)
        _CALL_MODULES[0] = out["modules"]
    return out["value"], (np.asarray(out["grad"]),)


def _import_seconds(stderr: str) -> float:
    """Seconds the child spent importing between its two marks: the cumulative times of the
    outermost imports in ``-X importtime``'s report ("import time: self | cumulative |
    name", the name indented by nesting)."""
    total, inside = 0.0, False
    for line in stderr.splitlines():
        if line == _MARK:
            inside = not inside
        elif inside and line.startswith("import time:"):
            _, cumulative, name = line[len("import time:"):].split("|")
            if cumulative.strip().isdigit() and not name.startswith("  "):  # " name": outermost
                total += int(cumulative) * 1e-6
    return total


def _llgrad(warm: bool, after_imports: bool = False):
    def setup(inputs):
        need("llgrad", "differentiate")
        _script_dir()
        env = {}
        if after_imports:  # the modules of a cold call (a superset of a warm one's)
            _cold_call(env)
            env = {"LLGRAD_BENCH_PRELOAD": " ".join(_CALL_MODULES[0])}
        if warm:
            d = tempfile.mkdtemp(prefix="llgrad-bench-warm-")
            atexit.register(shutil.rmtree, d, ignore_errors=True)
            return lambda: _spawn("llgrad", dict(env, LLGRAD_CACHE_DIR=d))
        return lambda: _cold_call(env)
    return setup


def _cold_call(env: dict):
    d = tempfile.mkdtemp(prefix="llgrad-bench-cold-")
    try:
        return _spawn("llgrad", dict(env, LLGRAD_CACHE_DIR=d))
    finally:
        shutil.rmtree(d, ignore_errors=True)


def _peer(module: str, script: str):
    def setup(inputs):
        need(module)
        _script_dir()
        return lambda: _spawn(script)
    return setup


cold_start = Workload(
    name="cold_start",
    description="fresh process -> first value+grad of a 101-op function (vector of 16)",
    issue="issue 6",
    make_inputs=lambda: {"x": np.linspace(-1.0, 1.0, 16)},
    forward=chain100,
    wrt=("x",),
    impls=[
        Impl("llgrad-cold", _llgrad(False), "v+g", "empty LLGRAD_CACHE_DIR each call"),
        Impl("llgrad-warm", _llgrad(True), "v+g", "cache filled by the first call"),
        Impl("llgrad-cold*", _llgrad(False, True), "v+g", "* after imports: the call in the "
             "child, less its imports", timer=lambda: _AFTER_IMPORTS[0]),
        Impl("llgrad-warm*", _llgrad(True, True), "v+g", "* after imports",
             timer=lambda: _AFTER_IMPORTS[0]),
        Impl("jax", _peer("jax", "jax"), "v+g", "jit(value_and_grad), no persistent cache"),
        Impl("torch", _peer("torch", "torch"), "v+g", "eager"),
        Impl("python+numpy", _peer("numpy", "numpy"), "start", "interpreter + numpy import only",
             check=False),
    ],
    goals=[Goal.at_most("llgrad-warm*", "llgrad-cold*", 0.15,
                        "after imports, a warm-cache start <= 15% of a cold one")],
    llgrad_ref="llgrad-cold",
    fallback_ref="python+numpy",
)

WORKLOADS = [cold_start]
