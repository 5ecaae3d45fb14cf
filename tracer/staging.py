"""The stager: how traced `if`/`for`/`while`/ternaries become cond/for_loop/while_loop ops.

Implements the protocol of tracer/operators.py for IR values (`transform.builder.Value`).
Branch and loop bodies are traced into regions; variables they change become the op's
results (loop-carried values). See Note [Static loops over traced state] in operators.py for
`for i in range(n)` with static bounds.
"""
from __future__ import annotations

import numpy as np

from llgrad.runtime import ops
from llgrad.runtime.aval import BOOL, F64, I64, Aval, aval_str
from llgrad.runtime.errors import ConcretizationError, LLGradError, ShapeError, user_loc
from llgrad.runtime.ops.control import cond_p, for_loop_p, while_loop_p
from llgrad.tracer import operators
from llgrad.tracer.operators import TracedRange, Undefined
from llgrad.transform import ir
from llgrad.transform.builder import Builder, Value, current


class Unroll(Exception):
    """Raised to restart a trace with the loop at `loc` unrolled (See Note [Unrolled loops])."""

    def __init__(self, loc, reason):
        super().__init__(reason)
        self.loc, self.reason = loc, reason


# Note [Unrolled loops]
# A loop whose carried values change shape or dtype across iterations, or whose body leaks
# traced values into Python containers (`hs.append(h)` then `np.stack(hs)`), cannot be one
# loop op. When its trip count is static, the trace restarts with that loop run as Python
# (unrolled), and llgrad warns once naming the line and the reason. A leak is noticed when a
# value defined inside a loop region is used outside it (Builder.check_scope).


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


def _scalar_aval(v):
    if isinstance(v, (bool, np.bool_)):
        return Aval((), BOOL)
    if isinstance(v, (int, np.integer)):
        return Aval((), I64)
    if isinstance(v, (float, np.floating)):
        return Aval((), F64)
    return None


def _lift_into(b: Builder, region: ir.Region, value, aval: Aval) -> Value:
    """`value` as a Value of `aval` usable in `region` (constants are emitted inside it)."""
    if _is_val(value):
        if value.aval.dtype != aval.dtype:
            b.regions.append(region)
            try:
                value = ops.astype(value, aval.dtype)
            finally:
                b.regions.pop()
        return value
    b.regions.append(region)
    try:
        if value is None:  # a placeholder (e.g. __lg_retval not yet set on this path)
            return b.const(np.zeros(aval.shape, aval.dtype))
        return b.const(np.broadcast_to(np.asarray(value, aval.dtype), aval.shape).copy())
    finally:
        b.regions.pop()


def _merge_aval(name, a, c, loc):
    """The aval both branch values take, or None when they can stay one Python value."""
    what = ("the value of a conditional expression (`a if c else b`, or `and`/`or` on a "
            "traced operand)") if name == "(value)" else f"variable `{name}`"
    if not _is_val(a) and not _is_val(c):
        if a is c:
            return None
        if isinstance(a, np.ndarray) and isinstance(c, np.ndarray):
            aa, ac = Aval(a.shape, a.dtype), Aval(c.shape, c.dtype)
            if aa != ac:
                raise ShapeError(f"{what} is {aval_str(*aa)} on one path of a traced "
                                 f"condition but {aval_str(*ac)} on the other", loc=loc,
                                 fix="give both branches the same shape and dtype")
            return aa
        sa, sc = _scalar_aval(a), _scalar_aval(c)
        if sa is not None and sc is not None:
            if type(a) is type(c) and a == c:
                return None
            return sa if sa.dtype == sc.dtype else Aval((), F64 if F64 in (sa.dtype, sc.dtype)
                                                       else I64)
        if a is None or c is None and name.startswith("__lg_"):
            return None
        raise LLGradError(f"{what} holds different Python objects on the two paths "
                          f"of a traced condition ({type(a).__name__} and {type(c).__name__})",
                          loc=loc, fix="make it an array on both paths, or compute it outside "
                          "the condition")
    if _is_val(a) and _is_val(c):
        if a.aval != c.aval:
            raise ShapeError(f"{what} is {aval_str(*a.aval)} on one path of a traced "
                             f"condition but {aval_str(*c.aval)} on the other", loc=loc,
                             fix="give both branches the same shape and dtype (cast with "
                             ".astype or broadcast explicitly)")
        return None if a is c else a.aval
    v, other = (a, c) if _is_val(a) else (c, a)
    if other is None or _scalar_aval(other) is not None:
        return v.aval
    if isinstance(other, np.ndarray):  # e.g. a buffer written on one path only
        if (other.shape, other.dtype) != (v.aval.shape, v.aval.dtype):
            raise ShapeError(f"{what} is {aval_str(*v.aval)} on one path of a traced "
                             f"condition but {aval_str(other.shape, other.dtype)} on the other",
                             loc=loc, fix="give both branches the same shape and dtype")
        return v.aval
    raise LLGradError(f"{what} is an array on one path of a traced condition and a "
                      f"{type(other).__name__} on the other", loc=loc,
                      fix="assign an array of the same shape on both paths")


