"""The compiler's public API: `differentiate`, `grad`, `value_and_grad`.

A `Differentiable` traces its function once per call signature (tracer), optimises the IR,
generates the backward on the IR (transform.ad), and compiles a forward entry and a fused
forward+backward entry to native code (codegen), each on first use; later calls with the
same signature go straight to native code. `inspect()` returns every stage as text.
"""
from __future__ import annotations

import collections
import functools
import inspect
import threading
import time
import types
from dataclasses import dataclass
from typing import Callable

import numpy as np

from llgrad.runtime import config, pytree
from llgrad.runtime.aval import aval_str
from llgrad.runtime.errors import (ConcretizationError, DTypeError, ShapeError, SourceLoc,
                                   _compose)
from llgrad.tracer import signature as sig
from llgrad.tracer.captures import CaptureInputs, failed, hold, note_function
from llgrad.tracer.convert.stored import using as using_store
from llgrad.tracer.dynamic import cut_gradient, trace_dynamic
from llgrad.tracer.operators import llgrads_own
from llgrad.tracer.tracing import _convertible, bind_arguments, call_with, trace
from llgrad import compose, diagnostics
from llgrad.compiled import Compiled, paused_gc
from llgrad.transform.checkpoint import check_schedule
from llgrad.transform.hashing import fingerprint
from llgrad.inspection import Inspection, Stats
from llgrad.methods import BoundDifferentiable


@dataclass
class _DynamicSignature:
    """A signature whose trace concretised: its calls take the dynamic path (Note [Dynamic
    signatures])."""

    reason: Exception
    guards = ()  # retracing would concretise again: nothing to check


def _def_loc(fn) -> SourceLoc | None:
    """Where the user's function is defined (its first line: the decorator or the def)."""
    code = getattr(inspect.unwrap(fn), "__code__", None)
    if code is None:
        return None
    return SourceLoc(code.co_filename, code.co_firstlineno, 0, code.co_name)


def _resolve_wrt(wrt, names: list[str], fn=None) -> tuple[tuple[int, ...], bool]:
    """Argument indices for `wrt` and whether a single gradient (not a tuple) is returned."""
    single = not isinstance(wrt, (tuple, list))
    items = (wrt,) if single else tuple(wrt)
    plain = [n.lstrip("*") for n in names]
    fname = getattr(fn, "__name__", "the function")
    out = []
    for w in items:
        if isinstance(w, str):
            if w not in plain:
                raise ValueError(_compose(
                    f"wrt={w!r} is not a parameter of {fname} (parameters: "
                    f"{', '.join(plain)})", _def_loc(fn),
                    f"use one of {', '.join(map(repr, plain))}, or an argument index"))
            out.append(plain.index(w))
        elif isinstance(w, int) and not isinstance(w, bool):
            if not -len(names) <= w < len(names):
                raise ValueError(_compose(
                    f"wrt={w} is out of range for a call of {fname} with {len(names)} "
                    f"arguments", _def_loc(fn), None))
            out.append(w % len(names))
        else:
            raise TypeError(f"wrt must be an int, a parameter name, or a tuple of them; got "
                            f"{w!r}")
    return tuple(out), single


