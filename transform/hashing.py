"""Structural fingerprints of IR functions: equal for IR that computes the same thing the same
way (names and value ids ignored, constants by value). Keys the dynamic path's graph cache
and the on-disk compile cache."""
from __future__ import annotations

import hashlib

import numpy as np

from llgrad.transform import ir


def _param_bytes(v) -> bytes:
    if isinstance(v, np.ndarray):
        return b"nd" + str(v.dtype).encode() + str(v.shape).encode() + v.tobytes()
    if isinstance(v, np.dtype):
        return b"dt" + str(v).encode()
    return repr(v).encode()


def fingerprint(fn: ir.Function) -> str:
    """A hex digest of the function's structure (params, ops, regions, results)."""
    h = hashlib.sha256()
    index: dict[int, int] = {}

    def define(v):
        index[v.id] = len(index)
        h.update(f"v{v.aval.shape}{v.aval.dtype}".encode())

    def use(v):
        h.update(f"u{index.get(v.id, -1)};".encode())

    def region(r: ir.Region):
        h.update(b"(")
        for p in r.params:
            define(p)
        for op in r.ops:
            h.update(op.prim.name.encode())
            for v in op.inputs:
                use(v)
            for k in sorted(op.params):
                h.update(k.encode() + b"=" + _param_bytes(op.params[k]))
            for sub in op.regions:
                region(sub)
            for v in op.outputs:
                define(v)
        h.update(b"->")
        for v in r.results:
            use(v)
        h.update(b")")

    region(fn.body)
    return h.hexdigest()
