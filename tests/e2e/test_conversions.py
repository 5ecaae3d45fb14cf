"""numpy's conversions and Python lists of traced values inside compiled functions (issue 11):
np.asarray/np.array/... are graph ops (identity or copy) so gradients flow; a list or tuple of
traced values and numbers given to numpy is built as one array with numpy's dtype and shape
(`np.sum([1, a * a, 2])`); what stays unsupported is an error at the user's line."""
from __future__ import annotations

import numpy as np
import pytest

import llgrad
from llgrad.runtime.errors import ConcretizationError, DTypeError, ShapeError, UnsupportedError
from tests.e2e.conftest import finite_differences


def _value_and_grad_match_numpy(f, *args, wrt=0):
    d = llgrad.differentiate(f, wrt=wrt)
    value, grad = d.value_and_grad(*args)
    np.testing.assert_allclose(value, f(*args), rtol=1e-14)
    wrts = wrt if isinstance(wrt, tuple) else (wrt,)
    fd = finite_differences(f, list(args), wrts)
    for g, e in zip(grad if isinstance(wrt, tuple) else (grad,), fd):
        np.testing.assert_allclose(g, e, rtol=1e-6, atol=1e-8)


def sum_of_a_list(x):
    a = x[0]
    return np.sum([1, a * a, 2])


def test_sum_of_a_list_of_traced_values_and_numbers(mode):
    """The issue's example: it used to fail with a message pointing into numpy's source."""
    _value_and_grad_match_numpy(sum_of_a_list, np.array([1.5, 2.0]))
    assert llgrad.differentiate(sum_of_a_list).grad(np.array([1.5, 2.0]))[0] == 3.0


def reductions_of_lists(x, a):
    b = x[1] * a
    return (np.mean([x[0], b, 2.0]) + np.max([a, b, x[2]]) + np.min((b, 1.0)) + np.prod([a, b])
            + np.sum([[a, b], [x[0], 1.0]], axis=0)[1] + np.dot([a, b], [2.0, x[3]]))


def test_reductions_and_products_of_lists(mode):
    _value_and_grad_match_numpy(reductions_of_lists, np.array([0.5, -1.5, 2.0, 0.25]), 0.75,
                                wrt=(0, 1))


def stack_and_concatenate_lists(x, a):
    return (np.sum(np.stack([x[0], a, 1.0]) * x[1:]) + np.sum(np.concatenate([x, [a, 2.0]]))
            + np.sum(np.stack([x, x * a], axis=1) ** 2) + np.sum(np.array([x, 2 * x]).T @ x[:2]))


def test_stack_and_concatenate_with_numbers(mode):
    _value_and_grad_match_numpy(stack_and_concatenate_lists, np.array([0.5, -1.5, 2.0, 0.25]),
                                0.75, wrt=(0, 1))


