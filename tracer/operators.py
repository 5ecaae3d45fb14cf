"""Run-time operators called by converted code: run as Python, or hand over to a stager.

Every operator first asks whether a deciding value (condition, iterable, loop test) is a
*traced* value. If not, it runs exactly what the original statement would (same results, same
side effects, same exceptions, same evaluation order). If it is, it calls the stager
registered for that value's class. Converted code never tests for traced values itself.

Staging protocol (implemented by the tracing layer; see tests/tracer/fake_tracer.py)
---------------------------------------------------------------------------------
``register_stager(cls, stager)`` declares instances of ``cls`` (and subclasses) traced;
``stager`` implements:

    stage_if(cond, body_fn, orelse_fn, get_state, set_state, symbol_names, nouts, loc) -> None
    stage_for(iterable, extra_test, body_fn, get_state, set_state, symbol_names, loc) -> None
    stage_while(test_fn, body_fn, get_state, set_state, symbol_names, loc) -> None
    stage_if_exp(cond, true_fn, false_fn, loc) -> value
    stage_not(value, loc) -> value
    stage_setitem(target, index, value) -> new target value
    branch_loc() -> loc   (optional) the traced `if` whose branch is being traced, or None
    note_store(obj, key, delete)  (optional) before a store into a Python object: key is
                          ("attr", name) or ("item", index) (See Note [Stores in traced
                          branches] in tracer/stores.py)
    note_call(obj, name)  (optional) before a call of an in-place method on obj (name in
                          _MUTATORS), `len(obj)` or `print` (obj None) (See Note [Python
                          effects in staged code] in tracer/effects.py)
    stage_raise(make, loc) -> exception   (optional) for ``raise make()``: the exception
                          to raise now, or (under a traced condition) a compiled check
                          (Note [Raise under a traced condition] in tracer/checks.py)
    stage_ufunc_at(ufunc, target, index, value) -> new target value   (optional)
    in_region() -> bool   (optional) True while tracing a branch or loop body
    eager() -> bool       (optional) True when traced values are concrete (the dynamic
                          path): control flow runs as Python; fences are off

State: ``symbol_names`` is a tuple of the variable names the statement may change (for loops:
those loop-carried or read after the loop). ``get_state()`` returns their current values as a
tuple in that order; ``set_state(values)`` rebinds them. Body functions take no argument
(``body_fn(item)`` for ``for``), and change state by assignment. For ``if``, the names are
every name the branches bind; only the first ``nouts`` are outputs, used after the
statement; the rest must only be reset between the branches (See Note [Each branch starts
from the state before the if] in convert/control_flow.py). A stager typically: saves
``s0 = get_state()``, traces ``body_fn()``, reads ``get_state()``, restores
``set_state(s0)``, traces ``orelse_fn()``, reads ``get_state()``, builds the region op from
the outputs, and finally ``set_state(results)``, where a non-output is ``Undefined`` unless
both branches left the same object. Returning normally means results were delivered.

Rules for values in the state:
- ``Undefined(name)`` marks a variable unbound on entry or in one branch. For user names,
  deliver ``Undefined(name, reason)`` (reason e.g. "assigned only in the true branch of the
  `if` at f.py:3") so any later use raises a clear error.
- Names starting with ``__lg_`` are generated: ``__lg_do_return``/``__lg_break*``/
  ``__lg_continue*`` are Python bools that may differ per branch (promote to traced bools);
  ``__lg_retval`` may be ``None`` (not yet returned) in one branch: it is only read where
  ``__lg_do_return`` is true, so a placeholder of the other branch's type is correct.
- ``loc`` is a ``SourceLoc`` (file, line, column, function) of the user's statement.
- for: ``iterable`` is a traced array (iterate over axis 0), a ``TracedRange`` (start, stop,
  step; any may be traced ints) or a stageable ``Zipped`` (zip/enumerate of traced arrays
  and ranges: item i is ``iterable[i]``). ``extra_test`` is ``None`` or a no-argument
  function checked before each iteration (from break/return); the loop stops when it is false.
- while: ``test_fn`` has been called once already to decide to stage; call it as needed.
- A Python loop whose break/return flag becomes traced runs its remaining iterations under
  ``stage_if`` (one per item); a Python ``while`` whose test becomes traced is staged from
  the current state on (earlier iterations stay unrolled).
- Optional: ``stage_python_while(test_fn, body_fn, get_state, set_state, symbol_names, loc,
  optional) -> bool`` for a ``while`` whose test is a Python value (just found true) while its
  state holds a traced value (or, ``optional``, its body reads one): True when it staged the
  rest of the loop, False to have it run as Python (See Note [Python while loops over traced
  state]). ``stage_for`` gets ``optional=True`` for a loop over a Python range whose state is
  plain Python but whose body reads a traced value; it returns False to have the loop run as
  Python (Note [Static loops over traced state]).
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import math
import operator
import sys
import threading
import types
from operator import iand, ilshift, ior, irshift, ixor  # noqa: F401  (see updates.py)
from typing import Any, Callable, Protocol, Sequence

import numpy as np

from llgrad.runtime import pytree
from llgrad.runtime.errors import (ConcretizationError, DTypeError, IndexingError, LinAlgError,
                                   LLGradError, OutOfMemoryError, ShapeError,
                                   UnsupportedError, user_loc)

from . import captures, checkpointed
from .ode import calls_user_functions
from .traced_builtins import (SHAPED, STACKED_MIN, Zipped, stacked_items, static_shape,
                              traced_builtins)
from .convert.cells import OWNED
from .convert.errors import SourceLoc, UnsupportedSyntaxError  # noqa: F401


class Stager(Protocol):
    def stage_if(self, cond, body_fn, orelse_fn, get_state, set_state, symbol_names, nouts,
                 loc) -> None: ...
    def stage_for(self, iterable, extra_test, body_fn, get_state, set_state, symbol_names,
                  loc) -> None: ...
    def stage_while(self, test_fn, body_fn, get_state, set_state, symbol_names,
                    loc) -> None: ...
    def stage_if_exp(self, cond, true_fn, false_fn, loc) -> Any: ...
    def stage_not(self, value, loc) -> Any: ...
    def stage_setitem(self, target, index, value) -> Any: ...


_STAGERS: dict[type, Stager] = {}


def register_stager(cls: type, stager: Stager) -> None:
    """Declare instances of ``cls`` traced, staged by ``stager``."""
    _STAGERS[cls] = stager


def unregister_stager(cls: type) -> None:
    _STAGERS.pop(cls, None)


def stager_of(x: Any) -> Stager | None:
    """The stager of ``x`` if it is a traced value, else None."""
    if not _STAGERS:
        return None
    for klass in type(x).__mro__:
        s = _STAGERS.get(klass)
        if s is not None:
            return s
    return None


def is_traced(x: Any) -> bool:
    return stager_of(x) is not None


UNKNOWN = object()  # note_item's object when naming it again would repeat a call


# -- undefined variables -------------------------------------------------------------------
class Undefined:
    """The value of a variable that may be unbound here; any use raises UnboundLocalError."""

    __slots__ = ("name", "reason")

    def __init__(self, name: str, reason: str | None = None):
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "reason", reason)

    def raise_(self, *args, **kwargs):
        name = object.__getattribute__(self, "name")
        reason = object.__getattribute__(self, "reason")
        if reason is None:
            raise UnboundLocalError(
                f"cannot access local variable '{name}' where it is not associated with a value")
        raise UnboundLocalError(f"variable '{name}' is {reason}; it is undefined here.\n"
                                f"  Fix: assign '{name}' before the statement, or on every path")

    def __repr__(self):
        return f"Undefined({object.__getattribute__(self, 'name')!r})"

    def __getattr__(self, attr):
        if attr.startswith("__"):  # protocol probes (copy, pickle, numpy) see no attribute
            raise AttributeError(attr)
        self.raise_()

    __bool__ = __iter__ = __len__ = __call__ = __getitem__ = __setitem__ = raise_
    __index__ = __int__ = __float__ = __neg__ = __pos__ = __abs__ = __invert__ = raise_
    __array__ = __array_ufunc__ = __array_function__ = raise_


for _op in ("add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "matmul", "and", "or",
            "xor", "lshift", "rshift", "lt", "le", "gt", "ge", "eq", "ne"):
    setattr(Undefined, f"__{_op}__", Undefined.raise_)
    setattr(Undefined, f"__r{_op}__", Undefined.raise_)
Undefined.__hash__ = None  # type: ignore[assignment]


def ldu(load: Callable[[], Any], name: str) -> Any:
    """``load()``, or ``Undefined(name)`` if the variable (or attribute ``s.t``) is unbound."""
    try:
        return load()
    except (NameError, AttributeError, UnboundLocalError):
        return Undefined(name)


def setattr_(obj, attr: str, value) -> None:
    """``obj.attr = value`` from a set_state (Note [Attributes in control-flow state] in
    convert/control_flow.py); an Undefined value removes the attribute again."""
    if type(obj) is Undefined:
        return
    if type(value) is Undefined:
        if hasattr(obj, attr):
            delattr(obj, attr)
        return
    if getattr(obj, attr, _MISSING) is not value:
        setattr(obj, attr, value)


_MISSING = object()


def retval(value: Any) -> Any:
    """A returned value that may read an unbound variable: raise as Python would."""
    _check_defined(value if type(value) in (tuple, list) else (value,))
    return value


def _check_defined(values) -> None:
    for v in values:
        if type(v) is Undefined:
            v.raise_()


# -- control flow --------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class TracedRange:
    """``range(start, stop, step)`` with at least one traced bound."""

    start: Any
    stop: Any
    step: Any = 1

    def traced_bound(self) -> Any:
        return next(b for b in (self.start, self.stop, self.step) if is_traced(b))


def range_(*args) -> range | TracedRange:
    """``range(*args)``, or a TracedRange if a bound is traced (a staged loop reads it)."""
    if any(is_traced(a) for a in args):
        if len(args) == 1:
            return TracedRange(0, args[0], 1)
        return TracedRange(*args)
    return range(*args)


def reversed_range_(*args) -> range | TracedRange:
    """``reversed(range(*args))`` as a range (a staged loop reads its bounds): the last
    element of range(a, b, s) counting down to a, by -s."""
    r = range_(*args)
    if type(r) is range:
        return r[::-1]
    start, stop, step = r.start, r.stop, int(r.step)  # a traced step: the dynamic path
    if step == 0:
        return r  # refused by the stager, as range() is
    sign = 1 if step > 0 else -1
    last = stop - sign if abs(step) == 1 else start + (stop - start - sign) // step * step
    return TracedRange(last, start - step, -step)


def if_stmt(cond, body_fn, orelse_fn, get_state, set_state, symbol_names: Sequence[str],
            nouts: int, loc: SourceLoc) -> None:
    stager = stager_of(cond)
    if stager is not None:
        stager.stage_if(cond, body_fn, orelse_fn or _no_op, get_state, set_state,
                        tuple(symbol_names), nouts, loc)
    elif cond:
        body_fn()
    elif orelse_fn is not None:
        orelse_fn()


def for_stmt(iterable, extra_test, body_fn, get_state, set_state, symbol_names: Sequence[str],
             loc: SourceLoc) -> None:
    iterable = checkpointed.unwrap(iterable, loc)
    if type(iterable) in (list, tuple) and _STAGERS and len(iterable) >= STACKED_MIN:
        first = pytree.tree_leaves(iterable[0])  # Note [Loops over lists of traced values]
        s = stager_of(first[0]) if first else None
        stacked = s is not None and not s.eager() and not s.wants_unroll(loc) and \
            stacked_items(iterable)
        if stacked:
            s.stage_for(stacked, extra_test, body_fn, get_state, set_state,
                        tuple(symbol_names), loc)
            _left_alone(iterable, stacked.items, s, loc)
            return
    stager = stager_of(iterable)
    if stager is None and isinstance(iterable, TracedRange):
        stager = stager_of(iterable.traced_bound())
    zipped = isinstance(iterable, Zipped) and iterable.stageable
    if stager is None and zipped:
        stager = next(filter(None, map(stager_of, iterable.arrays)), None)
    if stager is not None:
        stager.stage_for(iterable, extra_test, body_fn, get_state, set_state,
                         tuple(symbol_names), loc)
        return
    if type(iterable) is range and _STAGERS:
        return _static_range(iterable, extra_test, body_fn, get_state, set_state,
                             tuple(symbol_names), loc)
    if _STAGERS and (zipped and iterable.length > 1 or type(iterable) is np.ndarray and
                     iterable.ndim and len(iterable) > 1 and iterable.dtype.kind in "biuf"):
        # Note [Loops over numpy arrays] (staging.py): staged as a loop over a Python range
        stager = _state_stager(get_state)
        optional = stager is None
        stager = stager or _reads_stager((body_fn, extra_test))
        if stager is not None and stager.stage_for(
                iterable, extra_test, body_fn, get_state, set_state, tuple(symbol_names), loc,
                optional=optional) is not False:
            return
    it = iter(iterable)
    while True:
        if extra_test is not None:
            test = extra_test()
            if is_traced(test):  # See the module docstring: the rest runs under stage_if.
                _guarded_rest(test, it, extra_test, body_fn, get_state, set_state,
                              symbol_names, loc)
                return
            if not test:
                return
        try:
            item = next(it)
        except StopIteration:
            return
        body_fn(item)


def _left_alone(items: list, before: list, stager, loc) -> None:
    """Check that the staged loop over `items` stacked left the list alone: Python's
    iteration sees items the body replaces or appends, the items stacked before the loop do
    not (Note [Loops over lists of traced values]); such a loop is unrolled instead."""
    if len(items) != len(before) or any(a is not b for a, b in zip(items, before)):
        stager.unroll_loop(loc, "its body changes the list it iterates over")


# Note [Static loops over traced state]
# `for i in range(n)` with a Python n is staged as one loop op from its first iteration when
# it will carry traced values: its state (the names it changes that are live at its head)
# holds a traced value, or its body reads one from outside (a closure cell or argument: `acc
# = 0.0; for i in ...: acc += x[i]`, where the stager then carries `acc` as a weak value,
# Note [Carried numbers]). Nothing is run first to find out, so a nest of loops stages as a
# nest of loop ops, each traced once per trace of its parent. A loop staged only because its
# body reads traced values may still be declined by the stager (`stage_for(..., optional=
# True)` returns False): when nothing ends up carried (a shape-building loop reading
# `x.shape`), or the body needs its index as a Python value. Then it runs as Python, and
# if an iteration leaves a traced value in the state, the rest is staged (the iterations
# already run stay unrolled, exactly as Python ran them).
def _static_range(rng, extra_test, body_fn, get_state, set_state, symbol_names, loc):
    stager = _state_stager(get_state)
    if stager is not None and len(rng) > 1:
        stager.stage_for(rng, extra_test, body_fn, get_state, set_state, symbol_names, loc)
        return
    if stager is None and len(rng) > 1:
        stager = _reads_stager((body_fn, extra_test))
        if stager is not None and stager.stage_for(
                rng, extra_test, body_fn, get_state, set_state, symbol_names, loc,
                optional=True) is not False:
            return
    for k, item in enumerate(rng):
        if extra_test is not None:
            test = extra_test()
            if is_traced(test):
                _guarded_rest(test, iter(rng[k:]), extra_test, body_fn, get_state, set_state,
                              symbol_names, loc)
                return
            if not test:
                return
        body_fn(item)
        if k + 1 < len(rng):
            stager = _state_stager(get_state)
            if stager is not None:
                stager.stage_for(rng[k + 1:], extra_test, body_fn, get_state, set_state,
                                 symbol_names, loc)
                return


def _reads_stager(fns) -> Stager | None:
    """The stager of a traced value that functions read from outside (their closure cells,
    searched into records, lists, tuples, dicts and the closures of functions there: the
    element of a comprehension, Note [Comprehensions as loops]), if any."""
    todo = [(c.cell_contents, 0) for fn in fns for c in getattr(fn, "__closure__", None) or ()
            if _filled(c)]
    seen = 0
    while todo and seen < 10_000:
        v, depth = todo.pop()
        seen += 1
        s = stager_of(v)
        if s is not None:
            return s
        if depth < 3 and type(v) is types.FunctionType:  # (a closure the body calls)
            todo.extend((c.cell_contents, depth + 1) for c in v.__closure__ or ()
                        if _filled(c))
        elif depth < 3 and (type(v) in (list, tuple, dict) or is_record(v)):
            items = v.values() if type(v) is dict else v if type(v) in (list, tuple) else \
                pytree.tree_leaves(v)
            todo.extend((x, depth + 1) for x in items)
    return None


def _filled(cell) -> bool:
    try:
        cell.cell_contents
    except ValueError:
        return False
    return True


def _guarded_rest(test, it, extra_test, body_fn, get_state, set_state, symbol_names, loc):
    for item in it:
        if_stmt(test, lambda item=item: body_fn(item), None, get_state, set_state,
                symbol_names, len(symbol_names), loc)
        test = extra_test()
        if not is_traced(test) and not test:
            return


def list_comp(iterable, elt: Callable, pattern, loc: SourceLoc) -> list:
    """``[elt for tgt in iterable]`` run as the loop ``for tgt in iterable: out.append(elt)``
    through for_stmt, so it is staged like that loop (Note [Comprehensions as loops] in
    convert/comprehensions.py). ``elt`` takes the names of ``tgt``; ``pattern`` is None
    (``tgt`` is a name) or ``tgt``'s nesting as a tuple of None (the item is unpacked as
    Python unpacks it)."""
    out: list = []

    def body(v):
        out.append(elt(v) if pattern is None else elt(*_unpack(v, pattern)))
    for_stmt(iterable, None, body, _no_state, _set_no_state, (), loc)
    return out


def _unpack(value, pattern: tuple) -> list:
    """The leaves of ``value`` unpacked by ``pattern``, as ``a, (b, c) = value`` would."""
    parts = list(itertools.islice(iter(value), len(pattern) + 1))
    if len(parts) != len(pattern):
        raise ValueError(f"too many values to unpack (expected {len(pattern)})"
                         if len(parts) > len(pattern) else
                         f"not enough values to unpack (expected {len(pattern)}, got "
                         f"{len(parts)})")
    out = []
    for v, p in zip(parts, pattern):
        out.extend([v] if p is None else _unpack(v, p))
    return out


def _no_state() -> tuple:
    return ()


def _set_no_state(values) -> None:
    pass


def while_stmt(test_fn, body_fn, get_state, set_state, symbol_names: Sequence[str],
               loc: SourceLoc) -> None:
    marked_test = test_fn
    test_fn = lambda: checkpointed.unwrap(marked_test(), loc)  # noqa: E731
    as_python = False  # the stager asked for Python iterations (Note [Unrolled loops])
    read = False  # whether the body's reads were looked at (Note [Static loops over ...])
    while True:
        test = test_fn()
        stager = stager_of(test)
        if stager is not None:
            stager.stage_while(test_fn, body_fn, get_state, set_state, tuple(symbol_names), loc)
            return
        if not test:
            return
        if _STAGERS and not as_python:  # See Note [Python while loops over traced state]
            stager, optional = _state_stager(get_state), False
            if stager is None and not read:
                stager, optional, read = _reads_stager((test_fn, body_fn)), True, True
            stage = getattr(stager, "stage_python_while", None)
            if stage is not None:
                if stage(test_fn, body_fn, get_state, set_state, tuple(symbol_names), loc,
                         optional=optional):
                    return
                as_python = not optional
        body_fn()


# Note [Python while loops over traced state]
# `while i < n:` with Python i and n runs as Python while its state is plain Python and its
# body reads no traced value. Once the state holds a traced value (`x = x * 0.999`), running
# on would add one copy of the body to the trace per iteration (n = 1e5: minutes,
# gigabytes). As for a static `for` (Note [Static loops over traced state]), the (rest of
# the) loop is staged as one while_loop op: the Python scalars the body changes (the
# counter i) become carried values, so the test, traced over
# them, decides each iteration at run time. When the test does not become traced (it reads
# only Python objects changed in place, like a list's length), or the body cannot be one
# loop op, the trace restarts with the loop run as Python, with a warning (Note [Unrolled
# loops]). Optional for a stager: one without `stage_python_while` runs the loop as Python.


def _state_stager(get_state) -> Stager | None:
    """The stager of the first traced value in a statement's state (or in a record, list or
    dict of it: Note [Records in loop and branch state]), if any."""
    for v in get_state():
        s = stager_of(v)
        if s is None and pytree.node_type(v) is not None:
            s = next((t for t in map(stager_of, pytree.tree_leaves(v)) if t is not None), None)
        if s is not None:
            return s
    return None


# Note [Records in loop and branch state]
# A variable holding a record of arrays (a tuple, namedtuple, dataclass or registered pytree:
# `state = State(pos, vel)`) is loop or branch state like an array: the stager carries its
# leaves (tracer/records.py, `flat_state`) and rebuilds the record from the loop's or cond's
# results, so `for i in range(n): state = step(state)` is one loop op, not n copies of the
# body. A variable that becomes a record only inside the branches of an `if` (`t = (a, b)`
# on both paths, or `return (a, b)` in one: `__lg_retval`) is merged leaf by leaf
# (records.split_merge). Lists and dicts are not records: they are changed in place
# (`hs.append(h)`).
_RECORD_KINDS = frozenset({"tuple", "namedtuple", "dataclass", "custom"})


def is_record(v) -> bool:
    """Whether `v` is a record of arrays (Note [Records in loop and branch state])."""
    nt = pytree.node_type(v)
    return nt is not None and nt.kind in _RECORD_KINDS


def _no_op() -> None:
    pass


# -- expressions ---------------------------------------------------------------------------
def if_exp(cond, true_fn, false_fn, loc: SourceLoc) -> Any:
    stager = stager_of(cond)
    if stager is not None:
        return stager.stage_if_exp(cond, true_fn, false_fn, loc)
    return true_fn() if cond else false_fn()


def and_(*fns: Callable[[], Any]) -> Any:
    """``a and b and ...`` with lazily evaluated operands."""
    value = fns[0]()
    for i in range(1, len(fns)):
        stager = stager_of(value)
        if stager is not None:
            rest, v = fns[i:], value
            return stager.stage_if_exp(v, lambda: and_(*rest), lambda: v, None)
        if not value:
            return value
        value = fns[i]()
    return value


def or_(*fns: Callable[[], Any]) -> Any:
    """``a or b or ...`` with lazily evaluated operands."""
    value = fns[0]()
    for i in range(1, len(fns)):
        stager = stager_of(value)
        if stager is not None:
            rest, v = fns[i:], value
            return stager.stage_if_exp(v, lambda: v, lambda: or_(*rest), None)
        if value:
            return value
        value = fns[i]()
    return value


def not_(value) -> Any:
    stager = stager_of(value)
    if stager is not None:
        return stager.stage_not(value, None)
    return not value


def in_(value, container) -> Any:
    """``value in container`` in converted code. For a traced one-element `value` and a Python
    set, dict, list or tuple: whether it equals one of the numbers there, a traced bool (a set
    or dict would hash the traced value, not its number: always False, a wrong result; a
    list would take bool() of each comparison). Of a traced array with more elements, a set or
    dict raises numpy's TypeError (an array is unhashable)."""
    if not (_STAGERS and is_traced(value) and type(container) in _CONTAINERS):
        return value in container
    hashed = type(container) not in (list, tuple)
    if tuple(value.shape) != ():
        if hashed:
            raise TypeError("unhashable type: 'numpy.ndarray'")
        return value in container
    candidates = [k for k in container if is_traced(k) or isinstance(k, (int, float, np.number))]
    if not candidates:
        return False
    return traced_builtins()[any]([value == k for k in candidates])


