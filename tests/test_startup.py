"""Start-up cost (issues 6, 12): `import llgrad` loads only what a script needs to trace and run.

Each check runs in a fresh interpreter, since the test session has imported everything.
"""
import subprocess
import sys
import textwrap


def _run(code: str) -> None:
    r = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stderr


def test_import_does_not_load_numpy_random():
    # numpy >= 2 imports numpy.random on first use; llgrad makes its generator on first use.
    _run("""
        import sys
        import numpy
        eager = "numpy.random" in sys.modules  # numpy 1.x imports it with numpy
        import llgrad
        assert eager or "numpy.random" not in sys.modules
    """)


def test_unseeded_generator_is_seeded_with_zero():
    _run("""
        import numpy as np
        from llgrad.runtime import creation
        assert (creation._rng().random(4) == np.random.default_rng(0).random(4)).all()
        creation.manual_seed(3)
        assert (creation._rng().random(4) == np.random.default_rng(3).random(4)).all()
    """)


# `import llgrad` loads the eager runtime (numpy only): at most this many modules of its own,
# ~20 ms on an idle machine (python -X importtime). Counting modules, not milliseconds, keeps
# the budget meaningful on a loaded machine. A public alias (llgrad.nn.conv for
# llgrad.runtime.nn.conv) is the same module object and counts once. (99 with the nn layers,
# optimizers, schedulers and data utilities of issue 15; zipfile and the compression modules
# load only when a checkpoint is written or read.)
IMPORT_BUDGET = 110


def test_import_loads_no_compiler_and_few_modules():
    _run(f"""
        import sys
        import numpy
        before = set(sys.modules)
        import llgrad
        new = set(sys.modules) - before
        heavy = [m for m in new if m.split(".")[0] in ("llvmlite", "scipy", "gast", "zipfile")
                 or m.startswith(("llgrad.codegen", "llgrad.tracer", "llgrad.transform",
                                  "llgrad.api"))]
        assert not heavy, heavy
        distinct = {{id(sys.modules[m]) for m in new}}
        assert len(distinct) <= {IMPORT_BUDGET}, (len(distinct), sorted(new))
    """)


def test_llvmlite_loads_only_when_something_is_compiled():
    _run("""
        import os, sys
        import numpy as np
        import llgrad
        def f(x):
            return np.sum(np.sin(x))
        d = llgrad.differentiate(f)
        os.environ["LLGRAD_DISABLE_JIT"] = "1"
        d.grad(np.ones(3))
        assert "llvmlite" not in sys.modules and "llgrad.codegen.jit" not in sys.modules
        del os.environ["LLGRAD_DISABLE_JIT"]
        d.grad(np.ones(3))
        assert "llvmlite.binding" in sys.modules
    """)


def test_import_and_compiling_do_not_load_scipy():
    # scipy.special's functions are known by name until the user imports scipy
    # (Note [Lazily named functions] in runtime/numpy_api.py)
    _run("""
        import sys
        import numpy as np
        import llgrad
        f = llgrad.differentiate(lambda x: np.sum(np.arctan(x) + np.logaddexp(x, 1.0)))
        f.grad(np.ones(3))
        assert "scipy" not in sys.modules, sorted(m for m in sys.modules if "scipy" in m)
    """)


def test_the_first_compiled_call_sets_up_the_jit_on_a_thread_once():
    # Note [JIT set-up in the background]: one JIT, made whichever thread gets there first,
    # and the engine holds no module of its own (Note [The engine's empty module]).
    _run("""
        import threading
        import numpy as np
        import llgrad
        from llgrad.codegen import jit
        made = []
        class Spy(jit.Jit):
            def __init__(self, *a, **k):
                made.append(threading.current_thread().name)
                super().__init__(*a, **k)
                assert not self._engine._modules
        jit.Jit = Spy
        f = llgrad.differentiate(lambda x: np.sum(np.sin(x)))
        v, g = f.value_and_grad(np.ones(3))
        assert np.allclose(g, np.cos(np.ones(3))) and np.isclose(v, 3 * np.sin(1.0))
        assert jit._started and len(made) == 1, made
        assert made[0] in ("llgrad-jit-set-up", "MainThread"), made
    """)


def test_a_jit_set_up_that_fails_on_its_thread_is_made_again_by_the_caller():
    _run("""
        import threading
        from llgrad.codegen import jit
        real, calls = jit._host_target, []
        def flaky():
            calls.append(threading.current_thread().name)
            if len(calls) == 1:
                raise RuntimeError("no target")
            return real()
        jit._host_target = flaky
        jit.set_up_in_background()
        for t in threading.enumerate():
            if t.name == "llgrad-jit-set-up":
                t.join()
        assert jit._jit is None and calls == ["llgrad-jit-set-up"], calls
        jit.set_up_in_background()  # once per process
        assert jit.get_jit() is jit.get_jit() and calls[1:] == ["MainThread"], calls
    """)


def test_a_fork_during_the_jit_set_up_leaves_the_child_a_working_compiler():
    _run("""
        import os
        import numpy as np
        import llgrad
        from llgrad.codegen import jit
        jit.set_up_in_background()
        pid = os.fork()
        if pid == 0:
            f = llgrad.differentiate(lambda x: np.sum(np.sin(x)))
            g = f.grad(np.ones(3))
            os._exit(0 if np.allclose(g, np.cos(1.0)) else 1)
        _, status = os.waitpid(pid, 0)
        assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, status
    """)


def test_a_first_call_that_raises_during_the_jit_set_up_exits_cleanly():
    # the set-up thread is joined at exit: LLVM is not torn down under it
    r = subprocess.run([sys.executable, "-c", textwrap.dedent("""
        import numpy as np, llgrad
        llgrad.differentiate(lambda x: np.sum(x @ np.ones(5)))(np.ones(3))
    """)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 1 and "ShapeError: matmul" in r.stderr, r.stderr
    assert "Segmentation" not in r.stderr and "Fatal" not in r.stderr, r.stderr
