"""Structural primitives of the compiler's IR: constants, structured control flow, checks
(Note [Checks]), fusion groups and loop tapes.

`constant` holds a literal array. `cond`, `for_loop`, `while_loop` and `fusion` carry regions;
their operand/region conventions are Note [Control-flow ops] in transform/control.py, their
evaluation lives in transform/interp.py and their reverse mode in transform/ad.py (See Note
[Loop tapes] there), the one special case of "run each primitive's VJP rule". `tape_new`,
`tape_push` and `tape_get` are the storage the AD of loops emits. All are declared here so every
phase keys its tables by the same objects.
"""
from __future__ import annotations

import numpy as np

from llgrad.runtime.aval import Aval
from llgrad.runtime.prim import Primitive, register


def _region_op(name):
    def impl(*args, **params):
        raise NotImplementedError(f"{name} is evaluated by transform/interp.py")
    return impl


constant_p = register(Primitive(
    "constant", "const", lambda value: value,
    lambda value: Aval(tuple(value.shape), value.dtype), nondiff=True))

cond_p = register(Primitive("cond", "control", _region_op("cond"), None, nondiff=True))
for_loop_p = register(Primitive("for_loop", "control", _region_op("for_loop"), None,
                                nondiff=True))
while_loop_p = register(Primitive("while_loop", "control", _region_op("while_loop"), None,
                                  nondiff=True))
# A group of elementwise ops (and broadcasts of constants) that codegen emits as one loop:
# fusion(*inputs) with one region whose params are the inputs and whose results are the outputs.
fusion_p = register(Primitive("fusion", "control", _region_op("fusion"), None, nondiff=True))


# Note [Checks]
# `check(fail) {exc, args}` raises `exc(*args)` when the bool scalar `fail` is true, and has no
# outputs: the compiled form of a `raise` inside a traced `if` (tracer/checks.py puts it in the
# branch's region, or checks the condition itself when the branch does nothing else). The
# interpreter raises it with a note naming the user's line (the op's loc); codegen leaves the
# kernel through its error status (Note [Native errors], codegen/native_errors.py), and Python
# raises the same exception. `effect=True` keeps it through dead-code elimination, and
# constant folding never runs it. It has no gradient.
def _check_impl(fail, exc, args):
    if bool(fail):
        raise exc(*args)
    return ()


check_p = register(Primitive("check", "control", _check_impl, lambda fail, exc, args: (),
                             nondiff=True, multiple_results=True, effect=True))


def check_exception(exc, args, loc) -> BaseException:
    """The exception a failed check raises: the user's, with a note naming their line."""
    e = exc(*args)
    if loc is not None:
        e.add_note(f"raised by compiled code at {loc.describe()}")
    return e


# A call of a custom derivative rule (runtime/custom.py): custom_vjp(*xs, *closed, *values)
# yields the values its forward computed with ordinary ops before it; region [bwd] maps the
# outputs' cotangents to the xs' (Note [Control-flow ops] in transform/control.py). AD runs
# bwd instead of differentiating the forward's ops (transform/ad.py); everything else sees
# the identity on the values.
custom_vjp_p = register(Primitive("custom_vjp", "control", _region_op("custom_vjp"), None,
                                  nondiff=True))


# ---- loop tapes ---------------------------------------------------------------------------------
class Tape:
    """Rows pushed by a forward loop, read back (any order) by its reverse sweep.

    A tape value is linear (each push consumes the previous tape value), so pushing may mutate.
    The aval of a tape is `(rows, *row_shape)`, `rows` None when only known at run time.
    A ragged tape (transform/vmap_control.py, Note [Ragged tapes]) holds a batch: its rows are
    (*cols, *s), `ragged` = len(cols) leading column dims, and each column has its own row
    count, `counts[cols]`; a push writes the columns its mask (of shape cols) selects, each at
    its own next row. A read of row k, k of shape cols (or 0-d, for every column), gives
    each column's row k[c], zero where the column holds no such row; a batched tape that is
    not ragged is read so too where k is not 0-d (its leading k.ndim dims the columns).
    """

    __slots__ = ("buf", "n", "counts")

    def __init__(self, shape, dtype, rows, ragged=0):
        self.buf = np.empty((rows if rows is not None else 16,) + tuple(shape), dtype)
        self.n = 0
        self.counts = np.zeros(tuple(shape[:ragged]), np.int64) if ragged else None

    def _room(self, rows: int) -> None:
        if rows > self.buf.shape[0]:  # grow geometrically: O(1) amortised per push
            new = np.empty((max(2 * self.n + 1, rows),) + self.buf.shape[1:], self.buf.dtype)
            new[:self.n] = self.buf[:self.n]
            self.buf = new

    def push(self, x, mask=None) -> "Tape":
        self._room(self.n + 1)
        if self.counts is None:
            self.buf[self.n] = x
            self.n += 1
            return self
        cols = np.nonzero(np.ones(self.counts.shape, bool) if mask is None else mask)
        self.buf[(self.counts[cols],) + cols] = np.asarray(x)[cols]
        self.counts[cols] += 1
        self.n = max(self.n, int(self.counts.max(initial=0)))
        return self

    def get(self, k) -> np.ndarray:
        k = np.asarray(k)
        if self.counts is None and k.ndim == 0:
            k = int(k)
            if not 0 <= k < self.n:
                raise IndexError(f"tape row {k} of {self.n}")
            return self.buf[k].copy()
        lead = self.buf.shape[1:1 + (k.ndim or self.counts.ndim)]
        k = np.broadcast_to(k, lead)
        held = self.n if self.counts is None else self.counts
        ok = (k >= 0) & (k < held)
        cols = np.nonzero(ok)
        out = np.zeros(self.buf.shape[1:], self.buf.dtype)
        out[cols] = self.buf[(k[cols],) + cols]
        return out

    @property
    def nbytes(self) -> int:
        return self.buf.nbytes


# tape_new {shape, dtype, rows[, ragged]}; tape_push(tape, x[, mask]) (a mask only on a ragged
# tape); tape_get(tape, k), k 0-d or of the columns' shape (Tape.get).
tape_new_p = register(Primitive(
    "tape_new", "tape", lambda shape, dtype, rows, ragged=0: Tape(shape, dtype, rows, ragged),
    lambda shape, dtype, rows, ragged=0: Aval((rows,) + tuple(shape), np.dtype(dtype)),
    nondiff=True))
tape_push_p = register(Primitive(
    "tape_push", "tape", lambda tape, x, mask=None: tape.push(x, mask),
    lambda tape, x, mask=None: tape, nondiff=True))
tape_get_p = register(Primitive(
    "tape_get", "tape", lambda tape, k: tape.get(k),
    lambda tape, k: Aval(tuple(tape.shape[1:]), tape.dtype), nondiff=True))