def not_in(value, container) -> Any:
    """``value not in container`` in converted code (see in_)."""
    return not_(in_(value, container))


_CONTAINERS = (set, frozenset, dict, list, tuple, type({}.keys()))
_COMPARE = {"==": operator.eq, "!=": operator.ne, "<": operator.lt, "<=": operator.le,
            ">": operator.gt, ">=": operator.ge, "is": operator.is_, "is not": operator.is_not,
            "in": in_, "not in": not_in}


def compare_chain(left, *ops_and_fns) -> Any:
    """``left op1 b op2 c ...``; each ``b``, ``c`` is a thunk, evaluated at most once."""
    op, right = ops_and_fns[0], ops_and_fns[1]()
    result = _COMPARE[op](left, right)
    if len(ops_and_fns) == 2:
        return result
    return and_(lambda: result, lambda: compare_chain(right, *ops_and_fns[2:]))


def raising(make: Callable[[], Any], loc: SourceLoc) -> Any:
    """``raise make()`` in converted code: what to raise (a stager may compile it instead)."""
    for s in _STAGERS.values():
        stage = getattr(s, "stage_raise", None)
        if stage is not None:
            return stage(make, loc)
    return make()


_TRY = threading.local()


@contextlib.contextmanager
def catching(types):
    """Around the body of a ``try`` whose handlers catch ``types``."""
    stack = _TRY.__dict__.setdefault("stack", [])
    stack.append(types)
    try:
        yield
    finally:
        stack.pop()


