"""Structured control flow (cond, for_loop, while_loop), checks, loop tapes
(tape_new/push/get) and codegen's in-place `accumulate` op.

The planner (plan.py) turns each control op into a ControlUnit whose regions are Blocks of
units; `emit_control` emits them as real LLVM control flow: `cond` as a conditional branch (only
the taken region runs), `for_loop` as a counted loop over an i64 phi with Python `range`
semantics, `while_loop` as a loop whose header runs the cond region. Where carried values live
and how the yield copies them is Note [Carried storage] in plan.py; tapes are Note [Tapes in
codegen]; `accumulate` is Note [In-place accumulation].
"""
from __future__ import annotations

import numpy as np
from llvmlite import ir

from llgrad.runtime.errors import InternalError, UnsupportedError
from llgrad.runtime.ops.control import (check_p, cond_p, constant_p, for_loop_p, tape_get_p,
                                        tape_new_p, tape_push_p, while_loop_p)

from .. import elementwise as ew
from ..layout import Layout, contiguous_strides
from ..loops import I64, PTR
from ..plan import ControlUnit, accumulate_p
from ..registry import lowers
from .index import _index_map, _flat
from .shape import copy_layout

I1 = ir.IntType(1)
_DYNAMIC_ROWS = 16


def _structural(ctx, op):  # pragma: no cover - ControlUnits are emitted by emit_control
    raise InternalError(f"{op.prim.name} is emitted by emit_control, not as an op")


for _p in (cond_p, for_loop_p, while_loop_p):
    lowers(_p)(_structural)


# ---- control units ------------------------------------------------------------------------
def emit_control(ctx, u: ControlUnit) -> None:
    prim = u.op.prim
    if prim is cond_p:
        _emit_cond(ctx, u)
    elif prim is for_loop_p:
        _emit_for(ctx, u)
    elif prim is while_loop_p:
        _emit_while(ctx, u)
    else:
        raise InternalError(f"no control lowering for {prim.name}")
    ctx.stats[f"{prim.name} ops"] = ctx.stats.get(f"{prim.name} ops", 0) + 1


def _emit_block(ctx, blk) -> None:
    from ..lower import _emit_unit
    for u in blk.units:
        _emit_unit(ctx, u)


def _same_storage(ctx, a, b) -> bool:
    return ctx.plan.same_storage(a, b)


def _assign(ctx, pairs, stage=None) -> None:
    """Parallel assignment dst_k := src_k into the storage of each dst (see Note [Carried
    storage]): 0-d values are loaded before anything is stored; arrays listed in `stage`
    (position -> staging value) go through their staging buffer."""
    stage = stage or {}
    b = ctx.b
    scalars, arrays, staged = [], [], []
    for k, (src, dst) in enumerate(pairs):
        if _same_storage(ctx, src, dst):
            continue
        if src in ctx.plan.tape_class or dst in ctx.plan.tape_class:
            raise InternalError("codegen: a tape flows into another tape's header")
        if src.aval.shape == ():
            scalars.append((ctx.load_scalar(src), dst))
        elif k in stage:
            _copy(ctx, src, ctx.out(stage[k]))
            staged.append((stage[k], dst))
        else:
            arrays.append((src, dst))
    for val, dst in scalars:
        ctx.store_scalar(val, dst)
    for src, dst in arrays + staged:
        _copy(ctx, src, ctx.out(dst))
    del b


def _copy(ctx, src, dst_ptr) -> None:
    copy_layout(ctx, ctx.layout(src), dst_ptr, src.aval.dtype)


def _truth(ctx, v) -> ir.Value:
    return ew.Emitter(ctx.b, 1).to_bool(ctx.load_scalar(v))


def _emit_cond(ctx, u) -> None:
    b, op = ctx.b, u.op
    pred = _truth(ctx, op.inputs[0])
    if not isinstance(pred, ir.Value):  # a constant predicate: only that branch exists
        blk = u.blocks[0 if pred else 1]
        _emit_block(ctx, blk)
        _assign(ctx, list(zip(blk.results, op.outputs)))
        return
    fn = b.function
    then_bb, else_bb, merge = (fn.append_basic_block(f"cond.{s}") for s in
                               ("then", "else", "merge"))
    b.cbranch(pred, then_bb, else_bb)
    for blk, bb in zip(u.blocks, (then_bb, else_bb)):
        b.position_at_end(bb)
        _emit_block(ctx, blk)
        _assign(ctx, list(zip(blk.results, op.outputs)))
        b.branch(merge)
    b.position_at_end(merge)


def _const_int(v):
    if v.op is not None and v.op.prim is constant_p:
        return int(v.op.params["value"])
    return None


