"""Matrix products in generated code: BLAS gemm (numpy's OpenBLAS, else scipy's), or a plain
loop nest.

`library()` is the BLAS/LAPACK library generated code calls: numpy's own OpenBLAS when it has
every routine llgrad calls, else scipy's (Note [One BLAS, one thread pool]); `blas_address`
finds a routine in it; `emit_gemm` emits a call to gemm for row-major C = op(A) @ op(B);
`emit_loop_matmul` is the dependency-free loop nest, used for small products and whenever no
library is found; `emit_matmul` picks between them.
Invariant: all three compute the same row-major product over contiguous buffers.
See Note [Row-major gemm].
"""
from __future__ import annotations

import ctypes
import re
from dataclasses import dataclass
from functools import cache
from typing import Callable

import llvmlite.binding as llvm
import numpy as np
from llvmlite import ir

from . import once
from .loops import I64, PTR, IndexLike, const, elementwise, for_range, load, store
from .vmath import splat, vector_width

__all__ = [
    "Library", "library", "blas_address", "blas_available", "register_symbols", "emit_gemm",
    "emit_loop_matmul", "emit_matmul", "uses_blas", "BLAS_MIN_FLOPS",
]

I8 = ir.IntType(8)
# m*n*k below which the loop nest beats a BLAS call (call overhead, packing); measured
# roughly on this machine, see the codegen report.
BLAS_MIN_FLOPS = 40 ** 3

_GEMM = {"f64": ("dgemm", ir.DoubleType()), "f32": ("sgemm", ir.FloatType())}
# Every routine generated code may call (codegen/lapack.py's SIGNATURES, gemm): the library
# chosen must have them all, so that one library (one thread pool) serves every call.
ROUTINES = ("gemm", "trsm", "potrf", "getrf", "syevd", "gesdd", "geqrf", "orgqr")


# Note [One BLAS, one thread pool]
# numpy's manylinux wheels bundle OpenBLAS as numpy.libs/libscipy_openblas64_-<hash>.so
# (scipy-openblas64: every routine exported as `scipy_<name>_64_`, ILP64, i.e. 64-bit
# integer arguments), scipy's bundle their own (scipy.libs/libscipy_openblas-<hash>.so, LP64,
# `scipy_<name>_`). Each has its own thread pool, and two pools on the same cores fight:
# compiled cholesky and triangular solves on scipy's library, then the user's numpy matmul on
# numpy's, took a 0.9 ms Gaussian-process step to 130-680 ms on this 2-core machine (each
# pool's threads spin waiting for work while the other's run; benchmarks/blas_pools.py).
# So generated code calls numpy's library when it has every routine in ROUTINES (in both
# precisions), and scipy's only when it does not: never one library for gemm and another for
# LAPACK. Thread counts are the library's own, as for numpy's calls: OPENBLAS_NUM_THREADS
# when numpy is imported, or threadpoolctl's limits at run time (it sees the one library
# numpy loaded; we dlopen the same file, so the same handle). llgrad never changes them.
# The routines' integer width (`Library.int_bits`) goes to every integer argument, INFO and
# the pivot and integer workspace arrays (codegen/lapack.py). Generated code names a routine
# `llgrad_ilp64_<name>` or `llgrad_lp64_<name>`, registered with LLVM, so object code holds no
# address and says which interface it calls: cached code is loaded only in a process that has
# that interface (`register_symbols`), else compiled again.


@dataclass(frozen=True)
class Library:
    """The BLAS/LAPACK library generated code calls: `find(name)` -> address or None."""

    name: str                          # for messages: "numpy's OpenBLAS", ...
    int_bits: int                      # 64 (ILP64) or 32 (LP64)
    find: Callable[[str], int | None]  # "dgemm" -> the routine's address

    @property
    def int_type(self) -> ir.IntType:
        return ir.IntType(self.int_bits)

    @property
    def int_dtype(self) -> np.dtype:
        return np.dtype(np.int64 if self.int_bits == 64 else np.int32)

    def symbol(self, name: str) -> str:
        """The LLVM symbol generated code calls routine `name` through."""
        return f"llgrad_{'ilp64' if self.int_bits == 64 else 'lp64'}_{name}"

    def complete(self) -> bool:
        return all(self.find(p + r) is not None for p in "ds" for r in ROUTINES)


@cache
def library() -> Library | None:
    """numpy's OpenBLAS if it has every routine, else scipy's, else None (loop nests, and no
    LAPACK). See Note [One BLAS, one thread pool]."""
    candidates = [Library("numpy's OpenBLAS", 64, _numpy_openblas),
                  Library("scipy's OpenBLAS", 32, _scipy_routine)]
    for lib in candidates:
        if lib.complete():
            return lib
    return next((lib for lib in candidates if lib.find("dgemm") is not None), None)