class Differentiable:
    """A function compiled to native value and gradient code. See `differentiate`."""

    def __init__(self, fn: Callable, wrt=0, cache: bool = False, method: bool = False,
                 checkpoint=None, has_aux: bool = False):
        self._unbound = isinstance(fn, staticmethod)  # never binds an instance
        fn = fn.__func__ if self._unbound else fn
        functools.update_wrapper(self, fn)
        check_schedule(checkpoint)
        self.fn, self.wrt, self.use_disk_cache = fn, wrt, cache
        self.checkpoint = checkpoint  # Note [Checkpointed loops] in transform/checkpoint.py
        self.has_aux = has_aux  # fn returns (value, aux): See Note [Auxiliary outputs]
        self.method = method  # See Note [Methods] in llgrad/methods.py
        self._cache: dict = {}
        self._fast: dict = {}  # See Note [Per-call fast path]
        self._graphs: dict = {}  # the dynamic path's compiled graphs, least recently used first
        self.max_dynamic_graphs = 32
        self._vjp: "Differentiable | None" = None
        self._inputs = CaptureInputs()  # Note [Captured arrays that change become inputs]
        self._earlier: dict = {}  # See Note [Earlier traces of a signature]
        self._lock = threading.Lock()
        self.trace_count = 0
        self._monitor = diagnostics.Monitor(fn, _def_loc(fn))

    def _lg_static_key(self):  # a static argument of another compiled function: by identity
        return sig.Identity(self)

    def __reduce__(self):  # See Note [Pickling compiled functions] in llgrad/pickling.py
        from llgrad import pickling
        return pickling.reduce(self)

    # -- methods ------------------------------------------------------------------------
    def __set_name__(self, owner, name) -> None:
        self.method = not self._unbound  # in a class body: See Note [Methods] (methods.py)

    def __get__(self, obj, objtype=None):
        if obj is None or self._unbound:
            return self
        return BoundDifferentiable(self, obj)

    def _wrt(self, names: list[str], method: bool) -> tuple[tuple[int, ...], bool]:
        """Argument indices of `wrt` (ints count after `self` for a method: Note [Methods]
        in llgrad/methods.py) and whether a single gradient is returned."""
        if not method:
            return _resolve_wrt(self.wrt, names, self.fn)
        single = not isinstance(self.wrt, (tuple, list))
        out: list[int] = []
        for w in (self.wrt,) if single else self.wrt:
            if isinstance(w, str):
                out += _resolve_wrt(w, names, self.fn)[0]
            else:
                out += [i + 1 for i in _resolve_wrt(w, names[1:], self.fn)[0]]
        return tuple(out), single

    # -- the public calls -----------------------------------------------------------------
    def __call__(self, *args, **kwargs):
        if not kwargs:
            hit = self._fast.get(_fast_key(args))
            if hit is not None and (not hit.guards or hold(hit.guards)):  # Note [Per-call
                self._monitor.calls += 1                                  # fast path]
                return hit.value(hit.run("forward", args))
        return self._call(args, kwargs, self.method)

    def _call(self, args, kwargs, method: bool = False):
        self._monitor.calls += 1
        if compose.is_traced_call(args, kwargs):  # inside another trace: inline
            names, values = bind_arguments(self.fn, args, kwargs)
            note_function(self.fn)
            return call_with(_convertible(self.fn), names, values)
        if compose.has_dual(args, kwargs):  # dual tensors (forward_ad): its compiled jvp
            return compose.dual_call(self, args, kwargs)
        if compose.needs_eager_node(args, kwargs):
            return compose.eager_call(self, args, kwargs)
        c, leaves, _, values = self._compiled(args, kwargs, method)
        if values is None:
            try:
                values = c.run("forward", leaves)
            except Exception as e:  # noqa: BLE001 - Note [try on the dynamic path]
                c, values = self._caught(c, e, args, kwargs, method)
        return _rebuild_outputs(c.trace.out_struct, values)

    def value_and_grad(self, *args, **kwargs):
        """(value, gradient) from one native call of the fused forward+backward entry."""
        if not kwargs and not self.method:
            hit = self._fast.get(_fast_key(args))
            if hit is not None and hit.c.grads_ok and (not hit.guards or hold(hit.guards)):
                self._monitor.calls += 1
                outs = hit.run("joint", args)
                return hit.value(outs), hit.grads(outs)
        return self._value_and_grad(args, kwargs, self.method)

    def _value_and_grad(self, args, kwargs, method: bool):
        self._monitor.calls += 1
        if compose.is_traced_call(args, kwargs):
            names, _ = bind_arguments(self.fn, args, kwargs)
            wrt_args, single = self._wrt(names, method)
            return compose.inline_value_and_grad(self, args, kwargs, wrt_args, single)
        c, leaves, (wrt_args, single), _ = self._compiled(args, kwargs, method)
        try:
            outs = c.run("joint", leaves)  # raises c.not_differentiable: there is no gradient
        except Exception as e:  # noqa: BLE001 - Note [try on the dynamic path]
            c = self._caught(c, e, args, kwargs, method)[0]
            outs = c.run("joint", leaves)
        c.grads_ok = True
        n_out = len(c.trace.fn.outputs)
        value = _rebuild_outputs(c.trace.out_struct, outs[:n_out])
        grads = _assemble(c.trace, outs[n_out:], c.wrt_leaves, wrt_args, single)
        return value, grads

    def grad(self, *args, **kwargs):
        """The gradient w.r.t. `wrt` (a tuple when `wrt` is a tuple), with each argument's
        structure: arrays for arrays, floats for Python floats, None for static entries
        (ints, strings: they have no gradient)."""
        return self._grad_result(self.value_and_grad(*args, **kwargs))

    def _grad_result(self, value_and_grad: tuple):
        """What `grad` returns, from (value, gradient): the gradient, or (gradient, aux)
        (Note [Auxiliary outputs])."""
        value, g = value_and_grad
        return (g, value[1]) if self.has_aux else g

    def cache_info(self) -> dict:
        """How many call signatures are compiled, and how many traces ran."""
        return {"signatures": len(self._cache), "traces": self.trace_count}

    def inspect(self, *args, **kwargs) -> "Inspection":
        return self._inspect(args, kwargs, self.method)

    def _inspect(self, args, kwargs, method: bool) -> "Inspection":
        return Inspection(self._compiled(args, kwargs, method)[0])

    # -- compile --------------------------------------------------------------------------
    def _compiled(self, args, kwargs, method: bool = False):
        names, values = bind_arguments(self.fn, args, kwargs)
        wrt_args, single = self._wrt(names, method)
        leaves, struct = sig.flatten(tuple(values), names)
        key = (struct, wrt_args)  # one trace serves native and LLGRAD_DISABLE_JIT runs
        c = self._cache.get(key)
        stale = None
        if c is not None and c.guards and not hold(c.guards):
            with self._lock:  # a global it read changed: trace again (Note [Captured
                self._cache.pop(key, None)  # values are guarded]) unless an earlier trace
                self._fast.clear()          # holds (Note [Earlier traces of a signature])
                c, stale = self._earlier_holding(key, c), c
        if c is None:
            with self._lock:
                c = self._cache.get(key)
                if c is None:
                    reason, fix = self._monitor.reason(names, struct,
                                                       stale and failed(stale.guards))
                    try:
                        c = self._cache[key] = self._trace(args, kwargs, wrt_args, stale)
                    except ConcretizationError as e:
                        c = _DynamicSignature(_kept(e))  # Note [Dynamic signatures]
                        diagnostics.log(f"{self._monitor.name} takes the dynamic path for "
                                        f"{sig.describe(struct)}: {_reason(e)}")
                    else:
                        self._monitor.traced(names, struct, reason, fix)
        if isinstance(c, _DynamicSignature):
            dc, values = self._dynamic(args, kwargs, struct, wrt_args, c.reason)
            self._cache[key] = c  # recorded once a call succeeded: a failed call leaves nothing
            return dc, leaves, (wrt_args, single), values
        if not kwargs and len(names) == len(args) and _fast_key(args) is not None and \
                not c.trace.catches:  # (Note [try on the dynamic path]: through _caught)
            self._fast[_fast_key(args)] = _FastCall(c, args, wrt_args, single)
        return c, leaves, (wrt_args, single), None

    def _caught(self, c: Compiled, e: Exception, args, kwargs, method: bool):
        """This call on the dynamic path, (its Compiled, its values), when compiled code
        raised `e` and a `try` of the function catches it (Note [try on the dynamic path] in
        tracer/convert/fence.py); else `e` goes on."""
        if not (c.trace.catches and isinstance(e, c.trace.catches)) or llgrads_own(e):
            raise e
        names, values = bind_arguments(self.fn, args, kwargs)
        wrt_args, _ = self._wrt(names, method)
        struct = sig.flatten(tuple(values), names)[1]
        reason = ConcretizationError(
            f"compiled code raised {type(e).__name__}, which a `try` in it catches: such "
            f"calls run as Python", loc=getattr(e, "loc", None),
            fix="test the condition explicitly (`if`, `np.where`) instead of catching it")
        return self._dynamic(args, kwargs, struct, wrt_args, reason)

    # Note [Earlier traces of a signature]
    # A trace whose guards failed is kept (the last MAX_EARLIER of each signature), and when
    # the current one fails, one that holds again is used instead of a new trace: a minibatch
    # loop whose last batch is smaller changes a captured input's shape twice an epoch (Note
    # [Captured arrays that change become inputs] in tracer/captures.py), and a setting may
    # toggle between two values; each is traced once, not at every switch. Only a trace whose
    # guards all hold runs, so it computes what Python would (Dynamo keeps 8 per code object).
    MAX_EARLIER = 4

    def _earlier_holding(self, key, failed_c: Compiled) -> Compiled | None:
        """An earlier trace of signature `key` whose guards hold, made current, or None;
        `failed_c` joins the earlier ones. Called with the lock held."""
        earlier = self._earlier.setdefault(key, [])
        c = next((e for e in earlier if hold(e.guards)), None)
        if c is not None:
            earlier.remove(c)
            self._cache[key] = c
        earlier.insert(0, failed_c)
        del earlier[self.MAX_EARLIER:]
        return c

    # Note [Dynamic signatures]
    # A trace that concretises (tracer/dynamic.py) sends its signature to the dynamic path,
    # and only that signature: the concretisation may depend on shapes or static values
    # (`if x.shape[0] > 3: s = float(x[0])`), and other signatures keep their staged code.
    # The signature is marked only once a dynamic call has succeeded, so a call that raises
    # (a wrong argument) leaves no state behind: the next call starts afresh.

    def _trace(self, args, kwargs, wrt_args, stale: Compiled | None = None) -> Compiled:
        """A staged trace of this call, ready to differentiate and compile; the captured
        arrays that changed since `stale` was traced become inputs."""
        _jit_beside_trace()
        with paused_gc(), using_store(self._conversion_store()):
            t0 = time.perf_counter()
            tr = self._inputs.trace(lambda captures: trace(self.fn, args, kwargs, captures),
                                    stale.guards if stale is not None else (),
                                    lambda m: diagnostics.log(f"{self._monitor.name}: {m}"))
            c = self._build(tr, wrt_args, time.perf_counter() - t0)
        unrolled = [u for u in tr.unrolled if self._monitor.first(("unroll", str(u[0])))]
        if config.disable_jit():
            diagnostics.warn_unrolled(unrolled, c.spent())
        else:  # once the native code is made, with its cost (Compiled.module)
            c.pending_unrolled = unrolled
        return c

    def _dynamic(self, args, kwargs, struct, wrt_args, reason) -> tuple[Compiled, list]:
        """The dynamic path: trace this call eagerly; reuse the compiled code of its graph."""
        _jit_beside_trace()
        t0 = time.perf_counter()
        with paused_gc(), using_store(self._conversion_store()):
            tr, values = trace_dynamic(self.fn, args, kwargs)
        dt = time.perf_counter() - t0
        self.trace_count += 1
        key = (struct, wrt_args, fingerprint(tr.fn))
        with self._lock:
            c = self._graphs.pop(key, None)
            if c is None:
                c = self._build(tr, wrt_args, dt, dynamic_reason=reason)
                c.uses = 0
                if len(self._graphs) >= self.max_dynamic_graphs:
                    self._graphs.pop(next(iter(self._graphs)))
                diagnostics.log(f"{self._monitor.name}: new dynamic graph "
                                f"#{len(self._graphs) + 1} ({c.stats['ops (traced)']} ops, "
                                f"traced in {diagnostics.ms(dt)})")
            c.uses += 1
            self._graphs[key] = c  # most recently used last
        if self._monitor.first("dynamic"):
            diagnostics.warn_dynamic(self._monitor.name, reason, dt,
                                     self._monitor.def_loc)
        return c, values

    # Note [Compile on reuse]
    # On the dynamic path a graph can be new at every call (a concretised float becomes a
    # constant of the graph), and compiling costs far more than interpreting it once. So a
    # graph's backward runs through the reference interpreter the first time it is seen and
    # is compiled to native code when it recurs; a loop over a fixed set of paths compiles
    # each path once, and a graph that never recurs never pays for LLVM.

    def _build(self, tr, wrt_args, trace_time: float, dynamic_reason=None) -> Compiled:
        """A Compiled for a trace (of the dynamic path, for `dynamic_reason`); its IR stages
        and native code are made on first use (Note [Stages on first use] in
        llgrad/compiled.py)."""
        staged = dynamic_reason is None
        if staged:
            self.trace_count += 1
        wrt_leaves, not_differentiable = [], None
        try:
            _check_scalar_output(tr, self.fn, self.has_aux)
            wrt_leaves = _wrt_leaves(tr, wrt_args, self.fn)
        except (ShapeError, DTypeError) as e:
            not_differentiable = _kept(e)  # the value still compiles; grad() raises this
        cut = cut_gradient(tr, wrt_leaves) if not staged else None
        if cut is not None and not_differentiable is None:
            not_differentiable = ConcretizationError(
                f"the value of {self._monitor.name} is connected to the differentiated "
                f"argument only by {cut[0]}, which makes a constant (no gradient flows "
                f"through it): its gradient would be 0",
                loc=cut[1] or getattr(dynamic_reason, "loc", None),
                fix="keep the computation an array computation (return np.sum(x ** 2), not "
                "float(np.sum(x ** 2)); x[0] rather than float(x[0]) or x.tolist())")
        stats = Stats({
            "path": "staged" if staged else f"dynamic ({_reason(dynamic_reason)})",
            "signature": sig.describe(tr.in_struct),
            "ops (traced)": sum(1 for _ in tr.fn.walk()),
            "trace time": trace_time,
        })
        if tr.implicit:  # Note [Captured arrays that change become inputs]
            stats["implicit inputs"] = ", ".join(
                f"{g.name} ({'global' if isinstance(g.where, dict) else 'closure variable'}, "
                f"{aval_str(g.shape, g.dtype)})" for g in tr.implicit)
        c = Compiled(tr, wrt_leaves, stats, self._monitor.name, not_differentiable,
                     self._disk_key(tr, wrt_args) if staged else None)
        c.dynamic_reason = dynamic_reason
        c.checkpoint = self.checkpoint
        if config.dump_dir():
            from llgrad.dump import dump_compiled
            dump_compiled(config.dump_dir(), Inspection(c))
        return c

    def _uses_disk(self) -> bool:
        from llgrad import cache
        return (self.use_disk_cache or cache.enabled()) and not config.disable_jit()

    def _conversion_store(self):
        """Where converted source is kept (Note [Converted code on disk] in
        tracer/convert/stored.py): the disk cache, when this function uses it."""
        if not self._uses_disk():
            return None
        from llgrad import cache
        return cache

    def _disk_key(self, tr, wrt_args) -> str | None:
        from llgrad import cache
        if not self._uses_disk():
            return None
        extra = () if self.checkpoint is None else (f"checkpoint={self.checkpoint!r}",)
        return cache.key(fingerprint(tr.fn), repr(wrt_args), sig.describe(tr.in_struct), *extra)

    def _vjp_differentiable(self) -> "Differentiable":
        """The compiled vector-Jacobian product of this function (see llgrad/compose.py)."""
        if self._vjp is None:
            self._vjp = compose.vjp_differentiable(self.fn)
        return self._vjp


