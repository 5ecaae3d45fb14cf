"""How compiled code stops with an error, and how Python raises it (Note [Native errors]).

Emission: `Failures`, one per kernel, is the one place that emits "fail with kind K at op O"
(`fail_if`) and the polls for Ctrl-C (`poll`, Note [Interrupting compiled loops]).
Python: `Site` describes each place a kernel can fail; `raise_for` is the one place that turns
a kernel's nonzero status into the exception. Kinds are the keys of `KINDS`, plus "interrupt".
"""
from __future__ import annotations

import _signal  # signal.getsignal maps the result to an enum: ~2 us, this ~20 ns
import ctypes
from collections.abc import Callable
from dataclasses import dataclass

import llvmlite.binding as llvm
from llvmlite import ir

from llgrad.runtime.errors import IndexingError, LinAlgError, OutOfMemoryError, SourceLoc

from .loops import I64, PTR

# Note [Native errors]
# A kernel returns an i64 status: 0 when it ran to the end, k + 1 when it stopped at its
# failure site k. A `Site` is one place in the generated code that can fail: its kind, the
# SourceLoc of the op it belongs to (the user's line), and the static facts its message
# needs (the axis and its size, what was being allocated, the user's exception). Sites are
# numbered per kernel while it is lowered and kept in the module's layout (so the disk cache
# keeps them with the object code). What is known only at run time, one i64 (the offending
# index, the bytes requested), goes to the kernel's error record: 8 bytes at `record`, the end
# of its workspace (per thread, like the workspace).
# Emission: a lowering calls `ctx.fail_if(cond, kind, op, info, value)`; `Failures.fail_if`
# branches, marked unlikely, to a block of its own that stores `value` in the record and jumps
# to the kernel's one failure exit, which frees every heap buffer the kernel holds (the tapes,
# also those a successful call kept in the workspace, Note [Tapes in codegen]; a failed
# realloc leaves the old buffer in the tape's header, so it is freed too) and returns the
# status, a phi over the sites. The success path pays only the checks themselves (an index
# test is one unsigned compare) and, in Python, one test of the returned int.
# Raising: `Entry.run` (compiled.py) hands a nonzero status to `raise_for` with the
# record's value: kind "index" raises IndexingError (an IndexError) with numpy's message, as
# the interpreter does; "memory" OutOfMemoryError (a MemoryError); "user" raises `cls(*args)`
# from info = (cls, args) with a note naming the line (for a user `raise` inside a traced
# branch; a lowering adds its own kinds to KINDS the same way). "interrupt" is not an error:
# see Note [Interrupting compiled loops].
# A kernel split into segment functions passes their statuses on (Note [Kernel segments] in
# lower.py).
# The kernel has no side effects but its results (parameters are read only; results and the
# workspace are private to the call), so a failed call leaves nothing to undo.

# Note [Interrupting compiled loops]
# Ctrl-C cannot reach a running kernel through Python: ctypes releases the GIL for the call,
# and CPython's C-level SIGINT handler only sets a flag its eval loop reads between bytecodes.
# So a native handler, `llgrad_on_sigint` (compiled with the calling trampoline, abi.py), is
# chained in front of CPython's: it increments the process-wide counter `llgrad_interrupts`
# and calls the handler it displaced, so Python still sees the signal. A kernel with staged
# loops reads the counter at entry and again in its loops (where and how often: Note [Where
# loops poll] in lowerings/control.py), leaving through the loop's "interrupt" site when it
# changed. That read is a *volatile* load: an atomic one (even monotonic) counts as a write to
# all memory for LLVM's alias analysis, and kept every workspace store in the loops; a
# volatile load of a global clobbers nothing else and is never hoisted. `raise_for` then runs
# Python's pending signal handlers (PyErr_CheckSignals): the default one raises
# KeyboardInterrupt; if the user's handler returns, the call is run again from the start (the
# kernel has no side effects, so that is the interrupted call continuing). A counter rather
# than a flag: nothing resets it, so kernels running in several threads neither miss nor
# swallow a signal (in a thread other than the main one no handler runs, and the call
# reruns). The hook is installed before the first call of an entry that polls, only over a
# handler Python installed (never over SIG_DFL or SIG_IGN), and again when the Python-level
# handler changed since (signal.signal puts CPython's C handler back, displacing ours); that
# check is ~30 ns per call of such an entry.


@dataclass(frozen=True)
class Site:
    """One place where a kernel can fail: `kind` (a key of KINDS, or "interrupt"), the op's
    source location, and the static facts the message needs (`info`, per kind)."""

    kind: str
    loc: SourceLoc | None
    info: tuple = ()


