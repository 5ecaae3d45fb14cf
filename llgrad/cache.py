"""The on-disk compile cache: native object code plus the IR it came from, so a script's
second run skips optimisation, AD and LLVM (it still traces, to compute the key: Note
[Warm starts]), and the converted source of the functions it traces, so it skips the gast
conversion too (tracer/convert/stored.py).

Key: the traced IR's structural fingerprint, the entries and `wrt`, llgrad's version, the
LLVM version, the host CPU name and features, and what the support functions (the kernels'
calling trampoline, codegen/abi.py) depend on: every stored module carries them (Note
[Support functions in kernel modules]), so a warm start runs no LLVM pass at all. An entry
is DIR/<first two hex digits of the key>/<key>.llgc, in the fixed format of Note [Cache
entry format] (no pickle: reading an entry runs no code); it is written to a
fresh temporary file and renamed (a crash never leaves a half-written entry that is used;
concurrent writers of one entry are safe, the last rename wins). A corrupt, foreign or
malformed entry is a miss: recompiled and overwritten, with a debug-level log note
(logger "llgrad.cache"); object code is checked before LLVM sees it (codegen/objfile.py).
The directory (LLGRAD_CACHE_DIR, default ~/.cache/llgrad) must be the user's own and not
writable by others (Note [Cache threat model]); otherwise llgrad warns and runs without it.
Enabled per function with `@differentiate(cache=True)`, or globally with LLGRAD_CACHE=1 or
`llgrad.cache.enable()`.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import struct

import numpy as np

from llgrad import safefs
from llgrad.runtime import config

_MAGIC, _FORMAT = b"LLGRADC\0", 6
_PREFIX = struct.Struct("<8sIIQ")  # magic, format, metadata bytes, object bytes
_HEADER = _PREFIX.size + 32        # ... then the sha256 of everything else
_MAX_META, _MAX_OBJECT = 1 << 26, 1 << 28
_ENTRY = re.compile(r"[0-9a-f]{64}\.llgc\Z")
_SUBDIR = re.compile(r"[0-9a-f]{2}\Z")
_TMP = re.compile(re.escape(safefs.TMP_PREFIX) + r"[0-9a-z_]{8,16}\Z")
_SYMBOL = re.compile(r"[A-Za-z_][A-Za-z0-9_.]*\Z")
_DTYPES = frozenset("bool int8 int16 int32 int64 uint8 uint16 uint32 uint64 float16 float32 "
                    "float64 complex64 complex128".split())
_ENABLED = [None]  # None: follow LLGRAD_CACHE
_warned: set = set()


def enable(on: bool = True) -> None:
    """Switch the disk cache on (or off) for every differentiated function."""
    _ENABLED[0] = on


def enabled() -> bool:
    if _ENABLED[0] is not None:
        return _ENABLED[0]
    return os.environ.get("LLGRAD_CACHE", "").lower() not in ("", "0", "false", "no", "off")


def environment() -> str:
    """This process's compiler environment, part of every key."""
    from llgrad.codegen import threads
    if not _FIXED:
        import llvmlite
        import llvmlite.binding as llvm

        from llgrad import __version__
        from llgrad.codegen import abi, jit
        _FIXED.append("|".join([__version__, code_stamp(), llvmlite.__version__,
                                ".".join(map(str, llvm.llvm_version_info)), jit.host_cpu_name(),
                                jit.host_cpu_features(), abi.support_tag()]))
    return f"{_FIXED[0]}|threads={threads.num_threads()}"


_FIXED: list = []  # what cannot change in a process
_PACKAGES = ("llgrad", "codegen", "runtime", "tracer", "transform")  # llgrad's source folders
_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def code_stamp() -> str:
    """`_code_stamp()` of this installation, once per process; also part of the keys of
    converted code (tracer/convert/stored.py)."""
    if not _STAMP:
        _STAMP.append(_code_stamp())
    return _STAMP[0]


_STAMP: list = []


def _code_stamp(root: str = _ROOT) -> str:
    """The size and time of change of every Python file of llgrad's folders under `root` (Note
    [Object code made by other code])."""
    h = hashlib.sha256()
    todo = [os.path.join(root, p) for p in _PACKAGES]
    while todo:
        try:
            entries = sorted(os.scandir(todo.pop()), key=lambda e: e.name)
        except OSError:
            continue
        for e in entries:
            if e.name.endswith(".py"):
                st = e.stat()
                h.update(f"{e.path}:{st.st_size}:{st.st_mtime_ns}\0".encode())
            elif e.is_dir(follow_symlinks=False) and e.name != "__pycache__":
                todo.append(e.path)
    return h.hexdigest()[:16]