# Note [llgrad's exceptions pass user handlers]
# While llgrad traces a `try` body, it may raise for its own reasons: a limit (an
# UnsupportedError, a ConcretizationError that sends the call to the dynamic path) or a
# signal of the stager (staging.Unroll restarting the trace). A user's `except Exception:`
# (or `except TypeError:`, a ConcretizationError's base) would catch it and run the handler
# where Python would have run the body: a wrong value. So every handler of converted code
# starts with `reraise_own()`, which raises such an exception again, unchanged, before any
# of the handler runs. Errors that mean what numpy's would (ShapeError is a ValueError,
# IndexingError an IndexError, LinAlgError numpy's, DTypeError a TypeError) stay the
# program's, for its handlers.
def reraise_own() -> None:
    """In an `except` block: raise the exception it handles again if it is llgrad's own."""
    e = sys.exc_info()[1]
    if llgrads_own(e):
        raise e


def llgrads_own(e: BaseException) -> bool:
    """Whether `e` is llgrad's (a limit, a stager's signal), not one plain Python would raise
    running the program (Note [llgrad's exceptions pass user handlers])."""
    return getattr(e, "_lg_signal", False) or isinstance(e, LLGradError) and not isinstance(
        e, (ShapeError, IndexingError, LinAlgError, DTypeError, OutOfMemoryError))


