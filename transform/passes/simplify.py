"""Algebraic simplification and constant folding.

Requires: verified IR with explicit broadcasts. Produces: the same IR with uses rewired to
simpler values: x*1, 1*x, x+0, 0+x, x-0, x/1 -> x; --x -> x; broadcast_to/reshape/astype/
transpose to the same aval and reductions over no axes -> x; in a concatenate along axis 0,
consecutive rows x[i], ..., x[j] each reshaped to (1, ...) (np.stack or np.array of a list a
staged loop appended to) -> one slice x[i:j+1], and all of x's rows -> x; reshape of reshape -> one reshape; transpose of transpose ->
one transpose (or x); an element just stored read back (getitem of index_put at the same
integer key) -> the value stored; x with an element zeroed plus that element scattered back
(index_put(x, 0, i) + scatter_add(x[i], i), the reverse sweep of `q[i] += v` or
`G[:, 0] += v`) -> x; and ops whose inputs are all constants folded by running
their impl (when the result is no larger than 1024 elements or its largest input). Nothing
that changes NaN/inf propagation (no x*0 -> 0, no x-x -> 0); x+0 -> x only flips the sign of
a -0.0 result.
Identities are dropped; bypassed producers stay for dce.
"""
from __future__ import annotations

import numpy as np

from llgrad.runtime.aval import Aval
from llgrad.runtime.ops import elementwise as ew
from llgrad.runtime.ops import index as ix
from llgrad.runtime.ops import reduce as rd
from llgrad.runtime.ops import shape as sh
from llgrad.runtime.ops.control import constant_p
from llgrad.transform import ir
from llgrad.transform.passes import Pass, substitute

FOLD_LIMIT = 1024


def _splat(v: ir.Value):
    """The scalar every element of v equals, if v is a constant (or a broadcast of one)."""
    op = v.op
    while op is not None and op.prim is sh.broadcast_to_p:
        op = op.inputs[0].op
    if op is None or op.prim is not constant_p:
        return None
    val = op.params["value"]
    if val.size == 0 or not np.all(val == val.reshape(-1)[0]):
        return None
    return val.reshape(-1)[0]


def _is(v, c) -> bool:
    s = _splat(v)
    return s is not None and s == c


def _same(op, x) -> bool:
    return x.aval == op.outputs[0].aval


def _identity(op):
    """The value `op` is equal to, or None."""
    p, ins = op.prim, op.inputs
    if p is ew.mul_p:
        for a, b in (ins, ins[::-1]):
            if _is(b, 1) and _same(op, a):
                return a
    elif p is ew.add_p:
        for a, b in (ins, ins[::-1]):
            if _is(b, 0) and _same(op, a) or _restored(a, b, op):
                return a if _is(b, 0) else a.op.inputs[0]
    elif p in (ew.sub_p, ew.div_p):
        if _is(ins[1], 0 if p is ew.sub_p else 1) and _same(op, ins[0]):
            return ins[0]
    elif p is ew.neg_p:
        src = ins[0].op
        if src is not None and src.prim is ew.neg_p:
            return src.inputs[0]
    elif p in (sh.broadcast_to_p, sh.reshape_p, ew.astype_p, ew.copy_p):
        if _same(op, ins[0]) and p is not ew.copy_p:
            return ins[0]
    elif p in (rd.reduce_sum_p, rd.reduce_prod_p, rd.reduce_max_p, rd.reduce_min_p):
        if not op.params["axes"] and _same(op, ins[0]):  # a reduction over no axes
            return ins[0]
    elif p is sh.concatenate_p:
        if len(ins) == 1 and _same(op, ins[0]):
            return ins[0]
    elif p is ix.getitem_p:
        return _forwarded(op)
    elif p is sh.transpose_p:
        if tuple(op.params["perm"]) == tuple(range(len(op.params["perm"]))):
            return ins[0]
        src = ins[0].op
        if src is not None and src.prim is sh.transpose_p:
            perm = tuple(src.params["perm"][i] for i in op.params["perm"])
            if perm == tuple(range(len(perm))):
                return src.inputs[0]
    return None


def _forwarded(op):
    """v for `getitem(index_put(x, v, i...), i...)` with the same key of integers (element or
    row access; 0-d index values, the same IR values) and v of the result's aval: the value
    just stored (`a[j] = s; t = a[j]` in a loop body, so that the reverse sweep need not
    rebuild `a` to read it back). A dead index_put goes with its check, as dce drops any."""
    src = op.inputs[0].op
    if src is None or src.prim is not ix.index_put_p or src.params["key"] != op.params["key"]:
        return None
    if len(src.inputs) - 2 != len(op.inputs) - 1 or \
            any(a is not b for a, b in zip(src.inputs[2:], op.inputs[1:])):
        return None
    if any(e[0] not in "ai" for e in op.params["key"]) or any(
            v.aval.shape or v.aval.dtype.kind not in "iu" for v in op.inputs[1:]):
        return None
    v = src.inputs[1]
    return v if _same(op, v) else None


def _same_element(ops) -> bool:
    """Whether indexing ops (getitem, scatter_add, index_put) all reach the same positions,
    each once: one key of integers, slices, newaxis and ellipsis (basic indexing: `q[r]`,
    `G[:, 0]`) and the same 0-d integer index values."""
    idx = [o.inputs[2:] if o.prim is ix.index_put_p else o.inputs[1:] for o in ops]
    key = ops[0].params["key"]
    return all(o.params["key"] == key for o in ops) and all(e[0] in "aisne" for e in key) and \
        all(len(i) == len(idx[0]) and all(x is y for x, y in zip(i, idx[0])) for i in idx) \
        and all(not x.aval.shape and x.aval.dtype.kind in "iu" for x in idx[0])


