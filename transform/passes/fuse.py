"""Fusion: which ops run as one loop, decided here once for codegen and `inspect()` alike.

Requires: verified IR with explicit broadcasts (every elementwise op's operands have its
shape). Produces: the same IR where each group of two or more ops that codegen runs as one
loop is one `fusion(*inputs)` op whose region computes the group and yields the values used
outside it (Note [Control-flow ops]): elementwise ops of one shape and the reductions
(REDUCTIONS) of their values, all of one set of axes. Codegen lowers each `fusion` op as one
loop and each op outside one as its own (codegen/plan.py); it never regroups (Note [Fusion is
decided once]). Ops are reordered only as far as needed to keep SSA dominance; groups never
create cycles (an op joins a group only if none of its operands depends on the group through
an op outside it; a region op depends on the values its regions capture as well as on its
operands). Nested regions are fused too, except the bodies of existing `fusion` ops: running
the pass again changes nothing.
"""
from __future__ import annotations

import heapq

from llgrad.runtime.ops.control import fusion_p
from llgrad.runtime.ops.elementwise import add_p
from llgrad.runtime.ops.index import scatter_add_p
from llgrad.runtime.ops.reduce import reduce_max_p, reduce_min_p, reduce_prod_p, reduce_sum_p
from llgrad.transform import ir
from llgrad.transform.builder import Value
from llgrad.transform.passes import Pass

# Note [Fusion is decided once]
# One pass decides which ops share a loop, so the IR `inspect()` prints is the IR codegen
# lowers: a `fusion` op is one loop (codegen/plan.py makes it one GroupUnit, never splitting
# or merging groups), an op outside one is a loop of its own. Codegen's planner used to
# flatten these groups and regroup in program order; deciding here instead keeps the
# decision in the IR users, LLGRAD_PRINT_AFTER and the interpreter see (the planner would
# have to print its plan back as IR), and lets groups reorder ops (a graph of groups, not
# program order). What codegen needs of a group is decided here with it:
# - Views: reshape, transpose, broadcast_to and basic getitem emit no code in codegen, but
#   they are ops outside every group here, so a group whose value one of them reads runs
#   before it, and a group reads views (a broadcast scalar constant is an immediate) as its
#   inputs, strided, without copies.
# - Readers outside: the planner closed a group as soon as anything outside read one of its
#   values; here a reader only has to run after the group, which the order of the fusion op
#   guarantees (the group can still take ops that do not depend on the reader, Note
#   [Dependencies between groups]), and a group never reads its own values through memory.
# - Reductions join the group computing their input (`sum(exp(x) * y)` never stores
#   `exp(x) * y`), all of a group's with the same axes; their results exist only after the
#   loop, so an op reading one depends on the whole group and never joins it.
# - Siblings: an elementwise op also joins the group of its shape that last took an op, when
#   it does not depend on it (one loop over x for `a = 2 * x; b = x + 1`, and for the rows
#   of an unrolled loop).
# - MAX_GROUP_OPS bounds a group: LLVM's analyses of one loop body grow quadratically with
#   its memory accesses (the gradient of a weight used at each of 1000 unrolled steps adds
#   1000 products in one loop: 2.7 s in LoopLoadElimination alone), and the bound keeps
#   what one group reads bounded too (Note [Dependencies between groups]).
# - Accumulations: an add tree codegen turns into one `accumulate` (scatter-adds into a
#   cotangent, in place in loops; Note [In-place accumulation] in codegen/plan.py) must stay
#   visible to it, so the adds of `accumulation_trees` are never fused.
# - What codegen decides per loop is not a grouping: in-place storage of a group's result
#   (codegen/inplace.py), the threads' row blocks (codegen/threads.py) and outlining
#   (codegen/outline.py) take each group as given.
MAX_GROUP_OPS = 64
REDUCTIONS = frozenset({reduce_sum_p, reduce_prod_p, reduce_max_p, reduce_min_p})
_SEARCH_BUDGET = 64


def _elementwise(op) -> bool:
    return (not op.regions and len(op.outputs) == 1 and op.prim.family == "elementwise"
            and op.prim.scalar is not None)