def caught(exc) -> bool:
    """Whether an enclosing ``try`` catches ``exc`` (then it is raised as Python does)."""
    return any(isinstance(exc, t) for t in getattr(_TRY, "stack", ()))


def note_attr(obj, name: str) -> None:
    """Converted code calls this before ``obj.name = ...`` or ``del obj.name``."""
    if _STAGERS:
        _note_store(obj, ("attr", name), False)


def note_item(obj, index, delete: bool = False) -> None:
    """Before ``obj[index] = ...`` (or ``del``) where ``obj`` is not a local variable;
    ``obj`` is ``UNKNOWN`` when naming it again would repeat a call."""
    if _STAGERS:
        _note_store(obj, ("item", index), delete)


def item_value(obj, value) -> Any:
    """The value of ``obj[i] = value`` where ``obj`` is not a local variable (an attribute,
    an item): numpy cannot hold a traced value, so storing one into a numpy array there is
    an error at the user's line (numpy's own would be "setting an array element with a
    sequence")."""
    if _STAGERS and isinstance(obj, np.ndarray) and any(True for _ in _traced_leaves(value)):
        raise UnsupportedError(
            "a traced value is written into a numpy array held in an attribute or a "
            "container (not a local variable): numpy cannot hold a traced value, and "
            "compiled code updates arrays by value", loc=user_loc(),
            fix="copy the array into a local variable and update that (buf = obj.buf.copy(); "
            "buf[i] = v), then use or return it")
    return value


