"""Start-up cost (issue 6): `import llgrad` loads only what a script needs to trace and run.

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


def test_import_does_not_load_scipy():
    # scipy.linalg's import costs ~0.3-0.5 s: the linalg primitives load it on first use only
    _run("""
        import sys
        import llgrad
        assert "scipy" not in sys.modules, sorted(m for m in sys.modules if "scipy" in m)
    """)
