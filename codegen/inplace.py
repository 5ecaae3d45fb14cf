"""Updates in place: which results of element updates (index_put, window_update) and of loops
may take the storage of the array they update, decided on the plan of one kernel (plan.py).

Input: a FunctionPlan after `_decide` (units, layouts, readers, results' storage). Output:
`plan.alias[out] = x` for each such pair; the allocator then gives `out` x's storage and the
lowerings skip their copy (`plan.same_storage(x, out)`). See Note [Updates in place].
"""
from __future__ import annotations

import math

from llgrad.transform.control import CONTROL
from llgrad.runtime.ops.control import cond_p
from llgrad.runtime.ops.index import getitem_p

from .plan import ControlUnit, GroupUnit, OpUnit
from .registry import LOWERINGS

# Note [Updates in place]
# IR values are immutable: `a[j] = v` is `a2 = index_put(a, v, j)`, whose lowering copies `a`
# into `a2` and stores v; in a loop over j that is a copy of the whole array per element
# written, O(n^2) for a loop that fills an array of n. Likewise a loop's carried array is
# copied from its init into the loop's buffer, and a loop nested in a body carrying the same
# array copies it in and out at every outer iteration. The copy is needed only while another
# value can still see the old array. So an update's result takes its operand's storage when,
# on the plan:
# - the operand x is an array computed in the same region as the update (not a function
#   parameter, constant, or a value of an enclosing region, which the update, run once per
#   iteration, would destroy for the next one), or the region's own carried value (a for or
#   while body's param; not a while's test region, whose params share the body's buffers);
# - x owns its storage (not a view of another value, not a tape) and is not a result;
# - the update reads x once, and no other input of it is a view of x (x[idx] = x[::-1]);
# - every other reader of x, or of a view of x, runs before the update: a unit of the same
#   region placed earlier, or a unit nested in one (a loop that reads x inside its body and
#   updates it as its init does not qualify), and x is not yielded by that region. A gather
#   placed after the update that reads nothing computed after x is moved before it first
#   (`_hoist_reads`).
# Which operand an update may overwrite is its lowering's `updates` (registry.Lowering); a
# for/while loop's output k may take the storage of its init k; a value a fused elementwise
# loop writes, the storage of an operand of the same shape it reads (all loads of element i
# come before the stores of element i; outlined loops take no `noalias` pointers). Each
# storage then holds at most one live value at a time (a value aliased to x is born when x
# dies), so the lowerings need no other care; at the top level, x's workspace block lives as
# long as its heir (`extend_lifetimes`). The interpreter and the eager runtime keep their
# copies: this is a storage decision of codegen, not a change of meaning.


# Note [Updates in place under if]
# `if x[i] > 0: out[cnt] = x[i]; cnt += 1` in a loop is a cond whose first branch updates
# `out` and whose second yields it unchanged; lowered literally, each branch copies what it
# yields into the cond's output (Note [Carried storage]), and the update copies `out` first:
# two copies of the array an iteration, O(n^2) for a loop over n (30000 elements: 112 ms
# forward, 228 ms with the gradient; Numba-style code fills arrays this way). So a cond's
# output k takes the storage of an array x of the enclosing block when the branches yield x at
# k, unchanged (x itself, or a branch param that is all of the operand x) or updated (a chain
# of updates that starts from x: `out[i] = a` in one branch, `out[i] = b` in the other), and
# no other array of it; x dies at the cond (every reader of x is before it or inside it); and
# no branch yields x, or a view of x, at another position, or a view of x at k (`_cond_pairs`). Inside each branch, updates of x (or of that param)
# may then take x's storage by the rules above, with only that branch's readers counted (the
# branches are exclusive, and the cond's output is x's heir: `_dead_in_branch`), as may
# updates of their results, so long as none of them is yielded at another position. The
# branches' yields then find their value in the output's storage: no copy. A branch that
# yields a new array at k copies it in at its end, when x's old value is no longer read.


