"""Per-primitive lowerings, one module per runtime/ops family; importing this package
registers all of them (elementwise primitives share the generic lowering, see elementwise.py)."""
from llgrad.runtime import ops as _ops  # noqa: F401  (declares every primitive)
from llgrad.runtime.prim import REGISTRY as _REGISTRY

from .. import registry as _registry
from . import control, index, lapack, linalg, reduce, shape, tapes  # noqa: F401
from . import scan, sort  # noqa: F401  (issue 11: scans and argsort)


def _register_elementwise() -> None:
    for prim in _REGISTRY.values():
        if prim.family == "elementwise" and prim.scalar is not None:
            _registry.lowers(prim, family="elementwise")(reduce.lower_elementwise)


_register_elementwise()
