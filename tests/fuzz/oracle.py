"""Run one generated program every way and classify what happened.

A program's `f` runs as plain Python on numpy arrays (the reference), and through llgrad
both natively and in the reference interpreter (LLGRAD_DISABLE_JIT=1, one trace serves
both); `loss` (a scalar of `f`'s float64 outputs) gives llgrad's gradient in both modes,
checked against central finite differences of the plain Python `loss` in float64.

Outcomes (`Outcome.status`):
  ok          everything agrees (or plain Python raised and llgrad raised too);
  mismatch    a value, dtype, shape or gradient differs, or plain Python raised and llgrad
              returned a value (`missing_error`);
  crash       llgrad raised something other than an UnsupportedError/UnsupportedSyntaxError;
  unsupported llgrad refused the program with one of those (counted by message);
  invalid     the generator made a program plain Python rejects (a generator bug);
  boundary    every input draw put a comparison within rounding distance of flipping.
Inputs are drawn again (up to `DRAWS` times) while a comparison is that close (Note in
instrument.py); if no draw keeps comparisons a finite-difference step away from flipping,
or the differences at two step sizes disagree (a kink), the native gradient is checked
against the interpreter's only.
"""
from __future__ import annotations

import atexit
import hashlib
import importlib.util
import os
import re
import shutil
import sys
import tempfile
import time
import warnings
from dataclasses import dataclass, field

import numpy as np

from tests.fuzz.ftypes import DTYPES
from tests.fuzz.program import Program
from tests.fuzz.instrument import Margins, instrumented

DRAWS = 4
EXPECTED_ERRORS = (IndexError,)  # plus ValueError("fuzz: raised")
# Value tolerances (rtol, atol relative to the output's scale) per output dtype.
TOL = {"float64": (1e-9, 1e-9), "float32": (1e-4, 1e-5)}
TAINTED_F64 = (1e-5, 1e-6)   # float64 outputs of a program that also computes in float32
GAP = {"value64": 1e-7, "value32": 1e-3, "grad": 1e-4}
FD_EPS = (1e-6, 1e-5)
FD_TOL = (1e-4, 1e-6)        # analytic gradient vs central differences
ENGINE_TOL = (1e-8, 1e-10)   # native vs interpreter gradients


@dataclass
class Failure:
    status: str      # mismatch / crash / unsupported
    kind: str        # value, dtype, shape, grad, missing_error, or the exception's type
    engine: str      # interp, native, interp+native, or native-vs-interp (gradients)
    detail: str      # expected vs got, or the exception message

    @property
    def key(self) -> str:
        return f"{self.status}:{self.kind}:{self.engine}"


@dataclass
class Outcome:
    status: str
    failures: list = field(default_factory=list)
    grad: str = "none"        # checked / interp-only: <why> / none
    note: str = ""            # invalid/boundary: why
    unrolled: int = 0         # UnrollWarnings seen
    seconds: float = 0.0
    draw: int | None = None   # which input draw (oracle.inputs) was used
    known: list = field(default_factory=list)  # KNOWN_BUGS features of a failing program

    @property
    def key(self) -> str:
        return self.failures[0].key if self.failures else self.status


# -- loading -------------------------------------------------------------------------------------
_DIR = [None]


def workdir() -> str:
    """A temporary directory for the programs' files, removed at exit."""
    if _DIR[0] is None:
        _DIR[0] = tempfile.mkdtemp(prefix="llgrad-fuzz-")
        atexit.register(shutil.rmtree, _DIR[0], True)
    return _DIR[0]


def load(source: str, tag: str):
    """Import `source` from a file of its own (llgrad converts functions from their source)."""
    digest = hashlib.sha1(source.encode()).hexdigest()[:12]
    name = f"fz_{re.sub(r'[^0-9a-zA-Z]', '_', tag)}_{digest}"
    path = os.path.join(workdir(), name + ".py")
    with open(path, "w") as fh:
        fh.write(source)
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod, path


def inputs(program: Program, draw: int) -> dict:
    """Input draw number `draw` of `program` (from its seed: reproducible), by name."""
    rng = np.random.default_rng(int(hashlib.sha1(f"{program.seed}/{draw}".encode())
                                    .hexdigest()[:8], 16))
    out = {}
    for a in program.args:
        if a.kind == "pyfloat":
            out[a.name] = float(rng.uniform(-2, 2))
        elif a.kind == "static":
            out[a.name] = a.values[0]
        elif a.dtype == "int64":
            out[a.name] = rng.integers(0, 5, a.shape).astype(np.int64)
        elif a.dtype == "bool":
            out[a.name] = rng.random(a.shape) < 0.5
        else:
            out[a.name] = rng.uniform(-2, 2, a.shape).astype(a.dtype)
    return out


