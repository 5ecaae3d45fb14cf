"""Walks an llgrad IR function and emits one LLVM kernel for it: the lowering registry, the
plan (views, fusion groups, storage and liveness) and the emission context.

A lowering is registered per primitive with `@lowers(prim)` (views additionally with
`@view(prim)`); a primitive without one is an `UnsupportedError` naming it and the op's source
line. Elementwise primitives all share the generic lowering of elementwise.py; reductions are
loops of the same emitter. Invariants of the emitted kernel: parameters are read only,
results are written once into fresh buffers, temporaries live in one workspace at offsets
chosen by liveness (an op's results never overlap its inputs). See Note [Views] and
Note [Fusion in codegen].
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np
from llvmlite import ir

from llgrad.runtime.errors import UnsupportedError
from llgrad.runtime.ops.control import constant_p, fusion_p
from llgrad.runtime.prim import Primitive

from . import elementwise as ew
from .layout import Layout, contiguous_strides
from .loops import I64, PTR

# Note [Views]
# reshape (of a dense layout), transpose, broadcast_to and basic getitem emit no code: their
# result is a Layout over their input's storage (layout.py). Consumers that read strides (fused
# elementwise loops and reductions, copies, matmul for a transposed operand) read the view
# directly; for any other consumer the view is materialised once, by a strided copy placed where
# the view op stood. Storage roots stay alive until the last read of any view of them.

# Note [Fusion in codegen]
# Elementwise ops of one shape are grouped greedily in program order and emitted as one loop;
# a reduction of a group value joins the group (its accumulation runs inside the loop). A group
# is closed (emitted, at the position of its last member) as soon as anything outside it
# reads one of its values, or a view of one: so every reader runs after the group's loop, and
# a group never reads its own values through memory. Only values read outside the group (or
# returned) are stored. The transform layer's `fusion` op, once it exists, can map onto the
# same GroupUnit.

ALIGN = 64


@dataclass
class Lowering:
    fn: Callable | None = None       # fn(ctx, op): emit code for op
    accepts: Callable | None = None  # accepts(op, i, layout) -> bool: reads a strided view
    view: Callable | None = None     # view(op, layouts) -> Layout | None (None: run fn)
    family: str = "op"               # "op", "elementwise" or "reduce"


LOWERINGS: dict[Primitive, Lowering] = {}


def lowers(prim: Primitive, *, accepts: Callable | None = None, family: str = "op"):
    """Register the lowering of `prim`: `fn(ctx, op)` emits its code with `ctx.b`."""
    def deco(fn):
        entry = LOWERINGS.setdefault(prim, Lowering())
        entry.fn, entry.accepts, entry.family = fn, accepts, family
        return fn
    return deco


def view(prim: Primitive):
    """Register `fn(op, layouts) -> Layout | None` making `prim` a view where possible."""
    def deco(fn):
        LOWERINGS.setdefault(prim, Lowering()).view = fn
        return fn
    return deco


def lowering_of(op) -> Lowering:
    entry = LOWERINGS.get(op.prim)
    if entry is None or (entry.fn is None and entry.view is None):
        raise UnsupportedError(
            f"codegen has no lowering for primitive '{op.prim.name}'", loc=op.loc,
            fix="register one with @lowers in codegen/lowerings/, or run with "
                "LLGRAD_DISABLE_JIT=1 to use the reference interpreter")
    return entry


# ---- units: what the kernel runs, in order ---------------------------------------------------
@dataclass(eq=False)
class Unit:
    op: object = None
    reads: list = field(default_factory=list)
    writes: list = field(default_factory=list)


@dataclass(eq=False)
class OpUnit(Unit):
    pass


@dataclass(eq=False)
class GroupUnit(Unit):
    shape: tuple = ()
    ops: list = field(default_factory=list)
    reds: list = field(default_factory=list)
    red_axes: tuple | None = None
    open: bool = True


@dataclass(eq=False)
class CopyUnit(Unit):
    """Materialise a view (at the view op) or copy a value into a result buffer (at the end)."""
    src: object = None
    dst: object = None
    active: bool = True


class FunctionPlan:
    """Layouts, units, storage and liveness for one IR function."""

    def __init__(self, fn, fuse: bool = True):
        self.fn, self.fuse = fn, fuse
        self.layout: dict = {}
        self.units: list[Unit] = []
        self.consts: list = []
        self.storage: dict = {}
        for v in fn.params:
            self.layout[v] = _dense(v)
        self._build()
        self._decide()
        self._allocate()

    # -- 1. layouts and units -----------------------------------------------------------------
    def _build(self):
        self.open: dict = {}
        self.member: dict = {}  # value -> its open group
        for op in _flatten(self.fn.body.ops):
            if op.regions:
                raise UnsupportedError(
                    f"codegen cannot lower the control-flow op '{op.prim.name}' yet", loc=op.loc,
                    fix="run with LLGRAD_DISABLE_JIT=1 (the interpreter handles it)")
            if op.prim is constant_p:
                self.layout[op.outputs[0]] = _dense(op.outputs[0])
                self.consts.append(op.outputs[0])
                continue
            low = lowering_of(op)
            ins = op.inputs
            if low.view is not None:
                lay = low.view(op, [self.layout[v] for v in ins])
                if lay is not None:
                    out = op.outputs[0]
                    self.layout[out] = lay
                    self._close_readers_of(ins)
                    self.units.append(CopyUnit(op, [out], [out], src=out, dst=out,
                                               active=False))
                    continue
            for v in op.outputs:
                self.layout[v] = _dense(v)
            if low.family == "elementwise":
                self._add_elementwise(op)
            elif low.family == "reduce":
                self._add_reduction(op)
            else:
                self._close_readers_of(ins)
                self.units.append(OpUnit(op, list(ins), list(op.outputs)))
        for g in list(self.open.values()):
            self._close(g)

    def _root(self, v):
        return self.layout[v].root

    def _close_readers_of(self, values, keep=None):
        for v in values:
            for g in {self.member.get(v), self.member.get(self._root(v))}:
                if g is not None and g is not keep:
                    self._close(g)

    def _close(self, g: GroupUnit):
        if not g.open:
            return
        g.open = False
        if self.open.get((g.shape, id(g))) is g:
            del self.open[(g.shape, id(g))]
        for k in [k for k, v in self.member.items() if v is g]:
            del self.member[k]
        self.units.append(g)

    def _group_for(self, shape, axes=None) -> GroupUnit:
        for (s, _), g in self.open.items():
            if s == shape and (axes is None or g.red_axes in (None, axes)):
                return g
        g = GroupUnit(shape=shape)
        self.open[(shape, id(g))] = g
        return g

    def _add_elementwise(self, op):
        shape = op.outputs[0].aval.shape
        g = self._group_for(shape) if self.fuse else GroupUnit(shape=shape)
        for v in op.inputs:  # reading another group's value, or a view of ours, closes it
            for h in {self.member.get(v), self.member.get(self._root(v))}:
                if h is not None and (h is not g or self._root(v) is not v):
                    self._close(h)
        if not g.open:
            g = self._group_for(shape)
        g.ops.append(op)
        self._member(g, op.outputs)
        if not self.fuse:
            self._close(g)

    def _add_reduction(self, op):
        x = op.inputs[0]
        axes = tuple(op.params.get("axes", ()))
        g = self.member.get(x) if self.fuse and self._root(x) is x else None
        if g is not None and g.shape == x.aval.shape and g.red_axes in (None, axes):
            g.red_axes = axes
            g.reds.append(op)
            self._member(g, op.outputs)
            return
        self._close_readers_of([x])
        g = GroupUnit(shape=x.aval.shape, red_axes=axes, open=False)
        g.reds.append(op)
        self.units.append(g)

    def _member(self, g, values):
        for v in values:
            self.member[v] = g

    # -- 2. what is read, what is stored, what is materialised --------------------------------
    def _decide(self):
        results = self.fn.outputs
        result_set = set(results)
        readers: dict = {}
        for u in self.units:
            if isinstance(u, GroupUnit):
                inside = {v for op in u.ops + u.reds for v in op.outputs}
                u.reads = list(dict.fromkeys(
                    v for op in u.ops + u.reds for v in op.inputs if v not in inside))
            for v in u.reads:  # a view's reader reads its root too
                readers.setdefault(v, []).append(u)
                readers.setdefault(self._root(v), []).append(u)
        for u in self.units:
            if isinstance(u, GroupUnit):
                u.writes = [v for op in u.ops for v in op.outputs
                            if v in result_set or any(r is not u for r in readers.get(v, []))]
                u.writes += [v for op in u.reds for v in op.outputs]
        self.materialised = set()
        for u in self.units:
            if isinstance(u, OpUnit):
                low = LOWERINGS[u.op.prim]
                for i, v in enumerate(u.reads):
                    lay = self.layout[v]
                    if lay.root is not v and not lay.contiguous and not (
                            low.accepts and low.accepts(u.op, i, lay)):
                        self.materialised.add(v)
        for u in self.units:
            if isinstance(u, CopyUnit) and u.src in self.materialised:
                u.active = True
                u.reads = [self._root(u.src)]
        self.units = [u for u in self.units if not (isinstance(u, CopyUnit) and not u.active)]
        # results: write into the result buffer directly when this function computes them
        owned = {v for u in self.units for v in u.writes}
        for j, r in enumerate(results):
            if r in owned and r not in self.storage:
                self.storage[r] = ("out", j)
            else:
                self.units.append(CopyUnit(None, [r], [], src=r, dst=("out", j)))

    def owns(self, v) -> bool:
        return v in self.storage or self.layout[v].root is v or v in self.materialised

    # -- 3. storage ---------------------------------------------------------------------------
    def _allocate(self):
        for i, v in enumerate(self.fn.params):
            self.storage[v] = ("param", i)
        for v in self.consts:
            self.storage[v] = ("const", v)
        last: dict = {}
        for t, u in enumerate(self.units):
            for v in u.reads:
                s = v if (v in self.materialised or self._root(v) is v) else self._root(v)
                last[s] = t
        live: list = []  # (offset, size, value)
        self.workspace = 0
        for t, u in enumerate(self.units):
            for v in u.writes:
                if v in self.storage:
                    continue
                size = max(v.aval.size if hasattr(v.aval, "size") else _size(v), 1) * \
                    np.dtype(v.aval.dtype).itemsize
                size = -(-size // ALIGN) * ALIGN
                off = 0
                for o, s, _ in sorted(live, key=lambda e: e[0]):
                    if off + size <= o:
                        break
                    off = max(off, o + s)
                live.append((off, size, v))
                self.storage[v] = ("temp", off)
                self.workspace = max(self.workspace, off + size)
            live = [e for e in live if last.get(e[2], -1) > t]


class _Inlined:
    """An op of a `fusion` body, with the region's params/results renamed to the outer values."""

    __slots__ = ("prim", "inputs", "params", "outputs", "regions", "loc")

    def __init__(self, op, env):
        self.prim, self.params, self.regions, self.loc = op.prim, op.params, op.regions, op.loc
        self.inputs = [env.get(v, v) for v in op.inputs]
        self.outputs = [env.get(v, v) for v in op.outputs]


