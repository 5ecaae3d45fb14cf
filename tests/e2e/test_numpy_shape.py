"""numpy's scans, sorts, structural and contraction functions inside `llgrad.differentiate`:
einsum over a table of subscripts, sort/cummax gradients with ties (each output's gradient
goes to the input it came from, as PyTorch), cumprod with zeros, NaN ordering, a merge sort
long enough to merge, and the errors (each names the user's line and a fix)."""
from __future__ import annotations

import re

import numpy as np
import pytest

import llgrad
from llgrad.runtime.errors import LLGradError, ShapeError, UnsupportedError
from tests.fd import numerical_vjp

R = np.random.default_rng(11)

EINSUM = [  # (subscripts, operand shapes)
    ("ij,jk->ik", [(3, 4), (4, 5)]), ("ij,jk", [(3, 4), (4, 2)]), ("ii->i", [(4, 4)]),
    ("ii", [(4, 4)]), ("i,i", [(5,)] * 2), ("i,i->", [(5,)] * 2), ("i,j->ij", [(3,), (4,)]),
    ("...ij,...jk->...ik", [(2, 3, 4), (2, 4, 3)]), ("bij,bjk->bik", [(2, 3, 4), (2, 4, 2)]),
    ("ijk->kji", [(2, 3, 4)]), ("ij->", [(3, 4)]), ("ij,ij->i", [(3, 4)] * 2),
    ("ij->ji", [(3, 4)]), ("ij->j", [(3, 4)]), ("i->", [(5,)]), ("ij,j->i", [(3, 4), (4,)]),
    ("i,ij->j", [(3,), (3, 4)]), ("ij,kj->ik", [(3, 4), (2, 4)]),
    ("ijk,ikl->ijl", [(2, 3, 4), (2, 4, 3)]), ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 2)]),
    ("iij->j", [(3, 3, 2)]), ("ij,ij,ij->", [(2, 3)] * 3), ("...i,...i->...", [(2, 3, 4)] * 2),
    ("ba,aC", [(2, 3), (3, 4)]), ("i...->...", [(3, 2)]), ("ij,j", [(3, 4), (1,)]),
    ("bn,anm,bm->ba", [(2, 3), (4, 3, 3), (2, 3)]),
]


@pytest.mark.parametrize("subscripts,shapes", EINSUM, ids=[s for s, _ in EINSUM])
def test_einsum_value_and_gradient(subscripts, shapes):
    args = [R.standard_normal(s) for s in shapes]
    w = R.standard_normal(np.shape(np.einsum(subscripts, *args)))

    def f(*xs):
        return np.sum(np.einsum(subscripts, *xs) * w)
    wrt = tuple(range(len(args)))
    d = llgrad.differentiate(f, wrt=wrt)
    value, grads = d.value_and_grad(*args)
    np.testing.assert_allclose(value, f(*args), rtol=1e-12, atol=1e-12)
    expected = numerical_vjp(f, args, np.ones(()), wrt)
    for g, e in zip(grads, expected):
        np.testing.assert_allclose(g, e, rtol=1e-6, atol=1e-8)


def test_einsum_gradient_is_differentiable():
    # the gradient of einsum is einsums (ops), so a second derivative works
    a, b = R.standard_normal((3, 4)), R.standard_normal((4, 2))
    ta = llgrad.tensor(a, requires_grad=True)
    y = (llgrad.einsum("ij,jk->ik", ta, llgrad.tensor(b)) ** 2).sum()
    (g,) = llgrad.autograd.grad(y, [ta], create_graph=True)
    (gg,) = llgrad.autograd.grad(g.sum(), [ta])
    np.testing.assert_allclose(gg.numpy(), 2 * np.ones((3, 4)) @ b @ b.T, rtol=1e-12)


def _sorted_loss(x):
    return np.sum(np.sort(x) * np.arange(1.0, x.size + 1))


