"""Whether an earlier view of an array sees the part an element update writes: decided while
tracing where the indices allow, else a run-time test (Note [Overlap known at run time]).

Used by tracer/aliasing.py (check_unaliased) for the views the user's frames hold.
"""
from __future__ import annotations

import numpy as np

from llgrad.runtime import ops
from llgrad.runtime.errors import LLGradError
from llgrad.runtime.ops.control import constant_p
from llgrad.runtime.padded import Padded
from llgrad.transform import ir
from llgrad.transform.builder import current

# Note [Overlap known at run time]
# `r = Y[0]; Y[i] = v` changes numpy's r exactly when i is 0 (or -len(Y)); compiled code
# updates Y by value, so r keeps the old row either way. `overlap` answers "do the view and
# the written part share an element?" with True (for every value of the traced indices:
# the update is refused while tracing), False (for none: nothing to do), or a thunk that
# emits the bool scalar answering it for the run-time values, which aliasing.py turns into
# a `check` op raising the refusal at the user's line (Note [Checks] in runtime/ops/control.py).
# Two descriptions of the parts are used. A view taken with static keys only (through any
# numpy views: reshape, transpose, ...) is the static set of the target's elements it sees
# (flat ids); the write's static entries select a box, and a table over the values of its
# traced entries (`ids[..]` meets the set) is looked up at run time (constant tables that
# are all False or all True need no op). A view taken at a traced index is described per axis
# of the target: the positions a static entry keeps, or `positions[t]` for a traced int t (a
# getitem of a getitem composes so: only axes a slice kept can be indexed again; a transpose
# permutes the axes), with only whole-view ops (reshape, ...) after the last getitem, which
# do not change the elements seen. Two parts overlap iff they meet on every axis. Two traced
# ints on one axis of the unsliced target that are the same traced value plus constants
# (`Y[i - 1]` and `Y[i]`, the common recurrence) are decided here: both indices are in bounds
# when the code goes on (the view's was checked when it was taken, the write's is checked by
# the write), so they name one row iff the constants differ by a multiple of the length.
# Anything else (index arrays, masks, Ellipsis, a traced slice) is answered True, the
# refusal, never a guess. The table lookups check the write's index against its axis as
# numpy does, so an index out of range is still numpy's IndexError.
_WHOLE_VIEW = frozenset({"reshape", "transpose", "squeeze", "expand_dims", "swapaxes"})


def overlap(chain: list, target, index):
    """Whether the view that the ops `chain` (outermost first) take of an array shaped like
    `target` shares elements with `target[index]` (index None: the whole array): True,
    False, or a thunk emitting the bool scalar that says it for the run-time values."""
    shape = tuple(target.aval.shape)
    if any(not isinstance(op, ir.Op) for op in chain):
        return True  # a slice of run-time length (Padded): not decided here
    if index is None:  # every element of the view changes
        return all(n > 0 for n in chain[0].outputs[0].aval.shape)
    chain = chain[::-1]  # innermost (applied to the target) first
    static = all(len(op.inputs) == 1 for op in chain)
    entries = index if isinstance(index, tuple) else (index,)
    if static and all(_static_entry(e) for e in entries):
        ids = np.arange(int(np.prod(shape, dtype=np.int64))).reshape(shape)
        try:
            written = ids[index]
        except Exception:  # noqa: BLE001 - numpy rejects the index: so does the write
            return False
        return bool(np.isin(_seen(chain, ids), np.asarray(written).ravel()).any())
    write = _grid(index if isinstance(index, tuple) else (index,), shape)
    if write is None:
        return True
    if write is False:  # a static index out of bounds: the write raises IndexError
        return False
    if static:
        ids = np.arange(int(np.prod(shape, dtype=np.int64))).reshape(shape)
        return _seen_table(_seen(chain, ids), shape, write)
    view = _view_grid(chain, shape)
    return True if view is None else _meet(view, write, shape)


def _static_entry(e) -> bool:
    """Whether `e` is an index entry known while tracing (no traced value in it)."""
    if isinstance(e, slice):
        return not any(isinstance(b, (ir.Value, Padded)) for b in (e.start, e.stop, e.step))
    if isinstance(e, (list, tuple)):
        return all(map(_static_entry, e))
    return e is None or e is Ellipsis or isinstance(e, (int, np.integer, np.bool_, np.ndarray))


# A numpy array the function made and then updates with traced values becomes a traced
# constant, a copy (staging.stage_setitem): numpy views of it that the frames hold would see
# the later updates of the traced value. Such arrays are kept per trace (`note_copied`), and
# a constant equal to one of them, of its shape and dtype, counts as its copy (one that is
# not only makes the test stricter, never wrong).
def note_copied(target: np.ndarray, frames) -> None:
    """Keep the numpy `target`, about to be copied into a traced value, if a frame holds a
    numpy view of it."""
    if not any(isinstance(v, np.ndarray) and v is not target and
               np.may_share_memory(v, target) for f in frames for v in f.f_locals.values()):
        return
    try:
        kept = current().__dict__.setdefault("copied_numpy", [])
    except LLGradError:
        return
    if not any(k is target for k in kept):
        kept.append(target)


