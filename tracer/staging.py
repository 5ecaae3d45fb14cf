"""The stager: how traced `if`/`for`/`while`/ternaries become cond/for_loop/while_loop ops.

Implements the protocol of tracer/operators.py for IR values (`transform.builder.Value`).
Branch and loop bodies are traced into regions; variables they change become the op's
results (loop-carried values). See Note [Static loops over traced state] in operators.py for
`for i in range(n)` with static bounds.
"""
from __future__ import annotations

import numpy as np

from llgrad.runtime import ops, pytree
from llgrad.runtime.aval import BOOL, I64, Aval, aval_str
from llgrad.runtime.errors import (ConcretizationError, DTypeError, LLGradError, ShapeError,
                                   UnsupportedError, user_loc)
from llgrad.runtime.ops.control import cond_p, for_loop_p, while_loop_p
from llgrad.tracer import aliasing, checks, effects, merge, operators
from llgrad.tracer.operators import TracedRange, Undefined
from llgrad.tracer.traced_builtins import Zipped, stacked_items
from llgrad.tracer.stores import Place, StoreLog
from llgrad.tracer.overlap import const_int
from llgrad.tracer.effects import LoopEffects, NewEffects, Poison, PoisonRead, Unstageable
from llgrad.tracer.records import flat_state, split_merge
from llgrad.transform import ir
from llgrad.transform.builder import Builder, Value, current


class Decline(Exception):
    """An optional staging gives the loop back to Python (Note [Static loops over traced
    state] in operators.py)."""

    _lg_signal = True  # Note [llgrad's exceptions pass user handlers] (operators.py)


class Unroll(Exception):
    """Raised to restart a trace with the loop at `loc` unrolled (See Note [Unrolled loops])."""

    _lg_signal = True  # Note [llgrad's exceptions pass user handlers] (operators.py)

    def __init__(self, loc, reason):
        super().__init__(reason)
        self.loc, self.reason = loc, reason


# Note [Unrolled loops]
# A loop whose carried values change shape or dtype across iterations, or whose body changes
# a Python container in a way one loop op cannot repeat (Note [Containers in staged loops] in
# effects.py: items removed, a list it appends to read back, appends without a static trip
# count), cannot be one loop op. When its trip count is static, the trace restarts with that
# loop run as Python (unrolled), and llgrad warns once naming the line and the reason
# (tracing._warn_unroll, the one place its text is made); with a traced trip count it is an
# error. A traced value that still leaks out of a loop body (stored into an object the
# snapshot does not reach) is noticed when a value defined inside a loop region is used
# outside it (Builder.check_scope), and unrolls the loop the same way.


def _is_val(x) -> bool:
    return isinstance(x, ir.Value)


def _pred(b: Builder, cond, loc) -> Value:
    cond = b.lift(cond)
    if cond.aval.shape != ():
        raise ShapeError(f"the truth value of a traced array of shape {list(cond.aval.shape)} "
                         f"is ambiguous", loc=loc,
                         fix="use a scalar condition, or np.where(cond, a, b) for elementwise "
                         "selection, or .any()/.all()")
    return cond if cond.aval.dtype == BOOL else ops.ne(cond, 0)


