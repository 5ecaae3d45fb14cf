"""Emission: walks a FunctionPlan (plan.py) and emits one LLVM kernel, dispatching each unit
to its primitive's lowering (registry.py); elementwise groups share elementwise.py's loop.
"""
from __future__ import annotations

from llvmlite import ir

from llgrad.runtime.errors import UnsupportedError
from llgrad.runtime.ops.control import cond_p, constant_p

from . import elementwise as ew
from .abi import ALIGN
from .layout import Layout
from .loops import I64, PTR
from .native_errors import Failures, Site
from .plan import ControlUnit, CopyUnit, FunctionPlan, GroupUnit, Unit, _dense, _size
from .ranges import Ranges
from .registry import LOWERINGS


# ---- emission -------------------------------------------------------------------------------
class Ctx:
    """What a lowering sees: the builder, the addresses of values, and `fail_if`."""

    def __init__(self, plan: FunctionPlan, builder: ir.IRBuilder, buffers: list, consts: dict,
                 stats: dict, failures: Failures, ranges: Ranges | None = None):
        self.plan, self.b, self.buffers = plan, builder, buffers
        self.module = builder.module
        self._consts, self.stats = consts, stats
        self.n_params, self.n_results = len(plan.fn.params), len(plan.fn.outputs)
        self.slots: dict = {}   # slot number -> alloca (Note [Carried storage])
        self.stack: dict = {}   # stack array number -> pointer (Note [Small arrays on the
        #                         stack] in plan.py)
        self.tapes: dict = {}   # tape class -> (data, rows, capacity) allocas
        self.tape_counts: dict = {}  # ragged tape class -> its columns' row counts (alloca)
        self.failures = failures
        self.ranges = ranges or Ranges(plan.fn)  # what the IR proves about ints (index checks)
        self.checked: set = set()      # (id of index array, axis size) checked in scope
        self.loop_depth = 0            # loops around the code being emitted
        self.unrolled = 0              # loops marked for unrolling so far, and their
        self.fixed: set = set()        # counters (Note [Unrolled small loops] in unroll.py)
        self.redirect: dict = {}       # storage key -> the buffer it stands for now (Note
        #                                [Swapped carried arrays] in inplace.py)
        self.only: dict | None = None  # the statement a copy of a distributed loop performs
        #                                (Note [Distributed element loops] in distribute.py)

    def copied(self) -> None:
        """Count a copy of an array emitted inside a loop (inspect().stats "array copies in
        loops": a regression of Note [Updates in place] shows there)."""
        if self.loop_depth:
            self.stats["array copies in loops"] += 1

    def fail_if(self, cond: ir.Value, kind: str, op, info: tuple = (),
                value: ir.Value | None = None) -> None:
        """Stop the kernel with an error of `kind` at `op`'s line when the i1 `cond` holds;
        `value` (an i64) is the run-time detail the message shows. Note [Native errors]."""
        self.failures.fail_if(cond, Site(kind, getattr(op, "loc", None), tuple(info)), value)

    def scratch(self, op) -> list:
        """Pointers to the scratch buffers op's lowering asked for (registry.Lowering)."""
        return [self.ptr(v) for v in self.plan.scratch[id(op)]]

    def tape(self, v):
        """The header allocas (data ptr, rows used, rows allocated) of tape value `v`."""
        return self.tapes[self.plan.storage[v][1]]

    def load_scalar(self, v) -> ir.Value:
        """The value of 0-d `v` as an LLVM scalar (bool as i1); constants as immediates."""
        root = self.plan.layout[v].root
        if root.op is not None and root.op.prim is constant_p and _size(root) == 1:
            value = root.op.params["value"].reshape(()).item()
            return ew.Emitter(self.b, 1).const(value, ew.lltype(v.aval.dtype))
        ptr = self.ptr(v) if v in self.plan.storage else self.offset_ptr(self.plan.layout[v])
        return ew._load(self.b, ptr, ir.Constant(I64, 0), v.aval.dtype, 1)

    def store_scalar(self, value: ir.Value, v) -> None:
        """Store an LLVM scalar into 0-d `v`'s storage."""
        ew._store(self.b, value, self.out(v), ir.Constant(I64, 0), v.aval.dtype)

    def _storage_ptr(self, v) -> ir.Value:
        kind, where = self.plan.storage[v]
        if self.redirect and kind in ("temp", "stack", "out") and (kind, where) in self.redirect:
            return self.redirect[(kind, where)]
        if kind == "param":
            return self.buffers[where]
        if kind == "out":
            return self.buffers[self.n_params + where]
        if kind == "const":
            return self._consts(where)
        if kind == "slot":
            return self.slots[where]
        if kind == "stack":
            return self.stack[where]
        if kind == "tape":
            raise AssertionError(f"{v} is a tape; use ctx.tape(v)")
        ws = self.buffers[-1]
        return self.b.gep(ws, [ir.Constant(I64, where)], inbounds=True, source_etype=ew.I8)

    def ptr(self, v) -> ir.Value:
        """Pointer to `v`'s elements, dense row-major (views are materialised or offset)."""
        if v in self.plan.storage:
            return self._storage_ptr(v)
        lay = self.plan.layout[v]
        if not lay.contiguous:
            raise AssertionError(f"{v} is a strided view; its consumer must accept views")
        return self.offset_ptr(lay)

    def offset_ptr(self, lay: Layout) -> ir.Value:
        base = self._storage_ptr(lay.root)
        if lay.offset == 0:
            return base
        return self.b.gep(base, [ir.Constant(I64, lay.offset)], inbounds=True,
                          source_etype=ew.memtype(lay.root.aval.dtype))

    def layout(self, v) -> Layout:
        """`v`'s layout as stored: dense for values with storage, strided for views."""
        if v in self.plan.storage:
            return _dense(v)
        return self.plan.layout[v]

    def out(self, v) -> ir.Value:
        return self._storage_ptr(v)

    def operand(self, v) -> ew.Operand:
        """An elementwise-loop operand: an immediate for scalar constants, else memory."""
        lay = self.layout(v)
        root = self.plan.layout[v].root
        if root.op is not None and root.op.prim is constant_p and _size(root) == 1:
            return ew.Operand(value=root.op.params["value"].reshape(()).item())
        return ew.Operand(ptr=self.offset_ptr(lay) if v not in self.plan.storage
                          else self.ptr(v), strides=lay.strides, dtype=v.aval.dtype)


