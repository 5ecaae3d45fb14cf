"""Batching on the IR: `vmap_function(fn, batched, n)` maps fn over a new leading axis of size n.

Each value of the new function is either unbatched (as in fn) or batched: fn's value for each
of the n examples, stacked on a leading axis 0. There is one rule per primitive family and one
per control-flow op (Note [Batching rules]); ops that read no batched value are copied as they
are. Requires: a verified, unfused function. Produces: a verified function.
"""
from __future__ import annotations

import numpy as np

from llgrad.runtime import ops
from llgrad.runtime.aval import Aval
from llgrad.runtime.ops.control import check_p, constant_p, tape_get_p, tape_new_p, tape_push_p
from llgrad.runtime.ops.index import getitem_p, index_put_p, scatter_add_p
from llgrad.runtime.ops.linalg import matmul_p
from llgrad.runtime.ops.scan import iir_p
from llgrad.runtime.ops.shape import broadcast_to_p, concatenate_p, reshape_p, transpose_p
from llgrad.transform import control, ir
from llgrad.transform.builder import Builder
from llgrad.transform.vmap_control import (RULES, Ragged, batched_ids, batched_tape, check,
                                           tape_groups, tape_new)

# Note [Batching rules]
# A batched value holds the examples on axis 0. The rules, by primitive family:
#   - elementwise: a batched operand (n, *s) is reshaped to (n, 1, ..., 1, *s) so that numpy
#     broadcasting against the unbatched operands (which keep their shapes) lines up;
#   - reductions, scans and sorts: the operands made batched, their axis parameters shifted;
#     iir's coefficients stay unbatched when they are (a batch of filters: per example);
#   - reshape, transpose, broadcast_to, concatenate: the shape/perm/axis parameters extended;
#   - getitem, scatter_add, index_put: a full slice in front of the key, when the index arrays
#     are unbatched and adjacent (numpy then keeps their axes in place);
#   - matmul: a batched operand times an unbatched matrix is one product, (n*r, k) @ (k, m),
#     (n, k) @ (k, r) for matrix-vector products, or (r, k) @ (k, n*m); two batched
#     operands, numpy's batched matmul over axis 0;
#   - getitem with batched index arrays leading the key: one gather, with arange(n) as an
#     extra leading index array;
#   - linear algebra: the primitives take equal leading batch dimensions: operands batched;
#   - every other op (index_put/scatter_add with batched indices, getitem with batched
#     indices after a slice, argmax over the flattened array...): the rule of last resort,
#     one staged loop over the examples running the op on example i and writing its outputs
#     into row i. Always right, not vectorised.
# Control flow (transform/vmap_control.py): cond with an unbatched predicate keeps one cond
# (its outputs batched when a branch's are); with a batched one, both branches run and a
# `where` selects per example. for_loop carries batched state (the positions found by a fixed
# point, Note [Which values are batched]). A while_loop whose predicate is batched runs until
# no example's predicate holds: each iteration computes the predicate per example and keeps
# the state of the examples whose loop is over (as JAX does); a for_loop whose bounds are
# batched likewise runs to the largest trip count. Within a branch or a loop body that only
# some examples take, a mask (self.mask) says which: a `check` fails only for an example
# inside the mask, a masked while_loop stops for examples outside it, and the last-resort loop
# skips them, so an example never raises or hangs in code its own run would not reach.


def vmap_function(fn: ir.Function, batched: list[bool], n: int,
                  name: str | None = None) -> tuple[ir.Function, list[bool]]:
    """fn mapped over a leading axis of size `n` of the params flagged in `batched`.

    Returns:
        (the batched function, whose params take (n, *aval.shape) where flagged; which of its
        outputs are batched).
    """
    tapes = _Tapes(fn, batched)
    while True:  # Note [Ragged tapes]: each walk that finds a tape to batch does so
        try:
            return _Vmap(name or f"{fn.name}_vmap", n, tapes).run(fn, batched)
        except Ragged as r:
            tapes.add(r)


class _Tapes:
    """The tape groups made batched, and ragged, in a walk (Note [Ragged tapes]); at first
    those whose pushes the batched-value analysis finds batched, to a fixed point."""

    def __init__(self, fn, batched):
        self.batched, self.ragged = set(), set()
        self.groups: dict = {}  # tape value id -> its group (the id of its tape_new's output)
        tape_groups(fn.body, self.groups)
        # each tape's column dims in fn (a tape ragged in fn: vmap of vmap)
        self.inner = {op.outputs[0].id: op.params.get("ragged", 0) for op in fn.walk()
                      if op.prim is tape_new_p}
        pushes = [op for op in fn.walk() if op.prim is tape_push_p]
        live = {p.id for p, b in zip(fn.params, batched) if b}
        while True:
            probe = _Vmap("probe", 1, self)
            ids = batched_ids(probe, fn.body, live, False)
            new = {self.groups[op.inputs[0].id] for op in pushes
                   if any(v.id in ids for v in op.inputs[1:])}
            if new <= self.batched:
                return
            self.batched |= new

    def add(self, r: Ragged) -> None:
        assert r.group not in (self.ragged if r.ragged else self.batched), \
            "vmap: a tape asked twice to be made batched"
        self.batched.add(r.group)
        if r.ragged:
            self.ragged.add(r.group)


