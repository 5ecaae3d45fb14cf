"""SIMD transcendental math for generated code: one call, scalar or `<W x float|double>`.

`math_call(builder, "exp", x)` emits the fastest accurate form the host supports: for vectors,
glibc libmvec (`_ZGVdN4v_exp`, AVX2) where it exists, else LLVM vector intrinsics for the ops
the backend does natively (sqrt, fabs, floor, fma, ...), else one scalar call per lane; for
scalars, an LLVM intrinsic or a libm symbol. See Note [Why libmvec].
Invariant: results match libm/numpy to a few ulp (libmvec's documented bound is 4 ulp).
"""
from __future__ import annotations

from functools import cache

from llvmlite import ir

from llgrad.runtime.ops._scalar import SCIPY_SPECIAL

from . import jit, special

__all__ = [
    "F32", "F64", "UNARY", "BINARY", "TERNARY", "math_call", "vector_width",
    "mvec_available", "float_type", "vector_type", "splat",
]

# Note [Why libmvec]
# LLVM's loop vectoriser turns a scalar loop of `llvm.exp.f64` into `llvm.exp.v4f64`, but the
# x86 backend has no vector exp and scalarises it again into four libm calls (~4 ms per 1e6
# elements here, against numpy's ~0.8 ms), and llvmlite's pass builder offers no way to set
# `-vector-library=LIBMVEC`. So we emit the vector calls ourselves: glibc's libmvec exports
# AVX2 variants named by the x86 vector ABI, `_ZGV` + `d` (AVX2) + `N` (unmasked) + lanes +
# one `v` per vector argument + `_` + the libm name, e.g. `_ZGVdN4vv_pow`, `_ZGVdN8v_expf`.

F32 = ir.FloatType()
F64 = ir.DoubleType()

# Ops with an LLVM intrinsic that the backend lowers well for scalars and vectors alike.
_NATIVE = {
    "sqrt": "llvm.sqrt", "fabs": "llvm.fabs", "floor": "llvm.floor", "ceil": "llvm.ceil",
    "trunc": "llvm.trunc", "rint": "llvm.rint", "round": "llvm.round",
    "copysign": "llvm.copysign", "fma": "llvm.fma",
    "fmin": "llvm.minnum", "fmax": "llvm.maxnum",  # NaN-ignoring, as np.fmin/np.fmax
    "minimum": "llvm.minimum", "maximum": "llvm.maximum",  # NaN-propagating, as np.minimum

}
# Ops with an LLVM intrinsic that is fine for scalars but scalarised for vectors.
_SCALAR_INTRINSIC = {
    "exp": "llvm.exp", "exp2": "llvm.exp2", "log": "llvm.log", "log2": "llvm.log2",
    "log10": "llvm.log10", "sin": "llvm.sin", "cos": "llvm.cos", "pow": "llvm.pow",
}
# libm functions with no LLVM intrinsic. Vectors of these (and of _SCALAR_INTRINSIC's) call
# libmvec where it exports the variant, which `_has_mvec` asks the library (glibc >= 2.35 has
# all but lgamma; 2.22 only exp/log/sin/cos/pow), else one scalar call per lane.
_LIBM = {
    "exp10", "expm1", "log1p", "tan", "sinh", "cosh", "tanh", "asin", "acos", "atan", "asinh",
    "acosh", "atanh", "erf", "erfc", "cbrt", "atan2", "hypot", "lgamma",
    "tgamma",  # (MT-safe in glibc, unlike lgamma: no signgam)
}
BINARY = frozenset({"pow", "atan2", "hypot", "copysign", "fmin", "fmax", "minimum", "maximum"})
TERNARY = frozenset({"fma"})
UNARY = frozenset((_NATIVE.keys() | _SCALAR_INTRINSIC.keys() | _LIBM) - BINARY - TERNARY)
_ALL = UNARY | BINARY | TERNARY

_MVEC_LIBRARY = "libmvec.so.1"
# llvmlite 0.50 knows no `memory(none)`; LLVM 20 upgrades `readnone` to it when parsing.
_PURE = ("nounwind", "readnone")


def float_type(dtype: str | ir.Type) -> ir.Type:
    """The LLVM scalar type for "f32"/"float32" or "f64"/"float64" (types pass through)."""
    if isinstance(dtype, ir.Type):
        return dtype
    if dtype in ("f32", "float32"):
        return F32
    if dtype in ("f64", "float64"):
        return F64
    raise ValueError(f"vmath handles float32 and float64 only, not {dtype!r}")