def index_message(index: int, axis: int, size: int) -> str:
    """numpy's words for an out-of-bounds index (the interpreter raises numpy's own)."""
    return f"index {index} is out of bounds for axis {axis} with size {size}"


def _index(site: Site, value: int) -> BaseException:
    axis, size = site.info
    return IndexingError.out_of_bounds(index_message(value, axis, size), site.loc)


def _memory(site: Site, value: int) -> BaseException:
    what, = site.info
    return OutOfMemoryError(
        f"compiled code could not allocate {value} bytes for {what}", site.loc,
        "the loop keeps what its gradient needs from every iteration: run fewer iterations, "
        "or carry smaller arrays through the loop")


def _user(site: Site, value: int) -> BaseException:
    from llgrad.runtime.ops.control import check_exception
    cls, args = site.info
    return check_exception(cls, args, site.loc)


def _linalg(site: Site, value: int) -> BaseException:
    """A LAPACK routine's nonzero INFO: info = (numpy's message, with {} for `value`,)."""
    message, = site.info
    return LinAlgError.numpy(message.format(value), site.loc)


KINDS: dict[str, Callable[[Site, int], BaseException]] = {
    "index": _index, "memory": _memory, "user": _user, "linalg": _linalg,
}


def raise_for(site: Site, value: int) -> None:
    """Raise the exception of a kernel that stopped at `site` (the record held `value`).

    Returns normally only after an interrupt whose signal handlers did not raise: the caller
    runs the call again (Note [Interrupting compiled loops]).
    """
    if site.kind == "interrupt":
        ctypes.pythonapi.PyErr_CheckSignals()  # runs the handlers; raises what they raise
        return
    raise KINDS[site.kind](site, value)


# ---- the SIGINT hook (Note [Interrupting compiled loops]) --------------------------------
# The counter and the displaced handler live in memory owned here, named to the JIT before
# anything that reads them is compiled (kernels, and the handler in abi's support module).
_COUNTER = ctypes.c_int64(0)
_PREVIOUS = ctypes.c_void_p(0)
llvm.add_symbol("llgrad_interrupts", ctypes.addressof(_COUNTER))
llvm.add_symbol("llgrad_sigint_previous", ctypes.addressof(_PREVIOUS))
_getsig = ctypes.pythonapi.PyOS_getsig
_getsig.argtypes, _getsig.restype = [ctypes.c_int], ctypes.c_void_p
_setsig = ctypes.pythonapi.PyOS_setsig
_setsig.argtypes, _setsig.restype = [ctypes.c_int, ctypes.c_void_p], ctypes.c_void_p
_getsignal, _SIGINT = _signal.getsignal, _signal.SIGINT
_UNSEEN = object()
_hooked = [_UNSEEN]  # the Python-level SIGINT handler when the hook was last (re)installed


def _global(module: ir.Module, name: str, ty: ir.Type) -> ir.GlobalVariable:
    g = module.globals.get(name)
    return g if g is not None else ir.GlobalVariable(module, ty, name)


def define_sigint_handler(module: ir.Module, name: str) -> None:
    """Add `void <name>(i32)`, the chained SIGINT handler, to `module`."""
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [ir.IntType(32)]), name)
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    b.atomic_rmw("add", _global(module, "llgrad_interrupts", I64), ir.Constant(I64, 1),
                 "monotonic")
    prev = b.load(_global(module, "llgrad_sigint_previous", PTR), typ=PTR)
    real = b.icmp_unsigned(">", b.ptrtoint(prev, I64), ir.Constant(I64, 1))  # not DFL/IGN
    with b.if_then(real):
        from .abi import callable_pointer
        b.call(callable_pointer(b, prev, fn.function_type), [fn.args[0]])
    b.ret_void()


def watch_interrupts() -> None:
    """Make sure SIGINT reaches polling kernels (cheap when nothing changed)."""
    if _getsignal(_SIGINT) is not _hooked[0]:
        _hook()


def _hook() -> None:
    from .abi import support_address
    handler = _getsignal(_SIGINT)
    _hooked[0] = handler
    if not callable(handler):  # SIG_DFL, SIG_IGN, or set outside Python: leave it alone
        return
    ours = support_address("llgrad_on_sigint")
    current = _getsig(_SIGINT) or 0
    if current != ours:
        _PREVIOUS.value = current
        _setsig(_SIGINT, ours)


# ---- emission ---------------------------------------------------------------------------
class _VolatileLoad(ir.instructions.LoadInstr):
    """`load volatile i64, ptr @g, align 8` (llvmlite's LoadInstr cannot say volatile)."""

    def descr(self, buf):
        [ptr] = self.operands
        buf.append(f"load volatile {self.type}, {ptr.type} {ptr.get_reference()}, align 8\n")


