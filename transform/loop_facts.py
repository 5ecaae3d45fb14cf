"""What reverse mode reads off a loop body before it differentiates it: which carried values
and reads the forward loop tapes, which counters it recomputes, which reads of captured
arrays get scalar cotangents (transform/loop_ad.py uses them; Note [Loop tapes] there), and
the tapes of a joint function, for `inspect()` (`describe_tapes`, `tape_stats`).
"""
from __future__ import annotations

import numpy as np

from llgrad.runtime.aval import aval_str
from llgrad.runtime.ops.control import constant_p, for_loop_p, tape_new_p, while_loop_p
from llgrad.runtime.ops.elementwise import add_p, mul_p, sub_p
from llgrad.runtime.ops.index import getitem_p, index_put_p
from llgrad.runtime.ops.window import window_update_p
from llgrad.transform import control, ir

# Note [Element cotangents]
# A Numba-style inner loop reads elements of arrays from outside at indices it does not
# change: `Qxc[r] += icf[j, pos] * xc[c]` in a loop over r reads xc[c]. Its reverse sweep
# added each iteration's cotangent of xc[c] into the running cotangent of xc at c: a
# load-add-store through memory per iteration, a dependency chain LLVM cannot keep in a
# register (the other scatters of the body may alias it), 20% of gmm_loops' gradient. So
# when every read of a captured array in the body is such a top-level element read (at
# most MAX_ELEMENTS of them; indices from enclosing regions or computed from them by
# integer +, -, *), the sweep carries one scalar cotangent per read instead of the array's
# (starting at 0; `stop` keeps the read's own adjoint from running), and after the loop
# scatters it once into the array's cotangent at the read's index (the index ops cloned
# after the loop). A loop that ran no iteration has a zero cotangent there, but its index
# may be out of range (`w[c + 1]` in `for r in range(c + 1, n)` at c = n - 1, never read):
# unless the trip count is a constant > 0 the scatter goes to where(n > 0, index, 0).

# Note [Element reads of work arrays]
# A body that reads an element of an array the loop carries (or of one it just updated,
# `a[j] = a[j] * w[j]; t = a[j - 1]`) needs that element in the reverse sweep, and
# recomputing the read there needs the whole array of the iteration's entry, taped every
# iteration: O(n) bytes per element read, O(n^2) for a loop over the array. So the forward
# loop tapes each such read's result (`reads_part`: a getitem of a carried array or of an
# index_put / window_update chain from one, smaller than the array) as it tapes expensive
# outputs; the reverse sweep reads it instead of recomputing it, and the array's tape,
# then unread, goes with dce, as does the tape of a read whose value the sweep does not
# need (`Qxc[r] += ...` reads Qxc[r], whose value no adjoint uses). A work array
# overwritten every iteration (gmm's xc) is thus taped neither per element written nor
# per iteration; what the reverse sweep reads of it is taped once per use.

MAX_ELEMENTS = 8  # element reads of one array given scalar cotangents (Note [Element cotangents])


def describe_tapes(fn: ir.Function) -> list[dict]:
    """One entry per `tape_new` op of `fn`, in program order: "row" (the row aval), "rows"
    (the trip count, or "grows" when only known at run time), "row bytes", "bytes" (rows x
    row bytes, or "grows") and "in loop" (True when the tape is allocated once per
    iteration of an enclosing loop, e.g. an inner loop's tape in an outer loop's reverse sweep;
    "bytes" is then per allocation)."""
    out = []

    def visit(region, depth):
        for op in region.ops:
            if op.prim is tape_new_p:
                shape, dtype, rows = op.params["shape"], np.dtype(op.params["dtype"]), \
                    op.params["rows"]
                row = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
                out.append({"row": aval_str(shape, dtype),
                            "rows": "grows" if rows is None else rows, "row bytes": row,
                            "bytes": "grows" if rows is None else rows * row,
                            "in loop": depth > 0})
            inner = depth + (op.prim in (for_loop_p, while_loop_p))
            for r in op.regions:
                visit(r, inner)

    visit(fn.body, 0)
    return out


def tape_stats(fn: ir.Function | None) -> dict:
    """`inspect().stats` entries for the tapes of a joint function: "tapes" (how many
    tape_new ops) and "tape bytes (static)" (the sum of the rows x row bytes known at compile
    time; growing tapes, counted in "tapes (growing)", are not included). Read off the IR, so
    it reflects the passes run after AD (dce drops tapes the reverse sweep never reads);
    fn.meta["tapes"] is the AD output's description (describe_tapes)."""
    tapes = describe_tapes(fn) if fn is not None else []
    stats = {"tapes": len(tapes),
             "tape bytes (static)": sum(t["bytes"] for t in tapes if t["rows"] != "grows")}
    growing = sum(t["rows"] == "grows" for t in tapes)
    if growing:
        stats["tapes (growing)"] = growing
    return stats


