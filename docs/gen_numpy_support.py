"""Generate docs/numpy_support.md, the numpy and scipy functions llgrad supports, from the
dispatch tables (runtime/numpy_api.py: FUNCTIONS, LAZY, CONVERSIONS).

    python docs/gen_numpy_support.py            # rewrite docs/numpy_support.md
    python docs/gen_numpy_support.py --check    # exit 1 if docs/numpy_support.md is stale

Every name in the tables is listed once, by the name a user writes
(`numpy_api.numpy_name`). Compiled code and eager Tensors dispatch through the same table,
so a function in it runs in both; numpy's conversions (`np.asarray`, ...) are graph ops in
compiled code only (on an eager Tensor they return a numpy array, as `__array__` does). The
gradient column is measured, not declared: each function is called eagerly on float64
Tensors that require grad (every one of a few sample argument lists it accepts) and the
gradient of the sum of its float results is taken; the best outcome is shown. "yes" means a
gradient reaches the inputs, "zero" that it is zero everywhere (piecewise-constant
functions), "none" that the results are integer or boolean, or constants; "-" that no
sample call applied (see the function's own docs). scipy.integrate's ODE solvers (solve_ivp,
odeint) take your functions, so they run in compiled code only, where their gradient is
tested (tests/e2e/test_ode.py), not measured here.
"""
from __future__ import annotations

import os
import sys
import warnings

import numpy as np

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "numpy_support.md")
SECTIONS = [("np.linalg.", "numpy.linalg"), ("np.fft.", "numpy.fft"),
            ("scipy.special.", "scipy.special"), ("scipy.linalg.", "scipy.linalg"),
            ("scipy.stats.", "scipy.stats"), ("scipy.integrate.", "scipy.integrate"),
            ("scipy.spatial.", "scipy.spatial"), ("scipy.signal.", "scipy.signal"),
            ("scipy.ndimage.", "scipy.ndimage"),
            ("np.polynomial.", "numpy.polynomial"), ("np.", "numpy")]


def _samples(lg):
    """Argument lists to try: every one a function accepts is probed (see `gradient`)."""
    v = np.linspace(0.15, 0.85, 6)
    m = np.array([[2.0, 0.3, 0.1], [0.3, 1.5, 0.2], [0.1, 0.2, 1.2]])
    t = lambda a: lg.tensor(a, requires_grad=True)  # noqa: E731
    return [
        lambda: (t(v),), lambda: (t(m),), lambda: (t(v), t(v[::-1].copy())),
        lambda: (t(m), t(m.T.copy())), lambda: (t(m), t(v[:3])), lambda: ([t(v), t(v)],),
        lambda: ("ij,jk->ik", t(m), t(m)), lambda: (t(v), 1), lambda: (t(m), 1),
        lambda: (t(v), 50.0), lambda: ((t(m), True), t(v[:3])), lambda: (t(m), 0, 1),
        lambda: (t(v), (2, 3)), lambda: (t(v), (2, 6)), lambda: (t(v.reshape(1, 2, 3)), 3),
        lambda: (t(v), np.array([1, 0]), 0), lambda: (v > 0.5, t(v), t(v[::-1].copy())),
        lambda: (lg.tensor(v > 0.5),), lambda: (lg.tensor(v > 0.5), lg.tensor(v < 0.7)),
        lambda: (0, t(v)), lambda: (t(np.array([0.0, 2.0, 3.0])), 5.0, t(np.array(0.3))),
        lambda: (np.array([0, 2, 0, 1, 2, 1]), t(v)),
        lambda: (t(v), t(v[::-1].copy()), 2),  # (x, y, deg): polyfit
        lambda: (np.array([0.5, 0.5]), np.array([1.0, -0.5]), t(np.linspace(0.0, 1.0, 12))),
        lambda: (v.copy(), 3, None, None, t(v)),  # histogram: constant data, traced weights
        lambda: (2.0, 3.0, t(v)),  # (a, b, x): betainc
        lambda: (t(v), 5, 2),  # savgol_filter(x, window_length, polyorder)
        lambda: (np.array([[0.2, 0.3, 0.1, 1.0, -0.2, 0.1]]), t(v)),  # sosfilt(sos, x)
        lambda: (t(m), np.array([[0.5, 1.2], [1.0, 0.4]]), None, 1),  # map_coordinates, order 1
        lambda: ((t(m), np.array([2, 1, 2])), t(v[:3])),  # lu_solve((lu, piv), b)
    ]


def _float_results(out) -> list:
    items = list(out) if isinstance(out, (tuple, list)) else [out]
    flat = []
    for x in items:
        flat.extend(_float_results(x) if isinstance(x, (tuple, list)) else [x])
    kinds = [np.dtype(getattr(x, "_np_dtype", "O")).kind for x in flat]
    return [p for x, k in zip(flat, kinds) if k in "fc"  # (complex: its two parts)
            for p in ((x,) if k == "f" else (x.real, x.imag))]