def _note_store(obj, key, delete) -> None:
    for s in _STAGERS.values():
        note = getattr(s, "note_store", None)
        if note is not None:
            note(obj, key, delete)


def setitem(target, index, value) -> Any:
    """``target[index] = value``, returning the (possibly new) target.

    Plain values are updated in place and returned (aliases see the update, as in Python);
    if the target (an array), index or value is traced, the stager returns a new traced
    value. Python lists and dicts are always updated in place, traced items too.
    """
    if _STAGERS and not is_traced(target) and type(target).__name__ != "ndarray":
        _note_store(target, ("item", index), False)  # Note [Stores in traced branches]
        if isinstance(target, (list, dict)):
            target[index] = value
            return target
    stager = stager_of(target) or stager_of(value)
    if stager is None:
        for i in index if type(index) is tuple else (index,):
            stager = stager or stager_of(i)
    if stager is None and _STAGERS and type(target).__name__ == "ndarray":
        stager = _region_stager()
    if stager is not None:
        from .aliasing import check_unaliased
        check_unaliased(target, "update", index)  # Note [In-place updates are by value]
        return stager.stage_setitem(target, index, value)
    target[index] = value
    return target


def _region_stager() -> Stager | None:
    """The stager tracing a branch or loop body right now, if any.

    Inside a traced region a write into a plain numpy array must not happen in place: both
    branches of an `if` are traced, and a loop body is traced once for all its iterations, so
    the write would land regardless of the branch taken, or once instead of per iteration.
    The stager makes it a functional update instead (`y` becomes a traced value).
    """
    for s in _STAGERS.values():
        in_region = getattr(s, "in_region", None)
        if in_region is not None and in_region():
            return s
    return None