class _Groups:
    """Fusion groups (union-find) and which groups each reads through ops outside it, kept in
    a topological order. See Note [Dependencies between groups]."""

    def __init__(self):
        self.parent: list[int] = []
        self.shape: list = []
        self.size: list[int] = []   # member ops
        self.reads: list[set] = []  # groups each group reads from (ids, maybe merged away)
        self.users: list[set] = []  # the inverse
        self.ord: list[int] = []    # position in a topological order (producers first)
        self.axes: list = []        # the axes of a group's reductions (None: it has none)

    def find(self, g: int) -> int:
        while self.parent[g] != g:
            self.parent[g] = g = self.parent[self.parent[g]]
        return g

    def new(self, shape) -> int:
        g = len(self.parent)
        self.parent.append(g)
        self.shape.append(shape)
        self.size.append(0)
        self.reads.append(set())
        self.users.append(set())
        self.ord.append(g)  # after every existing group: it reads nothing yet
        self.axes.append(None)
        return g

    def agree(self, c: int, g: int) -> bool:
        """Whether groups c and g may be one loop: their reductions have the same axes."""
        return None in (self.axes[c], self.axes[g]) or self.axes[c] == self.axes[g]

    def depends(self, starts, c: int) -> bool:
        """Whether group `c` is among `starts` or what they read, transitively; True also
        when that takes more than _SEARCH_BUDGET steps to decide (then the op is not fused)."""
        c = self.find(c)
        bound, seen = self.ord[c], set()
        todo = [(self.ord[x], x) for x in {self.find(x) for x in starts}
                if self.ord[x] >= bound]  # (an earlier one cannot read c)
        heapq.heapify(todo)
        while todo:
            o, x = heapq.heappop(todo)  # the earliest first: the way to c, when there is one
            if x == c:
                return True
            if o < bound or x in seen:  # before c in the order: cannot read c
                continue
            if len(seen) == _SEARCH_BUDGET:
                return True
            seen.add(x)
            for y in self.reads[x]:
                y = self.find(y)
                heapq.heappush(todo, (self.ord[y], y))
        return False

    def add_reads(self, g: int, ys) -> None:
        """Record that group `g` reads groups `ys` (none of which depends on `g`)."""
        g = self.find(g)
        for y in ys:
            y = self.find(y)
            if y == g or y in self.reads[g]:
                continue
            self.reads[g].add(y)
            self.users[y].add(g)
            if self.ord[y] > self.ord[g]:
                self._reorder(y, g)

    def merge(self, c: int, g: int) -> None:
        """Merge group `c` into `g` (neither depends on the other)."""
        c, g = self.find(c), self.find(g)
        self.parent[c] = g
        self.size[g] += self.size[c]
        if self.axes[g] is None:
            self.axes[g] = self.axes[c]
        self.add_reads(g, self.reads[c])
        for u in list(self.users[c]):
            self.add_reads(u, [g])

    def _reorder(self, y: int, g: int) -> None:
        """Restore the order after the new edge `g` reads `y` with y after g (Pearce-Kelly:
        move what reaches y before what g reaches, within the window between them)."""
        lo, hi = self.ord[g], self.ord[y]
        fwd = self._reach(g, self.users, lambda o: o <= hi)
        bwd = self._reach(y, self.reads, lambda o: o >= lo)
        assert not fwd & bwd, "fusion would create a cycle"
        moved = sorted(bwd, key=self.ord.__getitem__) + sorted(fwd, key=self.ord.__getitem__)
        for x, o in zip(moved, sorted(self.ord[x] for x in moved)):
            self.ord[x] = o

    def _reach(self, start: int, edges, inside) -> set:
        seen, todo = set(), [start]
        while todo:
            x = self.find(todo.pop())
            if x not in seen and inside(self.ord[x]):
                seen.add(x)
                todo.extend(edges[x])
        return seen


# Note [Dependencies between groups]
# An op may join a group only if that creates no cycle among groups and unfused ops, so
# grouping asks "does this value depend on group c?" for every operand. Unfused ops are
# nodes of the same graph (groups that never take members), so what a value depends on
# directly is always one node, not every group above a chain of unfused ops. Walking all of a
# value's dependencies for each question is quadratic in the program's length (a straight
# line of 10^4 ops took a minute). Instead the groups are kept in a topological order,
# updated when a new edge goes against it (Pearce and Kelly's dynamic topological sort, which
# reorders only the groups between the edge's ends); a search for c never goes below c's
# position (only later groups can read c) and follows the earliest groups first (the way to
# c when there is one: a gradient reads the forward values it came from). A search still
# undecided after _SEARCH_BUDGET groups answers "depends", so the op is not fused there:
# never a cycle, at worst a missed fusion between far-apart parts of a long program, which
# would only have kept values alive longer. A group takes at most MAX_GROUP_OPS ops, so what
# one group reads stays bounded too.


