"""The on-disk compile cache (issue 6): a second process reuses object code; corrupt or
foreign entries are ignored; damaged object code is a miss, never a crash (issue 10, item 9);
writes are atomic; `llgrad.cache` info/clear. Safety of the directory: test_cache_security.py."""
import glob
import json
import os
import random
import struct
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import llgrad
from llgrad import cache
from llgrad.codegen import abi, jit

SCRIPT = textwrap.dedent("""
    import numpy as np, llgrad
    @llgrad.differentiate(cache=True)
    def f(x, w):
        return np.sum(np.tanh(x * w) ** 2 + 0.5 * np.sin(x))
    x = np.linspace(-1, 1, 7)
    v, g = f.value_and_grad(x, 1.5)
    print(repr(v), f.inspect(x, 1.5).stats.get("disk cache", "miss"))
""")


def run_script(tmp_path, cache_dir, text: str) -> tuple[list[str], str]:
    """Run `text` as a user's script in a fresh process on `cache_dir`: (stdout words,
    stderr); fails the test if the process fails (an LLVM abort included)."""
    script = tmp_path / "user_script.py"
    script.write_text(text)
    env = dict(os.environ, LLGRAD_CACHE_DIR=str(cache_dir))
    env.pop("LLGRAD_DISABLE_JIT", None)
    env.pop("LLGRAD_CACHE", None)
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    return out.stdout.split(), out.stderr


def _run(tmp_path, cache_dir):
    return run_script(tmp_path, cache_dir, SCRIPT)[0]


def test_second_process_hits_the_cache(tmp_path, cache_dir):
    v1, state1 = _run(tmp_path, cache_dir)
    v2, state2 = _run(tmp_path, cache_dir)
    assert (state1, state2) == ("miss", "hit")
    assert v1 == v2
    assert cache.info()["entries"] == 2  # the function's code (with the support functions) and
    # its conversion (Note [Converted code on disk])
    assert oct(os.stat(cache_dir).st_mode & 0o777) == "0o700"


def test_cached_code_calling_scipy_special_links_in_a_new_process(tmp_path, cache_dir):
    # the object code calls scipy's C functions through named symbols, registered again on
    # load (Note [scipy.special's C functions])
    text = SCRIPT.replace("np.sin(x)", "__import__('scipy.special').special.i0(x)")
    text = text.replace("print(repr(v)", "print(repr(v), repr(float(g[0]))")
    runs = [run_script(tmp_path, cache_dir, text)[0] for _ in range(2)]
    assert [r[-1] for r in runs] == ["miss", "hit"]
    assert runs[0][:2] == runs[1][:2]


def test_in_process_hit_gives_the_same_value_and_gradient(cache_dir):
    def g(x):
        return np.sum(np.exp(-x ** 2) * np.cos(x))
    x = np.linspace(-2, 2, 9)
    a = llgrad.differentiate(g, cache=True).value_and_grad(x)
    b = llgrad.differentiate(g, cache=True)
    v, grad = b.value_and_grad(x)
    stats = b.inspect(x).stats
    assert stats["disk cache"] == "hit"
    # the keys of a compile, consistent on a hit (test_inspect reads them with a warm cache)
    assert stats["codegen time"] == stats["codegen time (joint)"] == 0.0
    assert stats["disk load time (joint)"] > 0.0 and " ms" in str(stats)
    assert v == a[0]
    np.testing.assert_array_equal(grad, a[1])


def test_corrupt_and_foreign_entries_are_ignored(cache_dir):
    def h(x):
        return np.sum(x ** 3)
    x = np.arange(4.0)
    llgrad.differentiate(h, cache=True).grad(x)
    (entry,) = entries(cache_dir)
    with open(entry, "r+b") as f:  # truncate the payload: a crash mid-write of a copy
        f.truncate(40)
    d = llgrad.differentiate(h, cache=True)
    np.testing.assert_allclose(d.grad(x), 3 * x ** 2)
    assert "disk cache" not in d.inspect(x).stats  # recompiled, and rewritten
    with open(entry, "wb") as f:
        f.write(b"not an llgrad cache entry")
    np.testing.assert_allclose(llgrad.differentiate(h, cache=True).grad(x), 3 * x ** 2)
    _flip_a_byte(entry)  # damaged object code would crash LLVM: the digest rejects it
    d = llgrad.differentiate(h, cache=True)
    np.testing.assert_allclose(d.grad(x), 3 * x ** 2)
    assert "disk cache" not in d.inspect(x).stats


