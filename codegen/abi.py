"""The calling convention of compiled kernels, and the cheap way to call them from Python.

Every kernel is `i64 name(ptr %buffers)`: `buffers` points to an array of data pointers, one
per argument, result and workspace, in the order the lowering chose (scalars travel as 0-d
arrays); it returns 0, or the status of the failure that stopped it (Note [Native errors]
in native_errors.py). One ctypes prototype therefore calls any signature. `define_kernel`
builds that entry around an internal body whose parameters are `noalias` buffer pointers;
`Kernel` calls a compiled entry on numpy arrays. See Note [Calling without ndarray.ctypes].
"""
from __future__ import annotations

import ctypes
import functools
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import numpy as np
from llvmlite import ir

from . import jit, once
from .loops import I64, PTR, for_range
from .native_errors import define_sigint_handler

__all__ = [
    "ENTRY_TYPE", "ALIGN", "TAPE_HEADER", "define_kernel", "Kernel", "callable_pointer",
    "pointer_array", "fast_path_available", "support_address", "support_tag", "define_support",
    "support_ready", "adopt_support",
]

ENTRY_TYPE = ir.FunctionType(I64, [PTR])
# The workspace buffer starts on a 64-byte boundary (a cache line), and so does every temporary
# the planner places in it (plan.py) and every constant global (compile.py). Kernels assume
# only element alignment for their loads and stores (loops.py); this is for the cache.
ALIGN = 64
# Each loop tape keeps {data pointer, rows allocated} (2 x i64) in the workspace, just before
# the error record, so its buffer outlives the call (Note [Tapes in codegen] in plan.py).
TAPE_HEADER = 16
_ENTRY_CFUNC = ctypes.CFUNCTYPE(ctypes.c_int64, ctypes.c_void_p)
_TRAMPOLINE_CFUNC = ctypes.CFUNCTYPE(ctypes.c_int64, ctypes.c_void_p, ctypes.py_object)


@contextmanager
def define_kernel(module: ir.Module, name: str, n_buffers: int, noalias: bool = True,
                  flush_subnormals: bool = False,
                  ) -> Iterator[tuple[ir.IRBuilder, list[ir.Value]]]:
    """Define kernel `name` in `module`; yield a builder and the buffer pointers for the body.

    The body goes into an internal function `i64 <name>.body(ptr noalias %b0, ...)` (inlined
    by the pipeline into the entry, which keeps the no-alias facts as scoped metadata); on
    exit the body's `ret i64 0` (success) and the `i64 name(ptr)` entry that unpacks the
    pointer array and returns the body's status are emitted.
    Pass `noalias=False` when two buffers may overlap (in-place updates), and
    `flush_subnormals=True` to run the body with subnormal numbers flushed to zero (Note
    [Subnormals in gradient code]).

    Example (y = 2 * x over 100 doubles)::

        with define_kernel(module, "scale", 2) as (b, (x, y)):
            with for_range(b, 0, 100) as i:
                store(b, b.fmul(load(b, x, i, F64), ir.Constant(F64, 2.0)), y, i)
        kernel = Kernel(compile_module(str(module), ["scale"])["scale"], 2)
        kernel(x_array, y_array)
    """
    body_ty = ir.FunctionType(I64, [PTR] * n_buffers)
    body = ir.Function(module, body_ty, name=f"{name}.body")
    body.linkage = "internal"
    for i, arg in enumerate(body.args):
        arg.name = f"b{i}"
        if noalias:
            arg.add_attribute("noalias")
    builder = ir.IRBuilder(body.append_basic_block("entry"))
    yield builder, list(body.args)
    builder.ret(ir.Constant(I64, 0))

    entry = ir.Function(module, ENTRY_TYPE, name=name)
    entry.args[0].name = "buffers"
    eb = ir.IRBuilder(entry.append_basic_block("entry"))
    ptrs = [eb.load(eb.gep(entry.args[0], [ir.Constant(I64, i)], inbounds=True,
                           source_etype=PTR), typ=PTR, name=f"b{i}")
            for i in range(n_buffers)]
    if flush_subnormals and jit.get_jit().target.triple.startswith("x86_64"):
        eb.ret(_with_flushed_subnormals(module, eb, lambda: eb.call(body, ptrs)))
    else:
        eb.ret(eb.call(body, ptrs))


