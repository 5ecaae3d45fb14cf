"""Compiled code stops with an error and Python raises it (Note [Native errors]): bounds checks
in every indexing lowering, compiled vs the reference interpreter (numpy's IndexError, the
same words); checks the IR proves unnecessary are not emitted (Note [Index checks]); a user
kind; a failed tape allocation is a MemoryError that frees what it held; Ctrl-C stops a
compiled loop (Note [Interrupting compiled loops])."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from llvmlite import ir

from llgrad.codegen import compile_functions, native_errors
from llgrad.codegen.abi import Kernel, define_kernel
from llgrad.codegen.jit import compile_module
from llgrad.codegen.loops import load
from llgrad.runtime.errors import IndexingError, SourceLoc
from llgrad.runtime.ops.index import scatter_add_p, setitem
from llgrad.runtime.prim import bind
from llgrad.transform import ad, control, interp
from llgrad.transform.builder import Builder
from llgrad.transform.passes.pipeline import optimize

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def build(f, *args):
    b = Builder(f.__name__, loc=None)
    with b:
        ps = [b.param((np.shape(a), np.asarray(a).dtype), f"a{k}") for k, a in enumerate(args)]
        out = f(*ps)
        b.fn.body.results.extend(b.lift(o) for o in (out if isinstance(out, tuple) else (out,)))
    return b.fn


def both(fn, *args):
    """(native results or error message, interpreter results or error message)."""
    out = []
    for run in (lambda: compile_functions({"f": fn})["f"](*args),
                lambda: interp.run(fn, *args)):
        try:
            out.append(run())
        except IndexingError as e:
            out.append(e.what)
    return out


def gather(x, i):
    return np.sum(x[i] * 2.0)


def gather_axis1(x, i):
    return np.sum(x[:, i])


def gather_two(x, i, j):
    return np.sum(x[i, j])


def gather_empty_slice(x, i):
    return np.sum(x[i, :0])


def gather_empty_broadcast(x, i, j):
    return np.sum(x[i, j])


def scatter(g, i):
    return bind(scatter_add_p, g, i, key=(("a", 0),), shape=(5,))


def put(x, i):
    return setitem(x * 1.0, i, 7.0)


def accumulate(g, i):
    """ct += scatter_add(g[k], i[k]) in a loop: codegen's in-place `accumulate` op."""
    def body(k, ct):
        return ct + bind(scatter_add_p, g[k], i[k], key=(("a", 0),), shape=(5,))
    return control.for_loop(0, 3, 1, body, np.zeros(5))[0]


accumulate.reference = scatter  # np.add.at, element by element as the loop


X5, X34 = np.arange(5.0) + 1.0, np.arange(12.0).reshape(3, 4)
CASES = [  # (function, arguments) with valid and invalid indices
    (gather, X5, np.array([0, 4, -1, -5])),
    (gather, X5, np.array([0, 5])),
    (gather, X5, np.array([0, -6])),
    (gather, X5, np.array([3, 100_000_000])),
    (gather, X5, np.array([-100_000_000])),
    (gather, X5, np.array(4)),
    (gather, X5, np.array(-6)),
    (gather, X5, np.array([[1, 2], [7, 9]])),
    (gather_axis1, X34, np.array([3, -4])),
    (gather_axis1, X34, np.array([1, 4])),
    (gather_two, X34, np.array([0, 2]), np.array([1, 3])),
    (gather_two, X34, np.array([0, 3]), np.array([9, 1])),  # numpy names the first array's
    (gather_two, X34, np.array([0, 1]), np.array([2, -5])),
    (gather_empty_slice, X34, np.array([1, 9])),  # numpy checks beside an empty slice
    (gather_empty_broadcast, X34, np.array([9]), np.zeros(0, np.int64)),  # but not here
    (gather_empty_broadcast, X34, np.array(9), np.zeros(0, np.int64)),  # a 0-d one always
    (gather_two, X34, np.array([[5]]), np.array(-7)),  # and before the arrays
    (scatter, np.ones(3), np.array([4, -5, 4])),
    (scatter, np.ones(3), np.array([4, 5, 0])),
    (accumulate, np.ones(3), np.array([4, -5, 4])),
    (accumulate, np.ones(3), np.array([4, 0, -6])),
    (put, X5, np.array([-1, 0])),
    (put, X5, np.array([1, -6])),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c[0].__name__}{c[-1].tolist()}")
