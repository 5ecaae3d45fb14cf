"""compile_functions: several IR functions -> one LLVM module -> native entries callable on
numpy arrays (a `CompiledModule`, compiled.py: `m[name](*arrays) -> list[ndarray]`).

Each entry is an `i64(void**)` kernel (abi.py) over [params..., results..., workspace],
returning 0 or the status of a failure (native_errors.py).
Constants are private module globals. Loading cached object code (compiled.load_object) does
not import this module, so the lowering loads only when something is compiled.
"""
from __future__ import annotations

import itertools
import time

import numpy as np
from llvmlite import ir

from . import jit
from .abi import ALIGN
from .compiled import CompiledModule, assemble
from .elementwise import memtype
from .lower import emit_function
from .plan import FunctionPlan

_MODULE_IDS = itertools.count()


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
        n, sites, record, tapes = emit_function(plan, module, symbol, consts, stats)
        kernels[name] = (symbol, n, sites, record, tapes)
        plans[name] = plan
        workspace = max(workspace, record + 8)  # the error record ends the workspace
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
        names = [s for s, *_ in kernels.values()]
        if keep_object:  # one machine-code pass: load the object code the disk cache keeps
            obj = j.target.machine.emit_object(mod)
            addresses = j.add_object(obj, names, check=False)  # LLVM's own output
        else:
            obj, addresses = None, j.add(mod, names)
        t4 = time.perf_counter()
    stats.update({"workspace bytes": workspace, "lower seconds": t1 - t0,
                  "parse seconds": t2 - t1, "optimize seconds": t3 - t2,
                  "machine code seconds": t4 - t3, "compile seconds": t4 - t0})
    for v in [v for fn in fns.values() for v in fn.params + fn.outputs]:
        memtype(v.aval.dtype)  # every boundary dtype is supported
    layout = {name: (symbol, n, [(tuple(v.aval.shape), np.dtype(v.aval.dtype))
                                 for v in fns[name].params],
                     [(tuple(v.aval.shape), np.dtype(v.aval.dtype)) for v in fns[name].outputs],
                     sites, record, tapes)
              for name, (symbol, n, sites, record, tapes) in kernels.items()}
    cm = assemble(layout, addresses, llvm_ir, stats, workspace)
    cm.object_code = obj
    return cm


def _ident(name: str) -> str:
    return "".join(c if c.isalnum() else "_" for c in name)
