"""`Compiled`: what llgrad makes for one call signature, each stage on first use.

From a trace come the optimised forward IR, the joint forward+backward IR (AD) and a native
module per entry ("forward", "joint"); each is made when first needed (Note [Stages on first
use]), and timed into `stats` (what `inspect().stats` shows). Compiling runs with the cyclic
garbage collector paused (Note [No garbage collection while compiling]).
"""
from __future__ import annotations

import gc
import threading
import time
from contextlib import contextmanager

from llgrad import diagnostics
from llgrad.inspection import Stats
from llgrad.runtime import config
from llgrad.runtime.errors import DTypeError, ShapeError
from llgrad.transform import ad, interp
from llgrad.transform.loop_facts import tape_stats
from llgrad.transform.passes.pipeline import optimize
from llgrad.transform.printers.text import print_function

# Note [Stages on first use]
# A script that asks only for gradients never needs the optimised forward IR nor its native
# code, and a warm start from the disk cache (llgrad/cache.py: entries keyed by the traced
# IR) needs neither the IR passes nor AD: the native entries load by the trace's key. So
# `forward`, `joint` and each native module are made on first use. Whether the function is
# differentiable at all is partly known from the trace (a scalar output, float arguments):
# that is checked at once; AD's own refusals surface when the joint is first needed, and
# a joint entry in the disk cache was stored only after AD succeeded on the same IR.

# Note [No garbage collection while compiling]
# Tracing, the IR passes, AD and lowering allocate many objects that live until the compile
# ends (IR values and ops refer to each other, so they are cyclic). Python's collector keeps
# scanning them as they pile up: that doubled the time of the IR passes and AD for a program
# of 10^4 ops. It is paused while anything compiles (reentrant and thread safe; left alone
# if the user disabled it) and collects as usual afterwards.
_GC_LOCK = threading.Lock()
_GC_STATE = {"depth": 0, "resume": False}


@contextmanager
def paused_gc():
    """Pause the cyclic garbage collector for the block (See Note [No garbage collection
    while compiling])."""
    with _GC_LOCK:
        if _GC_STATE["depth"] == 0:
            _GC_STATE["resume"] = gc.isenabled()
            gc.disable()
        _GC_STATE["depth"] += 1
    try:
        yield
    finally:
        with _GC_LOCK:
            _GC_STATE["depth"] -= 1
            if _GC_STATE["depth"] == 0 and _GC_STATE["resume"]:
                gc.enable()


_COMPILE_LOCK = threading.RLock()


