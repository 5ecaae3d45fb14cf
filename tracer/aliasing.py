"""In-place updates of traced arrays and the other names that would see them.

Note [In-place updates are by value]
In numpy an in-place statement changes the array object, so every other name for it sees the
change: `z = y; z += 1`, `w = y; w[0] = a`, `v = y[:2]; v *= 3`, a helper that writes into its
argument. A traced array is an immutable IR value: the converted statement computes the new
value and rebinds only the name it writes (`operators.setitem` for element updates, the
`on_inplace` hook of `transform.builder.Value` for augmented assignment). Where
another live reference would have seen the write, the compiled function would silently compute
something else, so the update is refused instead: `check_unaliased` looks through the frames of
the function being traced (the user's function and the helpers it called, up to the trace's
entry), their names and the items of the lists, tuples and dicts those hold, for
another reference to the written array: the same object under another name or in a
caller, or an array the written one is a view of (numpy's basic indexing, reshape, transpose).
The error names the line and says to `.copy()` first.
A name may hold one of several arrays, known only at run time: the result of a traced `if`
or ternary is the array of the path taken (`z = y if c else y * 2`), a loop-carried value is
its first value and then what the previous iteration left (`a = b` at the end of the body
makes `a` the array `b` from the second iteration on). Builder.origins records these "may be"
edges (`may_be` follows them), and an update is refused when any path makes another live
name the same array; in a loop body, the updates are checked again once the body's end state
is known (`check_loop`).
A view taken earlier of the written array (`r = y[0]; y[0, 1] = a; f(r)`), or of the array
an earlier element update wrote into (`r = y[0]; y[1] = b; y[0] = a`: numpy's y is one array
throughout), counts where the parts overlap. Whether they do is decided while tracing where
the indices allow (static indices; `prev = Y[i - 1]; Y[i] = f(prev)`, the common case, never
overlaps), else tested at run time: a `check` op raises this refusal at the write's line for
the index values where they overlap (`r = Y[0]; Y[i] = v` when i is 0). See Note [Overlap
known at run time] in tracer/overlap.py.
"""
from __future__ import annotations

import sys

import numpy as np

from llgrad.runtime.errors import LLGradError, UnsupportedError, is_internal_file, user_loc
from llgrad.runtime.ops.control import check_p
from llgrad.runtime.ops.index import index_put_p
from llgrad.runtime.padded import Padded
from llgrad.runtime.prim import bind
from llgrad.tracer.convert.naming import PREFIX
from llgrad.tracer.overlap import copied_from, note_copied, overlap, overlap_numpy
from llgrad.transform import ir
from llgrad.transform.builder import current

_GENERATED = PREFIX  # converter-made names: never the user's references
_ENTRY_FILES = ("tracing.py", "dynamic.py")  # the trace's entry: the user's caller is beyond
_VIEW_PRIMS = frozenset({"reshape", "transpose", "squeeze", "expand_dims", "swapaxes"})


def may_be(v, stop=()) -> dict:
    """The values (by id) the traced `v` may be the same array as at run time, itself
    included, through Builder.origins (Note [In-place updates are by value]); the origins of
    values whose ids are in `stop` are not followed."""
    try:
        origins = current().origins
    except LLGradError:
        origins = {}
    todo, seen = [v], {}
    while todo:
        x = todo.pop()
        if isinstance(x, ir.Value) and x.id not in seen:
            seen[x.id] = x
            if x.id not in stop:
                todo.extend(origins.get(x.id, ()))
    return seen


def note_may_be(value, *sources) -> None:
    """Record that `value` may be any of the arrays `sources` at run time."""
    vs = tuple(s for s in sources if isinstance(s, ir.Value) and s is not value)
    if vs:
        origins = current().origins
        origins[value.id] = origins.get(value.id, ()) + vs