@cache
def blas_address(name: str) -> int | None:
    """Address of routine `name` ("dgemm", "sgemm", "dpotrf", ...) in `library()`, or None.

    The routine has the Fortran convention: every argument by pointer, column-major arrays,
    integers of the library's width. Neither numpy's library nor scipy's wheel library needs
    scipy imported; scipy.linalg's exported pointers are the last resort.
    """
    with once.paid("libraries"):
        lib = library()
        return None if lib is None else lib.find(name)


def _numpy_openblas(name: str) -> int | None:
    """`scipy_<name>_64_` from the OpenBLAS in numpy's wheel, or None."""
    return _symbol(_bundled("numpy", "libscipy_openblas64_-*.so*"), f"scipy_{name}_64_")


def _scipy_routine(name: str) -> int | None:
    """`name` from scipy: its wheel's OpenBLAS, else scipy.linalg's exported pointers."""
    found = _wheel_openblas(name)
    if found is not None:
        return found
    lapack = name[1:] not in ("gemm", "trsm")
    return capsule_address("cython_lapack" if lapack else "cython_blas", name)


@cache
def _bundled(package: str, pattern: str) -> ctypes.CDLL | None:
    """The one library matching `pattern` in <site>/<package>.libs, opened, or None (none,
    several, or `package` not installed as a wheel)."""
    import glob
    import importlib.util
    import os
    try:
        spec = importlib.util.find_spec(package)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.origin:
        return None
    site = os.path.dirname(os.path.dirname(spec.origin))
    libs = sorted(glob.glob(os.path.join(site, f"{package}.libs", pattern)))
    if len(libs) != 1:
        return None
    try:
        return ctypes.CDLL(libs[0])
    except OSError:
        return None


def _symbol(lib: ctypes.CDLL | None, name: str) -> int | None:
    fn = getattr(lib, name, None) if lib is not None else None
    return None if fn is None else ctypes.cast(fn, ctypes.c_void_p).value


def capsule_address(module: str, name: str) -> int | None:
    """Address of `name` among the function pointers scipy.linalg.<module> exports
    (cython_blas or cython_lapack), or None."""
    import importlib
    try:
        mod = importlib.import_module(f"scipy.linalg.{module}")
    except ImportError:
        return None
    capsule = mod.__pyx_capi__.get(name)
    if capsule is None:
        return None
    get_name = ctypes.pythonapi.PyCapsule_GetName
    get_name.restype, get_name.argtypes = ctypes.c_char_p, [ctypes.py_object]
    get_pointer = ctypes.pythonapi.PyCapsule_GetPointer
    get_pointer.restype = ctypes.c_void_p
    get_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
    return get_pointer(capsule, get_name(capsule))


def _wheel_openblas(name: str) -> int | None:
    """`scipy_<name>_` from the OpenBLAS bundled in scipy's wheel, found without importing
    scipy (See Note [BLAS without importing scipy]); None when the layout is not the wheel's."""
    return _symbol(_bundled("scipy", "libscipy_openblas-*.so*"), f"scipy_{name}_")


# Note [BLAS without importing scipy]
# `from scipy.linalg import cython_blas` runs scipy.linalg's __init__ (~0.3 s here: array API
# shims, f2py), which the first compile of a model with a large matmul paid (gmm's first call).
# scipy's manylinux wheels bundle OpenBLAS as scipy.libs/libscipy_openblas-<hash>.so, with every
# BLAS routine exported under a `scipy_` prefix (LP64, Fortran convention, no hidden string
# lengths: the routines are C). cython_blas's `dgemm` is a thin wrapper over that same
# `scipy_dgemm_`, so calling it directly computes the same bits. We dlopen the library (the
# same handle scipy gets later) and look the symbol up; any other layout (conda, system BLAS,
# an unexpected file) falls back to cython_blas.


def register_symbols(llvm_ir: str) -> None:
    """Register the routines cached object code calls (named in its LLVM IR) with LLVM.

    Raises RuntimeError when this process lacks one in the interface the code was compiled
    for (then the code is compiled again: llgrad/cache.py)."""
    for bits, name in set(re.findall(r"llgrad_(ilp64|lp64)_(\w+)", llvm_ir)):
        find = _numpy_openblas if bits == "ilp64" else _scipy_routine
        address = find(name)
        if address is None:
            raise RuntimeError(f"compiled code calls {name} ({bits}), which is not available")
        llvm.add_symbol(f"llgrad_{bits}_{name}", address)


