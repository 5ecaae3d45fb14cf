"""Loop nests for llvmlite IRBuilders, as context managers (numba's `cgutils` style).

`for_range` and `loop_nest` emit counted loops over i64 indices; `elementwise` emits a
vectorised main loop of width W plus a scalar remainder loop around a body callback;
`load`/`store` and `array_ptr` address contiguous buffers through opaque pointers.
Invariant: after each context manager exits, the builder sits in the loop's exit block, so
code emitted next runs after the loop.
"""
from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager

from llvmlite import ir

__all__ = [
    "I64", "PTR", "IndexLike", "const", "for_range", "loop_nest", "elementwise",
    "element_ptr", "load", "store",
]

I64 = ir.IntType(64)
PTR = ir.PointerType()  # opaque `ptr`; element types go on load/store/gep (LLVM >= 17)

IndexLike = int | ir.Value


def const(value: IndexLike) -> ir.Value:
    """An i64 constant for a Python int; IR values pass through unchanged."""
    return ir.Constant(I64, value) if isinstance(value, int) else value


@contextmanager
def for_range(builder: ir.IRBuilder, start: IndexLike, stop: IndexLike, step: int = 1,
              name: str = "i") -> Iterator[ir.Value]:
    """Emit `for (i = start; i < stop; i += step)` and yield `i` (an i64) to the body.

    `step` is a Python int; a negative step counts down while `i > stop`. The body may add
    its own blocks; the back edge is taken from wherever the builder is when the body ends.

    Example (y[i] = x[i] for i < n)::

        with for_range(builder, 0, n) as i:
            store(builder, load(builder, x, i, ir.DoubleType()), y, i)
    """
    if step == 0:
        raise ValueError("for_range: step must be nonzero")
    fn = builder.function
    preheader = builder.block
    header = fn.append_basic_block(f"{name}.header")
    body = fn.append_basic_block(f"{name}.body")
    exit_ = fn.append_basic_block(f"{name}.exit")
    start_v, stop_v = const(start), const(stop)
    builder.branch(header)

    builder.position_at_end(header)
    index = builder.phi(I64, name=name)
    index.add_incoming(start_v, preheader)
    cond = builder.icmp_signed("<" if step > 0 else ">", index, stop_v, name=f"{name}.cond")
    builder.cbranch(cond, body, exit_)

    builder.position_at_end(body)
    yield index
    nxt = builder.add(index, ir.Constant(I64, step), name=f"{name}.next", flags=["nsw"])
    index.add_incoming(nxt, builder.block)
    builder.branch(header)

    builder.position_at_end(exit_)


@contextmanager
def loop_nest(builder: ir.IRBuilder, shape: Sequence[IndexLike],
              name: str = "i") -> Iterator[tuple[ir.Value, ...]]:
    """Emit a row-major nest of loops over `shape`; yield one i64 index per axis.

    A 0-d shape yields `()` and emits no loop (the body runs once).
    """
    with _nest(builder, list(shape), (), name) as indices:
        yield indices


@contextmanager
def _nest(builder: ir.IRBuilder, shape: list[IndexLike], outer: tuple[ir.Value, ...],
          name: str) -> Iterator[tuple[ir.Value, ...]]:
    if not shape:
        yield outer
        return
    with for_range(builder, 0, shape[0], name=f"{name}{len(outer)}") as index:
        with _nest(builder, shape[1:], (*outer, index), name) as indices:
            yield indices


Body = Callable[[ir.IRBuilder, ir.Value, int], None]


def elementwise(builder: ir.IRBuilder, n: IndexLike, width: int, body: Body,
                name: str = "i") -> None:
    """Run `body(builder, i, w)` over [0, n): w = `width` in a main loop, then w = 1.

    The main loop steps i by `width` while i + width <= n; the remainder loop finishes the
    last n % width elements one at a time. `body` loads and stores `<w x T>` (or scalars when
    w == 1) at element offset i, usually with `load`/`store` below. With a constant `n` the
    split is computed here and empty loops are not emitted.
    See Note [Explicit vector loops].
    """
    if width < 1:
        raise ValueError("elementwise: width must be >= 1")
    if isinstance(n, int):
        main_end: IndexLike = n - n % width if width > 1 else 0
        if main_end > 0:
            with for_range(builder, 0, main_end, step=width, name=f"{name}.vec") as i:
                body(builder, i, width)
        if main_end < n:
            with for_range(builder, main_end, n, name=f"{name}.rem") as i:
                body(builder, i, 1)
        return
    if width > 1:
        rem = builder.srem(n, ir.Constant(I64, width), name=f"{name}.nrem")
        main_end = builder.sub(n, rem, name=f"{name}.nvec")
        with for_range(builder, 0, main_end, step=width, name=f"{name}.vec") as i:
            body(builder, i, width)
    else:
        main_end = ir.Constant(I64, 0)
    with for_range(builder, main_end, n, name=f"{name}.rem") as i:
        body(builder, i, 1)


# Note [Explicit vector loops]
# We vectorise ourselves instead of leaving it to LLVM's loop vectoriser because the body may
# call transcendental functions (see vmath's Note [Why libmvec]); LLVM still optimises and
# may interleave the explicit loop. Pointers reach the body as function arguments marked
# `noalias` (abi.py's kernel signature), so LLVM need not add runtime alias checks.


def element_ptr(builder: ir.IRBuilder, base: ir.Value, index: IndexLike,
                elem: ir.Type) -> ir.Value:
    """`&base[index]` for a contiguous buffer of `elem` (an inbounds GEP on an opaque ptr)."""
    return builder.gep(base, [const(index)], inbounds=True, source_etype=elem)


def load(builder: ir.IRBuilder, base: ir.Value, index: IndexLike, elem: ir.Type,
         width: int = 1) -> ir.Value:
    """Load `base[index : index + width]` as a scalar (width 1) or `<width x elem>`.

    Vector loads assume only element alignment (numpy guarantees no more).
    """
    ptr = element_ptr(builder, base, index, elem)
    ty = elem if width == 1 else ir.VectorType(elem, width)
    return builder.load(ptr, typ=ty, align=_align(elem))


def store(builder: ir.IRBuilder, value: ir.Value, base: ir.Value, index: IndexLike) -> None:
    """Store a scalar or vector `value` at `base[index]` (the element type is taken from it)."""
    elem = value.type.element if isinstance(value.type, ir.VectorType) else value.type
    builder.store(value, element_ptr(builder, base, index, elem), align=_align(elem))


def _align(elem: ir.Type) -> int:
    if isinstance(elem, ir.DoubleType):
        return 8
    if isinstance(elem, ir.FloatType):
        return 4
    if isinstance(elem, ir.IntType):
        return max(1, elem.width // 8)
    return 1
