"""Call trees and element updates.

Output invariants:
- a call whose callee may be the user's own function (or a function of a library in
  CONVERTED_LIBRARIES, See Note [Library code on traced values]) becomes
  ``__lg.converted_call(f, (args...), {kwargs} or None)``; calls that resolve, at conversion
  time, to numpy/math/builtins/llgrad objects or classes stay as written (readable output;
  converted_call makes the same decision again at run time for the others), unless the
  callee has a traced form (np.asarray, math.exp, scipy.special.logsumexp), is ``print``
  (Note [Python effects in staged code] in tracer/effects.py), or a list is written among
  the arguments (``np.sum([1, a * a])``); a parameter of the function (or a part of one)
  given to a numpy function or ufunc becomes ``__lg.list_arg(c)`` there (it may be a list of
  traced scalars); ``len(x)`` becomes ``__lg.len_(x)``;
- ``for x in range(...)`` (the builtin) iterates ``__lg.range_(...)``, which a staged loop
  can read bounds from (also marked: ``llgrad.checkpointed(range(...))``), and ``for x in
  reversed(range(...))`` ``__lg.reversed_range_(...)``;
- a read ``y[i]`` whose index is not all constants becomes ``__lg.item(y, i)`` (Note [Numpy
  arrays indexed by traced values]);
- ``y[i] = v`` and ``y[i] op= v`` on a local name ``y`` become ``y = __lg.setitem(y, i, v)``
  and ``y = __lg.setitem(y, i, __lg.iop(__lg.item(y, i), v))``, and the statement
  ``np.add.at(y, i, v)`` becomes ``y = __lg.ufunc_at(np.add.at, (y, i, v))`` (and
  ``np.fill_diagonal(y, v)`` ``y = __lg.setitem(y, __lg.diagonal_index(y, False), v)``),
  so a traced ``y`` is rebound (and becomes loop-carried state) while a numpy ``y`` is still
  updated in place;
- every other store into an object (``o.a = v``, ``o.a += v``, ``del o.a``, ``o.b[i] = v``)
  is preceded by ``__lg.note_attr(o, 'a')`` / ``__lg.note_item(o.b, i, delete)`` (See Note
  [Stores in traced branches] in tracer/stores.py); the object and index expressions are
  evaluated twice, unless they contain a call (then ``__lg.UNKNOWN`` is noted); the value of
  ``o.b[i] = v`` is ``__lg.item_value(o.b, v)`` (a traced value into a numpy array held
  there is refused at its line).
Nested def/class bodies are not rewritten (they are converted when called).
"""

from __future__ import annotations

import builtins
import types
from typing import Any, Callable

import gast
import numpy as np

from . import anno, templates
from .comprehensions import is_list_comp
from ..checkpointed import checkpointed

LIBRARY_ROOTS = frozenset({
    "numpy", "math", "cmath", "operator", "functools", "itertools", "builtins", "random",
    "scipy", "llgrad", "collections", "typing", "warnings", "time", "os", "sys", "re"})

_IOPS = {
    gast.Add: "iadd", gast.Sub: "isub", gast.Mult: "imul", gast.Div: "itruediv",
    gast.FloorDiv: "ifloordiv", gast.Mod: "imod", gast.Pow: "ipow", gast.MatMult: "imatmul",
    gast.BitAnd: "iand", gast.BitOr: "ior", gast.BitXor: "ixor", gast.LShift: "ilshift",
    gast.RShift: "irshift"}

_WHOLE = (gast.Add, gast.Sub, gast.Mult, gast.Div, gast.FloorDiv, gast.Mod, gast.Pow,
          gast.MatMult)  # the operators `__lg` has for a whole name (tracer/updates.py)

MISSING = _MISSING = object()

# Note [Library code on traced values]
# numpy's conversions (np.asarray, np.asanyarray) cannot return a traced value, so a library
# function that begins by converting its argument (scipy.optimize.rosen, most of scipy) cannot
# run on traced values as it is. The Python functions of these libraries are therefore
# converted like the user's own when a call passes them a traced value: their np.asarray calls
# become graph ops (traced forms in tracer/operators.py), their numpy calls dispatch to llgrad,
# and their own calls go through converted_call in turn. Called without traced values they
# run unconverted, exactly as Python runs them; their globals are not guarded (library
# constants). numpy's own functions are never converted: they dispatch by themselves.
CONVERTED_LIBRARIES = frozenset({"scipy"})