def _groups(region: ir.Region, uses: dict):
    """Group index per op (None = not fused; see Note [Fusion is decided once]).

    Groups must form an acyclic graph with the unfused ops: an op joins group g only if none
    of its operands from outside g depends (through any chain of ops and groups) on g; groups
    an op reads from are merged when neither depends on the other.
    """
    kept = {id(op) for root, inner, _, _ in accumulation_trees(region.ops, uses)
            for op in (root, *inner)}
    gr = _Groups()
    vdirect: dict[int, frozenset] = {}  # value -> first groups met walking up its producers
    member: dict[int, int] = {}  # value of an elementwise member -> its group
    latest: dict = {}            # shape -> the group of it that last took an op
    op_group = []

    for op in region.ops:
        g = None
        if _elementwise(op) and id(op) not in kept:
            shape = op.outputs[0].aval.shape
            cands = sorted({gr.find(member[v.id]) for v in op.inputs if v.id in member})
            if shape in latest and gr.find(latest[shape]) not in cands:
                cands.append(gr.find(latest[shape]))  # a sibling
            for c in cands:
                c = gr.find(c)
                if gr.shape[c] != shape or gr.size[c] >= MAX_GROUP_OPS or any(
                        gr.depends(vdirect.get(v.id, ()), c) for v in op.inputs
                        if v.id not in member or gr.find(member[v.id]) != c):
                    continue
                if g is None:
                    g = c
                elif gr.size[c] + gr.size[g] < MAX_GROUP_OPS and gr.agree(c, g) and not \
                        gr.depends(gr.reads[c], g) and not gr.depends(gr.reads[g], c):
                    gr.merge(c, g)
            if g is None:
                g = gr.new(shape)
            gr.size[g] += 1
            for v in op.inputs:
                if v.id not in member or gr.find(member[v.id]) != g:
                    gr.add_reads(g, vdirect.get(v.id, ()))
            vdirect[op.outputs[0].id] = frozenset([g])
            member[op.outputs[0].id] = latest[shape] = g
        elif op.prim in REDUCTIONS and op.inputs[0].id in member and gr.size[
                c := gr.find(member[op.inputs[0].id])] < MAX_GROUP_OPS and \
                gr.axes[c] in (None, tuple(op.params["axes"])):
            g = c  # its result exists after the loop: readers depend on g, never join it
            gr.axes[g] = tuple(op.params["axes"])
            gr.size[g] += 1
            vdirect[op.outputs[0].id] = frozenset([g])
        else:  # a region op depends on what its regions capture too (Note [Control-flow ops])
            node = gr.new(None)  # in the order too, never fused (no shape)
            gr.add_reads(node, {x for v in _reads(op) for x in vdirect.get(v, ())})
            for o in op.outputs:
                vdirect[o.id] = frozenset([node])
        op_group.append(g)
    op_group = [None if g is None else gr.find(g) for g in op_group]
    size: dict[int, int] = {}
    for g in op_group:
        if g is not None:
            size[g] = size.get(g, 0) + 1
    return [g if g is not None and size[g] >= 2 else None for g in op_group]


def _used_outside(region: ir.Region, gs) -> dict:
    """Per group, ids of its values read by ops of other groups/unfused ops or yielded."""
    owner = {o.id: g for op, g in zip(region.ops, gs) if g is not None for o in op.outputs}
    used: dict[int, set] = {}

    def use(vid, g):
        og = owner.get(vid)
        if og is not None and og != g:
            used.setdefault(og, set()).add(vid)

    for v in region.results:
        use(v.id, None)
    for op, g in zip(region.ops, gs):
        for vid in _reads(op):
            use(vid, g)
    return used


def _build(ops_in_group, used_outside) -> ir.Op:
    defined = {o.id for op in ops_in_group for o in op.outputs}
    inputs, env, params = [], {}, []
    body = ir.Region()
    for op in ops_in_group:
        ins = []
        for v in op.inputs:
            if v.id not in env:
                if v.id in defined:
                    raise AssertionError("fusion member used before definition")
                p = Value(v.aval, v.name)
                inputs.append(v)
                params.append(p)
                env[v.id] = p
            ins.append(env[v.id])
        outs = [Value(o.aval, o.name) for o in op.outputs]
        body.ops.append(ir.Op(op.prim, ins, op.params, outs, (), op.loc))
        for o, n in zip(op.outputs, outs):
            env[o.id] = n
    results = [o for op in ops_in_group for o in op.outputs if o.id in used_outside]
    body.params, body.results = params, [env[o.id] for o in results]
    # the fusion op's outputs are the original Values, so no use needs rewriting
    return ir.Op(fusion_p, inputs, {}, results, [body], ops_in_group[-1].loc)


