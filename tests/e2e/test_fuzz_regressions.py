"""Programs the compiler's differential fuzzer (tests/fuzz) found wrong, minimised.

Each is checked against plain Python (values, and dtypes of array outputs) and its gradient
against central finite differences, through the interpreter and natively (`mode`), for
inputs that take every path; where llgrad cannot follow the program, the error must name the
user's line and say how to rewrite it.
"""
from __future__ import annotations

import re
import warnings

import numpy as np
import pytest

import llgrad
from llgrad.runtime.errors import LLGradError, UnsupportedError
from tests.e2e.conftest import finite_differences

XS = [np.array(v) for v in ([1.0, 2.0, 3.0], [-1.0, 2.0, 3.0], [-1.0, -2.0, 3.0],
                            [-1.0, -1.0, -1.0], [-0.5, 0.7, 0.3])]


def _outputs(r) -> tuple:
    return r if isinstance(r, tuple) else (r,)


def check(fn, xs=XS):
    """llgrad's `fn(x)` equals plain Python's and its gradient (of a scalar of the outputs)
    equals finite differences, for each x in `xs`."""
    def loss(x):
        return sum(np.sum(np.sin(o)) for o in _outputs(fn(x)))
    f, dl = llgrad.differentiate(fn), llgrad.differentiate(loss)
    for x in xs:
        want, got = _outputs(fn(x.copy())), _outputs(f(x.copy()))
        assert len(got) == len(want), (x, got, want)
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w, rtol=1e-12, err_msg=str(x))
            if np.ndim(w):
                assert np.asarray(g).dtype == np.asarray(w).dtype
        value, grad = dl.value_and_grad(x.copy())
        np.testing.assert_allclose(value, loss(x.copy()), rtol=1e-12)
        np.testing.assert_allclose(grad, finite_differences(loss, [x.copy()], [0])[0],
                                   rtol=1e-6, atol=1e-8, err_msg=str(x))


# ---- records (tuples) made on the paths of a traced `if` ---------------------------------
def return_tuple(x):  # was: "`__lg_retval` holds different Python objects (tuple and tuple)"
    if x[0] > 0:
        return (x * 2, x[1])
    return (x * 3, x[2])


def return_tuple_twice(x):
    if x[0] > 0:
        return (x * 2, x[1])
    y = x + 1
    if x[1] > 0:
        return (y, x[0])
    return (x * 3, x[2])


def tuple_in_branches(x):
    if x[0] > 0:
        t = (x * 2, x[1])
    else:
        t = (x * 3, x[2])
    return t[0] * t[1]


def tuple_beside_raise(x):
    if x[0] > 5.0:
        raise ValueError("too large")
    else:
        t = (x * 2, x[1])
    return t[0] * t[1]


# ---- records first bound in a staged loop ------------------------------------------------
def return_tuple_in_loop(x):  # was: silently (zeros, 0.0)
    for i in range(3):
        if x[i] > 0:
            return (x * i, x[i])
    return (x, x[0])


def return_tuple_in_while(x):
    if x[2] > 2.0:
        return (x, x[1])
    k = 0
    while k < 3:
        if x[k] > 0.5:
            return (x * 2, x[k])
        k += 1
    return (x * 3, x[0])


def tuple_bound_in_loop(x):
    for i in range(3):
        t = (x * i, x[i])
    return t[0] * t[1]


def return_in_loop_after_if(x):
    acc = x[0]
    if x[1] > 2.5:
        return acc * 2
    for i in range(3):
        acc = acc + x[i]
        if acc > 1:
            return acc
    return acc * 0.5


@pytest.mark.parametrize("fn", [return_tuple, return_tuple_twice, tuple_in_branches,
                                tuple_beside_raise, return_tuple_in_loop, return_tuple_in_while,
                                tuple_bound_in_loop, return_in_loop_after_if])
def test_records_on_paths(fn, mode):
    check(fn)


