"""The autograd graph: Node (PyTorch's grad_fn objects), PrimNode for primitives,
AccumulateGrad for leaves, saved values with version checks, removable hook handles."""
from __future__ import annotations

import itertools
import sys
import traceback

import numpy as np

from llgrad.runtime.autograd.state import STATE
from llgrad.runtime.prim import _rule_reads
from llgrad.runtime.errors import (
    _INTERNAL_FILE, _PKG_DIRS, AutogradError, SourceLoc, UnsupportedError, user_frame,
)

_SEQ = itertools.count()


class RemovableHandle:
    """Returned by register_hook; `remove()` unregisters the hook."""

    _ids = itertools.count()

    def __init__(self, hooks: dict):
        self.id = next(self._ids)
        self._hooks = hooks

    def remove(self) -> None:
        self._hooks.pop(self.id, None)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()


def _add_hook(hooks: dict, fn) -> RemovableHandle:
    h = RemovableHandle(hooks)
    hooks[h.id] = fn
    return h


class _Extra:
    """A node's rarely used fields, in one object, so that a node without hooks, retained
    outputs, metadata or an anomaly trace costs one empty slot (the eager hot path)."""

    __slots__ = ("pre_hooks", "post_hooks", "tensor_hooks", "retain", "meta", "trace")

    def __init__(self):
        self.pre_hooks = self.post_hooks = self.tensor_hooks = self.retain = self.meta = None
        self.trace = None


def _anomaly_trace() -> _Extra:
    # Anomaly mode: frames only; source lines are read when an error is reported.
    x = _Extra()
    x.trace = traceback.StackSummary.extract(traceback.walk_stack(None), limit=32,
                                             lookup_lines=False)
    return x


class Node:
    """A backward function in the graph (a tensor's grad_fn); callable on output gradients.

    `type(node).__name__` and `node.name()` are PyTorch's (`ExpBackward0`, `AccumulateGrad`):
    primitives' nodes are instances of one PrimNode subclass per name (`node_class`)."""

    __slots__ = ("next_functions", "_seq", "_code", "_lasti", "_x", "__weakref__")
    n_outputs = 1  # the number of outputs of the forward op (gradients this node takes)

    def __init__(self, next_functions=()):
        self.next_functions = next_functions
        self._seq = next(_SEQ)
        f = user_frame(2)
        self._code, self._lasti = (f.f_code, f.f_lasti) if f else (None, 0)
        self._x = _anomaly_trace() if STATE.anomaly else None

    def _extra(self) -> _Extra:
        x = self._x
        if x is None:
            x = self._x = _Extra()
        return x

    @property
    def _trace(self):
        """The forward traceback recorded in anomaly mode (None otherwise)."""
        x = self._x
        return None if x is None else x.trace

    @property
    def metadata(self) -> dict:
        """A dict for user annotations, as PyTorch's Node.metadata."""
        x = self._extra()
        if x.meta is None:
            x.meta = {}
        return x.meta

    def name(self) -> str:
        return type(self).__name__

    def __repr__(self) -> str:
        return f"<{self.name()} object at {hex(id(self))}>"

    @property
    def loc(self) -> SourceLoc | None:
        """Where in the user's source the forward op that made this node ran."""
        code = self._code
        if code is None:
            return None
        lasti = self._lasti  # the line is looked up only when asked for
        return SourceLoc(code.co_filename, _line_of(code, lasti), 0, code.co_name)

    def __call__(self, *grads):
        out = self.apply(list(grads))
        return out[0] if len(out) == 1 else tuple(out)

    def apply(self, grads: list) -> list:
        raise NotImplementedError

    def release(self) -> None:
        """Free saved values (after a backward without retain_graph)."""

    def register_hook(self, fn) -> RemovableHandle:
        """`fn(grad_inputs, grad_outputs)` runs after this node; may return new grad_inputs."""
        x = self._extra()
        if x.post_hooks is None:
            x.post_hooks = {}
        return _add_hook(x.post_hooks, fn)

    def register_prehook(self, fn) -> RemovableHandle:
        """`fn(grad_outputs)` runs before this node; may return new grad_outputs."""
        x = self._extra()
        if x.pre_hooks is None:
            x.pre_hooks = {}
        return _add_hook(x.pre_hooks, fn)

    def _register_tensor_hook(self, output_nr: int, fn) -> RemovableHandle:
        x = self._extra()
        if x.tensor_hooks is None:
            x.tensor_hooks = {}
        return _add_hook(x.tensor_hooks.setdefault(output_nr, {}), fn)

    def tensor_hooks(self, output_nr: int):
        x = self._x
        th = x.tensor_hooks if x is not None else None
        return th.get(output_nr) if th else None


