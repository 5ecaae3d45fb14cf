"""The on-disk compile cache (issue 6): a second process reuses object code; corrupt or
foreign entries are ignored; writes are atomic; `llgrad.cache` info/clear."""
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import llgrad
from llgrad import cache
from llgrad.codegen import abi

SCRIPT = textwrap.dedent("""
    import numpy as np, llgrad
    @llgrad.differentiate(cache=True)
    def f(x, w):
        return np.sum(np.tanh(x * w) ** 2 + 0.5 * np.sin(x))
    x = np.linspace(-1, 1, 7)
    v, g = f.value_and_grad(x, 1.5)
    print(repr(v), f.inspect(x, 1.5).stats.get("disk cache", "miss"))
""")


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    # The calling trampoline is set up once per process (here, before this cache exists), so
    # in-process entry counts below are compiled functions only.
    abi.fast_path_available()
    d = tmp_path / "cache"
    monkeypatch.setenv("LLGRAD_CACHE_DIR", str(d))
    monkeypatch.delenv("LLGRAD_DISABLE_JIT", raising=False)
    return d


def _run(tmp_path, env_dir):
    script = tmp_path / "user_script.py"
    script.write_text(SCRIPT)
    env = dict(os.environ, LLGRAD_CACHE_DIR=str(env_dir))
    env.pop("LLGRAD_DISABLE_JIT", None)
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    return out.stdout.split()


def test_second_process_hits_the_cache(tmp_path, cache_dir):
    v1, state1 = _run(tmp_path, cache_dir)
    v2, state2 = _run(tmp_path, cache_dir)
    assert (state1, state2) == ("miss", "hit")
    assert v1 == v2
    assert cache.info()["entries"] == 2  # the function's entry and the calling trampoline's
    assert oct(os.stat(cache_dir).st_mode & 0o777) == "0o700"


def test_in_process_hit_gives_the_same_value_and_gradient(cache_dir):
    def g(x):
        return np.sum(np.exp(-x ** 2) * np.cos(x))
    x = np.linspace(-2, 2, 9)
    a = llgrad.differentiate(g, cache=True).value_and_grad(x)
    b = llgrad.differentiate(g, cache=True)
    v, grad = b.value_and_grad(x)
    assert b.inspect(x).stats["disk cache"] == "hit"
    assert v == a[0]
    np.testing.assert_array_equal(grad, a[1])


def test_corrupt_and_foreign_entries_are_ignored(cache_dir):
    def h(x):
        return np.sum(x ** 3)
    x = np.arange(4.0)
    llgrad.differentiate(h, cache=True).grad(x)
    (entry,) = [os.path.join(r, f) for r, _, fs in os.walk(cache_dir) for f in fs
                if f.endswith(".llgc")]
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


def _flip_a_byte(path) -> None:
    with open(path, "r+b") as f:
        data = bytearray(f.read())
        data[len(data) // 2] ^= 0xFF
        f.seek(0)
        f.write(data)


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
    script = tmp_path / "trampoline_script.py"
    script.write_text(TRAMPOLINE_SCRIPT.replace("CACHE", str(use_cache)))
    env = dict(os.environ, LLGRAD_CACHE_DIR=str(cache_dir))
    env.pop("LLGRAD_DISABLE_JIT", None)
    env.pop("LLGRAD_CACHE", None)
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    return out.stdout.split()


def _trampoline_entry() -> str:
    """The support module's entry file (trampoline and SIGINT hook; this interpreter builds
    the same IR as the child's)."""
    path = cache._path(cache.key("object", abi._support_ir(trampoline=True)))
    assert os.path.exists(path)
    return path


def test_warm_process_runs_neither_llvm_nor_the_lowering(tmp_path, cache_dir):
    v1, llvm1, lowering1 = _run_trampoline_script(tmp_path, cache_dir)
    v2, llvm2, lowering2 = _run_trampoline_script(tmp_path, cache_dir)
    assert (llvm1, llvm2) == ("llvm", "no-llvm")  # the trampoline came from the cache
    assert (lowering1, lowering2) == ("lowering", "no-lowering")  # not even imported
    assert v1 == v2
    assert cache.info()["entries"] == 2  # the function's entry and the trampoline's


def test_corrupt_trampoline_entry_is_recompiled(tmp_path, cache_dir):
    v1, *_ = _run_trampoline_script(tmp_path, cache_dir)
    _flip_a_byte(_trampoline_entry())
    v2, llvm2, _ = _run_trampoline_script(tmp_path, cache_dir)
    assert (v2, llvm2) == (v1, "llvm")  # recompiled, and rewritten:
    assert _run_trampoline_script(tmp_path, cache_dir)[1] == "no-llvm"


def test_trampoline_is_compiled_and_not_stored_without_the_cache(tmp_path, cache_dir):
    assert _run_trampoline_script(tmp_path, cache_dir, use_cache=False)[1] == "llvm"
    assert not cache_dir.exists()


def test_clear_and_info(cache_dir):
    llgrad.differentiate(lambda x: np.sum(x * x), cache=True).grad(np.ones(3))
    assert cache.info()["entries"] == 1 and cache.info()["bytes"] > 0
    assert cache.clear() == 1
    assert cache.info()["entries"] == 0


def test_global_switch(cache_dir, monkeypatch):
    monkeypatch.setenv("LLGRAD_CACHE", "1")
    llgrad.differentiate(lambda x: np.sum(np.sin(x))).grad(np.ones(2))
    assert cache.info()["entries"] == 1


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