def _view_base(v):
    """The array `v` is a numpy view of (one step), or None."""
    if type(v) is Padded:  # a slice of run-time length, taken from `source`
        return v.source
    op = v.op if isinstance(v, ir.Value) else None
    if op is None:
        return None
    name = op.prim.name
    if name in _VIEW_PRIMS:
        return op.inputs[0]
    if name == "getitem" and v.aval.shape != () and (
            all(e[0] != "a" for e in op.params["key"]) or
            all(isinstance(i, ir.Value) and i.aval.shape == () for i in op.inputs[1:])):
        return op.inputs[0]  # basic indexing (no index arrays; ints, traced or not): a view
    return None


def _bases(v) -> list:
    out = []
    b = _view_base(v)
    while b is not None:
        out.append(b)
        b = _view_base(b)
    return out


class _Versions:
    """The arrays a written one may be (from may_be) and those that element updates made
    them from, found as far as asked: numpy's `y[i] = v` changes y's array, which llgrad's
    index_put leaves as it was, so a view taken before the update sees the updated array."""

    def __init__(self, same: dict):
        self.seen, self.todo = dict(same), list(same.values())

    def has(self, v) -> bool:
        while v.id not in self.seen and self.todo:
            self._step()
        return v.id in self.seen

    def all(self) -> dict:
        while self.todo:
            self._step()
        return self.seen

    def _step(self) -> None:
        x = self.todo.pop()
        if x.op is not None and x.op.prim is index_put_p:
            for i, m in may_be(x.op.inputs[0]).items():
                if i not in self.seen:
                    self.seen[i] = m
                    self.todo.append(m)


def _sees(value, target, index, versions: _Versions, written, copied: list):
    """Whether `value`, an earlier view of `target` (or of an array it may be, `versions`, or
    of a numpy array a version was copied from, `copied`), sees the part `target[index]`
    written: as overlap() answers (Note [Overlap known at run time]); False if it is no
    such view."""
    if isinstance(value, np.ndarray):
        arrays = [target] if isinstance(target, np.ndarray) else copied
        for a in arrays:
            if value is not a and np.may_share_memory(value, a) and (
                    written is None or a is not target):  # (else `_shares` decided it)
                return overlap_numpy(value, a, index)
        return False
    if not isinstance(value, (ir.Value, Padded)) or not isinstance(target, ir.Value):
        return False
    chain = _view_chain(value, target, versions)
    return False if chain is None else overlap(chain, target, index)


def _view_chain(view, target, versions: _Versions):
    """The ops (outermost first) taking the traced `view` from `target` or one of its
    `versions`, if it is a view of one; a Padded step stays itself."""
    chain, v = [], view
    while True:
        b = _view_base(v)
        if b is None:
            return None
        chain.append(v.op if isinstance(v, ir.Value) else v)
        if b is target or isinstance(b, ir.Value) and versions.has(b):
            return chain if b.aval.shape == target.aval.shape else [v]  # [v]: undecided
        v = b


