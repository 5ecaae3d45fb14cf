"""`acc op= v` on a name holding a numpy array, with `v` traced: when the name may be rebound
to the traced result instead of the array being written (Note [Traced values added into numpy
arrays])."""
from __future__ import annotations

import sys
import types

import numpy as np

from llgrad.runtime.errors import UnsupportedError, user_loc

from .aliasing import _user_frames, check_unaliased
from .snapshot import _DEPTH, _LIMIT, _user_object

# Note [Traced values added into numpy arrays]
# `acc = np.zeros(3)` then `acc += x` (x traced): numpy's in-place operator would write traced
# values into numpy memory, which cannot be done. The converter rewrites `acc op= v` to
# `acc = __lg.iadd(acc, v, "acc")`, which (like `acc = operator.iadd(acc, v)`) leaves every
# other case to Python, and for a numpy `acc` with a traced `v` rebinds `acc` to the traced
# `acc + v`. That is what numpy computes as long as nothing else can see the array, so
# everything else that may is refused, never silently left unchanged:
#   - another name for it, or for an array it shares memory with, in the function or its
#     callers, or a caller's argument: `check_unaliased` names it;
#   - any other reference (a list, a global, an attribute, a view made of it): none when
#     the array's reference count, less the user frames' local-variable dicts' entries, is
#     its count when one local name holds it (`_SOLE`, measured at import through the same
#     call shape, so it follows the interpreter's conventions), the common case. Otherwise
#     the holders may be the tracer's own (a loop's or branch's saved state, a snapshot), so
#     the references the user can reach are searched: the containers, objects and views
#     reachable from the user frames' locals and globals (bounded; past the bound, refused).
#     What that search cannot see (an object held only by a C extension) is out of reach.
_SYMBOL = {"add": "+", "subtract": "-", "multiply": "*", "divide": "/", "floor_divide": "//",
           "remainder": "%", "power": "**", "matmul": "@"}


def _probe(a, b=None, whole=None):
    seen = 0
    refs = sys.getrefcount(a)
    return refs - seen


def _measure_sole() -> int:
    y = np.empty(1)
    y = _probe(y, None, "y")
    return y


_SOLE = _measure_sole()


def held_by_locals(a: np.ndarray) -> int:
    """How many entries of the user frames' local-variable dicts hold `a`, after refreshing
    them (so the count is exact, whatever read them before)."""
    return sum(v is a for f in _user_frames(sys._getframe(2)) for v in f.f_locals.values())


def check_sole(a: np.ndarray, refs: int, name: str, op: str) -> None:
    """Refuse `name op= v` unless `name` is the only reference to the numpy array `a`
    (`refs`: its reference count less the local-variable dict entries)."""
    what = f"`{name} {_SYMBOL[op]}= ...`"
    check_unaliased(a, what)
    if a.base is not None:
        held = "it is a view of another array"
    elif refs > _SOLE:
        held = _reachable(a, list(_user_frames(sys._getframe(1))))
    else:
        held = None
    if held:
        raise UnsupportedError(
            f"in-place {what} writes traced values into a numpy array that something besides "
            f"`{name}` refers to ({held}): numpy would change what that sees too, while llgrad "
            "can only rebind the name", loc=user_loc(),
            fix=f"write `{name} = {name} {_SYMBOL[op]} ...`: a new array, which the other "
            "references do not see, in numpy too")


def _reachable(a: np.ndarray, frames) -> str | None:
    """How `a` is reachable from the user frames other than through a local name holding it
    directly (which check_unaliased has judged), or None: through their locals and the
    globals their code names, following lists, tuples, sets, dicts, user objects'
    attributes and views' bases, as deep as the snapshots of staged code look."""
    todo = [(v, "a container", 0) for f in frames for v in f.f_locals.values() if v is not a]
    todo += [(f.f_globals[n], "a global", 0) for f in frames for n in _names(f.f_code)
             if n in f.f_globals]
    seen = set()
    while todo:
        v, how, depth = todo.pop()
        if v is a:
            return how
        if id(v) in seen or depth > _DEPTH:
            continue
        if len(seen) > _LIMIT:
            return "too many objects to search for other references"
        seen.add(id(v))
        if isinstance(v, np.ndarray):
            if v.base is not None:
                todo.append((v.base, "a view of it", depth))
        elif type(v) in (list, tuple, set, frozenset) or isinstance(v, (list, tuple)):
            todo.extend((x, how, depth + 1) for x in v)
        elif isinstance(v, dict):
            todo.extend((x, how, depth + 1) for x in v.values())
        elif _user_object(v):
            todo.extend((x, "an attribute", depth + 1) for x in vars(v).values())
    return None


def _names(code) -> set:
    """The global names a code object (and the code nested in it) reads."""
    out, todo = set(), [code]
    while todo:
        c = todo.pop()
        out.update(c.co_names)
        todo.extend(k for k in c.co_consts if isinstance(k, types.CodeType))
    return out