class IRStager:
    """Stages control flow on IR values into cond/for_loop/while_loop ops."""

    def __init__(self):
        self.unroll: set = set()  # (loc, reason) of loops run as Python (Note [Unrolled loops])
        self.copies: dict = {}  # (file, line) of an unrolled loop -> body copies traced
        self.region_locs: dict = {}  # id(region) -> ("loop" | "if", loc), for scope errors
        self.promoted: dict = {}  # id(v) -> (v, loc): Python values a static loop made traced
        self.stores = StoreLog()  # Note [Stores in traced branches]
        self.loops: list = []  # LoopEffects of the loops being staged (innermost last)
        self.branches: list = []  # Snapshots of the traced branches being traced
        self.stacked: dict = {}  # Note [Lists indexed by a traced index]

    # -- the dynamic path ------------------------------------------------------------------
    # Under an eager builder (tracer/dynamic.py) values are concrete: control flow runs as
    # Python (each decision concretises its condition, recording a guard), and element
    # writes stay functional updates, so gradients flow through `y[i] = ...` into a numpy
    # buffer exactly as on the staged path.
    def eager(self) -> bool:
        try:
            return getattr(current(), "eager", False)
        except LLGradError:
            return False

    # -- if / ternary ---------------------------------------------------------------------
    def stage_if(self, cond, body_fn, orelse_fn, get_state, set_state, names, nouts, loc):
        b = current()
        if getattr(b, "eager", False):
            return body_fn() if _truth(cond) else orelse_fn()
        pred = _pred(b, cond, loc)
        get_state, set_state, names, nouts = flat_state(get_state, set_state, names, nouts)
        s0 = get_state()
        branches = []
        for fn in (body_fn, orelse_fn):
            set_state(s0)  # Note [Each branch starts from the state before the if]
            with effects.branch(self, s0, fn, loc), b.open_region() as r, \
                    self.stores.branch(loc) as log:
                self.region_locs[id(r)] = ("if", loc)
                raised = checks.trace_branch(fn)  # Note [Raise under a traced condition]
                branches.append((r, get_state(), log, raised))
        (rt, st, lt, xt), (re, se, le, xe) = branches
        if xt:
            checks.hoist(b, rt, lambda: pred)
        if xe:
            checks.hoist(b, re, lambda: ops.logical_not(pred))
        if xt and xe:
            b.emit(cond_p, [pred], {}, [], regions=[rt, re], loc=loc)
            set_state(s0)
            checks.both_raise(b, loc)
        final = list(s0)
        for k in range(nouts, len(names)):  # not used after the `if`: no value to merge
            final[k] = st[k] if st[k] is se[k] else Undefined(
                names[k], f"changed by the traced `if` at {loc}, and llgrad found no use of it "
                "after the `if` (if this use is real, it is an llgrad bug: please report it)")
        merges = [(names[k], st[k], se[k], lambda v, k=k: final.__setitem__(k, v))
                  for k in range(nouts)]
        merges += self.stores.merges(lt, le)  # Note [Stores in traced branches]
        returned = [_returned(names, st), _returned(names, se)]
        outs = []
        while merges:
            name, a, c, put = merges.pop(0)
            ua, uc = isinstance(a, Undefined), isinstance(c, Undefined)
            # A branch that raised, or that returned where the name is unbound (Note [Nothing
            # runs after a return], jumps.py), is not read: the other branch's value goes on.
            skip_a = xt or ua and not uc and returned[0] and not name.startswith("__lg_")
            skip_c = xe or uc and not ua and returned[1] and not name.startswith("__lg_")
            if skip_a or skip_c:
                keep = c if skip_a else a
                if not _is_val(keep) and not operators.is_record(keep):
                    put(keep)
                    continue
                a, c = (None if skip_a else a), (None if skip_c else c)
            elif ua or uc:
                if name.startswith("__lg_"):  # generated flags and __lg_retval
                    a, c = (None if ua else a), (None if uc else c)
                elif ua and uc:
                    put(a)
                    continue
                else:
                    side = "false" if ua else "true"
                    if isinstance(put, Place) and put.is_dict_key():
                        raise effects.key_in_one_branch(self, name, side, loc)
                    put(Undefined(name, f"assigned only in the {side} branch of the `if` at "
                                        f"{loc}"))
                    continue
            leaves = split_merge(name, a, c, put, loc)
            if leaves is not None:  # Note [Records in loop and branch state]
                merges[:0] = leaves
                continue
            merged = merge.merge(name, a, c, loc)
            if merged is None:
                put(a if a is not None else c)
                continue
            rt.results.append(merge.lift(b, a, merged[0], rt))
            re.results.append(merge.lift(b, c, merged[0], re))
            outs.append((name, merged, put, (a, c)))
        values = b.emit(cond_p, [pred], {}, [a for _, (a, _), _, _ in outs], regions=[rt, re],
                        loc=loc)
        for (name, (_, weak), put, paths), v in zip(outs, values):
            v.name = _hint(name) if name.isidentifier() else None  # not "(value)", "Box.a"
            v._lg_weak = weak
            aliasing.note_may_be(v, *paths)  # Note [In-place updates are by value]
            put(v)
        set_state(tuple(final))

    def stage_raise(self, make, loc):
        """See Note [Raise under a traced condition] (tracer/checks.py)."""
        return checks.stage_raise(make, loc)

    def note_store(self, obj, key, delete):
        """See Note [Stores in traced branches] (tracer/stores.py)."""
        self.stores.note(obj, key, delete)

    def note_call(self, obj, name):
        """Before converted code calls a method that changes `obj` in place (`lst.append`,
        `a.fill`), `len(obj)` or `print` (Note [Python effects in staged code] in
        effects.py)."""
        if self.eager() or not self.in_region():
            return
        b = current()
        kind, loc = next((self.region_locs[id(r)] for r in reversed(b.regions)
                          if id(r) in self.region_locs), (None, None))
        effects.note_call(self, kind, loc, obj, name)

    def branch_loc(self):
        """The traced `if` whose branch is being traced (innermost), or None."""
        return self.stores.stack[-1][1] if self.stores.stack else None

    def stage_if_exp(self, cond, true_fn, false_fn, loc):
        if self.eager():
            return true_fn() if _truth(cond) else false_fn()
        loc = loc or user_loc()  # `and`/`or` pass none: the user's line is the caller's
        box = _Box()  # (not a list: a branch may not change a list from outside it)
        self.stage_if(cond, lambda: setattr(box, "v", true_fn()),
                      lambda: setattr(box, "v", false_fn()),
                      lambda: (box.v,), lambda s: setattr(box, "v", s[0]), ("(value)",), 1,
                      loc)
        return box.v

    def stage_not(self, value, loc):
        if self.eager():
            return not _truth(value)
        out = ops.logical_not(_pred(current(), value, loc))
        out._lg_weak = True  # `not` gives a Python bool
        return out

    def stage_setitem(self, target, index, value):
        if isinstance(target, np.ndarray):  # a copy: the user's array is never written
            target = current().const(np.array(target))
        return ops.setitem(target, index, value)

    def stage_getitem(self, target, index):
        """`target[index]` for a numpy `target` and a traced index (tracer/updates.py)."""
        return current().const(np.array(target))[index]

    def stage_list_item(self, items, index):
        """`items[index]` for a Python list or tuple of traced values of one structure and
        shape, and a traced integer index: row `index` of the items stacked (Note [Lists
        indexed by a traced index]), or None when they cannot be stacked."""
        b = current()
        pos = self.loops[-1].counter_read(items, index) if self.loops else None
        if pos is not None:  # Note [Containers in staged loops]
            return _relative_read(items, pos)
        for loop in self.loops:  # (as len() of it: Note [Containers in staged loops])
            loop.note_len(items)
        leaves = [v for item in items for v in pytree.tree_leaves(item)]
        if not leaves or not all(map(_is_val, leaves)):
            return None
        key = (id(items), tuple(v.id for v in leaves))
        hit = self.stacked.get(key)
        if hit is None or hit[0] is not items or not _in_scope(b, hit[1].arrays):
            with b.emitting_where_defined(leaves):
                stacked = stacked_items(items, at_least=1)
            if stacked is None:
                return None
            hit = self.stacked[key] = (items, stacked)
        return hit[1][index]

    def list_item(self, lst, i: int):
        """`lst[i]` for a list a staged loop being traced appends to (Note [Containers in
        staged loops]): at i >= 0, its item from before the loop, the same in every
        iteration; at i < 0, the item that far from its end (raising PoisonRead, relative,
        for one not carried yet). None for another list or index."""
        for loop in self.loops:
            for buf in loop.buffers:
                if buf.lst is not lst:
                    continue
                if 0 <= i < buf.n0:
                    return buf.original[i]
                if -len(lst) <= i < 0:
                    return _relative_read(lst, len(lst) + i)
        return None

    # Note [Lists indexed by a traced index]
    # `xs[t]` with `xs` a Python list (a list argument of arrays, the steps of a sequence) and
    # `t` a staged loop's counter needs t as a Python int: the loop was unrolled, one copy of
    # the body per trip, to index the list with Python ints. When the items have one
    # structure and shape (as for a loop over them: Note [Loops over lists of traced values]
    # in traced_builtins.py), the read is row t of the items stacked instead, so the loop
    # stays one loop; numpy's indexing of the stack checks t's bounds and wraps a negative
    # t as the list would. The stack is emitted once, where the items are defined (before
    # the loop, not in its body, where it would be rebuilt every trip), and reused by later
    # reads of the same list while its items are unchanged. A list the loop appends to is
    # read as its length would be (Note [Containers in staged loops] in effects.py): its
    # items are not known while the body is traced.

    def stage_ufunc_at(self, ufunc, target, index, value=None):
        """`np.add.at(target, index, value)` (or np.subtract.at) as a new value."""
        if ufunc not in (np.add, np.subtract) or value is None:
            raise LLGradError(f"np.{ufunc.__name__}.at on traced values is not supported",
                              loc=user_loc(), fix="use np.add.at (or np.subtract.at), or "
                              "write the update with np.where")
        if isinstance(target, np.ndarray):  # a copy: the user's array is never written
            target = current().const(np.array(target))
        return ops.index_add(target, index, value if ufunc is np.add else ops.neg(value))

    def in_region(self) -> bool:
        """True while a branch or loop body is traced (See operators._region_stager)."""
        try:
            return len(current().regions) > 1
        except LLGradError:
            return False

    # -- loops ----------------------------------------------------------------------------
    # Note [Loops over numpy arrays]
    # `for t in grid:` over a numpy array (a module-level time grid, the class labels) whose
    # state holds traced values, or whose body reads them, is staged as a loop over
    # range(len(grid)) reading row i of the array as a constant, instead of one copy of the
    # body per row (operators.for_stmt). As for a loop over a Python range (Note [Static loops
    # over traced state] in operators.py), a body that needs an item as a Python value
    # (float(t), a list index, a new dict key) runs as Python when the loop's state is plain,
    # and is unrolled, with a warning naming the line, when it is traced. Numeric arrays of
    # two rows or more only; zip/enumerate of numpy arrays (and ranges) too.
    def stage_for(self, iterable, extra_test, body_fn, get_state, set_state, names, loc,
                  optional=False):
        b = current()
        zipped = isinstance(iterable, Zipped)
        if getattr(b, "eager", False):
            if isinstance(iterable, (range, TracedRange)):
                rng = range(*(int(v) for v in (iterable.start, iterable.stop, iterable.step)))
                return self._run_python(rng, None, extra_test, body_fn)
            n = iterable.length if zipped else len(iterable)
            return self._run_python(range(n), iterable, extra_test, body_fn)
        rows = None  # the constant a loop over a numpy array reads its rows from
        if zipped:  # zip/enumerate of traced arrays (and ranges): item i of each
            start, stop, step = 0, iterable.length, 1
            item = iterable
        elif isinstance(iterable, np.ndarray):  # Note [Loops over numpy arrays]
            start, stop, step = 0, len(iterable), 1
            item, rows = iterable, None if self.wants_unroll(loc) else b.const(iterable)
        elif isinstance(iterable, (range, TracedRange)):
            start, stop, step = iterable.start, iterable.stop, iterable.step
            if _is_val(step) or step == 0:
                if not _is_val(step):
                    raise ValueError("range() arg 3 must not be zero")
                raise LLGradError("a traced range step is not supported", loc=loc,
                                  fix="use a Python int step")
            item = None
        else:  # rows of a traced array
            arr = iterable
            if not arr.aval.shape:
                raise TypeError("iteration over a 0-d array")
            start, stop, step = 0, arr.aval.shape[0], 1
            item = arr
        static = not _is_val(start) and not _is_val(stop)
        if self.wants_unroll(loc):
            if not static:
                raise _cannot_unroll("loop", loc, self._reason(loc))
            key = (loc.file, loc.line)
            self.copies[key] = self.copies.get(key, 0) + len(range(start, stop, step))
            return self._run_python(range(start, stop, step), item, extra_test, body_fn)
        start_v, stop_v = (b.lift(np.int64(v)) if not _is_val(v) else _int_bound(v, loc)
                           for v in (start, stop))

        def body(i):
            body_fn(i if item is None else item[i] if zipped else
                    ops.getitem(item if rows is None else rows, i))

        may_skip = not static or len(range(int(start), int(stop), int(step))) == 0
        kind = "for" if extra_test is None else "while_for"
        try:
            self._loop(b, loc, names, get_state, set_state, static, kind=kind,
                       bounds=(start_v, stop_v, int(step)), body=body, test=extra_test,
                       may_skip=may_skip, fns=(body_fn, extra_test),
                       trips=len(range(start, stop, step)) if static else None,
                       optional=optional,
                       over=iterable.arrays if zipped else item if rows is None else None)
        except Decline:
            return False
        except (ShapeError, UnsupportedError):
            # (e.g. a slice of loop-dependent length the body cannot use: Note [Slices of
            # loop-dependent length]): an optional loop runs as Python, as it was written
            if optional:
                return False
            raise
        except ConcretizationError as e:
            # See Note [Unrolled loops]: the body needs an integer as a Python value (the
            # index of a Python list, a shape): with a static trip count, unroll the loop.
            v = getattr(e, "value", None)
            items = zipped or rows is not None  # (Note [Loops over numpy arrays])
            if not static or v is None or v.aval.dtype.kind not in "iub" and not items:
                raise
            if optional:  # Note [Static loops over traced state]: run it as Python
                return False
            reason = _item_use(e) if items else _index_use(e)
            self.unroll.add((loc, reason))
            raise Unroll(loc, reason) from None

    def stage_while(self, test_fn, body_fn, get_state, set_state, names, loc):
        if self.eager():
            while _truth(test_fn()):
                body_fn()
            return
        if self.wants_unroll(loc):
            raise _cannot_unroll("while loop", loc, self._reason(loc))
        self._loop(current(), loc, names, get_state, set_state, False, kind="while",
                   body=lambda: body_fn(), test=test_fn, may_skip=True, fns=(body_fn, test_fn))

    def stage_python_while(self, test_fn, body_fn, get_state, set_state, names, loc,
                           optional=False) -> bool:
        """A `while` whose test is a Python value (found true) over traced state: staged as
        one while_loop, or False to run it as Python (Note [Python while loops over traced
        state] in operators.py)."""
        if self.eager() or self.wants_unroll(loc):
            return False
        try:
            self._loop(current(), loc, names, get_state, set_state, True, kind="while",
                       body=lambda: body_fn(), test=test_fn, python_test=True,
                       fns=(body_fn, test_fn), optional=optional)
        except Decline:
            return False
        except ConcretizationError as e:
            # The body needs a carried value (the counter, now traced) as a Python value.
            v = getattr(e, "value", None)
            if v is None or v.aval.shape != ():
                raise
            if optional:
                return False
            reason = "its body uses a value the loop changes (e.g. its counter) as a Python value"
            self.unroll.add((loc, reason))
            raise Unroll(loc, reason) from None
        return True

    # Note [Values a static loop made traced]
    # Staging a loop with a static trip count (a `for` over a Python range, a Python-test
    # `while`) turns the Python scalars its body changes (a counter `i += 1`) into traced
    # loop results; Python would have them as plain numbers after the loop. When one is then
    # concretised (`np.ones((i,))`, `lst[i]`), the trace restarts with that loop run as Python
    # (Note [Unrolled loops]) instead of sending the whole signature to the dynamic path.
    def promoted_by(self, value):
        """The loc of the static loop that made `value` (or a value it is computed from)
        traced, or None."""
        todo, seen = [value], set()
        while todo and len(seen) < 10_000:
            v = todo.pop()
            if id(v) in seen or not _is_val(v):
                continue
            seen.add(id(v))
            hit = self.promoted.get(id(v))
            if hit is not None:
                return hit[1]
            if v.op is not None:
                todo.extend(v.op.inputs)
        return None

    def wants_unroll(self, loc) -> bool:
        return any(_same_loc(loc, u) for u, _ in self.unroll)

    def unroll_loop(self, loc, reason: str):
        """Restart the trace with the loop at `loc` unrolled (Note [Unrolled loops])."""
        self.unroll.add((loc, reason))
        raise Unroll(loc, reason)

    def _reason(self, loc) -> str:
        return next(r for u, r in self.unroll if _same_loc(loc, u))

    def _run_python(self, rng, item, extra_test, body_fn):
        for i in rng:
            if extra_test is not None and not _truth(extra_test()):
                return
            body_fn(i if item is None else item[i])

    # Note [Carried numbers]
    # A variable holding a Python number on entry to a staged loop (`acc = 0.0`), or a weak
    # value, is carried as a weak value (See Note [Two promotion rules]). When the body makes
    # it something else (`acc = acc + x_f32[i]` is float32, an array, a Python float where
    # it was an int), it takes that type from the start, as Python's variable does from the
    # first iteration on; the body is traced again. A strong carried value that changes its
    # shape or dtype makes the loop unroll (Note [Unrolled loops]). Weak values only become
    # strong or wider, so this ends.
    def _loop(self, b, loc, names, get_state, set_state, static, kind, body, test=None,
              bounds=None, may_skip=False, python_test=False, fns=(), trips=None,
              optional=False, over=None):
        """Stage a loop; rounds trace it again while its body is found to change more
        Python containers (Note [Containers in staged loops] in effects.py). `optional`:
        raise Decline rather than unroll, or when the loop would carry nothing (Note
        [Static loops over traced state] in operators.py). `over`: the array a `for` loop
        iterates over (its rows)."""
        effects = LoopEffects(b, fns, trips if kind == "for" else None)
        effects.optional, effects.over = optional, over
        self.loops.append(effects)
        first: dict = {}  # records first bound in the body (records.flat_state)
        rebound: set = set()  # Note [Containers rebuilt by a loop body]
        try:
            for _round in range(64):
                g, s, n = effects.wrap(get_state, set_state, names)
                try:
                    return self._loop_round(b, loc, n, g, s, static, kind, body, test, bounds,
                                            may_skip, python_test, effects, first,
                                            frozenset(rebound))
                except NewEffects:
                    continue
                except _FirstRecord as e:
                    first[e.name] = e.record
                    continue
                except _Rebuilt as e:
                    rebound.add(e.name)
                    continue
                except PoisonRead as e:
                    if e.buffer not in effects.buffers:
                        raise  # an enclosing loop's list
                    if not effects.carry_last(e):
                        self._not_one_loop(loc, static, kind, e.what)
                except Unstageable as e:
                    self._not_one_loop(loc, static, kind, e.what)
            raise LLGradError("could not determine what the loop changes", loc=loc)
        finally:
            self.loops.pop()

    def _not_one_loop(self, loc, static, kind, reason, decline=False):
        """The loop cannot be one loop op: unroll it (static trip count) or refuse it; or,
        `decline`, give it back to Python without a warning."""
        if decline:
            raise Decline()
        if static:
            self.unroll.add((loc, reason))
            raise Unroll(loc, reason)
        raise _cannot_unroll("while loop" if kind == "while" else "loop", loc, reason)

    def _loop_round(self, b, loc, names, get_state, set_state, static, kind, body, test,
                    bounds, may_skip, python_test, effects, first, rebound):
        get_state, set_state, names, _ = flat_state(get_state, set_state, names, first=first,
                                                    rebound=rebound)
        s0 = list(get_state())
        try:
            return self._loop_state(b, loc, names, get_state, set_state, static, kind, body,
                                    test, bounds, may_skip, python_test, effects, s0)
        except BaseException:
            effects.abort()
            set_state(tuple(s0))
            raise

    def _loop_state(self, b, loc, names, get_state, set_state, static, kind, body, test,
                    bounds, may_skip, python_test, effects, s0):
        carried = {k for k, v in enumerate(s0) if _is_val(v)}
        avals = {k: s0[k].aval for k in carried}
        weak = {k for k in carried if merge.is_weak(s0[k])}  # See Note [Carried numbers]
        for _attempt in range(4 * len(names) + 2):
            region_ops = self._trace_loop(b, loc, names, s0, carried, avals, weak, get_state,
                                          set_state, kind, body, test, bounds, effects)
            if effects.unsupported:  # (a loop carrying nothing traced is Python's: no warning)
                self._not_one_loop(loc, static, kind, effects.unsupported, effects.optional
                                   and not carried and not region_ops["grow"])
            grown = region_ops["grow"]
            changed = region_ops["changed"]
            if changed:
                self._not_one_loop(loc, static, kind, f"it changes {changed} across iterations")
            if not grown:
                break
            for k, (aval, is_weak) in grown.items():
                carried.add(k)
                avals[k] = aval
                (weak.add if is_weak else weak.discard)(k)
        else:  # pragma: no cover - carried values only grow or become strong: this ends
            raise LLGradError("could not determine the loop-carried values", loc=loc)
        if effects.optional and not carried and not effects.n_slots():
            raise Decline()  # it carries nothing: Python runs it (Note [Static loops ...])
        if python_test and not region_ops["test_traced"]:
            if effects.optional:
                raise Decline()
            reason = ("its condition does not depend on values the loop carries (it reads "
                      "Python objects the body changes in place, or nothing the body changes)")
            self.unroll.add((loc, reason))
            raise Unroll(loc, reason)
        outs = region_ops["emit"]()
        for k, v in outs.items():  # Note [In-place updates are by value]
            aliasing.note_may_be(v, region_ops["after"][k], *([s0[k]] if may_skip else []))
        n_rows = effects.n_slots()
        effects.finish([outs[k] for k in range(len(names) - n_rows, len(names))])
        if static:  # See Note [Values a static loop made traced]
            self.promoted.update((id(v), (v, loc)) for k, v in outs.items() if not _is_val(s0[k]))
        # A variable first assigned in the body is unbound after a loop that ran zero times
        # (Python raises UnboundLocalError on its use); when the trip count is not known to be
        # positive, its use after the loop is an error rather than the placeholder's zeros.
        unbound = [k for k in carried if isinstance(s0[k], Undefined)
                   and not names[k].startswith("__lg_")] if may_skip else []
        if unbound:
            st = list(get_state())
            for k in unbound:
                st[k] = Undefined(names[k], f"assigned only inside the loop at {loc}, which "
                                  f"may run zero times (its trip count is not static)")
            set_state(tuple(st))

    def _trace_loop(self, b, loc, names, s0, carried, avals, weak, get_state, set_state, kind,
                    body, test, bounds, effects):
        order = sorted(carried)
        init = [merge.lift(b, s0[k], avals[k]) for k in order]

        def state_from(params):
            st = list(s0)
            for k, p in zip(order, params):
                st[k] = p
            return st

        regions, test_traced = [], False
        # The counter of `for i in range(...)` is a Python int in Python: a weak value.
        i_param = b.new_value(((), I64), "i", weak=True) if kind != "while" else None
        counts_up = kind != "while" and bounds[2] > 0 and bounds[0]._lg_nonnegative()
        cparams = [b.new_value(avals[k], _hint(names[k]), weak=k in weak) for k in order]
        if kind in ("while", "while_for"):
            cond_params = ([b.new_value(((), I64), "i", weak=True)] if kind == "while_for"
                           else []) + [b.new_value(avals[k], _hint(names[k]), weak=k in weak)
                                       for k in order]
            if counts_up:
                b.nonneg.add(cond_params[0].id)
            with b.open_region(cond_params) as rc:
                set_state(state_from(cond_params[1:] if kind == "while_for" else cond_params))
                box = []
                if checks.trace_branch(lambda: box.append(test())):
                    raise LLGradError("a `raise` while evaluating the test of a traced while "
                                      "loop cannot be compiled", loc=loc,
                                      fix="test the condition in the loop body instead")
                ok = box[0]
                test_traced = _is_val(ok)
                ok = _pred(b, ok if test_traced else np.bool_(_truth(ok)), loc)
                if kind == "while_for":
                    i = cond_params[0]
                    in_range = ops.lt(i, bounds[1]) if bounds[2] > 0 else ops.gt(i, bounds[1])
                    ok = ops.logical_and(in_range, ok)
                rc.results = [ok]
            regions.append(rc)
        if counts_up:
            b.nonneg.add(i_param.id)
        for k, p, v in zip(order, cparams, init):  # Note [In-place updates are by value]
            aliasing.note_may_be(p, v, s0[k])
        body_params = ([i_param] if kind != "while" else []) + cparams
        shallow = {k: _shallow(v) for k, v in enumerate(s0) if _shallow(v) is not None}
        with b.open_region(body_params) as rb:
            self.region_locs[id(rb)] = ("loop", loc)
            before = state_from(cparams)
            set_state(before)
            if effects.trips is not None:  # the row of list buffers (effects.py)
                start, _, step = bounds
                effects.index = i_param if step == 1 and _is_zero(start) else \
                    ops.floor_divide(ops.sub(i_param, start), np.int64(step))
                effects.counter = (i_param, const_int(start), step)
            effects.begin(before)
            b.inplace.append([])
            try:
                if checks.trace_branch(body, *([i_param] if kind != "while" else [])):
                    set_state(state_from(cparams))  # Note [Raise under a traced condition]
            finally:
                updates = b.inplace.pop()
            after = list(get_state())
            effects.end(names, before, after)
        grow, changed = {}, ""
        for k, name in enumerate(names):
            v = after[k]
            t = merge.target(v) if not isinstance(v, Undefined) else None
            if k in carried:
                if isinstance(v, Undefined):
                    changed = changed or f"`{name}` (deleted in the body)"
                elif t is None:
                    changed = changed or f"`{name}` into a {type(v).__name__}"
                elif k in weak:  # Note [Carried numbers]
                    if t != (avals[k], True):
                        grow[k] = t
                else:  # a Python number must fit the strong type (no truncation)
                    new = merge.with_weak(avals[k], t[0]) if t[1] else t[0]
                    if new != avals[k]:
                        changed = changed or (f"the shape/dtype of `{name}` from "
                                              f"{aval_str(*avals[k])} to {aval_str(*new)}")
            elif v is not s0[k] and not isinstance(v, Undefined):
                if _is_val(v):
                    grow[k] = t
                elif t is not None and not _same_value(v, s0[k]):
                    grow[k] = t
                elif operators.is_record(v) and (s0[k] is None or isinstance(s0[k], Undefined)):
                    set_state(s0)  # carried as its leaves from the start
                    raise _FirstRecord(name, v)
                elif t is None and (v is not None or not name.startswith("__lg_")):
                    if k in shallow and _rebuilt(s0[k], v, shallow[k]):
                        set_state(s0)  # carried as its leaves from the start
                        raise _Rebuilt(name)
                    changed = changed or f"`{name}` into a new {type(v).__name__} object"
        if grow or changed:
            set_state(s0)
            return {"grow": grow, "changed": changed, "emit": None}
        if updates:  # Note [In-place updates are by value]
            aliasing.check_loop(loc, updates, ([names[k] for k in order], cparams, init,
                                               [after[k] for k in order], rb), effects.over)
            for k, p in zip(order, cparams):
                aliasing.note_may_be(p, after[k])
            if b.inplace:
                b.inplace[-1].extend(updates)
        nxt = [merge.lift(b, after[k], avals[k], rb) for k in order]
        if kind == "while_for":
            b.regions.append(rb)
            try:
                nxt = [ops.add(body_params[0], np.int64(bounds[2]))] + nxt
            finally:
                b.regions.pop()
        rb.results = nxt
        regions.append(rb)

        def emit():
            if kind == "for":
                start, stop, step = bounds
                outs = b.emit(for_loop_p, [start, stop, b.const(np.int64(step))] + init, {},
                              [avals[k] for k in order], regions=regions, loc=loc)
            elif kind == "while_for":
                outs = b.emit(while_loop_p, [bounds[0]] + init, {},
                              [Aval((), I64)] + [avals[k] for k in order], regions=regions,
                              loc=loc)[1:]
            else:
                outs = b.emit(while_loop_p, init, {}, [avals[k] for k in order],
                              regions=regions, loc=loc)
            final = list(s0)
            for k, v in zip(order, outs):
                v.name = _hint(names[k])
                v._lg_weak = k in weak
                final[k] = v
            set_state(tuple(final))
            return dict(zip(order, outs))
        return {"grow": {}, "changed": "", "emit": emit, "test_traced": test_traced,
                "after": after}


