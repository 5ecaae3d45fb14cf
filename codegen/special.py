"""scipy.special's own compiled functions, called from generated code: `call(builder, "i0", x)`
emits a call of the C function scipy's ufunc `i0` runs, so compiled values are scipy's bits.
See Note [scipy.special's C functions]. Only float64 operands (the primitives' scalar rules
compute in float64); a vector is one call per lane.
"""
from __future__ import annotations

import ctypes
import re
from functools import cache

import llvmlite.binding as llvm
from llvmlite import ir

from llgrad.runtime.ops._scalar import SCIPY_SPECIAL

# Note [scipy.special's C functions]
# scipy.special.cython_special exports each special function as a C function pointer in a
# PyCapsule (`__pyx_capi__`), the signature being the capsule's name, e.g. "double (double,
# int __pyx_skip_dispatch)" (the trailing int is Cython's dispatch flag for cpdef functions,
# ignored for module functions: we pass 0). A function with several types has one capsule
# per type, `__pyx_fuse_<k><name>`; we take the one whose signature is all doubles. Generated
# code calls `llgrad_scipy_<name>`, a symbol registered with LLVM at that address, so object
# code cached on disk holds no address of this process (`register_symbols` registers them
# again when it is loaded, as blas.register_symbols does for BLAS). The functions are
# scipy's ufunc loops' own kernels (cephes, xsf): thread-safe, and what numpy computes when
# eager mode calls the ufunc, so both paths agree to the bit.

_DOUBLE = ir.DoubleType()
_I32 = ir.IntType(32)


def _signature(arity: int) -> str:
    return "double (" + ", ".join(["double"] * arity) + ", int __pyx_skip_dispatch)"


@cache
def address(name: str) -> int:
    """The address of scipy's C function for special function `name` (all-double form)."""
    import scipy.special.cython_special as cs
    ctypes.pythonapi.PyCapsule_GetName.restype = ctypes.c_char_p
    ctypes.pythonapi.PyCapsule_GetName.argtypes = [ctypes.py_object]
    ctypes.pythonapi.PyCapsule_GetPointer.restype = ctypes.c_void_p
    ctypes.pythonapi.PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
    want = _signature(SCIPY_SPECIAL[name])
    capi = cs.__pyx_capi__
    for key in [name] + [f"__pyx_fuse_{k}{name}" for k in range(4)]:
        capsule = capi.get(key)
        if capsule is None:
            continue
        sig = ctypes.pythonapi.PyCapsule_GetName(capsule)
        if sig.decode() == want:
            return ctypes.pythonapi.PyCapsule_GetPointer(capsule, sig)
    raise RuntimeError(f"scipy.special.cython_special has no {want} form of {name}; this "
                       f"scipy ({_scipy_version()}) differs from the ones llgrad knows")


def _scipy_version() -> str:
    import scipy
    return scipy.__version__


def _symbol(name: str) -> str:
    return f"llgrad_scipy_{name}"


def register_symbols(llvm_ir: str) -> None:
    """Register the scipy.special functions cached object code calls (named in its IR)."""
    for name in set(re.findall(r"llgrad_scipy_(\w+)", llvm_ir)):
        llvm.add_symbol(_symbol(name), address(name))


def call(builder: ir.IRBuilder, name: str, args: list[ir.Value]) -> ir.Value:
    """Emit scipy's `name(*args)` on float64 scalars or vectors (one call per lane)."""
    ty = args[0].type
    if isinstance(ty, ir.VectorType):
        out = ir.Constant(ty, ir.Undefined)
        for lane in range(ty.count):
            idx = ir.Constant(_I32, lane)
            out = builder.insert_element(
                out, call(builder, name, [builder.extract_element(a, idx) for a in args]), idx)
        return out
    if ty != _DOUBLE:
        raise ValueError(f"scipy.special.{name} is called on float64 values only, not {ty}")
    symbol = _symbol(name)
    llvm.add_symbol(symbol, address(name))
    fn = builder.module.globals.get(symbol)
    if fn is None:
        fn = ir.Function(builder.module, ir.FunctionType(_DOUBLE, [_DOUBLE] * len(args) + [_I32]),
                         name=symbol)
        fn.attributes.add("nounwind")
    return builder.call(fn, [*args, ir.Constant(_I32, 0)])
