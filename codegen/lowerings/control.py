"""Structured control flow (cond, for_loop, while_loop), checks and codegen's in-place
`accumulate` op (loop tapes are in tapes.py).

The planner (plan.py) turns each control op into a ControlUnit whose regions are Blocks of
units; `emit_control` emits them as real LLVM control flow: `cond` as a conditional branch (only
the taken region runs), `for_loop` as a counted loop over an i64 phi with Python `range`
semantics, `while_loop` as a loop whose header runs the cond region. Where carried values live
and how the yield copies them is Note [Carried storage] in plan.py; tapes are Note [Tapes in
codegen]; `accumulate` is Note [In-place accumulation].
"""
from __future__ import annotations

from contextlib import contextmanager

import numpy as np
from llvmlite import ir

from llgrad.runtime.errors import InternalError
from llgrad.runtime.ops.control import check_p, cond_p, constant_p, for_loop_p, while_loop_p
from llgrad.runtime.ops.index import index_put_p
from llgrad.transform import control

from .. import elementwise as ew
from ..distribute import plan_parts
from ..layout import Layout, contiguous_strides
from ..loops import I64
from ..plan import ControlUnit, accumulate_p, skey
from ..registry import lowers
from ..unroll import loop_options, set_loop_options, wanted
from .index import _index_map
from .shape import copy_layout

I1 = ir.IntType(1)


def _structural(ctx, op):  # pragma: no cover - ControlUnits are emitted by emit_control
    raise InternalError(f"{op.prim.name} is emitted by emit_control, not as an op")


for _p in (cond_p, for_loop_p, while_loop_p):
    lowers(_p)(_structural)

_STATEMENTS = (index_put_p, accumulate_p)  # what a distributed loop's copy may leave out


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
    """Emit a region; index checks made in it do not hold after it (Note [Index checks])."""
    from ..lower import _emit_unit
    outer = set(ctx.checked)
    for u in blk.units:
        if ctx.only is not None and u.op is not None and u.op.prim in _STATEMENTS \
                and id(u.op) not in ctx.only:
            continue  # another copy's statement (Note [Distributed element loops])
        _emit_unit(ctx, u)
    ctx.checked = outer


def _same_storage(ctx, a, b) -> bool:
    return ctx.plan.same_storage(a, b)


def _assign(ctx, pairs, stage=None, skip=()) -> None:
    """Parallel assignment dst_k := src_k into the storage of each dst (see Note [Carried
    storage]): 0-d values are loaded before anything is stored; arrays listed in `stage`
    (position -> staging value) go through their staging buffer; positions in `skip` (buffers
    exchanged instead, Note [Swapped carried arrays]) are left alone."""
    from ..inplace import parallel_moves
    stage = stage or {}
    b = ctx.b
    scalars, arrays, staged = [], {}, []
    for k, (src, dst) in enumerate(pairs):
        if k in skip or _same_storage(ctx, src, dst):
            continue
        if src in ctx.plan.tape_class or dst in ctx.plan.tape_class:
            raise InternalError("codegen: a tape flows into another tape's header")
        if src.aval.shape == ():
            scalars.append((ctx.load_scalar(src), dst))
        elif k in stage:
            _copy(ctx, src, ctx.out(stage[k]))
            staged.append((stage[k], dst))
        else:
            arrays[k] = (src, dst)
    for val, dst in scalars:
        ctx.store_scalar(val, dst)
    order, cycles = parallel_moves([m for m in ctx.plan.moves(pairs) if m[0] in arrays])
    if cycles:
        raise InternalError("codegen: a cycle of carried arrays without a staging buffer")
    arrays = [arrays[k] for k in order]
    for src, dst in arrays + staged:
        _copy(ctx, src, ctx.out(dst))
    for _ in range(len(arrays) + 2 * len(staged)):  # See parallel_moves
        ctx.copied()
    del b


def _copy(ctx, src, dst_ptr) -> None:
    copy_layout(ctx, ctx.layout(src), dst_ptr, src.aval.dtype)


def _truth(ctx, v) -> ir.Value:
    return ew.Emitter(ctx.b, 1).to_bool(ctx.load_scalar(v))