# Note [Per-call fast path]
# A call whose arguments are all numpy arrays of the traced dtypes, Python floats, ints or
# bools (no containers, no keywords) is keyed by their shapes/dtypes/types (and the values of
# ints and bools, which are static) without binding the signature or flattening pytrees; a
# hit maps arguments to leaves and results to Python values with plans made once, and calls
# the native entry directly once it is compiled (`Entry.run`: the key has checked class,
# dtype and shape, so only C order is checked). Anything else takes the general path, which
# fills this table. Costs (this 2-core machine, x * 2.0 on 10 float64): ~1.4 us a call, of which
# the ctypes call ~0.27 us, np.empty ~0.12 us, reading LLGRAD_DISABLE_JIT ~0.05 us
# (runtime/config.py, Note [Reading flags per call]); numpy's own x * 2.0 takes ~0.4 us.
_LEAF_DTYPES = frozenset(sig.TRACED_DTYPES)


def _fast_key(args):
    key = []
    for a in args:
        t = type(a)
        if t is np.ndarray:
            if a.dtype not in _LEAF_DTYPES:
                return None
            key.append((a.shape, a.dtype))
        elif t is float:
            key.append(float)
        elif t is int or t is bool:
            key.append((t, a))
        else:
            return None
    return tuple(key)