class Compiled:
    """Everything llgrad made for one call signature (or one graph of the dynamic path)."""

    def __init__(self, trace, wrt_leaves: list, stats: Stats, name: str,
                 not_differentiable: Exception | None = None, disk_key: str | None = None):
        self.trace, self.wrt_leaves, self.stats, self.name = trace, wrt_leaves, stats, name
        self.not_differentiable = not_differentiable
        self.disk_key = disk_key  # the on-disk cache key (llgrad/cache.py), when enabled
        self.dynamic_reason: Exception | None = None
        # Dynamic-path graphs run through the interpreter until they recur (Note [Compile on
        # reuse] in api.py); staged signatures always compile.
        self.uses = 2
        self.modules: dict = {}  # entry -> codegen CompiledModule
        self.grads_ok = False  # the joint has run (api.py): the fast path may call it
        self.pending_unrolled: list = []  # UnrollWarnings waiting for the compile's cost
        self.checkpoint = None  # the loop schedule (Note [Checkpointed loops])
        self._forward = self._joint = None

    @property
    def guards(self) -> list:
        return self.trace.guards  # Note [Captured values are guarded]

    # -- IR stages --------------------------------------------------------------------------
    @property
    def graph_text(self) -> str:
        return print_function(self.trace.fn)

    @property
    def forward(self):
        """The optimised forward IR."""
        if self._forward is None:
            with _COMPILE_LOCK, paused_gc():
                if self._forward is None:
                    t0 = time.perf_counter()
                    self._forward = optimize(self.trace.fn)
                    self._add("optimize time", time.perf_counter() - t0)
                    self.stats["ops (forward)"] = sum(1 for _ in self._forward.walk())
        return self._forward

    @property
    def joint(self):
        """The optimised forward+backward IR, or None when not differentiable (then
        `not_differentiable` says why)."""
        if self._joint is None and self.not_differentiable is None:
            with _COMPILE_LOCK, paused_gc():
                if self._joint is None and self.not_differentiable is None:
                    self._differentiate()
        return self._joint

    def _differentiate(self) -> None:
        t0 = time.perf_counter()
        # AD differentiates the optimised but unfused forward; fusion runs on the joint.
        unfused = optimize(self.trace.fn, fuse=False)
        t1 = time.perf_counter()
        try:
            joint = ad.grad_function(unfused, self.wrt_leaves, name=self.trace.fn.name + "_grad",
                                     checkpoint=self.checkpoint)
        except (ShapeError, DTypeError, TypeError) as e:
            self.not_differentiable = e  # the value still compiles; grad() raises this
            return
        t2 = time.perf_counter()
        self._joint = optimize(joint)
        self._add("optimize time", t1 - t0 + time.perf_counter() - t2)
        self._add("autodiff time", t2 - t1)
        self.stats["ops (forward+backward)"] = sum(1 for _ in self._joint.walk())
        self.stats.update(tape_stats(self._joint))
        if "checkpointed loops" in joint.meta:  # what the tapes would take without it
            plain = ad.grad_function(unfused, self.wrt_leaves, plain=True)
            plain = optimize(plain)
            self.stats["checkpointed loops"] = joint.meta["checkpointed loops"]
            self.stats["tape bytes (static, without checkpointing)"] = \
                tape_stats(plain)["tape bytes (static)"]

    def _add(self, key: str, seconds: float) -> None:
        self.stats[key] = self.stats.get(key, 0.0) + seconds

    def spent(self) -> float:
        """Seconds this signature has cost so far: tracing, IR passes, AD, codegen."""
        return sum(self.stats.get(k, 0.0) for k in ("trace time", "optimize time",
                                                    "autodiff time", "codegen time"))

    # -- running ----------------------------------------------------------------------------
    def run(self, entry: str, leaves: list) -> list:
        """Run `entry` on the leaves of a call, and the captured arrays the code takes as
        inputs (Note [Captured arrays that change become inputs] in tracer/captures.py)."""
        if self.trace.implicit:
            leaves = [*leaves, *(g.value() for g in self.trace.implicit)]
        if config.disable_jit() or self.uses < 2:
            fn = self.forward if entry == "forward" else self.joint
            if fn is None:
                raise self.not_differentiable
            return interp.run(fn, *leaves)
        m = self.modules.get(entry) or self.module(entry)
        return m[entry](*leaves)

    def module(self, entry: str):
        """The native module of `entry` ("forward" or "joint"), compiled on first use."""
        with _COMPILE_LOCK:
            m = self.modules.get(entry)
            if m is None:
                with paused_gc():
                    m = self.modules[entry] = self._native(entry)
                if self.pending_unrolled:
                    diagnostics.warn_unrolled(self.pending_unrolled, self.spent())
                    self.pending_unrolled = []
        return m

    def _native(self, entry: str):
        from llgrad import cache, codegen
        key = None if self.disk_key is None else self.disk_key + ":" + entry
        t0 = time.perf_counter()
        m, hit = None, False
        if key is not None:
            codegen._load("compiled")
            m = cache.load_module(key)
            hit = m is not None
            if hit:  # no codegen ran: the time is the load's, "codegen time" is 0
                self.stats["disk cache"] = "hit"
                self.stats[f"disk load time ({entry})"] = time.perf_counter() - t0
        if m is None:
            fn = self.forward if entry == "forward" else self.joint
            if fn is None:
                raise self.not_differentiable
            if key is not None:
                m = codegen.compile_functions({entry: fn}, symbol_prefix=_symbol_prefix(key),
                                              keep_object=True)
                cache.store_module(key, m)
            else:
                m = codegen.compile_functions({entry: fn})
            for k, v in m.stats.items():
                if k != "compile seconds":
                    k = _PHASES.get(k, k)
                    self.stats[k if k.endswith(")") else f"{k} ({entry})"] = v
        dt = 0.0 if hit else time.perf_counter() - t0
        self.stats[f"codegen time ({entry})"] = dt
        self._add("codegen time", dt)
        once = codegen.once.claim()
        for k, v in once.items():  # what this process paid once, here
            self.stats[f"one-time: {k}"] = v
        diagnostics.log_compiled(self.name, entry, self.stats, once, not self.modules)
        return m


# codegen's names for its phases -> the names inspect().stats shows
_PHASES = {"lower seconds": "lowering time", "parse seconds": "llvm parse time",
           "optimize seconds": "llvm optimize time", "machine code seconds": "machine code time"}


def _symbol_prefix(key: str) -> str:
    import hashlib
    return hashlib.sha256(key.encode()).hexdigest()[:16]


__all__ = ["Compiled", "paused_gc"]
