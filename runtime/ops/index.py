"""Indexing primitives: getitem (basic and advanced keys), scatter_add (its transpose) and
index_put (functional setitem).

A key is normalised to a hashable tuple of entries: ('i', n) integer, ('s', start, stop, step)
slice, ('n',) newaxis, ('e',) ellipsis, ('a', k) the k-th index-array operand. Boolean masks
become integer arrays (np.nonzero) when concrete; on abstract values they are an error.
"""
from __future__ import annotations

import numpy as np

from llgrad.runtime.aval import Aval
from llgrad.runtime.errors import ConcretizationError, IndexingError, user_loc
from llgrad.runtime.ops._util import as_operand, dtype_of, shape_of
from llgrad.runtime.prim import Primitive, bind, is_value, register


def numpy_key(key, idx):
    out = []
    for e in key:
        tag = e[0]
        out.append(e[1] if tag == "i" else slice(*e[1:]) if tag == "s" else None if tag == "n"
                   else Ellipsis if tag == "e" else idx[e[1]])
    return tuple(out)


def has_arrays(key) -> bool:
    return any(e[0] == "a" for e in key)


def _getitem_impl(x, *idx, key):
    return x[numpy_key(key, idx)]


def _getitem_shape(x, *idx, key):
    probe = np.broadcast_to(np.empty((), x.dtype), x.shape)
    dummy = [np.zeros(i.shape, np.int64) for i in idx]
    try:
        return Aval(probe[numpy_key(key, dummy)].shape, x.dtype)
    except IndexError as e:  # an IndexError, as numpy's: `except IndexError` still works
        raise IndexingError(f"index {describe_key(key)} does not fit shape {list(x.shape)}: "
                            f"{e}", loc=user_loc()) from None  # (y[5] = v: no op has it)


def _scatter_add_impl(g, *idx, key, shape):
    z = np.zeros(shape, g.dtype)
    k = numpy_key(key, idx)
    if idx:
        np.add.at(z, k, g)
    else:
        z[k] = g
    return z


def _index_put_impl(x, v, *idx, key):
    out = x.copy()
    out[numpy_key(key, idx)] = v
    return out


def _index_operands(n: int) -> tuple:
    """The VJPs read the index-array operands (inputs 1..n-1); of input 0 only its shape."""
    return tuple(range(1, n))


def _checked(op) -> bool:
    """An index array may be out of range: the op raises IndexError even when its result is
    never read, as numpy does (Note [Index checks] in codegen). Not for 0-d traced indices
    (`x[k]`, `a[i] = v` in Numba-style loops): kept unread, each read would hold its whole
    array live past later updates in place, and loop AD would tape the array per iteration
    (issue 13); dce replaces such an unread op by checks of its indices alone
    (`scalar_index_axes`; transform/passes/dce.py)."""
    return any(v.aval.shape != () for v in index_operands(op))


def index_operands(op) -> list:
    """The index-array operands of an indexing op (getitem, scatter_add, index_put)."""
    return op.inputs[2:] if op.prim is index_put_p else op.inputs[1:]


def indexed_shape(op) -> tuple:
    """The shape an indexing op's key indexes: its array's, or scatter_add's result's."""
    return tuple(op.params["shape"] if op.prim is scatter_add_p else op.inputs[0].aval.shape)


def scalar_index_axes(op) -> list:
    """(index operand, axis, axis length) for each 0-d index operand of an indexing op
    (getitem, scatter_add, index_put): what numpy checks of it; [] for other ops."""
    if op.prim not in INDEXING:
        return []
    shape, indices = indexed_shape(op), index_operands(op)
    key, axis, out = op.params["key"], 0, []
    for e in key:
        if e[0] == "e":
            axis += len(shape) - sum(1 for f in key if f[0] in "isa")
        elif e[0] in "isa":
            if e[0] == "a" and not indices[e[1]].aval.shape:
                out.append((indices[e[1]], axis, int(shape[axis])))
            axis += 1
    return out


def _getitem_vjp(g, out, x, *idx, key):
    return bind(scatter_add_p, g, *idx, key=key, shape=shape_of(x))


def _getitem_name(out_shape, key=(), **_):
    """PyTorch's node for x[key]: IndexBackward0 with index arrays; else its basic indexing
    is one op per entry, applied in order, and the node is the last one's (x[0] Select, x[1:]
    Slice, x[None] Unsqueeze, x[...] or x[:] Alias)."""
    if has_arrays(key):
        return "IndexBackward0"
    name = "AliasBackward0"
    for e in key:
        if e[0] == "i":
            name = "SelectBackward0"
        elif e[0] == "s" and e[1:] != (None, None, None):
            name = "SliceBackward0"
        elif e[0] == "n":
            name = "UnsqueezeBackward0"
    return name