def tuple_of_two_shapes(x):
    if x[0] > 0:
        t = (x * 2, x[1])
    else:
        t = (x * 2, x[1], x[2])
    return t[0]


def test_records_of_different_structure_are_refused_at_the_if(mode):
    with pytest.raises(LLGradError, match=r"(?s)`t` holds a tuple of 2 items on one path.*"
                       r"a tuple of 3 items on the other.*test_fuzz_regressions.py:\d+.*"
                       r"same structure"):
        llgrad.differentiate(tuple_of_two_shapes)(XS[0])


# ---- in-place updates of an array another name may hold ---------------------------------
# (Note [In-place updates are by value]; before, each of these silently gave Python's value
# without the update seen through the other name)
def alias_on_one_path(x, k):  # the fuzzer's program, minimised
    v12 = x * 1.0
    v13 = v12
    if k.sum() < 1.5:
        v13 = 0.5 * v13
    v13 *= k
    return v12


def alias_through_ternary(x, k):
    y = x * 1.0
    z = y if k.sum() < 1.5 else y * 2
    z *= 3.0
    return y


def element_update_through_branch(x, k):
    y = x * 1.0
    if k.sum() < 1.5:
        z = y
    else:
        z = y + 1
    z[0] = 7.0
    return y


def alias_from_before_loop(x, k):
    b = x * 1.0
    a = b
    for _ in range(3):
        a *= 2.0
    return b


def element_update_from_before_loop(x, k):
    a = x * 1.0
    b = a
    for _ in range(2):
        b[0] = b[0] + 1.0
    return a


def alias_from_next_iteration(x, k):
    a = x * 1.0
    b = x * 2.0
    for _ in range(3):
        a += 1.0
        a = b
    return b


@pytest.mark.parametrize("fn, line", [
    (alias_on_one_path, "v13 *= k"), (alias_through_ternary, "z *= 3.0"),
    (element_update_through_branch, "z[0] = 7.0"), (alias_from_before_loop, "a *= 2.0"),
    (element_update_from_before_loop, "b[0] = b[0] + 1.0"),
    (alias_from_next_iteration, "a += 1.0")])
def test_inplace_update_of_an_array_another_name_may_hold_is_refused(fn, line, mode):
    with pytest.raises(UnsupportedError, match=rf"(?s)in-place .*numpy would change.*"
                       rf"test_fuzz_regressions.py:\d+.*{re.escape(line)}.*copy"):
        llgrad.differentiate(fn)(XS[0], np.array([3, 3, 3]))


def update_after_branch_without_alias(x, k):
    y = x * 1.0
    z = x * 2.0
    if k.sum() < 1.5:
        z = y * 3.0
    z *= 3.0
    for i in range(3):
        z[i] = z[i] + y[i]
    return y + z


def test_inplace_update_without_alias_on_any_path_is_compiled(mode):
    for k in ([0, 1, 0], [3, 3, 3]):
        x, k = XS[1], np.array(k)
        np.testing.assert_allclose(llgrad.differentiate(update_after_branch_without_alias)(
            x, k), update_after_branch_without_alias(x, k), rtol=1e-12)


# ---- indices out of range ----------------------------------------------------------------
def unread_gather(x, k):
    v = x[k]  # never read: numpy still raises
    return x * 2.0


def unread_gather_in_branch(x, k):
    if x[0] > 0:
        v = np.sin(x[k]).sum()
    return x * 2.0


def unread_store(x, k):
    y = x.copy()
    y[k] = 1.0
    return x * 2.0


def static_index_in_branch(x, k):  # X[2] is out of range, in the branch only
    X = np.outer(x, x)[:2]
    if x[0] > 0.5:
        return X[2] * x
    return x * 2.0


@pytest.mark.parametrize("fn", [unread_gather, unread_gather_in_branch, unread_store,
                                static_index_in_branch])