def plan_updates(plan) -> None:
    """Record in `plan.alias` every update result that may take its operand's storage."""
    for blk in list(plan.blocks()):
        _hoist_reads(plan, blk)
    where = _positions(plan)
    carried_params = set()
    for u in plan.all_units():
        if isinstance(u, ControlUnit) and CONTROL[u.op.prim].loop:
            cf = CONTROL[u.op.prim]
            carried_params.update(cf.carried(cf.body(u.op)))
    heirs: dict = {}  # id(branch block) -> [(k, values holding cond output k's storage)]
    for blk in plan.blocks():
        written = set()
        params = {p for p in blk.params if p in carried_params}
        held = heirs.get(id(blk), [])
        for t, u in enumerate(blk.units):
            if isinstance(u, ControlUnit) and u.op.prim is cond_p:
                for k, x, out in _cond_pairs(plan, u, blk, t, where, written | params):
                    plan.alias[out] = x  # Note [Updates in place under if]
                    for br in u.blocks:
                        heirs.setdefault(id(br), []).append((k, {x}))
            for x, out in _candidates(u, params):
                root = plan.layout[x].root  # (a cond branch's param: the cond's operand)
                heir = next((h for h in held if root in h[1]), None)
                if heir is not None:
                    k, h = heir
                    if any(out is v for j, v in enumerate(blk.results) if j != k):
                        continue
                    if _dead_in_branch(plan, u, root, out, blk, t, where):
                        plan.alias[out] = root
                        h.add(out)
                elif (x in written or x in params) and _dead_after(plan, u, x, out, blk, t,
                                                                   where):
                    plan.alias[out] = x
            written.update(u.writes)


def _candidates(u, prefer=frozenset()):
    """(operand, result) pairs of unit `u` where the result may be computed in place."""
    if isinstance(u, OpUnit):
        k = LOWERINGS[u.op.prim].updates
        k = k(u.op) if callable(k) else k
        if k is not None:
            yield u.op.inputs[k], u.op.outputs[0]
    elif isinstance(u, ControlUnit) and CONTROL[u.op.prim].loop:
        yield from zip(CONTROL[u.op.prim].state(u.op), u.op.outputs)
    elif isinstance(u, GroupUnit):  # one loop reads element i of x before it writes out's
        reads, writes, taken = set(u.reads), set(u.writes), set()
        for op in u.ops:
            w = op.outputs[0]
            if w not in writes:
                continue
            for x in sorted(op.inputs, key=lambda v: v not in prefer):  # carried ones first
                if x in reads and x not in taken and x.aval == w.aval:
                    taken.add(x)
                    yield x, w
                    break


def _hoist_reads(plan, blk) -> None:
    """Move each gather of an update's operand that comes after the update (its old element
    read back: the reverse sweep of `a[j] = s` is `ct[j] = 0` then `g = ct[j]`) to just
    before it, when what else it reads is computed before the update: a gather is pure, so
    only its place changes (it may then report its own bad index before the update's)."""
    units = blk.units
    t = 0
    while t < len(units):
        pairs = list(_candidates(units[t]))
        if pairs:
            index = {id(u): i for i, u in enumerate(units)}
            born = {v: i for i, u in enumerate(units) for v in u.writes}
            for x, _ in pairs:
                for r in plan.readers.get(x, ()):
                    s = index.get(id(r), -1)
                    if s > t and isinstance(r, OpUnit) and r.op.prim is getitem_p \
                            and r.op.inputs[0] is x and all(
                            born.get(v, -1) < t and born.get(plan.layout[v].root, -1) < t
                            for v in r.op.inputs[1:]):
                        units.insert(t, units.pop(s))
                        t += 1
                        index = {id(u): i for i, u in enumerate(units)}
        t += 1