def copied_from(target, versions) -> list:
    """The numpy arrays kept by note_copied that a constant among `versions.all()` (the
    arrays the traced `target` may be, aliasing._Versions) copies."""
    try:
        kept = current().__dict__.get("copied_numpy", ())
    except LLGradError:
        return []
    consts = [v.op.params["value"] for v in versions.all().values()
              if v.op is not None and v.op.prim is constant_p] if kept else []
    return [k for k in kept if k.shape == tuple(target.aval.shape) and any(
        c.shape == k.shape and c.dtype == k.dtype and np.array_equal(c, k) for c in consts)]


def _grid(entries, shape):
    """Per axis of `shape`, what `x[entries]` selects: a static array of positions, or
    (t, axis) for a traced int t; None if undecidable, False if a static index is out of
    bounds."""
    entries = [e for e in entries if e is not None]  # np.newaxis selects nothing
    if len(entries) > len(shape):
        return None
    out = []
    for ax, (e, n) in enumerate(zip(entries, shape)):
        if isinstance(e, ir.Value) and e.aval.shape == () and e.aval.dtype.kind in "iu":
            out.append((e, ax))
        elif isinstance(e, (int, np.integer)) and not isinstance(e, (bool, np.bool_)):
            if not -n <= e < n:
                return False
            out.append(np.array([e % n]))
        elif isinstance(e, slice) and all(b is None or isinstance(b, (int, np.integer)) and
                                          not isinstance(b, (bool, np.bool_))
                                          for b in (e.start, e.stop, e.step)):
            out.append(np.arange(n)[e])
        else:  # index arrays, masks, Ellipsis, traced slice bounds
            return None
    return out + [np.arange(n) for n in shape[len(out):]]


def overlap_numpy(view: np.ndarray, target: np.ndarray, index):
    """overlap() for a numpy `view` of the numpy `target` (written at a traced index)."""
    write = _grid(index if isinstance(index, tuple) else (index,), target.shape)
    seen = _numpy_seen(view, target)
    if write is False:  # a static index out of bounds: the write raises IndexError
        return False
    return True if write is None or seen is None else _seen_table(seen, target.shape, write)


