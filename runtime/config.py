"""Every LLGRAD_* environment flag, read in one place (at call time, so tests can set them).

LLGRAD_DISABLE_JIT=1   run compiled functions through the reference interpreter (interp.py)
LLGRAD_DUMP=DIR        write every stage of every compile to DIR/<function>/<signature-hash>/
LLGRAD_PRINT_AFTER=p,q print the IR after the named passes (or `all`)
LLGRAD_CACHE_DIR=DIR   the on-disk compile cache (default: the user's cache directory)
"""
from __future__ import annotations

import os


def _flag(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() not in ("", "0", "false", "no", "off")


def disable_jit() -> bool:
    return _flag("LLGRAD_DISABLE_JIT")


def dump_dir() -> str | None:
    return os.environ.get("LLGRAD_DUMP") or None


def print_after() -> set[str]:
    return {p.strip() for p in os.environ.get("LLGRAD_PRINT_AFTER", "").split(",") if p.strip()}


def cache_dir() -> str:
    d = os.environ.get("LLGRAD_CACHE_DIR")
    if d:
        return d
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "llgrad")