def _dead_after(plan, u, x, out, blk, t, where) -> bool:
    """Whether `x` may be overwritten by `u`, the unit at index t of `blk`, to give `out`."""
    if not _owns_whole(plan, x, out):
        return False
    if sum(1 for v in u.reads if plan.layout[v].root is x) != 1:
        return False
    return _last_read(plan, x, blk, where, skip=u) < t


def _last_read(plan, x, blk, where, skip=None, outside=math.inf) -> float:
    """The index in `blk` of the last unit reading `x` other than `skip` (a unit nested in one
    of blk's counts at that one's index): `outside` for a reader outside blk, infinity when
    blk yields x (it reads x after all its units), -1 for none."""
    last = -1
    for r in plan.readers.get(x, ()):
        if r is skip:
            continue
        if r is blk:
            return math.inf
        at = where.get(id(r), {}).get(id(blk))
        last = max(last, outside if at is None else at)
    return last


def _owns_whole(plan, x, out) -> bool:
    """`out` may take `x`'s storage as far as the two values go: same type, an array with
    storage of its own, neither a tape, a parameter, a constant nor a result."""
    return not (x.aval.shape == () or x.aval != out.aval or plan.layout[x].root is not x
                or x in plan.tape_class or out in plan.tape_class or x in plan.storage
                or out in plan.storage or out in plan.alias
                or any(x is r for r in plan.fn.outputs))


def _cond_pairs(plan, u, blk, t, where, owned):
    """(k, x, out) for cond unit `u` (index t of `blk`) whose output k = out may take the
    storage of x, the array of `blk` that the branches yield at k, unchanged or updated
    (Note [Updates in place under if])."""
    inside = set()
    for br in u.blocks:
        inside.update(br.params)
        for inner in _nested_units(br):
            inside.update(inner.writes)
            if isinstance(inner, GroupUnit):
                inside.update(v for op in inner.ops + inner.reds for v in op.outputs)
            elif inner.op is not None:
                inside.update(inner.op.outputs)
    width = len(u.op.outputs)
    for k, out in enumerate(u.op.outputs):
        outer = {}
        for br in u.blocks:
            x = _updated(plan, br, br.results[k], inside)
            if x is not None:
                outer[id(x)] = x
        if len(outer) != 1:
            continue
        x = next(iter(outer.values()))
        if x not in owned or not _owns_whole(plan, x, out):
            continue
        if any(plan.layout[br.results[j]].root is x for br in u.blocks for j in range(width)
               if j != k):
            continue
        if any(plan.layout[y].root is x and plan._whole(y) is not x
               for y in (br.results[k] for br in u.blocks)):
            continue  # a branch yields a view of x at k (x[::-1]): copied into x, staged
        if _dead_at_cond(plan, x, blk, t, where):
            yield k, x, out


def _dead_at_cond(plan, x, blk, t, where) -> bool:
    """Whether every reader of `x` (an array of `blk`) is the cond at index t of blk, inside
    it, or before it; `blk` yielding x reads it after."""
    return _last_read(plan, x, blk, where) <= t


def _updated(plan, br, y, inside, depth: int = 64):
    """The array of the enclosing block that cond branch `br` yields as y: y itself, all of a
    branch param (the cond's operand), or what a chain of updates in `br` started from
    (`out[i] = v` in both branches); None for anything else."""
    if any(y is q for q in br.params):
        lay = plan.layout[y]
        whole = lay.offset == 0 and lay.contiguous and lay.root.aval == y.aval
        return lay.root if whole else None
    if y not in inside:
        return y
    op = y.op
    if depth == 0 or op is None or op.prim not in LOWERINGS:
        return None
    k = LOWERINGS[op.prim].updates
    k = k(op) if callable(k) else k
    return None if k is None else _updated(plan, br, op.inputs[k], inside, depth - 1)


def _nested_units(blk):
    for u in blk.units:
        yield u
        if isinstance(u, ControlUnit):
            for sub in u.blocks:
                yield from _nested_units(sub)


