import numpy as np
import pytest
from llvmlite import ir

from llgrad.codegen import loops, vmath

F64 = vmath.F64
I64 = loops.I64


def test_expsin_vector_loop_with_remainder(kernel):
    """y = exp(x) * sin(x), n = 1003: a width-4 main loop and a 3-element remainder."""
    n = 1003

    def emit(b, x, y):
        def body(b, i, w):
            v = loops.load(b, x, i, F64, w)
            loops.store(b, b.fmul(vmath.math_call(b, "exp", v), vmath.math_call(b, "sin", v)), y, i)
        loops.elementwise(b, n, 4, body)

    x = np.linspace(-5, 5, n)
    y = np.full(n, np.nan)
    kernel(2, emit)(x, y)
    np.testing.assert_allclose(y, np.exp(x) * np.sin(x), rtol=1e-14, atol=1e-300)


def test_expsin_float32(kernel):
    n = 1003
    elem = vmath.F32

    def emit(b, x, y):
        def body(b, i, w):
            v = loops.load(b, x, i, elem, w)
            loops.store(b, b.fmul(vmath.math_call(b, "exp", v), vmath.math_call(b, "sin", v)), y, i)
        loops.elementwise(b, n, 8, body)

    x = np.linspace(-5, 5, n, dtype=np.float32)
    y = np.full(n, np.nan, np.float32)
    kernel(2, emit)(x, y)
    ref = np.exp(x.astype(np.float64)) * np.sin(x.astype(np.float64))
    np.testing.assert_allclose(y, ref, rtol=1e-6, atol=1e-30)


@pytest.mark.parametrize("n", [0, 1, 3, 4, 5, 17])
def test_elementwise_runtime_length(kernel, n):
    """The trip count read from a buffer at run time: every element touched exactly once."""
    def emit(b, n_buf, x, y):
        count = b.load(n_buf, typ=I64)

        def body(b, i, w):
            v = loops.load(b, x, i, F64, w)
            old = loops.load(b, y, i, F64, w)
            loops.store(b, b.fadd(old, b.fmul(v, v)), y, i)
        loops.elementwise(b, count, 4, body)

    x = np.arange(20.0)
    y = np.zeros(20)
    kernel(3, emit)(np.array(n, np.int64), x, y)
    np.testing.assert_array_equal(y[:n], x[:n] ** 2)
    assert not y[n:].any()


@pytest.mark.parametrize("start,stop,step", [(0, 10, 1), (2, 11, 3), (9, -1, -2), (5, 5, 1)])
def test_for_range(kernel, start, stop, step):
    def emit(b, out):
        with loops.for_range(b, start, stop, step) as i:
            loops.store(b, b.sitofp(i, F64), out, i)

    out = np.full(12, -1.0)
    kernel(1, emit)(out)
    expected = np.full(12, -1.0)
    idx = list(range(start, stop, step))
    expected[idx] = idx
    np.testing.assert_array_equal(out, expected)


def test_for_range_rejects_zero_step():
    m = ir.Module()
    f = ir.Function(m, ir.FunctionType(ir.VoidType(), []), "f")
    b = ir.IRBuilder(f.append_basic_block())
    with pytest.raises(ValueError, match="step must be nonzero"):
        with loops.for_range(b, 0, 3, 0):
            pass


def test_loop_nest_3d(kernel):
    shape = (3, 4, 5)

    def emit(b, out):
        with loops.loop_nest(b, shape) as (i, j, k):
            flat = b.add(b.mul(b.add(b.mul(i, loops.const(4)), j), loops.const(5)), k)
            val = b.sitofp(b.add(b.add(b.mul(i, loops.const(100)), b.mul(j, loops.const(10))), k), F64)
            loops.store(b, val, out, flat)

    out = np.zeros(shape)
    kernel(1, emit)(out)
    i, j, k = np.indices(shape)
    np.testing.assert_array_equal(out, 100 * i + 10 * j + k)


def test_loop_nest_0d_runs_body_once(kernel):
    def emit(b, out):
        with loops.loop_nest(b, ()) as idx:
            assert idx == ()
            loops.store(b, b.fadd(loops.load(b, out, 0, F64), ir.Constant(F64, 1.0)), out, 0)

    out = np.zeros(1)
    kernel(1, emit)(out)
    assert out[0] == 1.0


def test_code_after_loop_runs_after_it(kernel):
    """The builder is left in the exit block: a store after the loop sees the loop's result."""
    def emit(b, out):
        with loops.for_range(b, 0, 10) as i:
            acc = loops.load(b, out, 0, F64)
            loops.store(b, b.fadd(acc, b.sitofp(i, F64)), out, 0)
        loops.store(b, b.fmul(loops.load(b, out, 0, F64), ir.Constant(F64, 2.0)), out, 1)

    out = np.zeros(2)
    kernel(1, emit)(out)
    np.testing.assert_array_equal(out, [45.0, 90.0])