def _line_of(code, lasti: int) -> int:
    """The source line of the bytecode offset `lasti` (what `frame.f_lineno` reports)."""
    line = code.co_firstlineno
    for start, end, ln in code.co_lines():
        if start <= lasti < end:
            return ln if ln is not None else line
        if ln is not None:
            line = ln
    return line


class ShapeOnly:
    """Stands in for an input the VJP rules need only the shape and dtype of."""

    __slots__ = ("shape", "dtype")

    def __init__(self, shape, dtype):
        self.shape, self.dtype = shape, dtype


# An input no VJP rule reads, of the (first) output's shape and dtype (the common case of
# elementwise ops): the node's own `_oshape` and `_odtype` say it (to reduce and cast its
# gradient), so no ShapeOnly is made for it.
SAME_AS_OUT = ShapeOnly(None, None)


class _Freed:
    pass


FREED = _Freed()


def freed_error(node: Node) -> AutogradError:
    loc = node.loc
    src = f"\n    {loc.source_line}" if loc is not None and loc.source_line else ""
    where = f"{node.name()}, created at {loc}{src}" if loc else node.name()
    return AutogradError(
        "Trying to backward through the graph a second time (or directly access saved tensors "
        "after they have already been freed). Saved intermediate values of the graph are freed "
        "when you call .backward() or autograd.grad().\n"
        f"  The freed node is {where}",
        fix="if the tensors that line uses should not need gradients, cut the graph there "
        "with .detach() (or compute them without requires_grad / under no_grad) so each "
        "backward has a graph of its own. Specify retain_graph=True on the first backward only "
        "if you really need to backward through the same graph twice: it keeps the graph "
        "alive and costs memory.")


def version_error(node: Node, what: str, saved: int, now: int) -> AutogradError:
    return AutogradError(
        f"one of the variables needed for gradient computation has been modified by an inplace "
        f"operation: {what} is at version {now}; expected version {saved} instead. "
        f"It was saved by {node.name()}" + (f", created at {node.loc}" if node.loc else ""),
        fix="use an out-of-place operation (y = x * 2 instead of x.mul_(2)), or .clone() the "
        "tensor before modifying it in place. Enable anomaly detection "
        "(llgrad.autograd.set_detect_anomaly(True)) to find the forward op")


def _aval(a) -> str:
    from llgrad.runtime.aval import aval_str
    return aval_str(a.shape, a.dtype)


def _describe(t) -> str:
    """`a tensor of shape f32[2], which is output 0 of AddBackward0` (its producing op now)."""
    n = t._grad_fn
    made = f", which is output {t._output_nr} of {n.name()}," if n is not None else \
        (", a leaf," if t._requires_grad else "")
    return "a tensor of shape " + _aval(t._data) + made


# Note [Saved inputs]
# A PrimNode keeps the input tensors its VJP rules read as they are, in `inputs`, and the
# versions they had then in `_versions` (a tensor's version counter only ever goes from None,
# version 0, to a list that counts up: Note [Version counters]); apply checks each against
# the tensor's version now, as PyTorch's SavedVariable does. Nearly always every version is
# 0, and `_versions` is the plan's shared tuple of zeros: saving an input makes no object.
# An output is saved as a SavedTensor, which holds its data but not the tensor (the tensor
# holds the node: no reference cycle).
class SavedTensor:
    """A tensor saved for backward, with the version it had, and (for outputs) its node."""

    __slots__ = ("tensor", "data", "vc", "version", "is_output", "nr")

    def __init__(self, tensor, is_output=False):
        self.vc = tensor._vc
        self.version = tensor._vc[0]
        self.is_output = is_output
        self.nr = tensor._output_nr
        if is_output:  # no reference to the output tensor itself: avoids a cycle
            self.tensor, self.data = None, tensor._data
        else:
            self.tensor, self.data = tensor, None

    def unpack(self, node: Node):
        if self.vc[0] != self.version:
            what = (f"a tensor of shape {_aval(self.data)}, which is output {self.nr} of "
                    f"{node.name()}," if self.is_output else _describe(self.tensor))
            raise version_error(node, what, self.version, self.vc[0])
        if not self.is_output:
            return self.tensor
        return _Tensor[0]._wrap(self.data, node if STATE.grad_enabled else None, self.nr,
                                self.vc)


