"""np.piecewise on traced values (tracer/traced_builtins.py `_piecewise`): each function on
its own elements, written at its condition, later conditions over earlier ones, the extra
function where none holds; a branch undefined elsewhere never reaches the gradient."""
from __future__ import annotations

import numpy as np
import pytest

import llgrad
from tests.e2e.conftest import finite_differences

X = np.array([-1.2, -0.3, 0.1, 0.4, 2.0, -0.7])


def log_where_positive(x, a):
    """np.log on the negatives would be NaN: numpy never computes it, nor does llgrad."""
    y = np.piecewise(x, [x > 0], [lambda t, a: a * np.log(t), lambda t, a: 0.5 * t], a)
    return np.sum(y ** 2)


def overlapping_with_otherwise(x):
    """The second condition overrides the first where both hold; constants and functions."""
    return np.sum(np.piecewise(x, [x < 0.5, x < -0.5, x > 1.0],
                               [lambda t: t * 3.0, -1.0, np.sqrt, lambda t: t ** 3]))


def one_condition(x):
    return np.sum(np.piecewise(x, x < 0, [np.exp, np.cos]) * x)


@pytest.mark.parametrize("fn,args", [(log_where_positive, (X, 1.5)),
                                     (overlapping_with_otherwise, (X,)),
                                     (one_condition, (X,))],
                         ids=["log_where_positive", "overlapping_with_otherwise",
                              "one_condition"])
def test_values_and_gradients_equal_numpy_and_finite_differences(fn, args, mode):
    d = llgrad.differentiate(fn)
    value, grad = d.value_and_grad(*args)
    assert value == pytest.approx(fn(*args), rel=1e-12)
    assert np.all(np.isfinite(grad))
    np.testing.assert_allclose(grad, finite_differences(fn, args, (0,))[0], rtol=1e-6,
                               atol=1e-8)
    assert d.inspect(*args).stats["path"] == "staged"


def test_the_number_of_functions_is_checked_as_numpy_does():
    with pytest.raises(ValueError, match="either 2 or 3 functions"):
        llgrad.grad(lambda x: np.sum(np.piecewise(x, [x < 0, x > 1], [np.sin])))(X)
