"""llgrad.codegen: llgrad IR -> LLVM IR (llvmlite) -> native code, and the calling convention.

`compile_functions({name: ir.Function}) -> CompiledModule` is the entry point (compile.py);
`load_object` rebuilds a CompiledModule (compiled.py) from cached object code.
Foundations: `jit` (the process-wide JIT), `vmath` (SIMD math), `loops` (loop nests),
`blas` (gemm and loop matmul), `abi` (kernels as `void(void**)`); lowering: `registry` (one
lowering per primitive), `plan` (views, groups, storage), `lower` (emission), `elementwise` (the
generic loop), `lowerings/` (one module per op family).
Submodules load on first use, so importing the package stays cheap.
"""


def compile_functions(fns, **kwargs):
    """See codegen/compile.py: compile IR functions into one CompiledModule."""
    from .compile import compile_functions as _compile
    return _compile(fns, **kwargs)


def load_object(object_code, layout, llvm_ir, stats, workspace):
    """See codegen/compiled.py: a CompiledModule from cached object code (no lowering)."""
    from .compiled import load_object as _load
    return _load(object_code, layout, llvm_ir, stats, workspace)
