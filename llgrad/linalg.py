"""`llgrad.linalg`: linear-algebra functions with `torch.linalg`'s names and arguments.

Inside a differentiated function, numpy's `np.linalg.*` and scipy's `scipy.linalg.*` spellings
work too (runtime/numpy_linalg.py).
"""
from __future__ import annotations

from llgrad.runtime.ops import (
    cholesky, cholesky_solve, det, eigh, eigvalsh, inv, matrix_norm, matrix_power, pinv, qr,
    slogdet, solve, solve_triangular, svd, svdvals, vector_norm,
)
from llgrad.runtime.numpy_linalg import norm

__all__ = [
    "cholesky", "cholesky_solve", "det", "eigh", "eigvalsh", "inv", "matrix_norm",
    "matrix_power", "norm", "pinv", "qr", "slogdet", "solve", "solve_triangular", "svd",
    "svdvals", "vector_norm",
]
