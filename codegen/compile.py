"""compile_functions: several IR functions -> one LLVM module -> native entries callable on
numpy arrays (`CompiledModule[name](*arrays) -> list[ndarray]`).

Each entry is a `void(void**)` kernel (abi.py) over [params..., results..., workspace]. Results
are fresh arrays per call; temporaries live in one workspace per module and thread (so calls
from several threads never share scratch memory). Constants are private module globals.
"""
from __future__ import annotations

import itertools
import threading
import time

import numpy as np
from llvmlite import ir

from llgrad.runtime.errors import ShapeError

from . import abi, jit
from .elementwise import memtype
from .lower import emit_function
from .plan import ALIGN, FunctionPlan

_MODULE_IDS = itertools.count()


class Entry:
    """One compiled function: checks/coerces arguments, allocates results, calls the kernel."""

    __slots__ = ("name", "kernel", "in_avals", "out_avals", "module", "_call", "_tls")

    def __init__(self, name, kernel, in_avals, out_avals, module):
        self.name, self.kernel, self.module = name, kernel, module
        self.in_avals, self.out_avals = in_avals, out_avals
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
        self._call((*args, *outs, ws))
        return outs

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
# pointers itself. Anything unusual (lists, other dtypes, strided arrays) takes the slow path,
# np.ascontiguousarray. The workspace is per thread (threading.local), so no lock is taken.


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
            raw = np.empty(self.workspace_bytes + ALIGN, np.uint8)
            start = -raw.ctypes.data % ALIGN
            ws = self._tls.ws = raw[start:start + self.workspace_bytes + 1]
        return ws

    @property
    def optimized_ir(self) -> str:
        if self._optimized is None:
            self._optimized = jit.optimized_ir(self.llvm_ir)
        return self._optimized

    @property
    def asm(self) -> str:
        if self._asm is None:
            self._asm = jit.assembly(self.llvm_ir)
        return self._asm


class _Constants:
    """Private globals holding constant arrays, one per IR constant value."""

    def __init__(self, module: ir.Module, prefix: str):
        self.module, self.prefix, self.cache = module, prefix, {}
        self.bytes = 0

    def __call__(self, value) -> ir.Value:
        g = self.cache.get(value)
        if g is None:
            arr = np.ascontiguousarray(value.op.params["value"], dtype=value.aval.dtype)
            data = bytearray(arr.tobytes()) or bytearray(b"\0")
            ty = ir.ArrayType(ir.IntType(8), len(data))
            g = ir.GlobalVariable(self.module, ty, f"{self.prefix}.const{len(self.cache)}")
            g.initializer = ir.Constant(ty, data)
            g.global_constant, g.linkage, g.align = True, "private", ALIGN
            self.cache[value] = g
            self.bytes += len(data)
        return g


def compile_functions(fns: dict, *, fuse: bool = True, symbol_prefix: str | None = None,
                      keep_object: bool = False) -> CompiledModule:
    """Compile IR functions into one native module; `m[name](*arrays)` calls one.

    Args:
        fns: entry name -> ir.Function (e.g. {"forward": f, "joint": f_and_grad}).
        fuse: group elementwise chains and their reductions into single loops.
        symbol_prefix: a process-independent name for the module's symbols (the disk cache
            uses a content hash); default: a per-process counter.
        keep_object: keep the native object code in `.object_code` (for the disk cache).

    Returns:
        A CompiledModule; each entry returns a list of fresh numpy arrays, one per result.

    Raises:
        UnsupportedError: an op has no lowering (the message names the primitive and line).
    """
    from . import lowerings  # noqa: F401  (registers every lowering)
    t0 = time.perf_counter()
    mid = symbol_prefix or str(next(_MODULE_IDS))
    module = ir.Module(name=f"llgrad{mid}")
    stats: dict = {"ops": {}}
    kernels, plans, workspace = {}, {}, 0
    for name, fn in fns.items():
        plan = FunctionPlan(fn, fuse=fuse)
        for op in fn.walk():
            stats["ops"][op.prim.name] = stats["ops"].get(op.prim.name, 0) + 1
        symbol = f"llgrad{mid}_{_ident(name)}"
        consts = _Constants(module, symbol)
        n = emit_function(plan, module, symbol, consts, stats)
        kernels[name] = (symbol, n)
        plans[name] = plan
        workspace = max(workspace, plan.workspace)
        stats[f"constant bytes ({name})"] = consts.bytes
        stats[f"workspace bytes ({name})"] = plan.workspace
    llvm_ir = str(module)
    t1 = time.perf_counter()
    j = jit.get_jit()
    with jit._lock:  # llvmlite objects are not thread safe (jit.py, Note [One JIT per process])
        mod = j.parse(llvm_ir)
        t2 = time.perf_counter()
        j.optimize(mod, j.level_for(llvm_ir))
        t3 = time.perf_counter()
        obj = j.target.machine.emit_object(mod) if keep_object else None
        addresses = j.add(mod, [s for s, _ in kernels.values()])
        t4 = time.perf_counter()
    stats.update({"workspace bytes": workspace, "lower seconds": t1 - t0,
                  "parse seconds": t2 - t1, "optimize seconds": t3 - t2,
                  "machine code seconds": t4 - t3, "compile seconds": t4 - t0})
    for v in [v for fn in fns.values() for v in fn.params + fn.outputs]:
        memtype(v.aval.dtype)  # every boundary dtype is supported
    layout = {name: (symbol, n, [(tuple(v.aval.shape), np.dtype(v.aval.dtype))
                                 for v in fns[name].params],
                     [(tuple(v.aval.shape), np.dtype(v.aval.dtype)) for v in fns[name].outputs])
              for name, (symbol, n) in kernels.items()}
    cm = _assemble(layout, addresses, llvm_ir, stats, workspace)
    cm.object_code = obj
    return cm


def _assemble(layout: dict, addresses: dict, llvm_ir: str, stats: dict,
              workspace: int) -> CompiledModule:
    cm = CompiledModule({}, llvm_ir, stats, workspace)
    cm.layout = layout
    for name, (symbol, n, ins, outs) in layout.items():
        cm.entries[name] = Entry(name, abi.Kernel(addresses[symbol], n, symbol), ins, outs, cm)
    return cm


def load_object(object_code: bytes, layout: dict, llvm_ir: str, stats: dict,
                workspace: int) -> CompiledModule:
    """A CompiledModule from object code made by `compile_functions(keep_object=True)` (in
    this process or an earlier one with the same LLVM, CPU and llgrad version)."""
    from . import blas, vmath  # symbols the object code may reference
    if "llgrad_blas_" in llvm_ir:
        blas.register_symbols()  # imports scipy: only when the code calls gemm
    vmath.mvec_available()
    addresses = jit.get_jit().add_object(object_code, [s for s, *_ in layout.values()])
    cm = _assemble(layout, addresses, llvm_ir, stats, workspace)
    cm.object_code = object_code
    return cm


def _ident(name: str) -> str:
    return "".join(c if c.isalnum() else "_" for c in name)
