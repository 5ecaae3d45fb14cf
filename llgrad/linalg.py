"""`llgrad.linalg`: linear-algebra functions, as `torch.linalg` (vector norms so far)."""
from __future__ import annotations

from llgrad.runtime.ops import vector_norm

__all__ = ["vector_norm"]