class _FastCall:
    """Precomputed argument and result plans of one signature (Note [Per-call fast path])."""

    __slots__ = ("c", "arrays", "as_is", "native", "array_out", "scalar_out", "grad_plan",
                 "single", "guards", "implicit")

    def __init__(self, c: Compiled, args, wrt_args, single):
        self.c, self.guards, self.implicit = c, c.trace.guards, c.trace.implicit
        self.arrays = [(i, type(a) is float) for i, a in enumerate(args)
                       if type(a) is np.ndarray or type(a) is float]
        # the arguments are the leaves (and no captured arrays are inputs)
        self.as_is = all(type(a) is np.ndarray for a in args) and not self.implicit
        self.native: dict = {}  # entry name -> its codegen Entry, once compiled
        specs = sig.leaf_specs(c.trace.out_struct)
        one = len(specs) == 1 and isinstance(c.trace.out_struct, sig.Leaf)
        self.array_out = one and specs[0].scalar is None  # returned as it is (an ndarray)
        self.scalar_out = specs[0].to_python if one else None
        pos = {i: k for k, (i, _) in enumerate(self.arrays)}
        n_out = len(c.trace.fn.outputs)
        # Each wrt argument is one leaf here: where its cotangent is, and whether it is a float.
        by_leaf = {leaf: n_out + j for j, leaf in enumerate(c.wrt_leaves)}
        self.grad_plan = [(by_leaf.get(pos.get(a)), type(args[a]) is float,
                           np.shape(args[a]), getattr(args[a], "dtype", np.float64))
                          for a in wrt_args]
        self.single = single

    def leaves(self, args) -> list:
        return [np.asarray(args[i], np.float64) if is_float else args[i]
                for i, is_float in self.arrays]

    def run(self, entry: str, args) -> list:
        """`self.c.run(entry, leaves)`, calling the native entry directly once it exists."""
        native = self.native.get(entry)
        if native is None or config.disable_jit():
            outs = self.c.run(entry, self.leaves(args))
            m = self.c.modules.get(entry)
            if m is not None:
                self.native[entry] = m[entry]
            return outs
        if self.as_is:
            leaves = args
        else:
            leaves = self.leaves(args)
            if self.implicit:  # Note [Captured arrays that change become inputs]
                leaves += [g.value() for g in self.implicit]
        for a in leaves:  # _fast_key checked class, dtype and shape
            if not a.flags.c_contiguous:
                return native(*leaves)
        return native.run(leaves)

    def value(self, outs):
        if self.array_out:
            return outs[0]
        if self.scalar_out is not None:
            return self.scalar_out(outs[0])
        return _rebuild_outputs(self.c.trace.out_struct, outs[:len(self.c.trace.fn.outputs)])

    def grads(self, outs):
        gs = []
        for k, is_float, shape, dtype in self.grad_plan:
            g = outs[k] if k is not None else np.zeros(shape, dtype)
            gs.append(float(g) if is_float else g)
        return gs[0] if self.single else tuple(gs)