def emit_function(plan: FunctionPlan, module: ir.Module, name: str, consts, stats,
                  flush_subnormals: bool = False) -> tuple[int, list[Site], int, int]:
    """Emit the kernel `name` for `plan` into `module`; returns its buffer count, its failure
    sites, the workspace offset of its error record (Note [Native errors]) and its number of
    tape headers, which lie just before the record (Note [Tapes in codegen]);
    `flush_subnormals` as abi.define_kernel's."""
    from .abi import TAPE_HEADER, define_kernel
    n = len(plan.fn.params) + len(plan.fn.outputs) + 1
    tapes_at = -(-plan.workspace // 8) * 8
    record = tapes_at + TAPE_HEADER * len(plan.tape_rows)
    with define_kernel(module, name, n, flush_subnormals=flush_subnormals) as (builder, buffers):
        ctx = Ctx(plan, builder, buffers, consts, stats, Failures(builder, buffers[-1], record))
        stats.setdefault("array copies in loops", 0)
        slot_types = {}
        for v, (kind, where) in plan.storage.items():
            if kind == "slot":
                slot_types[where] = ew.memtype(v.aval.dtype)
        from .lowerings.tapes import init_tapes, keep_tapes
        if any(isinstance(u, ControlUnit) and u.op.prim is not cond_p
               for u in plan.all_units()):
            ctx.failures.begin_polling()
        parts = _segments(plan.units)
        if len(parts) > 1 and not plan.tape_rows:
            _emit_segments(ctx, name, len(slot_types), parts)
        else:
            for k in sorted(slot_types):
                ctx.slots[k] = builder.alloca(slot_types[k], name=f"slot{k}")
            ctx.stack = _Stack(builder, plan.stack)
            init_tapes(ctx, tapes_at)
            for u in plan.units:
                _emit_unit(ctx, u)
            keep_tapes(ctx, tapes_at)
        ctx.failures.finish(lambda b: keep_tapes(ctx, tapes_at, failed=True))
    return n, ctx.failures.sites, record, len(plan.tape_rows)


# Note [Kernel segments]
# LLVM's register allocator and schedulers take more than linear time in the size of one
# function (the post-RA scheduler in the size of one basic block), and a long straight-line
# program (unrolled, or just long) is one kernel. So a kernel whose top-level units hold
# more than SEGMENT_OPS ops runs them in internal `noinline` functions of about
# SEGMENT_OPS ops each (a unit is never split), called in order with the kernel's buffers;
# the 0-d values (slots, Note [Carried storage]) live in one array on the kernel's stack,
# passed to every segment, instead of in registers (LLVM still forwards them within a
# segment). Kernels with tapes (loops differentiated in reverse) are not split: their tape
# headers live in the kernel's frame.
# A segment can fail like the kernel (Note [Native errors]): index checks, a user's `raise`,
# LAPACK's INFO, a poll in a loop. It returns an i64 status numbered in the kernel's one list
# of sites (its Failures is `Failures.segment` of the kernel's), writes the run-time value to
# the same error record (the workspace is one of the buffers it gets), and leaves through a
# failure exit of its own that only returns the status: it holds no heap buffer, as the
# kernel holds no tape. The kernel tests the status after each call and leaves through its
# failure exit with it. The polls of a segment's loops compare the interrupt counter with the
# value the kernel read at its entry, passed as the last argument (re-reading it at a
# segment's entry would miss a SIGINT that arrived between two segments' polls). An index
# check made in one segment is made again in a later one (`ctx.checked` is per function).
SEGMENT_OPS = 256


def _unit_ops(u) -> int:
    """Ops a unit emits code for (a control unit: everything in its regions)."""
    if isinstance(u, ControlUnit):
        return 1 + sum(_unit_ops(v) for blk in u.blocks for v in blk.units)
    if isinstance(u, GroupUnit):
        return len(u.ops) + len(u.reds)
    op = u.op
    return 1 + len(getattr(op, "params", {}).get("scatters", ())) if op is not None else 1


def _segments(units) -> list:
    parts, size = [[]], 0
    for u in units:
        n = _unit_ops(u)
        if parts[-1] and size + n > SEGMENT_OPS:
            parts.append([])
            size = 0
        parts[-1].append(u)
        size += n
    return parts


def _emit_segments(ctx: Ctx, name: str, n_slots: int, parts: list) -> None:
    b = ctx.b
    area = b.alloca(ir.ArrayType(I64, max(n_slots, 1)), name="slots")
    stack = _Stack(b, ctx.plan.stack, area=True).area
    start = ctx.failures.start if ctx.failures.start is not None else ir.Constant(I64, 0)
    fnty = ir.FunctionType(I64, [PTR] * (len(ctx.buffers) + 2) + [I64])
    for k, units in enumerate(parts):
        fn = ir.Function(ctx.module, fnty, f"{name}.part{k}")
        fn.linkage = "internal"
        fn.attributes.add("noinline")
        for arg in fn.args[:-1]:
            arg.add_attribute("noalias")
        sb = ir.IRBuilder(fn.append_basic_block("entry"))
        buffers = list(fn.args[:-3])
        seg = Ctx(ctx.plan, sb, buffers, ctx._consts, ctx.stats,
                  ctx.failures.segment(sb, buffers[-1], fn.args[-1]), ctx.ranges)
        seg.slots = _Slots(sb, fn.args[-3])
        seg.stack = _Stack(sb, ctx.plan.stack, base=fn.args[-2])
        for u in units:
            _emit_unit(seg, u)
        sb.ret(ir.Constant(I64, 0))
        seg.failures.finish(lambda _: None)  # a segment holds no heap buffer
        ctx.failures.propagate(b.call(fn, [*ctx.buffers, area, stack, start]))


class _Slots(dict):
    """A segment's slot pointers into the shared array, made on first use in its entry."""

    def __init__(self, builder: ir.IRBuilder, area: ir.Value):
        super().__init__()
        self.b, self.area = builder, area

    def __missing__(self, k: int) -> ir.Value:
        with self.b.goto_entry_block():
            p = self[k] = self.b.gep(self.area, [ir.Constant(I64, k)], inbounds=True,
                                     source_etype=I64)
        return p


class _Stack(dict):
    """Pointers to the stack arrays (Note [Small arrays on the stack]): one alloca each, or,
    with `area`, one alloca holding them all (`.area`), made now, where the kernel starts:
    an alloca after a call LLVM inlines (an outlined loop) is no longer in the entry block,
    and SROA leaves it in memory; or offsets into `base`, the area a segment is given, made
    on first use."""

    def __init__(self, builder: ir.IRBuilder, sizes: list, area: bool = False,
                 base: ir.Value | None = None):
        super().__init__()
        self.b, self.base = builder, base
        self.offsets = [sum(sizes[:k]) for k in range(len(sizes))]
        self.area = _alloca(builder, max(sum(sizes), 1), "stack") if area else None
        if base is None and not area:
            self.update((k, _alloca(builder, n, f"stack{k}")) for k, n in enumerate(sizes))

    def __missing__(self, k: int) -> ir.Value:
        with self.b.goto_entry_block():
            p = self[k] = self.b.gep(self.base, [ir.Constant(I64, self.offsets[k])],
                                     inbounds=True, source_etype=ew.I8)
        return p


def _alloca(b: ir.IRBuilder, size: int, name: str) -> ir.Value:
    """An opaque pointer to `size` bytes of the frame, on a cache line."""
    p = b.alloca(ir.ArrayType(ew.I8, size), name=name)
    p.align = ALIGN
    p.type = PTR  # opaque, as the buffers' pointers (llvmlite types an alloca's pointer)
    return p


def _emit_unit(ctx: Ctx, u: Unit):
    from .lowerings.shape import copy_layout
    try:
        if isinstance(u, GroupUnit):
            from .lowerings.reduce import emit_group
            emit_group(ctx, u)
        elif isinstance(u, ControlUnit):
            from .lowerings.control import emit_control
            emit_control(ctx, u)
        elif isinstance(u, CopyUnit):
            if u.dst is u.src:  # materialise a view into its own storage
                lay, dst = ctx.plan.layout[u.src], ctx.out(u.src)
            else:  # copy a value into a result buffer
                lay, dst = ctx.layout(u.src), ctx.buffers[ctx.n_params + u.dst[1]]
            copy_layout(ctx, lay, dst, u.src.aval.dtype)
            ctx.stats["copies"] = ctx.stats.get("copies", 0) + 1
            ctx.copied()
        else:
            LOWERINGS[u.op.prim].fn(ctx, u.op)
    except UnsupportedError:
        raise
    except Exception as e:
        op = u.op if u.op is not None else (u.ops[0] if getattr(u, "ops", None) else None)
        where = f" ({op.loc})" if op is not None and op.loc else ""
        name = op.prim.name if op is not None else "copy"
        e.add_note(f"During: lowering {name}{where}")
        raise
