"""Traced counterparts of `math.*` and builtins (`max`, `min`, `float`, `int`), used by
`operators.converted_call` when an argument is traced: as written they would concretise it.

They keep Python's types: `math.sin(x)` is a Python float whatever x's dtype (a weak float64
value), `float(i)` of a loop counter is the same number as a Python float (See Note [Two
promotion rules] in runtime/promotion.py).
"""
from __future__ import annotations

import math
from typing import Callable

import numpy as np

from llgrad.runtime.errors import ShapeError, UnsupportedError, user_loc
from llgrad.runtime.prim import is_value

from . import ode


def _traced_builtins() -> dict:
    """`math.*` and builtins that need a traced counterpart (they would concretise)."""
    from llgrad.runtime import ops
    table = {getattr(math, n): _math(getattr(ops, m)) for n, m in [
        ("exp", "exp"), ("log1p", "log1p"), ("expm1", "expm1"), ("log2", "log2"),
        ("log10", "log10"), ("sin", "sin"), ("cos", "cos"), ("tan", "tan"), ("asin", "arcsin"),
        ("acos", "arccos"), ("atan", "arctan"), ("atan2", "arctan2"), ("sinh", "sinh"),
        ("cosh", "cosh"), ("tanh", "tanh"), ("asinh", "arcsinh"), ("acosh", "arccosh"),
        ("atanh", "arctanh"), ("sqrt", "sqrt"), ("fabs", "abs"), ("pow", "pow"),
        ("copysign", "copysign"), ("fmod", "fmod"), ("erf", "erf"), ("erfc", "erfc"),
        ("gamma", "gamma"), ("lgamma", "lgamma"), ("degrees", "rad2deg"),
        ("radians", "deg2rad")] + [("exp2", "exp2"), ("cbrt", "cbrt")] * hasattr(math, "cbrt")}
    table[math.log] = _math_log
    table[math.hypot] = _math_hypot
    table.update({getattr(math, n): _math_int(getattr(ops, n)) for n in ("floor", "ceil", "trunc")})
    table.update({getattr(math, n): _math_bool(getattr(ops, n)) for n in ("isnan", "isinf",
                                                                          "isfinite")})
    table[math.prod] = _math_prod
    table[max] = _extremum(max, ops.gt)
    table[min] = _extremum(min, ops.lt)
    table[any] = _truth(any, ops.logical_or)
    table[all] = _truth(all, ops.logical_and)
    table[sorted] = _sorted
    table[math.fsum] = _fsum
    table[isinstance] = _isinstance
    table[round] = _round
    table[sum] = _sum
    table[np.apply_along_axis] = _apply_along_axis
    table[np.piecewise] = _piecewise
    table[np.poly1d] = _poly1d
    table[float] = _number(float)
    table[int] = _number(int)
    table[zip] = lambda *args, **kwargs: Zipped(zip, args, kwargs)
    table[enumerate] = lambda *args, **kwargs: Zipped(enumerate, args, kwargs)
    # np.zeros(...) and friends: listed so converted code calls them through converted_call,
    # which also catches a list shape holding traced ints (operators._converted_target)
    table.update((f, static_shape(f)) for f in SHAPED)
    table.update(ode.traced_forms())  # (scipy.integrate's, once it is imported)
    return table


def _extremum(builtin, better: Callable) -> Callable:
    """Python's max(a, b, ...) / min(a, b, ...), or of one iterable of them (a generator, a
    dict's values), with key= and default=: a fold of `b if bool(better(key(b), key(a))) else
    a` (the first of equal ones wins, as in Python), each bool() a `where`, so the gradient
    flows to the item chosen. Python takes bool() of each comparison, which raises for arrays
    of more than one element (np.maximum is the elementwise form); of one element, it returns
    one operand itself, whose shape must then not depend on which."""
    def call(*args, key=None, **kwargs):
        if len(args) == 1:
            items = args[0] if is_value(args[0]) or type(args[0]) is np.ndarray else \
                list(args[0])  # (a generator or a view: its items, once)
        else:
            items = args
        if len(items) < 2 or set(kwargs) - {"default"} or key is None and not is_value(
                items) and not any(map(is_value, items)):
            return builtin(*(args if len(args) > 1 else (items,)), key=key, **kwargs)
        from .operators import converted_call
        keys = items if key is None else [converted_call(key, (v,), None) for v in items]
        best, best_key = items[0], keys[0]
        for v, k in zip(items[1:], keys[1:]):
            best, best_key = _pick(builtin.__name__, better, best, v, best_key, k)
        return best
    return call