def test_indices_are_checked_as_numpy_does(case):
    f, *args = case
    fn = build(f, *args)
    native, interpreted = both(fn, *args)
    try:
        want = [np.asarray(getattr(f, "reference", f)(*args))]
    except IndexError as e:
        want = str(e)
    if isinstance(want, str):
        assert native == interpreted == want
    else:
        for got in (native, interpreted):
            assert not isinstance(got, str), got
            np.testing.assert_allclose(got[0], want[0])


def _loop(offset, start, stop):
    def f(x):
        return control.for_loop(start, stop, 1, lambda i, s: s + x[i + offset], 0.0)[0]
    f.__name__ = f"loop_{offset}_{start}_{stop}"
    return f


@pytest.mark.parametrize("offset,start,stop,checked", [
    (0, 0, 5, False), (-1, 1, 5, False), (1, 0, 4, False), (-5, 0, 5, False),
    (1, 0, 5, True), (-6, 0, 5, True)])
def test_index_checks_the_ir_proves_are_left_out(offset, start, stop, checked):
    """x[i + c] for i in range(start, stop) needs no check when it stays in -n..n-1."""
    x = np.arange(5.0)
    fn = build(_loop(offset, start, stop), x)
    for g in (fn, optimize(ad.grad_function(fn, [0]))):  # the backward scatters at i + c
        entry = compile_functions({"f": g})["f"]
        assert any(s.kind == "index" for s in entry.sites) == checked
    native, interpreted = both(fn, x)
    if checked:
        last = stop - 1 + offset if offset > 0 else start + offset
        assert native == interpreted == f"index {last} is out of bounds for axis 0 with size 5"
    else:
        np.testing.assert_allclose(native[0], interpreted[0])


def test_the_backward_of_a_loop_checks_its_scatters():
    """z[i + 1] = x[i] over the whole range: the joint entry stops, no garbage gradient."""
    def setter(i, z):
        return setitem(z, i + 1, x[i])

    b = Builder("f", loc=None)
    with b:
        x = b.param(((5,), np.dtype("f8")), "x")
        z = control.for_loop(0, 5, 1, setter, np.zeros(5))[0]
        b.fn.body.results.append(b.lift(np.sum(z * z)))
    joint = optimize(ad.grad_function(b.fn, [0]))
    native, interpreted = both(joint, np.arange(5.0))
    assert native == interpreted == "index 5 is out of bounds for axis 0 with size 5"


def test_a_failing_site_names_its_line():
    fn = build(gather, X5, np.array([0]))
    loc = SourceLoc("model.py", 12, 0, "loss")
    for op in fn.walk():
        op.loc = loc
    entry = compile_functions({"f": fn})["f"]
    with pytest.raises(IndexError, match=r"(?s)index 9 is out of bounds for axis 0 with size 5"
                                         r".*at model.py:12 \(in loss\)"):
        entry(X5, np.array([9]))
    np.testing.assert_allclose(entry(X5, np.array([4]))[0], 10.0)  # and runs on afterwards


def test_user_kind_raises_the_users_exception():
    """The kind a lowered `raise` uses: info = (class, args); the note names the line."""
    module = ir.Module("user_kind")
    site = native_errors.Site("user", SourceLoc("model.py", 3), (ValueError, ("x < 0",)))
    big = native_errors.Site("user", SourceLoc("model.py", 5), (KeyError, (["unhashable"],)))
    with define_kernel(module, "k", 2) as (b, (x, ws)):
        failures = native_errors.Failures(b, ws, 0)
        value = load(b, x, 0, ir.DoubleType())
        for s, test in [(site, "<"), (site, "!="), (big, ">")]:  # a site used twice is one
            limit = 0.0 if test == "<" else 1e9 if test == ">" else float("nan")
            failures.fail_if(b.fcmp_ordered(test, value, ir.Constant(ir.DoubleType(), limit)),
                             s)
        failures.finish(lambda b: None)
    kernel = Kernel(compile_module(str(module), ["k"])["k"], 2)
    ws = np.zeros(8, np.uint8)
    assert kernel(np.array(1.0), ws) == 0
    assert failures.sites == [site, big]
    assert kernel(np.array(2e9), ws) == 2
    status = kernel(np.array(-1.0), ws)
    assert status == 1
    with pytest.raises(ValueError, match="x < 0") as e:
        native_errors.raise_for(failures.sites[status - 1], 0)
    assert "raised by compiled code at model.py:3" in e.value.__notes__[0]


