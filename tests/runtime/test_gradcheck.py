"""gradcheck / gradgradcheck: PyTorch's documented behaviour and every error message."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import llgrad as lg
from llgrad.autograd import Function
from llgrad.autograd.gradcheck import GradcheckError, gradcheck, gradgradcheck


def d(*shape):
    return lg.randn(*shape, dtype=lg.float64, requires_grad=True)


class WrongSquare(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx, g):
        x, = ctx.saved_tensors
        return 2.5 * x * g


class Square(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx, g):
        x, = ctx.saved_tensors
        return 2 * x * g


def test_exposed_as_function_and_module():
    import sys
    mod = sys.modules["llgrad.autograd.gradcheck"]
    assert lg.autograd.gradcheck is mod.gradcheck
    assert lg.autograd.gradgradcheck is mod.gradgradcheck
    assert issubclass(GradcheckError, RuntimeError)


def test_passes_several_inputs_outputs_and_non_tensor_args():
    x, w = d(4, 3), d(3, 2)
    assert gradcheck(lambda a, b, s: ((a @ b) * s, a.sin()), (x, w, 2.0))
    assert gradcheck(lambda a, b, s: ((a @ b) * s, a.sin()), (x, w, 2.0), fast_mode=True)


def test_single_tensor_input_and_custom_function():
    assert gradcheck(Square.apply, d(5))
    assert gradcheck(lg.sigmoid, (d(4),), eps=1e-6)


def test_inputs_not_requiring_grad_are_constants():
    x, c = d(3), lg.randn(3, dtype=lg.float64)
    assert gradcheck(lambda a, b: a * b.exp(), (x, c))


def test_failure_report_names_pair_jacobians_and_largest_difference():
    x, y = d(3), d(2)
    with pytest.raises(GradcheckError) as info:
        gradcheck(lambda a, b: (a.sum() * b, WrongSquare.apply(a)), (x, y))
    msg = str(info.value)
    assert "Jacobian mismatch for output 1 with respect to input 0," in msg
    assert "numerical:" in msg and "analytical:" in msg
    assert "largest difference" in msg and "d output[1][" in msg and "d input[0][" in msg
    assert "How to fix" in msg


def test_raise_exception_false_returns_false():
    assert gradcheck(WrongSquare.apply, (d(3),), raise_exception=False) is False
    assert gradcheck(WrongSquare.apply, (d(3),), raise_exception=False, fast_mode=True) is False


def test_fast_mode_failure_reports_projection_and_full_jacobians():
    with pytest.raises(GradcheckError, match=r"fast mode: v\^T J u numerical .* vs analytical"):
        gradcheck(WrongSquare.apply, (d(3),), fast_mode=True)


def test_report_is_trimmed_for_large_jacobians():
    with pytest.raises(GradcheckError) as info:
        gradcheck(WrongSquare.apply, (d(20, 20),))
    assert "..." in str(info.value)
    assert len(str(info.value)) < 4000


def test_no_input_requires_grad():
    with pytest.raises(ValueError, match="at least one input tensor to require gradient"):
        gradcheck(lg.sin, (lg.randn(3, dtype=lg.float64),))


def test_float32_warns_and_passes_at_large_eps():
    x = lg.randn(4, requires_grad=True)
    with pytest.warns(UserWarning, match="not a double precision"):
        assert gradcheck(lg.sigmoid, (x,), eps=1e-3)


def test_float32_failure_mentions_rounding():
    # rounding noise of float32 at eps=1e-5 is ~1e-2 relative: far above rtol
    x = lg.tensor([0.3, -1.2, 2.0, 0.7], requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(GradcheckError, match="float32 rounding alone"):
            gradcheck(lambda a: a.exp() * 100, (x,), eps=1e-5)


def test_not_reentrant():
    calls = [0]

    class Noisy(Function):
        @staticmethod
        def forward(ctx, x):
            return x * 1

        @staticmethod
        def backward(ctx, g):
            calls[0] += 1
            return g * (1 + 1e-3 * calls[0])

    with pytest.raises(GradcheckError, match="Backward is not reentrant"):
        gradcheck(Noisy.apply, (d(2),), atol=1e-2)
    assert gradcheck(Noisy.apply, (d(2),), atol=1, rtol=1, nondet_tol=1.0)


def test_output_not_requiring_grad_but_depending_on_input():
    def f(a):
        return a * 2, lg.tensor(a.detach().numpy() * 3)

    with pytest.raises(GradcheckError, match="Numerical gradient for function expected to be "
                                             "zero"):
        gradcheck(f, (d(3),))


class TwoOut(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.set_materialize_grads(False)
        return x * 2, x * 3

    @staticmethod
    def backward(ctx, g1, g2):
        return g1 * 2 + g2 * 3  # fails on an undefined (None) gradient


def test_check_undefined_grad():
    with pytest.raises(GradcheckError, match="Expected backward function to handle undefined "
                                             "output grads"):
        gradcheck(TwoOut.apply, (d(3),))
    assert gradcheck(TwoOut.apply, (d(3),), check_undefined_grad=False)


def test_gradgradcheck():
    x, w = d(3, 2), d(2, 2)
    assert gradgradcheck(lambda a, b: (a @ b).tanh(), (x, w))
    assert gradgradcheck(lambda a: a ** 3, (x,), (lg.randn(3, 2, dtype=lg.float64),))
    assert gradgradcheck(lambda a, b: (a @ b).tanh(), (x, w), fast_mode=True)


def test_gradgradcheck_catches_wrong_double_backward():
    class NoDouble(Function):  # backward is not differentiable in x (x detached)
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x ** 3

        @staticmethod
        def backward(ctx, g):
            x, = ctx.saved_tensors
            return 3 * x.detach() ** 2 * g

    assert gradcheck(NoDouble.apply, (d(3),))
    assert gradgradcheck(NoDouble.apply, (d(3),), raise_exception=False) is False


def test_inputs_restored_exactly():
    x = d(5)
    before = np.array(x.detach().numpy())
    gradcheck(lambda a: a.exp(), (x,))
    gradcheck(lambda a: a.exp(), (x,), fast_mode=True)
    assert np.array_equal(before, x.detach().numpy())
    assert x.grad is None