def _truth(builtin, fold: Callable) -> Callable:
    """Python's any()/all() of an iterable holding traced one-element values: one traced bool
    (a fold of logical_or/logical_and) instead of a bool() per item. Every item is evaluated
    (a generator does not stop at the first deciding one)."""
    def call(iterable, /):
        items = list(iterable)
        if not any(map(is_value, items)):
            return builtin(items)
        from llgrad.runtime import ops
        out = None
        for v in items:
            if is_value(v) and int(np.prod(v.shape, dtype=np.int64)) != 1:
                raise ShapeError(
                    f"{builtin.__name__}() of an array of shape {list(v.shape)}: Python takes "
                    f"the truth value of each item, and the truth value of an array with "
                    f"more than one element is ambiguous", loc=user_loc(),
                    fix=f"use np.{builtin.__name__}(...) over the array")
            b = ops.reshape(ops.astype(v, np.bool_), ()) if is_value(v) else bool(v)
            out = b if out is None else fold(out, b)
        return out
    return call


def _sum(iterable, /, start=0):
    """Python's sum() of traced values of one shape and floating dtype: one reduction of them
    stacked instead of one add per item, so the IR does not grow with their number (the list
    a staged loop appended to is its buffer again: Note [Containers in staged loops] in
    effects.py). Rounding is the reduction's, not Python's left fold; the value differs only
    there. Anything else (Python numbers among them, mixed shapes, lists to concatenate) is
    the builtin's."""
    items = iterable if type(iterable) in (list, tuple) else list(iterable)
    first = items[0] if items else None
    if len(items) < 2 or not all(
            is_value(v) and v.dtype.kind in "fc" and v.dtype == first.dtype and
            tuple(v.shape) == tuple(first.shape) and
            getattr(v, "_lg_weak", False) == getattr(first, "_lg_weak", False) for v in items):
        return sum(items, start)
    from llgrad.runtime import ops
    total = ops.reduce_sum(ops.stack(items), (0,))
    if getattr(first, "_lg_weak", False):  # (Python floats sum to a Python float)
        total = _weak(total)
    return total if type(start) is int and start == 0 else start + total


def _sorted(iterable, /, *, key=None, reverse=False):
    """Python's sorted() of traced scalars of one dtype (or with a key= giving those): one
    stable argsort of the keys stacked, the items gathered in that order, as a list of 0-d
    values, instead of a bool() per comparison (which sends the function to the dynamic
    path). Equal keys keep their order, reversed or not, as in Python. Anything else (Python
    numbers among the keys, array items) is sorted by Python."""
    items = list(iterable)
    if key is None:
        keys = items
    else:
        from .operators import converted_call
        keys = [converted_call(key, (v,), None) for v in items]
    if not items or not (_scalars(keys) and (keys is items or _scalars(items))):
        order = sorted(range(len(items)), key=keys.__getitem__, reverse=reverse)
        return [items[i] for i in order]
    from llgrad.runtime import ops
    if keys is items:
        out = ops.sort(ops.stack(items), descending=reverse)
    else:
        out = ops.take(ops.stack(items), ops.argsort(ops.stack(keys), descending=reverse))
    return [out[i] for i in range(len(items))]


def _scalars(values) -> bool:
    """Traced 0-d values of one dtype."""
    return all(is_value(v) and tuple(v.shape) == () and v.dtype == values[0].dtype
               for v in values)


