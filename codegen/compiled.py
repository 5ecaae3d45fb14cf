"""A compiled module as Python sees it: `CompiledModule[name](*arrays) -> list[ndarray]`.

What `compile_functions` (compile.py) returns, and what `load_object` rebuilds from cached
object code. Kept apart from compile.py so that loading a cached module imports neither the
lowering nor the planner (issue 6: start-up with a warm disk cache).
Results are fresh arrays per call; temporaries live in one workspace per module and thread (so
calls from several threads never share scratch memory).
"""
from __future__ import annotations

import threading

import numpy as np

from llgrad.runtime.errors import ShapeError

from . import abi, jit, native_errors


class Entry:
    """One compiled function: checks/coerces arguments, allocates results, calls the kernel,
    and raises the error a kernel that stopped reports (Note [Native errors])."""

    __slots__ = ("name", "kernel", "in_avals", "out_avals", "module", "sites", "record",
                 "_polls", "_call", "_tls")

    def __init__(self, name, kernel, in_avals, out_avals, module, sites=(), record=0):
        self.name, self.kernel, self.module = name, kernel, module
        self.in_avals, self.out_avals = in_avals, out_avals
        self.sites, self.record = list(sites), record
        self._polls = any(s.kind == "interrupt" for s in self.sites)
        self._call = kernel._call  # the native trampoline, bound to the kernel's address
        self._tls = module._tls

    def __call__(self, *args) -> list[np.ndarray]:
        # See Note [Per-call overhead].
        if len(args) != len(self.in_avals):
            raise TypeError(f"{self.name} takes {len(self.in_avals)} arrays, got {len(args)}")
        for a, (shape, dt) in zip(args, self.in_avals):
            if a.__class__ is not np.ndarray or a.dtype is not dt or a.shape != shape or \
                    not a.flags.c_contiguous:
                args = self._coerce(args)
                break
        outs = [np.empty(s, d) for s, d in self.out_avals]
        try:
            ws = self._tls.ws
        except AttributeError:
            ws = self.module.workspace()
        if self._polls:
            native_errors.watch_interrupts()
        status = self._call((*args, *outs, ws))
        if status:
            return self._failed(status, args, ws)
        return outs

    def _failed(self, status: int, args, ws: np.ndarray) -> list[np.ndarray]:
        value = int(ws[self.record:self.record + 8].view(np.int64)[0])
        native_errors.raise_for(self.sites[status - 1], value)
        return self(*args)  # an interrupt whose handlers returned: run the call again

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
# shape and contiguity (~0.5 us), allocates the results with np.empty and hands one tuple to the
# native trampoline (abi.py, Note [Calling without ndarray.ctypes]), which reads the data
# pointers itself; the kernel's status is one int test (Note [Native errors]; ~25 ns with the
# ctypes conversion, ~30 ns more for an entry that polls for Ctrl-C). Anything unusual (lists,
# other dtypes, strided arrays) takes the slow path, np.ascontiguousarray. The workspace is
# per thread (threading.local), so no lock is taken.


class CompiledModule:
    """The native code of several IR functions compiled together.

    `m[name](*arrays)` runs entry `name` and returns its results as a list of new arrays.
    Thread safe: each thread gets its own workspace.
    Attributes: `llvm_ir` (as emitted), `optimized_ir`, `asm` (computed on first access),
    `stats` (op counts, workspace bytes, compile seconds per stage), `entries`.
    """

    def __init__(self, entries, llvm_ir: str, stats: dict, workspace_bytes: int):
        self.entries: dict[str, Entry] = entries
        self.llvm_ir, self.stats = llvm_ir, stats
        self.workspace_bytes = workspace_bytes
        self._tls = threading.local()
        self._optimized = self._asm = None
        self.object_code: bytes | None = None
        self.layout: dict = {}

    def __getitem__(self, name: str) -> Entry:
        return self.entries[name]

    def __contains__(self, name: str) -> bool:
        return name in self.entries

    def workspace(self) -> np.ndarray:
        ws = getattr(self._tls, "ws", None)
        if ws is None:
            raw = np.empty(self.workspace_bytes + abi.ALIGN, np.uint8)
            start = -raw.ctypes.data % abi.ALIGN
            ws = self._tls.ws = raw[start:start + self.workspace_bytes + 1]
        return ws

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
    parameter avals, result avals, failure sites, error record offset); `addresses` maps
    symbol -> address."""
    cm = CompiledModule({}, llvm_ir, stats, workspace)
    cm.layout = layout
    for name, (symbol, n, ins, outs, sites, record) in layout.items():
        cm.entries[name] = Entry(name, abi.Kernel(addresses[symbol], n, symbol), ins, outs, cm,
                                 sites, record)
    return cm


def load_object(object_code: bytes, layout: dict, llvm_ir: str, stats: dict,
                workspace: int) -> CompiledModule:
    """A CompiledModule from object code made by `compile_functions(keep_object=True)` (in
    this process or an earlier one with the same LLVM, CPU and llgrad version)."""
    from . import blas, vmath  # symbols the object code may reference
    if "llgrad_blas_" in llvm_ir:
        blas.register_symbols()  # imports scipy: only when the code calls gemm
    if "llgrad_lapack_" in llvm_ir:
        from . import lapack
        lapack.register_symbols(llvm_ir)
    vmath.mvec_available()
    if "GOMP_parallel" in llvm_ir:  # Note [Threads in kernels]
        from . import threads
        threads.available()
    addresses = jit.get_jit().add_object(object_code, [s for s, *_ in layout.values()])
    cm = assemble(layout, addresses, llvm_ir, stats, workspace)
    cm.object_code = object_code
    return cm