def _dead_in_branch(plan, u, x, out, blk, t, where) -> bool:
    """Whether `u`, the unit at index t of cond branch `blk`, may overwrite `x`, whose storage
    the cond's output took: x is dead after the cond, so only this branch's readers count."""
    if not (x.aval == out.aval and out not in plan.tape_class and out not in plan.storage
            and out not in plan.alias):
        return False
    if sum(1 for v in u.reads if plan.layout[v].root is x) != 1:
        return False
    return _last_read(plan, x, blk, where, skip=u, outside=-1) < t  # (yielding x: its old value)


def _positions(plan) -> dict:
    """id(unit or block) -> {id(enclosing block): index of the unit of that block holding it}."""
    where: dict = {}

    def walk(blk, outer):
        for t, u in enumerate(blk.units):
            here = {**outer, id(blk): t}
            where[id(u)] = here
            if isinstance(u, ControlUnit):
                for sub in u.blocks:
                    where[id(sub)] = here
                    walk(sub, here)

    walk(plan.top, {})
    return where


def extend_lifetimes(plan, last: dict) -> None:
    """Keep the workspace block of each overwritten top-level value live as long as the value
    that took it over (`last`: value -> index of its last top-level reader)."""
    for out, x in reversed(list(plan.alias.items())):
        if out in last:
            last[x] = max(last.get(x, -1), last[out])


def parallel_moves(moves) -> tuple[list, set]:
    """The order of the copies `moves` ((position, source storage key, target storage key))
    of a loop's yield, a parallel assignment, and the positions whose source goes through a
    staging buffer first: a copy runs once no pending copy reads its target; a cycle
    (`u, u_new = u_new, u`) stages one source and goes on: one copy more per cycle, not one
    per array. A source that is a view of its own target (a transpose) is staged too."""
    pending = {k: (src, dst) for k, src, dst in moves}
    order, staged = [], set()
    while pending:
        reads = [src for src, _ in pending.values()]
        ready = [k for k, (src, dst) in pending.items() if dst not in reads]
        if not ready:
            ready = [min(pending)]
            staged.add(ready[0])
        else:
            order.extend(ready)
        for k in ready:
            del pending[k]
    return order, staged


def swapped_pairs(moves, dense) -> list:
    """The pairs (a, b), a < b, of positions of a for body's yield that exchange their
    buffers (`u, u_new = u_new, u`): a's value is the whole of b's buffer and b's of a's
    (`dense`: the positions whose value has storage of its own, not a view). They swap
    buffers, not elements (Note [Swapped carried arrays])."""
    by_pos = {k: (src, dst) for k, src, dst in moves}
    pairs = []
    for a, (src, dst) in by_pos.items():
        for b, (src2, dst2) in by_pos.items():
            if a < b and src == dst2 and src2 == dst and src != dst and {a, b} <= dense:
                pairs.append((a, b))
    return pairs


# Note [Swapped carried arrays]
# A for loop whose body exchanges two carried arrays (`u, u_new = u_new, u`, a Jacobi sweep)
# would copy them through a staging buffer at every iteration (parallel_moves: 3 copies of
# the array), which cost the 128x128 stencil of 50 sweeps half its forward time. Instead the
# loop runs two iterations per turn, the second with the two buffers exchanged: codegen
# addresses the storage of either position through `Ctx.redirect`, and every value aliased to
# a carried buffer shares that storage, so all of them follow. The pointers stay constants
# (offsets in the workspace), which LLVM needs to vectorise the body (with pointers swapped
# at run time, phis, it did not vectorise the stencil's reverse sweep). An odd trip count
# runs its last iteration after the loop and then exchanges the two buffers' contents once,
# through the stage buffer the plan keeps for the pair, so the loop leaves each array in its
# own buffer, as its outputs expect. The other moves of the yield read their sources through
# the redirect; a position whose value is a view of the other buffer (`u, v = v.T, u`) is
# staged and copied as before. Only for loops with a constant step (the count of an odd
# last iteration is then simple); code size: the body twice.