# Note [Object code made by other code]
# The object code of an entry is a function of the traced IR and of the code that turned it
# into machine code: IR passes, AD, the lowering, the ABI of the calling code. llgrad's
# version names that code only for a release; a checkout (`pip install -e .`, where the
# tests and benchmarks run) or a build installed over another with the same version would
# load object code made by the code it replaced, with a stale lowering or another buffer
# layout: wrong values or a crash. So the key includes the size and time of change of every
# Python file of the package (~200 stats, ~0.3 ms once per process, `code_stamp`; a change of
# either makes every entry a miss, converted code's too: tracer/convert/stored.py).


def key(*parts: str) -> str:
    """The entry key for a compile: its IR parts plus this machine's compiler environment."""
    h = hashlib.sha256(environment().encode())
    for p in parts:
        h.update(b"\0" + p.encode())
    return h.hexdigest()


def entry_path(k: str) -> str:
    """Where the entry for key `k` is kept."""
    return os.path.join(config.cache_dir(), k[:2], k + ".llgc")


def _warn_once(problem: OSError) -> None:
    if str(problem) not in _warned:
        _warned.add(str(problem))
        import warnings
        warnings.warn(f"llgrad: running without the compile cache: {problem}", stacklevel=3)


def _note(message: str) -> None:
    import logging
    logging.getLogger("llgrad.cache").debug(message)


def _open_root(create: bool) -> int | None:
    """The cache directory's descriptor; None when it is absent and not `create`. Raises
    OSError (safefs.UnsafeDirectory) when it is refused."""
    d = config.cache_dir()
    if not create and not os.path.lexists(d):
        return None
    return safefs.open_root(d, private=True)


def _open_subdir(k: str, create: bool) -> int | None:
    """The descriptor of the subdirectory holding entry `k`; None (after a warning, when
    refused) if there is none to use."""
    if not _ENTRY.match(k + ".llgc"):  # (a name with a "/" would reach past O_NOFOLLOW)
        raise ValueError(f"not a cache key: {k!r}")
    try:
        root = _open_root(create)
        if root is None:
            return None
        try:
            return safefs.open_subdir(root, k[:2], os.path.join(config.cache_dir(), k[:2]),
                                      private=True, create=create)
        finally:
            os.close(root)
    except OSError as e:
        _warn_once(e)
        return None


def _encode(k: str, meta: dict, object_code: bytes) -> bytes:
    body = json.dumps(dict(meta, key=k), separators=(",", ":"), default=str).encode()
    prefix = _PREFIX.pack(_MAGIC, _FORMAT, len(body), len(object_code))
    return prefix + hashlib.sha256(prefix + body + object_code).digest() + body + object_code


def _decode(k: str, data: bytes) -> tuple[dict, bytes]:
    if len(data) < _HEADER:
        raise ValueError(f"{len(data)} bytes: shorter than the header")
    magic, fmt, n_meta, n_object = _PREFIX.unpack_from(data)
    if (magic, fmt) != (_MAGIC, _FORMAT) or len(data) != _HEADER + n_meta + n_object:
        raise ValueError("not an entry of this format, or of the wrong length")
    h = hashlib.sha256(data[:_PREFIX.size])
    h.update(memoryview(data)[_HEADER:])
    if h.digest() != data[_PREFIX.size:_HEADER]:
        raise ValueError("the checksum does not match (a damaged entry)")
    meta = json.loads(data[_HEADER:_HEADER + n_meta].decode("utf-8"))
    if not isinstance(meta, dict) or meta.get("key") != k:
        raise ValueError("the entry is stored under another key")
    return meta, data[_HEADER + n_meta:]


def load(k: str) -> tuple[dict, bytes] | None:
    """The metadata and object code stored under key `k`, or None (missing, corrupt or
    refused: recompile)."""
    fd = _open_subdir(k, create=False)
    if fd is None:
        return None
    try:
        data = safefs.read_file(fd, k + ".llgc", _HEADER + _MAX_META + _MAX_OBJECT)
    finally:
        os.close(fd)
    if data is None:
        return None
    try:
        return _decode(k, data)
    except ValueError as e:  # UnicodeDecodeError and JSONDecodeError too
        _note(f"cache entry {k} not used: {e}")
        return None