def _assemble(tr, cts: list, wrt_leaves, wrt_args, single, to_python: bool = True):
    """Gradients mirroring each wrt argument's structure (floats for Python floats, None for
    static entries)."""
    by_leaf = dict(zip(wrt_leaves, cts))
    specs = sig.leaf_specs(tr.in_struct)
    per_arg = []
    for a in wrt_args:
        vals = []
        for k in (k for k, o in enumerate(tr.leaf_owner) if o == a):
            g = by_leaf.get(k)
            if g is None:
                g = np.zeros(specs[k].shape, specs[k].dtype)
            if to_python:
                g = specs[k].to_python(g)
            vals.append(g)
        per_arg.append(sig.unflatten_gradient(sig.arg_struct(tr.in_struct, a), vals))
    return per_arg[0] if single else tuple(per_arg)


def _kept(e: BaseException) -> BaseException:
    """`e` (and the exceptions chained to it) without tracebacks, to be kept past the call.

    A traceback holds the frames of the call that raised it, and through them the frames of
    its callers with their arrays (the call's arguments and results, the user's locals): kept
    in a Compiled, those stayed alive as long as the function did.
    """
    todo, seen = [e], set()
    while todo:
        x = todo.pop()
        if x is not None and id(x) not in seen:
            seen.add(id(x))
            x.__traceback__ = None
            todo += [x.__cause__, x.__context__]
    return e