class _Vmap:
    def __init__(self, name: str, n: int, tapes: _Tapes):
        self.n, self.loc, self.mask = n, None, None
        self.batched_tapes, self.ragged = tapes.batched, tapes.ragged  # groups
        self.groups, self.inner_ragged = tapes.groups, tapes.inner
        # ids of the values of unbatched tapes (Note [Batched tapes])
        self.plain_tapes = {v for v, g in self.groups.items() if g not in tapes.batched}
        self.b = Builder(name, loc=lambda: self.loc)

    def run(self, fn, batched):
        b = self.b
        with b:
            env = {}
            for p, bt in zip(fn.params, batched):
                env[p.id] = (b.param(self.aval(p.aval) if bt else p.aval, p.name), bt)
            self.ops(fn.body.ops, env)
            self.loc = None
            outs = [env[v.id] for v in fn.outputs]
            b.fn.body.results = [v for v, _ in outs]
        b.fn.meta.update(fn.meta)
        return b.fn, [bt for _, bt in outs]

    # ---- helpers ----------------------------------------------------------------------------
    def aval(self, aval) -> Aval:
        return Aval((self.n,) + tuple(aval.shape), aval.dtype)

    def force(self, x, bt, old):
        """x, the value of `old`, batched (broadcast along a new axis 0 when it is not)."""
        if bt:
            return x
        if old.id in self.plain_tapes:
            raise Ragged(self.groups[old.id], ragged=False)
        return ops.broadcast_to(x, (self.n,) + tuple(old.aval.shape))

    def expand(self, x, rank: int):
        """A batched x (n, *s) as (n, 1, ..., 1, *s) with len(s) raised to `rank`."""
        s = tuple(x.aval.shape[1:])
        if len(s) >= rank:
            return x
        return ops.reshape(x, (self.n,) + (1,) * (rank - len(s)) + s)

    def bind(self, env, olds, news, batched=True) -> None:
        for o, v in zip(olds, news):
            if getattr(o, "name", None) and isinstance(v, ir.Value) and v.name is None:
                v.name = o.name
            env[o.id] = (v, batched)

    def emit(self, op, ins, params=None) -> list:
        """op's primitive on `ins` (avals by its shape rule; `params`, or op's)."""
        out = op.prim.bind(*ins, **(op.params if params is None else params))
        return list(out) if isinstance(out, tuple) else [out]

    def free_batched(self, op, env) -> bool:
        """Whether op reads a batched value (or its regions make a batched tape)."""
        return any(env[v.id][1] for v in op.inputs) or any(
            env[v.id][1] for r in op.regions for v in r.free_values() if v.id in env) or any(
            o.prim is tape_new_p and batched_tape(self, o) for r in op.regions for o in r.walk())

    # ---- the walk ---------------------------------------------------------------------------
    def ops(self, op_list, env) -> None:
        for op in op_list:
            self.loc = op.loc
            if op.prim is check_p and self.mask is not None:
                check(self, op, env)
            elif op.prim is tape_new_p:
                tape_new(self, op, env)
            elif op.prim in (tape_push_p, tape_get_p):  # Note [Ragged tapes]
                RULES[op.prim](self, op, env)
            elif not self.free_batched(op, env):
                self.clone(op, env)
            else:
                rule = _RULES.get(op.prim) or _FAMILY.get(op.prim.family, _per_example)
                rule(self, op, env)

    def clone_region(self, r, env) -> ir.Region:
        params = [self.b.new_value(p.aval, p.name) for p in r.params]
        env2 = dict(env)
        self.bind(env2, r.params, params, False)
        with self.b.open_region(params) as new:
            self.ops(r.ops, env2)
            new.results = [self.unbatched(env2, v) for v in r.results]
        return new

    def unbatched(self, env, v):
        x, bt = env[v.id]
        if bt:  # a copied region reads no batched value and makes no batched tape
            raise AssertionError(f"vmap: unbatched region yields batched {v!r}")
        return x

    def clone(self, op, env) -> None:
        regions = [self.clone_region(r, env) for r in op.regions]
        outs = self.b.emit(op.prim, [env[v.id][0] for v in op.inputs], op.params,
                           [v.aval for v in op.outputs], regions, loc=op.loc)
        self.bind(env, op.outputs, outs, False)

    def region(self, r, env, avals, params_batched: list[bool], yields: list[bool]):
        """A batched copy of region `r` (its params of `avals`, batched where flagged)
        yielding its results batched at the positions flagged in `yields`. The avals come
        from the operands (a batched tape has its batch on axis 1)."""
        params = [self.b.new_value(a, p.name) for p, a in zip(r.params, avals)]
        env2 = dict(env)
        for p, q, bt in zip(r.params, params, params_batched):
            self.bind(env2, [p], [q], bt)
        with self.b.open_region(params) as new:
            self.ops(r.ops, env2)
            new.results = self.results(env2, r.results, yields)
        return new

    def results(self, env, vs, yields: list[bool]) -> list:
        """The new values of `vs`, batched where `yields` says (Note [Which values are
        batched] in transform/vmap_control.py: never batched where it does not)."""
        out = []
        for v, want in zip(vs, yields):
            x, bt = env[v.id]
            if want:
                x = self.force(x, bt, v)
            elif bt:
                raise AssertionError(f"vmap: value {v!r} batched at an unbatched position")
            out.append(x)
        return out