def store(k: str, meta: dict, object_code: bytes) -> None:
    """Keep `meta` (plain JSON data) and `object_code` under key `k`. A directory that
    cannot be written, or is refused, costs a warning, not the computation."""
    try:
        fd = _open_subdir(k, create=True)
        if fd is None:
            return
        try:
            safefs.write_file(fd, k + ".llgc", _encode(k, meta, object_code))
        finally:
            os.close(fd)
    except OSError as e:
        _warn_once(OSError(f"could not write to {config.cache_dir()}: {e}"))


def _scan(remove: bool) -> tuple[int, int]:
    """(entries, bytes) in the cache directory, removing them (and leftover temporary files)
    when `remove`. Only regular files named like llgrad's entries, in subdirectories named
    like llgrad's, are touched; links, foreign files and unsafe directories are left alone.
    Raises OSError when the directory is refused."""
    root = _open_root(create=False)
    if root is None:
        return 0, 0
    d, n, size = config.cache_dir(), 0, 0
    try:
        with os.scandir(root) as it:
            subdirs = [e.name for e in it
                       if _SUBDIR.match(e.name) and e.is_dir(follow_symlinks=False)]
        for name in subdirs:
            try:
                sub = safefs.open_subdir(root, name, os.path.join(d, name), private=True,
                                         create=False)
            except OSError:
                continue
            if sub is None:
                continue
            try:
                with os.scandir(sub) as it:
                    files = [(e.name, e.stat(follow_symlinks=False).st_size) for e in it
                             if (_ENTRY.match(e.name) and e.name.startswith(name)
                                 or _TMP.match(e.name)) and e.is_file(follow_symlinks=False)]
                for fname, fsize in files:
                    if remove:
                        os.unlink(fname, dir_fd=sub)  # (a link put there meanwhile: the link)
                    if _ENTRY.match(fname):
                        n, size = n + 1, size + fsize
            finally:
                os.close(sub)
            if remove:
                try:
                    os.rmdir(name, dir_fd=root)
                except OSError:  # not empty: foreign files stay
                    pass
    finally:
        os.close(root)
    return n, size


def info() -> dict:
    """Directory, number of entries and their total size in bytes (and, when the directory
    is not used, why)."""
    out = {"directory": config.cache_dir(), "entries": 0, "bytes": 0}
    try:
        out["entries"], out["bytes"] = _scan(remove=False)
    except OSError as e:
        out["refused"] = str(e)
    return out


def clear() -> int:
    """Delete every entry; returns how many were removed. Raises OSError (UnsafeDirectory)
    when the directory is refused: then nothing is touched."""
    return _scan(remove=True)[0]


def _avals(avals) -> list:
    return [[list(shape), dt.name] for shape, dt in avals]


def _read_avals(raw) -> list:
    out = []
    for shape, dtype in raw:
        if not (isinstance(shape, list) and all(type(d) is int and 0 <= d < 1 << 62
                                                 for d in shape) and dtype in _DTYPES):
            raise ValueError(f"bad argument description {shape!r} {dtype!r}")
        out.append((tuple(shape), np.dtype(dtype)))
    return out


def _read_layout(raw) -> dict:
    """The entry layout of `store_module`, each field checked: the buffer count must match
    the arguments and results (a kernel reads that many pointers)."""
    if not isinstance(raw, dict) or not raw:
        raise ValueError("no entry layout")
    out = {}
    for name, (symbol, n, ins, outs, sites, record, tapes) in raw.items():
        if not (isinstance(symbol, str) and _SYMBOL.match(symbol) and type(n) is int
                and type(record) is int and 0 <= record < 1 << 40 and isinstance(sites, list)
                and type(tapes) is int and 0 <= 16 * tapes <= record):  # 16: abi.TAPE_HEADER
            raise ValueError(f"bad entry {name!r}")
        out[name] = (symbol, n, _read_avals(ins), _read_avals(outs),
                     [_read_site(x) for x in sites], record, tapes)
        if n != len(ins) + len(outs) + 1:  # + the workspace
            raise ValueError(f"entry {name!r}: {n} buffers for {len(ins)} + {len(outs)} arrays")
    return out


# Note [Failure sites on disk]
# A kernel's failure sites (codegen/native_errors.py) are JSON too: [kind, loc, info] with loc
# [file, line, column, function] or null, and info's items Python scalars, nested lists for
# tuples, or {"class": [module, qualname]} for an exception class (a user's `raise` under a
# traced condition). Reading a class never imports anything: its module must be imported
# already (the user's function lives there), the qualname is walked by getattr, and the
# result must be an exception class. A class that cannot be named so (defined inside a
# function) makes the module unstorable: a warning, and the call goes on uncached.
_SCALARS = (str, int, float, bool, type(None))


