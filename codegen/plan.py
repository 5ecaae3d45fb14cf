"""The plan of one kernel: views, fusion groups, units in order, carried storage, tapes,
in-place accumulations, and workspace offsets by liveness (regions included).

Invariants of a plan: parameters are read only, results are written once into fresh buffers,
temporaries live in one workspace at offsets chosen by liveness (an op's results never
overlap its inputs). See Note [Views] and Note [Fusion in codegen].
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from llgrad.runtime.aval import Aval
from llgrad.runtime.ops.control import (cond_p, constant_p, for_loop_p, fusion_p, tape_new_p,
                                        tape_push_p, while_loop_p)
from llgrad.runtime.prim import Primitive
from llgrad.transform import control
from llgrad.transform.control import CONTROL, describe
from llgrad.transform.ir import Value
from llgrad.transform.passes.fuse import accumulation_trees, use_counts

from .abi import ALIGN
from .arena import Arena
from .layout import Layout, contiguous_strides
from .registry import LOWERINGS, lowering_of

# Note [Views]
# reshape (of a dense layout), transpose, broadcast_to and basic getitem emit no code: their
# result is a Layout over their input's storage (layout.py). Consumers that read strides (fused
# elementwise loops and reductions, copies, matmul for a transposed operand) read the view
# directly; for any other consumer the view is materialised once, by a strided copy placed where
# the view op stood. Storage roots stay alive until the last read of any view of them.

# Note [Fusion in codegen]
# Which ops share a loop is decided once, by the transform pass (transform/passes/fuse.py,
# Note [Fusion is decided once]): a `fusion` op is one GroupUnit, its elementwise ops and
# reductions run in one loop emitted where the op stands; an elementwise op or reduction
# outside one is a GroupUnit of its own. The planner never splits or merges them, so the IR
# `inspect()` shows is what runs. Only values read outside the group (or returned) are
# stored, and a group's reductions accumulate inside its loop.


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


@dataclass(eq=False)
class CopyUnit(Unit):
    """Materialise a view (at the view op) or copy a value into a result buffer (at the end)."""
    src: object = None
    dst: object = None
    active: bool = True


@dataclass(eq=False)
class ControlUnit(Unit):
    """A cond/for_loop/while_loop op: its regions as Blocks of units (lowerings/control.py)."""
    blocks: list = field(default_factory=list)


@dataclass(eq=False)
class Block:
    """One region of a control op: its params, units in order, and the values it yields.
    `stage` maps a yielded position to the workspace value the yield copies through (when
    the yielded value's storage is one of the carried buffers; see Note [Carried storage]);
    `swaps` lists the pairs of positions of a for body that exchange their buffers instead
    (Note [Swapped carried arrays] in inplace.py)."""
    region: object = None
    params: list = field(default_factory=list)
    units: list = field(default_factory=list)
    results: list = field(default_factory=list)
    stage: dict = field(default_factory=dict)
    swaps: list = field(default_factory=list)


# Note [Carried storage]
# A loop's carried values live in one buffer per carried position, shared by the loop op's
# outputs and the region params (for_loop body; while cond and body): the init values are copied
# in before the loop, each iteration's yield copies the yielded values into the buffers, and
# after the loop the outputs are read straight from them (no final copy). 0-d values (carried or
# not) are `slot`s: allocas in the entry block, which mem2reg/SROA turn into SSA registers and
# phis, so a scalar loop runs in registers. Arrays get workspace space. The yield is a parallel
# assignment: 0-d values are all loaded before any store, an array whose storage is one of the
# carried buffers (a permutation, or a view of a param) is first copied to a staging buffer, and
# a value already in its own buffer (pass-through, or an in-place accumulation) is not copied.
# cond region params alias their operands (their layout is the operand's: no copy); each branch
# copies its results into the cond's outputs. Workspace: every value of a region gets its own
# space, valid while the outermost control op runs (no reuse inside regions); top-level values
# read inside a region stay live until the control op ends.

# Note [In-place accumulation]
# The reverse sweep of a loop accumulates the cotangent of an array the body indexes as
# `ct_next = ct + scatter_add(g, i) + ...` (ct a carried array). Lowered literally that is O(size)
# per iteration (zero-fill, scatter, add): O(n^2) for a loop over n elements. The planner
# rewrites every tree of `add`s whose leaves include scatter_adds used only by the tree into one
# `accumulate` op (copy the other leaves' sum, then scatter-add each g at its indices), and when
# one leaf is the loop's carried ct, read only here, and the tree's root is yielded at ct's
# position, the result takes ct's buffer: the update is O(size of g), in place. A tree of
# many scatters (a gradient of thousands of element reads) becomes a chain of accumulates of
# MAX_SCATTERS each, each after the first in place, so that no unit's code is unbounded
# (Note [Kernel segments]).
# The trees are found by transform/passes/fuse.py `accumulation_trees`, which the fusion pass
# asks too, so that it leaves their adds outside `fusion` ops.
MAX_SCATTERS = 64

# Note [Tapes in codegen]
# A tape value is a header {data, rows used, rows allocated}: three allocas (promoted to
# registers), one per tape *class* (the values one tape_new flows into through tape_push, loop
# carries and cond operands/results share a header, so pushing never copies a header). tape_new
# resets the row count and makes sure the heap buffer holds `rows` rows (16 when the count is
# dynamic, None), reusing a buffer left by an earlier execution; tape_push grows it by
# realloc (doubling) when full; tape_get copies one row. A header starts each call from the
# {data, rows allocated} its tape had when the last call in this thread returned, kept in the
# workspace before the error record (abi.TAPE_HEADER bytes each; {null, 0} at first), and goes
# back there when the call succeeds: the buffer outlives the call (Note [Workspaces] in
# compiled.py). A call that fails, and a buffer over lowerings/tapes.KEEP_BYTES, free it.
# A ragged tape (tape_new {ragged}, Note [Ragged tapes] in transform/vmap_control.py) also
# has an alloca of its columns' row counts (`tape_ragged`: the number of leading column dims
# of its rows); its header's rows used is the largest count.


# Note [Small arrays on the stack]
# An array of at most STACK_BYTES made by a loop or inside one (a work array of a
# Numba-style loop: `xc = np.zeros(d)` updated element by element, d = 10) lives in an
# alloca of the kernel's entry block, not in the workspace, up to STACK_TOTAL bytes a
# kernel; each such value (with the values that share its storage: carried, in-place) has an
# alloca of its own. LLVM knows that an alloca whose address escapes only into calls made
# during the kernel aliases no parameter, result, workspace temporary or other alloca: the
# workspace is one buffer, whose temporaries LLVM cannot tell apart. So loads of loop
# invariants leave loops that store into the work array (`xc[c]` in `Qxc[r] += icf[j, pos]
# * xc[c]`), and once the loops over it are unrolled (Note [Unrolled small loops] in
# unroll.py) SROA keeps its elements in registers. Arrays outside loops stay in the
# workspace: in vectorised code (gmm) allocas bought nothing and cost 25% more LLVM time.
# A kernel run in segments (Note [Kernel segments] in lower.py) keeps its stack arrays in
# one area of its frame, passed to every segment, like its slots.
STACK_BYTES, STACK_TOTAL = 512, 8192


class _AccumOp:
    """Codegen's `accumulate` op (Note [In-place accumulation]): out = sum(bases), then
    out[key_j] += g_j for each scatter. inputs = bases + (g_j, *idx_j) per scatter; params
    "scatters" holds (key_j, number of index arrays, the scatter_add op) per scatter."""

    __slots__ = ("prim", "inputs", "params", "outputs", "regions", "loc")

    def __init__(self, root, bases, scatters, inplace, outputs=None):
        self.prim, self.regions, self.loc = accumulate_p, [], root.loc
        self.outputs = list(root.outputs if outputs is None else outputs)
        self.inputs = list(bases)
        keys = []
        for s in scatters:
            self.inputs += list(s.inputs)
            keys.append((s.params["key"], len(s.inputs) - 1, s))
        self.params = {"nbases": len(bases), "scatters": keys, "inplace": inplace}


accumulate_p = Primitive("accumulate", "codegen", None, None, nondiff=True)


class FunctionPlan:
    """Layouts, units, storage and liveness for one IR function (regions included)."""

    def __init__(self, fn):
        self.fn = fn
        self.layout: dict = {}
        self.consts: list = []
        self.storage: dict = {}
        self.alias: dict = {}      # value -> value whose storage it shares (in-place)
        self.scratch: dict = {}    # id(op) -> its scratch values (Lowering.scratch)
        self.slots = 0
        self.stack: list = []      # bytes of each stack array (Note [Small arrays on the stack])
        self._prepare()
        for v in fn.params:
            self.layout[v] = _dense(v)
        self.top = Block(fn.body, list(fn.params), [], list(fn.outputs))
        self._build()
        self.units = self.top.units
        self._decide()
        from .inplace import plan_updates
        plan_updates(self)
        self._allocate()

    # -- 0. op lists per region, uses, tapes, accumulation trees ------------------------------
    def _prepare(self):
        self.region_ops: dict = {}
        regions = []   # (region, kind, owner op)

        def visit(region, kind, owner):
            self.region_ops[id(region)] = list(region.ops)
            regions.append((region, kind, owner))
            for op in region.ops:
                if op.regions and op.prim is not fusion_p:
                    kinds = {cond_p: ("cond", "cond"), for_loop_p: ("for",),
                             while_loop_p: ("whilecond", "while")}[op.prim]
                    for r, k in zip(op.regions, kinds):
                        visit(r, k, op)

        visit(self.fn.body, "top", None)
        self.uses = use_counts(self.fn)
        self._tapes(regions)
        for region, kind, owner in regions:
            self.region_ops[id(region)] = self._accumulations(region, kind, owner)

    def _tapes(self, regions):
        parent: dict = {}

        def find(v):
            while parent.get(v, v) is not v:
                v = parent[v]
            return v

        def union(a, b):
            ra, rb = find(a), find(b)
            parent.setdefault(b, b)  # every value met is in `parent` (a root points to itself)
            if ra is not rb:
                parent[ra] = rb

        seeds, ragged = [], []
        for region, _, _ in regions:
            for op in self.region_ops[id(region)]:
                if op.prim is tape_new_p:
                    seeds.append(op.outputs[0])
                    if op.params.get("ragged"):
                        ragged.append((op.outputs[0], op.params["ragged"]))
                elif op.prim is tape_push_p:
                    union(op.outputs[0], op.inputs[0])
                elif op.prim is not fusion_p and (cf := describe(op)) is not None:
                    # one class across the op's state
                    for ps in cf.entries(op):
                        for a, p in zip(cf.state(op), ps):
                            union(a, p)
                        if cf.loop:
                            for r, p in zip(cf.body(op).results, ps):
                                union(r, p)
                    for r in cf.yielding(op):
                        for res, o in zip(r.results, op.outputs):
                            union(res, o)
        tape_roots = {}
        for v in seeds:
            tape_roots.setdefault(find(v), len(tape_roots))
        self.tape_class: dict = {}
        self.tape_rows: dict = {}   # class -> (row shape, dtype)
        for v in set(parent) | set(seeds):
            k = tape_roots.get(find(v))
            if k is not None:
                self.tape_class[v] = k
                self.tape_rows[k] = (tuple(v.aval.shape[1:]), np.dtype(v.aval.dtype))
        # ragged tape class -> its number of column dims (Note [Ragged tapes])
        self.tape_ragged: dict = {tape_roots[find(v)]: r for v, r in ragged}

    def _accumulations(self, region, kind, owner):
        ops = self.region_ops[id(region)]
        uses = self.uses
        absorbed, replace = set(), {}
        for op, inner, scatters, bases in accumulation_trees(ops, uses):
            out = op.outputs[0]
            inplace = None
            ks = [k for k, r in enumerate(region.results) if r is out]
            if kind in ("for", "while") and uses.get(out, 0) == 1 and ks:
                p = CONTROL[owner.prim].carried(region)[ks[0]]
                at = [j for j, w in enumerate(bases) if w is p]
                if at and uses.get(p, 0) == 1 and p not in self.tape_class:
                    inplace = p
                    bases.insert(0, bases.pop(at[0]))
            absorbed.update(id(d) for d in inner + scatters)
            chain = []  # MAX_SCATTERS at a time, each after the first in place
            for k in range(0, len(scatters), MAX_SCATTERS):
                last = k + MAX_SCATTERS >= len(scatters)
                acc = out if last else Value(out.aval, "acc")
                chain.append(_AccumOp(op, bases, scatters[k:k + MAX_SCATTERS], inplace, [acc]))
                if inplace is not None:
                    self.alias[acc] = inplace
                uses[acc] = uses.get(acc, 1)
                bases, inplace = [acc], acc
            replace[id(op)] = chain
        return [new for op in ops if id(op) not in absorbed
                for new in replace.get(id(op), [op])]

    # -- 1. layouts and units -----------------------------------------------------------------
    def _build(self):
        self.units = self.top.units
        self._build_ops(self.region_ops[id(self.fn.body)])

    def _build_ops(self, ops):
        for op in ops:
            if op.prim is fusion_p:
                self._add_group(op, list(_inline(op)))
                continue
            if op.regions:
                self._build_control(op)
                continue
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
                    self.units.append(CopyUnit(op, [out], [out], src=out, dst=out,
                                               active=False))
                    continue
            if low.family in ("elementwise", "reduce"):
                self._add_group(op, [op])
                continue
            for v in op.outputs:
                self.layout[v] = _dense(v)
            unit = OpUnit(op, list(ins), list(op.outputs))
            if low.scratch is not None:  # written by the op, read by nothing after it
                self.scratch[id(op)] = [Value(Aval(tuple(s), np.dtype(d)), "scratch")
                                        for s, d in low.scratch(op)]
                unit.writes += self.scratch[id(op)]
            self.units.append(unit)

    def _add_group(self, op, members):
        """One loop: a `fusion` op's members, or one elementwise op or reduction (Note
        [Fusion in codegen])."""
        g = GroupUnit(op)
        for m in members:
            low = lowering_of(m)
            if low.family == "reduce":
                g.reds.append(m)
                g.red_axes = tuple(m.params["axes"])
                g.shape = m.inputs[0].aval.shape
            else:
                assert low.family == "elementwise", f"{m.prim.name} in a fusion"
                g.ops.append(m)
                g.shape = m.outputs[0].aval.shape
            for v in m.outputs:
                self.layout[v] = _dense(v)
        self.units.append(g)

    def _build_control(self, op):
        lowering_of(op)
        cu = ControlUnit(op, list(op.inputs), list(op.outputs))
        outer_units = self.units
        for r in op.regions:
            blk = Block(r, list(r.params), [], list(r.results))
            self.units = blk.units
            operands = control.state(op)
            for k, p in enumerate(r.params):
                if op.prim is cond_p and p not in self.tape_class:
                    self.layout[p] = self.layout[operands[k]]
                    blk.units.append(CopyUnit(None, [p], [p], src=p, dst=p, active=False))
                else:
                    self.layout[p] = _dense(p)
            self._build_ops(self.region_ops[id(r)])
            cu.blocks.append(blk)
        self.units = outer_units
        for v in op.outputs:
            self.layout[v] = _dense(v)
        self.units.append(cu)

    def _root(self, v):
        return self.layout[v].root

    # -- 2. what is read, what is stored, what is materialised --------------------------------
    def blocks(self):
        """Every block, the top one first, nested ones in program order."""
        def walk(blk):
            yield blk
            for u in blk.units:
                if isinstance(u, ControlUnit):
                    for sub in u.blocks:
                        yield from walk(sub)
        return walk(self.top)

    def all_units(self):
        for blk in self.blocks():
            yield from blk.units

    def _decide(self):
        results = self.fn.outputs
        result_set = set(results)
        readers: dict = {}
        for u in self.all_units():
            if isinstance(u, GroupUnit):
                inside = {v for op in u.ops + u.reds for v in op.outputs}
                u.reads = list(dict.fromkeys(
                    v for op in u.ops + u.reds for v in op.inputs if v not in inside))
            for v in u.reads:  # a view's reader reads its root too
                readers.setdefault(v, []).append(u)
                readers.setdefault(self._root(v), []).append(u)
        for blk in self.blocks():
            for v in blk.results:
                readers.setdefault(v, []).append(blk)
                readers.setdefault(self._root(v), []).append(blk)
        self.readers = readers  # value -> units and blocks reading it (or a view of it)
        for u in self.all_units():
            if isinstance(u, GroupUnit):
                u.writes = [v for op in u.ops for v in op.outputs
                            if v in result_set or any(r is not u for r in readers.get(v, []))]
                u.writes += [v for op in u.reds for v in op.outputs]
        self.materialised = set()
        for u in self.all_units():
            if isinstance(u, OpUnit):
                low = LOWERINGS[u.op.prim]
                for i, v in enumerate(u.reads):
                    lay = self.layout[v]
                    if lay.root is not v and not lay.contiguous and not (
                            low.accepts and low.accepts(u.op, i, lay)):
                        self.materialised.add(v)
        dropped = set()
        for blk in self.blocks():
            for u in blk.units:
                if isinstance(u, CopyUnit) and u.src in self.materialised:
                    u.active = True
                    u.reads = [self._root(u.src)]
            dropped.update(id(u) for u in blk.units if isinstance(u, CopyUnit) and not u.active)
            blk.units[:] = [u for u in blk.units if id(u) not in dropped]
        for v, rs in readers.items():  # a copy that is not made reads nothing
            rs[:] = [r for r in rs if id(r) not in dropped]
        # results: write into the result buffer directly when this function computes them
        owned = {v for u in self.top.units for v in u.writes}
        for j, r in enumerate(results):
            if r in owned and r not in self.storage and r not in self.alias:
                self.storage[r] = ("out", j)
            else:
                self.top.units.append(CopyUnit(None, [r], [], src=r, dst=("out", j)))

    def owns(self, v) -> bool:
        return v in self.storage or self.layout[v].root is v or v in self.materialised

    # -- 3. storage ---------------------------------------------------------------------------
    def _sroot(self, v):
        return v if (v in self.materialised or self._root(v) is v) else self._root(v)

    def _unit_reads(self, u):
        """Values `u` reads, a control unit's regions (and what they yield) included."""
        yield from u.reads
        if isinstance(u, ControlUnit):
            for blk in u.blocks:
                yield from blk.results
                for inner in blk.units:
                    yield from self._unit_reads(inner)

    def _allocate(self):
        for i, v in enumerate(self.fn.params):
            self.storage[v] = ("param", i)
        for v in self.consts:
            self.storage[v] = ("const", v)
        for v, k in self.tape_class.items():
            self.storage[v] = ("tape", k)
        last: dict = {}
        for t, u in enumerate(self.top.units):
            for v in self._unit_reads(u):
                last[self._sroot(v)] = t
        from .inplace import extend_lifetimes
        extend_lifetimes(self, last)
        self._last, self._arena, self._loops = last, Arena(), 0
        for t, u in enumerate(self.top.units):
            self._allocate_unit(u)
            self._arena.expire(t)
        self.workspace = self._arena.size

    def _allocate_unit(self, u):
        looping = isinstance(u, ControlUnit) and CONTROL[u.op.prim].loop
        self._loops += looping  # a loop's results are its carried buffers: in the loop
        for v in u.writes:
            self._assign(v)
        if not isinstance(u, ControlUnit):
            return
        self._allocate_regions(u)
        self._loops -= looping

    def _allocate_regions(self, u):
        op = u.op
        cf = CONTROL[op.prim]
        if cf.counter:
            self._assign(control.counter(op))
        if cf.loop:  # Note [Carried storage]
            for r in op.regions:
                for p, o in zip(cf.carried(r), op.outputs):
                    self.storage.setdefault(p, self.storage[o])
            self._inplace_elementwise(u.blocks[-1], cf.carried(cf.body(op)))
        for blk in u.blocks:
            for inner in blk.units:
                self._allocate_unit(inner)
        if cf.loop:
            body = u.blocks[-1]
            carried = cf.carried(cf.body(op))
            from .inplace import parallel_moves, swapped_pairs
            moves = self.moves(zip(body.results, carried))
            _, staged = parallel_moves(moves)
            step = control.bounds(op)[2] if op.prim is for_loop_p else None
            if step is not None and step.op is not None and step.op.prim is constant_p \
                    and int(step.op.params["value"]) != 0:
                body.swaps = swapped_pairs(moves, {
                    k for k, r in enumerate(body.results) if r in self.storage
                    and skey(self.storage[r]) == skey(self.storage.get(self._sroot(r)))})
            for k in sorted(staged):
                s = Value(body.results[k].aval, "stage")
                self._assign(s)
                body.stage[k] = s

    def moves(self, pairs) -> list:
        """(position, source key, target key) of the array copies of a parallel assignment
        dst := src over `pairs` (values already in their target's storage need none)."""
        return [(k, skey(self.storage.get(self._sroot(r))), skey(self.storage[p]))
                for k, (r, p) in enumerate(pairs)
                if r not in self.tape_class and r.aval.shape != ()
                and not self.same_storage(r, p)]

    def _inplace_elementwise(self, body, carried):
        """A carried array updated elementwise (`acc = acc + g`, read nowhere else) is computed
        in its own buffer: the group reads element i before it writes element i, and the yield
        copy disappears (Note [In-place accumulation])."""
        writer = {}
        for g in body.units:
            if isinstance(g, GroupUnit) and not g.reds:
                for op in g.ops:
                    for v in op.outputs:
                        writer[v] = g
        heirs = set(self.alias.values())  # storage another value already took over
        for r, p in zip(body.results, carried):
            g = writer.get(r)
            if (g is None or r.aval.shape == () or r.aval.shape != p.aval.shape
                    or r in self.alias or r in self.storage or p in self.tape_class
                    or p in heirs
                    or self.uses.get(r) != 1 or self.uses.get(p) != 1
                    or not any(v is p for v in g.reads)
                    or sum(1 for s in body.results if s is r) != 1):
                continue
            self.alias[r] = p
            heirs.add(p)

    def same_storage(self, a, b) -> bool:
        """Whether a and b are the same elements in the same memory (a value that is all of
        its root, such as a cond branch's param, counts as its root)."""
        a, b = self._whole(a), self._whole(b)
        s = self.storage
        return a in s and b in s and skey(s[a]) == skey(s[b])

    def _whole(self, v):
        lay = self.layout.get(v)
        if v in self.storage or lay is None or lay.root is v:
            return v
        whole = lay.offset == 0 and lay.contiguous and lay.root.aval == v.aval
        return lay.root if whole else v

    def _assign(self, v):
        if v in self.storage:
            return
        if v in self.alias:
            self.storage[v] = self.storage[self.alias[v]]
            return
        if v.aval.shape == ():
            self.storage[v] = ("slot", self.slots)
            self.slots += 1
            return
        size = max(_size(v), 1) * np.dtype(v.aval.dtype).itemsize
        size = -(-size // ALIGN) * ALIGN
        if self._loops and size <= STACK_BYTES and sum(self.stack) + size <= STACK_TOTAL:
            self.storage[v] = ("stack", len(self.stack))  # Note [Small arrays on the stack]
            self.stack.append(size)
            return
        self.storage[v] = ("temp", self._arena.alloc(size, self._last.get(v, -1)))


def skey(storage):
    """A storage entry as a comparable key (IR values compare elementwise, not by identity)."""
    if storage is not None and storage[0] == "const":
        return ("const", id(storage[1]))
    return storage


class _Inlined:
    """An op of a `fusion` body, with the region's params/results renamed to the outer values."""

    __slots__ = ("prim", "inputs", "params", "outputs", "regions", "loc")

    def __init__(self, op, env):
        self.prim, self.params, self.regions, self.loc = op.prim, op.params, op.regions, op.loc
        self.inputs = [env.get(v, v) for v in op.inputs]
        self.outputs = [env.get(v, v) for v in op.outputs]


def _inline(op):
    """The ops of a `fusion` op's body, reading and defining the outer values (Note [Fusion in
    codegen])."""
    body = control.body(op)
    env = dict(zip(body.params, control.state(op)))
    env.update(zip(body.results, op.outputs))
    for inner in body.ops:
        yield _Inlined(inner, env)


def _size(v) -> int:
    return int(np.prod(v.aval.shape, dtype=np.int64))


def _dense(v) -> Layout:
    if None in v.aval.shape:  # a growing tape: no static layout (Note [Tapes in codegen])
        return Layout(v, (), ())
    return Layout(v, tuple(v.aval.shape), contiguous_strides(v.aval.shape))