def _emit_cond(ctx, u) -> None:
    b, op = ctx.b, u.op
    pred = _truth(ctx, control.pred(op))
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
    """A counted loop with Python `range` semantics; See Note [Where loops poll]."""
    b, op = ctx.b, u.op
    body = u.blocks[0]
    start, stop, step = (ctx.load_scalar(v) for v in control.bounds(op))
    carried = control.carried(op)
    _assign(ctx, list(zip(control.state(op), carried)))
    skip = {k for pair in body.swaps for k in pair}
    k = _const_int(control.bounds(op)[2])

    def before(i, end):
        if k is not None:
            return b.icmp_signed("<" if k > 0 else ">", i, end)
        return b.select(b.icmp_signed(">", step, ir.Constant(I64, 0)),
                        b.icmp_signed("<", i, end), b.icmp_signed(">", i, end))

    def iteration(i):
        ctx.store_scalar(i, control.counter(op))
        ctx.loop_depth += 1
        _emit_block(ctx, body)
        _assign(ctx, list(zip(body.results, carried)), body.stage, skip)
        ctx.loop_depth -= 1

    trips, work = ctx.ranges.most_trips(op), _work(ctx, body)
    short = trips is not None and work is not None and trips * work <= _SHORT
    if body.swaps:
        _emit_swapping_for(ctx, u, iteration, before, (start, stop, step, k), short)
        return
    outer = ctx.only
    for part in plan_parts(ctx, u) or [outer]:  # See Note [Distributed element loops]
        ctx.only = part
        options = loop_options(ctx, op, short and wanted(ctx, op, body, trips, work))
        if short:
            with _counted(b, start, lambda i: before(i, stop), step, options) as i:
                iteration(i)  # a short loop: no poll
        elif _heavy(work):
            with _counted(b, start, lambda i: before(i, stop), step, options) as i:
                iteration(i)
                ctx.failures.poll(op.loc)
        else:
            chunk = b.mul(step, ir.Constant(I64, _CHUNK))
            with _counted(b, start, lambda c: before(c, stop), chunk) as c:
                end = b.add(c, chunk)
                end = b.select(before(end, stop), end, stop)
                with _counted(b, c, lambda i: before(i, end), step, options) as i:
                    iteration(i)
                ctx.failures.poll(op.loc)
    ctx.only = outer


def _emit_swapping_for(ctx, u, iteration, before, bounds, short: bool) -> None:
    """A for loop whose body exchanges pairs of carried arrays (constant step k): two
    iterations per turn, the second with each pair's buffers exchanged (`Ctx.redirect`), an
    odd last iteration after the loop followed by one exchange of the buffers' contents
    (through the pair's stage buffer; not emitted when the count is a known even number).
    See Note [Swapped carried arrays] in inplace.py."""
    b, body, carried = ctx.b, u.blocks[0], control.carried(u.op)
    start, stop, step, k = bounds
    pairs = [(carried[a], carried[c], body.stage[a]) for a, c in body.swaps]
    keys = [(skey(ctx.plan.storage[x]), skey(ctx.plan.storage[y])) for x, y, _ in pairs]
    homes = [(ctx.out(x), ctx.out(y)) for x, y, _ in pairs]
    outer = dict(ctx.redirect)

    def exchanged(i):
        for (kx, ky), (px, py) in zip(keys, homes):
            ctx.redirect[kx], ctx.redirect[ky] = py, px
        iteration(i)
        ctx.redirect = dict(outer)

    c = lambda n: ir.Constant(I64, n)  # noqa: E731
    with _counted(b, start, lambda i: before(b.add(i, step), stop), c(2 * k)) as i:
        iteration(i)
        exchanged(b.add(i, step))
        if not short:
            ctx.failures.poll(u.op.loc)
    consts = [_const_int(v) for v in control.bounds(u.op)]
    if None not in consts and len(range(*consts)) % 2 == 0:
        return
    span = b.sub(stop, start) if k > 0 else b.sub(start, stop)
    n = b.select(b.icmp_signed(">", span, c(0)),
                 b.sdiv(b.add(span, c(abs(k) - 1)), c(abs(k))), c(0))
    with b.if_then(b.trunc(n, I1)):  # an odd count: the last iteration, then exchange
        iteration(b.add(start, b.mul(b.sub(n, c(1)), step)))
        for x, y, stage in pairs:
            _copy(ctx, x, ctx.out(stage))
            _copy(ctx, y, ctx.out(x))
            _copy(ctx, stage, ctx.out(y))
            for _ in range(3):
                ctx.copied()


