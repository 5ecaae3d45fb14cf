"""The one process-wide LLVM JIT: host target machine, pass pipelines, MCJIT engine.

LLVM IR text goes in, native function addresses come out (`compile_module`); `optimized_ir`
and `assembly` show what the pipeline and the backend made of a module, for inspection.
Invariants: every module is optimised for the host CPU (name and features) with the new
pass builder, at the level its caller chose (codegen/compile.py, Note [Choosing the
optimisation level]; O2 by default; level 0 is Note [The light pipeline]), and all LLVM
state is touched under one lock, so callers may compile from any thread. Nothing here knows
about the llgrad IR; lowering lives in the other codegen files.
"""
from __future__ import annotations

import atexit
import os
import threading
import time
from dataclasses import dataclass
from functools import cached_property
from typing import Protocol

import llvmlite.binding as llvm

from . import once
from .objfile import BadObject, check_object

__all__ = [
    "JitError", "ObjectCache", "Jit", "get_jit", "compile_module", "optimized_ir", "assembly",
    "host_cpu_name", "host_cpu_features", "has_host_features", "load_library",
]


class JitError(RuntimeError):
    """LLVM refused a module (parse or verification failure) or a symbol is missing."""


class ObjectCache(Protocol):
    """Where `compile_module` may find and keep a module's native object code, by its IR text.

    The disk cache (llgrad/cache.py) implements it; codegen does not depend on llgrad/.
    `load` returns None for a missing entry; what it returns is checked (objfile.py) before
    LLVM sees it, and a refused object is compiled afresh and stored again.
    """

    def load(self, llvm_ir: str) -> bytes | None: ...

    def store(self, llvm_ir: str, object_code: bytes) -> None: ...


# See Note [One JIT per process].
_lock = threading.RLock()
_jit: Jit | None = None
_loaded_libraries: dict[str, bool] = {}


@dataclass(frozen=True)
class _Target:
    """The host target: name, features, and the TargetMachine built from them."""

    triple: str
    cpu: str
    features: str
    machine: llvm.TargetMachine

    @cached_property
    def data_layout(self) -> str:
        return str(self.machine.target_data)


def _host_target() -> _Target:
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    triple = llvm.get_process_triple()
    cpu = llvm.get_host_cpu_name()
    features = llvm.get_host_cpu_features().flatten()
    if _wide_vectors(cpu, features):  # See Note [512-bit vectors]
        features += ",-prefer-256-bit"
    target = llvm.Target.from_triple(triple)
    machine = target.create_target_machine(
        cpu=cpu, features=features, opt=3, reloc="default", codemodel="jitdefault", jit=True
    )
    return _Target(triple, cpu, features, machine)


# Note [512-bit vectors]
# LLVM's tuning for Intel cores with AVX-512 prefers 256-bit vectors (TuningPrefer256Bit):
# on Skylake-SP and Cascade Lake, code that runs 512-bit instructions lowers the clock of
# the whole core. From Ice Lake on the penalty is small, and the loops LLVM vectorises for us
# (element loops of Numba-style code, the distributed reverse sweeps of
# codegen/distribute.py, gathers and scans at O2) are bound by how many loads and stores
# they issue, which 512-bit vectors halve: the 5-point stencil's value and gradient took 17%
# less time (857 -> 708 us) and its forward 18% less (257 -> 210 us; `python -m
# benchmarks.run --only stencil --samples 21`, with LLGRAD_VECTOR_BITS=256 and without, on an
# AVX-512 Xeon). So on such cores the preference is dropped, and LLVM picks 512-bit vectors
# where its cost model finds them faster; our hand-vectorised loops keep their width
# (vmath.vector_width). LLGRAD_VECTOR_BITS=256 keeps LLVM's choice.
_CLOCK_THROTTLING = frozenset({"skylake-avx512", "cascadelake", "cooperlake", "knl", "knm"})


def _wide_vectors(cpu: str, features: str) -> bool:
    """Whether LLVM may use 512-bit vectors on this host (Note [512-bit vectors])."""
    from llgrad.runtime import config
    return ("+avx512f" in features.split(",") and cpu not in _CLOCK_THROTTLING
            and not config.narrow_vectors())