def _isinstance(obj, classinfo, /) -> bool:
    """isinstance() of a traced value answers for the numpy object it stands for: an ndarray,
    or of shape () a numpy scalar (np.float64 is a float, as x[0] and np.sum(x) are in
    numpy); also true for llgrad's own classes."""
    if is_value(obj):
        stand_in = obj.dtype.type(0) if tuple(obj.shape) == () else np.empty(0, obj.dtype)
        return isinstance(obj, classinfo) or isinstance(stand_in, classinfo)
    return isinstance(obj, classinfo)


def _round(number, ndigits=None):
    """round() of a traced value, as of the numpy object it stands for: with ndigits,
    np.round (half to even, as Python); without, an int, so concretisation (as int(t))."""
    if not is_value(number):
        return round(number, ndigits)
    from llgrad.runtime import ops
    if ndigits is None:
        return int(ops.round(number))
    return ops.round(number, ndigits)


def _fsum(iterable, /):
    """math.fsum of traced values: their sum as one array op (exactly rounded in fsum, here
    to float64 rounding, pairwise), as a float64 scalar."""
    items = list(iterable)
    if not any(map(is_value, items)) or any(is_value(v) and v.shape != () for v in items):
        return math.fsum(items)  # (of arrays: Python's TypeError, or concretisation)
    from llgrad.runtime import ops
    from llgrad.runtime.conversions import array_from
    return _weak(ops.astype(ops.sum(array_from(items)), np.float64))  # (a Python float)


def _apply_along_axis(func1d, axis, arr, *args, **kwargs):
    """np.apply_along_axis: batched (Note [np.apply_along_axis on traced values]) when `arr`
    is traced, else numpy's."""
    if not is_value(arr):
        return np.apply_along_axis(func1d, axis, arr, *args, **kwargs)
    from llgrad.batching import along_axis
    return along_axis(func1d, axis, arr, *args, **kwargs)


def _piecewise(x, condlist, funclist, *args, **kw):
    """np.piecewise on traced values, as numpy computes it: each function sees only its
    elements, `x[cond]` (a masked selection, Note [Boolean masks of data-dependent length]),
    and its result is written at `cond`, later conditions over earlier ones, into zeros of
    x's dtype; one more function than conditions applies where none holds. So a branch
    undefined elsewhere (`np.log` of the negatives) never reaches the value or the gradient,
    as it would through np.where."""
    conds = condlist if type(condlist) in (list, tuple) else [condlist]
    if not is_value(x) and not any(is_value(c) for c in conds):
        return np.piecewise(x, condlist, funclist, *args, **kw)
    from llgrad.runtime import ops

    from .operators import converted_call
    shape = tuple(np.shape(x))
    conds = [ops.broadcast_to(ops.astype(c, np.bool_), shape) for c in conds]
    if len(funclist) == len(conds) + 1:
        none = conds[0]
        for c in conds[1:]:
            none = ops.logical_or(none, c)
        conds.append(ops.logical_not(none))
    elif len(funclist) != len(conds):
        raise ValueError(f"with {len(conds)} condition(s), either {len(conds)} or "
                         f"{len(conds) + 1} functions are expected")
    y = np.zeros(shape, np.result_type(x))
    for cond, func in zip(conds, funclist):
        value = converted_call(func, (ops.getitem(x, cond), *args), kw) if callable(func) \
            else func
        y = ops.setitem(y, cond, value)
    return y


def _poly1d(c_or_r, *args, **kwargs):
    """np.poly1d of traced coefficients: numpy's class holds a numpy array (its constructor
    trims the leading zeros by value), so it is refused with the function to use instead."""
    if not is_value(c_or_r) and not any(is_value(v) for v in np.ravel(
            np.asarray(c_or_r, dtype=object))):
        return np.poly1d(c_or_r, *args, **kwargs)
    raise UnsupportedError("np.poly1d of traced coefficients is not supported", loc=user_loc(),
                           fix="evaluate the polynomial with np.polyval(c, x) (highest power "
                           "first, as poly1d), or build the poly1d outside the function")


