"""Where codegen must NOT update in place (Note [Updates in place] in codegen/inplace.py): each
program updates an array while the old array can still be seen (a reduction over it emitted
after the update, a view of it read later, its reverse as the value written, a loop init the
body reads too, a cycle of carried arrays). Native results and gradients must equal numpy's
and central differences; an update made in place there would read the new values."""
from __future__ import annotations

import numpy as np
import pytest

import llgrad
from tests.e2e.conftest import finite_differences

X = np.array([0.3, -0.7, 1.2, 0.5, -1.1, 0.8])


def sum_then_update(x):
    a = x * 1.0
    t = 0.0
    for i in range(x.shape[0]):
        s = np.sum(a * a)  # a fused reduction over the old a
        a[i] = s * 0.1
        t += s
    return t + np.sum(a * x)


def reversed_into_itself(x):
    a = x * 1.0
    for i in range(3):
        a[0:3] = a[2::-1] * (1.0 + i)
    return np.sum(a * x)


def init_also_read_inside(x):
    base = x * 2.0
    acc = base + 0.0  # simplified to base: the loop's init is a value its body reads
    for i in range(x.shape[0]):
        acc[i] = acc[i] + base[(i + 1) % x.shape[0]]
    return np.sum(acc * acc)


def rotate_three(x):
    a, b, c = x * 1.0, x * 2.0, x * 3.0
    for i in range(4):
        a[i] = a[i] + b[i + 1] * c[i]
        a, b, c = b, c, a
    return np.sum(a * x + b * b - c)


CASES = [sum_then_update, reversed_into_itself, init_also_read_inside, rotate_three]


@pytest.mark.parametrize("fn", CASES, ids=lambda f: f.__name__)
def test_old_values_stay_visible(fn):
    d = llgrad.differentiate(fn)
    value, grad = d.value_and_grad(X)
    assert value == pytest.approx(fn(X.copy()), rel=1e-12)
    np.testing.assert_allclose(grad, finite_differences(fn, (X,), (0,))[0], rtol=1e-6,
                               atol=1e-8)


def view_read_after_update(x):
    a = x * 1.0
    t = 0.0
    for i in range(x.shape[0] - 1):
        r = a[:2]  # in the IR, a view of the old a (codegen: a layout of its storage)
        a = a.copy()  # (the copy may only reuse that storage if nothing reads it later)
        a[i] = a[i + 1] * 0.5 + 1.0
        t += np.sum(r * x[:2])
    return t + np.sum(a * a)


def test_a_view_read_after_the_update_sees_the_old_array(monkeypatch):
    """Native code against the reference interpreter on the same IR, and numpy (without the
    copy, numpy's `r` would see the writes at i = 0 and 1: the tracer refuses that at run
    time, tests/e2e/test_aliasing_runtime.py)."""
    d = llgrad.differentiate(view_read_after_update)
    value, grad = d.value_and_grad(X)
    monkeypatch.setenv("LLGRAD_DISABLE_JIT", "1")
    i = llgrad.differentiate(view_read_after_update)
    want, want_grad = i.value_and_grad(X)
    assert value == pytest.approx(want, rel=1e-12)
    assert value == pytest.approx(view_read_after_update(X.copy()), rel=1e-12)
    np.testing.assert_allclose(grad, want_grad, rtol=1e-12, atol=1e-12)