# Note [Subnormals in gradient code]
# A reverse sweep through a contracting recurrence (`s = 0.9 * s + ...`, a discounted return,
# a decaying RNN state) multiplies its cotangent by 0.9 at every step: after ~6,700 steps it
# is subnormal (below 2.2e-308), and 0.9 times the smallest subnormal rounds back to it, so
# every later step computes on a subnormal, which x86 cores handle in microcode (~150 cycles
# an operation): recurrence's gradient at n = 1e5 took 22 ms instead of 2.2 ms. So the
# entries that compute gradients ("joint", and every entry but "forward") run with MXCSR's
# flush-to-zero and denormals-are-zero bits set, restored on return (on every path: the body
# returns its status to the entry), as XLA runs all CPU code (and PyTorch offers with
# set_flush_denormal). What changes: a result below 2.2e-308 is 0 there, and so is a product
# with such a factor: the value value_and_grad returns can differ from f(x)'s (the forward
# entry keeps IEEE subnormals, as numpy does), and a gradient entry, by about 2.2e-308 times
# the other factors. Worker threads (codegen/threads.py) keep their mode.
_FTZ_DAZ = 0x8040  # MXCSR bits 15 (flush to zero) and 6 (denormals are zero)


def _with_flushed_subnormals(module: ir.Module, b: ir.IRBuilder, run):
    """`run()` (emitting a call) between setting MXCSR's FTZ and DAZ bits and restoring it."""
    fnty = ir.FunctionType(ir.VoidType(), [PTR])
    get = module.globals.get("llvm.x86.sse.stmxcsr") or ir.Function(
        module, fnty, "llvm.x86.sse.stmxcsr")
    put = module.globals.get("llvm.x86.sse.ldmxcsr") or ir.Function(
        module, fnty, "llvm.x86.sse.ldmxcsr")
    saved = b.alloca(ir.IntType(32), name="mxcsr")
    flushed = b.alloca(ir.IntType(32), name="mxcsr.flushed")
    b.call(get, [saved])
    b.store(b.or_(b.load(saved), ir.Constant(ir.IntType(32), _FTZ_DAZ)), flushed)
    b.call(put, [flushed])
    status = run()
    b.call(put, [saved])
    return status


def callable_pointer(builder: ir.IRBuilder, pointer: ir.Value, fnty: ir.FunctionType,
                     ) -> ir.Value:
    """View an opaque `ptr` (or an i64 address) as something `builder.call` accepts.

    llvmlite's `call` reads the signature from the callee's pointee type, which opaque
    pointers lack; a cast to the (typed) function pointer type supplies it. LLVM sees `ptr`.
    """
    typed = ir.PointerType(fnty)
    if isinstance(pointer.type, ir.IntType):
        return builder.inttoptr(pointer, typed)
    # builder.bitcast would return `pointer` unchanged: llvmlite's pointer types compare equal
    # regardless of pointee, so we build the (no-op) cast instruction ourselves.
    cast = ir.instructions.CastInstr(builder.block, "bitcast", pointer, typed)
    builder._insert(cast)  # noqa: SLF001 - the public path drops the cast, see above
    return cast


def pointer_array(arrays: Sequence[np.ndarray]) -> ctypes.Array:
    """A `void*[n]` holding each array's data pointer (the portable, slower path)."""
    return (ctypes.c_void_p * len(arrays))(*[a.ctypes.data for a in arrays])


# Note [Calling without ndarray.ctypes]
# `a.ctypes.data` costs ~1.4 us per array here (it builds a helper object each time), so
# filling a pointer array from Python for five buffers costs ~8 us. Instead one small native
# trampoline, `llgrad_call_arrays(fn, tuple)`, reads the data pointers itself: it takes the
# tuple of arrays as a PyObject*, reads its length and items at the offsets of CPython's
# PyTupleObject, reads each PyArrayObject's `data` field (the first field after the object
# header, stable since numpy 1.7 and in numpy 2), fills an alloca'd pointer array and calls
# `fn`, returning its status. The offsets come from `object.__basicsize__` and
# `tuple.__basicsize__` and are checked against ctypes once; if the check fails (an unusual
# interpreter build) we fall back to `pointer_array`. The tuple keeps the arrays alive during
# the call; ctypes releases the GIL. Every element must be an `np.ndarray` (or subclass):
# `Kernel.__call__` checks, `call_unchecked` does not. The trampoline and the SIGINT hook
# (Note [Interrupting compiled loops]) are the support functions, compiled into kernel
# modules (Note [Support functions in kernel modules]).