def copy_args(args: dict, params: list[str]) -> list:
    return [np.copy(args[p]) if isinstance(args[p], np.ndarray) else args[p] for p in params]


# -- the reference -------------------------------------------------------------------------------
class Invalid(Exception):
    """Plain Python rejected the program (or produced inf/nan): the generator's fault."""


def run_reference(fn, args: list):
    """(value, expected exception) of the plain Python run; raises Invalid."""
    try:
        with np.errstate(over="raise", invalid="raise", divide="raise", under="ignore"), \
                warnings.catch_warnings():
            warnings.simplefilter("ignore")
            value = fn(*args)
    except EXPECTED_ERRORS as e:
        return None, e
    except ValueError as e:
        if str(e) == "fuzz: raised":
            return None, e
        raise Invalid(f"{type(e).__name__}: {e}") from e
    except Exception as e:  # noqa: BLE001
        raise Invalid(f"{type(e).__name__}: {e}") from e
    for v in value if isinstance(value, tuple) else (value,):
        if np.asarray(v).dtype.name not in DTYPES:
            raise Invalid(f"a {np.asarray(v).dtype} output")
        if np.asarray(v).dtype.kind == "f" and not np.all(np.isfinite(v)):
            raise Invalid("non-finite value")
    return value, None


def finite_differences(fn, args: list, wrt: list[int], eps: float) -> list:
    """Central differences of scalar `fn` w.r.t. args[i], i in wrt (arrays or Python floats);
    each call gets copies of the arrays (a program may update an argument in place)."""
    fn = (lambda f: lambda *a: f(*[np.copy(v) if isinstance(v, np.ndarray) else v
                                   for v in a]))(fn)
    grads = []
    for i in wrt:
        a = args[i]
        if isinstance(a, float):
            hi = float(fn(*args[:i], a + eps, *args[i + 1:]))
            lo = float(fn(*args[:i], a - eps, *args[i + 1:]))
            grads.append((hi - lo) / (2 * eps))
            continue
        g = np.zeros(a.shape)
        for k in np.ndindex(a.shape):
            x = np.copy(a)
            x[k] += eps
            hi = float(fn(*args[:i], x, *args[i + 1:]))
            x[k] -= 2 * eps
            lo = float(fn(*args[:i], x, *args[i + 1:]))
            g[k] = (hi - lo) / (2 * eps)
        grads.append(g)
    return grads


# -- comparing -----------------------------------------------------------------------------------
def _fmt(v) -> str:
    a = np.asarray(v)
    return f"{np.array2string(a, precision=17, separator=', ')} ({a.dtype}{list(a.shape)})"


def compare(ref, got, tainted: bool) -> tuple[str, str] | None:
    """(kind, detail) of the first disagreement between reference and llgrad outputs."""
    ref_t = ref if isinstance(ref, tuple) else (ref,)
    got_t = got if isinstance(got, tuple) else (got,)
    if len(ref_t) != len(got_t):
        return "shape", f"{len(ref_t)} outputs expected, got {len(got_t)}"
    for j, (r, g) in enumerate(zip(ref_t, got_t)):
        R, G = np.asarray(r), np.asarray(g)
        where = f"output {j}" if isinstance(ref, tuple) else "value"
        if R.shape != G.shape:
            return "shape", f"{where}: expected {_fmt(R)}, got {_fmt(G)}"
        if R.ndim and R.dtype != G.dtype:
            return "dtype", f"{where}: expected {_fmt(R)}, got {_fmt(G)}"
        if R.dtype.kind == "f":
            rtol, atol = TAINTED_F64 if tainted and R.dtype == np.float64 else TOL[R.dtype.name]
            scale = max(1.0, float(np.max(np.abs(R)))) if R.size else 1.0
            ok = np.allclose(G.astype(np.float64), R.astype(np.float64), rtol, atol * scale)
        else:
            ok = np.array_equal(G, R)
        if not ok:
            return "value", f"{where}: expected {_fmt(R)}, got {_fmt(G)}"
    return None


