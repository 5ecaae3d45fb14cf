"""Reverse mode through loops: the tapes a forward loop fills and the reverse sweep that reads
them (Note [Loop tapes], Note [Stacked inner tapes]).

`LoopAD` holds the loop rules of transform/ad.py's `_AD` (it is mixed into it): `forward_loop`
emits a loop with its counter and tapes, `backward_loop` its reverse sweep, `split_rule` and
`backward_resid` the split of an elementwise op's VJP around a tape. What they read off a
loop body (what to tape, counters, element reads) is in transform/loop_facts.py.
"""
from __future__ import annotations

import numpy as np

from llgrad.runtime import ops
from llgrad.runtime.aval import I64, Aval
from llgrad.runtime.ops.control import (constant_p, for_loop_p, tape_get_p, tape_new_p,
                                        tape_push_p, while_loop_p)
from llgrad.transform import control, ir
from llgrad.transform import loop_facts as facts
from llgrad.transform.control import CONTROL
from llgrad.transform.builder import Builder

# Note [Loop tapes]
# The reverse sweep of a loop needs, for each iteration, the values its body computed. The
# forward loop stores per iteration, each on its own tape (a `tape_new` buffer of trip-count rows,
# rows known statically when the bounds are constants, else the tape grows, filled by
# `tape_push`; the loop also counts its iterations, the trip count n, for- and while-loops alike):
#   (a) the loop-carried values at the entry of the iteration that the body reads (but not
#       integer counters it advances by a fixed step, `pos += 1`: the reverse sweep computes
#       them as init + j * step, `induction`; nor those it recovers backwards, Note [Counters
#       recovered backwards]);
#   (b) the outputs of the body's expensive top-level ops (`expensive`: transcendental
#       elementwise ops, matmul, reductions) that depend on the carried values or the index;
#   (c) the residuals of the expensive elementwise ops: `split_rule` runs the op's own VJP rules
#       in the forward body with a placeholder cotangent g; the ops that do not depend on g stay
#       in the forward and their values the g-dependent ops read are taped (sin's rule
#       g * cos(x): cos(x) is computed in the forward, next to sin); the g-dependent ops are
#       replayed in the reverse sweep (`backward_resid`). Derivatives still live only in the
#       rules; the split is a partial evaluation of them.
# The reverse sweep is a for_loop over k = 0..n-1 that, for iteration j = n-1-k, reads the entry
# state back (`tape_get`), recomputes the body's forward from it *except* the values it can read
# (`forward(pre=...)`): the taped (b) values (row j), and the body's results that are the next
# iteration's carried values, read from row j+1 of the carried tape (`next_carried`; such a
# tape gets one more row, the loop's exit state, pushed after the loop; only for results whose
# op's rule reads its output or which the body reads itself, so that e.g. tanh's output in an
# RNN is never recomputed). Then it runs the body's adjoint. Cheap arithmetic is recomputed.
# Inner loops get their own tapes inside that recomputation, inner conds re-evaluate their
# predicate from the stored state, which records the branch taken per iteration.
# Memory is O(n x stored values): carried values read, expensive values, residuals, none of them
# larger than a carried value or an op output of the body. Reading a stored value gives the
# very value the recomputation would give, so results do not change. Taping is decided before the
# reverse sweep is built, so some tapes (and get rows) may go unread: dce drops tapes nothing
# reads (and recomputation nothing reads), so what is left after optimisation, and what
# `inspect().stats` "tape bytes (static)" counts (tape_stats: rows x row bytes of every
# remaining static tape_new: carried values, expensive outputs and residuals alike, the
# exit-state row included), is what the reverse sweep reads. Values the body reads from
# enclosing regions are loop-invariant and are not stored; their cotangents are accumulated in
# extra carried values of the reverse loop. A cond's adjoint is a cond on the same (recorded)
# predicate whose branches recompute their forward and run its adjoint.

