"""The on-disk compile cache: native object code plus the IR it came from, so a script's
second run skips optimisation, AD and LLVM (it still traces, to compute the key).

Key: the traced IR's structural fingerprint, the entries and `wrt`, llgrad's version, the
LLVM version, and the host CPU name and features. The kernels' calling trampoline
(codegen/abi.py) is an entry too, keyed by its LLVM IR, so a warm start runs no LLVM pass at
all. Entries are written to a temporary file and renamed (atomic: a crash never leaves a
half-written entry that is used; concurrent writers of one entry are safe, the last rename
wins), and carry a digest of their contents. A corrupt or foreign entry is ignored and
recompiled (never loaded: LLVM crashes on damaged object code). The directory
(LLGRAD_CACHE_DIR, default ~/.cache/llgrad) is private (0700).
Enabled per function with `@differentiate(cache=True)`, or globally with LLGRAD_CACHE=1 or
`llgrad.cache.enable()`.
"""
from __future__ import annotations

import hashlib
import os
import pickle
import tempfile

from llgrad.runtime import config

_MAGIC = b"llgrad-cache-3\n"  # then a sha256 of the rest, then the pickle
_ENABLED = [None]  # None: follow LLGRAD_CACHE


def enable(on: bool = True) -> None:
    """Switch the disk cache on (or off) for every differentiated function."""
    _ENABLED[0] = on


def enabled() -> bool:
    if _ENABLED[0] is not None:
        return _ENABLED[0]
    return os.environ.get("LLGRAD_CACHE", "").lower() not in ("", "0", "false", "no", "off")


def directory() -> str:
    d = config.cache_dir()
    os.makedirs(d, mode=0o700, exist_ok=True)
    return d


def _environment() -> str:
    import llvmlite
    import llvmlite.binding as llvm

    from llgrad import __version__
    from llgrad.codegen import jit
    return "|".join([__version__, llvmlite.__version__, ".".join(map(str, llvm.llvm_version_info)),
                     jit.host_cpu_name(), jit.host_cpu_features()])


def key(*parts: str) -> str:
    """The entry key for a compile: its IR parts plus this machine's compiler environment."""
    h = hashlib.sha256(_environment().encode())
    for p in parts:
        h.update(b"\0" + p.encode())
    return h.hexdigest()


def _path(k: str) -> str:
    return os.path.join(directory(), k[:2], k + ".llgc")


def load(k: str):
    """The stored payload for key `k`, or None (missing, corrupt or foreign: recompile)."""
    try:
        with open(_path(k), "rb") as f:
            data = f.read()
        n = len(_MAGIC)
        body = data[n + 32:]
        if data[:n] != _MAGIC or data[n:n + 32] != hashlib.sha256(body).digest():
            return None
        stored_key, payload = pickle.loads(body)
        return payload if stored_key == k else None
    except FileNotFoundError:
        return None
    except Exception:  # a corrupt entry is never used
        return None


def store(k: str, payload) -> None:
    path = _path(k)
    os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".tmp-")
    try:
        body = pickle.dumps((k, payload), protocol=pickle.HIGHEST_PROTOCOL)
        with os.fdopen(fd, "wb") as f:
            f.write(_MAGIC + hashlib.sha256(body).digest() + body)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def info() -> dict:
    """Directory, number of entries and their total size in bytes."""
    d = config.cache_dir()
    n = size = 0
    for root, _, files in os.walk(d) if os.path.isdir(d) else ():
        for name in files:
            if name.endswith(".llgc"):
                n += 1
                size += os.path.getsize(os.path.join(root, name))
    return {"directory": d, "entries": n, "bytes": size}


def clear() -> int:
    """Delete every entry; returns how many were removed."""
    d = config.cache_dir()
    removed = 0
    for root, _, files in os.walk(d) if os.path.isdir(d) else ():
        for name in files:
            if name.endswith(".llgc") or name.startswith(".tmp-"):
                os.unlink(os.path.join(root, name))
                removed += name.endswith(".llgc")
    return removed


def _store_quietly(k: str, payload) -> None:
    try:
        store(k, payload)
    except OSError as e:  # a read-only or full disk must not break the computation
        import warnings
        warnings.warn(f"llgrad: could not write the compile cache: {e}")


def store_module(k: str, m) -> None:
    """Store one compiled entry's object code under entry key `k`."""
    payload = {"object": m.object_code, "layout": m.layout, "llvm_ir": m.llvm_ir,
               "stats": m.stats, "workspace": m.workspace_bytes}
    _store_quietly(key(k), payload)


class _ObjectCache:
    """`codegen.jit.ObjectCache` on this directory: a support module's object code (the
    calling trampoline), keyed by its LLVM IR text and the compiler environment."""

    def load(self, llvm_ir: str) -> bytes | None:
        payload = load(key("object", llvm_ir))
        return payload if isinstance(payload, bytes) else None

    def store(self, llvm_ir: str, object_code: bytes) -> None:
        _store_quietly(key("object", llvm_ir), object_code)


def load_module(k: str):
    """The native module stored under entry key `k`, or None (then compile).

    First sets up the kernels' calling trampoline from this cache (codegen/abi.py), on a miss
    too: the compile that follows then finds it, and a later process loads it from disk.
    """
    from llgrad import codegen
    from llgrad.codegen import abi
    abi.fast_path_available(_ObjectCache())
    p = load(key(k))
    if p is None:
        return None
    try:
        return codegen.load_object(p["object"], p["layout"], p["llvm_ir"], p["stats"],
                                   p["workspace"])
    except Exception:  # foreign or stale object code: recompile
        return None