def _traced_range(x, start, stop, step):
    """A light body over a range whose bounds are only known at run time: chunked polls."""
    def body(i, s, t):
        return s * 0.5 + i, t + x[i % 7]
    return control.for_loop(start, stop, step, body, 0.0, 0.0)


@pytest.mark.parametrize("start,stop,step", [
    (0, 0, 1), (0, 1, 1), (0, 63, 1), (0, 64, 1), (0, 65, 1), (3, 200, 1), (5, 1000, 7),
    (200, 3, -1), (999, -1, -3), (0, 10, -1), (-50, 70, 64), (7, 7, -2)])
def test_loops_polled_in_chunks_run_every_iteration(start, stop, step):
    """Note [Where loops poll]: the chunked loop runs exactly range(start, stop, step)."""
    x = np.arange(7.0) + 1.0
    args = (x, *(np.array(v) for v in (start, stop, step)))
    fn = build(_traced_range, *args)
    entry = compile_functions({"f": fn})["f"]
    assert [s.kind for s in entry.sites] == ["interrupt"]  # it polls
    want = interp.run(fn, *args)
    s = t = 0.0
    for i in range(start, stop, step):
        s, t = s * 0.5 + i, t + x[i % 7]
    np.testing.assert_allclose(want, [s, t])
    np.testing.assert_allclose(entry(*args), want, rtol=1e-15)


def _static_loop(n):
    def f(x):
        return control.for_loop(0, n, 1, lambda i, s: s * 0.5 + x[i % 3], 0.0)[0]
    f.__name__ = f"static_loop_{n}"
    return f


@pytest.mark.parametrize("n,polls", [(1000, False), (3_000_000, True)])
def test_short_loops_do_not_poll(n, polls):
    """A loop the IR proves short (trips x work under a few ms) has no poll at all."""
    x = np.arange(3.0)
    fn = build(_static_loop(n), x)
    entry = compile_functions({"f": fn})["f"]
    assert any(s.kind == "interrupt" for s in entry.sites) == polls
    want = 0.0
    for i in range(max(0, n - 200), n):  # earlier terms fade below rounding (0.5 ** 200)
        want = want * 0.5 + x[i % 3]
    np.testing.assert_allclose(entry(x)[0], want, rtol=1e-14)


def _run(tmp_path, script: str, timeout: float = 120) -> subprocess.CompletedProcess:
    path = tmp_path / "script.py"  # a file: llgrad compiles control flow from the source
    path.write_text(textwrap.dedent(script))
    # A shell's background job starts with SIGINT ignored, which Python would keep: the
    # Ctrl-C tests need the child to turn SIGINT into KeyboardInterrupt wherever they run.
    return subprocess.run([sys.executable, str(path)], cwd=ROOT, capture_output=True,
                          text=True, timeout=timeout,
                          preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))


LONG_LOOP = '''
import numpy as np
import llgrad

def f(x, n):
    k = 0
    s = x
    while k < n:
        s = s * s * 0.5 + 0.25  # the gradient needs every s: a tape
        k = k + 1
    return np.sum(s)

f = llgrad.differentiate(f)


@llgrad.differentiate
def chunked(x, n):  # a for-loop of unknown length and a light body: a poll per chunk
    s = x
    for i in range(n):
        s = s * s * 0.5 + 0.25
    return s


@llgrad.differentiate
def heavy(x, n):  # array work in every iteration: a poll per iteration
    s = x
    for i in range(n):
        s = np.sin(s) * 0.5 + 0.25
    return np.sum(s)
'''


LINUX_ONLY = pytest.mark.skipif(sys.platform != "linux",
                                reason="reads /proc/self/statm; RLIMIT_AS is Linux's")