def _emit_for(ctx, u) -> None:
    b, op = ctx.b, u.op
    body = u.blocks[0]
    start, stop, step = (ctx.load_scalar(v) for v in op.inputs[:3])
    carried = body.params[1:]
    _assign(ctx, list(zip(op.inputs[3:], carried)))
    fn = b.function
    header, loop, exit_ = (fn.append_basic_block(f"for.{s}") for s in ("header", "body", "exit"))
    pre = b.block
    b.branch(header)
    b.position_at_end(header)
    i = b.phi(I64, name="for.i")
    i.add_incoming(start, pre)
    k = _const_int(op.inputs[2])
    if k is not None:
        go = b.icmp_signed("<" if k > 0 else ">", i, stop)
    else:
        go = b.select(b.icmp_signed(">", step, ir.Constant(I64, 0)),
                      b.icmp_signed("<", i, stop), b.icmp_signed(">", i, stop))
    b.cbranch(go, loop, exit_)
    b.position_at_end(loop)
    ctx.store_scalar(i, body.params[0])
    _emit_block(ctx, body)
    _assign(ctx, list(zip(body.results, carried)), body.stage)
    i.add_incoming(b.add(i, step, name="for.next"), b.block)
    b.branch(header)
    b.position_at_end(exit_)


def _emit_while(ctx, u) -> None:
    b, op = ctx.b, u.op
    cblk, body = u.blocks
    _assign(ctx, list(zip(op.inputs, body.params)))
    fn = b.function
    header, loop, exit_ = (fn.append_basic_block(f"while.{s}") for s in
                           ("header", "body", "exit"))
    b.branch(header)
    b.position_at_end(header)
    _emit_block(ctx, cblk)
    go = _truth(ctx, cblk.results[0])
    if not isinstance(go, ir.Value):
        go = ir.Constant(I1, int(bool(go)))
    b.cbranch(go, loop, exit_)
    b.position_at_end(loop)
    _emit_block(ctx, body)
    _assign(ctx, list(zip(body.results, body.params)), body.stage)
    b.branch(header)
    b.position_at_end(exit_)


# ---- tapes --------------------------------------------------------------------------------
def _libc(module, name, ret, args):
    fn = module.globals.get(name)
    if fn is None:
        fn = ir.Function(module, ir.FunctionType(ret, args), name)
    return fn


def _realloc(b):
    return _libc(b.module, "realloc", PTR, [PTR, I64])


def init_tapes(ctx) -> None:
    """Allocas {data, rows, capacity} for every tape class, set to {null, 0, 0}."""
    b = ctx.b
    for k in sorted(ctx.plan.tape_rows):
        data, n, cap = b.alloca(PTR, name=f"tape{k}.data"), b.alloca(I64, name=f"tape{k}.n"), \
            b.alloca(I64, name=f"tape{k}.cap")
        b.store(ir.Constant(PTR, None), data)
        b.store(ir.Constant(I64, 0), n)
        b.store(ir.Constant(I64, 0), cap)
        ctx.tapes[k] = (data, n, cap)


def free_tapes(ctx) -> None:
    b = ctx.b
    free = _libc(b.module, "free", ir.VoidType(), [PTR])
    for k in sorted(ctx.tapes):
        b.call(free, [b.load(ctx.tapes[k][0], typ=PTR)])


def _row(ctx, v):
    shape, dtype = ctx.plan.tape_rows[ctx.plan.storage[v][1]]
    elems = int(np.prod(shape, dtype=np.int64))
    return shape, dtype, elems, max(elems * dtype.itemsize, 1)


def _ensure(ctx, v, want: ir.Value, grow_to: ir.Value) -> None:
    """If the tape holds fewer than `want` rows, realloc it to `grow_to` rows."""
    b = ctx.b
    data, _, cap = ctx.tape(v)
    _, _, _, row_bytes = _row(ctx, v)
    have = b.load(cap, typ=I64)
    with b.if_then(b.icmp_signed("<", have, want), likely=False):
        new = b.call(_realloc(b), [b.load(data, typ=PTR),
                                   b.mul(grow_to, ir.Constant(I64, row_bytes))])
        b.store(new, data)
        b.store(grow_to, cap)


@lowers(tape_new_p)
def _lower_tape_new(ctx, op) -> None:
    out = op.outputs[0]
    rows = op.params["rows"]
    want = ir.Constant(I64, max(int(rows), 1) if rows is not None else _DYNAMIC_ROWS)
    _ensure(ctx, out, want, want)
    ctx.b.store(ir.Constant(I64, 0), ctx.tape(out)[1])