# Note [Where loops poll]
# A poll for Ctrl-C (Note [Interrupting compiled loops]) is a volatile load and an early exit:
# either keeps LLVM's loop-access analysis off the loop, and a light scalar loop loses its
# store-to-load forwarding and vectorisation (the reverse sweep of `recurrence` ran 25%
# slower). So a loop polls by what an iteration does (`_work`: the elements its ops write,
# an inner for-loop's as often as the IR bounds it; None when it runs a while-loop or a
# for-loop of unknown bounds) and how often it runs:
# - a for-loop writing at most _SHORT elements over all its iterations (a few ms), by the
#   bounds the IR proves (codegen/ranges.py; a reverse sweep runs as often as its forward
#   loop), does not poll;
# - a heavy body (unbounded loops of its own, or more than _LIGHT elements) polls every
#   iteration: the poll's cost disappears next to the body;
# - a light body: a for-loop runs in chunks of _CHUNK iterations, an inner counted loop with
#   the body alone (which LLVM analyses as before) and a poll per chunk; a while-loop (its
#   trip count unknown, so never analysed) counts down _CHUNK iterations between polls.
# Overestimating the work only adds polls.
_SHORT, _LIGHT, _CHUNK = 1 << 22, 64, 64


def _heavy(work: int | None) -> bool:
    return work is None or work > _LIGHT


def _work(ctx, *blocks) -> int | None:
    """Elements one run of `blocks` writes (at least 1), inner for-loops as often as the IR
    bounds them; None when they run a loop whose trip count is not bounded."""
    total = 1
    for u in (u for blk in blocks for u in blk.units):
        if isinstance(u, ControlUnit):
            if u.op.prim is for_loop_p:
                trips, inner = ctx.ranges.most_trips(u.op), _work(ctx, *u.blocks)
                if trips is None or inner is None:
                    return None
                total += max(trips, 0) * inner
                continue
            if u.op.prim is not cond_p:
                return None
            branches = [_work(ctx, c) for c in u.blocks]
            if None in branches:
                return None
            total += max(branches)
        elif u.op is not None and u.op.prim is accumulate_p \
                and u.op.params["inplace"] is not None:
            total += sum(_elements(ctx, v) for v in u.op.inputs[u.op.params["nbases"]:])
        else:
            total += sum(_elements(ctx, v) for v in u.writes)
    return total


def _elements(ctx, v) -> int:
    shape = v.aval.shape[1:] if v in ctx.plan.tape_class else v.aval.shape  # a tape: one row
    return int(np.prod(shape, dtype=np.int64))


@contextmanager
def _counted(b, start, go, step, options=None):
    """`for (i = start; go(i); i += step)`: yields i; the builder ends in the exit block;
    `options()`: the loop's options, asked at its back edge (unroll.loop_options)."""
    fn = b.function
    header, loop, exit_ = (fn.append_basic_block(f"for.{s}") for s in ("header", "body", "exit"))
    pre = b.block
    b.branch(header)
    b.position_at_end(header)
    i = b.phi(I64, name="for.i")
    i.add_incoming(start, pre)
    b.cbranch(go(i), loop, exit_)
    b.position_at_end(loop)
    yield i
    i.add_incoming(b.add(i, step, name="for.next"), b.block)
    latch = b.branch(header)
    if options is not None and (names := options()):
        set_loop_options(b, latch, names)
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
    ctx.loop_depth += 1
    _emit_block(ctx, cblk)
    go = _truth(ctx, cblk.results[0])
    if not isinstance(go, ir.Value):
        go = ir.Constant(I1, int(bool(go)))
    b.cbranch(go, loop, exit_)
    b.position_at_end(loop)
    _emit_block(ctx, body)
    _assign(ctx, list(zip(body.results, body.params)), body.stage)
    ctx.loop_depth -= 1
    ctx.failures.poll(op.loc, every=1 if _heavy(_work(ctx, cblk, body)) else _CHUNK)
    b.branch(header)
    b.position_at_end(exit_)