def declare(builder: ir.IRBuilder, name: str, fnty: ir.FunctionType) -> ir.Function:
    """The external function generated code calls routine `name` of `library()` through
    (registered with LLVM under `Library.symbol(name)`)."""
    lib, address = library(), blas_address(name)
    if address is None:
        raise RuntimeError(f"BLAS/LAPACK routine {name} is unavailable (neither numpy nor "
                           "scipy ships it here); install numpy's or scipy's wheel")
    symbol = lib.symbol(name)
    llvm.add_symbol(symbol, address)
    existing = builder.module.globals.get(symbol)
    return existing if existing is not None else ir.Function(builder.module, fnty, symbol)


def blas_available(dtype: str = "f64") -> bool:
    """True when a gemm for `dtype` ("f32"/"f64") can be called from generated code."""
    return blas_address(_GEMM[dtype][0]) is not None


# (transa, transb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc), all by pointer
_GEMM_TYPE = ir.FunctionType(ir.VoidType(), [PTR] * 13)


def _gemm_callee(builder: ir.IRBuilder, dtype: str, inline_address: bool) -> ir.Value:
    name = _GEMM[dtype][0]
    if inline_address:
        from .abi import callable_pointer  # abi imports loops only; no cycle, but keep blas light

        address = blas_address(name)
        if address is None:
            raise RuntimeError(f"{name} is unavailable; use emit_loop_matmul")
        return callable_pointer(builder, ir.Constant(I64, address), _GEMM_TYPE)
    return declare(builder, name, _GEMM_TYPE)


def slot(builder: ir.IRBuilder, ty: ir.Type, value: ir.Value, name: str = "") -> ir.Value:
    """An entry-block stack slot holding `value` (stored at the current position)."""
    with builder.goto_entry_block():
        at = builder.alloca(ty, name=name)
    builder.store(value, at)
    return at


def integer(builder: ir.IRBuilder, value: IndexLike) -> ir.Value:
    """`value` (an int or an i64) as an integer argument of `library()`'s routines."""
    ty = library().int_type
    if isinstance(value, int):
        return ir.Constant(ty, value)
    return value if value.type == ty else builder.trunc(value, ty)


# Note [Row-major gemm]
# BLAS is column-major; a row-major array X[r, c] read column-major is X^T with leading
# dimension c. So row-major C = op(A) @ op(B) is column-major C^T = op(B)^T @ op(A)^T: call
# gemm with the operands swapped, M = n, N = m, and each op's transpose flag kept (the
# stored array is read transposed, and we want the transpose of that, i.e. op itself read
# transposed). Leading dimensions are the stored row lengths.


def emit_gemm(builder: ir.IRBuilder, dtype: str, a: ir.Value, b: ir.Value, c: ir.Value,
              m: IndexLike, n: IndexLike, k: IndexLike, *, trans_a: bool = False,
              trans_b: bool = False, accumulate: bool = False,
              inline_address: bool = False) -> None:
    """Emit row-major `c[m, n] (+)= op(a)[m, k] @ op(b)[k, n]` as one BLAS gemm call.

    `op(x)` is `x.T` when `trans_x` (then `a` is stored [k, m], `b` stored [n, k]). With
    `accumulate`, the product is added to `c` (beta = 1). By default the routine is called
    through a named external symbol registered with `llvm.add_symbol`, so the object code
    holds no process-specific address (and can be cached on disk); `inline_address=True`
    bakes the address in as an `inttoptr` constant instead.
    """
    elem = _GEMM[dtype][1]
    fn = _gemm_callee(builder, dtype, inline_address)
    flag = {False: ord("N"), True: ord("T")}
    lda = k if not trans_a else m
    ldb = n if not trans_b else k
    it = library().int_type

    def int_arg(v, name):
        return slot(builder, it, integer(builder, v), name)
    args = [
        slot(builder, I8, ir.Constant(I8, flag[trans_b]), "transb"),
        slot(builder, I8, ir.Constant(I8, flag[trans_a]), "transa"),
        int_arg(n, "gemm.m"), int_arg(m, "gemm.n"), int_arg(k, "gemm.k"),
        slot(builder, elem, ir.Constant(elem, 1.0), "alpha"),
        b, int_arg(ldb, "ldb"),
        a, int_arg(lda, "lda"),
        slot(builder, elem, ir.Constant(elem, 1.0 if accumulate else 0.0), "beta"),
        c, int_arg(n, "ldc"),
    ]
    builder.call(fn, args)