def test_index_out_of_range_raises_only_when_python_does(fn, mode):
    d = llgrad.differentiate(fn)
    ok, bad = (XS[0], np.array([0, 2])), (XS[0], np.array([0, 5]))
    if fn is static_index_in_branch:
        ok, bad = (XS[1], None), (XS[0], None)
    np.testing.assert_allclose(d(*ok), fn(*ok), rtol=1e-12)
    with pytest.raises(IndexError):
        fn(*bad)
    with pytest.raises(IndexError, match="out of bounds"):
        d(*bad)


# ---- operators on booleans ---------------------------------------------------------------
def xor_of_masks(x, b):
    return np.sum(np.where((x < 0.5) ^ b, x, 2.0 * x) + np.where(True ^ b, x, 0.0))


def test_xor_of_booleans_is_logical(mode):
    x, b = XS[4], np.array([True, False, True])
    d = llgrad.differentiate(xor_of_masks)
    np.testing.assert_allclose(d(x, b), xor_of_masks(x, b), rtol=1e-12)
    np.testing.assert_allclose(d.grad(x, b), finite_differences(
        lambda x: xor_of_masks(x, b), [x], [0])[0], rtol=1e-6)
    with pytest.raises(LLGradError, match=r"(?s)the operator \^ on int64.*a != b"):
        llgrad.differentiate(lambda x, k: np.where((k ^ k) > 0, x, x))(x, np.array([1, 2, 3]))


# ---- augmented assignment keeps an array's dtype and shape (numpy: "same_kind" cast) ------
def iadd_f64_into_f32(x, y):
    z = y * 1
    z += x
    return z


def imul_in_branch(x, y):  # was: "`z` is f64[3] on one path but f32[3] on the other"
    z = y * 1
    if x[0] > 0:
        z *= x
    return z


def iadd_in_loop(x, y):
    z = y * 1
    for _ in range(3):
        z += x
    return z


@pytest.mark.parametrize("fn", [iadd_f64_into_f32, imul_in_branch, iadd_in_loop])
def test_augmented_assignment_keeps_the_arrays_dtype(fn, mode):
    y = np.array([1.0, -2.0, 3.0], np.float32)
    for x in XS[:2]:
        got, want = llgrad.differentiate(fn)(x, y), fn(x, y)
        assert got.dtype == want.dtype == np.float32
        np.testing.assert_allclose(got, want, rtol=1e-6)


def test_augmented_assignment_refuses_what_numpy_refuses(mode):
    def into_int(x, k):
        k = k * 1
        k += x
        return np.sum(x)

    def broadcast_up(x, k):
        y = x[0] * np.ones(3)
        y += np.outer(x, x)
        return np.sum(y)
    cast = r"Cannot cast ufunc 'add' output from dtype\('float64'\) to dtype\('int64'\)"
    with pytest.raises(TypeError, match=cast):
        into_int(XS[0], np.array([1, 2, 3]))
    with pytest.raises(TypeError, match=rf"(?s){cast}.*k \+= x"):
        llgrad.differentiate(into_int)(XS[0], np.array([1, 2, 3]))
    with pytest.raises(ValueError, match="non-broadcastable output operand"):
        broadcast_up(XS[0], None)
    with pytest.raises(ValueError, match=r"(?s)non-broadcastable output operand.*y \+= "):
        llgrad.differentiate(broadcast_up)(XS[0], None)


def scalar_rebound(x):  # numpy scalars are immutable: `t += 1` rebinds t (was refused)
    s = np.sum(x)
    t = s
    t += 1.0
    u = x[0]
    v = u
    v *= 2
    return s * t + u * v


def scalar_from_loop_and_matmul(x):  # was: "non-broadcastable output operand with shape ()"
    acc = 0.0
    for i in range(2):
        acc = np.tanh(x[i])
    acc -= x
    m = (x + 1.0) @ x
    m += x
    return acc * m


def test_scalars_are_rebound(mode):
    check(scalar_rebound)
    check(scalar_from_loop_and_matmul)


def where_of_constants_in_ternary(x):  # was: "holds different Python objects (float, ndarray)"
    acc = 0.0
    v = acc if np.max(x) > 0 else np.where(0.75, acc, 1)
    w = 2.0 if np.max(x) > 0 else np.where(True, 3.0, 1)
    return x * (v + w)