def vector_type(dtype: str | ir.Type, width: int) -> ir.Type:
    """`<width x dtype>`, or the scalar type itself when width == 1."""
    scalar = float_type(dtype)
    return scalar if width == 1 else ir.VectorType(scalar, width)


def splat(builder: ir.IRBuilder, value: ir.Value, width: int) -> ir.Value:
    """Broadcast a scalar to `<width x T>` (returns the scalar when width == 1)."""
    if width == 1:
        return value
    vec = ir.VectorType(value.type, width)
    one = builder.insert_element(ir.Constant(vec, ir.Undefined), value, ir.Constant(ir.IntType(32), 0))
    return builder.shuffle_vector(one, ir.Constant(vec, ir.Undefined),
                                  ir.Constant(ir.VectorType(ir.IntType(32), width), [0] * width))


@cache
def mvec_available(dtype: str | ir.Type = "f64") -> bool:
    """True when libmvec's AVX2 variants can be called on this host (AVX2 CPU and library)."""
    if not jit.has_host_features("avx2") or not jit.load_library(_MVEC_LIBRARY):
        return False
    import llvmlite.binding as llvm

    return bool(llvm.address_of_symbol(_mvec_symbol("exp", float_type(dtype))))


@cache
def _has_mvec(name: str, scalar: ir.Type) -> bool:
    """Whether libmvec exports the AVX2 variant of libm function `name` for `scalar`."""
    if not mvec_available(scalar):
        return False
    import llvmlite.binding as llvm

    return bool(llvm.address_of_symbol(_mvec_symbol(name, scalar)))


def vector_width(dtype: str | ir.Type) -> int:
    """Lanes per SIMD register for `dtype` on the host: 32-byte vectors with AVX, else 16."""
    nbytes = 32 if jit.has_host_features("avx") else 16
    return nbytes // (4 if float_type(dtype) == F32 else 8)


def _mvec_width(scalar: ir.Type) -> int:
    return 8 if scalar == F32 else 4


def _mvec_symbol(name: str, scalar: ir.Type) -> str:
    arity = 2 if name in BINARY else 1
    suffix = "f" if scalar == F32 else ""
    return f"_ZGVdN{_mvec_width(scalar)}{'v' * arity}_{name}{suffix}"


def _suffix(ty: ir.Type) -> str:
    if isinstance(ty, ir.VectorType):
        return f"v{ty.count}{ty.element.intrinsic_name}"
    return ty.intrinsic_name


def _declare(module: ir.Module, name: str, ret: ir.Type, nargs: int,
             attrs: tuple[str, ...] = _PURE) -> ir.Function:
    """Get or declare `ret name(ret, ...)` in `module`."""
    existing = module.globals.get(name)
    if existing is not None:
        return existing
    fn = ir.Function(module, ir.FunctionType(ret, [ret] * nargs), name=name)
    for attr in attrs:
        fn.attributes.add(attr)
    return fn


def _arity(name: str) -> int:
    return 3 if name in TERNARY else 2 if name in BINARY else 1


def _libm_name(name: str, scalar: ir.Type) -> str:
    return name + ("f" if scalar == F32 else "")


def _scalar_call(builder: ir.IRBuilder, name: str, args: list[ir.Value]) -> ir.Value:
    ty = args[0].type
    module = builder.module
    if name == "lgamma":
        return _lgamma_call(builder, args[0])
    intrinsic = _NATIVE.get(name) or _SCALAR_INTRINSIC.get(name)
    if intrinsic is not None:
        fn = _declare(module, f"{intrinsic}.{_suffix(ty)}", ty, len(args), attrs=())
    else:
        fn = _declare(module, _libm_name(name, ty), ty, len(args))
    return builder.call(fn, args)