def owns_cells(names: Sequence[str]) -> Callable:
    """Decorator marking a nested function with the ``nonlocal`` names that are variables of
    a converted frame (Note [Nonlocal variables of converted functions] in convert/cells.py)."""
    def mark(fn):
        setattr(fn, OWNED, frozenset(names))
        return fn
    return mark


def fence(kind: str, loc: SourceLoc, values: dict, names: Sequence[str],
          catches: Callable[[], tuple] | None = None) -> None:
    """Raise UnsupportedSyntaxError if a value read by an unsupported statement is traced (a
    `try`: Note [try on the dynamic path] in convert/fence.py)."""
    if _STAGERS and not any(getattr(s, "eager", bool)() for s in _STAGERS.values()):
        from .convert.fence import check_fence
        caught = _catches() if kind == "try" else None
        check_fence(kind, loc, values, tuple(names), is_traced, _branch_loc(), catches,
                    None if caught is None else caught.extend)


def _catches() -> list | None:
    """The staged trace's list of exception classes its `try` statements catch (Note [try on
    the dynamic path] in convert/fence.py), or None outside one."""
    from llgrad.transform.builder import current
    try:
        return getattr(current(), "catches", None)
    except LLGradError:
        return None


def _branch_loc() -> SourceLoc | None:
    """The traced `if` whose branch a stager is tracing right now, if any."""
    for s in _STAGERS.values():
        loc = getattr(s, "branch_loc", lambda: None)()
        if loc is not None:
            return loc
    return None


# -- calls ---------------------------------------------------------------------------------
def converted_call(f: Callable, args: tuple, kwargs: dict | None) -> Any:
    """Call ``f(*args, **kwargs)``, converting ``f`` first if it is the user's own function."""
    _check_defined(args)
    if kwargs:
        _check_defined(kwargs.values())
    target = _converted_target(f, args + tuple(kwargs.values()) if kwargs else args)
    return target(*args, **(kwargs or {}))