class _FirstRecord(Exception):
    """A variable unbound (or None) before a loop is a record after its body: the loop is
    traced again carrying the record's leaves (records.flat_state)."""

    _lg_signal = True

    def __init__(self, name, record):
        super().__init__(name)
        self.name, self.record = name, record


# Note [Containers rebuilt by a loop body]
# Lists and dicts are not records (Note [Records in loop and branch state] in operators.py):
# a body changes them in place (`hs.append(h)`, `d["x"] = v`; Note [Containers in staged
# loops] in effects.py), and another name may see the change. A body that instead binds the
# variable to a new list or dict of the same structure at every step (`s = {"x": x + dt *
# dx, "y": ...}`, `state = [pos, vel]`) leaves the old object as it was: only the variable
# changes, as with a tuple. So when the body's trace ends with such a variable bound to a new
# container of the structure it had (the same keys in the same order, or the same length)
# and the old one unchanged (its items the same objects), the loop is traced again carrying
# that variable as a record: its leaves, a new container rebuilt from them at every step
# and after the loop. Before, the loop was unrolled: 1000 steps of a two-entry dict took
# 15.7 s to compile. A body that also changes the old container in place stays unrolled.
# Likewise a traced `if` whose paths leave a variable holding two lists or dicts of one
# structure (`if c: s = {"x": 2 * s["x"]}`) merges them leaf by leaf into a new one
# (records.split_merge): neither path can have changed the old one in place (Note [Python
# effects in staged code] in effects.py refuses it).
def _shallow(v) -> list | None:
    """A list's or dict's items by identity (to see whether a body changed it in place)."""
    nt = pytree.node_type(v)
    if nt is None or nt.kind not in ("list", "dict"):
        return None
    return [(k, id(x)) for k, x in v.items()] if nt.kind == "dict" else [id(x) for x in v]


