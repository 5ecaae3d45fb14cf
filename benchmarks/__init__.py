"""Side-by-side benchmarks of llgrad against peer systems (PyTorch, JAX, HIPS autograd, Numba).

Run ``python -m benchmarks.run --help``; see ``benchmarks/README.md``.
"""
