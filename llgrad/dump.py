"""LLGRAD_DUMP=DIR: write every stage of every compile to DIR/<function>/<signature-hash>/.

One directory per compiled signature (`sig-<sha1 of the signature description>`, which also
covers wrt and, on the dynamic path, the graph), holding graph.txt, forward.ir, backward.ir,
module.ll, module.s, backward.py and stats.json. Each file is written to a temporary name and
renamed, so a reader never sees a half-written file.
"""
from __future__ import annotations

import hashlib
import json
import os
import re

FILES = {  # file name -> Inspection attribute
    "graph.txt": "graph",
    "forward.ir": "forward_ir",
    "backward.ir": "backward_ir",
    "module.ll": "llvm_ir",
    "module.s": "asm",
    "backward.py": "python_source",
}


def signature_key(inspection) -> str:
    """The text hashed into the directory name: the call signature, the differentiated
    leaves, and (dynamic path) the structural fingerprint of the traced graph."""
    c = inspection._c
    key = f"{c.stats.get('signature', '')} wrt={list(c.wrt_leaves)}"
    if c.dynamic_reason is not None:
        from llgrad.transform.hashing import fingerprint
        key += f" graph={fingerprint(c.trace.fn)}"
    return key


def signature_hash(inspection) -> str:
    return hashlib.sha1(signature_key(inspection).encode()).hexdigest()[:12]


def _safe(name: str) -> str:
    return re.sub(r"[^\w.-]", "_", name) or "function"


def _atomic_write(path: str, text: str) -> None:
    tmp = f"{path}.tmp.{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text if text.endswith("\n") else text + "\n")
    os.replace(tmp, path)


def _jsonable(v):
    if isinstance(v, (str, int, float, bool)) or v is None:
        return v
    if isinstance(v, dict):
        return {str(k): _jsonable(w) for k, w in v.items()}
    if isinstance(v, (list, tuple)):
        return [_jsonable(w) for w in v]
    return str(v)


def dump_compiled(root: str, inspection) -> str:
    """Write the stages of one compiled signature; returns the directory written.

    A stage that fails to print is written as a one-line `(failed: ...)` note, so a dump
    taken to report a compiler bug is as complete as it can be.
    """
    c = inspection._c
    d = os.path.join(root, _safe(c.trace.fn.name), "sig-" + signature_hash(inspection))
    os.makedirs(d, exist_ok=True)
    for fname, attr in FILES.items():
        try:
            text = str(getattr(inspection, attr))
        except Exception as e:  # noqa: BLE001  see the docstring
            text = f"(failed: {type(e).__name__}: {e})"
        _atomic_write(os.path.join(d, fname), text)
    stats = {"function": c.trace.fn.name, "signature_key": signature_key(inspection)}
    stats.update(_jsonable(dict(inspection.stats)))
    _atomic_write(os.path.join(d, "stats.json"), json.dumps(stats, indent=2))
    return d