# Note [Running cotangents]
# The reverse sweep of a loop carries the cotangents of the values its body reads from
# enclosing regions (a weight matrix read at every step). They start from the cotangent
# accumulated so far, not from zeros, and the loop's result replaces it: an inner loop's
# sweep adds into its enclosing sweep's running cotangent instead of building a zero array
# of its own, to be added after it ends. With zeros, each run of an inner sweep cost
# O(size of every captured array) (a fill and an add) however little it touched: a GMM
# written as loops over points, components and the entries of a 10x10 matrix added a
# 25x55 cotangent 250,000 times. Now codegen accumulates in place (Note [In-place
# accumulation]) and gives the inner loop the buffer of its init (Note [Updates in place]).

# Note [Trip counts]
# A reverse sweep runs as many iterations as its forward loop. For a for_loop with a constant
# step that count follows from the bounds (`trip_count`), which the sweep has anyway (the
# forward values of the enclosing region, recomputed or read), so it is not taped: constant
# bounds give a reverse loop with a constant trip count (which LLVM sees: `range(d)` in a
# GMM body is 10 iterations backwards too), and an inner loop's `range(c + 1, d)` is
# recomputed from c. Only while loops and loops with a traced step use the counted n. A
# stacked inner loop then needs its counter only for the rows of its tapes: one whose tapes
# the reverse sweep does not read (dce drops them) loses its counter too, and its enclosing
# loops no longer tape the counter before and after it (Note [Stacked inner tapes]). In the
# GMM written as loops, that was 3 of 4 integers taped per iteration of the triangle's
# middle loop, and 5.1 -> 3.3 ms for its value and gradient.

# Note [Counters recovered backwards]
# An integer counter a loop carries and advances by steps that vary per iteration but
# depend only on the index (`pos += c`), or that an inner loop advances by a fixed step per
# trip (the GMM triangle: `for c in range(d): for r in range(c + 1, d): ...; pos += 1`), or
# both in sequence, has no closed form at iteration j (`induction` covers fixed steps), but
# is reversible: its entry value is its exit value minus the steps, which can be recomputed
# from the index (an inner loop's trip count from its bounds; `facts.index_slice`: integer
# arithmetic that cannot fail, so it may run for an index the loop does not reach). So the
# forward loop does not tape it; the reverse sweep carries the entry value backwards: it
# starts from the loop's result minus the last iteration's steps, and each iteration passes
# on its entry value minus the previous iteration's steps (`recover`). Carrying entry values
# (rather than exit values, from which each iteration would subtract its own steps) lets
# the range analysis bound them as it bounds any carried counter (Note [Integer ranges] in
# codegen/ranges.py), so the indices they make need no wrap. Exact: integer arithmetic. The
# GMM written as loops taped 250,000 int64 a call for `pos` (2 MB written and read back);
# now only the middle loop's result per (i, j), which the enclosing sweep reads: value and
# gradient 1.22 -> 0.87 ms.

# Note [Stacked inner tapes]
# A loop nested in a loop body (Newton iterations per element, an inner time loop) would
# otherwise run twice: untaped in the outer forward, then taped again in the outer reverse
# sweep's recomputation of the body. Instead the outer forward runs it taped (`forward_loop`
# with the body's `_Stack`) and keeps its tapes: its counter and tapes become carried values
# of the outer body (and of every enclosing body, up to the first loop not itself stacked,
# which creates them), so one growing tape holds the inner rows of all outer iterations in
# order. The outer body tapes, per iteration, the inner loop's outputs and its counter before
# and after (`base`, end); the outer reverse sweep reads them for iteration j, does not rerun
# the inner loop (`forward(given=...)`), and runs its reverse sweep over rows base..end-1.
# An inner loop with constant bounds runs the same T iterations in every outer iteration, so
# its first row for outer row q is q * T: its counter before it is not taped either (with
# Note [Trip counts], a loop nest of constant bounds tapes no counter at all).
# When every loop from the outermost one stacking it has constant bounds, its tapes have
# static rows (the product of the trip counts) like a flat loop's, and never grow.
# Memory is then O(total inner iterations x stored values), as for a single flat loop, where
# rerunning needed only one outer iteration's worth at a time; time drops by one run of every
# inner loop. Stacked loops use no exit-state row (`next_carried`); their tapes grow unless
# every loop from the outermost one stacking them has constant bounds.


