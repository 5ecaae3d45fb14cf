"""PyTorch-style tensor repr: `tensor([2.7183], grad_fn=<ExpBackward>)`."""
from __future__ import annotations

import numpy as np


def _float_formatter(arr: np.ndarray):
    finite = arr[np.isfinite(arr)]
    if finite.size == 0 or np.all(finite == np.round(finite)) and np.abs(finite).max() < 1e8:
        return lambda v: (f"{v:.0f}." if np.isfinite(v) else f"{v}")
    amax, nz = np.abs(finite).max(), np.abs(finite[finite != 0])
    amin = nz.min() if nz.size else 0.0
    if amax >= 1e8 or (amin and amax / amin > 1000) or (amin and amin < 1e-4):
        return lambda v: f"{v:.4e}"
    return lambda v: f"{v:.4f}"


def array_str(arr: np.ndarray) -> str:
    if arr.dtype.kind == "f":
        fmt = _float_formatter(arr)
        formatter = {"float_kind": fmt}
    elif arr.dtype.kind == "b":
        formatter = {"bool": lambda v: "True" if v else "False"}
    else:
        formatter = None
    if arr.ndim == 0:
        return formatter["float_kind"](arr.item()) if arr.dtype.kind == "f" else str(arr.item())
    return np.array2string(arr, separator=", ", formatter=formatter, prefix="tensor(",
                           threshold=1000, edgeitems=3, max_line_width=80)


def tensor_repr(t) -> str:
    arr = t._data
    parts = [array_str(arr)]
    if arr.dtype not in (np.float32, np.int64, np.bool_) or arr.size == 0:
        parts.append(f"dtype={t.dtype!r}")
    if t._grad_fn is not None:
        parts.append(f"grad_fn=<{t._grad_fn.name()}>")
    elif t._requires_grad:
        parts.append("requires_grad=True")
    return "tensor(" + ", ".join(parts) + ")"