def _flatten(ops):
    """The ops, with each `fusion` op replaced by its body (codegen regroups them, and can then
    fuse a following reduction into the same loop; Note [Fusion in codegen])."""
    for op in ops:
        if op.prim is not fusion_p:
            yield op
            continue
        body = op.regions[0]
        env = dict(zip(body.params, op.inputs))
        env.update(zip(body.results, op.outputs))
        for inner in body.ops:
            yield _Inlined(inner, env)


def _size(v) -> int:
    return int(np.prod(v.aval.shape, dtype=np.int64))


def _dense(v) -> Layout:
    return Layout(v, tuple(v.aval.shape), contiguous_strides(v.aval.shape))


# ---- emission -------------------------------------------------------------------------------
class Ctx:
    """What a lowering sees: the builder and the addresses of values."""

    def __init__(self, plan: FunctionPlan, builder: ir.IRBuilder, buffers: list, consts: dict,
                 stats: dict):
        self.plan, self.b, self.buffers = plan, builder, buffers
        self.module = builder.module
        self._consts, self.stats = consts, stats
        self.n_params, self.n_results = len(plan.fn.params), len(plan.fn.outputs)

    def _storage_ptr(self, v) -> ir.Value:
        kind, where = self.plan.storage[v]
        if kind == "param":
            return self.buffers[where]
        if kind == "out":
            return self.buffers[self.n_params + where]
        if kind == "const":
            return self._consts(where)
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


def emit_function(plan: FunctionPlan, module: ir.Module, name: str, consts, stats) -> int:
    """Emit the kernel `name` for `plan` into `module`; returns its buffer count."""
    from .abi import define_kernel
    n = len(plan.fn.params) + len(plan.fn.outputs) + 1
    with define_kernel(module, name, n) as (builder, buffers):
        ctx = Ctx(plan, builder, buffers, consts, stats)
        for u in plan.units:
            _emit_unit(ctx, u)
    return n


def _emit_unit(ctx: Ctx, u: Unit):
    from .lowerings.shape import copy_layout
    try:
        if isinstance(u, GroupUnit):
            from .lowerings.reduce import emit_group
            emit_group(ctx, u)
        elif isinstance(u, CopyUnit):
            if u.dst is u.src:  # materialise a view into its own storage
                lay, dst = ctx.plan.layout[u.src], ctx.out(u.src)
            else:  # copy a value into a result buffer
                lay, dst = ctx.layout(u.src), ctx.buffers[ctx.n_params + u.dst[1]]
            copy_layout(ctx, lay, dst, u.src.aval.dtype)
            ctx.stats["copies"] = ctx.stats.get("copies", 0) + 1
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