@pytest.mark.parametrize("build", [
    lambda x: [x[0], 1.0], lambda x: [x[0], x[1]], lambda x: [[x[0], 2], [3, x[1]]],
    lambda x: [x, x], lambda x: (x[0], 1), lambda x: [x[:2], [1.0, 2.0]],
    lambda x: [x[0], np.float64(1.0)], lambda x: [True, x[0]]],
    ids=["scalar+float", "scalars", "nested", "vectors", "tuple", "vector+list", "np.float64",
         "bool"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
def test_array_of_a_list_has_numpys_dtype_and_shape(build, dtype):
    x = np.array([0.5, -1.5, 2.0], dtype=dtype)

    def make(v):
        return np.array(build(v))

    got, want = llgrad.differentiate(make)(x), make(x)
    assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, want.dtype)
    np.testing.assert_array_equal(got, want)


def conversions_of_values(x, a):
    y = (np.asarray(x) + np.asanyarray(x) * 2 + np.ascontiguousarray(x) + np.asfortranarray(x)
         + np.array(x, copy=False) + np.array(x, ndmin=2)[0] + np.copy(x) + x.copy())
    z = np.asarray(x, dtype=np.float64) * np.float64(a) + np.array([a, a, a, a], dtype=float)
    return np.sum(y * z) + np.float64(x[0] * a)


def test_conversions_are_graph_ops_so_gradients_flow(mode):
    _value_and_grad_match_numpy(conversions_of_values, np.array([0.5, -1.5, 2.0, 0.25]), 0.75,
                                wrt=(0, 1))


def test_float32_conversions_cast_and_keep_gradients(mode):
    def f(x):
        y = np.array(x, dtype=np.float32) + np.asarray(x, dtype=np.float32) + np.float32(x)
        return np.sum(y.astype(np.float64) * x)
    x = np.array([0.5, -1.5, 2.0])
    d = llgrad.differentiate(f)
    assert d(x) == pytest.approx(f(x), rel=1e-7)
    np.testing.assert_allclose(d.grad(x), 6 * x, rtol=1e-6)  # d/dx 3 x^2, x in float32


def updates_an_asarray_view(x):
    z = x * 2.0
    y = np.asarray(z)
    y += 1.0
    return np.sum(z)


def updates_a_copy(x):
    y = np.array(x)
    y += 1.0
    return np.sum(x) + np.sum(y * y)


def test_asarray_aliases_and_array_copies_as_in_numpy(mode):
    """np.asarray returns its argument (numpy's in-place update would show through x: refused,
    Note [In-place updates are by value]); np.array copies, so updating the copy is fine."""
    with pytest.raises(UnsupportedError, match="in-place \\+= of an array bound to `z` and `y`"):
        llgrad.differentiate(updates_an_asarray_view)(np.ones(3))
    _value_and_grad_match_numpy(updates_a_copy, np.array([0.5, -1.5, 2.0]))


def astype_copies(x):
    y = x.astype(np.float64)  # a copy, as numpy's (copy=False would alias x: refused below)
    y += 1.0
    return np.sum(x * y) + np.sum(y.round(1)) + np.sum(x.astype(np.float64, copy=False) ** 2)


def test_astype_copies_and_the_round_method(mode):
    _value_and_grad_match_numpy(astype_copies, np.array([0.21, 1.33, 2.07]))


def ragged_list(x):
    return np.sum(np.array([x, x[:2]]))


def list_of_strings(x):
    return np.sum(np.array([x[0], "a"]))


def test_unsupported_lists_are_errors_at_the_users_line():
    line = "return np.sum(np.array([x, x[:2]]))"
    with pytest.raises(ShapeError, match=r"array: .*\(got \[f64\[3\], f64\[2\]\]\)") as e:
        llgrad.differentiate(ragged_list)(np.ones(3))
    assert line in str(e.value) and "site-packages" not in str(e.value)
    with pytest.raises((DTypeError, ShapeError), match="array") as e:
        llgrad.differentiate(list_of_strings)(np.ones(3))
    assert "list_of_strings" in str(e.value) and "site-packages" not in str(e.value)


def concretises_then_sums_a_list(x):
    n = int(np.argmax(x))  # the dynamic path: traced per call
    return np.sum([x[n] * x[n], 1.0, x[0]])


def test_lists_on_the_dynamic_path(mode):
    x = np.array([0.5, 2.5, -1.0])
    d = llgrad.differentiate(concretises_then_sums_a_list)
    assert d(x) == pytest.approx(concretises_then_sums_a_list(x))
    np.testing.assert_allclose(d.grad(x), [1.0, 5.0, 0.0])
    assert d.inspect(x).path.startswith("dynamic")


def integer_list_shape(x):
    n = x.shape[0]
    return np.sum(np.reshape(x, (n // 2, 2)) * np.array([[1.0, 2.0]]))


def test_shape_tuples_are_not_built_as_arrays(mode):
    x = np.arange(4.0)
    assert llgrad.differentiate(integer_list_shape)(x) == integer_list_shape(x)


def _terms(x):
    return [x[0], 2.0]


def test_a_list_variable_holding_traced_values_names_the_fix():
    def f(x):
        terms = _terms(x)  # (a list made elsewhere: the converter does not see a list)
        return np.sum(terms)
    with pytest.raises(ConcretizationError, match="np.stack") as e:
        llgrad.differentiate(f)(np.ones(2))
    assert "terms = _terms(x)" not in str(e.value) and "np.sum(terms)" in str(e.value)


def mean_of_appended_losses(w, X):
    losses = []
    for i in range(X.shape[0]):
        losses.append(np.sum((X[i] * w) ** 2))
    parts = [w[0], w[1] * 2.0]
    parts += [np.sum(w)]
    return np.mean(losses) + np.max(parts) + np.sum(np.square(parts))


def test_lists_the_function_builds_are_arrays_for_numpy(mode):
    """A name bound to a list display or grown by append / += is built as an array when passed
    to numpy (`np.mean(losses)`): before, numpy converted it and the trace failed."""
    _value_and_grad_match_numpy(mean_of_appended_losses, np.array([0.5, -1.5]),
                                np.arange(6.0).reshape(3, 2))


def lists_in_ufuncs_and_operators(x, a):
    b = x[1] * a
    return (np.sum(np.exp([a, b])) + np.sum(x[:2] * [x[0], 2.0]) + np.sum([b, 1.0] - x[1:3])
            + np.sum(np.maximum([x[0], a], 0.5)) + np.sum(np.array([a, b]) ** [2.0, x[2]]))


def test_lists_of_traced_values_in_ufuncs_and_operators(mode):
    """np.exp([a, b]) and x * [a, 2.0]: the list is one array, as numpy converts it."""
    _value_and_grad_match_numpy(lists_in_ufuncs_and_operators,
                                np.array([0.5, -1.5, 2.0, 0.25]), 0.75, wrt=(0, 1))


def shapes_from_a_loop_counter(x):
    total = 0.0
    for i in range(3):
        total = total + np.sum(np.ones(i) * x[i]) + np.sum(np.zeros((i, 2)))
    return total + np.sum(np.full([2, x.shape[0]], 0.5) * x)


def shape_from_an_argument(x, n):
    return np.sum(np.ones(n) * x[0]) + np.sum(np.empty(shape=(n, 0)))


def test_traced_ints_as_shapes_are_read_as_numbers(mode):
    """np.zeros(i) of a loop counter raised numpy's own TypeError; the shape is concretised
    instead: the loop is unrolled (with a warning), or the function takes the dynamic path."""
    x = np.array([0.5, -1.5, 2.0])
    with pytest.warns(UserWarning, match="unrolled"):
        _value_and_grad_match_numpy(shapes_from_a_loop_counter, x)
    d = llgrad.differentiate(shape_from_an_argument)
    for n in (2, 3):
        assert d(x, np.array(n)) == shape_from_an_argument(x, np.array(n))
    assert d.inspect(x, np.array(3)).path.startswith("dynamic")


def full_of_traced_values(x, s0):
    paths = np.full(3, s0)  # a Monte Carlo start: every path at the spot
    grid = np.full((2, 3), x[0] * 2.0, dtype=np.float64)
    return np.sum(paths * x) + np.sum(grid * np.full(shape=3, fill_value=x[1]))


def test_np_full_of_a_traced_fill_value_broadcasts_it(mode):
    """np.full(n, s0) with s0 traced handed the value to numpy, which concretised it."""
    x = np.array([0.5, -1.5, 2.0])
    _value_and_grad_match_numpy(full_of_traced_values, x, 1.25, wrt=(0, 1))
    d = llgrad.differentiate(lambda x: np.full(2, x[0] * 2.0, dtype=np.float32))
    assert d(x).dtype == np.float32 and d.inspect(x).path == "staged"


def copy_modes(x):
    a = np.array(x, copy=np._CopyMode.IF_NEEDED)  # (what scipy's array-API layer passes)
    b = np.asarray(x * 2.0, copy=np._CopyMode.ALWAYS)
    return np.sum(a * b) + np.sum(np.array(x, copy=None))


def test_copy_modes_are_read_as_numpy_reads_them(mode):
    """np.array(x, copy=np._CopyMode.IF_NEEDED) took bool() of the mode, which raises."""
    _value_and_grad_match_numpy(copy_modes, np.array([0.5, -1.5, 2.0]))


def index_tricks(x, a):
    padded = np.r_[0.0, x, a]  # a cumulative grid's usual first point
    cols = np.c_[x, x ** 2, np.ones(3)]  # a design matrix
    return np.sum(np.diff(padded) ** 2) + np.sum(cols @ np.array([1.0, a, 0.5])) + np.r_[x][0]


def test_r_and_c_of_traced_values_concatenate(mode):
    """np.r_[0.0, x] handed the traced values to numpy's concatenate (ConcretizationError)."""
    _value_and_grad_match_numpy(index_tricks, np.array([0.5, -1.5, 2.0]), 0.75, wrt=(0, 1))
    with pytest.raises(UnsupportedError, match=r"np\.r_\[\.\.\.\] with a slice"):
        llgrad.differentiate(lambda x: np.sum(np.r_[x, 0:3]))(np.ones(2))