_setup_lock = threading.Lock()
_trampoline: ctypes._CFuncPtr | None = None
_fast_path: bool | None = None
_support: dict[str, int] = {}  # name -> address of the support module's functions


def _offsets() -> tuple[int, int, int]:
    """(tuple length offset, tuple items offset, ndarray data offset) for this interpreter."""
    header = object.__basicsize__
    return header, tuple.__basicsize__, header


def _offsets_hold() -> bool:
    size_off, items_off, data_off = _offsets()
    probe = (np.arange(3.0), np.zeros((2, 2), np.float32))
    tid = id(probe)
    return (ctypes.c_ssize_t.from_address(tid + size_off).value == len(probe)
            and all(ctypes.c_void_p.from_address(tid + items_off + 8 * i).value == id(a)
                    and ctypes.c_void_p.from_address(id(a) + data_off).value == a.ctypes.data
                    for i, a in enumerate(probe)))


def _support_ir(trampoline: bool) -> str:
    module = ir.Module(name="llgrad_abi")
    define_sigint_handler(module, "llgrad_on_sigint")
    if trampoline:
        _define_trampoline(module, "llgrad_call_arrays")
    return str(module)


@functools.cache
def support_tag() -> str:
    """What the support functions' code depends on besides llgrad's version: the
    interpreter's object layout (Note [Calling without ndarray.ctypes]). Part of the disk
    cache's key, since every stored module carries the support functions."""
    return f"support:{_offsets()}:{_offsets_hold()}"


def define_support(module: ir.Module, prefix: str) -> dict[str, str]:
    """Add the support functions (SIGINT hook; the trampoline where the interpreter allows)
    to a kernel module under `prefix`; returns {support name: symbol} (Note [Support
    functions in kernel modules])."""
    names = {"llgrad_on_sigint": prefix + "on_sigint"}
    define_sigint_handler(module, names["llgrad_on_sigint"])
    if _offsets_hold():
        names["llgrad_call_arrays"] = prefix + "call_arrays"
        _define_trampoline(module, names["llgrad_call_arrays"])
    return names


def support_ready() -> bool:
    """Whether this process has its support functions (and knows about the trampoline)."""
    return _fast_path is not None


def adopt_support(addresses: dict[str, int]) -> None:
    """Use the support functions of a just loaded kernel module ({support name: address}),
    unless this process has them already."""
    global _fast_path, _trampoline
    with _setup_lock:
        if _fast_path is None:
            _support.update(addresses)
            fast = "llgrad_call_arrays" in addresses
            if fast:
                _trampoline = _TRAMPOLINE_CFUNC(addresses["llgrad_call_arrays"])
            _fast_path = fast


# Note [Support functions in kernel modules]
# The support functions (the calling trampoline and the SIGINT hook) were a module of their
# own, compiled once per process: ~5 ms of LLVM's fixed costs per module in every process's
# first compile, and on a warm start a second disk entry to read and a second object to load
# (~2 ms of ~8). Instead the first module a process compiles carries them (under its own
# symbol prefix), and so does every module stored in the disk cache, so any stored module
# can be the first one a process loads; the process adopts the first set it gets. Their code
# depends on the interpreter's object layout, which is therefore part of the cache key
# (`support_tag`). `fast_path_available` still compiles them alone for kernels made outside
# `compile_functions` (e.g. by hand in tests).


def _define_trampoline(module: ir.Module, name: str) -> None:
    size_off, items_off, data_off = _offsets()
    fn = ir.Function(module, ir.FunctionType(I64, [PTR, PTR]), name)
    fn.attributes.add("optsize")  # Note [The trampoline is not vectorised]
    target, tup = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    i8 = ir.IntType(8)

    def field(base: ir.Value, offset: ir.Value | int, ty: ir.Type) -> ir.Value:
        off = ir.Constant(I64, offset) if isinstance(offset, int) else offset
        return b.load(b.gep(base, [off], inbounds=True, source_etype=i8), typ=ty)

    n = field(tup, size_off, I64)
    buffers = b.alloca(PTR, size=n, name="buffers")
    with for_range(b, 0, n) as i:
        item_off = b.add(ir.Constant(I64, items_off), b.mul(i, ir.Constant(I64, 8)))
        array = field(tup, item_off, PTR)
        data = field(array, data_off, PTR)
        b.store(data, b.gep(buffers, [i], inbounds=True, source_etype=PTR))
    b.ret(b.call(callable_pointer(b, target, ENTRY_TYPE), [buffers]))