def _reason(e) -> str:
    if e is None:
        return ""
    where = f" at {e.loc}" if getattr(e, "loc", None) else ""
    return f"{getattr(e, 'what', str(e)).splitlines()[0]}{where}"


def _wrt_leaves(tr, wrt_args, fn=None) -> list[int]:
    specs = sig.leaf_specs(tr.in_struct)
    out = []
    for a in wrt_args:
        ks = [k for k, o in enumerate(tr.leaf_owner) if o == a]
        name = tr.arg_names[a].lstrip("*")
        if not ks:
            value = sig.describe(sig.arg_struct(tr.in_struct, a))
            raise DTypeError(f"cannot differentiate with respect to argument {name!r} "
                             f"({value}): it holds no arrays or floats (static arguments "
                             f"such as ints have no gradient)", loc=_def_loc(fn),
                             fix=f"pass {name} as a float (e.g. {name}=float({name})), or "
                             f"choose another argument with wrt=")
        for k in ks:
            if specs[k].dtype.kind != "f":
                raise DTypeError(f"cannot differentiate with respect to argument "
                                 f"{name!r} of dtype {specs[k].dtype}", loc=_def_loc(fn),
                                 fix="pass a float array (x.astype(np.float64))")
            out.append(k)
    return out


# Note [Auxiliary outputs]
# With has_aux=True (jax.grad's option), the function returns a pair (value, aux): value is
# the scalar differentiated, aux any pytree of arrays and numbers computed beside it (metrics,
# a new model state). Its leaves are the trace's outputs after the first: the joint function
# returns every output and seeds only output 0 (transform/ad.py grad_function), so aux costs
# one store per leaf and is never differentiated. value_and_grad gives ((value, aux), grad)
# and grad gives (grad, aux), as in JAX.
def _check_scalar_output(tr, fn, has_aux: bool = False) -> None:
    outs = tr.fn.outputs
    if has_aux:
        s = tr.out_struct
        pair = type(s) is pytree.Node and s.type.name in ("tuple", "list") and \
            len(s.children) == 2 and type(s.children[0]) is sig.Leaf
        if not pair:
            raise ShapeError(
                f"{getattr(fn, '__name__', 'the function')} is differentiated with "
                f"has_aux=True, so it must return a pair (value, aux) whose value is one "
                f"scalar; it returned {sig.describe(s)}", loc=_def_loc(fn),
                fix="return (loss, aux), e.g. `return loss, {'accuracy': acc}`")
    if (len(outs) != 1 and not has_aux) or outs[0].aval.shape != ():
        shapes = ", ".join(aval_str(*v.aval) for v in outs)
        bad = next((v for v in outs if v.aval.shape != ()), outs[0] if outs else None)
        loc = getattr(getattr(bad, "op", None), "loc", None) or _def_loc(fn)
        raise ShapeError(
            f"{getattr(fn, '__name__', 'the function')} must return a scalar to be "
            f"differentiated; it returned {shapes}", loc=loc,
            fix="reduce the output (e.g. np.sum(...)) or use llgrad.jacobian for vector "
            "outputs")