def _site_info(x):
    if isinstance(x, _SCALARS):
        return x
    if isinstance(x, tuple):
        return [_site_info(v) for v in x]
    if isinstance(x, type) and issubclass(x, BaseException) and "<" not in x.__qualname__:
        return {"class": [x.__module__, x.__qualname__]}
    raise TypeError(f"{x!r} cannot be stored (an exception class defined inside a function?)")


def _read_site_info(x):
    if isinstance(x, _SCALARS):
        return x
    if isinstance(x, list):
        return tuple(_read_site_info(v) for v in x)
    if isinstance(x, dict) and set(x) == {"class"}:
        import sys
        module, qualname = x["class"]
        obj = sys.modules.get(module) if isinstance(module, str) else None
        for part in qualname.split(".") if isinstance(qualname, str) else ["<"]:
            obj = getattr(obj, part, None) if not part.startswith("__") else None
        if isinstance(obj, type) and issubclass(obj, BaseException):
            return obj
    raise ValueError(f"bad failure-site information {x!r}")


def _site(site) -> list:
    loc = site.loc
    return [site.kind, None if loc is None else [loc.file, loc.line, loc.column, loc.function],
            _site_info(tuple(site.info))]


def _read_site(raw):
    from llgrad.codegen.native_errors import KINDS, Site
    from llgrad.runtime.errors import SourceLoc
    kind, loc, info = raw
    if not (kind in KINDS or kind == "interrupt") or not isinstance(info, list):
        raise ValueError(f"bad failure site {raw!r}")
    if loc is not None:
        file, line, column, function = loc
        if not (isinstance(file, str) and type(line) is int and type(column) is int
                and isinstance(function, str)):
            raise ValueError(f"bad failure-site location {loc!r}")
        loc = SourceLoc(file, line, column, function)
    return Site(kind, loc, _read_site_info(info))


_SUPPORT_NAMES = frozenset({"llgrad_on_sigint", "llgrad_call_arrays"})


def _read_support(raw) -> dict:
    """The support functions' symbols of a stored module ({support name: symbol})."""
    if not (isinstance(raw, dict) and "llgrad_on_sigint" in raw and set(raw) <= _SUPPORT_NAMES
            and all(isinstance(v, str) and _SYMBOL.match(v) for v in raw.values())):
        raise ValueError(f"bad support functions {raw!r}")
    return dict(raw)


def store_module(k: str, m) -> None:
    """Store one compiled entry's object code under entry key `k` (unless the loader's check
    would refuse it: then it would never be used)."""
    from llgrad.codegen import jit
    problem = jit.get_jit().check_object(m.object_code, [s for s, *_ in m.layout.values()]
                                         + list(m.support.values()))
    if problem is not None:
        _note(f"compiled object code not stored: {problem}")
        return
    try:
        layout = {name: [symbol, n, _avals(ins), _avals(outs), [_site(x) for x in sites],
                         record, tapes]
                  for name, (symbol, n, ins, outs, sites, record, tapes) in m.layout.items()}
    except TypeError as e:
        import warnings
        warnings.warn(f"llgrad: could not write the compile cache: {e}", stacklevel=3)
        return
    meta = {"kind": "module", "llvm_ir": m.llvm_ir, "stats": m.stats,
            "workspace": m.workspace_bytes, "layout": layout, "support": m.support}
    store(key(k), meta, m.object_code)


def load_module(k: str):
    """The native module stored under entry key `k`, or None (then compile). Its support
    functions (calling trampoline, SIGINT hook) serve the process if it has none yet
    (codegen/abi.py, Note [Support functions in kernel modules])."""
    from llgrad import codegen
    entry = load(key(k))
    if entry is None:
        return None
    meta, object_code = entry
    try:
        if meta.get("kind") != "module":
            raise ValueError(f"an entry of kind {meta.get('kind')!r}")
        layout, llvm_ir, stats, ws = (_read_layout(meta["layout"]), meta["llvm_ir"],
                                      meta["stats"], meta["workspace"])
        if not (isinstance(llvm_ir, str) and isinstance(stats, dict) and type(ws) is int
                and 0 <= ws < 1 << 40):
            raise ValueError("bad IR text, statistics or workspace size")
        return codegen.load_object(object_code, layout, llvm_ir, stats, ws,
                                   _read_support(meta["support"]))
    except (KeyError, TypeError, ValueError, RuntimeError) as e:  # JitError: refused object
        _note(f"cache entry for {k} not used: {type(e).__name__}: {e}")
        return None