# ---- tapes --------------------------------------------------------------------------------
def _libc(module, name, ret, args):
    fn = module.globals.get(name)
    if fn is None:
        fn = ir.Function(module, ir.FunctionType(ret, args), name)
    return fn


def _accumulate_reads_view(op, i, layout) -> bool:
    """The bases and the values scattered are read through their strides (not the indices)."""
    pos = op.params["nbases"]
    if i < pos:
        return True
    for key, n_idx, _ in op.params["scatters"]:
        if i == pos:
            return True
        pos += 1 + n_idx
    return False


@lowers(accumulate_p, accepts=_accumulate_reads_view,
        updates=lambda op: 0 if op.params["nbases"] else None)
def _lower_accumulate(ctx, op) -> None:
    b = ctx.b
    out = op.outputs[0]
    shape, dt = out.aval.shape, out.aval.dtype
    nb = op.params["nbases"]
    bases = op.inputs[:nb]
    dst = ctx.out(out)
    if nb == 1 and _same_storage(ctx, bases[0], out):
        pass  # in place: out's buffer is the base's (the sum below reads before it writes)
    elif nb == 0:
        ew.emit_loops(b, shape, [ew.Operand(value=0)], [(dst, dt)], lambda em, v: v)
    else:
        if nb == 1:
            ctx.copied()

        def total(em, vals):
            acc = vals[0]
            for v in vals[1:]:
                acc = em.add(acc, v)
            return [acc]
        ew.emit_loops(b, shape, [ctx.operand(v) for v in bases], [(dst, dt)], total)
    dense = Layout(out, tuple(shape), contiguous_strides(shape))
    pos = nb
    only = None if ctx.only is None else ctx.only.get(id(op))  # Note [Distributed element loops]
    for n, (key, n_idx, at_op) in enumerate(op.params["scatters"]):
        g, idx = op.inputs[pos], op.inputs[pos + 1:pos + 1 + n_idx]
        pos += 1 + n_idx
        if only is not None and n not in only:
            continue
        if not idx:  # basic key: distinct positions, an elementwise add into the view
            target = dense.index(key)
            base = b.gep(dst, [ir.Constant(I64, target.offset)], inbounds=True,
                         source_etype=ew.memtype(dt))
            view = ew.Operand(ptr=base, strides=target.strides, dtype=dt)
            ew.emit_loops(b, target.shape, [view, ctx.operand(g)],
                          [(base, dt, target.strides)], lambda em, v: [em.add(v[0], v[1])])
            continue
        oshape, offset, done = _index_map(ctx, at_op, dense, key, idx)
        em = ew.Emitter(b, 1)
        if g.aval.shape == ():
            at = offset(b, ())
            ew._store(b, em.add(ew._load(b, dst, at, dt, 1), ctx.load_scalar(g)), dst, at, dt)
            done()
            continue
        gl = ctx.layout(g)
        gp = ctx.offset_ptr(Layout(gl.root, gl.shape, gl.strides, 0))
        from ..loops import loop_nest
        with loop_nest(b, oshape, name="acc") as oi:
            at = offset(b, oi)
            from_g = ir.Constant(I64, gl.offset)
            for i, st in zip(oi, gl.strides):
                from_g = b.add(from_g, b.mul(i, ir.Constant(I64, st)))
            v = ew._load(b, gp, from_g, dt, 1)
            ew._store(b, em.add(ew._load(b, dst, at, dt, 1), v), dst, at, dt)
        done()


# ---- checks (Note [Checks]) ---------------------------------------------------------------
@lowers(check_p)
def _lower_check(ctx, op) -> None:
    """Leave the kernel with the user's exception when the check fails."""
    ctx.fail_if(_truth(ctx, control.check_fail(op)), "user", op,
                (op.params["exc"], op.params["args"]))