_ORDER = ["-", "none", "zero", "yes"]


def gradient(lg, fn) -> str:
    """How a gradient flows through `fn` on eager Tensors: the best outcome over the sample
    argument lists it accepts (see the module docstring)."""
    best = "-"
    for make in _samples(lg):
        try:
            with warnings.catch_warnings(), np.errstate(all="ignore"):
                warnings.simplefilter("ignore")
                outcome = _probe(lg, fn, make())
        except Exception:  # noqa: BLE001 - this sample does not apply: try the next
            continue
        best = max(best, outcome, key=_ORDER.index)
    return best


def _probe(lg, fn, args) -> str:
    results = [r for r in _float_results(fn(*args)) if getattr(r, "requires_grad", False)]
    if not results:
        return "none"
    leaves = [a for a in _leaves(args) if getattr(a, "requires_grad", False)]
    grads = lg.autograd.grad(sum(r.sum() for r in results), leaves, allow_unused=True)
    nonzero = any(g is not None and np.any(np.asarray(g.detach())) for g in grads)
    return "yes" if nonzero else "zero"


def _leaves(args):
    for a in args:
        if isinstance(a, (tuple, list)):
            yield from _leaves(a)
        else:
            yield a


def entries() -> list[tuple[str, str, str, str]]:
    """(name, compiled, eager, gradient) for every supported function, sorted by name."""
    import numpy.polynomial.polynomial  # noqa: F401 - LAZY names of imported modules join
    import scipy.integrate  # noqa: F401 - FUNCTIONS
    import scipy.linalg  # noqa: F401
    import scipy.ndimage  # noqa: F401
    import scipy.signal  # noqa: F401
    import scipy.spatial.distance  # noqa: F401
    import scipy.special  # noqa: F401
    import scipy.stats  # noqa: F401

    import llgrad as lg
    from llgrad.runtime import numpy_api as api
    api.resolve_lazy()
    rows = {}
    for f, impl in api.FUNCTIONS.items():
        name = api.numpy_name(f)
        if getattr(impl, "refused", False):  # (an error naming what is supported instead)
            continue
        if name.startswith(("np.", "scipy.")) and name not in rows:
            # scipy's (and numpy.polynomial's) Python functions do not dispatch: eagerly they
            # compute in numpy
            eager = "no (a numpy array)" if name.startswith(("scipy.", "np.polynomial.")) and \
                not isinstance(f, np.ufunc) else "yes"
            # (a class, scipy.stats.norm(loc, scale): what it makes has the methods)
            grad = "its methods'" if isinstance(impl, type) else gradient(lg, impl)
            rows[name] = ("yes", eager, grad)
            if name.startswith("scipy.special."):  # (its other names: digamma is psi)
                for alias in dir(scipy.special):
                    if getattr(scipy.special, alias) is f:
                        rows.setdefault(f"scipy.special.{alias}", rows[name])
    for f, impl in api.CONVERSIONS.items():
        rows.setdefault(api.numpy_name(f), ("yes", "no (a numpy array)", gradient(lg, impl)))
    from llgrad.tracer import ode
    for f in ode.traced_forms():
        rows[f"scipy.integrate.{f.__name__}"] = ("yes", "no (a numpy array)", "yes")
    return sorted((n, *cols) for n, cols in rows.items())


def render() -> str:
    by_section = {title: [] for _, title in SECTIONS}
    for row in entries():
        title = next(t for prefix, t in SECTIONS if row[0].startswith(prefix))
        by_section[title].append(row)
    doc = (__doc__ or "").split("\n\n", 2)[2].strip()
    lines = ["# numpy and scipy functions in llgrad", "",
             "<!-- generated by docs/gen_numpy_support.py; do not edit by hand -->", "",
             doc.replace("\n", " "), "",
             "Methods of Tensors and traced arrays (`x.sum()`, `x.T`, `x.astype(...)`), "
             "operators, indexing, `math.*` on scalars and `np.add.at` are covered in "
             "docs/api.md and the README. Anything else raises an error naming your line.", ""]
    for title, rows in by_section.items():
        if not rows:
            continue
        lines += [f"## {title} ({len(rows)})", "", "| function | compiled | eager | gradient |",
                  "|---|---|---|---|"]
        lines += [f"| `{n}` | {c} | {e} | {g} |" for n, c, e, g in rows]
        lines.append("")
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    text = render()
    if "--check" in argv:
        with open(OUT, encoding="utf-8") as f:
            if f.read() != text:
                print("docs/numpy_support.md is stale: run python docs/gen_numpy_support.py")
                return 1
        return 0
    with open(OUT, "w", encoding="utf-8") as f:
        f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
