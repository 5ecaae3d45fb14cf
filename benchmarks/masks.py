"""Boolean masks computed from the data (runtime/padded_masks.py, Note [Boolean masks of
data-dependent length]): value and gradient of three mask idioms (`np.sum(x[x > 0] ** 2)`, a
mean squared error over the targets that are not NaN, a linear SVM's hinge loss over
`margins[margins > 0]`), staged, beside the same function on the dynamic path (where every
mask sent it before; forced here by a `len()` of the selection, which costs nothing itself)
and beside plain numpy's value alone.

    python -m benchmarks.masks [--sizes 1000,100000] [--samples 15]

Prints wall and CPU time per call (medians of interleaved samples, benchmarks/_interleave.py)
and the first call (trace + compile, an empty disk cache); llgrad on one thread. Every result
is checked against the first row's.
"""
from __future__ import annotations

import argparse
import os
import tempfile
import warnings

from benchmarks._threads import set_threads

set_threads(1)
os.environ["LLGRAD_CACHE_DIR"] = tempfile.mkdtemp()  # first calls compile

import numpy as np  # noqa: E402

import llgrad  # noqa: E402
from benchmarks._interleave import table, timed  # noqa: E402


def relu_sq(x, y):
    return np.sum(x[x > 0] ** 2)


def masked_mse(x, y):
    m = ~np.isnan(y)
    return np.mean((x[m] - y[m]) ** 2)


def hinge(x, y):
    margins = 1 - y * x
    return np.sum(margins[margins > 0]) / len(y)


def _dynamic(fn):
    """fn sent to the dynamic path by a len() of a selection."""
    def f(x, y):
        len(x[x > 0])
        return fn(x, y)
    f.__name__ = fn.__name__ + "_dynamic"
    return f


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="1000,100000")
    ap.add_argument("--samples", type=int, default=15)
    opts = ap.parse_args(argv)
    warnings.simplefilter("ignore", llgrad.PerformanceWarning)
    rng = np.random.default_rng(0)
    for n in map(int, opts.sizes.split(",")):
        x, y = rng.standard_normal(n), np.sign(rng.standard_normal(n))
        y_nan = np.where(rng.random(n) < 0.2, np.nan, y)
        for fn in (relu_sq, masked_mse, hinge):
            args = (x, y_nan if fn is masked_mse else y)
            staged, dynamic = llgrad.value_and_grad(fn), llgrad.value_and_grad(_dynamic(fn))
            rows = {"llgrad staged value_and_grad": lambda: staged(*args),
                    "llgrad dynamic path (as before)": lambda: dynamic(*args),
                    "numpy value only": lambda: fn(*args)}
            ref = []

            def check(name, out):
                if not name.startswith("llgrad"):
                    return
                ref.append(out)  # the staged row's first
                np.testing.assert_allclose(out[0], ref[0][0], rtol=1e-10)
                np.testing.assert_allclose(out[1], ref[0][1], rtol=1e-10, atol=1e-14)
            res = timed(rows, opts.samples, check=check)
            print(table(f"{fn.__name__}, n = {n}", res))
            print()


if __name__ == "__main__":
    main()