def is_converted_library(value: Any) -> bool:
    """A Python function of a library in CONVERTED_LIBRARIES."""
    return isinstance(value, types.FunctionType) and value.__name__ != "<lambda>" and \
        (getattr(value, "__module__", None) or "").split(".")[0] in CONVERTED_LIBRARIES


def is_library_object(value: Any) -> bool:
    """True for modules, builtins, classes and functions of libraries llgrad never converts."""
    if isinstance(value, types.ModuleType):
        return value.__name__.split(".")[0] in LIBRARY_ROOTS
    from ..library import is_compiled_library
    if is_compiled_library(value):  # Note [Compiled library code on traced values]
        return False
    if isinstance(value, (type, types.BuiltinFunctionType, types.BuiltinMethodType)):
        return True
    if is_converted_library(value):
        return False
    module = getattr(value, "__module__", None) or ""
    return module.split(".")[0] in LIBRARY_ROOTS or type(value).__name__ == "ufunc"


def _is_random(value: Any) -> bool:
    from ..operators import is_random
    return is_random(value)


def _has_traced_form(value: Any) -> bool:
    """math.* and max/min have numpy counterparts for traced arguments (operators.py), so
    their calls go through converted_call (else they would concretise a traced scalar)."""
    from ..operators import traced_builtins
    if isinstance(value, np.vectorize):  # Note [np.vectorize on traced values]
        return True
    try:
        return value in traced_builtins()
    except TypeError:  # unhashable callee
        return False