# Note [Warm starts]
# What a warm start may skip is bounded by what proves the stored code is still the code
# Python would run. The key is the traced IR (plus wrt, the signature and the compiler
# environment): tracing runs the function's current code with its current globals and
# closure, through every helper it calls, so a changed function, a changed global or a
# changed helper gives another IR and another key, and can never load stale code; the
# trace's guards (tracer/captures.py) then check the globals at each later call, as on a
# cold start. Everything after the trace is a pure function of the IR, so a hit skips the
# IR passes and AD as well as LLVM (llgrad/compiled.py, Note [Stages on first use]: the
# stages are made only when something needs them; a joint entry is stored only after AD
# succeeded on the same IR). What a warm start still pays: the trace (~1 ms per 100 ops),
# with the function's conversion read from the cache (tracer/convert/stored.py, Note
# [Converted code on disk]: ~0.7 ms instead of ~3.4 for the benchmark's chain), the key,
# reading and loading the object code (~1 ms: codegen/jit.py, Note [The engine's empty
# module]), the JIT's set-up (~1.3 ms, beside the trace: Note [JIT set-up in the
# background]), and loading the tracer and llvmlite (~45 ms CPU once per process; llvmlite is
# needed to load object code at all): for cold_start, ~4.5 ms wall after every import
# against ~42 ms cold. A key that skips the trace too
# (function source and signature) would have to cover every function the trace reaches and
# every value it reads: the guards record only data globals (not helpers, modules,
# attributes of objects), so it could load code for a changed helper. It is not done.


# Note [Cache entry format]
# An entry file is, in order: the 8-byte magic "LLGRADC\0"; the format number (6) as a
# little-endian u32; the metadata length (u32) and the object code length (u64); the sha256
# of the 24 bytes so far, the metadata and the object code; the metadata, UTF-8 JSON; the
# object code (an ELF relocatable object). The file's length must be exactly the sum. The
# metadata is {"key": the entry's key, "kind": "module", "layout": {entry: [symbol, buffer
# count, [[shape, dtype name], ...] for the arguments, the same for the results, the failure
# sites (Note [Failure sites on disk]), the error record's offset, the number of tape headers
# before it (Note [Workspaces] in codegen/compiled.py)]}, "support": {support name: symbol},
# "llvm_ir", "stats", "workspace"}; a converted function's entry has {"key", "kind":
# "conversion", "lookups", "source", "filename", "firstlineno"} and a marshalled code object
# for the object code (tracer/convert/stored.py). Everything is checked as it is read (types, dtype names
# from a fixed list, buffer counts against the avals, symbol names), and the object code by
# codegen/objfile.py, which also requires it to define the layout's and support's symbols.
# Format 2 (a pickle), format 5 (the support functions were an entry of their own) and
# anything else is not an entry of this format: a miss, then overwritten. There is no
# fsync: a torn write after a power loss fails the checksum.


# Note [Cache threat model]
# The cache directory is trusted only when it is owned by the user running llgrad and not
# writable by group or others; then nobody else can add, replace or rename anything inside
# it (root aside, who is trusted anyway). That is checked on the directory actually opened
# (fstat of its descriptor) and on each subdirectory, every file inside is opened relative to
# those descriptors with O_NOFOLLOW (a symlink, to a file or a directory, is never
# followed; a FIFO or someone else's file is not read), and nothing in an entry is code
# that runs when read (a fixed binary layout and JSON, no pickle). A directory that fails
# the check is not used at all: a warning names it and says why, and the computation runs
# without the disk cache. The same holds for converted functions (marshalled code objects,
# the format of Python's own __pycache__, read only after their checksum: marshal runs
# nothing as it reads), which run when the function is traced as object code does when
# called (tracer/convert/stored.py, Note [Converted code on disk]). The sha256 in each entry is not a signature: it guards against
# corruption only (anyone who can write an entry can recompute it), and the object check
# (codegen/objfile.py) guards LLVM against malformed code, not against malicious code.
# Keys are not secret either: they hash public data (IR, versions, CPU), so keying the
# calling trampoline per program (it is shared by all programs, keyed by its IR alone) would
# not stop someone who can write into the directory from planting an entry for any program
# - only the ownership check can - and would cost every program its own ~20 ms compile.