def _keeps_batch(b, shapes, outs, params) -> bool:
    """Indexing keeps a batch's examples (axis 0 of the indexed array) apart when the key
    takes axis 0 whole and its index arrays are adjacent (numpy keeps their axes in place)."""
    key = params["key"]
    full_first = bool(key) and (key[0] == ("e",) or key[0] == ("s", None, None, None))
    pos = [k for k, e in enumerate(key) if e[0] == "a"]
    adjacent = not pos or pos[-1] - pos[0] == len(pos) - 1
    return b[0] and not any(b[1:]) and full_first and adjacent


getitem_p = register(Primitive(
    "getitem", "index", _getitem_impl, _getitem_shape,
    lambda i, *a, **p: _getitem_vjp(*a, **p) if i == 0 else None, saves=_index_operands,
    node_name=_getitem_name, batch=_keeps_batch, linear="linear", effect=_checked))

scatter_add_p = register(Primitive(
    "scatter_add", "index", _scatter_add_impl,
    lambda g, *idx, key, shape: Aval(tuple(shape), g.dtype),
    lambda i, g, out, x, *idx, key, shape: bind(getitem_p, g, *idx, key=key) if i == 0 else None,
    saves=_index_operands, node_name="IndexAddBackward0", batch=_keeps_batch,
    linear="linear", effect=_checked))


def _index_put_vjp(i, g, out, x, v, *idx, key):
    if i == 0:
        return bind(index_put_p, g, np.zeros(shape_of(v), dtype_of(g)), *idx, key=key)
    if i == 1:
        gv = bind(getitem_p, g, *idx, key=key)
        if not idx:  # basic indexing writes each element once
            return gv
        last = _last_writes(shape_of(x), shape_of(v), idx, key)
        return gv if last is True else gv * last
    return None


# Note [Repeated indices]
# numpy's `x[idx] = v` (and so `x[idx] += v`, which is `x[idx] = x[idx] + v`) with an index
# repeated keeps the last write: x = 0; x[[0, 0]] = [a, b] gives x[0] == b, and a has no
# effect. So the cotangent of v is g[idx] only where that entry of v is the last write to its
# position, and zero for the earlier ones. `_last_writes` finds them with index_put itself
# (the position of each entry, written in order, read back). With concrete indices this is
# numpy at trace time and vanishes when nothing repeats; np.add.at (scatter_add) is the
# accumulating update.
def _last_writes(x_shape, v_shape, idx, key):
    """1 where an entry of v is the last write to its position in x, else 0 (True when all
    are, known statically: so when v is one element, as in a loop's `a[i] = s`)."""
    if int(np.prod(v_shape, dtype=np.int64)) <= 1:
        return True
    ids = np.arange(int(np.prod(v_shape, dtype=np.int64)), dtype=np.int64).reshape(v_shape)
    if not any(is_value(i) for i in idx):
        pos = np.full(x_shape, -1, np.int64)
        pos[numpy_key(key, idx)] = ids
        last = pos[numpy_key(key, idx)] == ids
        return True if last.all() else last.astype(np.float64)
    from llgrad.runtime.ops.elementwise import astype, eq
    pos = bind(index_put_p, np.full(x_shape, -1, np.int64), ids, *idx, key=key)
    return astype(eq(bind(getitem_p, pos, *idx, key=key), ids), np.float64)


index_put_p = register(Primitive(
    "index_put", "index", _index_put_impl, lambda x, v, *idx, key: Aval(x.shape, x.dtype),
    _index_put_vjp, saves=lambda n: (1, *range(2, n)), node_name="IndexPutBackward0",
    linear="linear", effect=_checked))

INDEXING = (getitem_p, scatter_add_p, index_put_p)  # the primitives with keys and index checks


# ---- the ops API ------------------------------------------------------------------------------
def describe_key(key) -> str:
    parts = []
    for e in key:
        tag = e[0]
        if tag == "i":
            parts.append(str(e[1]))
        elif tag == "s":
            parts.append(":".join("" if v is None else str(v) for v in e[1:3]) +
                         ("" if e[3] is None else f":{e[3]}"))
        else:
            parts.append({"n": "None", "e": "...", "a": f"<array{e[1]}>"}[tag])
    return "[" + ", ".join(parts) + "]"