class _Slot:
    """A counter or tape of a stacked inner loop (Note [Stacked inner tapes]). `value` is the
    whole tape (or the final count), set when the outermost loop carrying it is emitted; the
    reverse sweeps read it from there."""

    __slots__ = ("aval", "value")

    def __init__(self, aval):
        self.aval, self.value = aval, None


class _Stack:
    """The slots a loop body carries for the inner loops it stacks: per slot, the body's param
    (its value at the iteration's entry) and result (at its exit)."""

    def __init__(self, b: Builder, runs: int | None):
        self.b, self.region = b, None
        self.runs = runs  # how many times the body runs in all, when the IR says
        self.slots, self.params, self.finals = [], [], []

    def carry(self, aval, slot: _Slot | None = None) -> ir.Value:
        """A new carried value of the body for `slot` (a new one by default): its param."""
        p = self.b.new_value(aval)
        self.b.home[p.id] = self.region
        self.slots.append(slot or _Slot(aval))
        self.params.append(p)
        self.finals.append(None)
        return p

    def finish(self, params, finals) -> None:
        """Record the body values (an inner loop's outputs) the params flow to at exit."""
        index = {p.id: i for i, p in enumerate(self.params)}
        for p, f in zip(params, finals):
            self.finals[index[p.id]] = f

    def slot_of(self, param) -> _Slot:
        return self.slots[next(i for i, p in enumerate(self.params) if p is param)]


def _tape(t) -> ir.Value:
    """A tape reference of a loop record: a value, or a stacked slot's whole tape."""
    return t.value if isinstance(t, _Slot) else t


