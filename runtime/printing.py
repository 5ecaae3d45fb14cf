"""PyTorch-style tensor repr: `tensor([2.7183], grad_fn=<ExpBackward>)`."""
from __future__ import annotations

import numpy as np


def _float_formatter(arr: np.ndarray):
    """PyTorch's choice: integer-valued -> `3.`; wide range or tiny -> `1.0000e-05`; else 4
    decimals. Every element is padded to the widest one."""
    finite = arr[np.isfinite(arr)]
    nz = np.abs(finite[finite != 0])
    amax, amin = (nz.max(), nz.min()) if nz.size else (0.0, 0.0)
    if finite.size == 0 or np.all(finite == np.ceil(finite)):
        sci = nz.size and (amax / amin > 1000.0 or amax > 1.0e8)
        fmt = (lambda v: f"{v:.4e}") if sci else (lambda v: f"{v:.0f}.")
    elif nz.size and (amax / amin > 1000.0 or amax > 1.0e8 or amin < 1.0e-4):
        fmt = lambda v: f"{v:.4e}"  # noqa: E731
    else:
        fmt = lambda v: f"{v:.4f}"  # noqa: E731
    width = _width(finite, fmt)
    return lambda v: (fmt(v) if np.isfinite(v) else f"{v}").rjust(width)


def _width(arr, fmt) -> int:
    flat = arr.reshape(-1)
    sample = flat if flat.size <= 1000 else np.concatenate([flat[:3], flat[-3:]])
    return max((len(fmt(v)) for v in sample), default=0)


def _padded(arr, fmt):
    flat = arr.reshape(-1)
    sample = flat if flat.size <= 1000 else np.concatenate([flat[:3], flat[-3:]])
    width = max((len(fmt(v)) for v in sample), default=0)
    return lambda v: fmt(v).rjust(width)


def array_str(arr: np.ndarray) -> str:
    if arr.dtype.kind == "f":
        formatter = {"float_kind": _float_formatter(arr)}
    elif arr.dtype.kind == "b":
        formatter = {"bool": _padded(arr, lambda v: "True" if v else "False")}
    else:
        formatter = None
    if arr.ndim == 0:
        return formatter["float_kind"](arr.item()) if arr.dtype.kind == "f" else str(arr.item())
    return np.array2string(arr, separator=", ", formatter=formatter, prefix="tensor(",
                           threshold=1000, edgeitems=3, max_line_width=80)


def tensor_repr(t) -> str:
    arr = t._data
    parts = [array_str(arr) if arr.size else "[]"]
    if arr.size == 0 and arr.ndim != 1:
        parts.append(f"size={arr.shape}")
    if arr.dtype not in (np.float32, np.int64, np.bool_) or (arr.size == 0 and
                                                              arr.dtype != np.float32):
        parts.append(f"dtype={t.dtype!r}")
    if t._grad_fn is not None:
        parts.append(f"grad_fn=<{t._grad_fn.name()}>")
    elif t._requires_grad:
        parts.append("requires_grad=True")
    return "tensor(" + ", ".join(parts) + ")"