def _rebuild_outputs(struct, arrays):
    """Results as plain Python gives them: arrays, numpy scalars, Python numbers."""
    return sig.unflatten(struct, [s.to_python(a) for a, s in zip(arrays, sig.leaf_specs(struct))])


def _jit_beside_trace() -> None:
    """Start the JIT's set-up beside the trace that comes before the first compile
    (codegen/jit.py, Note [JIT set-up in the background])."""
    if not config.disable_jit():
        from llgrad.codegen import jit
        jit.set_up_in_background()


def differentiate(fn: Callable | None = None, *, wrt=0, cache: bool = False, checkpoint=None,
                  has_aux: bool = False):
    """Compile `fn` (plain numpy/Python) to native value and gradient code.

    Args:
        fn: the function; its first (or `wrt`) argument is differentiated.
        wrt: an argument index or parameter name, or a tuple of them (then gradients come
            as a tuple). Defaults to 0, like `jax.grad`'s argnums.
        cache: also keep compiled code on disk (see LLGRAD_CACHE_DIR).
        checkpoint: "sqrt", "log" or an int k: reverse mode through each staged top-level
            `for` loop with a static trip count n stores the carried state every k
            (sqrt(n)) iterations and recomputes a segment in the reverse sweep, so the
            loop's tapes take O(sqrt n) memory for about one more forward sweep of time;
            "log" nests segments (O(log n) memory, log n more sweeps); an int k also
            segments top-level while loops (Notes [Checkpointed loops], [Logarithmic
            checkpointing], [Checkpointed while loops] in transform/checkpoint.py). One loop
            at a time: `llgrad.checkpointed`. `inspect().stats` shows the tape bytes with
            and without.
        has_aux: fn returns a pair (value, aux); only value is differentiated, and aux (any
            pytree of arrays and numbers) is returned beside it: `value_and_grad` gives
            ((value, aux), gradient) and `grad` gives (gradient, aux), as in JAX.

    Returns:
        A `Differentiable`: `f(*args)` is the value, `f.grad(*args)` the gradient,
        `f.value_and_grad(*args)` both, `f.inspect(*args)` every stage as text.

    Example:
        >>> import numpy as np, llgrad
        >>> @llgrad.differentiate
        ... def f(x):
        ...     return np.sum(x ** 2)
        >>> f.grad(np.array([1.0, 2.0]))
        array([2., 4.])
    """
    if fn is None:
        return lambda f: _differentiable(f, wrt, cache, checkpoint, has_aux)
    return _differentiable(fn, wrt, cache, checkpoint, has_aux)


def _user_callable(f) -> bool:
    """An instance of the user's class defining __call__ in Python: differentiated as that
    method bound to it (its control flow converted; it ran as Python, a traced `if` on the
    dynamic path)."""
    from llgrad.tracer.convert.api import _is_user_function
    call = getattr(type(f), "__call__", None)
    return (not isinstance(f, (type, types.FunctionType, types.MethodType, Differentiable))
            and isinstance(call, types.FunctionType) and _is_user_function(call))


