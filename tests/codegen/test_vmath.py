import math

import numpy as np
import pytest
from llvmlite import ir

from llgrad.codegen import loops, vmath

N = 1003  # not a multiple of any width: exercises the remainder loop

# op -> (numpy reference, input domain)
UNARY = {
    "exp": (np.exp, (-20, 20)), "exp2": (np.exp2, (-20, 20)), "expm1": (np.expm1, (-2, 2)),
    "log": (np.log, (1e-3, 1e3)), "log2": (np.log2, (1e-3, 1e3)),
    "log10": (np.log10, (1e-3, 1e3)), "log1p": (np.log1p, (-0.9, 10)),
    "sin": (np.sin, (-10, 10)), "cos": (np.cos, (-10, 10)), "tan": (np.tan, (-1.5, 1.5)),
    "sinh": (np.sinh, (-5, 5)), "cosh": (np.cosh, (-5, 5)), "tanh": (np.tanh, (-5, 5)),
    "asin": (np.arcsin, (-1, 1)), "acos": (np.arccos, (-1, 1)), "atan": (np.arctan, (-9, 9)),
    "asinh": (np.arcsinh, (-9, 9)), "acosh": (np.arccosh, (1, 9)),
    "atanh": (np.arctanh, (-0.99, 0.99)), "cbrt": (np.cbrt, (-9, 9)),
    "erf": (np.vectorize(math.erf), (-3, 3)), "sqrt": (np.sqrt, (0, 100)),
    "fabs": (np.abs, (-5, 5)), "floor": (np.floor, (-5, 5)), "ceil": (np.ceil, (-5, 5)),
}
BINARY = {"pow": (np.power, (0.1, 5)), "atan2": (np.arctan2, (-3, 3)),
          "hypot": (np.hypot, (-3, 3)), "fmin": (np.fmin, (-3, 3)),
          "fmax": (np.fmax, (-3, 3)), "copysign": (np.copysign, (-3, 3)),
          "minimum": (np.minimum, (-3, 3)), "maximum": (np.maximum, (-3, 3))}
RTOL = {"f64": 1e-14, "f32": 1e-6}
NP = {"f64": np.float64, "f32": np.float32}


def _emit_map(name, dtype, width, nargs, n=N):
    elem = vmath.float_type(dtype)

    def emit(b, *ptrs):
        *ins, out = ptrs

        def body(b, i, w):
            args = [loops.load(b, p, i, elem, w) for p in ins]
            loops.store(b, vmath.math_call(b, name, *args), out, i)

        loops.elementwise(b, n, width, body)
    return emit


def _check(kernel, name, ref, domain, dtype, width, nargs):
    rng = np.random.default_rng(1)
    ins = [rng.uniform(*domain, N).astype(NP[dtype]) for _ in range(nargs)]
    out = np.empty(N, NP[dtype])
    kernel(nargs + 1, _emit_map(name, dtype, width, nargs))(*ins, out)
    expected = ref(*[x.astype(np.float64) for x in ins])
    np.testing.assert_allclose(out, expected, rtol=RTOL[dtype], atol=1e-300)


@pytest.mark.parametrize("dtype", ["f64", "f32"])
@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_matches_numpy(kernel, name, dtype):
    ref, domain = UNARY[name]
    _check(kernel, name, ref, domain, dtype, vmath.vector_width(dtype), 1)


@pytest.mark.parametrize("dtype", ["f64", "f32"])
@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_matches_numpy(kernel, name, dtype):
    ref, domain = BINARY[name]
    _check(kernel, name, ref, domain, dtype, vmath.vector_width(dtype), 2)


@pytest.mark.parametrize("width", [1, 2, 3, 8, 16])
def test_any_width(kernel, width):
    _check(kernel, "exp", np.exp, (-5, 5), "f64", width, 1)
    _check(kernel, "sin", np.sin, (-5, 5), "f32", width, 1)


def test_scalar_fallback_without_libmvec(kernel, monkeypatch):
    monkeypatch.setattr(vmath, "mvec_available", lambda dtype="f64": False)
    for name in ("exp", "tanh", "log1p"):
        ref, domain = UNARY[name]
        _check(kernel, name, ref, domain, "f64", 4, 1)
        _check(kernel, name, ref, domain, "f32", 8, 1)


def test_fma(kernel):
    elem = vmath.F64
    rng = np.random.default_rng(2)
    a, b, c = (rng.normal(size=N) for _ in range(3))
    out = np.empty(N)

    def emit(bld, pa, pb, pc, po):
        def body(bld, i, w):
            args = [loops.load(bld, p, i, elem, w) for p in (pa, pb, pc)]
            loops.store(bld, vmath.math_call(bld, "fma", *args), po, i)
        loops.elementwise(bld, N, 4, body)

    kernel(4, emit)(a, b, c, out)
    # numpy rounds a*b before adding c; fma rounds once
    np.testing.assert_allclose(out, a * b + c, rtol=1e-14, atol=1e-15)


def _module_text(name, dtype, width):
    m = ir.Module()
    ty = vmath.vector_type(dtype, width)
    f = ir.Function(m, ir.FunctionType(ty, [ty]), "f")
    b = ir.IRBuilder(f.append_basic_block())
    b.ret(vmath.math_call(b, name, f.args[0]))
    return str(m)


@pytest.mark.skipif(not vmath.mvec_available(), reason="needs libmvec and AVX2")
def test_libmvec_symbols_used():
    assert "_ZGVdN4v_exp" in _module_text("exp", "f64", 4)
    assert "_ZGVdN8v_expf" in _module_text("exp", "f32", 8)
    assert _module_text("exp", "f64", 8).count('call <4 x double> @"_ZGVdN4v_exp"') == 2
    assert "llvm.sqrt.v4f64" in _module_text("sqrt", "f64", 4)
    assert '@"llvm.exp.f64"' in _module_text("exp", "f64", 1)
    assert '@"tanhf"(' in _module_text("tanh", "f32", 1)


def test_errors():
    m = ir.Module()
    f = ir.Function(m, ir.FunctionType(vmath.F64, [vmath.F64, vmath.F32]), "f")
    b = ir.IRBuilder(f.append_basic_block())
    with pytest.raises(ValueError, match="no op 'frobnicate'"):
        vmath.math_call(b, "frobnicate", f.args[0])
    with pytest.raises(ValueError, match="pow takes 2"):
        vmath.math_call(b, "pow", f.args[0])
    with pytest.raises(ValueError, match="differ in type"):
        vmath.math_call(b, "pow", f.args[0], f.args[1])
    with pytest.raises(ValueError, match="float32 and float64 only"):
        vmath.float_type("i64")


@pytest.mark.parametrize("width", [1, 4])
@pytest.mark.parametrize("name,ref", [("fmin", np.fmin), ("fmax", np.fmax),
                                      ("minimum", np.minimum), ("maximum", np.maximum)])
def test_nan_semantics_of_min_max(kernel, width, name, ref):
    x = np.array([1.0, np.nan, 3.0, np.nan, -1.0, 2.0, np.nan, 0.5] * 2)
    y = np.array([np.nan, 2.0, 1.0, np.nan, 0.0, np.nan, 5.0, 0.25] * 2)
    out = np.empty_like(x)
    kernel(3, _emit_map(name, "f64", width, 2, n=len(x)))(x, y, out)
    np.testing.assert_array_equal(out, ref(x, y))