def _sum_to(g, shape):
    from llgrad.runtime import ops
    gs = g.shape
    if len(gs) < len(shape) or not all(a == b or b == 1 for a, b in zip(gs[len(gs) - len(shape):],
                                                                          shape)):
        return g
    return ops.sum_to(g, shape)


_WANT: dict = {}
_Tensor: list = [None]  # set by runtime/tensor.py (no import cycle on the hot path)


def _wanted(prim, needs, n_args) -> frozenset:
    """Positions to save (-1: the output) for a primitive given which inputs need grads."""
    saves = prim.saves
    if saves is not None:
        return frozenset(saves(n_args) if callable(saves) else saves)
    if prim.reads is None:
        return frozenset(range(-1, n_args))
    want = set()
    for i, need in enumerate(needs):
        if need:
            r = prim.reads[i]
            want.update(range(-1, n_args) if r is None else r)
    return frozenset(want)


# Note [Node classes]
# PyTorch's grad_fn objects are instances of one class per backward formula, named after it
# (`type(y.grad_fn).__name__ == "ExpBackward0"`), all subclasses of torch.autograd.graph.Node.
# llgrad's are too: `node_class(name)` makes one PrimNode subclass per node name, once, with
# no slots of its own, so every primitive's node is laid out alike. Primitives that share a
# PyTorch name share the class (square and pow are both PowBackward0), and a primitive whose
# name depends on the call (SumBackward0 / SumBackward1, `Primitive.node_name` a function)
# picks its class per call. The forward hot path pays nothing for this: the class of a
# primitive with a fixed name sits in its SavePlan, which the op looks up anyway. Where
# PyTorch names a node after a function that llgrad composes from primitives (x.t() is a
# permute, torch.stack a concatenation of views, 1 - x a sub, x.max() an amax), the function
# reclasses its result's node (runtime/torch_shape.py `named`); the next_functions stay those
# of the composition.
_NODE_CLASSES: dict = {}


def node_class(name: str, multi: bool = False) -> type:
    """The PrimNode subclass named `name` (`ExpBackward0`), made on first use; `multi` for
    primitives with several results."""
    cls = _NODE_CLASSES.get((name, multi))
    if cls is None:
        cls = _NODE_CLASSES[(name, multi)] = type(name, (MultiNode if multi else PrimNode,), {
            "__slots__": (), "__doc__": f"The backward of the forward ops PyTorch calls {name}."})
    return cls


class SavePlan:
    """What a PrimNode keeps of its operands, per (primitive, which operands are tensors and
    which of those need gradients); computed once and shared by every such node. `cls` is the
    node class, or None when the primitive's node name depends on the call."""

    __slots__ = ("prim", "cls", "multi", "needs", "edges", "saved", "shape_only", "unread",
                 "saves_out", "rules", "zero_versions", "all_same")

    def __init__(self, prim, kinds):
        # kinds[i]: 0 a constant, 1 a tensor without grad, 2 a tensor that requires grad
        n = len(kinds)
        self.prim, self.multi = prim, prim.multiple_results
        name = prim.node_name
        if type(name) is dict:  # named by which operands are constants (PowBackward0/1/2)
            name = name[tuple(k == 0 for k in kinds)]
        self.cls = node_class(name, self.multi) if type(name) is str else None
        self.needs = tuple(k == 2 for k in kinds)
        self.edges = tuple(i for i, k in enumerate(kinds) if k)
        want = _WANT.get((prim, self.needs))
        if want is None:
            want = _WANT[(prim, self.needs)] = _wanted(prim, self.needs, n)
        self.saved = tuple(i for i in self.edges if i in want)
        # Shape-only inputs whose shape no rule reads either (a sum's rule reads its input's
        # shape; add's rules read nothing): those may be SAME_AS_OUT.
        reads = prim.reads
        if reads is None and isinstance(prim.vjp, tuple):
            reads = _rule_reads(prim.vjp)
        rules_read = set()
        for i in range(n):
            if self.needs[i]:
                rules_read.update(range(-1, n) if reads is None or reads[i] is None
                                  else reads[i])
        self.unread = tuple(i for i in self.edges if i not in want and i not in rules_read)
        self.shape_only = tuple(i for i in self.edges if i not in want and i in rules_read)
        self.saves_out = -1 in want
        self.zero_versions = (0,) * len(self.saved)  # the versions saved, most often
        # every operand a tensor no rule reads (add, sub, neg): the inputs of a node whose
        # operands all have its output's shape and dtype are this one shared tuple
        self.all_same = (SAME_AS_OUT,) * n if len(self.unread) == n else None
        # (position, position among the edges, rule) for each input that needs a gradient
        self.rules = tuple((i, self.edges.index(i), prim.vjp_rule(i))
                           for i in range(n) if self.needs[i])

    def node_cls(self, out_shape, params) -> type:
        """The class of this call's node."""
        cls = self.cls
        if cls is None:
            cls = node_class(self.prim.node_name(out_shape, **params), self.multi)
        return cls