@LINUX_ONLY
def test_a_tape_that_outgrows_memory_is_a_memory_error_and_is_freed(tmp_path):
    """Under an address-space limit (768 MiB above what the process holds, so the test is
    quick) a loop of 1e8 iterations cannot keep its tape: MemoryError naming the loop's line
    (it was a segfault); the tape is freed on the way out (RSS does not grow over failed
    calls; a leak would also make the second call fail on a smaller request), and the next
    call works."""
    out = _run(tmp_path, LONG_LOOP + '''
import resource
x = np.ones(64)
small = f.grad(x, np.array(10))

def statm_mb(field):
    with open("/proc/self/statm") as s:
        return int(s.read().split()[field]) * resource.getpagesize() >> 20

limit = (statm_mb(0) + 768) << 20
resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
start = statm_mb(1)
for _ in range(2):
    try:
        f.grad(x, np.array(10 ** 8))
        print("no error")
    except MemoryError as e:
        print(type(e).__name__, str(e).splitlines()[0])
        print(str(e).splitlines()[1])
print("grew", statm_mb(1) - start)
print("same", np.array_equal(f.grad(x, np.array(10)), small))
''')
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0].startswith("OutOfMemoryError compiled code could not allocate"), lines
    assert "for a loop tape" in lines[0] and lines[1].endswith("(in f)"), lines
    assert lines[2:4] == lines[:2], lines
    assert int(lines[4].split()[1]) < 100, lines
    assert lines[5] == "same True", lines


@LINUX_ONLY
def test_ctrl_c_stops_a_compiled_loop(tmp_path):
    """SIGINT 1 s into a loop of 1e11 iterations: KeyboardInterrupt within a second (it ran
    on for minutes), for a while-loop and for-loops polled per chunk and per iteration
    (Note [Where loops poll]); a handler that returns lets the call finish with the right
    value (it is rerun); one installed after the first call is honoured too, and its
    exception propagates, the tape the call grew freed. Latencies are measured from the
    kill."""
    out = _run(tmp_path, LONG_LOOP + '''
import os, signal, threading, time
sent = []

def kick(delay):
    time.sleep(delay)
    sent.append(time.perf_counter())
    os.kill(os.getpid(), signal.SIGINT)

for g, x, delay in [(f, 1.0, 1.0), (chunked, 1.0, 0.3), (heavy, np.ones(1000), 0.3)]:
    g(x, np.array(10))
    threading.Thread(target=kick, args=(delay,)).start()
    try:
        g(x, np.array(10 ** 11))
        print("finished")
    except KeyboardInterrupt:
        print("KeyboardInterrupt", time.perf_counter() - sent[-1])

n = np.array(10 ** 7)
want = f(1.0, n)
hits = []
signal.signal(signal.SIGINT, lambda *a: hits.append(1))
threading.Thread(target=kick, args=(0.005,)).start()
print("rerun", f(1.0, n) == want, len(hits))

def stop(*a):
    raise RuntimeError("stop")

def rss_mb():
    with open("/proc/self/statm") as s:
        return int(s.read().split()[1]) * 4096 >> 20

signal.signal(signal.SIGINT, stop)
threading.Thread(target=kick, args=(0.2,)).start()
before = rss_mb()
try:
    f.grad(1.0, np.array(10 ** 11))  # its tape grows by ~1 GB/s until the signal
except RuntimeError as e:
    print(e, time.perf_counter() - sent[-1], rss_mb() - before)
''', timeout=60)
    assert out.returncode == 0, out.stderr
    *firsts, rerun, custom = out.stdout.splitlines()
    assert len(firsts) == 3, out.stdout
    for first in firsts:
        what, seconds = first.split()
        assert what == "KeyboardInterrupt" and float(seconds) < 1.5, out.stdout
    assert rerun == "rerun True 1", out.stdout
    what, seconds, grew = custom.split()
    assert what == "stop" and float(seconds) < 1.5, out.stdout
    assert int(grew) < 50, out.stdout  # the tape was freed on the way out


# ---- kernels run in segments (Note [Kernel segments] in lower.py) ---------------------------
class Negative(Exception):
    pass


def seg_gather(x, i):
    y = np.sin(x) * 2.0
    z = np.cos(y) + y
    return np.sum(z[i] * 3.0)  # the index check sits in a later segment