def _differentiable(f: Callable, wrt, cache: bool = False, checkpoint=None,
                    has_aux: bool = False):
    """A Differentiable of `f` with these options; a bound method (plain or differentiated)
    gives a BoundDifferentiable whose `self` is an argument (Note [Methods] in
    llgrad/methods.py). A Differentiable keeps its cache and checkpoint unless they are given."""
    bound, method = None, False
    if isinstance(f, BoundDifferentiable):
        f, bound = f.__func__, f.__self__
    elif isinstance(f, types.MethodType) and isinstance(f.__func__, types.FunctionType):
        f, bound, method = f.__func__, f.__self__, True
    elif _user_callable(f):  # `llgrad.grad(HuberLoss(X, y))`: its __call__, a method
        f, bound, method = type(f).__call__, f, True
    if not (isinstance(f, Differentiable) and (f.wrt, f.has_aux) == (wrt, has_aux) and
            not cache and checkpoint is None):
        f = Differentiable(getattr(f, "fn", f), wrt, cache or getattr(f, "use_disk_cache", False),
                           method=getattr(f, "method", method),
                           checkpoint=checkpoint if checkpoint is not None else
                           getattr(f, "checkpoint", None), has_aux=has_aux)
    return f if bound is None else BoundDifferentiable(f, bound)


# Note [Functions made anew at every step]
# JAX tutorials write `g = jax.grad(loss)(params, x, y)` inside the training loop, often of a
# lambda made there (`jax.grad(lambda p: loss(p, x, y))(params)`). Each llgrad.grad call made
# a new Differentiable, so every step traced (and looked up its native code) again: 20-30 ms
# a step for a 5-parameter regression whose compiled call takes microseconds. So grad and
# value_and_grad reuse the Differentiable of the last _RECENT_MAX functions they were given,
# keyed by what a function computes with: its code, globals dict, closure cells and defaults,
# each by identity (two lambdas made by one line in one frame share code, cells and
# globals, hence their meaning: Python reads the cells' current contents at every call, and
# the compiled code guards what it read from them, Note [Captured values are guarded]). An
# entry holds its function, so the identities in its key stay valid while it is kept; the
# bound keeps a loop that makes a function with other cells or defaults at every step (a
# closure over a fresh default array) from keeping every compiled copy alive.
# `differentiate` still makes a new Differentiable each time: it is the decorator, and a
# fresh object is what its callers (cache_info, trace_count) expect.
_RECENT: "collections.OrderedDict[tuple, Differentiable]" = collections.OrderedDict()
_RECENT_MAX = 64
_RECENT_LOCK = threading.Lock()


def _function_key(f) -> tuple | None:
    """What a plain function's result depends on besides its arguments, by identity."""
    if type(f) is not types.FunctionType:
        return None
    return (f.__code__, id(f.__globals__), tuple(map(id, f.__closure__ or ())),
            tuple(map(id, f.__defaults__ or ())),
            tuple((k, id(v)) for k, v in (f.__kwdefaults__ or {}).items()))


def _recent(f: Callable, argnums, has_aux: bool):
    """The Differentiable of `f` (a Differentiable or bound method as `_differentiable`
    takes them) for grad/value_and_grad: reused for a plain function already given."""
    key = _function_key(f)
    if key is None:
        return _differentiable(f, argnums, has_aux=has_aux)
    try:
        key += (argnums, has_aux)
        hash(key)
    except TypeError:  # argnums given as a list
        return _differentiable(f, argnums, has_aux=has_aux)
    with _RECENT_LOCK:
        d = _RECENT.get(key)
        if d is not None:
            _RECENT.move_to_end(key)
            return d
        d = _RECENT[key] = _differentiable(f, argnums, has_aux=has_aux)
        if len(_RECENT) > _RECENT_MAX:
            _RECENT.popitem(last=False)
        return d


def grad(f: Callable, argnums=0, has_aux: bool = False) -> Callable:
    """The gradient function of a scalar function (jax.grad style); with has_aux, f returns
    (value, aux) and the gradient function returns (gradient, aux). Calling grad again on
    the same function (or a lambda made again by the same line) reuses its compiled code:
    Note [Functions made anew at every step]; an array it captures that changes between
    calls (a minibatch) becomes an input of that code (Note [Captured arrays that change
    become inputs] in tracer/captures.py)."""
    return _recent(f, argnums, has_aux).grad


def value_and_grad(f: Callable, argnums=0, has_aux: bool = False) -> Callable:
    """A function returning (value, gradient) (jax.value_and_grad style); with has_aux, f
    returns (value, aux) and the function returns ((value, aux), gradient). Compiled code
    is reused as by `grad`."""
    return _recent(f, argnums, has_aux).value_and_grad


jacobian = compose.jacobian
from llgrad.forward import hessian, hvp, jacfwd, jacrev, jvp  # noqa: E402
from llgrad.batching import vmap  # noqa: E402

__all__ = ["differentiate", "grad", "value_and_grad", "jacobian", "hessian", "hvp", "jvp",
           "jacfwd", "jacrev", "vmap", "Differentiable", "BoundDifferentiable", "Inspection"]