def emit_loop_matmul(builder: ir.IRBuilder, dtype: str, a: ir.Value, b: ir.Value,
                     c: ir.Value, m: IndexLike, n: IndexLike, k: IndexLike, *,
                     trans_a: bool = False, trans_b: bool = False,
                     accumulate: bool = False) -> None:
    """Emit the same product as `emit_gemm` as an i-p-j loop nest (no BLAS needed).

    The innermost loop runs along rows of `c` (and of `b` unless `trans_b`), contiguous, and
    is emitted as explicit vector code (loops.py, Note [Explicit vector loops]), so the
    pipeline need not vectorise it; buffers should be `noalias` (abi.define_kernel). A
    product of static size of at least OUTLINE_MIN_FLOPS is one function per shape in the
    module, called here (Note [Outlined matmuls]).
    """
    if all(isinstance(d, int) for d in (m, n, k)) and m * n * k >= OUTLINE_MIN_FLOPS:
        fn = _outlined_matmul(builder.module, dtype, m, n, k, trans_a, trans_b, accumulate)
        builder.call(fn, [a, b, c])
    else:
        _loop_matmul(builder, dtype, a, b, c, m, n, k, trans_a, trans_b, accumulate)


# Note [Outlined matmuls]
# Small products (below BLAS_MIN_FLOPS) are loop nests. Emitted inline, every product pays
# LLVM again: a tanh RNN unrolled 10 times has 49 of them, ~25 ms of LLVM each at O3. They
# repeat a few shapes (forward, and each operand's gradient), so each shape is one internal
# `noinline` function of the module with `noalias` operands (a result never overlaps an
# operand: plan.py), optimised once however often it is called; a call costs nanoseconds
# next to a product of OUTLINE_MIN_FLOPS or more. Tinier products stay inline, where LLVM
# can keep them in registers.
OUTLINE_MIN_FLOPS = 64


# Note [Rows in registers]
# When a row of c fits in ROW_IN_REGISTERS vectors, the nest keeps it in registers across
# the p loop (one accumulator per vector, promoted from allocas by SROA): the code LLVM's
# unroller makes of the plain nest at O3, written out, so that O1 gives it too (one load of
# b's row and one multiply-add per vector per p; c is read and written once per row). The
# products are summed in the same order, p = 0, 1, ..., as the plain nest's. The p loop is
# written out straight-line only up to UNROLL_P multiply-adds a row: at 64 (k = 16 over a row
# of four vectors) the unrolled products were half of a small RNN's LLVM IR and ~10% of its
# first call, and the loop ran as fast (8x16x16 products: an RNN step with hidden 16 took
# the same time either way).
ROW_IN_REGISTERS = 16
UNROLL_P = 16  # multiply-adds per row written out straight-line (b's rows contiguous)


def _row_matmul(builder, elem, width, a, b, c, m, n, k, trans_a, trans_b, accumulate) -> None:
    """c[i, :] (+)= sum over p of a[i, p] * b[p, :], with c[i, :] held in registers (b's
    row gathered element by element when b is stored transposed)."""
    chunks = [(j, width) for j in range(0, n - n % width, width)]
    chunks += [(j, 1) for j in range(n - n % width, n)]
    types = [elem if w == 1 else ir.VectorType(elem, w) for _, w in chunks]
    unrolled = not trans_b and k * len(chunks) <= UNROLL_P  # straight-line over p, as O3 would
    if not unrolled:  # the row's accumulators across the p loop (SROA makes them registers)
        with builder.goto_entry_block():
            slots = [builder.alloca(t, name="mm.acc") for t in types]
    n_v, k_v, m_v = const(n), const(k), const(m)

    def products(i, p) -> list:
        """a[i, p] * b[p, chunk] for each chunk of the row."""
        a_idx = builder.add(builder.mul(p, m_v), i) if trans_a else \
            builder.add(builder.mul(i, k_v), p)
        a_ip = load(builder, a, a_idx, elem)
        row_b = p if trans_b else builder.mul(p, n_v)
        a_vec = splat(builder, a_ip, width) if any(w > 1 for _, w in chunks) else None
        out = []
        for (j, w), t in zip(chunks, types):
            if not trans_b:
                b_w = load(builder, b, builder.add(row_b, const(j)), elem, w)
            else:  # b[p, j + q] is stored at (j + q) * k + p
                b_w = ir.Constant(t, ir.Undefined) if w > 1 else None
                for q in range(w):
                    x = load(builder, b, builder.add(row_b, const((j + q) * k)), elem)
                    b_w = x if w == 1 else builder.insert_element(
                        b_w, x, ir.Constant(ir.IntType(32), q))
            out.append(builder.fmul(a_ip if w == 1 else a_vec, b_w))
        return out

    with for_range(builder, 0, m, name="mm.i") as i:
        row_c = builder.mul(i, n_v)
        accs = [load(builder, c, builder.add(row_c, const(j)), elem, w) if accumulate
                else ir.Constant(t, 0.0 if w == 1 else [0.0] * w)
                for (j, w), t in zip(chunks, types)]
        if unrolled:
            for p in range(k):
                accs = [builder.fadd(acc, prod) for acc, prod in zip(accs, products(i, const(p)))]
        else:
            for acc, slot in zip(accs, slots):
                builder.store(acc, slot)
            with for_range(builder, 0, k, name="mm.p") as p:
                for slot, prod in zip(slots, products(i, p)):
                    builder.store(builder.fadd(builder.load(slot), prod), slot)
            accs = [builder.load(slot) for slot in slots]
        for (j, _), acc in zip(chunks, accs):
            store(builder, acc, c, builder.add(row_c, const(j)))