class LoopAD:
    """The loop rules of reverse mode (mixed into transform/ad.py's `_AD`, whose emission
    helpers, `forward`, `clone`, `accum` and `adjoint_region` they use)."""

    def forward_loop(self, op, env, stack: "_Stack | None" = None) -> dict:
        """The forward loop plus an iteration counter and tapes: one per stored carried value,
        one per taped expensive value, one per residual (Note [Loop tapes]). With `stack` (the
        enclosing loop's body), the counter and tapes are carried values of that body instead
        of new ones, so they keep growing across its iterations (Note [Stacked inner tapes])."""
        cf = CONTROL[op.prim]
        body = cf.body(op)
        carried = cf.carried(body)
        head = 1 if cf.counter else 0
        used = facts.reads(body)
        counted = facts.induction(body, carried)
        rev = {k: s for k, s in facts.reversible(body, carried, counted).items()
               if carried[k].id in used} if cf.counter else {}
        stored = [k for k, p in enumerate(carried)
                  if p.id in used and k not in counted and k not in rev]
        nxt = facts.next_carried(body, carried, stored) if stack is None else {}
        ext = set(nxt.values())
        var = facts.variant(body)
        ins = [env[v.id] for v in op.inputs]
        trips = None  # the trip count, when the bounds are constants
        if cf.counter:
            consts = [facts.const_int(env[v.id]) for v in control.bounds(op)]
            if None not in consts and consts[2] != 0:
                trips = len(range(*consts))
        # rows: this loop's iterations in all (per run of the outermost loop not stacked)
        rows = trips if stack is None or stack.runs is None or trips is None \
            else stack.runs * trips
        b = self.b
        self.loc = op.loc

        def tape_aval(aval, extra_row=False):
            r = None if rows is None else rows + extra_row
            return Aval((r,) + tuple(aval.shape), aval.dtype)

        def new_tape(aval, extra_row=False):
            tav = tape_aval(aval, extra_row)
            return self.new_tape(tav) if stack is None else stack.carry(tav)

        ctapes = [new_tape(carried[k].aval, k in ext) for k in stored]
        counter = self.const(0, I64) if stack is None else stack.carry(Aval((), I64))
        params = [b.new_value(p.aval, p.name) for p in body.params]
        xs = [b.new_value(v.aval) for v in [counter] + ctapes]
        env2 = self.bind_params(env, body.params, params)
        extra_vals, saved, resid, inner = [], {}, {}, {}
        updated = {p.id for p in carried if p.aval.shape}  # arrays of the entry state
        mine = _Stack(b, rows)
        with b.open_region(params + xs) as rb:
            mine.region = rb
            # the entry state first, before the body updates its arrays in place
            pushed = [self.emit(tape_push_p, [t, params[head + k]], [t.aval])[0]
                      for t, k in zip(xs[1:], stored)]
            for iop in body.ops:
                if iop.prim in (for_loop_p, while_loop_p) and id(iop) not in self.unstacked \
                        and any(o.id in self.act for o in iop.outputs):
                    irec = self.forward_loop(iop, env2, mine)
                    for o in iop.outputs:
                        saved[o.id] = len(extra_vals)
                        extra_vals.append(env2[o.id])
                    inner[id(iop)] = (irec, len(extra_vals), len(extra_vals) + 1)
                    extra_vals += [irec["base"], irec["n"]]
                    continue
                self.clone(iop, env2)
                if facts.updates(iop, updated):
                    updated.add(iop.outputs[0].id)
                elif facts.reads_part(iop, updated):  # Note [Element reads of work arrays]
                    saved[iop.outputs[0].id] = len(extra_vals)
                    extra_vals.append(env2[iop.outputs[0].id])
                if not facts.expensive(iop) or iop.outputs[0].id not in var:
                    continue
                if iop.outputs[0].id not in nxt:
                    saved[iop.outputs[0].id] = len(extra_vals)
                    extra_vals.append(env2[iop.outputs[0].id])
                self.loc = iop.loc
                info = self.split_rule(iop, env2)
                if info is not None:
                    resid[id(iop)] = (info, list(range(len(extra_vals),
                                                       len(extra_vals) + len(info["resid"]))))
                    extra_vals.extend(info["resid"])
            rb.results = [env2[v.id] for v in body.results]
            self.loc = op.loc
            cnt = ops.add(xs[0], np.asarray(1, np.int64))
            ys = [b.new_value(tape_aval(v.aval)) for v in extra_vals]
            for y in ys:
                b.home[y.id] = rb
            rb.params += ys
            pushed += [self.emit(tape_push_p, [y, v], [y.aval])[0] for y, v in zip(ys, extra_vals)]
            rb.results += [cnt] + pushed
            rb.params += mine.params
            rb.results += mine.finals
        own = [counter] + ctapes + [new_tape(v.aval) for v in extra_vals]
        inits = [self.start(s.aval) if stack is None else stack.carry(s.aval, s)
                 for s in mine.slots]
        extra = own + inits
        extra_avals = [v.aval for v in extra]
        regions = []
        if op.prim is while_loop_p:
            src = control.loop_test(op)
            cparams = [b.new_value(p.aval, p.name) for p in src.params]
            env3 = self.bind_params(env, src.params, cparams)
            with b.open_region(cparams + [b.new_value(a) for a in extra_avals]) as rc:
                for iop in src.ops:
                    self.clone(iop, env3)
                rc.results = [env3[v.id] for v in src.results]
            regions.append(rc)
        regions.append(rb)
        outs = self.emit(op.prim, ins + extra, [v.aval for v in op.outputs] + extra_avals,
                         regions, op.params, loc=op.loc)
        m = len(op.outputs)
        for o, n in zip(op.outputs, outs[:m]):
            n.name = o.name
            env[o.id] = n
        added = outs[m:]
        if stack is None:
            refs = added[:len(own)]
            for s, v in zip(mine.slots, added[len(own):]):
                s.value = v
        else:
            stack.finish(extra, added)
            refs = [stack.slot_of(v) for v in own]
        tapes = dict(zip(stored, refs[1:1 + len(stored)]))
        for k in ext:  # the exit state is the row after the last iteration's entry state
            tapes[k] = self.emit(tape_push_p, [tapes[k], env[op.outputs[k].id]],
                                 [tapes[k].aval])[0]
        etapes = refs[1 + len(stored):]
        return {"n": added[0], "base": counter if stack is not None else None,
                "trips": trips, "tapes": tapes, "next": nxt, "counted": counted, "reversed": rev,
                "saved": {vid: etapes[i] for vid, i in saved.items()},
                "resid": {key: (info, [etapes[i] for i in idx])
                          for key, (info, idx) in resid.items()},
                "inner": {key: (irec, etapes[i], etapes[e])
                          for key, (irec, i, e) in inner.items()}}

    def start(self, aval) -> ir.Value:
        """The initial value of a stacked slot: 0 for a counter, else an empty growing tape."""
        return self.const(0, I64) if aval.shape == () else self.new_tape(aval)

    def new_tape(self, aval) -> ir.Value:
        """A new empty tape of `aval` (rows, *row shape); rows None: it grows."""
        return self.emit(tape_new_p, [], [aval], params={
            "shape": tuple(aval.shape[1:]), "dtype": aval.dtype, "rows": aval.shape[0]})[0]

    def split_rule(self, op, env) -> dict | None:
        """Run the VJP rules of an elementwise op of a loop body in the forward loop with a
        placeholder cotangent g and split what they emitted: the ops that do not depend on g
        stay in the forward (their values read by the g-dependent ops are the residuals, to be
        taped), the g-dependent ops are removed here and replayed in the reverse sweep (e.g.
        sin's rule g * cos(x): cos(x) is computed in the forward). The derivative formulas
        stay in the rules. None when the op has no active input with a rule, or the rules'
        ops read something other than g, the op's operands, its output and constants."""
        if op.prim.family != "elementwise" or op.outputs[0].id not in self.act:
            return None
        act = [i for i, v in enumerate(op.inputs)
               if v.id in self.act and op.prim.vjp_rule(i) is not None]
        if not act:
            return None
        region = self.b.region
        start = len(region.ops)
        out, ins = env[op.outputs[0].id], [env[v.id] for v in op.inputs]
        g = self.b.new_value(out.aval, "g")

        def fail():
            del region.ops[start:]

        results = []
        for i in act:
            r = op.prim.vjp_rule(i)(g, out, *ins, **op.params)
            if r is None:
                continue
            if not isinstance(r, ir.Value):
                return fail()
            results.append((i, r))
        new = region.ops[start:]
        dep, dep_ops = {g.id}, []
        for o in new:
            if o.regions:
                return fail()
            if any(v.id in dep for v in o.inputs):
                dep.update(v.id for v in o.outputs)
                dep_ops.append(o)
        known = {out.id: op.outputs[0].id}
        known.update({v.id: w.id for v, w in zip(ins, op.inputs)})
        made = {v.id: o for o in new for v in o.outputs}
        res, consts, seen = [], [], set()

        def boundary(v):
            if v.id in dep or v.id in known or v.id in seen:
                return True
            seen.add(v.id)
            o = made.get(v.id)
            if o is None:
                return False
            if o.prim is constant_p:
                consts.append(o)
            else:
                res.append(v)
            return True

        for o in dep_ops:
            if not all(boundary(v) for v in o.inputs):
                return fail()
        if not all(boundary(r) for _, r in results):
            return fail()
        dep_set = {id(o) for o in dep_ops}
        region.ops[start:] = [o for o in new if id(o) not in dep_set]
        return {"g": g, "ops": consts + dep_ops, "resid": res, "known": known,
                "results": results}

    # ---- backward -----------------------------------------------------------------------------

    def backward_resid(self, op, env, ct, info, values) -> None:
        """backward_plain for an op whose rules were split by split_rule: replay their
        g-dependent ops on the taped residuals (`values`)."""
        env3 = {info["g"].id: ct[op.outputs[0].id]}
        for new, orig in info["known"].items():
            if orig in env:
                env3[new] = env[orig]
        for v, t in zip(info["resid"], values):
            env3[v.id] = t
        for o in info["ops"]:
            self.clone(o, env3)
        for i, r in info["results"]:
            self.accum(ct, op.inputs[i], env3[r.id])

    def trip_count(self, op, env) -> ir.Value | None:
        """A for_loop's trip count from its bounds (Python `range`), for its reverse sweep:
        a constant when they are, so the sweep's bounds are static; else computed from the
        bounds the sweep recomputed or read, so no tape holds it (Note [Trip counts]). None
        when the step is not a constant."""
        start, stop, step = (env[v.id] for v in control.bounds(op))
        s = facts.const_int(step)
        return self.trips(start, stop, s) if s else None

    def trips(self, start, stop, s: int) -> ir.Value:
        """The trip count of `range(start, stop, s)`, a constant when the bounds are."""
        a, z = facts.const_int(start), facts.const_int(stop)
        if a is not None and z is not None:
            return self.const(len(range(a, z, s)), I64)
        span = ops.sub(stop, start) if s > 0 else ops.sub(start, stop)
        if abs(s) != 1:
            span = ops.floor_divide(ops.add(span, np.asarray(abs(s) - 1, np.int64)),
                                    np.asarray(abs(s), np.int64))
        return ops.maximum(span, np.asarray(0, np.int64))

    def recover(self, body, env, index, exit_, steps) -> ir.Value:
        """A counter's value at the entry of the iteration at `index` from its value at its
        exit (`facts.reversible`; Note [Counters recovered backwards])."""
        env2 = self.bind_params(env, body.params[:1], [index])
        for o in facts.index_slice(body, facts.step_values(steps)):
            self.clone(o, env2)

        def value(v):
            c = facts.const_int(v)
            return self.const(c, I64) if c is not None else env2[v.id]

        for sign, step, inner in steps:
            by = value(step)
            if inner is not None:
                start, stop, s = control.bounds(inner)
                by = ops.mul(self.trips(value(start), value(stop), facts.const_int(s)), by)
            exit_ = (ops.sub if sign > 0 else ops.add)(exit_, by)
        return exit_

    def backward_loop(self, op, env, rec, ct) -> None:
        """The reverse sweep: a for_loop of n iterations (the forward's trip count: from the
        bounds, Note [Trip counts], or as counted) carrying the outputs' cotangents back to
        the iteration's entry, plus those of captured values (of elements read at indices the
        body does not change: scalars, Note [Element cotangents]). When
        n == 0 the outputs' cotangents reach the init unchanged (the loop yields its init; see
        the init -> output edge in _activity); otherwise the init gets the cotangent of the
        first iteration's carried values (zero for those the body does not read)."""
        cf = CONTROL[op.prim]
        body = cf.body(op)
        carried = cf.carried(body)
        init = cf.state(op)
        pos = [k for k in range(len(op.outputs))
               if {op.outputs[k].id, carried[k].id, body.results[k].id} & self.act]
        captured = [v for v in body.free_values() if v.id in self.act]
        elems, index_ops = facts.element_reads(body, captured)  # Note [Element cotangents]
        read = {o.inputs[0].id for o in elems}
        captured = [v for v in captured if v.id not in read]
        b = self.b
        base = rec["base"]
        n = self.trip_count(op, env) if cf.counter else None
        if n is None:
            n = rec["n"]
        seeds0 = [self.ct_or_zeros(ct, op.outputs[k]) for k in pos]
        caps0 = [self.ct_or_zeros(ct, v) for v in captured]  # Note [Running cotangents]
        caps0 += [self.const(0, o.outputs[0].aval.dtype) for o in elems]
        captured += [o.outputs[0] for o in elems]
        k_param = b.new_value(((), I64), "k")
        cts = [b.new_value(op.outputs[k].aval, "ct") for k in pos]
        caps = [b.new_value(v.aval, "ct") for v in captured]
        rev = list(rec["reversed"].items())  # Note [Counters recovered backwards]
        if cf.counter:
            start, _, step = (env[v.id] for v in control.bounds(op))
            index = lambda j: ops.add(start, ops.mul(j, step))  # noqa: E731
        firsts = [self.recover(body, env, index(ops.sub(n, np.asarray(1, np.int64))),
                               env[op.outputs[k].id], fact) for k, fact in rev]
        entries = [b.new_value(carried[k].aval, carried[k].name) for k, _ in rev]
        with b.open_region([k_param] + cts + caps + entries) as r:
            j = ops.sub(ops.sub(n, np.asarray(1, np.int64)), k_param)  # iteration n-1-k
            row = j if base is None else ops.add(base, j)  # its tape row

            def get(t, at=row):
                t = _tape(t)
                return self.emit(tape_get_p, [t, at], [Aval(t.aval.shape[1:], t.aval.dtype)])[0]

            head = [get(rec["tapes"][k]) if k in rec["tapes"] else None
                    for k in range(len(carried))]
            for k, (c, sign) in rec["counted"].items():  # See induction
                by = ops.mul(j, self.const(c.op.params["value"], c.aval.dtype)
                             if c.op is not None and c.op.prim is constant_p else env[c.id])
                head[k] = (ops.add if sign > 0 else ops.sub)(env[init[k].id], by)
            for (k, _), entry in zip(rev, entries):
                head[k] = entry
            if rev:  # the entry values of iteration j - 1, for the next reverse iteration
                before = index(ops.sub(j, np.asarray(1, np.int64)))
            nexts = [self.recover(body, env, before, e, f) for (_, f), e in zip(rev, entries)]
            if cf.counter:
                head = [index(j)] + head
            pre = {}
            if rec["next"]:
                j1 = ops.add(row, np.asarray(1, np.int64))
                for rid, k in rec["next"].items():
                    pre[rid] = get(rec["tapes"][k], j1)
            for vid, t in rec["saved"].items():
                pre[vid] = get(t)
            given = {key: (info, [get(t) for t in ts]) for key, (info, ts) in rec["resid"].items()}
            for key, (irec, tb, te) in rec["inner"].items():  # Note [Stacked inner tapes]
                ib = get(tb) if irec["trips"] is None else \
                    ops.mul(row, self.const(irec["trips"], I64))
                given[key] = dict(irec, n=ops.sub(get(te), ib), base=ib)
            seeds = [None] * len(body.results)
            for k, g in zip(pos, cts):
                seeds[k] = g
            got = self.adjoint_region(body, env, head, seeds,
                                      [carried[k] for k in pos] + captured, pre, given,
                                      {v.id: c for v, c in zip(captured, caps)},
                                      stop={id(o) for o in elems})
            self.loc = op.loc
            r.results = got + nexts
        outs = self.emit(for_loop_p, [self.const(0, I64), n, self.const(1, I64)] + seeds0 + caps0
                         + firsts, [v.aval for v in cts + caps + entries], [r], loc=op.loc)
        m = len(captured) - len(elems)
        for v, g in zip(captured[:m], outs[len(pos):]):
            ct[v.id] = g  # the running cotangent, this loop's share added
        ran, env3 = facts.const_int(n), dict(env)
        for iop in index_ops:
            self.clone(iop, env3)
        for o, g in zip(elems, outs[len(pos) + m:]):
            idx = [env3[x.id] for x in o.inputs[1:]]
            if not ran:  # n may be 0: then g is 0 and the index may be out of range
                idx = [ops.where(ops.gt(n, np.asarray(0, np.int64)), i,
                                 np.asarray(0, np.int64)) for i in idx]
            x, start = o.inputs[0], len(b.region.ops)
            self.accum(ct, x, o.prim.vjp_rule(0)(g, None, env[x.id], *idx, **o.params))
            if ran:  # the loop read x at idx (Note [Replayed indices] in ad.py)
                self.mark_replays(start, o.params["key"], idx, x.aval.shape)
        for k, g in zip(pos, outs):  # after: an init may be a captured value too
            self.accum(ct, init[k], g)