def fast_path_available() -> bool:
    """True when kernels are called through the native trampoline (see the Note above).

    The support functions come with the first module a process compiles or loads (Note
    [Support functions in kernel modules]); before that, the first call compiles them as a
    module of their own.
    """
    global _fast_path, _trampoline
    if _fast_path is None:
        with _setup_lock:
            if _fast_path is None:
                fast = _offsets_hold()
                names = ["llgrad_on_sigint"] + (["llgrad_call_arrays"] if fast else [])
                with once.paid("support module"):  # See Note [The support module unoptimised]
                    _support.update(jit.compile_module(_support_ir(fast), names,
                                                       opt_level=0))
                if fast:
                    _trampoline = _TRAMPOLINE_CFUNC(_support["llgrad_call_arrays"])
                _fast_path = fast
    return _fast_path


# Note [The trampoline is not vectorised]
# In a kernel module (Note [Support functions in kernel modules]) the trampoline goes through
# the module's O2 pipeline, whose loop vectoriser turned its loop over a handful of arrays
# into AVX-512 gathers: ~4 ms of pipeline and more machine code in every process's first
# compile (a logistic regression's whole joint module took ~25 ms of O2). `optsize` keeps
# the loop scalar (LLVM does not vectorise or unroll for size): the same few loads a call.

# Note [The support module unoptimised]
# The support module's IR is already what LLVM's pipeline would make of it (a phi loop of
# loads and stores, a chained call), and its assembly is the same at O0 and O1; the O1
# pipeline cost ~4 ms of every process's first compile (a third of the support module's
# cost: the rest is the machine-code pass, much of it LLVM's one-time set-up, which the first
# kernel would pay otherwise). So it gets the light pipeline (level 0, jit.py, Note [The
# light pipeline]: ~0.3 ms here); the backend still optimises.


def support_address(name: str) -> int:
    """The address of a support-module function (e.g. "llgrad_on_sigint")."""
    fast_path_available()
    return _support[name]


class Kernel:
    """A compiled `i64(void**)` entry, callable on numpy arrays.

    `kernel(*arrays)` passes each array's data pointer, in order, and returns the kernel's
    status (0: success; see Note [Native errors]); arrays must be contiguous
    with the dtype and shape the kernel was compiled for (the caller's signature check
    guarantees it; nothing is checked here but the type). Thread safe: nothing is shared
    between calls.
    """

    __slots__ = ("address", "n_buffers", "name", "_entry", "_call")

    def __init__(self, address: int, n_buffers: int, name: str = "kernel") -> None:
        self.address = address
        self.n_buffers = n_buffers
        self.name = name
        self._entry = _ENTRY_CFUNC(address)
        if fast_path_available():
            self._call = functools.partial(_trampoline, address)
        else:
            entry = self._entry
            self._call = lambda arrays: entry(pointer_array(arrays))

    def __call__(self, *arrays: np.ndarray) -> int:
        if len(arrays) != self.n_buffers:
            raise TypeError(f"{self.name} takes {self.n_buffers} buffers, got {len(arrays)}")
        for a in arrays:
            if not isinstance(a, np.ndarray):
                raise TypeError(f"{self.name}: buffers must be numpy arrays, got {type(a)}")
        return self._call(arrays)

    def call_unchecked(self, arrays: tuple[np.ndarray, ...]) -> int:
        """Call with a tuple of exactly `n_buffers` ndarrays; no checks (the hot path)."""
        return self._call(arrays)

    def call_pointers(self, pointers: ctypes.Array) -> int:
        """Call the raw entry with a prepared `void*[n]` (see `pointer_array`)."""
        return self._entry(pointers)

    def __repr__(self) -> str:
        return f"<Kernel {self.name} at {self.address:#x}, {self.n_buffers} buffers>"
