"""LAPACK (and BLAS trsm) from generated code: the routines of the library gemm calls
(blas.library(): numpy's OpenBLAS, else scipy's), so that compiled code and the user's numpy
calls share one library, with one thread pool, for all matrix work (Note [One BLAS, one thread
pool] in blas.py).

`emit_call` emits a call through an external symbol (registered with LLVM, so object code
holds no address and can be cached on disk); `query_work` asks a routine for its optimal
workspace size at compile time (lwork = -1), since shapes are static. Integers (arguments,
INFO, pivots, integer workspaces) have the library's width: `int_dtype()`, `info_slot`,
`load_int`. See Note [Calling LAPACK].
"""
from __future__ import annotations

import ctypes

import numpy as np
from llvmlite import ir

from . import blas
from .loops import I64, PTR, IndexLike

I8 = ir.IntType(8)


# Note [Calling LAPACK]
# The routines take every argument by pointer (Fortran), integers of the library's width
# (64-bit for numpy's ILP64 OpenBLAS, 32-bit for scipy's), and column-major matrices; a
# row-major n x n buffer read column-major is the transpose, which each lowering accounts for
# with flags (uplo, trans) or a transposed copy (codegen/lowerings/lapack.py).
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
_C_INT = {64: ctypes.c_int64, 32: ctypes.c_int32}


def address(name: str) -> int | None:
    """Address of routine `name` ("dpotrf", "strsm", ...) in blas.library(), or None."""
    return blas.blas_address(name)


def available(dtype: str = "f64") -> bool:
    return all(address(PREFIX[dtype] + r) is not None for r in SIGNATURES)


def int_dtype() -> np.dtype:
    """The dtype of the routines' integer arrays (pivots, integer workspace)."""
    return blas.library().int_dtype


def _function_type(routine: str) -> ir.FunctionType:
    sig = SIGNATURES[routine]
    return ir.FunctionType(ir.VoidType(), [PTR] * len(sig) + [I64] * sig.count("c"))


def emit_call(builder: ir.IRBuilder, dtype: str, routine: str, *args) -> None:
    """Call `<d|s><routine>` with `args` as its signature letters say: characters as str,
    integers as int or i64 values, floats as Python floats, pointers as IR pointers."""
    prefix = PREFIX[dtype]
    sig = SIGNATURES[routine]
    assert len(args) == len(sig), (routine, args)
    ptrs = []
    for kind, a in zip(sig, args):
        if kind == "c":
            ptrs.append(blas.slot(builder, I8, ir.Constant(I8, ord(a))))
        elif kind == "i":
            ptrs.append(blas.slot(builder, blas.library().int_type, blas.integer(builder, a)))
        elif kind == "f":
            ptrs.append(blas.slot(builder, _ELEM[prefix], ir.Constant(_ELEM[prefix], a)))
        else:
            ptrs.append(a)
    lengths = [ir.Constant(I64, 1)] * sig.count("c")
    builder.call(blas.declare(builder, prefix + routine, _function_type(routine)),
                 ptrs + lengths)


def info_slot(builder: ir.IRBuilder) -> ir.Value:
    """A stack slot (of the routines' integer type) for a routine's INFO result, set to 0."""
    ty = blas.library().int_type
    return blas.slot(builder, ty, ir.Constant(ty, 0))


def load_int(builder: ir.IRBuilder, ptr: ir.Value, i: IndexLike = 0) -> ir.Value:
    """Integer `i` of a routine's integer array (INFO, pivots), as an i64."""
    ty = blas.library().int_type
    value = builder.load(index(builder, ptr, i, ty), typ=ty)
    return value if ty == I64 else builder.sext(value, I64)


def query_work(dtype: str, routine: str, *args) -> list[int]:
    """Call `routine` now with `args` (ints, str, or "work"/"iwork" for the workspace outputs;
    the lwork/liwork arguments given as -1) and return the sizes it asks for, in order."""
    prefix = PREFIX[dtype]
    sig = SIGNATURES[routine]
    fn = ctypes.CFUNCTYPE(None, *([ctypes.c_void_p] * len(sig) + [ctypes.c_size_t] *
                                  sig.count("c")))(address(prefix + routine))
    c_int = _C_INT[blas.library().int_bits]
    keep, ptrs, answers = [], [], []
    for kind, a in zip(sig, args):
        if a in ("work", "iwork"):
            cell = (_C_ELEM[prefix] if a == "work" else c_int)(0)
            answers.append(cell)
        elif kind == "c":
            cell = ctypes.c_char(a.encode())
        elif kind == "f":
            cell = _C_ELEM[prefix](a)
        elif kind == "i":
            cell = c_int(a)
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