class Failures:
    """The failure sites of one kernel body, its failure exit and its interrupt polls."""

    def __init__(self, builder: ir.IRBuilder, workspace: ir.Value, record: int):
        self.b, self.workspace, self.record = builder, workspace, record
        self.sites: list[Site] = []
        self._ids: dict[Site, int] = {}
        self._exit: ir.Block | None = None
        self._status: ir.PhiInstr | None = None
        self.start: ir.Value | None = None  # the interrupt counter at kernel entry
        self._countdown = None

    def segment(self, builder: ir.IRBuilder, workspace: ir.Value, start: ir.Value,
                ) -> Failures:
        """The failures of a segment function of this kernel (Note [Kernel segments] in
        lower.py): numbered in this kernel's sites, polling against `start` (an i64
        argument: the counter this kernel read at entry), with an exit of its own."""
        seg = Failures(builder, workspace, self.record)
        seg.sites, seg._ids, seg.start = self.sites, self._ids, start
        return seg

    def fail_if(self, cond: ir.Value, site: Site, value: ir.Value | None = None) -> None:
        """Leave the kernel through `site` when the i1 `cond` holds; `value` (an i64) goes to
        the error record. The builder continues on the path where `cond` is false."""
        b = self.b
        try:
            k = self._ids.setdefault(site, len(self.sites))
        except TypeError:  # unhashable info (a user's exception arguments): not shared
            k = len(self.sites)
        if k == len(self.sites):
            self.sites.append(site)
        fn = b.function
        bad, ok = fn.append_basic_block(f"fail.{site.kind}"), fn.append_basic_block("ok")
        b.cbranch(cond, bad, ok).set_weights([1, 1 << 20])
        b.position_at_end(bad)
        if value is not None:
            at = b.gep(self.workspace, [ir.Constant(I64, self.record)], inbounds=True,
                       source_etype=ir.IntType(8))
            b.store(value, at)
        self._leave(ir.Constant(I64, k + 1))
        b.position_at_end(ok)

    def propagate(self, status: ir.Value) -> None:
        """Leave through the failure exit with `status` (a segment's) unless it is 0."""
        b, fn = self.b, self.b.function
        bad, ok = fn.append_basic_block("fail.segment"), fn.append_basic_block("ok")
        b.cbranch(b.icmp_unsigned("!=", status, ir.Constant(I64, 0)), bad, ok) \
            .set_weights([1, 1 << 20])
        b.position_at_end(bad)
        self._leave(status)
        b.position_at_end(ok)

    def _leave(self, status: ir.Value) -> None:
        """Branch from the current block to the failure exit, returning `status`."""
        b = self.b
        if self._exit is None:
            self._exit = b.function.append_basic_block("fail.exit")
            with b.goto_block(self._exit):
                self._status = b.phi(I64, name="status")
        self._status.add_incoming(status, b.block)
        b.branch(self._exit)

    def begin_polling(self) -> None:
        """At kernel entry: read the interrupt counter the polls compare with."""
        self.start = self._interrupts()

    def poll(self, loc: SourceLoc | None, every: int = 1) -> None:
        """In a loop body: leave through an "interrupt" site if SIGINT arrived since entry;
        with `every` > 1, only each `every`-th time (a countdown in a register, shared by
        the kernel's loops)."""
        b = self.b
        if every == 1:
            now = self._interrupts()
            self.fail_if(b.icmp_unsigned("!=", now, self.start), Site("interrupt", loc))
            return
        if self._countdown is None:
            with b.goto_entry_block():
                self._countdown = b.alloca(I64, name="poll.countdown")
                b.store(ir.Constant(I64, every), self._countdown)
        left = b.sub(b.load(self._countdown, typ=I64), ir.Constant(I64, 1))
        b.store(left, self._countdown)
        with b.if_then(b.icmp_signed("<=", left, ir.Constant(I64, 0)), likely=False):
            b.store(ir.Constant(I64, every), self._countdown)
            self.poll(loc)

    def _interrupts(self) -> ir.Value:
        b = self.b
        load = _VolatileLoad(b.block, _global(b.module, "llgrad_interrupts", I64), typ=I64)
        b._insert(load)  # noqa: SLF001 - llvmlite's builder has no volatile loads
        return load

    def finish(self, cleanup: Callable[[ir.IRBuilder], None]) -> None:
        """Emit the failure exit: `cleanup(builder)` (free heap buffers), return the status."""
        if self._exit is None:
            return
        with self.b.goto_block(self._exit):
            cleanup(self.b)
            self.b.ret(self._status)