def test_sort_gradient_with_ties_goes_where_each_value_came_from(mode):
    x = np.array([2.0, 1.0, 2.0, 0.5, 1.0, 2.0])
    g = llgrad.differentiate(_sorted_loss).grad(x)
    expected = np.empty_like(x)  # stable order: position k of the sort holds x[order[k]]
    expected[np.argsort(x, kind="stable")] = np.arange(1.0, x.size + 1)
    np.testing.assert_array_equal(g, expected)
    t = llgrad.tensor(x, requires_grad=True)
    (llgrad.sort(t).values * llgrad.tensor(np.arange(1.0, 7.0))).sum().backward()
    np.testing.assert_array_equal(t.grad.numpy(), expected)


def _cummax_loss(x):
    return np.sum(np.maximum.accumulate(x) * np.arange(1.0, x.size + 1))


def test_cummax_gradient_goes_to_the_latest_maximum(mode):
    x = np.array([1.0, 3.0, 3.0, 2.0, 5.0, 4.0])
    g = llgrad.differentiate(_cummax_loss).grad(x)
    # running argmax (ties: the later index, PyTorch's cummax): [0, 1, 2, 2, 4, 4]
    np.testing.assert_array_equal(g, [1.0, 2.0, 3.0 + 4.0, 0.0, 5.0 + 6.0, 0.0])


def _cumprod_loss(x):
    return np.sum(np.cumprod(x, axis=1) * np.arange(1.0, 6.0))


def test_cumprod_gradient_is_exact_with_zeros(mode):
    x = R.standard_normal((3, 5))
    x[0, 1] = 0.0
    x[1, 2] = x[1, 4] = 0.0
    g = llgrad.differentiate(_cumprod_loss).grad(x)
    (e,) = numerical_vjp(_cumprod_loss, [x], np.ones(()), [0])
    assert np.all(np.isfinite(g))
    np.testing.assert_allclose(g, e, rtol=1e-7, atol=1e-9)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("n", [1, 15, 16, 17, 1000])
def test_long_sorts_match_numpy(dtype, n):
    """Runs of 16 are insertion-sorted, then merged: lengths around and far past a run."""
    x = np.round(R.standard_normal((3, n)) * 4).astype(dtype)  # many ties
    x[1, ::7] = np.nan
    w = R.standard_normal((3, n)).astype(dtype)

    def f(a):
        s = np.sort(a, axis=1)
        return np.sum(np.where(s == s, s, 0.0) * w) + np.sum(np.argsort(-a, axis=0).astype(dtype))
    s = np.sort(x, axis=1)
    assert llgrad.differentiate(f)(x) == pytest.approx(f(x), rel=1e-5 if dtype == np.float32
                                                       else 1e-12)
    assert np.isnan(s[1, -1])  # NaNs sort last


def test_argsort_is_stable_and_nan_last_compiled():
    x = np.round(R.standard_normal(300) * 3)
    x[::11] = np.nan

    @llgrad.differentiate
    def f(a):
        return np.sum(a[np.argsort(a)[:200]] * np.arange(200.0))
    order = np.argsort(x, kind="stable")
    expected = np.zeros_like(x)
    expected[order[:200]] = np.arange(200.0)
    np.testing.assert_array_equal(f.grad(x), expected)


def test_median_and_quantile_of_data_with_nan_are_nan():
    x = np.array([1.0, np.nan, 3.0, 2.0])
    f = llgrad.differentiate(lambda a: np.median(a) + np.quantile(a, 0.3))
    assert np.isnan(f(x)) and np.isnan(np.median(x) + np.quantile(x, 0.3))