class _Calls(gast.NodeTransformer):
    def __init__(self, locals_: set[str], resolve: Callable[..., Any], writable: set[str],
                 namer):
        self.locals, self.resolve, self.writable, self.namer = locals_, resolve, writable, namer

    def _skip(self, node):
        return node

    visit_FunctionDef = visit_AsyncFunctionDef = visit_ClassDef = _skip

    def _static_value(self, func) -> Any:
        """The callee's value if it can be known now without side effects, else _MISSING."""
        chain = []
        while isinstance(func, gast.Attribute):
            chain.append(func.attr)
            func = func.value
        if not isinstance(func, gast.Name) or func.id in self.locals:
            return _MISSING
        return self.resolve(func.id, tuple(reversed(chain)))  # (attributes of modules only)

    def visit_Call(self, node):
        if is_list_comp(node):  # (comprehensions.py) its iterable is a loop's
            node.args[0] = self._loop_iter(self.visit(node.args[0]))
            node.args[1] = self.visit(node.args[1])
            return node
        self.generic_visit(node)
        value = self._static_value(node.func)
        if value is len and len(node.args) == 1 and not node.keywords and \
                not isinstance(node.args[0], gast.Starred):
            new = templates.replace_expr("__lg.len_(x)", x=node.args[0])
            anno.fill_loc(new, node)
            return new
        if value is not _MISSING and is_library_object(value) and not _has_traced_form(value) \
                and not _is_random(value) and not _list_argument(node, self.lists) and \
                value is not print and value is not len:
            # (a random draw, print and len go through converted_call's checks)
            if _takes_arrays(value):
                _mark_parameters(node, self.params)
            return node
        args = gast.Tuple(elts=node.args, ctx=gast.Load())
        if node.keywords:
            kwargs = gast.Dict(keys=[templates.const(k.arg) if k.arg else None
                                     for k in node.keywords],
                               values=[k.value for k in node.keywords])
        else:
            kwargs = templates.const(None)
        new = templates.replace_expr("__lg.converted_call(f, args, kwargs)", f=node.func,
                                     args=args, kwargs=kwargs)
        anno.fill_loc(new, node)
        return new

    def visit_For(self, node):
        self.generic_visit(node)
        node.iter = self._loop_iter(node.iter)
        return node

    def _loop_iter(self, iter_):
        """A loop's iterable, ranges marked for the stager (see the module docstring)."""
        it = iter_
        if isinstance(it, gast.Call) and it.args and \
                self._static_value(it.func) is checkpointed:  # the marked range, as below
            it = it.args[0]
        if self._builtin_call(it, builtins.range):
            it.func = templates.replace_expr("__lg.range_")
            anno.fill_loc(it.func, it)
        elif self._builtin_call(it, builtins.reversed) and len(it.args) == 1 and \
                self._builtin_call(it.args[0], builtins.range):
            it.func, it.args = templates.replace_expr("__lg.reversed_range_"), it.args[0].args
            anno.fill_loc(it.func, it)
        return iter_

    def _builtin_call(self, node, fn) -> bool:
        """`node` calls the builtin `fn` (not shadowed), without keywords."""
        return (isinstance(node, gast.Call) and isinstance(node.func, gast.Name) and
                not node.keywords and node.func.id not in self.locals and
                self.resolve(node.func.id) is fn)

    def _target(self, target) -> str | None:
        if (isinstance(target, gast.Subscript) and isinstance(target.value, gast.Name)
                and target.value.id in self.writable):
            return target.value.id
        return None

    def _notes(self, node, targets, converted=None, delete=False) -> list:
        """``__lg.note_attr``/``note_item`` calls announcing the stores of ``targets`` into
        objects (all but the ``converted`` one; See Note [Stores in traced branches])."""
        notes = []
        stack = list(targets)
        while stack:
            t = stack.pop(0)
            if isinstance(t, (gast.Tuple, gast.List)):
                stack[:0] = t.elts
            elif isinstance(t, gast.Starred):
                stack.insert(0, t.value)
            elif isinstance(t, gast.Attribute):
                obj = t.value if _pure(t.value) else templates.replace_expr("__lg.UNKNOWN")
                notes += templates.replace("__lg.note_attr(obj, name)", obj=obj,
                                           name=templates.const(t.attr))
            elif isinstance(t, gast.Subscript) and t is not converted:
                pure = _pure(t.value) and _pure(t.slice)
                obj = t.value if pure else templates.replace_expr("__lg.UNKNOWN")
                index = _index(t.slice) if pure else templates.const(None)
                notes += templates.replace("__lg.note_item(obj, index, delete)", obj=obj,
                                           index=index, delete=templates.const(delete))
        anno.fill_loc(notes, node)
        return notes

    def visit_Subscript(self, node):
        """`y[i]` read with an index that may be traced -> `__lg.item(y, i)` (Note [Numpy
        arrays indexed by traced values])."""
        self.generic_visit(node)
        if not isinstance(node.ctx, gast.Load) or anno.get(node, anno.Key.IN_TARGET) or \
                _constant_index(node.slice) and not _item_of_a_list(node):
            return node
        new = templates.replace_expr("__lg.item(y, i)", y=node.value, i=_index(node.slice))
        anno.fill_loc(new, node)
        return new

    def visit_Assign(self, node):
        _mark_targets(node.targets)
        self.generic_visit(node)
        t = node.targets[0]
        converted = t if len(node.targets) == 1 and self._target(t) else None
        notes = self._notes(node, node.targets, converted)
        if converted is None:
            if len(node.targets) == 1 and isinstance(t, gast.Subscript) and _pure(t.value):
                node.value = templates.replace_expr("__lg.item_value(obj, v)", obj=t.value,
                                                    v=node.value)
                anno.fill_loc(node.value, node)
            return notes + [node] if notes else node
        new = templates.replace("y = __lg.setitem(y, i, v)", y=t.value.id, i=_index(t.slice),
                                v=node.value)
        anno.fill_loc(new, node)
        return new

    def visit_AnnAssign(self, node):
        _mark_targets([node.target])
        self.generic_visit(node)
        notes = self._notes(node, [node.target]) if node.value is not None else []
        return notes + [node] if notes else node

    def visit_Delete(self, node):
        _mark_targets(node.targets)
        self.generic_visit(node)
        notes = self._notes(node, node.targets, delete=True)
        return notes + [node] if notes else node

    def visit_Expr(self, node):
        """`np.add.at(y, i, v)` on a local `y` -> `y = __lg.ufunc_at(np.add.at, (y, i, v))`,
        so a traced update rebinds `y` (operators.ufunc_at); `np.fill_diagonal(y, v, wrap)`
        -> `y = __lg.setitem(y, __lg.diagonal_index(y, wrap), v)`."""
        call = node.value
        if self._fill_diagonal(call):
            self.generic_visit(call)
            wrap = call.args[2] if len(call.args) > 2 else \
                call.keywords[0].value if call.keywords else templates.const(False)
            new = templates.replace("y = __lg.setitem(y, __lg.diagonal_index(y, wrap), v)",
                                    y=call.args[0].id, wrap=wrap, v=call.args[1])
            anno.fill_loc(new, node)
            return new
        if not (isinstance(call, gast.Call) and isinstance(call.func, gast.Attribute) and
                call.func.attr == "at" and call.args and not call.keywords and
                isinstance(call.args[0], gast.Name) and call.args[0].id in self.writable and
                not any(isinstance(a, gast.Starred) for a in call.args)):
            return self.generic_visit(node)
        self.generic_visit(call)
        new = templates.replace("y = __lg.ufunc_at(f, args)", y=call.args[0].id, f=call.func,
                                args=gast.Tuple(elts=call.args, ctx=gast.Load()))
        anno.fill_loc(new, node)
        return new

    def _fill_diagonal(self, call) -> bool:
        """`call` is the statement np.fill_diagonal(y, v[, wrap]) on a local name `y`."""
        return (isinstance(call, gast.Call) and len(call.args) in (2, 3) and
                isinstance(call.args[0], gast.Name) and call.args[0].id in self.writable and
                not any(isinstance(a, gast.Starred) for a in call.args) and
                all(k.arg == "wrap" for k in call.keywords) and
                len(call.args) + len(call.keywords) <= 3 and
                self._static_value(call.func) is np.fill_diagonal)

    def visit_AugAssign(self, node):
        _mark_targets([node.target])
        self.generic_visit(node)
        if isinstance(node.target, gast.Name) and type(node.op) in _WHOLE:
            # `acc += x` on a numpy `acc` (Note [Traced values added into numpy arrays])
            new = templates.replace(f"y = __lg.{_IOPS[type(node.op)]}(y, v, name)",
                                    y=node.target.id, v=node.value,
                                    name=templates.const(node.target.id))
            anno.fill_loc(new, node)
            return new
        if not self._target(node.target):
            notes = self._notes(node, [node.target])
            return notes + [node] if notes else node
        t, pre = node.target, []
        index = t.slice
        if any(isinstance(n, (gast.Call, gast.Yield, gast.Await)) for n in gast.walk(index)):
            tmp = self.namer.new("index")
            pre = templates.replace("tmp = index", tmp=tmp, index=_index(index))
            index = templates.name(tmp)
        new = templates.replace(
            f"y = __lg.setitem(y, i, __lg.{_IOPS[type(node.op)]}(__lg.item(y, j), v))",
            y=t.value.id, i=_index(index), j=_index(index), v=node.value)
        anno.fill_loc(pre + new, node)
        return pre + new