# Note [Lists of traced values]
# numpy converts a Python list argument with np.asarray, which calls each traced element's
# `__array__` and loses the graph: `np.sum([1, a * a, 2])`. A converted call to a numpy
# function with such a list (or tuple) builds it as one traced array first (stack, with the
# dtype numpy would give: runtime/conversions.py). Not for functions that take a sequence of
# arrays (np.stack, np.concatenate, ...): numpy dispatches those to llgrad by itself, and
# their arrays need not have one shape. Lists of integer values are left alone: they are
# shapes or indices, which the dynamic path reads as numbers, except where they are data
# (np.array, np.ix_: _int_lists_as_data). A list held by a parameter of
# the function (a differentiated list of floats, `np.polyval(c, x)`) is known only at run
# time: a parameter (or a part of one, `p["c"]`) given to a numpy function is marked
# `list_arg`, which builds it if it is such a list.
_SEQUENCE_FUNCTIONS = frozenset(
    getattr(np, n) for n in ("concatenate", "stack", "hstack", "vstack", "dstack",
                             "column_stack", "block", "choose", "select", "piecewise",
                             "lexsort", "broadcast_arrays", "meshgrid", "einsum", "ix_")
    if hasattr(np, n)) | {np.linalg.multi_dot}


def _traced_list(x) -> bool:
    if type(x) not in (list, tuple):
        return False
    leaves = list(_traced_leaves(x))
    return bool(leaves) and any(getattr(v, "dtype", None) is None or v.dtype.kind != "i"
                                for v in leaves)


def _int_lists_as_data(f: Callable) -> Callable | None:
    """llgrad's form of a numpy function whose lists of integers are data, not shapes:
    numpy's conversions (`np.array([i, i + 1])`) and np.ix_ (`K[np.ix_(dofs, dofs)]` with
    `dofs = [e, e + 1]`), so that lists of traced integers (a loop counter) are built as
    arrays instead of being concretised (Note [Lists of traced values])."""
    from llgrad.runtime.numpy_api import CONVERSIONS, FUNCTIONS
    return CONVERSIONS.get(f) or (FUNCTIONS[f] if f is np.ix_ else None)


def _traced_leaves(x):
    if type(x) in (list, tuple):
        for e in x:
            yield from _traced_leaves(e)
    elif is_traced(x):
        yield x


def list_arg(x: Any) -> Any:
    """`x`, a parameter of the function (or a part of one) given to a numpy function, as one
    array if it is a list of traced values: a differentiated list argument `c` in
    `np.polyval(c, x)` (Note [Lists of traced values])."""
    if _STAGERS and _traced_list(x):
        from llgrad.runtime.conversions import array_from
        return array_from(x)
    return x


def _with_arrays(f: Callable) -> Callable:
    """`f` with its list arguments holding traced values built as arrays."""
    from llgrad.runtime.conversions import array_from

    def call(*args, **kwargs):
        args = [array_from(a) if _traced_list(a) else a for a in args]
        kwargs = {k: array_from(v) if _traced_list(v) else v for k, v in kwargs.items()}
        return f(*args, **kwargs)
    return call


def is_random(f: Any) -> bool:
    """True for numpy.random's functions and the methods of its generators."""
    if (getattr(f, "__module__", None) or "").startswith("numpy.random"):
        return True
    owner = getattr(f, "__self__", None)
    return owner is not None and type(owner).__module__.startswith("numpy.random")


# Note [Generators seeded inside the function]
# `rng = np.random.default_rng(0)` (or np.random.RandomState(0)) made by the function itself,
# from a constant seed, draws the same numbers at every call: common random numbers, as
# variational-inference and policy-gradient notebooks fix them. Its draws are constants of
# the compiled code, as in Python, so they stay on the staged path. Only where both give the
# same numbers: the generator made while this trace runs (it is remembered by the trace's
# builder, so one that outlives the call draws per call again), and made and drawn from
# outside any branch or loop body (a loop body is traced once for all its iterations, and
# both branches of an `if` are traced). Every other draw runs per call (Note [Random draws
# run per call]).
_SEEDED_MAKERS = (np.random.default_rng, np.random.RandomState)


def _seeded(f: Callable, args) -> bool:
    """Whether `f(*args)` makes or draws from a generator seeded inside the function being
    staged (Note [Generators seeded inside the function]); a maker's result is remembered."""
    from llgrad.transform.builder import current
    if _region_stager() is not None:
        return False
    try:
        seeded = current().seeded
    except LLGradError:
        return False
    if id(getattr(f, "__self__", None)) in seeded:
        return True
    seed = args[0] if len(args) == 1 else None
    return f in _SEEDED_MAKERS and (type(seed) is int or type(seed) in (list, tuple) and
                                    all(type(k) is int for k in seed) and len(seed) > 0)


def _make_seeded(f: Callable) -> Callable:
    def make(*args, **kwargs):
        rng = f(*args, **kwargs)
        from llgrad.transform.builder import current
        current().seeded[id(rng)] = rng  # (held: no other object takes its id)
        return rng
    return make


def _random_draw(f: Callable) -> None:
    """Note [Random draws run per call]: numbers drawn while the staged trace runs would be
    constants of the compiled code, the same at every call, where Python draws new ones; so
    a draw switches the function to the dynamic path (traced per call, drawn per call)."""
    if _STAGERS and not any(getattr(s, "eager", bool)() for s in _STAGERS.values()):
        name = getattr(f, "__qualname__", None) or getattr(f, "__name__", repr(f))
        raise ConcretizationError(
            f"a call drawing random numbers (numpy.random: {name}): compiled once, it would "
            f"return the same numbers at every call", loc=user_loc(),
            fix="pass the random numbers as an argument to keep the function on the staged "
            "path")


