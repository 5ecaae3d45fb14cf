"""Python containers a staged loop body changes: their entries and appended items become loop
state (Note [Containers in staged loops]); changes that cannot be staged are reported.

`Snapshot` (snapshot.py) finds the lists, dicts and objects' attribute dicts reachable from
a body's state and free variables and tells what the body changed in them. `LoopEffects`
keeps, for one staged loop, the places (entries, attributes) and list buffers found so far
and extends the loop's state with them (`wrap`), so the stager carries them like variables.
"""
from __future__ import annotations

import warnings
from contextlib import contextmanager

import numpy as np

from llgrad.runtime import ops, pytree
from llgrad.runtime.aval import Aval
from llgrad.runtime.errors import ConcretizationError, LLGradError, UnsupportedError, user_loc
from llgrad.runtime.padded import Padded
from llgrad.runtime.prim import is_value
from llgrad.tracer import operators
from llgrad.tracer.operators import Undefined
from llgrad.tracer.overlap import affine
from llgrad.tracer.snapshot import Snapshot, free_values

# Note [Containers in staged loops]
# A staged loop body is traced once for all its iterations, so a change it makes to a Python
# object that existed before the body (a list it appends to, a list or dict entry it
# replaces, an attribute it sets) would happen once instead of once per iteration. Before the
# body is traced, the lists, dicts and objects reachable from the loop state and from the
# body's free variables (closure cells, globals it names) are copied (shallowly); after it,
# they are compared with the copies and put back:
# - an entry or attribute replaced (`cell[i] = ...` with `i` a Python int of an inner Python
#   loop, `d["h"] = ...`, `obj.n += 1`) becomes a *place*: loop state like a variable (read
#   and written through `LoopEffects.wrap`), so records in it are flattened by `flat_state`
#   and numbers are carried weak (Note [Carried numbers]);
# - items appended to a list (`outs.append(h @ V)`) go to *list buffers*: one carried array
#   of shape (trip count, *item shape) per appended position and traced leaf, written at the
#   loop counter (`index_put`), as AutoGraph's TensorArrays (a leaf that is not traced is
#   the same immutable Python object at every iteration: `flags.append(1)` appends it).
#   After the loop the list holds slices of the buffers (`np.stack` of them is the buffer
#   again: transform/passes/simplify.py).
#   The list's items from before the loop are replaced by `Poison` while the body is traced,
#   except the last ones the body reads relative to the list's end, which are places:
#   `hs.append(f(hs[-1]))` carries the last item, `hs.append(hs[-1] + hs[-2])` the last two
#   (each iteration shifts them: `LastItem`). A read at the loop counter plus a constant,
#   when the counter advances by as many items as an iteration appends (`xs.append(0.9 *
#   xs[t - 1])` in `for t in range(1, T)`, one item a trip), stands at the same place in
#   every iteration's list, relative to its end (`LoopEffects.counter_read`): it is that
#   item (a carried one, or one appended earlier in this iteration). A read at a constant
#   index >= 0 (`xs[0]`, the initial condition) is the item from before the loop, the same
#   at every iteration (convert/calls.py routes reads at constant indices to
#   `IRStager.list_item`, which tells them apart: `xs[0]` read the carried last item when
#   the list had one item before the loop, a wrong value). Any other read of them (a slice,
#   an iteration) would see the wrong iteration, so it restarts the trace with the loop
#   unrolled (or is an error when the trip count is traced);
# - anything else (items removed or inserted, a list that shrinks, appends in a `while` loop
#   or a loop with `break`, whose trip count is not static) cannot be one loop op: the loop is
#   unrolled with a warning when its trip count is static, else it is an error naming the
#   line. Each round that finds new places or buffers traces the body again.


class NewEffects(Exception):
    """A body trace found places or buffers not yet in the loop state: trace it again."""

    _lg_signal = True  # Note [llgrad's exceptions pass user handlers] (operators.py)