# Note [Numpy arrays indexed by traced values]
# numpy cannot index an ndarray with a traced value: it concretises the index. A numpy array
# in a traced function is a constant (data a lambda or a closure holds, an array the function
# made), and `X[i]` with a staged loop's counter `i` made the loop unroll (one copy of its
# body per iteration). Reads whose index is not written with constants alone therefore go
# through `__lg.item` (tracer/updates.py), which reads a numpy array at a traced index as a
# graph op and is `y[i]` otherwise. Subscripts inside assignment targets stay as written
# (their stores are converted above).
def _mark_targets(targets) -> None:
    """Mark the subscripts a store goes through (`a[i][j] = v`: a[i][j] and a[i]); the
    subscripts inside their indices are reads (`K[idx[a], idx[b]] += v`: idx[a]), converted
    as any."""
    todo = list(targets)
    while todo:
        t = todo.pop()
        if isinstance(t, gast.Subscript):
            anno.set_(t, anno.Key.IN_TARGET, True)
            todo.append(t.value)
        elif isinstance(t, gast.Attribute):
            todo.append(t.value)
        elif isinstance(t, gast.Starred):
            todo.append(t.value)
        elif isinstance(t, (gast.Tuple, gast.List)):
            todo.extend(t.elts)


def _item_of_a_list(node: gast.Subscript) -> bool:
    """`xs[0]`, `xs[-1]`: a read at an integer constant, which may be of a list that a staged
    loop appends to, where `xs[0]` is an item from before the loop and `xs[-1]` the last
    one (Note [Containers in staged loops] in effects.py)."""
    i = node.slice
    if isinstance(i, gast.UnaryOp) and isinstance(i.op, gast.USub):
        i = i.operand
    return isinstance(i, gast.Constant) and type(i.value) is int


def _constant_index(index) -> bool:
    """An index written with constants only (x[0], x[1:-1, ::2], x[..., 0])."""
    return all(isinstance(n, (gast.Constant, gast.Slice, gast.Tuple, gast.UnaryOp, gast.USub,
                              gast.UAdd, gast.Load))
               for n in gast.walk(index))