_PLANS: dict = {}


def save_plan(prim, args) -> SavePlan:
    Tensor = _Tensor[0]
    k = 1
    for a in args:
        k = k * 3 + ((2 if a._requires_grad else 1) if isinstance(a, Tensor) else 0)
    plan = _PLANS.get((prim, k))
    if plan is None:
        plan = _PLANS[(prim, k)] = SavePlan(prim, tuple(
            (2 if a._requires_grad else 1) if isinstance(a, Tensor) else 0 for a in args))
    return plan


_getframe = sys._getframe
_new = object.__new__


class PrimNode(Node):
    """The backward of one primitive application; made by `new_node` as an instance of its
    `node_class` (`MulBackward0`, ...), see Note [Node classes]."""

    __slots__ = ("params", "inputs", "saved_out", "_plan", "_oshape", "_odtype", "_versions")
    # saved_out is set only when the plan saves the output (save_output); read it through
    # the plan's saves_out, as release and apply do.

    @property
    def prim(self):
        return self._plan.prim

    @property
    def out_meta(self) -> tuple:
        """(shape, dtype) of each output of the forward op."""
        return ((self._oshape, self._odtype),)


    @property
    def needs(self) -> tuple:
        """Per input, whether it needs a gradient."""
        return self._plan.needs

    @property
    def edges(self) -> tuple:
        """The input positions of next_functions' edges (tensor inputs; constants have none)."""
        return self._plan.edges

    def save_output(self, out_tensor) -> None:
        """Save the output (a tuple of all outputs for primitives with several results)."""
        if type(out_tensor) is tuple:
            self.saved_out = tuple(SavedTensor(t, is_output=True) for t in out_tensor)
        else:
            self.saved_out = SavedTensor(out_tensor, is_output=True)

    @property
    def materialize(self) -> bool:
        """Missing output gradients reach a multi-result primitive's VJP rules as None (so a
        rule can skip terms that would be 0 * inf, as eigh's eigenvector term for repeated
        eigenvalues), as they do in the compiler's AD; see engine._materialize."""
        return not self._plan.multi

    def release(self) -> None:
        plan = self._plan
        if plan.saved:
            inputs = self.inputs
            for i in plan.saved:
                inputs[i] = FREED
        if plan.saves_out:
            self.saved_out = FREED

    def apply(self, grads: list) -> list:
        plan = self._plan
        so = self.saved_out if plan.saves_out else False
        args = self.inputs
        if so is FREED:
            raise freed_error(self)
        if plan.saved:
            k = 0
            for i in plan.saved:  # Note [Saved inputs]
                a = args[i]
                if a is FREED:
                    raise freed_error(self)
                v = a._v
                if (0 if v is None else v[0]) != self._versions[k]:
                    raise version_error(self, _describe(a), self._versions[k], v[0])
                k += 1
        if so is False:
            out = None
        elif type(so) is tuple:
            out = tuple(s.unpack(self) for s in so)
        else:
            out = so.unpack(self)
        g = grads[0] if not plan.multi else tuple(grads)
        params = self.params
        result = [None] * len(plan.edges)
        for i, slot, rule in plan.rules:
            try:
                gi = rule(g, out, *args, **params) if params else rule(g, out, *args)
            except UnsupportedError as e:  # a gradient a rule refuses: at the forward's line
                if e.loc is not None:
                    raise
                raise UnsupportedError(e.what, self.loc, e.fix) from None
            if gi is not None:
                a = args[i]
                if type(a) is ShapeOnly:
                    shape, dtype = (a.shape, a.dtype) if a is not SAME_AS_OUT else \
                        (self._oshape, self._odtype)
                else:
                    d = a._data
                    shape, dtype = d.shape, d.dtype
                gd = gi._data
                if gd.shape != shape:
                    gi = _sum_to(gi, shape)
                    gd = gi._data
                if gd.dtype is not dtype and gd.dtype != dtype and dtype.kind == "f":
                    from llgrad.runtime import ops
                    gi = ops.astype(gi, dtype)
                result[slot] = gi
        return result