class Poison:
    """An item of a list that the loop body appends to, from before the loop: reading it in
    the body would see the wrong iteration's list (Note [Containers in staged loops])."""

    __slots__ = ("buffer", "index")

    def __init__(self, buffer, index):
        object.__setattr__(self, "buffer", buffer)
        object.__setattr__(self, "index", index)

    def raise_(self, *args, **kwargs):
        get = object.__getattribute__
        raise PoisonRead(get(self, "buffer"), get(self, "index"))

    def __getattr__(self, attr):
        if attr.startswith("__"):
            raise AttributeError(attr)
        self.raise_()

    __bool__ = __iter__ = __len__ = __call__ = __getitem__ = __setitem__ = raise_
    __index__ = __int__ = __float__ = __neg__ = __pos__ = __abs__ = __invert__ = raise_
    __array__ = __array_ufunc__ = __array_function__ = raise_


for _op in ("add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "matmul", "lt", "le",
            "gt", "ge", "eq", "ne", "and", "or", "xor"):
    setattr(Poison, f"__{_op}__", Poison.raise_)
    setattr(Poison, f"__r{_op}__", Poison.raise_)
Poison.__hash__ = None  # type: ignore[assignment]


class PoisonRead(LLGradError):
    """The body read an item (index None: the length) of a list it appends to; `relative`:
    read at a place relative to the list's end (`hs[-1]`, `hs[t - 1]`)."""

    _lg_signal = True  # (the stager's, not the program's: operators.llgrads_own)

    def __init__(self, buffer, index, relative: bool = False):
        self.loc_read = user_loc()
        super().__init__(f"its body reads the list `{buffer.label}` it appends to (at "
                         f"{self.loc_read})", loc=self.loc_read)
        self.buffer, self.index, self.relative = buffer, index, relative


class Unstageable(LLGradError):
    """The body did something a loop op cannot repeat (`what`: the reason)."""

    _lg_signal = True


# -- places and buffers of one loop ------------------------------------------------------------
class Place:
    """An entry of a list or dict, or an attribute, carried as loop state."""

    def __init__(self, obj, kind, key, label):
        self.obj, self.kind, self.key, self.label = obj, kind, key, label

    def read(self):
        try:
            return getattr(self.obj, self.key) if self.kind == "attrs" else self.obj[self.key]
        except (AttributeError, KeyError, IndexError):
            return Undefined(self.label)

    def write(self, value) -> None:
        # (logged: a loop inside a traced branch changes the entry on one path only)
        operators._note_store(self.obj, ("attr" if self.kind == "attrs" else "item", self.key),
                              False)
        if type(value) is Undefined:
            if self.kind == "attrs":
                self.obj.__dict__.pop(self.key, None)
            elif self.kind == "dict":
                self.obj.pop(self.key, None)
            return
        if self.kind == "attrs":
            setattr(self.obj, self.key, value)
        else:
            self.obj[self.key] = value


class LastItem(Place):
    """The `back`-th last item of a list the body appends to, carried (`hs.append(f(hs[-1],
    hs[-2]))`): read as the list's `back`-th last item, written where that item stands
    before the loop."""

    def __init__(self, buf, back: int):
        super().__init__(buf.lst, "list", buf.n0 - back, f"{buf.label}[-{back}]")
        self.buf, self.back = buf, back

    def read(self):
        return self.obj[-self.back]


class Buffer:
    """The items a loop appends to one list: per appended position, a structure and one
    carried (trip count, *shape) array per leaf."""

    def __init__(self, lst, label, original, specs):
        self.lst, self.label, self.original = lst, label, original  # the items before
        self.n0 = len(original)
        self.specs = specs  # per position: (structure, [(aval, weak)] per leaf)
        self.carried = 0  # how many of the last items before the loop are carried

    def slots(self):
        """(position, leaf) of each carried array: a leaf that is not traced is the same
        immutable Python object at every iteration, kept as it is (`flags.append(1)`)."""
        return [(j, k) for j, (_, leaves) in enumerate(self.specs)
                for k, (aval, _) in enumerate(leaves) if aval is not None]