def _concrete(v):
    fn = getattr(type(v), "_lg_concrete", None)
    return None if fn is None else fn(v)


def normalize_key(key):
    """A user's index -> (hashable key, list of index-array operands)."""
    if not isinstance(key, tuple):
        key = (key,)
    out, idx = [], []
    for k in key:
        if k is None:
            out.append(("n",))
        elif k is Ellipsis:
            out.append(("e",))
        elif isinstance(k, slice):
            out.append(("s", _int_or_none(k.start), _int_or_none(k.stop), _int_or_none(k.step)))
        elif isinstance(k, (bool, np.bool_)):  # expanded by _bool_axes before
            raise TypeError("a 0-d boolean index reached normalize_key (an llgrad bug)")
        elif isinstance(k, (int, np.integer)):
            out.append(("i", int(k)))
        else:
            arr = k if is_value(k) else np.asarray(k)
            if dtype_of(arr) == np.bool_:
                conc = arr if not is_value(arr) else _concrete(arr)
                if conc is None:
                    raise ConcretizationError(
                        "indexing with a boolean mask gives a shape that depends on the data",
                        fix="use np.where(mask, x, 0) instead of x[mask]")
                for nz in np.nonzero(conc):
                    out.append(("a", len(idx)))
                    idx.append(nz)
            else:
                if dtype_of(arr).kind not in "iu":
                    raise TypeError(f"index arrays must be integers or booleans, got {dtype_of(arr)}")
                if len(shape_of(arr)) == 0 and not is_value(arr):
                    out.append(("i", int(arr)))
                    continue
                out.append(("a", len(idx)))
                idx.append(arr)
    return tuple(out), idx


def has_traced_bounds(key) -> bool:
    """Whether a slice of `key` has a bound only known at run time (a traced int)."""
    for k in key if type(key) is tuple else (key,):
        if type(k) is slice and (_traced(k.start) or _traced(k.stop) or _traced(k.step)):
            return True
    return False


def traced_mask(k) -> bool:
    """A boolean index array (of at least one axis) known only at run time."""
    return is_value(k) and dtype_of(k) == np.bool_ and shape_of(k) != () and _traced(k)


def _has_mask(key) -> bool:
    """Whether `key` holds a traced mask (runtime/padded_masks.py). On eager getitem's hot
    path: the usual index types are passed over by their type alone."""
    if type(key) is not tuple:
        return type(key) not in _PLAIN_INDICES and traced_mask(key)
    for k in key:
        if type(k) not in _PLAIN_INDICES and traced_mask(k):
            return True
    return False


_PLAIN_INDICES = frozenset({int, slice, type(None), type(Ellipsis), np.ndarray, list})


def _traced(b) -> bool:
    """An IR value with no concrete value (eager Tensors are concrete, never traced)."""
    return getattr(type(b), "_lg_level", -1) >= 1 and _concrete(b) is None


def _int_or_none(v):
    if v is None:
        return None
    if is_value(v):
        c = _concrete(v)
        if c is None:
            raise ConcretizationError("slice bounds must be concrete integers",
                                      fix="use Python ints (or x.shape) for slice bounds")
        v = c
    return int(v)


# Note [0-d boolean indices]
# numpy indexes with a 0-d boolean (True, np.bool_(False), np.array(True)) as with a mask over
# a new axis of length 1 at its place: x[True] is x[None], x[False] an empty first axis, and
# with other index arrays it is an index array of shape (1,) or (0,) broadcast with them
# (x[0, True] has shape (1, ...)). _bool_axes inserts that axis into x and puts such an index
# array in the key; setitem and index_add take the axis out again. (Left as it was, an
# entry True would read as the integer index 1.)
def _bool_flag(k):
    """The value of a 0-d boolean index entry, or None for any other entry."""
    if isinstance(k, (bool, np.bool_)):
        return bool(k)
    if isinstance(k, np.ndarray) or is_value(k):
        if dtype_of(k) != np.bool_ or shape_of(k) != ():
            return None
        conc = k if not is_value(k) else _concrete(k)
        if conc is None:
            raise ConcretizationError(
                "indexing with a boolean mask gives a shape that depends on the data",
                fix="use np.where(mask, x, 0) instead of x[mask]")
        return bool(conc)
    return None