def _list_argument(node: gast.Call, lists: set[str]) -> bool:
    """A list among the arguments, written there (`np.sum([1, a * a])`, a tuple of names,
    `list(...)`) or a name the function binds to a list (`np.mean(losses)` after
    `losses.append(l)`): the call may need its list built as one traced array (Note [Lists
    of traced values] in operators.py)."""
    def listish(a):
        return isinstance(a, gast.List) or is_list_comp(a) or isinstance(a, gast.Tuple) and \
            not all(isinstance(e, gast.Constant) for e in a.elts) or \
            isinstance(a, gast.Name) and a.id in lists or \
            isinstance(a, gast.Call) and isinstance(a.func, gast.Name) and \
            a.func.id in ("list", "tuple")  # `np.sum(list(map(f, x)))`
    return any(listish(a) for a in node.args + [k.value for k in node.keywords])


def _takes_arrays(value: Any) -> bool:
    """numpy's functions and the ufuncs (scipy.special's too), but those of a sequence of
    arrays (np.stack, ...: Note [Lists of traced values] in operators.py)."""
    from ..operators import _SEQUENCE_FUNCTIONS, _is_numpy
    try:
        return _is_numpy(value) and value not in _SEQUENCE_FUNCTIONS
    except TypeError:  # (unhashable)
        return False


def _mark_parameters(node: gast.Call, params: set[str]) -> None:
    """Each argument that is a parameter of the function, or a part of one (`c`, `p["c"]`,
    `self.c`), becomes ``__lg.list_arg(...)``: it may be a list of traced scalars, a
    differentiated argument (`np.polyval(c, x)`; Note [Lists of traced values])."""
    def mark(a):
        root = a
        while isinstance(root, (gast.Subscript, gast.Attribute)):
            root = root.value
        if not (isinstance(root, gast.Name) and root.id in params):
            return a
        new = templates.replace_expr("__lg.list_arg(a)", a=a)
        anno.fill_loc(new, a)
        return new
    node.args = [a if isinstance(a, gast.Starred) else mark(a) for a in node.args]
    for k in node.keywords:
        if k.arg is not None:
            k.value = mark(k.value)


def list_names(fn: gast.FunctionDef) -> set[str]:
    """Names `fn` binds to a list (`xs = []`, `xs = [...]`, a list comprehension,
    `list(...)`, `sorted(...)`) or grows (`xs.append(v)`, `xs.extend(vs)`, `xs += [v]`)."""
    out = set()
    for n in gast.walk(fn):
        if isinstance(n, gast.Assign) and (
                isinstance(n.value, gast.List) or is_list_comp(n.value) or
                isinstance(n.value, gast.Call) and isinstance(n.value.func, gast.Name) and
                n.value.func.id in ("list", "sorted")):
            out.update(t.id for t in n.targets if isinstance(t, gast.Name))
        elif isinstance(n, gast.AugAssign) and isinstance(n.target, gast.Name) and \
                (isinstance(n.value, gast.List) or is_list_comp(n.value)):
            out.add(n.target.id)
        elif isinstance(n, gast.Call) and isinstance(n.func, gast.Attribute) and \
                n.func.attr in ("append", "extend") and isinstance(n.func.value, gast.Name):
            out.add(n.func.value.id)
    return out


def _pure(expr) -> bool:
    """Whether evaluating ``expr`` twice is harmless (no call, yield or assignment in it)."""
    return not any(isinstance(n, (gast.Call, gast.Yield, gast.YieldFrom, gast.Await,
                                  gast.NamedExpr)) for n in gast.walk(expr))


def _index(index):
    """An index expression usable as a call argument (slices become ``slice(...)``)."""
    if isinstance(index, gast.Slice):
        parts = [p if p is not None else templates.const(None)
                 for p in (index.lower, index.upper, index.step)]
        return templates.replace_expr("slice(a, b, c)", a=parts[0], b=parts[1], c=parts[2])
    if isinstance(index, gast.Tuple):
        return gast.Tuple(elts=[_index(e) for e in index.elts], ctx=gast.Load())
    return index


def convert_calls(fn: gast.FunctionDef, locals_: set[str], writable: set[str],
                  resolve: Callable[..., Any], namer) -> None:
    """Rewrite calls, range loops and element updates in ``fn``'s body (in place)."""
    t = _Calls(locals_, resolve, writable, namer)
    t.lists = list_names(fn) & locals_
    a = fn.args
    t.params = {p.id for p in a.posonlyargs + a.args + a.kwonlyargs if isinstance(p, gast.Name)}
    t.params.update(p.id for p in (a.vararg, a.kwarg) if isinstance(p, gast.Name))
    fn.body = [r for s in fn.body for r in _as_list(t.visit(s))]


def _as_list(x):
    return x if isinstance(x, list) else [x]