def _label(obj, names, values, fns) -> str:
    for n, v in zip(names, values):
        if v is obj:
            return n
    for fn in fns:
        fn = getattr(fn, "__func__", fn)
        code, cells = getattr(fn, "__code__", None), getattr(fn, "__closure__", None) or ()
        for n, c in zip(code.co_freevars if code else (), cells):
            try:
                if c.cell_contents is obj:
                    return n
            except ValueError:
                pass
    return f"a {type(obj).__name__}"


class LoopEffects:
    """The places and list buffers of one staged loop (Note [Containers in staged loops])."""

    def __init__(self, b, fns, trips):
        self.b, self.fns, self.trips = b, fns, trips  # trips: the static trip count or None
        self.places: list[Place] = []
        self.buffers: list[Buffer] = []
        self.unsupported: str | None = None
        self.index = None  # the buffer row of the iteration being traced
        self.counter = None  # (counter, first value or None, step) when trips is static
        self._init: dict = {}
        self.snap, self.real, self.lines = None, [], {}

    def wrap(self, get_state, set_state, names):
        """The loop state extended with the places and buffers found so far."""
        places = list(self.places)
        slots = [(buf, j, k) for buf in self.buffers for j, k in buf.slots()]
        current = {}

        def get():
            out = list(get_state()) + [p.read() for p in places]
            for buf, j, k in slots:
                v = current.get((id(buf), j, k))
                if v is None:
                    v = self._zeros(buf, j, k)
                elif len(buf.lst) > buf.n0 + j:  # after the body: the item appended
                    leaf = self._leaf(buf, j, k)
                    if leaf is not None:  # (else end() finds the new item type: again)
                        v = ops.setitem(v, self.index, leaf)
                out.append(v)
            return tuple(out)

        def set_(values):
            n = len(values) - len(places) - len(slots)
            set_state(tuple(values[:n]))
            for p, v in zip(places, values[n:]):
                p.write(v)
            for (buf, j, k), v in zip(slots, values[n + len(places):]):
                current[(id(buf), j, k)] = None if isinstance(v, Undefined) else v
        labels = [p.label for p in places] + [f"{buf.label}[{j}]" + (f".{k}" if k else "")
                                              for buf, j, k in slots]
        return get, set_, tuple(names) + tuple(labels)

    def _zeros(self, buf, j, k):
        (shape, dtype), _ = buf.specs[j][1][k]
        key = (id(buf), j, k, shape, dtype)
        if key not in self._init:
            zero = self.b.const(np.zeros((), dtype))
            self._init[key] = ops.broadcast_to(zero, (self.trips,) + tuple(shape))
        return self._init[key]

    def _leaf(self, buf, j, k):
        item = buf.lst[buf.n0 + j]
        leaves, struct = pytree.flatten(item)
        want_struct, specs = buf.specs[j]
        leaf = leaves[k] if struct == want_struct and len(leaves) == len(specs) else None
        t = _target(leaf)
        return leaf if t is not None and t[0] == specs[k][0] else None

    def begin(self, roots):
        """Before the body is traced: copy what it may change, poison the old items of the
        lists it appends to."""
        self.snap = Snapshot(list(roots) + free_values(self.fns))
        self.real, self.unsupported, self.lines = [], None, {}
        for buf in self.buffers:
            real = list(buf.lst)
            self.real.append((buf.lst, real))
            for i in range(buf.n0 - buf.carried):
                buf.lst[i] = Poison(buf, i)
            entry = self.snap.copies.get(id(buf.lst))
            if entry is not None:
                self.snap.copies[id(buf.lst)] = (buf.lst, "list", list(buf.lst))

    def counter_read(self, lst, index) -> int | None:
        """The position in `lst` (as the body sees it) of `lst[index]`, when `lst` is a list
        the body appends to and `index` the loop counter plus a constant that stands at the
        same place in every iteration (Note [Containers in staged loops]); else None."""
        buf = next((b for b in self.buffers if b.lst is lst), None)
        if buf is None or self.counter is None:
            return None
        counter, first, step = self.counter
        base, c = affine(index)
        c = c if base is counter else None
        if c is None or first is None or step != len(buf.specs):
            return None
        # At iteration k the list holds n0 + k * step items before this trip's, the body's
        # list n0 (standing for the last n0 of them) plus this trip's: the index, first +
        # k * step + c, is the body's position first + c, in range from the first trip on.
        pos = first + c
        return pos if 0 <= pos < len(lst) else None

    def note_len(self, obj) -> None:
        """`len(obj)` in the body: the length of a list the loop appends to is not known
        while the body is traced."""
        if self.snap is not None:
            for buf in self.buffers:
                if buf.lst is obj:
                    raise PoisonRead(buf, None)

    def note(self, obj, method, loc) -> None:
        """A mutating method called on `obj` in the body (converted code's calls)."""
        if self.snap is None or not self.snap.holds(obj):
            return  # made by the body
        self.lines.setdefault(id(obj), (method, loc))
        if isinstance(obj, np.ndarray):
            raise Unstageable(f"it changes a numpy array in place (`.{method}()` at {loc})")

    def end(self, names, before, after):
        """After the body: record what it changed (new places or buffers: NewEffects after
        putting everything back), and put the containers back as they were."""
        found, reasons = False, []
        covered = {(id(b), id(a)) for b, a in zip(before, after)}
        known = {(id(p.obj), p.key) for p in self.places}
        bufs = {id(buf.lst): buf for buf in self.buffers}
        for obj, kind, copy in self.snap.changes():
            label = _label(obj, names, before, self.fns)
            n_reasons = len(reasons)
            found |= self._diff(obj, kind, copy, label, covered, known, bufs, reasons)
            if len(reasons) > n_reasons and id(obj) in self.lines:  # where the body did it
                method, where = self.lines[id(obj)]
                reasons[n_reasons] += f" (`.{method}()` at {where})"
        self.abort()
        if reasons:
            self.unsupported = reasons[0]
        elif found:
            raise NewEffects()

    def _diff(self, obj, kind, copy, label, covered, known, bufs, reasons) -> bool:
        """What the body changed in one container: new places or buffers (True), or why
        it cannot be staged (appended to `reasons`)."""
        found = False
        if kind == "array":  # numpy's own in-place operator: done once, at trace time
            reasons.append(f"it changes the numpy array `{label}` in place")
            return False
        if kind == "set":
            reasons.append(f"it changes the set `{label}`")
            return False
        if kind == "list":
            buf = bufs.get(id(obj))
            n0 = len(copy)
            if len(obj) < n0:
                reasons.append(f"it removes items from the list `{label}`")
                return False
            for i in range(n0):
                if obj[i] is copy[i]:
                    continue
                if isinstance(copy[i], Poison):
                    reasons.append(f"it replaces an item of the list `{label}` it appends to")
                    return False
                if (id(obj), i) not in known and (id(copy[i]), id(obj[i])) not in covered:
                    self.places.append(Place(obj, "list", i, f"{label}[{i}]"))
                    known.add((id(obj), i))
                    found = True
            if len(obj) > n0:
                found |= self._appended(obj, label, copy, buf, reasons)
            return found
        now = obj if kind == "dict" else vars(obj)
        if any(k not in now for k in copy):
            reasons.append(f"it deletes {'keys' if kind == 'dict' else 'attributes'} of "
                           f"`{label}`")
            return False
        for key, v in now.items():
            if copy.get(key, Undefined) is v or (id(obj), key) in known or \
                    (id(copy.get(key)), id(v)) in covered:
                continue
            if kind == "dict" and key not in copy and is_value(key):  # (a new key each trace)
                reasons.append(f"it adds entries to the dict `{label}` under a traced key (the "
                               f"loop variable: one key per iteration)")
                return False
            text = f"{label}[{key!r}]" if kind == "dict" else f"{label}.{key}"
            self.places.append(Place(obj, kind, key, text))
            known.add((id(obj), key))
            found = True
        return found

    def abort(self) -> None:
        """Put the containers back as they were before the body."""
        if self.snap is not None:
            self.snap.restore()
            self.snap = None
        for lst, real in self.real:
            lst[:] = real
        self.real = []

    def carry_last(self, e: PoisonRead) -> bool:
        """After the body read an old item of a list it appends to relative to its end:
        carry the last items from it on (True, trace again); False for another read (the
        length, a slice, an iteration over it)."""
        buf = e.buffer
        if buf not in self.buffers or not e.relative or buf.n0 - e.index <= buf.carried:
            return False
        for back in range(buf.carried + 1, buf.n0 - e.index + 1):
            self.places.append(LastItem(buf, back))
        buf.carried = buf.n0 - e.index
        return True

    def _appended(self, lst, label, copy, buf, reasons) -> bool:
        """Items appended to `lst`: a new buffer (True), or checked against its buffer."""
        items = lst[len(copy):]
        if self.trips is None or self.index is None:
            reasons.append(f"it appends to the list `{label}` and its trip count is not "
                           f"static")
            return False
        specs = []
        for item in items:
            leaves, struct = pytree.flatten(item)
            targets = [(None, x) if isinstance(x, _IMMUTABLE) else _target(x) for x in leaves]
            if any(t is None for t in targets):
                bad = next(x for x, t in zip(leaves, targets) if t is None)
                what = ("an array whose shape changes across iterations (a slice of "
                        "loop-dependent length)" if type(bad) is Padded
                        else f"a {type(bad).__name__} object")
                reasons.append(f"it appends {what} to the list `{label}`")
                return False
            specs.append((struct, targets))
        if buf is not None:
            if specs == buf.specs:
                return False
            buf.specs = specs
            return True
        self.buffers.append(Buffer(lst, label, list(copy), specs))
        return True

    def finish(self, rows) -> None:
        """After the loop op: each list gets its appended items, slices of the buffers."""
        it = iter(rows)
        for buf in self.buffers:
            buf.lst[:] = buf.original  # (a carried last item was written at its place)
            outs = {slot: next(it) for slot in buf.slots()}
            for t in range(self.trips):
                for j, (struct, leaves) in enumerate(buf.specs):
                    vals = []
                    for k, (aval, weak) in enumerate(leaves):
                        if aval is None:  # the same Python object at every iteration
                            vals.append(weak)
                            continue
                        v = ops.getitem(outs[(j, k)], t)
                        v._lg_weak = weak
                        vals.append(v)
                    buf.lst.append(pytree.unflatten(struct, vals))

    def n_slots(self) -> int:
        return sum(len(buf.slots()) for buf in self.buffers)


