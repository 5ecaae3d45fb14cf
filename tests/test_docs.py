"""docs/api.md documents every public name; README keeps its quick start; docs pages exist.

The rule for "public" is `public_names` in docs/gen_api.py: a module's `__all__` if it has
one, else its attributes not starting with `_` that are not modules or `__future__` features
and are defined inside the module's package (every attribute for `llgrad` itself, plus its
lazily loaded compiler names). Each must appear in backquotes (`name`, `mod.name(...)`) in
the `## \\`module\\`` section of docs/api.md. Fix a failure with `python docs/gen_api.py`.
"""
from __future__ import annotations

import importlib.util
import os
import re
from pathlib import Path

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _gen():
    spec = importlib.util.spec_from_file_location("gen_api", os.path.join(ROOT, "docs",
                                                                          "gen_api.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


GEN = _gen()


def _sections() -> dict[str, str]:
    with open(os.path.join(ROOT, "docs", "api.md"), encoding="utf-8") as f:
        text = f.read()
    parts = re.split(r"^## `([\w.]+)`\s*$", text, flags=re.M)
    return dict(zip(parts[1::2], parts[2::2]))


def test_api_sections_cover_the_modules():
    assert set(_sections()) == {m for m, _ in GEN.MODULES}


@pytest.mark.parametrize("module", [m for m, _ in GEN.MODULES])
def test_every_public_name_is_documented(module):
    section = _sections().get(module, "")
    missing = [n for n in GEN.public_names(module)
               if not re.search(r"`(?:[\w.]+\.)?" + re.escape(n) + r"[`(]", section)]
    assert not missing, (f"public names of {module} missing from docs/api.md: "
                         f"{', '.join(missing)}; run `python docs/gen_api.py`")


def test_public_name_rule():
    names = GEN.public_names("llgrad")
    for n in ("tensor", "Tensor", "differentiate", "grad", "value_and_grad", "no_grad",
              "float32"):
        assert n in names
    assert "annotations" not in names and "autograd" not in names  # no features, modules
    nf = GEN.public_names("llgrad.nn.functional")
    assert "relu" in nf and "Tensor" not in nf and "np" not in nf  # no foreign re-exports
    assert "dataclass" not in GEN.public_names("llgrad.errors")


def test_readme_keeps_quick_start_and_sections():
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
        readme = f.read()
    assert "make demo" in readme and "make test" in readme
    for heading in ("## Quick start", "## The pipeline", "## Supported Python and numpy",
                    "## Limitations", "## Benchmarks"):
        assert heading in readme
    assert "make bench" in readme


def test_docs_pages_exist():
    for page in ("api.md", "how_it_works.md", "ARCHITECTURE.md"):
        assert os.path.getsize(os.path.join(ROOT, "docs", page)) > 1000


def test_readme_tour_runs_and_prints_what_it_says(tmp_path):
    """The README's tour is code a user copies: it must run as written."""
    import subprocess
    import sys
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    tour = readme[readme.index("## A tour"):].split("```python")[1].split("```")[0]
    script = tmp_path / "tour.py"
    script.write_text(tour)
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert "func @loss_grad(" in out.stdout
    assert out.stdout.strip().endswith("tensor([ 5.4366, 22.1672])")


def _gen_numpy_support():
    path = os.path.join(ROOT, "docs", "gen_numpy_support.py")
    spec = importlib.util.spec_from_file_location("gen_numpy_support", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_numpy_support_page_is_current():
    """docs/numpy_support.md is what docs/gen_numpy_support.py makes of the dispatch tables
    now: a function added, removed or changed in differentiability makes it stale. Fix a
    failure with `python docs/gen_numpy_support.py`."""
    gen = _gen_numpy_support()
    with open(gen.OUT, encoding="utf-8") as f:
        assert f.read() == gen.render(), "stale: run python docs/gen_numpy_support.py"


def test_numpy_support_page_rows():
    """Spot checks of the generated facts against what the functions do."""
    gen = _gen_numpy_support()
    rows = {name: cols for name, *cols in gen.entries()}
    assert rows["np.sin"] == ["yes", "yes", "yes"]
    assert rows["np.argmax"][2] == "none"  # integer result
    assert rows["np.floor"][2] == "zero"  # piecewise constant
    assert rows["np.where"][2] == "yes"  # the three-argument form
    assert rows["np.asarray"][1].startswith("no")  # eagerly a numpy array
    assert rows["scipy.linalg.solve_triangular"] == ["yes", "no (a numpy array)", "yes"]
    assert rows["scipy.special.erf"][1:] == ["yes", "yes"]  # a ufunc: dispatches eagerly
    import llgrad as lg
    # "-" would hide a function no sample fits; every listed function fits one
    assert not [n for n, c in rows.items() if c[2] == "-"]
    assert gen.gradient(lg, lambda x: x * 0.0) == "zero"