def _region(region: ir.Region, uses: dict) -> None:
    for op in region.ops:
        if op.prim is fusion_p:  # already fused (the pass is idempotent): no fusion in a fusion
            continue
        for r in op.regions:
            _region(r, uses)
    gs = _groups(region, uses)
    if not any(g is not None for g in gs):
        return
    by_group: dict[int, list] = {}
    for op, g in zip(region.ops, gs):
        if g is not None:
            by_group.setdefault(g, []).append(op)
    used = _used_outside(region, gs)
    # nodes: plain ops and fused groups; order them topologically, earliest first
    nodes, node_of_val, first = [], {}, {}
    for k, (op, g) in enumerate(zip(region.ops, gs)):
        if g is None:
            node = len(nodes)
            nodes.append(op)
        elif g in first:
            node = first[g]
        else:
            node = first[g] = len(nodes)
            nodes.append(_build(by_group[g], used.get(g, set())))
        for o in op.outputs:
            node_of_val[o.id] = node
    deps = [set() for _ in nodes]
    for n, node in enumerate(nodes):
        for v in _reads(node):
            d = node_of_val.get(v)
            if d is not None and d != n:
                deps[n].add(d)
    users = [[] for _ in nodes]
    for n, ds in enumerate(deps):
        for d in ds:
            users[d].append(n)
    missing = [len(ds) for ds in deps]
    ready = [n for n, m in enumerate(missing) if m == 0]
    heapq.heapify(ready)
    order = []
    while ready:
        n = heapq.heappop(ready)
        order.append(nodes[n])
        for u in users[n]:
            missing[u] -= 1
            if missing[u] == 0:
                heapq.heappush(ready, u)
    assert len(order) == len(nodes), "fusion created a cycle"
    region.ops = order


def _reads(op) -> set:
    ids = {v.id for v in op.inputs}
    for r in op.regions:
        ids.update(v.id for inner in r.walk() for v in inner.inputs)
        ids.update(v.id for v in r.results)
        ids.update(v.id for inner in r.walk() for s in inner.regions for v in s.results)
    return ids


def use_counts(fn: ir.Function) -> dict:
    """Value -> how many times it is read: as an operand (inside a `fusion` body, a read of a
    body param or yielded value counts as one of the fusion's operand or output) and as a
    region's result (a `fusion` body's yields are not reads). Fusing leaves the counts as
    they were, so this pass and codegen's planner agree on them."""
    uses: dict = {}

    def count(region, env):
        for op in region.ops:
            if op.prim is fusion_p:
                body = op.regions[0]
                inner = dict(zip(body.params, (env.get(v, v) for v in op.inputs)))
                inner.update(zip(body.results, op.outputs))
                count(ir.Region([], body.ops, []), inner)
                continue
            for v in op.inputs:
                v = env.get(v, v)
                uses[v] = uses.get(v, 0) + 1
            for r in op.regions:
                count(r, {})
        for v in region.results:
            uses[v] = uses.get(v, 0) + 1

    count(fn.body, {})
    return uses


def accumulation_trees(ops, uses: dict) -> list:
    """The trees of single-use float `add`s of one shape over `ops` (one region's) that have
    single-use `scatter_add` leaves, as (root add, inner adds, scatter_adds, other leaves),
    roots last to first: what codegen runs as `accumulate` ops (Note [In-place accumulation]
    in codegen/plan.py), so they are not fused. `uses` as `use_counts` gives them."""
    defs = {v: op for op in ops for v in op.outputs}

    def is_add(op, shape, dtype):
        return (op.prim is add_p and op.outputs[0].aval.shape == shape
                and op.outputs[0].aval.dtype == dtype
                and all(v.aval.shape == shape for v in op.inputs))

    absorbed, trees = set(), []
    for op in reversed(ops):
        if id(op) in absorbed or op.prim is not add_p:
            continue
        shape, dtype = op.outputs[0].aval.shape, op.outputs[0].aval.dtype
        if not shape or not is_add(op, shape, dtype) or dtype.kind != "f":
            continue
        bases, scatters, inner = [], [], []
        # the tree of single-use adds under `op`, depth first, left to right (a stack, not
        # recursion: an unrolled loop of 5,000 iterations is a chain of 5,000 adds)
        todo = list(reversed(op.inputs))
        while todo:
            v = todo.pop()
            d = defs.get(v)
            if d is not None and uses.get(v, 0) == 1 and is_add(d, shape, dtype):
                inner.append(d)
                todo.extend(reversed(d.inputs))
            elif (d is not None and uses.get(v, 0) == 1 and d.prim is scatter_add_p
                  and d.outputs[0].aval.dtype == dtype):
                scatters.append(d)
            else:
                bases.append(v)
        if scatters:
            absorbed.update(id(d) for d in inner + scatters)
            trees.append((op, inner, scatters, bases))
    return trees


def _fuse(fn: ir.Function) -> ir.Function:
    _region(fn.body, use_counts(fn))
    return fn


fuse = Pass("fuse", _fuse, __doc__)