def _is_numpy(f) -> bool:
    return isinstance(f, np.ufunc) or isinstance(getattr(f, "__self__", None), np.ufunc) or \
        (getattr(f, "__module__", None) or "").startswith("numpy")  # (np.add.reduce too)


# Methods that change their object in place, by the object's type (See Note [Python effects
# in staged code] in tracer/effects.py).
_MUTATORS = {
    list: frozenset({"append", "extend", "insert", "pop", "remove", "clear", "sort",
                     "reverse"}),
    dict: frozenset({"update", "pop", "popitem", "clear", "setdefault"}),
    set: frozenset({"add", "discard", "remove", "pop", "clear", "update", "difference_update",
                    "intersection_update", "symmetric_difference_update"}),
    np.ndarray: frozenset({"fill", "sort", "put", "itemset", "resize", "partition",
                           "setfield"}),
}


def _note_call(f: Callable, args) -> None:
    """Announce a call that changes a Python object, `len` or `print` to the stagers."""
    if f is print or f is len:
        obj, name = (args[0] if f is len and args else None), f.__name__
    else:
        obj = getattr(f, "__self__", None)
        names = _MUTATORS.get(type(obj))
        if names is None or f.__name__ not in names:
            return
        name = f.__name__
    for s in _STAGERS.values():
        note = getattr(s, "note_call", None)
        if note is not None:
            note(obj, name)


def len_(x) -> int:
    """``len(x)`` in converted code (a staged loop cannot know the length of a list it
    appends to: Note [Python effects in staged code])."""
    if _STAGERS:
        _note_call(len, (x,))
    return len(x)


# builtins whose traced forms take the items of any iterable (and are Python's otherwise)
_OF_ITERABLES = (zip, enumerate, max, min, any, all, sorted, math.fsum)


def _converted_target(f: Callable, args=()) -> Callable:
    if _STAGERS and (type(f) is types.BuiltinMethodType or f is print or f is len):
        _note_call(f, args)
    if _STAGERS and f is np.empty:
        # Its uninitialised memory would be a constant of the compiled code: the IR (and its
        # cache key, and which constants CSE merges) would change from trace to trace.
        f = np.zeros
    if is_random(f):
        if _STAGERS and _seeded(f, args):  # See Note [Generators seeded inside the function]
            return _make_seeded(f) if f in _SEEDED_MAKERS else f
        _random_draw(f)
        return f
    if _STAGERS and f in _OF_ITERABLES:
        return traced_builtins()[f]  # (the items of a generator or a view may be traced)
    traced = bool(_STAGERS) and (any(
        is_traced(a) or _traced_list(a) or type(a) is tuple and any(map(is_traced, a))
        for a in args) or calls_user_functions(f))  # (a tuple: scipy's cho_solve((c, lower), b))
    if _STAGERS and type(f).__hash__ is not None and any(
            True for a in args for _ in _traced_leaves(a)):
        g = _int_lists_as_data(f)
        if g is not None:
            return g
    if _STAGERS and type(f).__hash__ is not None and f in SHAPED and \
            any(True for a in args for _ in _traced_leaves(a)):  # (a dataclass is unhashable)
        return static_shape(f)
    if traced and isinstance(f, np.vectorize):  # Note [np.vectorize on traced values]
        from llgrad.batching import vectorized
        return lambda *a, **k: vectorized(f, a, k)
    if traced:
        try:
            forms = traced_builtins()
            g = forms.get(f)
            if g is None and isinstance(f, types.MethodType):  # (a copy of a scipy object)
                g = forms.get((type(f.__self__), f.__name__))
        except TypeError:
            g = None
        if g is not None:
            return g
        if _is_numpy(f) and f not in _SEQUENCE_FUNCTIONS and any(map(_traced_list, args)):
            return _with_arrays(f)
        from .library import compiled_library_call, is_compiled_library
        if is_compiled_library(f):  # Note [Compiled library code on traced values]
            return compiled_library_call(f)
    if isinstance(f, types.MethodType):
        inner = _convert(f.__func__, traced)
        return f if inner is None else types.MethodType(inner, f.__self__)
    if isinstance(f, types.FunctionType):
        converted = _convert(f, traced)
        if traced and (converted is not None and _is_library(f) or
                       converted is None and _is_unconverted_library(f)):
            from .library import library_call  # Note [Unsupported library functions]
            return library_call(f, converted or f, _STAGERS)
        return f if converted is None else converted
    return f


def _is_unconverted_library(f: types.FunctionType) -> bool:
    """A Python function of the standard library or an installed package run as it is
    (statistics.mean), but numpy's and llgrad's, whose errors are their own."""
    from .convert.api import _is_user_function
    root = (getattr(f, "__module__", None) or "").split(".")[0]
    return root not in ("numpy", "llgrad") and f.__name__ != "<lambda>" and \
        not f.__code__.co_filename.startswith("<") and not _is_user_function(f)


def _is_library(f) -> bool:
    from .convert.calls import is_converted_library
    return is_converted_library(f)


def _convert(f: types.FunctionType, traced: bool) -> Callable | None:
    from .convert import api
    from .convert.calls import is_converted_library
    converted = api.try_convert(f, library=traced)
    if converted is not None and not is_converted_library(f):  # library globals: constants
        captures.note_function(f)
    return converted


# The element-update operators converted code calls as `__lg.iadd`, `__lg.ufunc_at`, ...
from .updates import (diagonal_index, iadd, ifloordiv, imatmul, imod, imul,  # noqa: E402,F401
                      ipow, isub, item, itruediv, ufunc_at)