def _lgamma_call(builder: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """lgamma(x) as `lgamma_r(x, &sign)`: plain lgamma writes the global `signgam`, a data race
    when kernels run on several threads."""
    ty = x.type
    name = _libm_name("lgamma", ty) + "_r"
    fn = builder.module.globals.get(name)
    if fn is None:
        i32p = ir.PointerType(ir.IntType(32))
        fn = ir.Function(builder.module, ir.FunctionType(ty, [ty, i32p]), name=name)
        fn.attributes.add("nounwind")
    with builder.goto_entry_block():
        sign = builder.alloca(ir.IntType(32), name="lgamma.sign")
    return builder.call(fn, [x, sign])


def _lanes(builder: ir.IRBuilder, vec: ir.Value, start: int, count: int) -> ir.Value:
    """Lanes [start, start+count) of `vec` as a `<count x T>` vector."""
    mask = ir.Constant(ir.VectorType(ir.IntType(32), count), list(range(start, start + count)))
    return builder.shuffle_vector(vec, ir.Constant(vec.type, ir.Undefined), mask)


def _concat(builder: ir.IRBuilder, parts: list[ir.Value]) -> ir.Value:
    """Concatenate equal-width vectors (pairwise shuffles, as LLVM's own concatenation does)."""
    while len(parts) > 1:
        width = parts[0].type.count
        mask = ir.Constant(ir.VectorType(ir.IntType(32), 2 * width), list(range(2 * width)))
        parts = [builder.shuffle_vector(parts[i], parts[i + 1], mask)
                 for i in range(0, len(parts), 2)]
    return parts[0]


def _per_lane(builder: ir.IRBuilder, name: str, args: list[ir.Value]) -> ir.Value:
    vec = args[0].type
    out = ir.Constant(vec, ir.Undefined)
    for lane in range(vec.count):
        idx = ir.Constant(ir.IntType(32), lane)
        value = _scalar_call(builder, name, [builder.extract_element(a, idx) for a in args])
        out = builder.insert_element(out, value, idx)
    return out


def _mvec_call(builder: ir.IRBuilder, name: str, args: list[ir.Value]) -> ir.Value:
    vec = args[0].type
    step = _mvec_width(vec.element)
    chunk_ty = ir.VectorType(vec.element, step)
    fn = _declare(builder.module, _mvec_symbol(name, vec.element), chunk_ty, len(args))
    if vec.count == step:
        return builder.call(fn, args)
    parts = [builder.call(fn, [_lanes(builder, a, start, step) for a in args])
             for start in range(0, vec.count, step)]
    return _concat(builder, parts)


def _use_mvec(name: str, vec: ir.VectorType) -> bool:
    step = _mvec_width(vec.element)
    count = vec.count // step
    return (vec.count % step == 0 and count & (count - 1) == 0
            and _has_mvec(name, vec.element))


def math_call(builder: ir.IRBuilder, name: str, *args: ir.Value) -> ir.Value:
    """Emit `name(*args)` on float32/float64 scalars or vectors; return the result value.

    Vectors of any width work: a width that is a power-of-two multiple of libmvec's (4 for
    f64, 8 for f32) is split into libmvec calls, anything else falls back to one scalar call
    per lane. Scalars (the remainder loop) use an LLVM intrinsic or libm. The function is
    declared in `builder.module` on first use.

    Args:
        builder: positioned where the call goes.
        name: a libm-style name from UNARY, BINARY or TERNARY ("exp", "pow", "fma", ...).
        *args: operands, all of one type (`float`, `double` or a vector of them).

    Raises:
        ValueError: unknown op, wrong number of operands, or mixed operand types.

    Example:
        >>> m = ir.Module(); v4 = vector_type("f64", 4)
        >>> f = ir.Function(m, ir.FunctionType(v4, [v4]), "f")
        >>> b = ir.IRBuilder(f.append_basic_block())
        >>> _ = b.ret(math_call(b, "exp", f.args[0]))
    """
    if name in SCIPY_SPECIAL:
        return special.call(builder, name, list(args))
    if name not in _ALL:
        raise ValueError(f"vmath has no op {name!r}; known: {sorted(_ALL)}")
    if len(args) != _arity(name):
        raise ValueError(f"{name} takes {_arity(name)} operand(s), got {len(args)}")
    ty = args[0].type
    if any(a.type != ty for a in args):
        raise ValueError(f"{name}: operands differ in type: {[str(a.type) for a in args]}")
    float_type(ty.element if isinstance(ty, ir.VectorType) else ty)
    args_list = list(args)
    if not isinstance(ty, ir.VectorType):
        return _scalar_call(builder, name, args_list)
    if name in _NATIVE:
        fn = _declare(builder.module, f"{_NATIVE[name]}.{_suffix(ty)}", ty, len(args), attrs=())
        return builder.call(fn, args_list)
    if _use_mvec(name, ty):
        return _mvec_call(builder, name, args_list)
    return _per_lane(builder, name, args_list)