def _shares(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether two numpy arrays share an element (bounded work; too hard counts as yes)."""
    if not np.may_share_memory(a, b):
        return False
    try:
        return bool(np.shares_memory(a, b, max_work=100_000))
    except Exception:  # numpy TooHardError (np.exceptions only from numpy 1.25)
        return True


def _user_frames(start):
    """The frames of the traced function and its helpers, innermost first."""
    f = start
    while f is not None:
        fn = f.f_code.co_filename
        if is_internal_file(fn):
            if fn.endswith(_ENTRY_FILES):
                return
        else:
            yield f
        f = f.f_back


_HELD = 256  # items of a list, tuple or dict looked at (Note [In-place updates are by value])


def _references(frame):
    """(name, value) for the user's locals of `frame` and the items of the lists, tuples and
    dicts they hold, two levels deep (`rs = [Y[0]]` holds a view of Y as `rs[0]`)."""
    for name, value in frame.f_locals.items():
        if not name.startswith(_GENERATED):
            yield from _held(name, value, 0)


def _held(name, value, depth):
    yield name, value
    if depth < 2 and type(value) in (list, tuple, dict) and len(value) <= _HELD:
        for k, v in value.items() if type(value) is dict else enumerate(value):
            yield from _held(f"{name}[{k!r}]", v, depth + 1)


def _same_variable(inner, outer, name) -> bool:
    """A closure cell shared by two frames (a converted branch or loop body and its function)."""
    return name in inner.f_code.co_freevars and (name in outer.f_code.co_cellvars or
                                                 name in outer.f_code.co_freevars)


def _written(target, index):
    """The part of a numpy `target` that `target[index] = ...` writes, or None if the index is
    not known before run time."""
    if index is None:
        return target
    try:
        return target[index]
    except Exception:  # a traced index
        return None


# Note [Writes into arguments]
# A compiled function receives its array arguments as traced values, so a write into one
# (`x[0] = v`, `x += 1`, `x[:2] *= 3`, through a view of it, in a loop over it, or in a helper
# it was passed to) would leave the caller's array unchanged where Python changes it. Such a
# write is refused at its line, with the fix to copy first; `check_unaliased` follows the
# written value through numpy views and loop-carried parameters (Builder.origins) to the
# parameters of the trace (Builder.arguments, filled by tracer/tracing.py). Python floats are
# immutable (`a += 1.0` rebinds), so they are not arguments here. Containers passed to the
# function (lists, dicts, dataclasses) are copies too: changing one is refused after the
# call (tracing.Arguments.check_unchanged), as is changing a static object, which the
# compiled code would not change again at later calls.
def _argument(target) -> tuple[str, bool] | None:
    """The path of the array argument that writing into `target` would write into, and
    whether `target` is a view of it."""
    try:
        b = current()
    except LLGradError:
        return None
    if not b.arguments:
        return None
    todo, seen = [(target, False)], set()
    while todo:
        v, view = todo.pop()
        if type(v) is Padded:
            todo.append((v.source, True))
            continue
        if not isinstance(v, ir.Value) or v.id in seen:
            continue
        seen.add(v.id)
        if v.id in b.arguments:
            return b.arguments[v.id], view
        base = _view_base(v)
        todo += [(origin, view) for origin in b.origins.get(v.id, ())]
        todo += [(base, True)] if base is not None else []
    return None


def check_unaliased(target, what: str, index=None) -> None:
    """Raise UnsupportedError if an in-place `what` on the array `target` (at `index`, for an
    element update) would, in numpy, be seen through another reference (Note [In-place
    updates are by value]), or would write into an argument (Note [Writes into
    arguments])."""
    same = may_be(target) if isinstance(target, ir.Value) else {}
    bases = [x for m in same.values() for x in _bases(m)] if same else _bases(target)
    written = _written(target, index) if isinstance(target, np.ndarray) else None
    versions = _Versions(same)
    copied = copied_from(target, versions) if same else []
    refs = []  # (frame, name, relation)
    pending: dict = {}  # view id -> (name, thunk emitting "it overlaps the write")
    frames = list(_user_frames(sys._getframe(1)))
    if isinstance(target, np.ndarray):
        note_copied(target, frames)
    found = _argument(target)
    if found is not None:
        arg, view = found
        names = [n for n, v in frames[0].f_locals.items() if v is target and not
                 n.startswith(_GENERATED)] if frames else []
        mine = next((n for n in names if n != arg), names[0] if names else None)
        name = mine or arg.split(".")[0].split("[")[0]
        where = f"{'a view of ' if view else ''}the argument `{arg}`" if mine in (None, arg) \
            else f"`{mine}`, {'a view of ' if view else 'which is '}the argument `{arg}`"
        raise UnsupportedError(
            f"in-place {what} of {where}: Python would change the caller's array, while a "
            f"compiled function works on a copy of its arguments", loc=user_loc(),
            fix=f"copy first: `{name} = {name}.copy()` (or compute the new value without "
            f"an in-place statement)")
    for f in frames:
        for name, value in _references(f):
            if value is target or isinstance(value, ir.Value) and same and \
                    not same.keys().isdisjoint(may_be(value)):
                rel = "same"
            elif any(value is b for b in bases):
                rel = "base"
            elif isinstance(written, np.ndarray) and isinstance(value, np.ndarray) and \
                    _shares(value, written):
                rel = "shares"
            elif (meets := _sees(value, target, index, versions, written, copied)) \
                    is not False:
                if meets is not True:  # known at run time: Note [Overlap known at run time]
                    pending.setdefault(id(value), (name, meets))
                    continue
                rel = "viewed"
            else:
                continue
            if any(g is not f and n == name and _same_variable(g, f, name) for g, n, _ in refs):
                continue  # one variable seen from a nested converted body and its function
            refs.append((f, name, rel))
    # The statement's own name must hold the array: `y[:2] *= 3` updates a temporary view
    # that the converter writes back into `y` (operators.setitem), as numpy would.
    if not any(f is frames[0] and rel == "same" for f, _, rel in refs):
        return
    mine = [n for f, n, rel in refs if f is frames[0] and rel == "same"]
    if len(refs) < 2:
        for name, meets in pending.values():
            why = f"the written part is seen through the earlier view `{name}` at this call's " \
                  "index values"
            bind(check_p, meets(), exc=UnsupportedError,
                 args=(str(_refusal(f"in-place {what} of `{mine[0]}`, but {why}")),))
        _log(target, mine, what)
        return
    others = {}
    for f, n, rel in refs:
        if not (f is frames[0] and rel == "same"):
            others.setdefault(rel, []).append(f"`{n}` (in {f.f_code.co_name})" if rel == "same"
                                              else f"`{n}`")
    what_of = f"`{mine[0]}`" if len(mine) == 1 else "an array bound to " + " and ".join(
        f"`{n}`" for n in mine)
    why = "; ".join({"same": "the same array is also ", "base": "it is a view of ",
                     "shares": "it shares memory with ",
                     "viewed": "the written part is seen through the earlier view "}[rel]
                    + ", ".join(names) for rel, names in others.items())
    raise _refusal(f"in-place {what} of {what_of}" + (f", but {why}" if why else ""))


def _refusal(what: str) -> UnsupportedError:
    """The error for an update others would see, `what` saying what it is and who sees it."""
    return UnsupportedError(
        what + ": numpy would change what every one of them sees, while llgrad's compiled "
        "code updates arrays by value and changes only the name written", loc=user_loc(),
        fix="copy the array before updating it (`y = y.copy()`), or compute the new value "
        "without an in-place statement (`y = y + ...`)")


def _log(target, names, what) -> None:
    """Keep an update in a staged loop body for `check_loop`."""
    try:
        log = current().inplace
    except LLGradError:
        return
    if log and isinstance(target, ir.Value):
        log[-1].append((target, names, what, user_loc()))


def check_loop(loc, log, carried, over=None) -> None:
    """After a staged loop body is traced, before its back edges are noted (`note_may_be`):
    refuse an update in it of an array that another live name holds in a later iteration
    (`for ...: a += 1; a = b`: `a` is `b`'s array from the second iteration on), or of the
    array the loop iterates over (`over`, one or a tuple of them (zip): Python reads each row
    from the updated array, the staged loop from the array as it was). `carried` is (names,
    params, inits, afters) of the carried variables and the body region. See Note [Arrays
    across iterations]."""
    names, params, inits, afters, body = carried
    flow = _Carried(params, inits, afters, body)
    slot = {n: k for k, n in enumerate(names)}
    frames = list(_user_frames(sys._getframe(1)))
    overs = [o for o in (over if isinstance(over, tuple) else (over,))
             if isinstance(o, ir.Value)]  # (zip: several)
    for target, mine, what, at in log:
        held, outside = flow.split(may_be(target, flow.index))
        if any(over.id in ids or any(b is over for b in _bases(v)) for over in overs
               for ids in [outside, *(flow.contents[x] for x in held)]
               for v in [flow.values.get(i) for i in ids] if v is not None):
            raise UnsupportedError(
                f"in-place {what} of `{mine[0]}` inside the loop at {loc}, which iterates over "
                f"it: Python reads each row from the updated array, while llgrad's compiled "
                f"loop reads the array as it was before the loop", loc=at,
                fix=f"iterate over a copy (`for row in {mine[0]}.copy():`), or over "
                f"`range(len({mine[0]}))` and index the array")
        for f in frames:
            for name, value in f.f_locals.items():
                if name in mine or name.startswith(_GENERATED) or not isinstance(value, ir.Value):
                    continue
                if not flow.later_alias(held, outside, slot.get(name), value):
                    continue
                raise UnsupportedError(
                    f"in-place {what} of `{mine[0]}` in the loop at {loc}: in a later "
                    f"iteration `{mine[0]}` may be the same array as `{name}` (numpy would "
                    "change both), while llgrad's compiled code updates arrays by value and "
                    "changes only the name written", loc=at,
                    fix=f"copy the array before updating it (`{mine[0]} = {mine[0]}.copy()`), "
                    f"or compute the new value without an in-place statement")


# Note [Arrays across iterations]
# An update in a loop body is by value; numpy's would be seen by every name that holds the
# same array in the same iteration. Within the traced iteration check_unaliased sees that;
# across iterations the carried variables pass arrays on (`a = b` hands b's array to a in the
# next iteration; `u, v = v, u` swaps two arrays, which never become one). `_Carried` follows
# that flow as a fixed point over the carried parameters: which pairs may hold one array in
# the same iteration (from the inits, then through the values the body leaves in each), and
# which other arrays (from outside the loop) each may hold. An update of a value derived from
# parameter x is refused when a name that holds parameter y in the next iteration may share
# its array (x == y, or the pair may alias), or holds an outside array x may hold.
class _Carried:
    """The arrays a loop's carried parameters hold across iterations (Note [Arrays across
    iterations])."""

    def __init__(self, params, inits, afters, body: ir.Region):
        self.index = {p.id: k for k, p in enumerate(params)}
        self.local = _defined_in(body)  # made anew in each iteration: not held across
        n = len(params)
        self.values: dict = {}
        init = [self.split(may_be(v)) for v in inits]
        after = [self.split(may_be(v, self.index)) for v in afters]
        made = [set(may_be(v, self.index)) & self.local for v in afters]  # this iteration's
        self.contents = [set(init[k][1]) for k in range(n)]  # outside arrays each may hold
        alias = {(k, l) for k in range(n) for l in range(n) if k != l
                 and self.contents[k] & self.contents[l]}
        changed = True
        while changed:
            changed = False
            for k in range(n):
                got = set(after[k][1]).union(*(self.contents[x] for x in after[k][0]))
                if not got <= self.contents[k]:
                    self.contents[k] |= got
                    changed = True
            for k in range(n):
                for l in range(n):
                    if k == l or (k, l) in alias:
                        continue
                    (pk, ok), (pl, ol) = after[k], after[l]
                    if (ok & ol or made[k] & made[l]
                            or any(x == y or (x, y) in alias for x in pk for y in pl)
                            or any(ol & self.contents[x] for x in pk)
                            or any(ok & self.contents[y] for y in pl)):
                        alias.add((k, l))
                        changed = True
        self.alias = alias

    def split(self, ids: dict) -> tuple[set, set]:
        """(carried parameter indices, ids of arrays from outside the loop) among `ids` (from
        may_be; the body's own values lead to the others through it)."""
        held, other = set(), set()
        for i, v in ids.items():
            if i in self.index:
                held.add(self.index[i])
            elif i not in self.local:
                other.add(i)
                self.values[i] = v
        return held, other

    def later_alias(self, held: set, outside: set, slot, value) -> bool:
        """Whether the array an update derived from parameters `held` (or arrays `outside`)
        writes may, in a later iteration, be the one a name holds: the name's carried slot
        `slot` (its value in the next iteration), else its `value` now."""
        if slot is not None:
            return any(x == slot or (x, slot) in self.alias for x in held) or \
                bool(outside & self.contents[slot])
        vh, vo = self.split(may_be(value, self.index))
        return any((x, y) in self.alias for x in held for y in vh) or \
            any(vo & self.contents[x] for x in held) or \
            any(outside & self.contents[y] for y in vh)


def _defined_in(region: ir.Region) -> set:
    """Ids of the values `region` and the regions inside it define (params included)."""
    out, todo = set(), [region]
    while todo:
        r = todo.pop()
        out.update(p.id for p in r.params)
        for op in r.ops:
            out.update(v.id for v in op.outputs)
            todo.extend(op.regions)
    return out
