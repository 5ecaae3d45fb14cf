"""A compiled module as Python sees it: `CompiledModule[name](*arrays) -> list[ndarray]`.

What `compile_functions` (compile.py) returns, and what `load_object` rebuilds from cached
object code. Kept apart from compile.py so that loading a cached module imports neither the
lowering nor the planner (issue 6: start-up with a warm disk cache).
Results are fresh arrays per call; temporaries and loop tapes live in one workspace per entry
and thread (Note [Workspaces]).
"""
from __future__ import annotations

import ctypes
import threading
import weakref

import numpy as np

from llgrad.runtime.errors import ShapeError

from . import abi, jit, native_errors


class Entry:
    """One compiled function: checks/coerces arguments, allocates results, calls the kernel,
    and raises the error a kernel that stopped reports (Note [Native errors])."""

    __slots__ = ("name", "kernel", "in_avals", "out_avals", "module", "sites", "record",
                 "tapes", "_polls", "_call", "_tls", "_one_out")

    def __init__(self, name, kernel, in_avals, out_avals, module, sites=(), record=0, tapes=0):
        self.name, self.kernel, self.module = name, kernel, module
        self.in_avals, self.out_avals = in_avals, out_avals
        self.sites, self.record, self.tapes = list(sites), record, tapes
        self._polls = any(s.kind == "interrupt" for s in self.sites)
        self._call = kernel._call  # the native trampoline, bound to the kernel's address
        self._tls = threading.local()  # .ws: this thread's workspace
        self._one_out = out_avals[0] if len(out_avals) == 1 else None

    def __call__(self, *args) -> list[np.ndarray]:
        # See Note [Per-call overhead].
        if len(args) != len(self.in_avals):
            raise TypeError(f"{self.name} takes {len(self.in_avals)} arrays, got {len(args)}")
        for a, (shape, dt) in zip(args, self.in_avals):
            if a.__class__ is not np.ndarray or a.dtype is not dt or a.shape != shape or \
                    not a.flags.c_contiguous:
                args = self._coerce(args)
                break
        return self.run(args)

    def run(self, args) -> list[np.ndarray]:
        """Call on a sequence of C-contiguous ndarrays with the layouts of `in_avals`
        (unchecked: the caller has checked, as `__call__` and llgrad's fast path do)."""
        one = self._one_out
        outs = [np.empty(one[0], one[1])] if one is not None else \
            [np.empty(s, d) for s, d in self.out_avals]
        try:
            ws = self._tls.ws
        except AttributeError:
            ws = self.workspace()
        if self._polls:
            native_errors.watch_interrupts()
        status = self._call((*args, *outs, ws))
        if status:
            return self._failed(status, args, ws)
        return outs

    def workspace(self) -> np.ndarray:
        """This thread's workspace (zeroed at first): the temporaries, then the tape headers,
        then the error record (Note [Native errors]); see Note [Workspaces]."""
        ws = getattr(self._tls, "ws", None)
        if ws is None:
            size = self.record + 8
            raw = np.zeros(size + abi.ALIGN, np.uint8)
            start = -raw.ctypes.data % abi.ALIGN
            ws = self._tls.ws = raw[start:start + size]
            if self.tapes:
                heads = ws[self.record - abi.TAPE_HEADER * self.tapes:self.record]
                weakref.finalize(ws, _free_tapes, heads.view(np.uintp))
        return ws

    def _failed(self, status: int, args, ws: np.ndarray) -> list[np.ndarray]:
        value = int(ws[self.record:self.record + 8].view(np.int64)[0])
        native_errors.raise_for(self.sites[status - 1], value)
        return self.run(args)  # an interrupt whose handlers returned: run the call again

    def _coerce(self, args) -> tuple:
        out = []
        for i, (a, (shape, dt)) in enumerate(zip(args, self.in_avals)):
            arr = np.asarray(a, dtype=dt, order="C")  # keeps 0-d (ascontiguousarray does not)
            if arr.shape != shape:
                raise ShapeError(f"{self.name}: argument {i} has shape {list(arr.shape)}, but "
                                 f"this entry was compiled for {list(shape)}")
            out.append(arr)
        return tuple(out)

    def __repr__(self) -> str:
        return f"<compiled entry {self.name}: {len(self.in_avals)} in, {len(self.out_avals)} out>"


# Note [Per-call overhead]
# A call checks each argument's class, dtype (identity: numpy's builtin dtypes are singletons),
# shape and contiguity (~0.2 us for one argument; `run` skips this for callers that know),
# allocates the results with np.empty and hands one tuple to the native trampoline (abi.py,
# Note [Calling without ndarray.ctypes]; ~0.27 us through ctypes), which reads the data
# pointers itself; the kernel's status is one int test (Note [Native errors]; ~30 ns more for
# an entry that polls for Ctrl-C). Anything unusual (lists, other dtypes, strided arrays)
# takes the slow path, np.asarray. The workspace is per thread (threading.local), so no lock
# is taken.