_IMMUTABLE = (bool, int, float, complex, str, bytes, type(None), np.generic)


def _target(x):
    """(aval, weak) of an appended leaf: a traced value or a number; None otherwise."""
    from llgrad.tracer import merge
    if isinstance(x, np.ndarray):
        return Aval(x.shape, x.dtype), False
    return merge.target(x)


# Note [Python effects in staged code]
# Besides stores (`obj.a = v`, `lst[i] = v`: the store log of tracer/stores.py) converted
# code announces calls that change a Python object in place (`lst.append`, `d.update`,
# `s.add`, `a.fill`, ...: operators._MUTATORS), `len` and `print` (operators.note_call).
# In a traced `if` branch both branches run at trace time, so a change to an object that
# existed before the branch cannot be undone and merged: it is refused at its line (and a
# Snapshot of the reachable containers, compared after the branch, catches what converted
# code did not announce). In a staged loop body the Snapshot turns such changes into loop
# state (Note [Containers in staged loops]); an announced call only gives the message its
# line, and an in-place method on a numpy array that existed before the body makes the loop
# unroll. `len` of a list the loop appends to reads its length at trace time: the loop is
# unrolled. `print` runs once while tracing, printing traced values, as in JAX: a
# TracePrintWarning says so once per line.


class TracePrintWarning(UserWarning):
    """`print` in a staged loop body or a traced branch runs once, at trace time."""