@lowers(tape_push_p, accepts=lambda op, i, layout: True)
def _lower_tape_push(ctx, op) -> None:
    b = ctx.b
    t, x = op.inputs
    data, n_ptr, cap = ctx.tape(t)
    shape, dtype, elems, _ = _row(ctx, t)
    n = b.load(n_ptr, typ=I64)
    have = b.load(cap, typ=I64)
    doubled = b.mul(have, ir.Constant(I64, 2))
    grow = b.select(b.icmp_signed("<", doubled, ir.Constant(I64, _DYNAMIC_ROWS)),
                    ir.Constant(I64, _DYNAMIC_ROWS), doubled)
    _ensure(ctx, t, b.add(n, ir.Constant(I64, 1)), grow)
    row = b.gep(b.load(data, typ=PTR), [b.mul(n, ir.Constant(I64, elems))], inbounds=True,
                source_etype=ew.memtype(dtype))
    if x.aval.shape == ():
        ew._store(b, ctx.load_scalar(x), row, ir.Constant(I64, 0), dtype)
    else:
        _copy(ctx, x, row)
    b.store(b.add(n, ir.Constant(I64, 1)), n_ptr)


@lowers(tape_get_p)
def _lower_tape_get(ctx, op) -> None:
    b = ctx.b
    t, k = op.inputs
    out = op.outputs[0]
    data = ctx.tape(t)[0]
    shape, dtype, elems, _ = _row(ctx, t)
    row = b.gep(b.load(data, typ=PTR), [b.mul(ctx.load_scalar(k), ir.Constant(I64, elems))],
                inbounds=True, source_etype=ew.memtype(dtype))
    if out.aval.shape == ():
        ctx.store_scalar(ew._load(b, row, ir.Constant(I64, 0), dtype, 1), out)
    else:
        ew.emit_loops(b, shape, [ew.Operand(ptr=row, strides=contiguous_strides(shape),
                                            dtype=dtype)],
                      [(ctx.out(out), dtype)], lambda em, vals: vals)


# ---- accumulate (Note [In-place accumulation]) --------------------------------------------
@lowers(accumulate_p)
def _lower_accumulate(ctx, op) -> None:
    b = ctx.b
    out = op.outputs[0]
    shape, dt = out.aval.shape, out.aval.dtype
    nb = op.params["nbases"]
    bases = op.inputs[:nb]
    dst = ctx.out(out)
    if nb == 1 and _same_storage(ctx, bases[0], out):
        pass  # in place: out's buffer is the base's
    elif nb == 0:
        ew.emit_loops(b, shape, [ew.Operand(value=0)], [(dst, dt)], lambda em, v: v)
    else:
        def total(em, vals):
            acc = vals[0]
            for v in vals[1:]:
                acc = em.add(acc, v)
            return [acc]
        ew.emit_loops(b, shape, [ctx.operand(v) for v in bases], [(dst, dt)], total)
    dense = Layout(out, tuple(shape), contiguous_strides(shape))
    pos = nb
    for key, n_idx in op.params["scatters"]:
        g, idx = op.inputs[pos], op.inputs[pos + 1:pos + 1 + n_idx]
        pos += 1 + n_idx
        if not idx:  # basic key: distinct positions, an elementwise add into the view
            target = dense.index(key)
            base = b.gep(dst, [ir.Constant(I64, target.offset)], inbounds=True,
                         source_etype=ew.memtype(dt))
            view = ew.Operand(ptr=base, strides=target.strides, dtype=dt)
            ew.emit_loops(b, target.shape, [view, ctx.operand(g)],
                          [(base, dt, target.strides)], lambda em, v: [em.add(v[0], v[1])])
            continue
        oshape, offset = _index_map(ctx, dense, key, idx)
        em = ew.Emitter(b, 1)
        if g.aval.shape == ():
            at = offset(b, ())
            ew._store(b, em.add(ew._load(b, dst, at, dt, 1), ctx.load_scalar(g)), dst, at, dt)
            continue
        gp = ctx.ptr(g)
        from ..loops import loop_nest
        with loop_nest(b, oshape, name="acc") as oi:
            at = offset(b, oi)
            v = ew._load(b, gp, _flat(b, oi, oshape), dt, 1)
            ew._store(b, em.add(ew._load(b, dst, at, dt, 1), v), dst, at, dt)


# ---- checks (Note [Checks]) ---------------------------------------------------------------
@lowers(check_p)
def _lower_check(ctx, op) -> None:
    """Leave the kernel with the user's exception when the check fails."""
    fail_if = getattr(ctx, "fail_if", None)  # Note [Native errors] (branch nativesafety)
    if fail_if is None:
        raise UnsupportedError(
            f"native code cannot raise {op.params['exc'].__name__} (a `raise` under a traced "
            f"condition) yet", loc=op.loc,
            fix="run with LLGRAD_DISABLE_JIT=1 (the interpreter raises it), or test the "
            "condition outside the differentiated function")
    fail_if(_truth(ctx, op.inputs[0]), "user", op, (op.params["exc"], op.params["args"]))