class IRStager:
    """Stages control flow on IR values into cond/for_loop/while_loop ops."""

    def __init__(self):
        self.unroll: set = set()  # (loc, reason) of loops run as Python (Note [Unrolled loops])
        self.copies: dict = {}  # (file, line) of an unrolled loop -> body copies traced
        self.region_locs: dict = {}  # id(region) -> ("loop" | "if", loc), for scope errors

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
    def stage_if(self, cond, body_fn, orelse_fn, get_state, set_state, names, loc):
        b = current()
        if getattr(b, "eager", False):
            return body_fn() if _truth(cond) else orelse_fn()
        pred = _pred(b, cond, loc)
        s0 = get_state()
        branches = []
        for fn in (body_fn, orelse_fn):
            set_state(s0)
            with b.open_region() as r:
                self.region_locs[id(r)] = ("if", loc)
                fn()
                branches.append((r, get_state()))
        (rt, st), (re, se) = branches
        final, outs = list(s0), []
        for k, name in enumerate(names):
            a, c = st[k], se[k]
            ua, uc = isinstance(a, Undefined), isinstance(c, Undefined)
            if ua or uc:
                if name == "__lg_retval" or name.startswith("__lg_"):
                    a, c = (None if ua else a), (None if uc else c)
                elif ua and uc:
                    final[k] = a
                    continue
                else:
                    final[k] = Undefined(name, f"assigned only in the "
                                         f"{'false' if ua else 'true'} branch of the `if` at "
                                         f"{loc}")
                    continue
            aval = _merge_aval(name, a, c, loc)
            if aval is None:
                final[k] = a if a is not None else c
                continue
            rt.results.append(_lift_into(b, rt, a, aval))
            re.results.append(_lift_into(b, re, c, aval))
            outs.append((k, aval))
        values = b.emit(cond_p, [pred], {}, [a for _, a in outs], regions=[rt, re], loc=loc)
        for (k, _), v in zip(outs, values):
            v.name = names[k] if not names[k].startswith("__lg_") else None
            final[k] = v
        set_state(tuple(final))

    def stage_if_exp(self, cond, true_fn, false_fn, loc):
        if self.eager():
            return true_fn() if _truth(cond) else false_fn()
        loc = loc or user_loc()  # `and`/`or` pass none: the user's line is the caller's
        box = [None]
        self.stage_if(cond, lambda: box.__setitem__(0, true_fn()),
                      lambda: box.__setitem__(0, false_fn()),
                      lambda: (box[0],), lambda s: box.__setitem__(0, s[0]), ("(value)",), loc)
        return box[0]

    def stage_not(self, value, loc):
        if self.eager():
            return not _truth(value)
        return ops.logical_not(_pred(current(), value, loc))

    def stage_setitem(self, target, index, value):
        if isinstance(target, np.ndarray):  # a copy: the user's array is never written
            target = current().const(np.array(target))
        return ops.setitem(target, index, value)

    def in_region(self) -> bool:
        """True while a branch or loop body is traced (See operators._region_stager)."""
        try:
            return len(current().regions) > 1
        except LLGradError:
            return False

    # -- loops ----------------------------------------------------------------------------
    def stage_for(self, iterable, extra_test, body_fn, get_state, set_state, names, loc):
        b = current()
        if getattr(b, "eager", False):
            if isinstance(iterable, (range, TracedRange)):
                rng = range(*(int(v) for v in (iterable.start, iterable.stop, iterable.step)))
                return self._run_python(rng, None, extra_test, body_fn)
            return self._run_python(range(len(iterable)), iterable, extra_test, body_fn)
        if isinstance(iterable, (range, TracedRange)):
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
        if self._wants_unroll(loc):
            if not static:
                raise _cannot_unroll("loop", loc, self._reason(loc))
            key = (loc.file, loc.line)
            self.copies[key] = self.copies.get(key, 0) + len(range(start, stop, step))
            return self._run_python(range(start, stop, step), item, extra_test, body_fn)
        start_v, stop_v = b.lift(np.int64(start) if not _is_val(start) else start), \
            b.lift(np.int64(stop) if not _is_val(stop) else stop)
        start_v = start_v if start_v.aval.dtype == I64 else ops.astype(start_v, I64)
        stop_v = stop_v if stop_v.aval.dtype == I64 else ops.astype(stop_v, I64)

        def body(i):
            body_fn(i if item is None else ops.getitem(item, i))

        may_skip = not static or len(range(int(start), int(stop), int(step))) == 0
        kind = "for" if extra_test is None else "while_for"
        try:
            self._loop(b, loc, names, get_state, set_state, static, kind=kind,
                       bounds=(start_v, stop_v, int(step)), body=body, test=extra_test,
                       may_skip=may_skip)
        except ConcretizationError as e:
            # See Note [Unrolled loops]: the body needs an integer as a Python value (the
            # index of a Python list, a shape): with a static trip count, unroll the loop.
            v = getattr(e, "value", None)
            if not static or v is None or v.aval.dtype.kind not in "iub":
                raise
            reason = "its body uses the loop index as a Python value (e.g. to index a list)"
            self.unroll.add((loc, reason))
            raise Unroll(loc, reason) from None

    def stage_while(self, test_fn, body_fn, get_state, set_state, names, loc):
        if self.eager():
            while _truth(test_fn()):
                body_fn()
            return
        if self._wants_unroll(loc):
            raise _cannot_unroll("while loop", loc, self._reason(loc))
        self._loop(current(), loc, names, get_state, set_state, False, kind="while",
                   body=lambda: body_fn(), test=test_fn, may_skip=True)

    def _wants_unroll(self, loc) -> bool:
        return any(_same_loc(loc, u) for u, _ in self.unroll)

    def _reason(self, loc) -> str:
        return next(r for u, r in self.unroll if _same_loc(loc, u))

    def _run_python(self, rng, item, extra_test, body_fn):
        for i in rng:
            if extra_test is not None and not _truth(extra_test()):
                return
            body_fn(i if item is None else item[i])

    def _loop(self, b, loc, names, get_state, set_state, static, kind, body, test=None,
              bounds=None, may_skip=False):
        s0 = list(get_state())
        carried = {k for k, v in enumerate(s0) if _is_val(v)}
        avals = {k: s0[k].aval for k in carried}
        for _attempt in range(len(names) + 2):
            region_ops = self._trace_loop(b, loc, names, s0, carried, avals, get_state,
                                          set_state, kind, body, test, bounds)
            grown = region_ops["grow"]
            changed = region_ops["changed"]
            if changed:
                reason = f"it changes {changed} across iterations"
                if static:
                    self.unroll.add((loc, reason))
                    raise Unroll(loc, reason)
                raise _cannot_unroll("while loop" if kind == "while" else "loop", loc, reason)
            if not grown:
                break
            for k, aval in grown.items():
                carried.add(k)
                avals[k] = aval
        else:  # pragma: no cover - the carried set only grows, so this terminates
            raise LLGradError("could not determine the loop-carried values", loc=loc)
        region_ops["emit"]()
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

    def _trace_loop(self, b, loc, names, s0, carried, avals, get_state, set_state, kind,
                    body, test, bounds):
        order = sorted(carried)
        init = [_lift_outer(b, s0[k], avals[k]) for k in order]

        def state_from(params):
            st = list(s0)
            for k, p in zip(order, params):
                st[k] = p
            return st

        regions = []
        i_param = b.new_value(((), I64), "i") if kind != "while" else None
        cparams = [b.new_value(avals[k], _hint(names[k])) for k in order]
        if kind in ("while", "while_for"):
            cond_params = ([b.new_value(((), I64), "i")] if kind == "while_for" else []) + \
                [b.new_value(avals[k], _hint(names[k])) for k in order]
            with b.open_region(cond_params) as rc:
                set_state(state_from(cond_params[1:] if kind == "while_for" else cond_params))
                ok = _pred(b, test(), loc)
                if kind == "while_for":
                    i = cond_params[0]
                    in_range = ops.lt(i, bounds[1]) if bounds[2] > 0 else ops.gt(i, bounds[1])
                    ok = ops.logical_and(in_range, ok)
                rc.results = [ok]
            regions.append(rc)
        body_params = ([i_param] if kind != "while" else []) + cparams
        with b.open_region(body_params) as rb:
            self.region_locs[id(rb)] = ("loop", loc)
            set_state(state_from(cparams))
            body(i_param) if kind != "while" else body()
            after = list(get_state())
        grow, changed = {}, ""
        for k, name in enumerate(names):
            v = after[k]
            if k in carried:
                if isinstance(v, Undefined):
                    changed = changed or f"`{name}` (deleted in the body)"
                    continue
                if _is_val(v) and v.aval != avals[k]:
                    changed = changed or (f"the shape/dtype of `{name}` from "
                                          f"{aval_str(*avals[k])} to {aval_str(*v.aval)}")
                elif not _is_val(v) and _scalar_aval(v) is None:
                    changed = changed or f"`{name}` into a {type(v).__name__}"
            elif v is not s0[k] and not isinstance(v, Undefined):
                if _is_val(v):
                    grow[k] = v.aval
                elif _scalar_aval(v) is not None and not (type(v) is type(s0[k]) and v == s0[k]):
                    grow[k] = _scalar_aval(v)
                elif _scalar_aval(v) is None and not name.startswith("__lg_"):
                    changed = changed or f"`{name}` into a new {type(v).__name__} object"
        if grow or changed:
            set_state(s0)
            return {"grow": grow, "changed": changed, "emit": None}
        nxt = [_lift_into(b, rb, after[k], avals[k]) for k in order]
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
                final[k] = v
            set_state(tuple(final))
        return {"grow": {}, "changed": "", "emit": emit}


def _cannot_unroll(what, loc, reason) -> LLGradError:
    """A loop that must be unrolled (Note [Unrolled loops]) but whose trip count is traced."""
    other = "use a for loop over a range of Python ints" if what == "while loop" else \
        "make the range bounds Python ints"
    return LLGradError(f"the {what} at {loc} must be unrolled ({reason}) but its trip count is "
                       f"traced", loc=loc,
                       fix="keep loop-carried values the same shape and dtype (preallocate the "
                       f"result and assign y[i] = ... in the loop), or {other}")


def _hint(name):
    return None if name.startswith("__lg_") else name


def _lift_outer(b, v, aval):
    if _is_val(v):
        return v if v.aval.dtype == aval.dtype else ops.astype(v, aval.dtype)
    if isinstance(v, Undefined) or v is None:
        return b.const(np.zeros(aval.shape, aval.dtype))
    return b.const(np.broadcast_to(np.asarray(v, aval.dtype), aval.shape).copy())


def _truth(v) -> bool:
    return bool(v)


def _same_loc(a, b) -> bool:
    return (getattr(a, "file", None), getattr(a, "line", None)) == \
        (getattr(b, "file", None), getattr(b, "line", None))


STAGER = IRStager()
operators.register_stager(Value, STAGER)