_PRINTED: set = set()


def note_call(stager, kind, loc, obj, name) -> None:
    """A call announced by converted code inside a traced region (`kind`: "loop" or "if",
    at `loc`)."""
    where = user_loc()
    if name == "print":
        what = "staged loop" if kind == "loop" else "branch of the traced `if`"
        if where is None or (where.file, where.line) in _PRINTED:
            return  # once per line (a body is traced more than once)
        _PRINTED.add((where.file, where.line))
        warnings.warn_explicit(
            f"llgrad: print() in the {what} at {loc} runs once, while tracing (it prints "
            f"traced values, not numbers, and not once per iteration or only on the path "
            f"taken); call the function without llgrad to print its numbers",
            TracePrintWarning, where.file, where.line)
        return
    if name == "len":
        for eff in stager.loops:
            eff.note_len(obj)
        return
    if kind == "if" and stager.branches and stager.branches[-1].holds(obj):
        if isinstance(obj, (list, dict, set)) and not stager.loops:  # (a loop unrolls first)
            raise _length_in_branch(f"`.{name}()` on a {_kind(obj)}", _kind(obj), loc, where)
        _in_branch(stager, f"`.{name}()` changes a {_kind(obj)} in place inside a branch of "
                   f"the traced `if` at {loc}", where)
    if kind == "loop" and stager.loops:
        stager.loops[-1].note(obj, name, where)