# Note [Workspaces]
# Each entry has one workspace per thread (threading.local: calls from several threads share
# no scratch memory and take no lock), made at the thread's first call and kept: the planner's
# temporaries, the loop tapes' headers and the error record. A tape's buffer is malloc'd by the
# kernel and kept in its header from call to call (Note [Tapes in codegen] in plan.py), so a
# call reuses the memory the last one faulted in. Malloc'ing and freeing tapes per call made
# glibc return them to the OS at every call (freed at the top of the heap, above its trim
# threshold: twice its dynamic mmap threshold): the recurrence benchmark (two 800 KB tapes)
# paid ~360 page faults a call, 1.8 ms instead of 1.3 ms, depending on what the process had
# freed before. The buffers are freed when the workspace goes (its thread ends, or the
# module is dropped), by a finalizer holding the headers.

_free = ctypes.CDLL(None).free  # the free() of the malloc the kernels' realloc calls use
_free.argtypes, _free.restype = [ctypes.c_void_p], None


def _free_tapes(heads: np.ndarray) -> None:
    """Free the tape buffers in `heads` ({data, capacity} pairs of a dead workspace)."""
    for data in heads[0::2].tolist():
        if data:
            _free(data)


class CompiledModule:
    """The native code of several IR functions compiled together.

    `m[name](*arrays)` runs entry `name` and returns its results as a list of new arrays.
    Thread safe: each thread gets its own workspaces (Note [Workspaces]).
    Attributes: `llvm_ir` (as emitted), `optimized_ir`, `asm` (computed on first access),
    `stats` (op counts, workspace bytes, compile seconds per stage), `entries`.
    """

    def __init__(self, entries, llvm_ir: str, stats: dict, workspace_bytes: int):
        self.entries: dict[str, Entry] = entries
        self.llvm_ir, self.stats = llvm_ir, stats
        self.workspace_bytes = workspace_bytes  # the largest entry's
        self._optimized = self._asm = None
        self.object_code: bytes | None = None
        self.layout: dict = {}
        self.support: dict[str, str] = {}  # support name -> symbol, when the module has them

    def __getitem__(self, name: str) -> Entry:
        return self.entries[name]

    def __contains__(self, name: str) -> bool:
        return name in self.entries

    @property
    def optimized_ir(self) -> str:
        if self._optimized is None:
            self._optimized = jit.optimized_ir(self.llvm_ir, self.stats.get("opt level"))
        return self._optimized

    @property
    def asm(self) -> str:
        if self._asm is None:
            self._asm = jit.assembly(self.llvm_ir, self.stats.get("opt level"))
        return self._asm


def assemble(layout: dict, addresses: dict, llvm_ir: str, stats: dict,
             workspace: int) -> CompiledModule:
    """A CompiledModule over compiled entries: `layout` maps name -> (symbol, buffer count,
    parameter avals, result avals, failure sites, error record offset, tape headers);
    `addresses` maps symbol -> address."""
    cm = CompiledModule({}, llvm_ir, stats, workspace)
    cm.layout = layout
    for name, (symbol, n, ins, outs, sites, record, tapes) in layout.items():
        cm.entries[name] = Entry(name, abi.Kernel(addresses[symbol], n, symbol), ins, outs, cm,
                                 sites, record, tapes)
    return cm


def load_object(object_code: bytes, layout: dict, llvm_ir: str, stats: dict,
                workspace: int, support: dict[str, str]) -> CompiledModule:
    """A CompiledModule from object code made by `compile_functions(keep_object=True)` (in
    this process or an earlier one with the same LLVM, CPU and llgrad version), whose
    support functions are `support` ({support name: symbol})."""
    from . import blas, special, vmath  # symbols the object code may reference
    blas.register_symbols(llvm_ir)  # gemm and LAPACK: Note [One BLAS, one thread pool]
    special.register_symbols(llvm_ir)  # Note [scipy.special's C functions]
    vmath.mvec_available()
    if "GOMP_parallel" in llvm_ir:  # Note [Threads in kernels]
        from . import threads
        threads.available()
    names = [s for s, *_ in layout.values()] + list(support.values())
    addresses = jit.get_jit().add_object(object_code, names)
    abi.adopt_support({name: addresses[symbol] for name, symbol in support.items()})
    cm = assemble(layout, addresses, llvm_ir, stats, workspace)
    cm.object_code, cm.support = object_code, dict(support)
    return cm
