"""llgrad.codegen: llgrad IR -> LLVM IR (llvmlite) -> native code, and the calling convention.

`compile_functions({name: ir.Function}) -> CompiledModule` is the entry point (compile.py);
`load_object` rebuilds a CompiledModule (compiled.py) from cached object code.
Foundations: `jit` (the process-wide JIT), `vmath` (SIMD math), `loops` (loop nests),
`blas` (gemm and loop matmul), `abi` (kernels as `i64(void**)` returning a status:
`native_errors`); lowering: `registry` (one
lowering per primitive), `plan` (views, groups, storage), `lower` (emission), `elementwise` (the
generic loop), `lowerings/` (one module per op family).
Submodules load on first use, so importing the package stays cheap; what that first use
costs (llvmlite, the JIT's set-up, libraries) is recorded in `once` (one-time costs).
"""
import importlib
import sys

from . import once


def _load(name: str, *also: str):
    """Submodule `name` (and `also`), imported on first use as a recorded one-time cost."""
    mod = sys.modules.get(f"{__name__}.{name}")
    if mod is None:
        with once.paid("imports"):
            for other in also:
                importlib.import_module(f".{other}", __name__)
            mod = importlib.import_module(f".{name}", __name__)
    return mod


def compile_functions(fns, **kwargs):
    """See codegen/compile.py: compile IR functions into one CompiledModule."""
    return _load("compile", "lowerings").compile_functions(fns, **kwargs)


def load_object(object_code, layout, llvm_ir, stats, workspace, support):
    """See codegen/compiled.py: a CompiledModule from cached object code (no lowering)."""
    return _load("compiled").load_object(object_code, layout, llvm_ir, stats, workspace,
                                         support)