def _outlined_matmul(module: ir.Module, dtype: str, m: int, n: int, k: int, trans_a: bool,
                     trans_b: bool, accumulate: bool) -> ir.Function:
    flags = ("t" if trans_a else "n") + ("t" if trans_b else "n") + ("a" if accumulate else "")
    name = f"llgrad.mm.{dtype}.{m}x{n}x{k}.{flags}"
    fn = module.globals.get(name)
    if fn is None:
        fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [PTR] * 3), name)
        fn.linkage = "internal"
        fn.attributes.add("noinline")
        fn.attributes.add("nounwind")
        for arg in fn.args:
            arg.add_attribute("noalias")
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        _loop_matmul(b, dtype, *fn.args, m, n, k, trans_a, trans_b, accumulate)
        b.ret_void()
    return fn


def _loop_matmul(builder, dtype, a, b, c, m, n, k, trans_a, trans_b, accumulate) -> None:
    elem = _GEMM[dtype][1]
    width = vector_width(dtype)
    if isinstance(n, int) and isinstance(k, int) and n <= ROW_IN_REGISTERS * width:
        _row_matmul(builder, elem, width, a, b, c, m, n, k, trans_a, trans_b, accumulate)
        return
    m_v, n_v, k_v = const(m), const(n), const(k)
    with for_range(builder, 0, m, name="mm.i") as i:
        row_c = builder.mul(i, n_v)
        if not accumulate:
            with for_range(builder, 0, n, name="mm.z") as j:
                store(builder, ir.Constant(elem, 0.0), c, builder.add(row_c, j))
        with for_range(builder, 0, k, name="mm.p") as p:
            a_idx = builder.add(builder.mul(p, m_v), i) if trans_a else \
                builder.add(builder.mul(i, k_v), p)
            a_ip = load(builder, a, a_idx, elem)

            def row(bld, j, w):
                b_idx = bld.add(bld.mul(j, k_v), p) if trans_b else bld.add(bld.mul(p, n_v), j)
                c_idx = bld.add(row_c, j)
                a_w = a_ip if w == 1 else splat(bld, a_ip, w)
                prod = bld.fmul(a_w, load(bld, b, b_idx, elem, w))
                store(bld, bld.fadd(load(bld, c, c_idx, elem, w), prod), c, c_idx)

            # c[i, :] += a[i, p] * b[p, :] as explicit vectors (b's row is contiguous unless
            # trans_b); the same products and sums per element as the scalar loop.
            width = 1 if trans_b else vector_width(dtype)
            elementwise(builder, n, width, row, name="mm.j")


def uses_blas(dtype: str, m: int, n: int, k: int) -> bool:
    """Whether `emit_matmul` calls BLAS for this product (else it emits the loop nest)."""
    return m * n * k >= BLAS_MIN_FLOPS and blas_available(dtype)


def emit_matmul(builder: ir.IRBuilder, dtype: str, a: ir.Value, b: ir.Value, c: ir.Value,
                m: int, n: int, k: int, *, trans_a: bool = False, trans_b: bool = False,
                accumulate: bool = False) -> str:
    """Emit `c (+)= op(a) @ op(b)` with BLAS when it is available and the product is large
    (m*n*k >= BLAS_MIN_FLOPS), else with the loop nest. Returns "blas" or "loops"."""
    use_blas = uses_blas(dtype, m, n, k)
    emit = emit_gemm if use_blas else emit_loop_matmul
    emit(builder, dtype, a, b, c, m, n, k, trans_a=trans_a, trans_b=trans_b,
         accumulate=accumulate)
    return "blas" if use_blas else "loops"