def _pick(name: str, better: Callable, a, b, ka, kb):
    """(b, kb) if better(kb, ka) else (a, ka), where ka and kb are the keys of a and b
    (one-element operands; see _extremum)."""
    if not (is_value(ka) or is_value(kb)):
        return (b, kb) if (kb > ka if name == "max" else kb < ka) else (a, ka)
    shapes = [tuple(v.shape) if is_value(v) else np.shape(v) for v in (ka, kb)]
    size = int(np.prod(np.broadcast_shapes(*shapes), dtype=np.int64))
    if size != 1:
        what = ("an empty array is ambiguous" if size == 0 else
                "an array with more than one element is ambiguous")
        raise ShapeError(
            f"{name}(a, b) of arrays of shapes {list(shapes[0])} and {list(shapes[1])}: "
            f"Python's {name} takes the truth value of `b {'>' if name == 'max' else '<'} "
            f"a`, and the truth value of {what}", loc=user_loc(),
            fix=f"use np.{name}imum(a, b) for the elementwise {name}imum, or "
            f"np.{name}(...) over an array")
    c = better(kb, ka)
    best = _select(name, c, b, a)
    return best, (best if ka is a and kb is b else _select(name, c, kb, ka))


def _select(name: str, c, b, a):
    """`b if c else a` for a traced bool `c`: a where per leaf of tuples and lists of one
    structure (`max(enumerate(x), key=...)` gives a traced index and value)."""
    if type(a) in (tuple, list) and type(b) is type(a) and len(a) == len(b):
        return type(a)(_select(name, c, u, v) for u, v in zip(b, a))
    if a is b:
        return a
    shapes = [tuple(v.shape) if is_value(v) else np.shape(v) for v in (a, b)]
    if shapes[0] != shapes[1]:
        raise UnsupportedError(
            f"{name}(a, b) of operands of shapes {list(shapes[0])} and {list(shapes[1])} "
            f"under a traced comparison: Python returns a or b itself, so the result's shape "
            f"depends on the values", loc=user_loc(),
            fix=f"give both the same shape, or use np.{name}imum(a, b)")
    from llgrad.runtime import ops
    return ops.where(c, b, a)


class Zipped:
    """`zip(...)` / `enumerate(...)` called while tracing. A `for` loop over it, when each
    argument is an array (traced, or numeric numpy: Note [Loops over numpy arrays] in
    staging.py) of one axis or more, or a range, is staged as one loop whose body gets row i
    of each (Stager.stage_for), as `for row in x:` is, instead of running once per row at
    trace time; any other use (list(), dict(), next()) iterates the builtin's own object."""

    __slots__ = ("builtin", "args", "kwargs", "arrays", "length", "_it")

    def __init__(self, builtin, args, kwargs):
        self.builtin, self.args, self.kwargs, self._it = builtin, args, kwargs, None
        self.arrays, self.length = (), None
        if builtin is enumerate:
            if len(args) == 1 and set(kwargs) <= {"start"} and \
                    type(kwargs.get("start", 0)) is int and _rows(args[0]) is not None:
                self.arrays, self.length = (args[0],), _rows(args[0])
        elif args and set(kwargs) <= {"strict"}:
            lengths = [len(a) if type(a) is range else _rows(a) for a in args]
            if None not in lengths and (not kwargs.get("strict") or len(set(lengths)) == 1):
                self.arrays = tuple(a for a in args if type(a) is not range)
                self.length = min(lengths) if self.arrays else None

    @property
    def stageable(self) -> bool:
        return self.length is not None and self._it is None

    def __getitem__(self, i):
        """The item of iteration i (a Python or traced int)."""
        from llgrad.runtime import ops
        if self.builtin is enumerate:
            start = self.kwargs.get("start", 0)
            return (i + start if start else i), ops.getitem(self.args[0], i)
        return tuple((a.start + i * a.step if a.step != 1 else a.start + i) if type(a) is range
                     else ops.getitem(a, i) for a in self.args)

    def __iter__(self):
        return self

    def __next__(self):
        if self._it is None:
            self._it = iter(self.builtin(*self.args, **self.kwargs))
        return next(self._it)