# ---- primitive families ------------------------------------------------------------------------
def _elementwise(self, op, env):
    rank = len(op.outputs[0].aval.shape)
    ins = [self.expand(x, rank) if bt else x for x, bt in (env[v.id] for v in op.inputs)]
    self.bind(env, op.outputs, self.emit(op, ins))


def _axis(a, rank):
    return None if a is None else (a % rank if rank else a) + 1


def _axes(self, op, env):
    """Reductions, scans, sorts: operands batched, axis parameters shifted by one."""
    rank = len(op.inputs[0].aval.shape)
    params = dict(op.params)
    if "axes" in params:
        params["axes"] = tuple(_axis(a, rank) for a in params["axes"])
    if "axis" in params:
        if params["axis"] is None:  # over the flattened array: per example
            return _per_example(self, op, env)
        params["axis"] = _axis(params["axis"], rank)
    ins = [self.force(*env[v.id], v) for v in op.inputs]
    self.bind(env, op.outputs, self.emit(op, ins, params))


def _iir(self, op, env):
    """iir: the signal batched and its axis shifted; the coefficients, one filter for all,
    left as they are (batched coefficients: a filter per example)."""
    v, a = op.inputs
    if env[a.id][1]:
        return _per_example(self, op, env)
    params = dict(op.params, axis=_axis(op.params["axis"], len(v.aval.shape)))
    self.bind(env, op.outputs, self.emit(op, [self.force(*env[v.id], v), env[a.id][0]], params))


def _reshape(self, op, env):
    x, _ = env[op.inputs[0].id]
    self.bind(env, op.outputs, self.emit(op, [x], {"shape": (self.n,) + tuple(op.params["shape"])}))


def _transpose(self, op, env):
    x, _ = env[op.inputs[0].id]
    perm = (0,) + tuple(p + 1 for p in op.params["perm"])
    self.bind(env, op.outputs, self.emit(op, [x], {"perm": perm}))


def _broadcast_to(self, op, env):
    shape = tuple(op.params["shape"])
    x = self.expand(env[op.inputs[0].id][0], len(shape))
    self.bind(env, op.outputs, self.emit(op, [x], {"shape": (self.n,) + shape}))


def _concatenate(self, op, env):
    rank = len(op.outputs[0].aval.shape)
    ins = [self.force(*env[v.id], v) for v in op.inputs]
    self.bind(env, op.outputs, self.emit(op, ins, {"axis": _axis(op.params["axis"], rank)}))


def _indexing(self, op, env, data: int):
    """getitem (data operands: x), index_put (x, v), scatter_add (g): the key gets a full
    slice in front when its index arrays are unbatched and adjacent."""
    key = op.params["key"]
    arrays = any(e[0] == "a" for e in key)  # then integers index as arrays do (numpy)
    pos = [k for k, e in enumerate(key) if e[0] == "a" or (arrays and e[0] == "i")]
    adjacent = not pos or pos[-1] - pos[0] == len(pos) - 1
    if any(env[v.id][1] for v in op.inputs[data:]):
        if op.prim is getitem_p and adjacent and pos[0] == 0:
            return _gather(self, op, env)
        return _per_example(self, op, env)
    if not adjacent:
        return _per_example(self, op, env)
    params = dict(op.params, key=(("s", None, None, None),) + tuple(key))
    if "shape" in params:
        params["shape"] = (self.n,) + tuple(params["shape"])
    ins = [self.force(*env[v.id], v) for v in op.inputs[:data]] + \
        [env[v.id][0] for v in op.inputs[data:]]
    self.bind(env, op.outputs, self.emit(op, ins, params))


