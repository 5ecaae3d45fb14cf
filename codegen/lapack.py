"""LAPACK (and BLAS trsm) from generated code: the routines scipy ships, found as blas.py finds
gemm (the OpenBLAS bundled in scipy's wheel, else scipy.linalg.cython_lapack's pointers), so
that compiled code calls one library, with one thread pool, for all its matrix work.

`emit_call` emits a call through an external symbol `llgrad_lapack_<routine>` (registered with
LLVM, so object code holds no address and can be cached on disk); `query_work` asks a routine
for its optimal workspace size at compile time (lwork = -1), since shapes are static.
See Note [Calling LAPACK].
"""
from __future__ import annotations

import ctypes
import re
from functools import cache

import llvmlite.binding as llvm
import numpy as np
from llvmlite import ir

from . import blas
from .loops import I64, PTR, IndexLike

I8, I32 = ir.IntType(8), ir.IntType(32)
INT = np.dtype(np.int32)  # LP64: the routines' integer arrays (pivots, integer workspace)


# Note [Calling LAPACK]
# The routines take every argument by pointer (Fortran), LP64 integers, and column-major
# matrices; a row-major n x n buffer read column-major is the transpose, which each lowering
# accounts for with flags (uplo, trans) or a transposed copy (codegen/lowerings/lapack.py).
# LAPACK routines compiled from Fortran also take one hidden length per CHARACTER argument,
# after the others; we pass them (1 each): omitting them, as C callers often do, is what breaks
# when gfortran turns a call inside the routine into a sibling call that forwards them. For
# routines written in C (OpenBLAS's potrf, getrf, trsm) the extra arguments are ignored.
# Each routine's arguments are described by a string, one letter per argument: c a character,
# i an integer, f a float of the routine's precision, p a pointer (array or output).
SIGNATURES = {
    "potrf": "cipip",            # uplo n a lda info
    "getrf": "iipipp",           # m n a lda ipiv info
    "trsm": "cccciifpipi",       # side uplo transa diag m n alpha a lda b ldb
    "syevd": "ccipippipip",      # jobz uplo n a lda w work lwork iwork liwork info
    "gesdd": "ciipippipipipp",   # jobz m n a lda s u ldu vt ldvt work lwork iwork info
    "geqrf": "iipippip",         # m n a lda tau work lwork info
    "orgqr": "iiipippip",        # m n k a lda tau work lwork info
}
PREFIX = {"f64": "d", "f32": "s"}
_ELEM = {"d": ir.DoubleType(), "s": ir.FloatType()}
_C_ELEM = {"d": ctypes.c_double, "s": ctypes.c_float}


@cache
def address(name: str) -> int | None:
    """Address of routine `name` ("dpotrf", "strsm", ...) from scipy, or None."""
    found = blas._wheel_openblas(name)  # the same library as gemm's
    if found is not None:
        return found
    return blas.capsule_address("cython_blas" if name.endswith("trsm") else "cython_lapack",
                                name)


def available(dtype: str = "f64") -> bool:
    return all(address(PREFIX[dtype] + r) is not None for r in SIGNATURES)


def _function_type(routine: str) -> ir.FunctionType:
    sig = SIGNATURES[routine]
    return ir.FunctionType(ir.VoidType(), [PTR] * len(sig) + [I64] * sig.count("c"))


def _callee(builder: ir.IRBuilder, name: str) -> ir.Function:
    if address(name) is None:
        raise RuntimeError(f"LAPACK routine {name} is unavailable (scipy is not installed "
                           "or ships no LAPACK); install scipy")
    symbol = f"llgrad_lapack_{name}"
    llvm.add_symbol(symbol, address(name))
    existing = builder.module.globals.get(symbol)
    return existing if existing is not None else ir.Function(
        builder.module, _function_type(name[1:]), symbol)


def register_symbols(llvm_ir: str) -> None:
    """Register the routines cached object code calls (named in its LLVM IR) with LLVM."""
    for name in set(re.findall(r"llgrad_lapack_(\w+)", llvm_ir)):
        llvm.add_symbol(f"llgrad_lapack_{name}", address(name))


def _slot(builder: ir.IRBuilder, ty: ir.Type, value: ir.Value) -> ir.Value:
    with builder.goto_entry_block():
        slot = builder.alloca(ty)
    builder.store(value, slot)
    return slot


def emit_call(builder: ir.IRBuilder, dtype: str, routine: str, *args) -> None:
    """Call `<d|s><routine>` with `args` as its signature letters say: characters as str,
    integers as int or i64 values, floats as Python floats, pointers as IR pointers."""
    prefix = PREFIX[dtype]
    sig = SIGNATURES[routine]
    assert len(args) == len(sig), (routine, args)
    ptrs = []
    for kind, a in zip(sig, args):
        if kind == "c":
            ptrs.append(_slot(builder, I8, ir.Constant(I8, ord(a))))
        elif kind == "i":
            v = ir.Constant(I32, a) if isinstance(a, int) else builder.trunc(a, I32)
            ptrs.append(_slot(builder, I32, v))
        elif kind == "f":
            ptrs.append(_slot(builder, _ELEM[prefix], ir.Constant(_ELEM[prefix], a)))
        else:
            ptrs.append(a)
    lengths = [ir.Constant(I64, 1)] * sig.count("c")
    builder.call(_callee(builder, prefix + routine), ptrs + lengths)


def info_slot(builder: ir.IRBuilder) -> ir.Value:
    """An i32 stack slot for a routine's INFO result, set to 0."""
    return _slot(builder, I32, ir.Constant(I32, 0))


def load_int(builder: ir.IRBuilder, ptr: ir.Value, i: IndexLike = 0) -> ir.Value:
    """Integer `i` of a routine's integer array (INFO, pivots), as an i64."""
    return builder.sext(builder.load(index(builder, ptr, i, I32), typ=I32), I64)


def query_work(dtype: str, routine: str, *args) -> list[int]:
    """Call `routine` now with `args` (ints, str, or "work"/"iwork" for the workspace outputs;
    the lwork/liwork arguments given as -1) and return the sizes it asks for, in order."""
    prefix = PREFIX[dtype]
    sig = SIGNATURES[routine]
    fn = ctypes.CFUNCTYPE(None, *([ctypes.c_void_p] * len(sig) + [ctypes.c_size_t] *
                                  sig.count("c")))(address(prefix + routine))
    keep, ptrs, answers = [], [], []
    for kind, a in zip(sig, args):
        if a in ("work", "iwork"):
            cell = (_C_ELEM[prefix] if a == "work" else ctypes.c_int32)(0)
            answers.append(cell)
        elif kind == "c":
            cell = ctypes.c_char(a.encode())
        elif kind == "f":
            cell = _C_ELEM[prefix](a)
        elif kind == "i":
            cell = ctypes.c_int32(a)
        else:  # an array the query does not touch
            cell = (_C_ELEM[prefix] * 1)()
        keep.append(cell)
        ptrs.append(ctypes.addressof(cell))
    fn(*ptrs, *([1] * sig.count("c")))
    return [max(1, int(c.value)) for c in answers]


def index(builder: ir.IRBuilder, base: ir.Value, offset: IndexLike, elem: ir.Type) -> ir.Value:
    """&base[offset] for elements of type `elem`."""
    off = ir.Constant(I64, offset) if isinstance(offset, int) else offset
    return builder.gep(base, [off], inbounds=True, source_etype=elem)