def close(a, b, tol) -> bool:
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    scale = max(1.0, float(np.max(np.abs(b)))) if b.size else 1.0
    return a.shape == b.shape and bool(np.allclose(a, b, tol[0], tol[1] * scale))


def exception_kind(e: BaseException) -> tuple[str, str]:
    from llgrad.runtime.errors import UnsupportedError, UnsupportedSyntaxError
    status = "unsupported" if isinstance(e, (UnsupportedError, UnsupportedSyntaxError)) \
        else "crash"
    first = str(e).strip().splitlines()[0] if str(e).strip() else ""
    return status, f"{type(e).__name__}: {first}"[:300]


def normalise(msg: str) -> str:
    """A message with program-specific names, numbers and operators blanked, for bucketing
    (`in-place -= of an array bound to `s` and `v3`` -> `in-place update of an array bound
    to `_``)."""
    msg = re.sub(r"/\S*fz_\w+\.py", "<prog>", msg)
    msg = re.sub(r"`[^`]*`", "`_`", msg)
    msg = re.sub(r"`_`(,? (and )?`_`)+", "`_`", msg)
    msg = re.sub(r"in-place \S+=", "in-place update", msg)
    msg = re.sub(r" \(in [^)]*\)", "", msg)
    return re.sub(r"\d+", "N", msg).split(": numpy would")[0]


def llgrad_frame(e: BaseException) -> str:
    """The innermost frame inside llgrad's own code, `file:function`."""
    import traceback
    frames = [f for f in traceback.extract_tb(e.__traceback__)
              if "/fuzz/" not in f.filename and "fz_" not in f.filename]
    if not frames:
        return "?"
    f = frames[-1]
    return f"{'/'.join(f.filename.split('/')[-2:])}:{f.name}"


# -- the check -----------------------------------------------------------------------------------
class _Case:
    def __init__(self, static_value, value, error, loss):
        self.static, self.value, self.error, self.loss = static_value, value, error, loss


def choose_inputs(program: Program, ns_for, params: list[str]):
    """(args, cases, grad_ok, draw) of the first draw whose comparisons stay clear of flipping
    (preferring one clear by a finite-difference step), or (None, why, None)."""
    static = next((a for a in program.args if a.kind == "static"), None)
    fallback, why = None, "no draw"
    for draw in range(DRAWS):
        args, m = inputs(program, draw), Margins()
        ns = ns_for(m)
        cases = []
        try:
            for sv in static.values if static else [None]:
                if static:
                    args[static.name] = sv
                value, err = run_reference(ns["f"], copy_args(args, params))
                loss = None
                if err is None:
                    loss, _ = run_reference(ns["loss"], copy_args(args, params))
                cases.append(_Case(sv, value, err, loss))
        except Invalid as e:
            why = f"invalid: {e}"
            continue
        if m.f64 < GAP["value64"] or m.f32 < GAP["value32"]:
            why = "boundary"
            continue
        grad_ok = min(m.f64, m.f32) >= GAP["grad"] and not m.tie
        if grad_ok:
            return args, cases, True, draw
        fallback = fallback or (args, cases, False, draw)
    return fallback if fallback else (None, why, None, None)


def check(program: Program, engines=("interp", "native"), fd: bool = True) -> Outcome:
    """Run `program` every way (`engines`; finite differences unless not `fd`) and classify
    the outcome; the failures of a failing program are tagged with the known bugs it uses."""
    t0 = time.perf_counter()
    out = Outcome("ok")
    try:
        _check(program, engines, fd, out)
    finally:
        out.seconds = time.perf_counter() - t0
    fails = {}
    for f in out.failures:  # one failure per (status, kind), naming every engine it hit
        prev = fails.get((f.status, f.kind))
        if prev is None:
            fails[(f.status, f.kind)] = f
        elif f.engine not in prev.engine.split("+"):
            prev.engine += "+" + f.engine
    out.failures = list(fails.values())
    if out.failures:
        order = ["crash", "mismatch", "unsupported"]
        out.failures.sort(key=lambda f: order.index(f.status))
        out.status = out.failures[0].status
        out.known = program.known_bugs()
    return out


