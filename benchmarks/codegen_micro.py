"""Micro-benchmarks of codegen's foundations (not a test): exp throughput, call overhead,
compile time, BLAS vs loop-nest matmul. Run: python benchmarks/codegen_micro.py
"""
from __future__ import annotations

import time
import timeit

import numpy as np
from llvmlite import ir

from llgrad.codegen import abi, blas, jit, loops, vmath

N = 1_000_000


def _kernel(n_buffers, emit, name):
    module = ir.Module(name=name)
    with abi.define_kernel(module, name, n_buffers) as (b, ptrs):
        emit(b, *ptrs)
    src = str(module)
    start = time.perf_counter()
    address = jit.compile_module(src, [name])[name]
    return abi.Kernel(address, n_buffers, name), time.perf_counter() - start


def _map_kernel(op, dtype, width, name, n=N):
    elem = vmath.float_type(dtype)

    def emit(b, x, y):
        def body(b, i, w):
            loops.store(b, vmath.math_call(b, op, loops.load(b, x, i, elem, w)), y, i)
        loops.elementwise(b, n, width, body)
    return _kernel(2, emit, name)[0]


def _best_ms(fn, number=20, repeat=5):
    return min(timeit.repeat(fn, number=number, repeat=repeat)) / number * 1e3


def bench_exp():
    print(f"exp over {N:,} elements (ms per 1e6):")
    for dtype, np_t in (("f64", np.float64), ("f32", np.float32)):
        x = np.random.default_rng(0).uniform(-10, 10, N).astype(np_t)
        y = np.empty_like(x)
        width = vmath.vector_width(dtype)
        rows = [("numpy np.exp", lambda: np.exp(x, out=y))]
        scalar = _map_kernel("exp", dtype, 1, f"bench_exp_scalar_{dtype}")
        rows.append(("scalar llvm.exp loop (LLVM-vectorised)", lambda: scalar(x, y)))
        if vmath.mvec_available(dtype):
            vec = _map_kernel("exp", dtype, width, f"bench_exp_mvec_{dtype}")
            rows.append((f"libmvec <{width} x {dtype}> loop", lambda: vec(x, y)))
            vec2 = _map_kernel("exp", dtype, 2 * width, f"bench_exp_mvec2_{dtype}")
            rows.append((f"libmvec <{2 * width} x {dtype}> loop", lambda: vec2(x, y)))
        for label, fn in rows:
            print(f"  {dtype} {label:42s} {_best_ms(fn):7.3f}")


def bench_call_overhead():
    print("per-call overhead, empty kernel of 5 buffers (us):")
    k, _ = _kernel(5, lambda b, *ptrs: None, "bench_noop5")
    arrays = tuple(np.ones(10) for _ in range(5))
    rows = [
        ("Kernel(*arrays)  (checked, trampoline)", lambda: k(*arrays)),
        ("Kernel.call_unchecked(tuple)", lambda: k.call_unchecked(arrays)),
        ("pointer_array + call_pointers (portable)",
         lambda: k.call_pointers(abi.pointer_array(arrays))),
    ]
    for label, fn in rows:
        print(f"  {label:44s} {_best_ms(fn, number=20000) * 1e3:7.2f}")


def bench_compile():
    print("compile time (ms), parse + O3 + MCJIT:")
    times = [_kernel(2, lambda b, x, y: loops.store(b, loops.load(b, x, 0, vmath.F64), y, 0),
                     f"bench_tiny_{i}")[1] for i in range(5)]
    print(f"  tiny kernel (one load/store)                 {min(times) * 1e3:7.2f}")
    times = []
    for i in range(5):
        start = time.perf_counter()
        _map_kernel("exp", "f64", 4, f"bench_compile_exp_{i}", n=1003)
        times.append(time.perf_counter() - start)
    print(f"  exp map kernel, vector + remainder loops     {min(times) * 1e3:7.2f}")


def bench_matmul():
    print("matmul C = A @ B, f64 square (us): numpy | gemm | loop nest")
    for size in (4, 8, 16, 32, 64, 128):
        a = np.random.default_rng(1).normal(size=(size, size))
        b, c = a.copy(), np.empty((size, size))
        row = [_best_ms(lambda: np.matmul(a, b, out=c), number=200) * 1e3]
        for emitter in (blas.emit_gemm, blas.emit_loop_matmul):
            if emitter is blas.emit_gemm and not blas.blas_available():
                row.append(float("nan"))
                continue
            k, _ = _kernel(3, lambda bld, pa, pb, pc, e=emitter: e(
                bld, "f64", pa, pb, pc, size, size, size), f"bench_mm_{emitter.__name__}_{size}")
            row.append(_best_ms(lambda: k(a, b, c), number=200) * 1e3)
        print(f"  {size:4d}   " + " | ".join(f"{t:9.2f}" for t in row))


if __name__ == "__main__":
    j = jit.get_jit()
    print(f"host: {j.target.cpu}, avx2={jit.has_host_features('avx2')}, "
          f"libmvec={vmath.mvec_available()}, blas={blas.blas_available()}")
    bench_exp()
    bench_call_overhead()
    bench_compile()
    bench_matmul()
