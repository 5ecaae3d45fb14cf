"""LLGRAD_DUMP=DIR: write every stage of every compile to DIR/<function>/<signature-hash>/.

One directory per compiled signature (`sig-<sha1 of the signature description>`, which also
covers wrt and, on the dynamic path, the graph), holding graph.txt, forward.ir, backward.ir,
module.ll, module.s, backward.py and stats.json. Each file is written to a fresh temporary
name and renamed, so a reader never sees a half-written file. DIR and the directories below it
must be the user's own, and nothing below DIR is reached through a symbolic link (safefs.py):
another user who pre-creates the tree cannot make a dump overwrite other files. A tree that
fails those checks is not written; a warning says which directory and why.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import warnings

from llgrad import safefs

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
    return re.sub(r"^\.|[^\w.-]", "_", name) or "function"  # (never "." or "..")


def _write(dir_fd: int, name: str, text: str) -> None:
    data = (text if text.endswith("\n") else text + "\n").encode("utf-8")
    safefs.write_file(dir_fd, name, data, mode=0o666)


def _jsonable(v):
    if isinstance(v, (str, int, float, bool)) or v is None:
        return v
    if isinstance(v, dict):
        return {str(k): _jsonable(w) for k, w in v.items()}
    if isinstance(v, (list, tuple)):
        return [_jsonable(w) for w in v]
    return str(v)


def dump_compiled(root: str, inspection) -> str | None:
    """Write the stages of one compiled signature; returns the directory written, or None
    (after a warning) when the dump tree is refused (see the module docstring).

    A stage that fails to print is written as a one-line `(failed: ...)` note, so a dump
    taken to report a compiler bug is as complete as it can be.
    """
    c = inspection._c
    parts = [_safe(c.trace.fn.name), "sig-" + signature_hash(inspection)]
    texts = {}
    for fname, attr in FILES.items():
        try:
            texts[fname] = str(getattr(inspection, attr))
        except Exception as e:  # noqa: BLE001  see the docstring
            texts[fname] = f"(failed: {type(e).__name__}: {e})"
    stats = {"function": c.trace.fn.name, "signature_key": signature_key(inspection)}
    stats.update(_jsonable(dict(inspection.stats)))
    texts["stats.json"] = json.dumps(stats, indent=2)
    fds = []
    try:
        fds.append(safefs.open_root(root, private=False, mode=0o777))
        path = root
        for part in parts:
            path = os.path.join(path, part)
            fds.append(safefs.open_subdir(fds[-1], part, path, private=False, mode=0o777))
        for fname, text in texts.items():
            _write(fds[-1], fname, text)
    except OSError as e:
        warnings.warn(f"llgrad: LLGRAD_DUMP: not writing the dump of {c.trace.fn.name}: {e}",
                      stacklevel=2)
        return None
    finally:
        for fd in fds:
            os.close(fd)
    return path