class Jit:
    """Owns the target machine, the pass pipelines and the MCJIT engine.

    Use the process-wide instance from `get_jit()`; modules added to the engine stay alive
    (and their code mapped) for the life of the process.
    """

    def __init__(self, opt_level: int = 2) -> None:
        self.target = _host_target()
        self.opt_level = opt_level
        self._pto = self._tuning(opt_level)
        empty = llvm.parse_assembly("")
        empty.triple = self.target.triple
        self._engine = llvm.create_mcjit_compiler(empty, self.target.machine)
        self._engine.remove_module(empty)  # Note [The engine's empty module]
        self._modules: list[llvm.ModuleRef] = []
        self.compile_seconds = 0.0  # total time LLVM spent compiling modules, for the profiler

    # -- stages, each usable on its own for inspection ----------------------------------
    def parse(self, llvm_ir: str) -> llvm.ModuleRef:
        """Parse and verify LLVM IR text, retargeted to the host."""
        try:
            mod = llvm.parse_assembly(llvm_ir)
            mod.triple = self.target.triple
            mod.data_layout = self.target.data_layout
            mod.verify()
        except RuntimeError as exc:
            raise JitError(f"LLVM rejected the generated module: {exc}") from exc
        return mod

    @staticmethod
    def _tuning(opt_level: int):
        pto = llvm.create_pipeline_tuning_options(speed_level=opt_level)
        pto.loop_vectorization = opt_level >= 2
        pto.slp_vectorization = opt_level >= 2
        pto.loop_unrolling = opt_level >= 2
        pto.loop_interleaving = opt_level >= 2
        return pto

    def optimize(self, mod: llvm.ModuleRef, opt_level: int | None = None) -> llvm.ModuleRef:
        """Run the O2 (or `opt_level`) module pipeline on `mod` in place; level 0 is the
        light pipeline (Note [The light pipeline])."""
        # See Note [Pass managers are single use].
        pto = self._pto if opt_level in (None, self.opt_level) else self._tuning(opt_level)
        with _lock:
            pass_builder = llvm.create_pass_builder(self.target.machine, pto)
            if opt_level == 0:
                pm = llvm.create_new_module_pass_manager()
                for name in LIGHT_PASSES:
                    getattr(pm, f"add_{name}_pass")()
            else:
                pm = pass_builder.getModulePassManager()
            pm.run(mod, pass_builder)
        return mod

    def add(self, mod: llvm.ModuleRef, names: list[str]) -> dict[str, int]:
        """Hand an optimised module to MCJIT, finalize it, and look up `names`."""
        with _lock:
            self._engine.add_module(mod)
            self._engine.finalize_object()
            self._modules.append(mod)
            addresses = {name: self._engine.get_function_address(name) for name in names}
        missing = [name for name, addr in addresses.items() if not addr]
        if missing:
            raise JitError(f"symbols not found after compiling the module: {missing}")
        return addresses

    def check_object(self, object_code: bytes, names: list[str]) -> str | None:
        """Why LLVM must not load `object_code` (objfile.py), or None when it may."""
        try:
            check_object(object_code, names, self.target.triple.split("-")[0],
                         lambda name: llvm.address_of_symbol(name) is not None)
        except BadObject as e:
            return str(e)
        return None

    def add_object(self, object_code: bytes, names: list[str], check: bool = True,
                   ) -> dict[str, int]:
        """Load native object code (e.g. from the disk cache) and look up `names`.

        Raises JitError, and gives LLVM nothing, when the object fails `check_object`; pass
        `check=False` only for object code LLVM just emitted in this process.
        """
        problem = self.check_object(object_code, names) if check else None
        if problem is not None:
            raise JitError(f"object code rejected before loading: {problem}")
        with _lock:
            self._engine.add_object_file(llvm.ObjectFileRef.from_data(object_code))
            self._engine.finalize_object()
            addresses = {name: self._engine.get_function_address(name) for name in names}
        missing = [name for name, addr in addresses.items() if not addr]
        if missing:
            raise JitError(f"symbols {missing} not found in the loaded object code")
        return addresses

    def compile_module(self, llvm_ir: str, names: list[str], cache: ObjectCache | None = None,
                       opt_level: int | None = None) -> dict[str, int]:
        """Parse, optimise (at `opt_level`, default O2) and JIT `llvm_ir`; return the address
        of each function in `names`.

        With `cache`, object code stored for this IR is loaded instead (no LLVM passes), and
        freshly compiled object code is stored; object code that fails the check is recompiled.
        """
        if cache is not None:
            object_code = cache.load(llvm_ir)
            if object_code is not None:
                try:
                    return self.add_object(object_code, names)
                except RuntimeError:  # object code without `names` (JitError): compile
                    pass
        start = time.perf_counter()
        with _lock:
            mod = self.optimize(self.parse(llvm_ir), opt_level)
            if cache is not None:  # one machine-code pass: load the object code to be stored
                object_code = self.target.machine.emit_object(mod)
                addresses = self.add_object(object_code, names, check=False)
            else:
                object_code, addresses = None, self.add(mod, names)
            self.compile_seconds += time.perf_counter() - start
        if object_code is not None and self.check_object(object_code, names) is None:
            cache.store(llvm_ir, object_code)  # (what would be refused on loading is not kept)
        return addresses

    def optimized_ir(self, llvm_ir: str, opt_level: int | None = None) -> str:
        """The module as the pipeline leaves it (a fresh parse; nothing is added to the JIT)."""
        return str(self.optimize(self.parse(llvm_ir), opt_level))

    def assembly(self, llvm_ir: str, opt_level: int | None = None) -> str:
        """Host assembly for the optimised module (a fresh parse; nothing is JIT-compiled)."""
        mod = self.optimize(self.parse(llvm_ir), opt_level)
        with _lock:
            return self.target.machine.emit_assembly(mod)