def reads(region: ir.Region) -> set:
    """Ids of the values the ops of `region` (nested regions included) read: their operands
    and what nested regions yield (a cond branch may yield an enclosing value unchanged, e.g.
    a loop-carried flag; recomputing the cond then needs that value). The region's own
    results are not reads: the reverse sweep does not re-yield them."""
    ids = set()
    for op in region.walk():
        ids.update(v.id for v in op.inputs)
        for r in op.regions:
            ids.update(v.id for v in r.results)
    return ids


def const_int(v):
    op = v.op
    if op is not None and op.prim is constant_p and op.params["value"].ndim == 0:
        return int(op.params["value"])
    return None


def expensive(op) -> bool:
    """Ops whose output a loop's forward sweep tapes rather than the reverse sweep recomputing
    (`Primitive.expensive`: transcendental elementwise ops, reductions, linear algebra); see
    Note [Loop tapes] in loop_ad.py."""
    return not op.regions and len(op.outputs) == 1 and op.outputs[0].aval.dtype.kind == "f" \
        and op.prim.expensive


def rule_reads_output(prim) -> bool:
    """Whether some VJP rule of `prim` may read its output (conservative)."""
    if callable(prim.saves):
        return True
    if prim.saves is not None:
        return -1 in prim.saves
    if prim.reads is None:
        return True
    return any(r is None or -1 in r for r in prim.reads)


def variant(body: ir.Region) -> set:
    """Ids of the values of `body`'s top-level ops that depend on its params (the index and the
    carried values): the loop-invariant rest is never taped."""
    var = {p.id for p in body.params}
    for op in body.ops:
        reads = [v.id for v in op.inputs] + [v.id for r in op.regions for v in r.free_values()]
        if any(k in var for k in reads):
            var.update(o.id for o in op.outputs)
    return var


def next_carried(body: ir.Region, carried, stored) -> dict:
    """{id of body result k: k} for the carried values k on the tape whose next value (the
    body's result k) is computed by a plain top-level op of the body and may be read by the
    adjoint (the op's VJP reads its output, or another op of the body reads it): the reverse
    sweep reads it from the tape's row j+1 (the next iteration's entry state) instead of
    recomputing it."""
    top = {id(op) for op in body.ops}
    read = reads(body)
    out = {}
    for k in stored:
        res = body.results[k]
        op = res.op
        if op is None or id(op) not in top or op.regions or res.id in out:
            continue
        if res.id in read or rule_reads_output(op.prim):
            out[res.id] = k
    return out


def induction(body: ir.Region, carried) -> dict:
    """{k: (step, sign)} for the integer carried values k that the body advances by a step
    it does not change (`pos += 1`, `pos -= d`; the step a constant or a value from outside
    the body): at iteration j such a value is init + sign * j * step, which the reverse sweep
    computes instead of taping it every iteration (Note [Loop tapes] in loop_ad.py)."""
    top = {id(op) for op in body.ops}
    inside = {v.id for op in body.ops for v in op.outputs} | {p.id for p in body.params}
    out = {}
    for k, p in enumerate(carried):
        r = body.results[k]
        op = r.op
        if op is None or id(op) not in top or r.aval != p.aval or p.aval.shape \
                or p.aval.dtype != np.int64:
            continue
        if op.prim is add_p:  # `is`: IR values compare elementwise
            steps = [(v, 1) for v in op.inputs if v is not p]
        elif op.prim is sub_p and op.inputs[0] is p:
            steps = [(op.inputs[1], -1)]
        else:
            continue
        if len(steps) == 1 and any(v is p for v in op.inputs) and steps[0][0] is not p:
            c, sign = steps[0]
            const = c.op is not None and c.op.prim is constant_p and not c.aval.shape
            if const or c.id not in inside:
                out[k] = (c, sign)
    return out


def index_slice(body: ir.Region, values) -> list | None:
    """The top-level ops of a for_loop `body` computing `values` from its index (param 0) and
    values from outside the body only, in order; None when one depends on a carried value
    or is not integer +, -, *, a constant or an element read at a constant index. The
    reverse sweep clones them to recompute the values, also at indices the loop does not run
    (they cannot fail)."""
    made = {o.id: op for op in body.ops for o in op.outputs}
    index, need, seen = body.params[0], {}, set()

    def visit(v) -> bool:
        if v is index or v.id in seen:
            return True
        op = made.get(v.id)
        if op is None:
            return all(v is not q for q in body.params)
        if not (op.prim in (constant_p, add_p, sub_p, mul_p) or op.prim is getitem_p
                and len(op.inputs) == 1) or v.aval.shape or not all(visit(x) for x in op.inputs):
            return False
        seen.update(o.id for o in op.outputs)
        need[id(op)] = op
        return True

    if not all(visit(v) for v in values):
        return None
    return [op for op in body.ops if id(op) in need]