# ---- errors -----------------------------------------------------------------------------------
@pytest.mark.parametrize("fn", [np.convolve, np.correlate], ids=["convolve", "correlate"])
@pytest.mark.parametrize("n,m", [(7, 3), (7, 4), (3, 7), (4, 4), (1, 1), (6, 1)], ids=str)
def test_convolve_and_correlate_match_numpy_in_every_mode(fn, n, m, mode):
    """numpy's modes (same: the longer length, centred as numpy centres it) and its swap when
    the second argument is the longer."""
    a, v = R.standard_normal(n), R.standard_normal(m)
    for kind in ("full", "same", "valid"):
        w = R.standard_normal(fn(a, v, kind).shape)

        def f(a, v):
            return np.sum(w * fn(a, v, mode=kind))
        value, grads = llgrad.differentiate(f, wrt=(0, 1)).value_and_grad(a, v)
        np.testing.assert_allclose(value, f(a, v), rtol=1e-12, atol=1e-12)
        for g, e in zip(grads, numerical_vjp(f, [a, v], np.ones(()), (0, 1))):
            np.testing.assert_allclose(g, e, rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("shape,obj,values,axis", [
    ((4,), 1, 5.0, None), ((4,), -1, [1.0, 2.0], None), ((4,), 4, 0, None),
    ((2, 3), 0, 3.0, 1), ((2, 3), 2, [7.0, 8.0, 9.0], 0), ((2, 3), 3, [[1.0], [2.0]], 1),
    ((2, 3), 2, 1.5, None)], ids=str)
def test_insert_at_one_index_matches_numpy(shape, obj, values, axis, mode):
    x = R.standard_normal(shape)
    w = R.standard_normal(np.insert(x, obj, values, axis=axis).shape)

    def f(x):
        return np.sum(w * np.insert(x, obj, values, axis=axis))
    value, grad = llgrad.differentiate(f).value_and_grad(x)
    np.testing.assert_allclose(value, f(x), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(grad, numerical_vjp(f, [x], np.ones(()), (0,))[0], rtol=1e-6,
                               atol=1e-8)


@pytest.mark.parametrize("side", ["left", "right"])
def test_searchsorted_counts_in_numpys_order(side, mode):
    """Note [searchsorted by counting]: ties, values past both ends, NaN (last in numpy's
    order) in the queries and in the array, and a sorter."""
    a = np.sort(R.random(8))
    a[3] = a[4]
    v = np.concatenate([R.random(10), a[:3], [np.nan, -1.0, 2.0, a[-1]]])
    for arr in (a, np.append(a, np.nan)):
        f = llgrad.differentiate(lambda arr, v: np.searchsorted(arr, v, side=side), wrt=())
        got, want = f(arr, v), np.searchsorted(arr, v, side=side)
        assert got.dtype == want.dtype and np.array_equal(got, want), (got, want)
    perm = R.permutation(8)
    f = llgrad.differentiate(lambda arr: np.searchsorted(arr, v, side, np.argsort(arr)), wrt=())
    np.testing.assert_array_equal(f(a[perm]), np.searchsorted(a, v, side))


def test_interp_is_numpys_formula_and_differentiable(mode):
    xp, fp = np.sort(R.random(6)), R.standard_normal(6)
    x = np.concatenate([R.uniform(-0.2, 1.2, 12), xp, [np.nan]])
    for kw in ({}, {"left": -5.0, "right": 7.0}):
        got = llgrad.differentiate(lambda x, xp, fp: np.interp(x, xp, fp, **kw), wrt=())(
            x, xp, fp)
        want = np.interp(x, xp, fp, **kw)
        assert got.dtype == want.dtype and np.array_equal(got, want, equal_nan=True)
    one = llgrad.differentiate(lambda x: np.interp(x, [0.5], [2.0]), wrt=())(x[:5])
    np.testing.assert_array_equal(one, np.interp(x[:5], [0.5], [2.0]))

    def f(x, fp):
        return np.sum(np.interp(x, xp, fp) ** 2)
    xs = np.array([-0.1, 0.5 * (xp[0] + xp[1]), 0.5 * (xp[3] + xp[4]), 1.5])
    value, grads = llgrad.differentiate(f, wrt=(0, 1)).value_and_grad(xs, fp)
    np.testing.assert_allclose(value, f(xs, fp), rtol=1e-14)
    for g, e in zip(grads, numerical_vjp(f, [xs, fp], np.ones(()), (0, 1))):
        np.testing.assert_allclose(g, e, rtol=1e-6, atol=1e-8)


def test_trapezoid_matches_numpy(mode):
    y, x = R.standard_normal((3, 5)), np.sort(R.random(5))
    x2 = np.sort(R.random((3, 5)), axis=1)
    for args, kw in [((y,), {}), ((y,), {"dx": 0.3}), ((y, x), {}), ((y, x2), {}),
                     ((y.T,), {"axis": 0}), ((y[0], x), {})]:
        got = llgrad.differentiate(lambda *a: np.trapezoid(*a, **kw), wrt=())(*args)
        want = np.trapezoid(*args, **kw)
        assert np.shape(got) == np.shape(want)
        np.testing.assert_allclose(got, want, rtol=1e-15)

    def f(y, x):
        return np.trapezoid(y ** 2, x)
    grads = llgrad.differentiate(f, wrt=(0, 1)).grad(y[0], x)
    for g, e in zip(grads, numerical_vjp(f, [y[0], x], np.ones(()), (0, 1))):
        np.testing.assert_allclose(g, e, rtol=1e-6, atol=1e-8)


def test_polyval_matches_numpy(mode):
    p, x = R.standard_normal(4), R.standard_normal((2, 3))
    for args in [(p, x), (p, 0.5), (np.array([1.0, -2.0]), x), (p[:1], x)]:
        got = llgrad.differentiate(lambda *a: np.polyval(*a), wrt=())(*args)
        want = np.polyval(*args)
        assert np.shape(got) == np.shape(want)
        np.testing.assert_allclose(got, want, rtol=1e-15)

    def f(p, x):
        return np.sum(np.polyval(p, x) ** 2)
    grads = llgrad.differentiate(f, wrt=(0, 1)).grad(p, x)
    for g, e in zip(grads, numerical_vjp(f, [p, x], np.ones(()), (0, 1))):
        np.testing.assert_allclose(g, e, rtol=1e-6, atol=1e-8)


def _line_of(fn, text):
    import inspect
    lines, start = inspect.getsourcelines(fn)
    return start + next(i for i, s in enumerate(lines) if text in s)


def takes_out_of_bounds(x):
    return np.sum(np.take(x, [0, 9]))


def sorts_in_place(x):
    y = x * 2.0
    y.sort()
    return np.sum(y)


def mismatched_einsum(x):
    return np.sum(np.einsum("ij,jk->ik", x.reshape(2, 2), x.reshape(4, 1)))


@pytest.mark.parametrize("fn,error,message,fix", [
    (takes_out_of_bounds, LLGradError, "index 9 is out of bounds for an axis of size 4",
     "mode='wrap'"),
    (sorts_in_place, UnsupportedError, "x.sort() sorts x in place", "x = np.sort(x)"),
    (mismatched_einsum, ShapeError, "label 'j' in 'ij,jk->ik' has sizes 2 and 4", None),
], ids=["take", "sort_in_place", "einsum"])
def test_errors_name_the_line(fn, error, message, fix):
    with pytest.raises(error, match=re.escape(message)) as e:
        llgrad.differentiate(fn).grad(np.arange(1.0, 5.0))
    text = {"take": "np.take", "sorts": "y.sort()", "mismatched": "np.einsum"}
    key = next(k for k in text if fn.__name__.startswith(k))
    assert e.value.loc is not None and e.value.loc.line == _line_of(fn, text[key])
    if fix:
        assert fix in e.value.fix


@pytest.mark.parametrize("call,message", [
    (lambda x: np.pad(x, 1, mode="linear_ramp"), "supported modes are constant"),
    (lambda x: np.quantile(x, 1.5), "q must be a number or a 1-d sequence"),
    (lambda x: np.split(x, 3), "array split does not result in an equal division"),
    (lambda x: np.repeat(x, x.astype(int)), "the counts must be static"),
    (lambda x: np.cross(x[:2], x[2:]), "need 3 components"),
    (lambda x: np.sort(x, order="a"), "np.sort(order=...) is not supported"),
    (lambda x: np.max(x, where=x > 1), "to use a where mask one has to specify 'initial'"),
    (lambda x: np.einsum("ij", x), "has 1 dimensions, but its subscripts 'ij' name 2"),
    (lambda x: np.insert(x, [0, 2], 1.0), "np.insert at several indices"),
    (lambda x: np.insert(x, 5, 1.0), "index 5 is out of bounds for axis 0 with size 4"),
    (lambda x: np.convolve(x, x[:0]), "neither argument can be empty"),
    (lambda x: np.convolve(x.reshape(2, 2), x), "the arguments must be 1-d"),
    (lambda x: np.correlate(x, x, "wide"), "mode must be 'full', 'same' or 'valid'"),
    (lambda x: np.interp(x, x, x, period=2.0), "np.interp(period=...) is not supported"),
])
def test_unsupported_arguments_are_errors(call, message):
    with pytest.raises((LLGradError, ValueError, NotImplementedError, IndexError),
                       match=re.escape(message)):
        llgrad.differentiate(lambda x: np.sum(call(x))).grad(np.arange(1.0, 5.0))


# ---- np.logaddexp.accumulate and sliding_window_view (composites) -------------------------------
def _logcumsumexp_loss(x):
    return np.sum(np.logaddexp.accumulate(x, axis=1) * np.arange(1.0, x.shape[1] + 1))


def test_logaddexp_accumulate_is_stable_and_its_gradient_matches(mode):
    """A running log-sum-exp with a running maximum: values far apart (exp of each would
    under- or overflow), -inf entries, and a gradient equal to finite differences."""
    x = np.array([[-1000.0, 0.0, 3.0, -np.inf, 2.0, 700.0],
                  [-np.inf, -np.inf, 1.0, 1.0, -5.0, 0.5]])
    d = llgrad.differentiate(lambda x: np.logaddexp.accumulate(x, axis=1))
    np.testing.assert_allclose(d(x), np.logaddexp.accumulate(x, axis=1), rtol=1e-14)
    x = np.random.default_rng(5).standard_normal((3, 6)) * 3
    g = llgrad.differentiate(_logcumsumexp_loss).grad(x)
    (e,) = numerical_vjp(_logcumsumexp_loss, [x], np.ones(()), [0])
    np.testing.assert_allclose(g, e, rtol=1e-6, atol=1e-6)  # (values ~100: the FD's noise)
    y = np.logaddexp.accumulate(x, axis=1)  # d y[k] / d x[j] = exp(x[j] - y[k]) for j <= k
    exact = [[sum(k * np.exp(x[r, j] - y[r, k - 1]) for k in range(j + 1, 7)) for j in range(6)]
             for r in range(3)]
    np.testing.assert_allclose(g, exact, rtol=1e-12)


def _windows_loss(x, k):
    w1 = np.lib.stride_tricks.sliding_window_view(x, 3, axis=1) @ k
    w2 = np.lib.stride_tricks.sliding_window_view(x, (2, 2))
    return np.sum(w1 ** 2) + np.sum(np.sin(w2) * np.arange(4.0).reshape(2, 2))


def test_sliding_window_view_matches_numpy_and_its_gradient_sums_overlaps(mode):
    x, k = R.standard_normal((4, 7)), R.standard_normal(3)
    for shape, axis in [(3, 1), ((2, 2), None), ((2, 3), (1, 0)), ((2, 2), (1, 1)), (7, -1)]:
        got = llgrad.differentiate(lambda x: np.lib.stride_tricks.sliding_window_view(
            x, shape, axis))(x)
        np.testing.assert_array_equal(got, np.lib.stride_tricks.sliding_window_view(
            x, shape, axis))
    d = llgrad.differentiate(_windows_loss, wrt=(0, 1))
    value, grads = d.value_and_grad(x, k)
    assert value == pytest.approx(_windows_loss(x, k), rel=1e-13)
    for g, e in zip(grads, numerical_vjp(_windows_loss, [x, k], np.ones(()), [0, 1])):
        np.testing.assert_allclose(g, e, rtol=1e-6, atol=1e-8)


def test_sliding_window_view_errors_are_numpys(mode):
    view = np.lib.stride_tricks.sliding_window_view
    for shape, axis, match in [(8, None, "larger than input"), ((2, 2), None, "all dimensions"),
                               ((2,), (0, 0), "matching length"), (-1, None, "negative")]:
        with pytest.raises(ValueError, match=match):
            llgrad.differentiate(lambda x: np.sum(view(x, shape, axis)))(np.ones(7))
    with pytest.raises(UnsupportedError, match=r"sliding_window_view\(writeable=...\)"):
        llgrad.differentiate(lambda x: np.sum(view(x, 2, writeable=True)))(np.ones(7))