# Note [Loops over lists of traced values]
# A list argument of many same-shaped arrays (a sequence of inputs, minibatches, a list of
# dicts of arrays) is a list of traced leaves. Iterated as Python (`for x in xs:`), the loop
# was unrolled, one copy of the body per item, silently: 200 items took 3 s to compile. When
# every item has the same structure and its leaves are traced values of the same shape and
# dtype, the loop instead iterates over the items stacked (one np.stack per leaf, before the
# loop), staged as one loop whose body gets row i of each stack, rebuilt as the item's
# structure; the stack's VJP sends each row's cotangent back to its item. A body that
# replaces or appends items of the list it iterates over would not see them in the stack
# (Python's iteration does): that loop is unrolled (operators._left_alone). Short lists
# (below STACKED_MIN items) stay unrolled, as Python would run them; so do lists that mix
# Python numbers with arrays, or whose items differ in shape (layers of a network).
STACKED_MIN = 8


class StackedItems(Zipped):
    """The items of a list of same-structured traced values, stacked, as a stageable
    iterable (Note [Loops over lists of traced values]); item i is rebuilt from row i."""

    __slots__ = ("struct", "weak", "items")

    def __init__(self, items, struct, columns: list, weak: list):
        from llgrad.runtime import ops
        super().__init__(zip, (), {})
        self.items = list(items)  # (as they were: operators._left_alone)
        self.args = (self.items,)  # (iterated as Python: the items themselves)
        self.builtin = iter
        self.struct, self.weak = struct, weak
        self.arrays = tuple(ops.stack(c) for c in columns)
        self.length = len(items)

    def __getitem__(self, i):
        from llgrad.runtime import ops
        from llgrad.runtime.pytree import unflatten
        rows = [ops.getitem(a, i) for a in self.arrays]
        for r, w in zip(rows, self.weak):
            if w:
                r._lg_weak = True  # See Note [Two promotion rules] in runtime/promotion.py
        return unflatten(self.struct, rows)


def stacked_items(items, at_least: int = STACKED_MIN) -> StackedItems | None:
    """`items` (a list or tuple) as a StackedItems, or None when they cannot be stacked
    (Note [Loops over lists of traced values])."""
    from llgrad.runtime.pytree import flatten
    if len(items) < at_least:
        return None
    leaves, struct = flatten(items[0])
    if not leaves or not all(is_value(v) for v in leaves):
        return None
    key = [(tuple(v.aval.shape), v.aval.dtype, getattr(v, "_lg_weak", False)) for v in leaves]
    columns = [[v] for v in leaves]
    for item in items[1:]:
        ls, st = flatten(item)
        if st != struct or len(ls) != len(key) or not all(
                is_value(v) and (tuple(v.aval.shape), v.aval.dtype,
                                 getattr(v, "_lg_weak", False)) == k for v, k in zip(ls, key)):
            return None
        for c, v in zip(columns, ls):
            c.append(v)
    return StackedItems(items, struct, columns, [k[2] for k in key])


def _rows(a) -> int | None:
    """The length of a traced or numeric numpy array a loop can read rows of."""
    if type(a) is np.ndarray and a.dtype.kind not in "biuf":
        return None
    shape = tuple(a.shape) if is_value(a) or type(a) is np.ndarray else ()
    return shape[0] if shape else None


SHAPED = frozenset((np.zeros, np.ones, np.empty, np.full))


def static_shape(f: Callable) -> Callable:
    """np.zeros/ones/empty/full given a traced shape (a loop counter, `np.zeros(i)`) or, to
    np.full, a traced fill value (which broadcasts): shapes are static, so each traced entry
    is concretised where numpy would refuse it with its own error. A counter makes the tracer
    unroll its loop (Note [Values a static loop made traced] in staging.py); another value
    sends the function to the dynamic path, or is an error naming the line."""
    def call(*args, **kwargs):
        if "shape" in kwargs:
            kwargs["shape"] = _static(kwargs["shape"], f)
        else:
            args = (_static(args[0], f),) + args[1:]
        if f is np.full:
            return _full(*args, **kwargs)
        return f(*args, **kwargs)
    return call