class MultiNode(PrimNode):
    """The node of a primitive with several results (their number is the call's)."""

    __slots__ = ("_metas",)

    @property
    def out_meta(self) -> tuple:
        return self._metas

    @property
    def n_outputs(self) -> int:
        return len(self._metas)


def new_node(cls, params, args, plan, next_functions, shape, dtype) -> PrimNode:
    """A node of class `cls` for one application of `plan.prim` to `args` (Tensor._lg_process;
    the eager hot path, hence no __init__ call): saves what `plan` says and where the user's
    code made it."""
    self = _new(cls)
    self.next_functions = next_functions
    self._seq = next(_SEQ)
    # The user's frame: the innermost outside llgrad (see user_frame). Each frame looked at
    # costs a frame object, so skip the three known to be llgrad's: this node is made for
    # Tensor._lg_process (by its helper _record), which only llgrad's own code calls.
    try:
        f = _getframe(4)
    except ValueError:
        f = None
    cache = _INTERNAL_FILE
    while f is not None:
        code = f.f_code
        fn = code.co_filename
        internal = cache.get(fn)
        if internal is None:
            internal = cache[fn] = fn.startswith(_PKG_DIRS)
        if not internal:
            break
        f = f.f_back
    if f is not None:
        self._code, self._lasti = code, f.f_lasti
    else:
        self._code, self._lasti = None, 0
    self._x = _anomaly_trace() if STATE.anomaly else None
    self.params, self._plan, self._oshape, self._odtype = params, plan, shape, dtype
    same = plan.all_same
    if same is not None:
        for a in args:
            d = a._data
            if d.dtype is not dtype or d.shape != shape:
                break
        else:
            self.inputs = same
            return self
    inputs = list(args)  # constants as they are; tensors saved or reduced to ShapeOnly
    if plan.saved:  # Note [Saved inputs]
        vs = plan.zero_versions
        k = 0
        for i in plan.saved:
            v = inputs[i]._v
            if v is not None and v[0]:
                if vs is plan.zero_versions:
                    vs = list(vs)
                vs[k] = v[0]
            k += 1
        self._versions = vs if type(vs) is tuple else tuple(vs)
    for i in plan.unread:
        d = inputs[i]._data
        if d.dtype is dtype and d.shape == shape:
            inputs[i] = SAME_AS_OUT
        else:
            s = inputs[i] = _new(ShapeOnly)
            s.shape, s.dtype = d.shape, d.dtype
    for i in plan.shape_only:
        d = inputs[i]._data
        s = inputs[i] = _new(ShapeOnly)
        s.shape, s.dtype = d.shape, d.dtype
    self.inputs = inputs
    # saved_out: set (by save_output) only for a primitive whose rules read its output
    return self


_refs = sys.getrefcount
_G_REFS = 3  # the gradient tensor: the engine's gradient list, `g`, getrefcount's argument
_D_REFS = 3  # its array: the tensor, `d`, getrefcount's argument


class AccumulateGrad(Node):
    """Accumulates the incoming gradient into a leaf's `.grad`; `.variable` is the leaf."""

    __slots__ = ("variable",)

    def __init__(self, variable):
        self.next_functions = ()
        self._seq = next(_SEQ)
        self._code = self._x = None
        self._lasti = 0
        self.variable = variable

    def apply(self, grads: list) -> list:
        g = grads[0]
        if g is None:
            return []
        v = self.variable
        if g._data.shape != v._data.shape:
            g = _sum_to(g, v._data.shape)
        if v._grad is None:
            if STATE.grad_enabled:  # create_graph: keep the graph of the gradient
                v._grad = g
            else:
                d = g._data
                if g is grads[0] and d.dtype is v._data.dtype and d.base is None and \
                        d.flags.c_contiguous and d.flags.writeable and \
                        _refs(g) == _G_REFS and _refs(d) == _D_REFS:
                    # Nothing else holds this fresh gradient (only the engine's list of
                    # gradients, and here): take its buffer instead of copying, as PyTorch's
                    # AccumulateGrad steals a gradient whose use count says it is unshared.
                    v._grad = _Tensor[0]._wrap(d)
                else:
                    v._grad = _Tensor[0]._wrap(np.array(d, dtype=v._data.dtype, copy=True))
        else:
            v._grad = v._grad + g if STATE.grad_enabled else v._grad.__class__._wrap(
                (v._grad._data + g._data).astype(v._data.dtype, copy=False))
        return []