def _rebuilt(old, new, shallow: list) -> bool:
    """Whether `new` replaces list or dict `old` with its structure, `old` unchanged."""
    return (type(new) is type(old) and _shallow(old) == shallow
            and pytree.flatten(new)[1] == pytree.flatten(old)[1])


class _Rebuilt(Exception):
    """A variable holding a list or dict is bound to a new one of its structure by the body:
    the loop is traced again carrying it as a record (Note [Containers rebuilt by a loop
    body])."""

    _lg_signal = True

    def __init__(self, name):
        super().__init__(name)
        self.name = name


class _Box:
    __slots__ = ("v",)

    def __init__(self):
        self.v = None


def _is_zero(v) -> bool:
    """Whether a lifted range bound is the constant 0."""
    op = v.op
    return op is not None and op.prim.name == "constant" and not op.params["value"].any()


def _in_scope(b, values) -> bool:
    """Whether values defined earlier are still visible (their region was not dropped)."""
    return all(b.home.get(v.id) is None or any(b.home[v.id] is r for r in b.regions)
               for v in values)


def _returned(names, state) -> bool:
    """Whether a branch ended with the function certainly returned (its return flag is True;
    See Note [Nothing runs after a return] in convert/jumps.py)."""
    return any(n.startswith("__lg_do_return") and v is True for n, v in zip(names, state))