def _check(program: Program, engines, fd: bool, out: Outcome) -> None:
    import llgrad
    from llgrad.tracer.tracing import UnrollWarning
    try:
        plain, path = load(program.source, program.seed)
    except SyntaxError as e:
        out.status, out.note = "invalid", f"SyntaxError: {e}"
        return
    params = [a.name for a in program.args]
    args, cases, grad_ok, out.draw = choose_inputs(
        program, lambda m: instrumented(program.source, path, m), params)
    if args is None:
        out.status = "invalid" if cases.startswith("invalid") else "boundary"
        out.note = cases
        return
    tainted = "float32" in program.source or any(a.dtype == "float32" for a in program.args)
    static = next((a for a in program.args if a.kind == "static"), None)
    wrt = tuple(params.index(w) for w in program.wrt)
    df = llgrad.differentiate(plain.f)
    dl = llgrad.differentiate(plain.loss, wrt=wrt) if wrt else None
    grads: dict = {}
    for engine in engines:
        os.environ["LLGRAD_DISABLE_JIT"] = "1" if engine == "interp" else "0"
        try:
            with warnings.catch_warnings(record=True) as seen:
                warnings.simplefilter("always")
                for case in cases:
                    _run_case(df, dl, engine, case, args, params, static, tainted, out, grads)
            out.unrolled += sum(issubclass(w.category, UnrollWarning) for w in seen)
        finally:
            os.environ.pop("LLGRAD_DISABLE_JIT", None)
    if dl is None:
        return
    case = cases[0]
    if static:
        args[static.name] = case.static
    mine = [grads.get((e, case.static)) for e in engines]
    tol = TAINTED_F64 if tainted else ENGINE_TOL  # (float32 math differs in the last bit)
    if len(engines) == 2 and all(g is not None for g in mine) and \
            not all(close(a, b, tol) for a, b in zip(*mine)):
        out.failures.append(Failure("mismatch", "grad", "native-vs-interp",
                                    f"native {mine[1]} vs interp {mine[0]}"))
    why = ("concretized" if program.concretized else "near a branch" if not grad_ok
           else "no gradient" if all(g is None for g in mine) or case.error else None)
    if why is None and fd:
        a = copy_args(args, params)
        fd1, fd2 = (finite_differences(plain.loss, a, list(wrt), eps) for eps in FD_EPS)
        if not all(close(x, y, (1e-5, 1e-7)) for x, y in zip(fd1, fd2)):
            why = "not smooth"
        else:
            for e, g in zip(engines, mine):
                if g is not None and not all(close(x, y, FD_TOL) for x, y in zip(g, fd1)):
                    out.failures.append(Failure(
                        "mismatch", "grad", e,
                        f"d loss/d ({', '.join(program.wrt)}): finite differences "
                        f"{[np.round(x, 10).tolist() for x in fd1]}, llgrad "
                        f"{[np.round(np.asarray(x), 10).tolist() for x in g]}"))
    out.grad = "checked" if why is None and fd else f"interp-only: {why or 'fd off'}"


def _run_case(df, dl, engine, case, args, params, static, tainted, out, grads) -> None:
    if static:
        args[static.name] = case.static
    at = f" (n={case.static!r})" if static else ""
    try:
        got = df(*copy_args(args, params))
    except Exception as e:  # noqa: BLE001 - classified
        if case.error is None:
            status, msg = exception_kind(e)
            out.failures.append(Failure(status, _kind(status, e, msg), engine, msg + at))
        return
    if case.error is not None:
        out.failures.append(Failure(
            "mismatch", "missing_error", engine,
            f"plain Python raised {type(case.error).__name__}: {case.error}{at}; llgrad "
            f"returned {got}"))
        return
    diff = compare(case.value, got, tainted)
    if diff:
        out.failures.append(Failure("mismatch", diff[0], engine, diff[1] + at))
    if dl is None:
        return
    try:
        value, g = dl.value_and_grad(*copy_args(args, params))
    except Exception as e:  # noqa: BLE001 - classified
        status, msg = exception_kind(e)
        out.failures.append(Failure(status, "grad " + _kind(status, e, msg), engine,
                                    msg + at))
        return
    diff = compare(case.loss, value, tainted)
    if diff:
        out.failures.append(Failure("mismatch", "loss " + diff[0], engine, diff[1] + at))
    grads[(engine, case.static)] = g


def _kind(status: str, e: BaseException, msg: str) -> str:
    if status == "crash":
        return f"{type(e).__name__} at {llgrad_frame(e)}"
    return normalise(msg)[:160]