def _full(shape, fill_value, dtype=None, order="C", **kw):
    """np.full of a traced fill value: the value broadcast (numpy's dtype: the value's)."""
    if not is_value(fill_value):
        return np.full(shape, fill_value, dtype, order, **kw)
    from llgrad.runtime.ops.arrays import full_like
    return full_like(fill_value, fill_value, dtype, shape)


def _static(shape, f):
    if is_value(shape):
        return int(shape._concretize(f"the shape given to np.{f.__name__}"))
    if type(shape) in (list, tuple):
        return type(shape)(_static(d, f) for d in shape)
    return shape


def _weak(v):
    v._lg_weak = True  # See Note [Two promotion rules] in runtime/promotion.py
    return v


def _math(op: Callable) -> Callable:
    """math.f: a Python float, computed in float64 whatever the argument's dtype."""
    def call(*args):
        return _weak(op(*(_float(a) for a in args)))
    return call


def _math_log(x, base=None):
    """math.log(x) or math.log(x, base), the latter as log(x) / log(base), as CPython does."""
    from llgrad.runtime import ops
    def log(v):  # (ops.log of a Python float would be float32: PyTorch's default dtype)
        return ops.log(_float(v)) if is_value(v) else math.log(v)
    return _weak(log(x) if base is None else log(x) / log(base))


def _math_hypot(*coords):
    """math.hypot of any number of coordinates (Python 3.8+), folded pairwise."""
    from llgrad.runtime import ops
    r = 0.0
    for c in coords:  # (two Python floats: math's, not ops' float32; See _math_log)
        r = ops.hypot(r, _float(c)) if is_value(r) or is_value(c) else math.hypot(r, c)
    return _weak(r) if is_value(r) else r


def _math_int(op: Callable) -> Callable:
    """math.floor/ceil/trunc: a Python int (a traced int64, no gradient), as in Python."""
    def call(x):
        from llgrad.runtime import ops
        return _weak(ops.astype(op(_float(x)), "int64"))
    return call


def _math_bool(op: Callable) -> Callable:
    """math.isnan/isinf/isfinite: a Python bool (traced)."""
    def call(x):
        return _weak(op(_float(x)))
    return call


def _math_prod(items, *, start=1):
    """math.prod: the running product, left to right, as Python computes it."""
    r = start
    for v in items:
        r = r * v
    return r


def _float(a):
    from llgrad.runtime import ops
    if not is_value(a):
        return float(a)
    if a.shape != ():
        raise TypeError("only 0-dimensional arrays can be converted to Python scalars")
    return ops.astype(a, "float64")


def _number(kind: type) -> Callable:
    """float(i) / int(i) of a value standing for a Python int or bool (a loop counter): the
    same number, still traced (it carries no gradient). Of any other traced value (a float
    argument, an array element): concretisation, as documented for float(t)."""
    def call(v, *rest):
        from llgrad.runtime import ops
        if rest or not getattr(v, "_lg_weak", False) or v.dtype.kind not in "biu":
            return kind(v, *rest)
        if kind is int and v.dtype.kind != "b":
            return v
        return _weak(ops.astype(v, "float64" if kind is float else "int64"))
    return call


_TRACED_BUILTINS: dict = {}
_LAZY_LEFT = [-1]  # how many of numpy_api.LAZY were unresolved when the table was built


def traced_builtins() -> dict:
    """Library callables with a traced counterpart (see _converted_target): math.*, max/min,
    float/int, numpy's conversions (np.asarray, np.array, ...) and scipy's Python-level
    functions, the latter known once scipy is imported (Note [Lazily named functions] in
    runtime/numpy_api.py)."""
    from llgrad.runtime import numpy_api
    numpy_api.resolve_lazy()
    if len(numpy_api.LAZY) != _LAZY_LEFT[0]:
        _TRACED_BUILTINS.update(_traced_builtins())
        _TRACED_BUILTINS.update(numpy_api.traced_forms())
        _LAZY_LEFT[0] = len(numpy_api.LAZY)
    return _TRACED_BUILTINS
