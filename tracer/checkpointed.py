"""The per-loop checkpoint marker: `for t in llgrad.checkpointed(range(n))` and `while
llgrad.checkpointed(test, schedule=k)`. Run as Python, a marked iterable iterates and a marked
test is true exactly as the value it wraps; traced, `unwrap` records the loop's schedule in the
function being built (fn.meta["checkpoint loops"], keyed by the loop statement's place) for
transform/checkpoint.py to segment it (Note [Checkpointed loops per loop] there). Why a
wrapper of the iterable: Note [Marking a loop].
"""
from __future__ import annotations

from typing import Any

from llgrad.runtime.errors import user_loc
from llgrad.transform import builder
from llgrad.transform.checkpoint import check_schedule, loc_key

# Note [Marking a loop]
# How users of other systems say "checkpoint this loop": JAX wraps the step function
# (`lax.scan(jax.checkpoint(step), ...)`, which checkpoints every iteration, or Equinox's and
# diffrax's `checkpoints=` argument of their loop functions); PyTorch cuts a sequence of
# modules into segments (`checkpoint_sequential(fns, segments, x)`). All of them put the
# option on the loop itself. llgrad's loops are Python `for` and `while` statements, so the
# marker wraps what the statement already names, its iterable or its test: the statement
# stays as written, runs unchanged as Python, and the mark applies to that one loop, not
# to its neighbours or to loops nested in it (a `with checkpoint_loops():` block would
# reach every loop in it, and is not a construct the tracer stages). `llgrad.checkpoint`
# on a helper remains the way to recompute one step's intermediates instead of taping them.


class Checkpointed:
    """A for loop's iterable or a while loop's test, marked for checkpointing."""

    __slots__ = ("value", "schedule")

    def __init__(self, value: Any, schedule):
        self.value, self.schedule = value, schedule

    def __iter__(self):
        return iter(self.value)

    def __len__(self) -> int:
        return len(self.value)

    def __bool__(self) -> bool:
        return bool(self.value)

    def __repr__(self) -> str:
        return f"checkpointed({self.value!r}, schedule={self.schedule!r})"


def checkpointed(value: Any, schedule="sqrt") -> Checkpointed:
    """Mark one loop for checkpointing: `value` is its iterable (`for`) or its test (`while`).

    In a function compiled by `@llgrad.differentiate`, reverse mode through the marked staged
    loop stores its carried state once per segment and recomputes a segment's iterations in
    the reverse sweep, whatever the function's own `checkpoint=` option; marked loops may sit
    anywhere: in a branch, or nested in another loop. Run as plain Python (or eagerly), the
    marker changes nothing: a marked iterable iterates, a marked test is true, as `value`.

    Args:
        value: a `range` (or an array, iterated by rows) for a `for` loop; the condition of
            a `while` loop.
        schedule: "sqrt" (segments of sqrt(n) iterations: O(sqrt n) stored states, one more
            forward sweep), "log" (nested segments: O(log n) states, log n more forward
            sweeps) or an int k (segments of k iterations). A while loop (or a loop with
            `break`) runs an unknown number of times: it needs an int k; a range with
            run-time bounds takes "sqrt" (of the trip count counted when it starts) or k.
    Returns:
        A wrapper that iterates (or tests true) as `value`.
    Raises:
        UnsupportedError: an unknown schedule.

    Example:
        >>> import numpy as np, llgrad
        >>> @llgrad.differentiate
        ... def f(x):
        ...     s = x[0]
        ...     for i in llgrad.checkpointed(range(1, len(x))):  # O(sqrt n) tape
        ...         s = 0.9 * s + np.sin(x[i])
        ...     return s
    """
    check_schedule(schedule, user_loc(), "schedule")
    return Checkpointed(value, schedule)


def unwrap(value: Any, loc) -> Any:
    """`value` without its marker; while tracing, the loop at `loc` is recorded as marked."""
    if type(value) is not Checkpointed:
        return value
    stack = getattr(builder._TLS, "stack", None)
    if stack:
        stack[-1].fn.meta.setdefault("checkpoint loops", {})[loc_key(loc)] = value.schedule
    return value.value


__all__ = ["Checkpointed", "checkpointed", "unwrap"]