# Note [The engine's empty module]
# MCJIT is created with a module (an empty one here), and its first `finalize_object` compiles
# whatever modules it holds with the engine's own code generator: setting that up for the
# empty module cost ~1.4 ms CPU, a sixth of a warm start from the disk cache, which then only
# loads object code (`add_object`) and never needs the engine's code generator. The module is
# taken out right after the engine is made (llvmlite gives it back to Python); modules added
# later with `add` are compiled as before.


# Note [The light pipeline]
# Level 0 is not LLVM's O0 (which would leave our allocas in memory) but the few passes the
# lowering's IR needs to become register code: the always-inliner (outlined loops), SROA,
# instcombine, simplifycfg and DCE; the backend (at its usual level) does the rest: strength
# reduction, machine LICM, register allocation. It takes ~1/6 of O1's IR time, a quarter of
# a small model's first call (LSTM, T=8: 190 -> 138 ms CPU; RNN, T=5: 115 -> 85 ms), and
# the code runs up to ~15% slower than O1's (no LICM, loop rotation or IndVarSimplify: RNN,
# T=5, 8.7 -> 9.3 us a call; a loop whose scalar state stays in memory, ~20%). It is chosen
# for modules whose calls do little work and whose IR is not tiny (codegen/compile.py, Note
# [Choosing the optimisation level]), where the first call costs as much as thousands of
# calls.
LIGHT_PASSES = ("always_inliner", "sroa", "instruction_combine", "simplify_cfg",
                "dead_code_elimination")


# Note [Pass managers are single use]
# A ModulePassManager from `PassBuilder.getModulePassManager()` can run only once: LLVM moves
# the passes out when it runs, and a second `run` aborts the process with a failed assertion
# in unique_ptr (llvmlite 0.50 / LLVM 20). A fresh PassBuilder and pass manager per module
# costs well under a millisecond, so we build both per call.


# Note [One JIT per process]
# LLVM's global state (the target registry, loaded libraries, symbol table) is process-wide,
# and MCJIT resolves each module's external symbols against the modules already added, so one
# engine holds every compiled kernel. llvmlite objects are not thread safe: one re-entrant lock
# serialises parse/optimise/add. Compiled code itself is immutable and may run on any thread
# without the lock. We use MCJIT (what numba uses) rather than OrcJIT: it is the engine
# llvmlite documents first. With the on-disk cache (llgrad/cache.py) a module is compiled once to
# object code (`emit_object`), which is both stored and loaded (`add_object`).


def get_jit() -> Jit:
    """The process-wide JIT, created on first use (thread safe)."""
    global _jit
    if _jit is None:
        with _lock:
            if _jit is None:
                with once.paid("JIT set-up"):
                    _jit = Jit()
    return _jit


