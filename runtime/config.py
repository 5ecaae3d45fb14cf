"""Every LLGRAD_* environment flag, read in one place (at call time, so tests can set them),
and the options `llgrad.config.update(name, value)` sets from code (they win over the flags).

LLGRAD_DISABLE_JIT=1   run compiled functions through the reference interpreter (interp.py)
LLGRAD_DUMP=DIR        write every stage of every compile to DIR/<function>/<signature-hash>/
LLGRAD_PRINT_AFTER=p,q print the IR after the named passes (or `all`)
LLGRAD_CACHE_DIR=DIR   the on-disk compile cache (default: the user's cache directory)
LLGRAD_LOG=compiles    log every trace and compile, with its reason and phase times, to the
                       "llgrad" logger at WARNING level (option `log_compiles`; otherwise
                       these records go out at DEBUG level)
LLGRAD_OPT_LEVEL=0..3  the LLVM optimisation level of every module (option `opt_level`;
                       default: chosen per module, codegen/compile.py); 0 is a short
                       pipeline (inlining, SROA, instcombine), not LLVM's O0
LLGRAD_VECTOR_BITS=256 keep LLVM's preference for 256-bit vectors on cores with AVX-512
                       (read once, when the JIT starts: codegen/jit.py, Note [512-bit vectors])
"""
from __future__ import annotations

import os

__all__ = ["update"]

_OPTIONS = {"log_compiles": None, "opt_level": None}  # None: follow the environment


def update(name: str, value) -> None:
    """Set an option for this process, as `jax.config.update` does: `log_compiles` (bool),
    `opt_level` (0-3, or None for the automatic choice). Thread safe (one assignment)."""
    if name not in _OPTIONS:
        raise ValueError(f"llgrad.config has no option {name!r}; options: "
                         f"{', '.join(sorted(_OPTIONS))}")
    if name == "opt_level" and value is not None and value not in (0, 1, 2, 3):
        raise ValueError(f"opt_level must be 0, 1, 2, 3 or None; got {value!r}")
    _OPTIONS[name] = value


def _flag(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() not in ("", "0", "false", "no", "off")


# Note [Reading flags per call]
# LLGRAD_DISABLE_JIT is read on every compiled call, and `os.environ.get` of an unset name
# costs ~1 us (Mapping.get: encode the key, raise and catch KeyError): more than the rest of a
# small call. So `disable_jit` first looks the encoded name up in the mapping's own dict
# (`os.environ._data`, which every `os.environ` read and write goes through), ~50 ns, and
# reads the value the usual way only when it is set (or where that dict is missing).
_DISABLE_JIT = "LLGRAD_DISABLE_JIT"
_DISABLE_JIT_KEY = os.environ.encodekey(_DISABLE_JIT)


def disable_jit() -> bool:
    data = getattr(os.environ, "_data", None)
    if type(data) is dict and _DISABLE_JIT_KEY not in data:
        return False
    return _flag(_DISABLE_JIT)


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


def log_compiles() -> bool:
    if _OPTIONS["log_compiles"] is not None:
        return bool(_OPTIONS["log_compiles"])
    return "compiles" in {p.strip().lower() for p in os.environ.get("LLGRAD_LOG", "").split(",")}


def opt_level() -> int | None:
    if _OPTIONS["opt_level"] is not None:
        return _OPTIONS["opt_level"]
    raw = os.environ.get("LLGRAD_OPT_LEVEL", "").strip()
    if raw in ("0", "1", "2", "3"):
        return int(raw)
    if raw:
        raise ValueError(f"LLGRAD_OPT_LEVEL={raw!r}: use 0, 1, 2 or 3 (or unset it)")
    return None


def narrow_vectors() -> bool:
    """LLGRAD_VECTOR_BITS=256: LLVM keeps 256-bit vectors where it prefers them."""
    raw = os.environ.get("LLGRAD_VECTOR_BITS", "").strip()
    if raw not in ("", "256", "512"):
        raise ValueError(f"LLGRAD_VECTOR_BITS={raw!r}: use 256 or 512 (or unset it)")
    return raw == "256"