def _relative_read(lst, pos):
    """`lst[pos]`, read relative to the end of a list a loop appends to: an item from before
    the loop that is not carried yet raises PoisonRead (relative), to carry it."""
    item = lst[pos]
    if isinstance(item, Poison):
        raise PoisonRead(object.__getattribute__(item, "buffer"), pos, relative=True)
    return item


def _int_bound(v, loc) -> Value:
    """A traced range bound as int64; Python's range refuses floats (no silent truncation)."""
    if v.aval.shape != () or v.aval.dtype.kind not in "iub":
        raise DTypeError(f"range() bounds must be integers, got a traced {aval_str(*v.aval)}",
                         loc=loc, fix="convert explicitly: range(int(n)) with an integer n, "
                         "or n.astype(np.int64)")
    return v if v.aval.dtype == I64 else ops.astype(v, I64)


def _index_use(e: ConcretizationError) -> str:
    """Why a loop whose body needs its index as a Python value is unrolled, naming the line
    of that use: a Python list indexed, a list of numbers given to numpy, or a shape
    (np.arange(i + 1), x[:i]: the arrays' shapes change from one iteration to the next, which
    one compiled loop cannot hold)."""
    at = f" at line {e.loc.line}" if getattr(e, "loc", None) is not None else ""
    if getattr(e, "what", "").startswith("use as an index"):
        return f"its body indexes a Python list with the loop index{at}"
    return (f"its body uses the loop index as a Python value{at} (as a shape or a size, e.g. "
            f"np.arange(i + 1), so its arrays change shape from one iteration to the next; or "
            f"in a list of numbers given to numpy, np.sum([i, 2]), where np.array([i, 2]) "
            f"keeps it traced)")


