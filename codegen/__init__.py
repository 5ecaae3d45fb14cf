"""llgrad.codegen: llgrad IR -> LLVM IR (llvmlite) -> native code, and the calling convention.

Foundations: `jit` (the process-wide JIT), `vmath` (SIMD math), `loops` (loop nests),
`blas` (gemm and loop matmul), `abi` (kernels as `void(void**)`). Submodules are imported
explicitly (`from llgrad.codegen import jit`) so that importing the package stays cheap.
"""