@contextmanager
def branch(stager, state, fn, loc):
    """Around the trace of one branch of a traced `if`: refuse changes to Python containers
    that existed before it and that the store log did not undo (Note [Python effects in
    staged code])."""
    snap = Snapshot(list(state) + free_values((fn,)))
    stager.branches.append(snap)
    try:
        yield snap
    finally:
        stager.branches.pop()
    changed = next(snap.changes(), None)
    if changed is not None:
        snap.restore()
        if changed[1] in ("list", "dict", "set") and not stager.loops:
            raise _length_in_branch(f"a change to a {_kind(changed[0])} that existed before "
                                    f"it (its length or keys)", _kind(changed[0]), loc, loc)
        what = {"attrs": "its attributes", "array": "its contents"}.get(changed[1],
                                                                    "its length or keys")
        _in_branch(stager, f"a branch of the traced `if` at {loc} changes a "
                   f"{_kind(changed[0])} that existed before it ({what})", loc)


def _length_in_branch(what: str, kind: str, branch, loc) -> ConcretizationError:
    """A list (dict, set) growing or shrinking under a traced condition: its length would
    depend on the values, so the call takes the dynamic path, as a boolean mask's result does
    (Note [Boolean masks of data-dependent length])."""
    return ConcretizationError(
        f"{what} under the traced condition of the `if` at {branch} (written there, or after "
        f"a `break`, `continue` or `return` in it that skips the rest): the {kind}'s length "
        f"or items would depend on the traced condition", loc=loc,
        fix="keep every item and mask the ones the condition drops: np.where(cond, value, 0) "
        "for an `if`; for a `break`, multiply by the running product of the condition, e.g. "
        "keep = np.cumprod(x <= 1.5); np.sum(keep * np.exp(x))")


def key_in_one_branch(stager, label: str, side: str, loc) -> Exception:
    """A dict key set in one branch of a traced `if` only: whether the dict has it after the
    `if` depends on the condition (`key in d`, `len(d)`, `d.get(k, 0.0)` read that), so the
    call takes the dynamic path, as for a list appended to (inside a staged loop, the loop
    unrolls first: its condition may then be a Python value)."""
    what = f"{label} is set only in the {side} branch of the traced `if` at {loc}"
    if stager.loops:
        return Unstageable(f"{what}, so the dict's keys would depend on the condition")
    return ConcretizationError(
        f"{what}: whether the dict has this key after the `if` would depend on the traced "
        f"condition", loc=loc,
        fix=f"set {label} on both paths (e.g. {label} = 0.0 before the `if`, or in an "
        "`else`)")


def _in_branch(stager, what, loc):
    """A change a traced branch cannot make: inside a staged loop, a reason to unroll the
    loop (its condition may then be a Python value); else an error."""
    if stager.loops:
        raise Unstageable(f"{what}, which a traced branch cannot do")
    raise UnsupportedError(
        f"{what}: both branches are traced, so the change would happen whatever the "
        f"condition", loc=loc, fix="assign the value to a variable on both branches (or use "
        "np.where) and change the object after the `if`")


def _kind(obj) -> str:
    return "numpy array" if isinstance(obj, np.ndarray) else type(obj).__name__