def reversible(body: ir.Region, carried, counted) -> dict:
    """{k: steps} for the integer carried values k of a for_loop, other than `induction`'s,
    whose exit value is their entry value plus steps computed from the loop index and values
    from outside the body only: `pos += c`, `pos -= 2 * c + 1`, or an inner for_loop advancing
    it by a fixed step per trip (`for r in range(c + 1, d): pos += 1`), in any sequence. Each
    step is (sign, value, inner): +-value, times the trips of the inner loop when there is one.
    The reverse sweep recovers each iteration's entry value from its exit value instead of
    taping it (Note [Counters recovered backwards] in loop_ad.py)."""
    top = {id(op) for op in body.ops}

    def steps(v, p, depth=0) -> list | None:  # v - p as steps, or None
        if v is p:
            return []
        op = v.op
        if op is None or id(op) not in top or v.aval != p.aval or depth > 16:
            return None
        if op.prim is for_loop_p:
            m = next(i for i, o in enumerate(op.outputs) if o is v)
            inner = induction(control.body(op), control.carried(op))
            if m not in inner or const_int(control.bounds(op)[2]) in (None, 0):
                return None
            before = steps(control.state(op)[m], p, depth + 1)
            step, sign = inner[m]
            return None if before is None else before + [(sign, step, op)]
        if op.prim in (add_p, sub_p) and len(op.inputs) == 2:
            for i in (0, 1) if op.prim is add_p else (0,):
                before = steps(op.inputs[i], p, depth + 1)
                if before is not None:
                    sign = -1 if op.prim is sub_p else 1
                    return before + [(sign, op.inputs[1 - i], None)]
        return None

    out = {}
    for k, p in enumerate(carried):
        if k in counted or p.aval.shape or p.aval.dtype != np.int64:
            continue
        found = steps(body.results[k], p)
        if found and index_slice(body, step_values(found)) is not None:
            out[k] = found
    return out


def step_values(steps) -> list:
    """The values of the body `reversible`'s steps are computed from (inner loops' bounds)."""
    vals = []
    for _, value, inner in steps:
        vals += [] if inner is None else control.bounds(inner)[:2]
        vals += [value] if const_int(value) is None else []
    return vals


def element_reads(body: ir.Region, captured) -> tuple[list, list]:
    """The top-level ops of `body` reading an element of a captured array at indices the body
    does not change (`xc[c]`, `w[c + 1]` in a loop over r), when they are the only reads of
    that array in the body (nested regions included): their cotangents are scalars the
    reverse sweep carries in registers, scattered into the array's once after it (Note
    [Element cotangents]). Returns (the reads, the top-level ops computing their indices
    from values of enclosing regions: integer +, -, * and constants, which cannot fail)."""
    free = {v.id for v in body.free_values()}
    made = {o.id: op for op in body.ops for o in op.outputs}
    readers: dict = {}
    for op in body.walk():
        for v in op.inputs:
            readers.setdefault(v.id, []).append(op)
        for r in op.regions:
            for v in r.results:
                readers.setdefault(v.id, []).append(None)
    for v in body.results:
        readers.setdefault(v.id, []).append(None)
    chain: dict = {}

    def invariant(x, depth=0) -> bool:
        if x.id in free or x.id in chain:
            return True
        op = made.get(x.id)
        if op is None or depth > 8 or op.prim not in (constant_p, add_p, sub_p, mul_p) or \
                x.aval.shape or not all(invariant(y, depth + 1) for y in op.inputs):
            return False
        chain[x.id] = op
        return True

    top = {id(op) for op in body.ops}
    out = []
    for v in captured:
        rs = readers.get(v.id, [])
        if 0 in v.aval.shape or not 0 < len(rs) <= MAX_ELEMENTS or not all(
                o is not None and id(o) in top and o.prim is getitem_p and o.inputs[0] is v
                and not o.outputs[0].aval.shape and all(
                    x is not v and not x.aval.shape and invariant(x) for x in o.inputs[1:])
                for o in rs):
            continue
        out.extend(dict.fromkeys(rs))  # (an op reading v twice is listed once)
    needed = {id(op) for op in chain.values()}
    return out, [op for op in body.ops if id(op) in needed]


def updates(op, updated) -> bool:
    """Whether `op` updates part of an array of `updated` (ids), giving the new array."""
    return op.prim in (index_put_p, window_update_p) and op.inputs[0].id in updated


def reads_part(op, updated) -> bool:
    """Whether `op` reads part of an array of `updated` (an element, a row): the forward
    loop tapes what it reads rather than the array (Note [Element reads of work arrays])."""
    if op.prim is not getitem_p or op.inputs[0].id not in updated:
        return False
    size = lambda v: int(np.prod(v.aval.shape, dtype=np.int64))  # noqa: E731
    return size(op.outputs[0]) < size(op.inputs[0])