def _item_use(e: ConcretizationError) -> str:
    """Why a loop over arrays is unrolled (Note [Loops over numpy arrays])."""
    at = f" at line {e.loc.line}" if getattr(e, "loc", None) is not None else ""
    return f"its body uses an item of the array it iterates over as a Python value{at}"


def _cannot_unroll(what, loc, reason) -> LLGradError:
    """A loop that must be unrolled (Note [Unrolled loops]) but whose trip count is traced."""
    other = "use a for loop over a range of Python ints" if what == "while loop" else \
        "make the range bounds Python ints"
    return LLGradError(f"the {what} at {loc} must be unrolled ({reason}) but its trip count is "
                       f"traced", loc=loc,
                       fix="keep loop-carried values the same shape and dtype (preallocate the "
                       f"result and assign y[i] = ... in the loop), or {other}")


def _hint(name):
    return None if name.startswith("__lg_") or " " in name else name


def _truth(v) -> bool:
    return bool(v)


def _same_loc(a, b) -> bool:
    return (getattr(a, "file", None), getattr(a, "line", None)) == \
        (getattr(b, "file", None), getattr(b, "line", None))


STAGER = IRStager()
operators.register_stager(Value, STAGER)


def _same_value(a, b) -> bool:
    """Whether a name the loop state does not carry yet still holds its value after the body:
    a number equal to it, or a numpy array equal to it whole (`u, v = v, u` of two numpy work
    arrays: elementwise `==` has no truth value)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, np.ndarray):
        return a.shape == b.shape and a.dtype == b.dtype and bool(np.array_equal(a, b))
    return bool(a == b)