def _gather(self, op, env):
    """getitem with batched index arrays, leading the key: example e's row of the data is
    picked by one more index array, arange(n), in front (broadcast against the others)."""
    rank = max(len(v.aval.shape) for v in op.inputs[1:])
    idx = [self.expand(x, rank) if bt else x for x, bt in (env[v.id] for v in op.inputs[1:])]
    rows = self.b.const(np.arange(self.n, dtype=np.int64).reshape((self.n,) + (1,) * rank))
    key = (("a", len(idx)),) + tuple(op.params["key"])
    x = self.force(*env[op.inputs[0].id], op.inputs[0])
    self.bind(env, op.outputs, self.emit(op, [x] + idx + [rows], {"key": key}))


def _matmul(self, op, env):
    (a, ba), (b, bb) = (env[v.id] for v in op.inputs)
    sa = op.inputs[0].aval.shape
    if ba and not bb and len(sa) == 2:  # (n, r, k) @ (k, m) as one (n*r, k) @ (k, m)
        out = ops.matmul(ops.reshape(a, (self.n * sa[0], sa[1])), b)
        self.bind(env, op.outputs, [ops.reshape(out, (self.n,) + tuple(op.outputs[0].aval.shape))])
        return
    sb = op.inputs[1].aval.shape
    if bb and not ba and len(sb) == 2 and sb[1] == 1:  # (n, k) @ (k, r): no copy of b
        out = ops.matmul(ops.reshape(b, (self.n, sb[0])), ops.transpose(a, (1, 0)))
        self.bind(env, op.outputs, [ops.reshape(out, (self.n, sa[0], 1))])
        return
    if bb and not ba and len(sb) == 2:  # (r, k) @ (n, k, m) as one (r, k) @ (k, n*m)
        rows = ops.reshape(ops.transpose(b, (1, 0, 2)), (sb[0], self.n * sb[1]))
        out = ops.reshape(ops.matmul(a, rows), (sa[0], self.n, sb[1]))
        self.bind(env, op.outputs, [ops.transpose(out, (1, 0, 2))])
        return
    ins = [self.force(x, bt, v) for (x, bt), v in zip(((a, ba), (b, bb)), op.inputs)]
    self.bind(env, op.outputs, self.emit(op, ins))


def _linalg(self, op, env):
    """Linear algebra (but matmul): the primitives take leading batch dimensions, equal
    across their operands: the operands batched."""
    self.bind(env, op.outputs, self.emit(op, [self.force(*env[v.id], v) for v in op.inputs]))


def _per_example(self, op, env):
    """The rule of last resort: a staged loop over the examples, each running op on its own
    inputs (masked ones skipped) and writing its outputs into row i."""
    n, mask = self.n, self.mask
    reads = {v.id: v for v in op.inputs}
    reads.update((v.id, v) for r in op.regions for v in r.free_values() if v.id in env)

    def body(i, *accs):
        env2 = dict(env)
        for vid in reads:
            x, bt = env[vid]
            if bt:
                env2[vid] = (ops.getitem(x, i), False)

        def run():
            self.clone(op, env2)
            return tuple(env2[o.id][0] for o in op.outputs)

        self.mask = None
        try:
            if mask is None:
                outs = run()
            else:
                outs = control.cond(ops.getitem(mask, i), lambda: run(),
                                    lambda: tuple(_zeros(self, o.aval) for o in op.outputs))
        finally:
            self.mask = mask
        return tuple(ops.setitem(a, i, o) for a, o in zip(accs, outs))
    accs = control.for_loop(0, n, 1, body, *[_zeros(self, self.aval(o.aval)) for o in op.outputs])
    self.bind(env, op.outputs, accs)


def _zeros(self, aval):
    z = self.b.const(np.zeros((), aval.dtype))
    return ops.broadcast_to(z, tuple(aval.shape)) if aval.shape else z


_RULES = {
    constant_p: lambda self, op, env: self.clone(op, env),
    reshape_p: _reshape, transpose_p: _transpose, broadcast_to_p: _broadcast_to,
    concatenate_p: _concatenate, matmul_p: _matmul, iir_p: _iir,
    getitem_p: lambda self, op, env: _indexing(self, op, env, 1),
    index_put_p: lambda self, op, env: _indexing(self, op, env, 2),
    scatter_add_p: lambda self, op, env: _indexing(self, op, env, 1),
    **RULES,
}

_FAMILY = {"elementwise": _elementwise, "reduce": _axes, "scan": _axes, "sort": _axes,
           "linalg": _linalg}