def _flip(data: bytes, i: int) -> bytes:
    out = bytearray(data)
    out[i] ^= 0xFF
    return bytes(out)


def test_error_sites_come_back_from_the_cache(cache_dir):
    """A kernel loaded from disk still stops at a bad index and names the line."""
    def pick(x, i):
        return np.sum(x[i])
    x = np.arange(4.0)
    llgrad.differentiate(pick, cache=True)(x, np.array([3]))
    d = llgrad.differentiate(pick, cache=True)
    assert d(x, np.array([-4])) == 0.0
    assert d.inspect(x, np.array([-4])).stats["disk cache"] == "hit"
    with pytest.raises(IndexError, match=r"(?s)index 4 is out of bounds.*in pick"):
        d(x, np.array([4]))


def test_an_entry_that_does_not_pickle_is_not_stored(cache_dir):
    """A failure site whose exception class is local (a user's `raise`) cannot be named on
    disk (Note [Failure sites on disk]): the compile cache warns and skips it instead of
    failing the call."""
    class Local(Exception):
        pass

    from llgrad.codegen import compile_functions, native_errors
    from llgrad.transform.builder import Builder
    b = Builder("f", loc=None)
    with b:
        p = b.param(((3,), np.dtype("f8")), "x")
        b.fn.body.results.append(b.lift(np.sum(p)))
    m = compile_functions({"f": b.fn}, keep_object=True)
    symbol, n, ins, outs, sites, record, tapes = m.layout["f"]
    m.layout["f"] = (symbol, n, ins, outs, [native_errors.Site("user", None, (Local, ()))],
                     record, tapes)
    with pytest.warns(UserWarning, match="could not write the compile cache"):
        cache.store_module("local-class", m)
    assert cache.info()["entries"] == 0