def test_a_numpy_constant_meets_a_number_on_the_paths_of_a_ternary(mode):
    check(where_of_constants_in_ternary)


# ---- a `for` over the rows of an array updated in the loop (Python reads each row late) ---
def update_while_iterating(x):  # the fuzzer's program, minimised: was a silent wrong value
    v1 = x * 1.0
    for r in v1:
        v1 *= 2.0
        v1[0] += np.tanh(r[0])
    return v1


def update_the_row(x):
    v1 = x * 1.0
    for r in v1:
        r += 1.0
    return v1


def read_rows_update_another(x):
    out = x * 0.0
    for r in x:
        out[0] += r
    return np.sum(out)


@pytest.mark.parametrize("fn, line", [(update_while_iterating, "v1 *= 2.0"),
                                      (update_the_row, "r += 1.0")])
def test_updating_the_array_a_loop_iterates_over_is_refused(fn, line, mode):
    with pytest.raises(UnsupportedError, match=rf"(?s)in-place .*{re.escape(line)}.*copy"):
        llgrad.differentiate(fn)(np.outer(XS[0], XS[1]))


def test_rows_read_and_another_array_updated(mode):
    X = np.outer(XS[0], XS[1])
    d = llgrad.differentiate(read_rows_update_another)
    np.testing.assert_allclose(d(X), read_rows_update_another(X), rtol=1e-12)
    np.testing.assert_allclose(d.grad(X), finite_differences(read_rows_update_another, [X],
                                                             [0])[0], rtol=1e-6)


# -- numpy's own in-place operators on numpy arrays in traced code (fuzzer, seed 1, 1803) -----
def numpy_update_in_a_branch(x):
    v = np.where(0.5, 0.5, 0.25)  # a numpy 0-d array, not a traced value
    if np.sum(x) > 100.0:
        v += v  # numpy changes v in place while the branch is traced, taken or not
    return v * x


def numpy_update_in_a_loop(x):
    buf = np.zeros(3)
    s = 0.0
    for i in range(3):
        buf += 1.0  # numpy: once per iteration; a staged body would run it once
        s = s + np.sum(buf) * x[i]
    return s


def test_numpy_in_place_update_in_a_traced_branch_is_refused(mode):
    x = np.array([0.5, 1.5, 2.0])
    with pytest.raises(UnsupportedError, match=r"changes a numpy array that existed before "
                                               r"it \(its contents\)"):
        llgrad.differentiate(numpy_update_in_a_branch)(x)
    np.testing.assert_allclose(numpy_update_in_a_branch(x), 0.5 * x)  # the array is restored


def test_numpy_in_place_update_in_a_staged_loop_runs_every_iteration(mode):
    x = np.array([0.5, 1.5, 2.0])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", llgrad.PerformanceWarning)
        v, g = llgrad.differentiate(numpy_update_in_a_loop).value_and_grad(x)
    assert v == pytest.approx(numpy_update_in_a_loop(x), rel=1e-12)
    np.testing.assert_allclose(g, [3.0, 6.0, 9.0])


# ---- two carried arrays written by one fused loop (fuzzer seed 22, programs 712 and 1923) --
def carried_pair_in_one_loop(x):
    a = x * 0.5
    b = x * 1.5
    for _ in range(3):
        a = np.sin(b)      # a's old value is dead: computed where b's element was ...
        b = np.sin(2 * a)  # ... and b's new value in b's own buffer too: a read b's (was: 0.99)
    return a


def carried_pair_over_rows(x):
    v = np.tanh(x)
    for row in np.outer(x, x):
        w = np.cos(v)
        v = np.tanh(row + w)
    return v


@pytest.mark.parametrize("fn", [carried_pair_in_one_loop, carried_pair_over_rows])
def test_two_carried_arrays_of_one_fused_loop(fn, mode):
    check(fn)