def set_up_in_background() -> None:
    """Start making the process-wide JIT on a daemon thread, once, if it does not exist yet
    (Note [JIT set-up in the background])."""
    global _started
    if _jit is None and not _started:
        _started = True
        t = threading.Thread(target=_set_up_quietly, name="llgrad-jit-set-up", daemon=True)
        try:
            t.start()
        except RuntimeError:  # no thread to be had: the caller makes the JIT when it needs it
            return
        _set_up_thread[0] = t


def _set_up_quietly() -> None:
    try:
        get_jit()
    except Exception:  # noqa: BLE001 - the caller's own get_jit() raises it where it is seen
        pass


def _finish_set_up() -> None:
    """Wait for a set-up under way: a process forked in its middle would inherit llvmlite's
    lock held by a thread that does not exist in the child, and one that exits in its middle
    (a trace that raised) would tear LLVM down under it."""
    t = _set_up_thread[0]
    if t is not None and t.is_alive() and t is not threading.current_thread():
        t.join()


_started = False
_set_up_thread: list = [None]
os.register_at_fork(before=_finish_set_up)
atexit.register(_finish_set_up)


# Note [JIT set-up in the background]
# Making the JIT (LLVM's target registry, the host's CPU features, a TargetMachine, the MCJIT
# engine) takes ~1.3 ms CPU, and nothing needs it before a trace is done: the cache key and
# the compile come after. The first compiled call of a process therefore starts it on a
# daemon thread before it traces (llgrad/api.py); llvmlite releases the GIL in its calls
# and serialises them with its own lock, so the set-up runs beside the trace on a second
# core, and `get_jit()`'s lock makes whoever needs the JIT first wait for the one being made
# (a warm start from the disk cache: ~1.3 ms less wall time, a sixth of it). A set-up that
# fails on the thread is made again, and raises, when the caller asks for the JIT. Only
# calls into LLVM belong on that thread: Python code there (say, the disk cache's stat of
# llgrad's files) holds the GIL between its system calls and each side then waits up to the
# interpreter's switch interval (5 ms) for it: a warm start measured 14-27 ms instead of 5.


def compile_module(llvm_ir: str, names: list[str], cache: ObjectCache | None = None,
                   opt_level: int | None = None) -> dict[str, int]:
    """Compile LLVM IR text with the process-wide JIT; return {name: function address}.

    `cache` (optional) supplies and keeps the module's object code (see `ObjectCache`);
    `opt_level` overrides the default O2.

    Example:
        >>> src = 'define i64 @twice(i64 %x) {\\n  %y = add i64 %x, %x\\n  ret i64 %y\\n}'
        >>> import ctypes
        >>> addr = compile_module(src, ["twice"])["twice"]
        >>> ctypes.CFUNCTYPE(ctypes.c_int64, ctypes.c_int64)(addr)(21)
        42
    """
    return get_jit().compile_module(llvm_ir, names, cache, opt_level)


def optimized_ir(llvm_ir: str, opt_level: int | None = None) -> str:
    """The optimised LLVM IR text of a module (at `opt_level`, default O2), for inspection."""
    return get_jit().optimized_ir(llvm_ir, opt_level)


def assembly(llvm_ir: str, opt_level: int | None = None) -> str:
    """The host assembly text of a module (at `opt_level`, default O2), for inspection."""
    return get_jit().assembly(llvm_ir, opt_level)


def host_cpu_name() -> str:
    """LLVM's name for the host CPU (e.g. "skylake-avx512"), as used for code generation."""
    return get_jit().target.cpu


def host_cpu_features() -> str:
    """The host CPU features string ("+avx2,+fma,-avx512f,..."), as used for code generation."""
    return get_jit().target.features


def has_host_features(*names: str) -> bool:
    """True when the host CPU has every feature in `names` (e.g. "avx2", "fma")."""
    enabled = {f[1:] for f in host_cpu_features().split(",") if f.startswith("+")}
    return all(name in enabled for name in names)


def load_library(name: str) -> bool:
    """Make a shared library's symbols visible to JIT code; False if it cannot be loaded."""
    with _lock:
        if name not in _loaded_libraries:
            with once.paid("libraries"):
                try:
                    llvm.load_library_permanently(name)
                    _loaded_libraries[name] = True
                except RuntimeError:
                    _loaded_libraries[name] = False
        return _loaded_libraries[name]