def _flip_a_byte(path) -> None:
    with open(path, "rb") as f:
        data = f.read()
    with open(path, "wb") as f:
        f.write(_flip(data, len(data) // 2))


TRAMPOLINE_SCRIPT = textwrap.dedent("""
    import sys
    import numpy as np, llgrad
    from llgrad.codegen import abi, jit
    @llgrad.differentiate(cache=CACHE)
    def f(x):
        return np.sum(np.sin(x) * x)
    v, g = f.value_and_grad(np.linspace(-1, 1, 5))
    assert abi.fast_path_available()
    lowering = [m for m in ("llgrad.codegen.lower", "llgrad.codegen.plan") if m in sys.modules]
    print(repr(v), "llvm" if jit.get_jit().compile_seconds > 0 else "no-llvm",
          "lowering" if lowering else "no-lowering")
""")


def _run_trampoline_script(tmp_path, cache_dir, use_cache=True):
    return run_script(tmp_path, cache_dir, TRAMPOLINE_SCRIPT.replace("CACHE", str(use_cache)))[0]


def test_warm_process_runs_neither_llvm_nor_the_lowering(tmp_path, cache_dir):
    v1, llvm1, lowering1 = _run_trampoline_script(tmp_path, cache_dir)
    v2, llvm2, lowering2 = _run_trampoline_script(tmp_path, cache_dir)
    # the calling trampoline came with the kernel's entry (Note [Support functions in
    # kernel modules]): no LLVM pass, and the lowering is not even imported
    assert (llvm1, llvm2) == ("llvm", "no-llvm")
    assert (lowering1, lowering2) == ("lowering", "no-lowering")
    assert v1 == v2
    assert cache.info()["entries"] == 2  # its code and its conversion


def entries(cache_dir, kind: str | None = "module") -> list[str]:
    """The paths of the cache's entries of `kind` ("module": compiled code, "conversion":
    converted source, Note [Converted code on disk]; None: all)."""
    paths = sorted(glob.glob(os.path.join(cache_dir, "??", "*.llgc")))
    return [p for p in paths
            if kind is None or cache.load(os.path.basename(p)[:-5])[0]["kind"] == kind]


def _replace_object(path, damage) -> None:
    """Store `damage(object code)` in the entry at `path`, with a valid checksum."""
    k = os.path.basename(path)[:-len(".llgc")]
    meta, object_code = cache.load(k)
    cache.store(k, meta, damage(object_code))


def test_corrupt_entry_is_recompiled_with_its_support_functions(tmp_path, cache_dir):
    v1, *_ = _run_trampoline_script(tmp_path, cache_dir)
    (entry,) = entries(cache_dir)
    _flip_a_byte(entry)  # caught by the checksum
    v2, llvm2, _ = _run_trampoline_script(tmp_path, cache_dir)
    assert (v2, llvm2) == (v1, "llvm")  # recompiled, and rewritten:
    assert _run_trampoline_script(tmp_path, cache_dir)[1] == "no-llvm"
    _replace_object(entry, lambda obj: obj[:len(obj) // 2])  # by the object check
    assert _run_trampoline_script(tmp_path, cache_dir)[:2] == [v1, "llvm"]
    assert _run_trampoline_script(tmp_path, cache_dir)[1] == "no-llvm"
    meta, obj = cache.load(os.path.basename(entry)[:-5])
    del meta["support"]  # an entry without the support functions' symbols is not used
    cache.store(os.path.basename(entry)[:-5], meta, obj)
    assert _run_trampoline_script(tmp_path, cache_dir)[:2] == [v1, "llvm"]


def test_damaged_kernel_entry_with_a_valid_checksum_is_recompiled(tmp_path, cache_dir):
    v1, _ = _run(tmp_path, cache_dir)
    (entry,) = entries(cache_dir)
    _replace_object(entry, lambda obj: obj[:100])
    assert _run(tmp_path, cache_dir) == [v1, "miss"]  # recompiled, and rewritten:
    assert _run(tmp_path, cache_dir) == [v1, "hit"]


DAMAGED_CHILD = textwrap.dedent("""
    import json, sys
    import numpy as np
    from llgrad import cache
    from llgrad.codegen import jit, vmath
    names, fuzzed = json.loads(sys.argv[1]), json.loads(sys.argv[2])
    print(json.dumps({n: cache.load_module(n) is not None for n in names}))
    print(json.dumps(list(cache.load_module("intact")["joint"](np.arange(4.0))[1])))
    vmath.mvec_available()  # (the symbols the object code calls)
    accepted = {}
    for path, symbols in fuzzed:  # every byte of the object flipped in turn
        obj = open(path, "rb").read()
        accepted[path] = 0
        for i in range(len(obj)):
            b = bytearray(obj)
            b[i] ^= 0xFF
            try:
                jit.get_jit().add_object(bytes(b), symbols)
                accepted[path] += 1
            except jit.JitError:
                pass
    print(json.dumps(accepted))
""")


def test_damaged_object_code_is_a_miss_never_a_crash(tmp_path, cache_dir):
    """Object code that passes the checksum but is damaged inside never reaches LLVM's loader
    (which aborts or segfaults on it): each load is a miss. Loaded in a child process, so
    an abort fails this test instead of killing pytest."""
    x = np.arange(4.0)
    llgrad.differentiate(lambda x: np.sum(x ** 3), cache=True).grad(x)
    (path,) = entries(cache_dir)
    meta, obj = cache.load(os.path.basename(path)[:-5])
    llgrad.differentiate(lambda x: np.sum(np.sin(x) * x), cache=True).grad(x)
    (elsewhere,) = [p for p in entries(cache_dir) if p != path]
    shoff, = struct.unpack_from("<Q", obj, 40)  # e_shoff: where the section headers start
    variants = {
        "truncated": obj[:len(obj) // 2],
        "header only": obj[:64],
        "empty": b"",
        "flipped machine": _flip(obj, 18),
        "flipped section table offset": _flip(obj, 41),
        "flipped section count": _flip(obj, 60),
        "flipped section offset": _flip(obj, shoff + 2 * 64 + 25),
        "another function's object": cache.load(os.path.basename(elsewhere)[:-5])[1],
        "random bytes": random.Random(0).randbytes(len(obj)),
    }
    for name, damaged in variants.items():
        cache.store(cache.key(name), meta, damaged)
    cache.store(cache.key("intact"), meta, obj)
    j = jit.get_jit()
    trampoline = j.target.machine.emit_object(j.optimize(j.parse(abi._support_ir(trampoline=True))))
    fuzzed = []
    for name, data, symbols in [("kernel.o", obj, [meta["layout"]["joint"][0]]),
                                ("trampoline.o", trampoline, ["llgrad_call_arrays"])]:
        (tmp_path / name).write_bytes(data)
        fuzzed.append((str(tmp_path / name), symbols))
    env = dict(os.environ, LLGRAD_CACHE_DIR=str(cache_dir))
    out = subprocess.run([sys.executable, "-c", DAMAGED_CHILD, json.dumps(list(variants)),
                          json.dumps(fuzzed)], capture_output=True, text=True, env=env,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    loaded, grad, accepted = map(json.loads, out.stdout.splitlines())
    assert loaded == {name: False for name in variants}
    np.testing.assert_allclose(grad, 3 * x ** 2)  # the intact entry loads and runs
    assert all(n > 0 for n in accepted.values())  # (flips in the code itself load)


def test_trampoline_is_compiled_and_not_stored_without_the_cache(tmp_path, cache_dir):
    assert _run_trampoline_script(tmp_path, cache_dir, use_cache=False)[1] == "llvm"
    assert not cache_dir.exists()


def test_clear_and_info(cache_dir):
    llgrad.differentiate(lambda x: np.sum(x * x), cache=True).grad(np.ones(3))
    assert cache.info()["entries"] == 2 and cache.info()["bytes"] > 0  # code, conversion
    assert cache.clear() == 2
    assert cache.info()["entries"] == 0


def test_global_switch(cache_dir, monkeypatch):
    monkeypatch.setenv("LLGRAD_CACHE", "1")
    llgrad.differentiate(lambda x: np.sum(np.sin(x))).grad(np.ones(2))
    assert cache.info()["entries"] == 2  # its code and its conversion (a lambda's too)


def test_concurrent_writers_of_one_entry(tmp_path, cache_dir):
    script = tmp_path / "user_script.py"
    script.write_text(SCRIPT)
    env = dict(os.environ, LLGRAD_CACHE_DIR=str(cache_dir))
    env.pop("LLGRAD_DISABLE_JIT", None)
    procs = [subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, env=env) for _ in range(3)]
    outs = [p.communicate(timeout=120) for p in procs]
    assert all(p.returncode == 0 for p in procs), [e for _, e in outs]
    assert len({o.split()[0] for o, _ in outs}) == 1  # the same value from every process
    assert _run(tmp_path, cache_dir)[1] == "hit"
    leftovers = [f for _, _, fs in os.walk(cache_dir) for f in fs if f.startswith(".tmp-")]
    assert not leftovers


class NotConverged(Exception):
    pass


def _checked_sqrt(x):
    if x[0] < 0:
        raise NotConverged("negative input", 7)
    return np.sum(np.sqrt(np.abs(x)))


def test_a_user_raise_comes_back_from_the_cache(cache_dir):
    """A `raise` under a traced condition is a failure site naming its class by module and
    qualname (Note [Failure sites on disk]): loaded from disk it raises the same exception."""
    x = np.array([1.0, 4.0])
    llgrad.differentiate(_checked_sqrt, cache=True)(x)
    d = llgrad.differentiate(_checked_sqrt, cache=True)
    assert d(x) == 3.0 and d.inspect(x).stats["disk cache"] == "hit"
    with pytest.raises(NotConverged) as info:
        d(-x)
    assert info.value.args == ("negative input", 7)


CHECKED_SCRIPT = textwrap.dedent("""
    import numpy as np, llgrad
    from llgrad.codegen import lower
    lower.SEGMENT_OPS = 1  # the kernels run in segments (Note [Kernel segments])

    class Negative(Exception):
        pass

    @llgrad.differentiate(cache=True)
    def f(x, i):
        y = np.sin(x) * 2.0
        if np.sum(y) < 0.0:
            raise Negative("below zero")
        return np.sum(np.cos(y)[i] * 3.0)

    x, good = np.linspace(0.1, 0.9, 5), np.array([1, 4])
    v, g = f.value_and_grad(x, good)
    stats = next(iter(f._cache.values())).stats  # (inspect() would make every stage)
    print(repr(v), repr(float(g @ np.arange(5.0))), stats.get("disk cache", "miss"),
          "autodiff" if "autodiff time" in stats else "no-autodiff")
    for call in (f, f.grad):
        try:
            call(x, np.array([1, 7]))
        except IndexError as e:
            what, where = str(e).splitlines()[:2]
            print("IndexError", what.split()[1], where.split(":")[1].split()[0])
        try:
            call(-x, good)
        except Negative as e:
            print("Negative", *e.args[0].split())
""")


def test_a_warm_start_keeps_index_checks_and_a_users_raise(tmp_path, cache_dir):
    """A warm start loads the joint entry by the trace's key without running AD (Note [Warm
    starts]); its failure sites come from the entry's JSON (Note [Failure sites on disk]):
    the bad index and the `raise` stop it as they stop the cold process, in segments too."""
    cold = run_script(tmp_path, cache_dir, CHECKED_SCRIPT)[0]
    warm = run_script(tmp_path, cache_dir, CHECKED_SCRIPT)[0]
    assert cold[2:4] == ["miss", "autodiff"] and warm[2:4] == ["hit", "no-autodiff"]
    assert cold[:2] == warm[:2]
    line = CHECKED_SCRIPT.splitlines().index("    return np.sum(np.cos(y)[i] * 3.0)") + 1
    failures = ["IndexError", "7", str(line), "Negative", "below", "zero"] * 2
    assert cold[4:] == warm[4:] == failures


def test_a_change_to_llgrads_own_code_is_a_new_key(tmp_path):
    # Note [Object code made by other code]: the version alone does not name the code.
    for pkg in cache._PACKAGES:
        (tmp_path / pkg / "sub").mkdir(parents=True)
        (tmp_path / pkg / "sub" / "a.py").write_text("x = 1\n")
    (tmp_path / "codegen" / "notes.txt").write_text("not code")
    before = cache._code_stamp(str(tmp_path))
    assert cache._code_stamp(str(tmp_path)) == before
    (tmp_path / "codegen" / "notes.txt").write_text("still not code")
    assert cache._code_stamp(str(tmp_path)) == before
    lowering = tmp_path / "codegen" / "sub" / "a.py"
    lowering.write_text("x = 2\n")  # same size: the time of change tells
    os.utime(lowering, ns=(0, os.stat(lowering).st_mtime_ns + 1))
    assert cache._code_stamp(str(tmp_path)) != before
    assert cache._code_stamp() in cache.environment()


def test_a_checkout_changed_since_an_entry_was_stored_recompiles(tmp_path, cache_dir,
                                                                monkeypatch):
    def fresh():
        f = llgrad.differentiate(lambda x: np.sum(np.sin(x)), cache=True)
        f.grad(np.ones(3))
        return f.inspect(np.ones(3)).stats.get("disk cache", "miss")

    assert [fresh(), fresh()] == ["miss", "hit"]
    monkeypatch.setattr(cache, "_FIXED", [cache._FIXED[0].replace(cache._code_stamp(), "0" * 16)])
    assert fresh() == "miss"