def _numpy_seen(view: np.ndarray, target: np.ndarray):
    """The flat ids of the elements of a C-contiguous `target` that `view` sees, from the
    addresses; None if they are not all elements of it."""
    size = target.itemsize
    start = view.__array_interface__["data"][0] - target.__array_interface__["data"][0]
    if not target.flags.c_contiguous or view.itemsize != size or start % size or \
            any(st % size for st in view.strides):
        return None
    steps = [st // size for st in view.strides]
    lo = start // size + sum(min(0, (n - 1) * st) for n, st in zip(view.shape, steps))
    hi = start // size + sum(max(0, (n - 1) * st) for n, st in zip(view.shape, steps))
    if view.size == 0 or lo < 0 or hi >= target.size:
        return None if view.size else np.zeros(0, np.int64)
    offsets = np.full(view.shape, start // size, dtype=np.int64)
    for ax, st in enumerate(steps):
        offsets += (np.arange(view.shape[ax]) * st).reshape((-1,) + (1,) * (view.ndim - ax - 1))
    return offsets.ravel()


def _seen_table(seen: np.ndarray, shape, write):
    """overlap() for a view that sees the elements `seen` (flat ids) of the target, against
    the write's box, whose traced entries index a constant table."""
    ids = np.arange(int(np.prod(shape, dtype=np.int64))).reshape(shape)
    traced = [ax for ax, w in enumerate(write) if isinstance(w, tuple)]
    box = [np.arange(shape[ax]) if ax in traced else w for ax, w in enumerate(write)]
    hit = np.isin(ids[np.ix_(*box)], seen)
    other = tuple(ax for ax in range(len(shape)) if ax not in traced)
    table = hit.any(axis=other, keepdims=True) if other else hit
    if not table.any():
        return False
    if table.all():
        return True
    key = tuple(write[ax][0] if ax in traced else 0 for ax in range(len(shape)))
    return lambda: current().const(table)[key]


def _seen(chain, ids: np.ndarray) -> np.ndarray:
    """The flat ids of the elements a view taken with static keys sees."""
    for op in chain:
        ids = op.prim.impl(ids, **op.params)
    return np.asarray(ids).ravel()


def _view_grid(chain, shape):
    """Per axis of the target, what the view (a chain of getitems and transposes, then
    whole-view ops) sees: a static array of positions, or (t, positions) for a traced int t; None when the
    chain is not of that form."""
    sel: list = [np.arange(n) for n in shape]
    live = list(range(len(shape)))  # the target's axes the current view still has, in order
    for k, op in enumerate(chain):
        if op.prim.name in _WHOLE_VIEW and all(o.prim.name in _WHOLE_VIEW for o in chain[k:]):
            break
        if op.prim.name == "transpose":  # (`Y.T[j]`): the axes are permuted
            live = [live[p] for p in op.params["perm"]]
            continue
        key = op.params.get("key") if op.prim.name == "getitem" else None
        if key is None or len(key) > len(live):
            return None
        kept = []
        for e, ax in zip(key, live):
            if e[0] == "s":
                sel[ax] = sel[ax][slice(*e[1:])]
                kept.append(ax)
            elif e[0] == "i":
                sel[ax] = sel[ax][[e[1]]]
            elif e[0] == "a" and op.inputs[1 + e[1]].aval.shape == () and \
                    op.inputs[1 + e[1]].aval.dtype.kind in "iu":
                sel[ax] = (op.inputs[1 + e[1]], sel[ax])
            else:  # newaxis, Ellipsis, an index array
                return None
        live = kept + live[len(key):]
    return sel


def _meet(view, write, shape):
    """overlap() from per-axis descriptions (_view_grid, _grid): they meet iff they meet on
    every axis."""
    tests = []
    for ax, (v, w, n) in enumerate(zip(view, write, shape)):
        if not isinstance(v, tuple) and not isinstance(w, tuple):
            meets = bool(np.isin(v, w).any())
        elif not isinstance(w, tuple):  # the view at a traced index, a static write
            meets = _table(np.isin(v[1], w), v[0])
        elif not isinstance(v, tuple):  # a static view, the write at a traced index
            meets = _table(np.isin(np.arange(n), v).reshape((1,) * ax + (n,)), w[0], ax)
        else:
            meets = _both_traced(v, w[0], ax, n)
        if meets is False:
            return False
        if meets is not True:
            tests.append(meets)
    if not tests:
        return True

    def emit():
        fail = tests[0]()
        for t in tests[1:]:
            fail = ops.logical_and(fail, t())
        return fail
    return emit


def _table(table: np.ndarray, t, ax: int = 0):
    """`table[..., t]` (t on the last axis, `ax` leading axes of length 1: a write's index is
    checked against its axis and length as numpy would) as overlap() answers it."""
    if not table.any():
        return False
    if table.all():
        return True
    return lambda: current().const(table)[(0,) * ax + (t,)]


def _both_traced(v, w, ax: int, n: int):
    """The view's traced position `v` = (t, positions) against the write's traced index w on
    axis `ax` (length n)."""
    t, positions = v
    (bt, ct), (bw, cw) = affine(t), affine(w)
    if _same(bt, bw) and np.array_equal(positions, np.arange(n)):
        return (ct - cw) % n == 0  # both in bounds when the code goes on: the Note
    rows = np.arange(n).reshape((1,) * ax + (n,))

    def emit():
        b = current()
        return ops.eq(b.const(positions)[t], b.const(rows)[(0,) * ax + (w,)])
    return emit


def affine(v) -> tuple:
    """(base, c) with v = base + c, following add/sub of integer constants."""
    c = 0
    while isinstance(v, ir.Value) and v.op is not None and v.op.prim.name in ("add", "sub"):
        a, b = v.op.inputs
        kb, ka = const_int(b), const_int(a)
        if kb is not None:
            v, c = a, c + (kb if v.op.prim.name == "add" else -kb)
        elif ka is not None and v.op.prim.name == "add":
            v, c = b, c + ka
        else:
            break
    return v, c


_PURE = frozenset({"getitem", "add", "sub", "mul", "neg", "constant"})


def _same(a, b, depth: int = 4) -> bool:
    """Whether the traced `a` and `b` hold one value: the same, or ops of the same pure
    primitive and params on such inputs (`k[0]` written twice gives two getitems)."""
    if a is b:
        return True
    if depth == 0 or not isinstance(a, ir.Value) or not isinstance(b, ir.Value) or \
            a.op is None or b.op is None or a.op.prim is not b.op.prim or \
            a.op.prim.name not in _PURE or len(a.op.inputs) != len(b.op.inputs):
        return False
    pa, pb = a.op.params, b.op.params
    if pa.keys() != pb.keys() or any(
            not np.array_equal(pa[k], pb[k]) if isinstance(pa[k], np.ndarray) else pa[k] != pb[k]
            for k in pa):
        return False
    return a.aval == b.aval and all(_same(x, y, depth - 1)
                                    for x, y in zip(a.op.inputs, b.op.inputs))


def const_int(v) -> int | None:
    """The value of a traced integer scalar made by a constant op, else None."""
    op = v.op if isinstance(v, ir.Value) else None
    if op is None or op.prim is not constant_p:
        return None
    value = op.params["value"]
    return int(value) if value.shape == () and value.dtype.kind in "iu" else None
