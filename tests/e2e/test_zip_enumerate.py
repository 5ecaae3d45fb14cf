"""`for a, b in zip(x, y):` and `for i, row in enumerate(x):` over traced arrays compile as one
staged loop, as `for row in x:` does (they ran once per row at trace time, silently: 40 Elo
games were 1500 traced ops and half a second to the first gradient); values equal plain
Python and gradients finite differences, natively and in the interpreter. Any other use of
the zip object iterates the builtin's."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import llgrad
from llgrad.runtime.errors import UnsupportedError
from tests.e2e.conftest import finite_differences


def zipped(w, a, b):
    s = 0.0
    for x, y in zip(a, b):
        s = s + w[0] * x * y + w[1] * np.sum(x)
    return s


def enumerated(w, a, b):
    s = 0.0
    for i, x in enumerate(a, start=2):
        s = s + w[0] * x * b[i - 2] * i
    return s


def zipped_with_a_range(w, a, b):
    s = 0.0
    for j, x, y in zip(range(1, 100, 2), a, b):
        if x > 0:
            s = s + w[0] * x * j
        else:
            s = s - w[1] * y
    return s


def early_return(w, a, b):
    for i, x in enumerate(a):
        if x * w[0] > 1.0:
            return x * w[1] + i
    return w[0]


def elo(k, winners, losers, outcome):
    ratings = np.full(4, 1500.0)
    loss = 0.0
    for a, b, won in zip(winners, losers, outcome):
        expected = 1 / (1 + 10 ** ((ratings[b] - ratings[a]) / 400))
        score = 1.0 if won else 0.0
        loss -= score * np.log(expected) + (1 - score) * np.log(1 - expected)
        ratings[a] += k[0] * (score - expected)
        ratings[b] -= k[0] * (score - expected)
    return loss


def _args(n, seed=0):
    rng = np.random.default_rng(seed)
    return np.array([0.5, 2.0]), rng.standard_normal(n), rng.standard_normal((n, 3))[:, 0]


@pytest.mark.parametrize("fn", [zipped, enumerated, zipped_with_a_range, early_return, elo],
                         ids=lambda f: f.__name__)
def test_loops_over_zip_and_enumerate_are_staged(fn, mode):
    sizes = {}
    for n in (6, 30):
        if fn is elo:
            rng = np.random.default_rng(n)
            a = rng.integers(0, 4, n)
            args = (np.array([24.0]), a, (a + rng.integers(1, 4, n)) % 4, rng.random(n) < 0.5)
        else:
            args = _args(n)
        d = llgrad.differentiate(fn)
        with warnings.catch_warnings():
            warnings.simplefilter("error", llgrad.PerformanceWarning)
            value, g = d.value_and_grad(*args)
        assert value == pytest.approx(fn(*args), rel=1e-12)
        np.testing.assert_allclose(g, finite_differences(fn, args, (0,), eps=1e-5)[0],
                                   rtol=1e-6, atol=1e-7)
        ins = d.inspect(*args)
        assert ins.path == "staged"
        sizes[n] = ins.stats["ops (traced)"]
    assert sizes[6] == sizes[30], sizes  # one loop body, whatever the trip count


def other_uses(w, a, b):
    pairs = list(zip(a, b))
    named = dict(zip(["first", "second"], a))
    first = next(zip(a, b))
    rows = []
    for x, c in zip(a, [1.0, 2.0]):  # (with a list: run as Python)
        rows.append(x * c * w[1])
    return (sum(w[0] * p * q for p, q in pairs) + first[1] + named["second"]
            + rows[1] + sum(i * x for i, x in enumerate(a)))


def test_other_uses_of_zip_iterate_as_python(mode):
    args = _args(4)
    d = llgrad.differentiate(other_uses)
    value, g = d.value_and_grad(*args)
    assert value == pytest.approx(other_uses(*args), rel=1e-13)
    np.testing.assert_allclose(g, finite_differences(other_uses, args, (0,))[0], atol=1e-8)


def writes_into_a_zipped_array(w, a, b):
    a = a * w[0]
    s = 0.0
    for x, y in zip(b, a):
        a[0] = a[0] + 1.0
        s = s + y
    return s


def strict_zip(w, a, b):
    return sum(x * y for x, y in zip(a * w[0], b[:-1], strict=True))


def test_updates_of_a_zipped_array_and_strict_zip_raise(mode):
    args = _args(5)
    with pytest.raises(UnsupportedError, match="which iterates over it"):
        llgrad.differentiate(writes_into_a_zipped_array)(*args)
    with pytest.raises(ValueError, match="shorter"):
        strict_zip(*args)  # Python's error
    with pytest.raises(ValueError, match="shorter"):
        llgrad.differentiate(strict_zip)(*args)


# ---- loops over numpy arrays (Note [Loops over numpy arrays] in tracer/staging.py) ------------
GRID = np.linspace(0.0, 2.0, 40)
LABELS = np.array([0, 1, 2])
CLASSES = np.array([0, 1, 2, 1, 0, 2])


def over_a_numpy_grid(w):
    s = 0.0
    for t in GRID:  # a module-level numpy array: one staged loop, not 40 copies
        s = s + w[0] * np.exp(-w[1] * t) * t
    return s


def numpy_rows_used_as_python_values(w):
    totals = {}
    for label in LABELS:  # a dict keyed by the item: as Python runs it
        totals[int(label)] = np.sum(w[CLASSES == label])
    scale = 0.0
    for t in GRID[:3]:
        scale = scale + w[0] * float(t)  # float() of an item: unrolled, as Python
    return totals[0] + 2.0 * totals[1] + 3.0 * totals[2] + scale


def per_class_by_range(w):
    totals = {}
    for k in range(3):  # (a new dict key per iteration raised "could not determine what
        totals[k] = np.sum(w[CLASSES == k])  # the loop changes")
    return totals[0] + 2.0 * totals[1] + 3.0 * totals[2]


def euler_between_grid_points(w, n=50):
    ts = np.linspace(0.0, 1.0, n)  # (made inside: a numpy constant)
    y = w[0]
    for t0, t1 in zip(ts[:-1], ts[1:]):
        y = y + (t1 - t0) * (-w[1] * y + np.sin(t0))
    for i, t in enumerate(ts[:3]):
        y = y + w[2] * t * i
    return y


@pytest.mark.parametrize("fn", [over_a_numpy_grid, numpy_rows_used_as_python_values,
                                per_class_by_range, euler_between_grid_points],
                         ids=lambda f: f.__name__)
def test_loops_over_numpy_arrays(fn, mode):
    w = np.array([0.5, 2.0, 1.5, 0.2, 0.1, 0.3])
    d = llgrad.differentiate(fn)
    value, g = d.value_and_grad(w)
    assert value == pytest.approx(fn(w), rel=1e-13)
    np.testing.assert_allclose(g, finite_differences(fn, [w], (0,))[0], rtol=1e-6, atol=1e-8)
    if fn in (over_a_numpy_grid, euler_between_grid_points):
        assert d.inspect(w).stats["ops (traced)"] < 40  # (a copy per point: ~200)