def seg_raise(x):
    y = np.exp(x) - 2.0
    if np.sum(y) < 0.0:
        raise Negative("below zero", 3)
    return np.sum(y * y)


def _segmented(monkeypatch, fn):
    """`fn` differentiated, with every top-level unit of a kernel in a segment of its own."""
    import llgrad
    from llgrad.codegen import lower
    monkeypatch.delenv("LLGRAD_DISABLE_JIT", raising=False)
    monkeypatch.setattr(lower, "SEGMENT_OPS", 1)
    return llgrad.differentiate(fn)


def _parts(d, entry: str) -> int:
    llvm_ir = next(iter(d._cache.values())).modules[entry].llvm_ir
    return sum(1 for line in llvm_ir.splitlines()
               if line.startswith("define") and ".part" in line)


def test_a_segment_that_fails_stops_the_kernel_at_the_users_line(monkeypatch):
    """A bad index in a later segment of the forward and the joint kernels: IndexError
    naming the line (the segment's status is the kernel's), the same as the interpreter;
    the next call runs on."""
    d = _segmented(monkeypatch, seg_gather)
    x, line = np.linspace(0.1, 0.9, 5), seg_gather.__code__.co_firstlineno + 3
    v, g = d.value_and_grad(x, np.array([1, 4]))
    assert d(x, np.array([1, 4])) == v
    assert _parts(d, "forward") > 2 and _parts(d, "joint") > 2
    where = rf"(?s)index 7 is out of bounds for axis 0 with size 5.*{__file__}:{line}"
    for call in (d, d.grad):
        with pytest.raises(IndexError, match=where):
            call(x, np.array([1, 7]))
    import llgrad
    monkeypatch.setenv("LLGRAD_DISABLE_JIT", "1")
    ref = llgrad.differentiate(seg_gather)
    with pytest.raises(IndexError, match=where):
        ref(x, np.array([1, 7]))
    rv, rg = ref.value_and_grad(x, np.array([1, 4]))
    monkeypatch.delenv("LLGRAD_DISABLE_JIT")
    np.testing.assert_allclose(d.grad(x, np.array([1, 4])), rg, rtol=1e-14)
    np.testing.assert_allclose(v, rv, rtol=1e-14)


def test_a_users_raise_in_a_segment(monkeypatch):
    d = _segmented(monkeypatch, seg_raise)
    x = np.array([1.0, 2.0])
    v, g = d.value_and_grad(x)
    assert _parts(d, "joint") > 2
    np.testing.assert_allclose(g, 2.0 * (np.exp(x) - 2.0) * np.exp(x), rtol=1e-14)
    for call in (d, d.grad):
        with pytest.raises(Negative) as info:
            call(-x)
        assert info.value.args == ("below zero", 3)
    assert d(x) == v


@LINUX_ONLY
def test_ctrl_c_stops_a_loop_in_a_segment(tmp_path):
    """The loop runs in a segment after others; its polls compare with the count the
    kernel read at entry, and the interrupt leaves through the segment and the kernel."""
    out = _run(tmp_path, '''
import os, signal, threading, time
import numpy as np
import llgrad
from llgrad.codegen import lower
lower.SEGMENT_OPS = 1

@llgrad.differentiate
def f(x, n):
    y = np.sin(x) * 0.5
    s = y
    for i in range(n):
        s = s * s * 0.5 + 0.25
    return np.sum(s) + np.sum(y)

x = np.ones(3)
f(x, np.array(10))
llvm_ir = next(iter(f._cache.values())).modules["forward"].llvm_ir
print("parts", sum(1 for l in llvm_ir.splitlines() if l.startswith("define") and ".part" in l))
sent = []

def kick():
    time.sleep(0.3)
    sent.append(time.perf_counter())
    os.kill(os.getpid(), signal.SIGINT)

threading.Thread(target=kick).start()
try:
    f(x, np.array(10 ** 11))
    print("finished")
except KeyboardInterrupt:
    print("KeyboardInterrupt", time.perf_counter() - sent[-1])
''', timeout=60)
    assert out.returncode == 0, out.stderr
    parts, stopped = out.stdout.splitlines()
    assert int(parts.split()[1]) > 2, out.stdout
    what, seconds = stopped.split()
    assert what == "KeyboardInterrupt" and float(seconds) < 1.5, out.stdout