def _restored(a, b, op) -> bool:
    """Whether a + b is x: a = `index_put(x, 0, i...)` (x with the element zeroed) and b =
    `scatter_add(x[i...], i...)` (that element alone, at its place). The reverse sweep of
    `q[r] += v` makes it: index_put's rule gives the cotangent with element r zeroed, the
    read's gives element r back (or a row, a column: any basic index)."""
    put, sc = a.op, b.op
    if put is None or sc is None or put.prim is not ix.index_put_p or \
            sc.prim is not ix.scatter_add_p or not _is(put.inputs[1], 0):
        return False
    get, x = sc.inputs[0].op, put.inputs[0]
    return get is not None and get.prim is ix.getitem_p and get.inputs[0] is x and \
        _same(op, x) and tuple(sc.params["shape"]) == tuple(x.aval.shape) and \
        _same_element([put, sc, get])


def _row(v):
    """(x, t) when v is row t of x reshaped to (1, ...), looking through a copy (an item of a
    list a staged loop appended to, Note [Containers in staged loops] in tracer/effects.py,
    made strong for np.stack); else None."""
    r = v.op
    g = r.inputs[0].op if r is not None and r.prim is sh.reshape_p else None
    if g is not None and g.prim is ew.copy_p:
        g = g.inputs[0].op
    if g is None or g.prim is not ix.getitem_p or len(g.inputs) != 1:
        return None
    x, key = g.inputs[0], g.params["key"]
    if len(key) != 1 or key[0][0] != "i" or not x.aval.shape or \
            v.aval != Aval((1,) + x.aval.shape[1:], x.aval.dtype):
        return None
    return x, key[0][1] % x.aval.shape[0]


def _merge_rows(op) -> list:
    """Rewrite a concatenate along axis 0 in place so that each run of consecutive rows of
    one array, x[i], ..., x[j] (each reshaped to (1, ...)), is one operand x[i:j+1] (x itself
    for all its rows): np.array of a list a staged loop appended to reads the loop's buffer
    once, not n rows stacked back (n getitems forward, n scatter-adds backward). Returns the
    slice ops to insert before it."""
    ins, rows = op.inputs, [_row(v) for v in op.inputs]
    if sum(r is not None for r in rows) < 2:
        return []
    new_ins, new_ops, i = [], [], 0
    while i < len(ins):
        j = i + 1
        if rows[i] is not None:
            x, t = rows[i]
            while j < len(ins) and rows[j] is not None and rows[j][0] is x and \
                    rows[j][1] == t + j - i:
                j += 1
        if j - i < 2:
            new_ins.append(ins[i])
        elif j - i == x.aval.shape[0]:
            new_ins.append(x)
        else:
            out = ir.Value(Aval((j - i,) + x.aval.shape[1:], x.aval.dtype))
            new_ops.append(ir.Op(ix.getitem_p, [x], {"key": (("s", t, t + j - i, None),)},
                                 [out], (), op.loc))
            new_ins.append(out)
        i = j
    op.inputs = new_ins
    return new_ops


def _combine(op):
    """Rewrite op in place to skip an intermediate op (reshape∘reshape, transpose∘transpose)."""
    src = op.inputs[0].op if op.inputs else None
    if src is None or src.prim is not op.prim:
        return
    if op.prim is sh.reshape_p:
        op.inputs = [src.inputs[0]]
    elif op.prim is sh.transpose_p:
        op.inputs = [src.inputs[0]]
        op.params = {"perm": tuple(src.params["perm"][i] for i in op.params["perm"])}


def _fold(op):
    """A constant op replacing `op`, when all its inputs are constants; else None."""
    if op.regions or op.prim is constant_p or op.prim.family in ("control", "tape") or \
            op.prim.multiple_results or op.prim is sh.broadcast_to_p or not op.inputs:
        return None
    if any(v.op is None or v.op.prim is not constant_p for v in op.inputs):
        return None
    out = op.outputs[0]
    size = int(np.prod(out.aval.shape, dtype=np.int64))
    if size > max(FOLD_LIMIT, *(v.op.params["value"].size for v in op.inputs)):
        return None
    with np.errstate(all="ignore"):
        val = np.asarray(op.prim.impl(*(v.op.params["value"] for v in op.inputs), **op.params))
    val = np.array(val, dtype=out.aval.dtype)  # a fresh 0-d-safe copy
    return ir.Op(constant_p, [], {"value": val}, [out], (), op.loc)


def _region(region: ir.Region, subst: dict) -> None:
    new_ops = []
    for op in region.ops:
        op.inputs = [subst.get(v.id, v) for v in op.inputs]
        for r in op.regions:
            _region(r, subst)
        if op.prim is sh.concatenate_p and op.params["axis"] == 0:
            new_ops.extend(_merge_rows(op))
        if not op.regions:
            _combine(op)
            same = _identity(op)
            if same is not None:
                subst[op.outputs[0].id] = same
                continue
            folded = _fold(op)
            if folded is not None:
                op = folded
        new_ops.append(op)
    region.ops = new_ops
    region.results = [subst.get(v.id, v) for v in region.results]


def _simplify(fn: ir.Function) -> ir.Function:
    subst: dict = {}
    _region(fn.body, subst)
    substitute(fn.body, subst)
    return fn


simplify = Pass("simplify", _simplify, __doc__)