def _consumed(k) -> int:
    """How many axes of x a (non-Ellipsis) key entry indexes."""
    if k is None or _bool_flag(k) is not None:
        return 0
    if isinstance(k, (slice, int, np.integer)):
        return 1
    arr = k if is_value(k) or isinstance(k, np.ndarray) else np.asarray(k)
    return len(shape_of(arr)) if dtype_of(arr) == np.bool_ else 1


_PLAIN = frozenset({int, slice, type(None), type(Ellipsis)})


def _bool_axes(x, key):
    """x with a new axis per 0-d boolean entry of `key`, and the key indexing it (Note [0-d
    boolean indices]); (x, key) unchanged when there is none."""
    key = key if isinstance(key, tuple) else (key,)
    if all(type(k) in _PLAIN for k in key):  # the common keys, cheaply (eager indexing)
        return x, key
    flags = [_bool_flag(k) for k in key]
    if all(f is None for f in flags):
        return x, key
    from llgrad.runtime.ops.shape import unsqueeze
    key = list(key)
    for j, flag in enumerate(flags):
        if flag is None:
            continue
        if any(k is Ellipsis for k in key[:j]):
            at = len(shape_of(x)) - sum(_consumed(k) for k in key[j + 1:])
        else:
            at = sum(_consumed(k) for k in key[:j])
        x, key[j] = unsqueeze(x, at), np.zeros(int(flag), np.int64)
    return x, tuple(key)


def getitem(x, key):
    if _has_mask(key):  # Note [Boolean masks of data-dependent length]
        from llgrad.runtime import padded_masks
        return padded_masks.getitem(x, key)
    if has_traced_bounds(key):  # Note [Slices of loop-dependent length] (runtime/padded.py)
        from llgrad.runtime import padded
        return padded.getitem(x, key)
    x = as_operand(x)
    x, key = _bool_axes(x, key)
    k, idx = normalize_key(key)
    if not is_value(x) and not any(is_value(i) for i in idx):
        return x[numpy_key(k, idx)]
    if k == (("e",),):
        return x
    return bind(getitem_p, x, *idx, key=k)


def setitem(x, key, v):
    """Functional `x[key] = v`: a new value equal to x except at key (the last write wins
    where an index repeats: Note [Repeated indices])."""
    from llgrad.runtime.ops.shape import broadcast_to
    if _has_mask(key):  # Note [Boolean masks of data-dependent length]
        from llgrad.runtime import padded_masks
        return padded_masks.setitem(x, key, v)
    if has_traced_bounds(key) or getattr(type(v), "_lg_padded", False):
        from llgrad.runtime import padded  # Note [Slices of loop-dependent length]
        return padded.setitem(x, key, v)
    shape, (x, key) = shape_of(x), _bool_axes(x, key)
    k, idx = normalize_key(key)
    target = _getitem_shape(Aval(shape_of(x), dtype_of(x)), *idx, key=k).shape
    from llgrad.runtime.ops.elementwise import astype
    # The value is cast to x's dtype, as numpy and PyTorch assign (a Python number directly:
    # no detour through another dtype's rounding).
    v = astype(v if is_value(v) else np.asarray(v), dtype_of(x))
    v = broadcast_to(v, target)
    return _unexpanded(bind(index_put_p, x, v, *idx, key=k), shape)


def _unexpanded(x, shape):
    """x without the axes _bool_axes added."""
    if shape_of(x) == tuple(shape):
        return x
    from llgrad.runtime.ops.shape import reshape
    return reshape(x, tuple(shape))


def index_add(x, key, v):
    """Functional `np.add.at(x, key, v)`: x plus v at key, repeated indices accumulating."""
    from llgrad.runtime.ops.elementwise import add, astype
    from llgrad.runtime.ops.shape import broadcast_to
    if has_traced_bounds(key) or _has_mask(key):  # a slice or a mask: no index repeats
        return setitem(x, key, add(getitem(x, key), v))
    shape, (xe, key) = shape_of(x), _bool_axes(x, key)
    k, idx = normalize_key(key)
    target = _getitem_shape(Aval(shape_of(xe), dtype_of(x)), *idx, key=k).shape
    v = astype(v if is_value(v) else np.asarray(v), dtype_of(x))
    return add(x, _unexpanded(bind(scatter_add_p, broadcast_to(v, target), *idx, key=k,
                                   shape=shape_of(xe)), shape))


def slice_axis(x, axis, start, stop):
    nd = len(shape_of(x))
    key = tuple(("s", start, stop, None) if i == axis % nd else ("s", None, None, None)
                for i in range(nd))
    return bind(getitem_p, x, key=key)
