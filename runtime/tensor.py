"""The eager Tensor: a numpy array plus autograd metadata, with PyTorch's methods.

Operations go through `llgrad.runtime.ops` and `bind`; `Tensor._lg_process` is the eager
interpretation: run the numpy impl, and record a PrimNode when a gradient is needed.
"""
from __future__ import annotations

import weakref
from collections import namedtuple

import numpy as np

from llgrad.runtime import ops
from llgrad.runtime import torch_shape as _ts
from llgrad.runtime.arraylike import ArrayOperators
from llgrad.runtime.autograd import graph as _graph
from llgrad.runtime.autograd import views as _views
from llgrad.runtime.autograd.graph import (
    _PLANS, AccumulateGrad, PrimNode, new_node, save_plan,
)
from llgrad.runtime.autograd.state import PROFILER, STATE
from llgrad.runtime.aval import to_dtype, to_np
from llgrad.runtime.errors import AutogradError
from llgrad.runtime.ops.elementwise import _NO_PARAMS
from llgrad.runtime.prim import set_default_interpretation

_NONE_EDGE = (None, 0)
_new = object.__new__
MaxMin = namedtuple("MaxMin", ["values", "indices"])


class Tensor(ArrayOperators):
    """An n-dimensional array that records the operations applied to it for autograd."""

    _lg_level = 0
    __slots__ = ("_data", "_requires_grad", "_grad_fn", "_v", "__dict__", "__weakref__")
    # Set (in the instance dict) only where they differ from these defaults: a leaf's .grad,
    # hooks and AccumulateGrad, an output of a multi-result op, views and bases with views
    # (runtime/autograd/views.py). Reading them on any other tensor is a class lookup, and a
    # new tensor does not pay for setting them (the eager hot path).
    _grad = _acc = _hooks = None
    _output_nr = 0
    _view = None
    _views = None

    def __init__(self, data, requires_grad: bool = False):
        t = _from_data(data, None)
        self._data = t
        self._requires_grad = False
        self._grad_fn = None
        self._v = None
        if requires_grad:
            self.requires_grad_(True)

    @classmethod
    def _wrap(cls, data, grad_fn=None, output_nr=0, vc=None, requires_grad=None):
        t = object.__new__(cls)
        t._data = data
        t._grad_fn = grad_fn
        t._requires_grad = grad_fn is not None if requires_grad is None else requires_grad
        if output_nr:
            t._output_nr = output_nr
        t._v = vc
        return t

    # -- the eager interpretation ---------------------------------------------------------
    @staticmethod
    def _lg_process(prim, args, params):
        arrays, req = [], False
        for a in args:
            if isinstance(a, Tensor):
                arrays.append(a._data)
                if a._requires_grad:
                    req = True
            else:
                arrays.append(a)
        prof = PROFILER[0]
        if prof is not None:
            prof.begin("lg::" + prim.name, arrays)
        try:
            out = prim.impl(*arrays, **params)
        except ValueError:
            _shape_check(prim, arrays, params)  # raises ShapeError naming both shapes
            raise
        if prof is not None:
            prof.end()
        if prim.multiple_results:
            return _process_results(prim, args, params, arrays, out, req)
        if type(out) is not np.ndarray:
            out = np.asarray(out)
        t = _new(Tensor)
        t._data = out
        fam = prim.family
        if (fam == "shape" or fam == "index") and isinstance(args[0], Tensor) and \
                np.may_share_memory(out, arrays[0]):
            t._v = args[0]._vc  # a view: in-place changes are seen through both
            view = True
        else:
            t._v = None
            view = False
        # Integer and bool results carry no gradient (x.long(), as in PyTorch).
        if req and STATE.grad_enabled and not prim.nondiff and out.dtype.kind == "f":
            _record(t, prim, args, params, out)
        else:
            t._grad_fn = None
            t._requires_grad = False
        if view:
            _views.record(t, args[0], prim, args, params)
        return t

    @staticmethod
    def _lg_binary(prim, x, y):
        """`_lg_process(prim, (x, y), {})` for an elementwise binary primitive on operands of
        one dtype, at least one a Tensor, the other a Tensor or an array: the ops' fast path
        (Note [Eager fast path] in runtime/ops/elementwise.py), with no loop over operands."""
        tx, ty = type(x), type(y)
        if tx is Tensor:
            xd = x._data
            if ty is Tensor:
                yd = y._data
                req = x._requires_grad or y._requires_grad
            else:
                yd, req = y, x._requires_grad
        else:
            xd, yd, req = x, y._data, y._requires_grad
        if PROFILER[0] is not None:
            return Tensor._lg_process(prim, (x, y), _NO_PARAMS)
        try:
            out = prim.impl(xd, yd)
        except ValueError:
            _shape_check(prim, (xd, yd), _NO_PARAMS)  # raises ShapeError naming both shapes
            raise
        if type(out) is not np.ndarray:
            out = np.asarray(out)
        t = _new(Tensor)
        t._data = out
        t._v = None
        if req and STATE.grad_enabled and not prim.nondiff and out.dtype.kind == "f":
            _record(t, prim, (x, y), _NO_PARAMS, out)
        else:
            t._grad_fn = None
            t._requires_grad = False
        return t

    @staticmethod
    def _lg_concrete(t):
        return t._data

    def _accumulator(self) -> AccumulateGrad:
        acc = self._acc() if self._acc is not None else None
        if acc is None:
            acc = AccumulateGrad(self)
            self._acc = weakref.ref(acc)
        return acc

    # -- metadata -------------------------------------------------------------------------
    @property
    def shape(self) -> tuple:
        return self._data.shape

    @property
    def _np_dtype(self):
        return self._data.dtype

    @property
    def dtype(self):
        return to_dtype(self._data.dtype)

    @property
    def ndim(self) -> int:
        return self._data.ndim

    @property
    def device(self) -> str:
        return "cpu"

    @property
    def is_leaf(self) -> bool:
        return self._grad_fn is None

    @property
    def grad_fn(self):
        return self._grad_fn

    @property
    def output_nr(self) -> int:
        return self._output_nr

    @property
    def requires_grad(self) -> bool:
        return self._requires_grad

    @requires_grad.setter
    def requires_grad(self, value: bool) -> None:
        self.requires_grad_(value)

    def requires_grad_(self, requires_grad: bool = True) -> "Tensor":
        if self._grad_fn is not None:
            if requires_grad:
                return self
            raise AutogradError(
                "you can only change requires_grad flags of leaf variables.",
                fix="use .detach() to get a tensor that does not require grad")
        if requires_grad and self._data.dtype.kind != "f":
            raise AutogradError(f"only Tensors of floating point dtype can require gradients, "
                                f"got {self.dtype}", fix="convert with .float() or .double()")
        self._requires_grad = bool(requires_grad)
        return self

    @property
    def grad(self):
        return self._grad

    @grad.setter
    def grad(self, value) -> None:
        self._grad = value

    @property
    def data(self) -> "Tensor":
        return Tensor._wrap(self._data, vc=self._vc)

    @data.setter
    def data(self, value) -> None:
        self._data = value._data if isinstance(value, Tensor) else np.asarray(value)

    # Note [Version counters]: a tensor's in-place version is a one-element list shared with
    # its views (and detach()/.data aliases), made when first needed (saved for backward,
    # aliased, changed in place): most tensors never are, and an eager op then makes one
    # object less (the garbage collector's pace follows the objects made).
    @property
    def _vc(self) -> list:
        v = self._v
        if v is None:
            v = self._v = [0]
        return v

    @_vc.setter
    def _vc(self, value: list) -> None:
        self._v = value

    @property
    def _version(self) -> int:
        v = self._v
        return 0 if v is None else v[0]

    @property
    def retains_grad(self) -> bool:
        n = self._grad_fn
        r = n._x.retain if n is not None and n._x is not None else None
        return bool(r and self._output_nr in r)

    def retain_grad(self) -> None:
        """Keep `.grad` for this non-leaf tensor after backward."""
        n = self._grad_fn
        if n is None:
            return
        x = n._extra()
        if x.retain is None:
            x.retain = {}
        x.retain[self._output_nr] = weakref.ref(self)

    def register_hook(self, hook):
        """`hook(grad)` runs when this tensor's gradient is computed; it may return a new one."""
        if not self._requires_grad:
            raise AutogradError("cannot register a hook on a tensor that doesn't require gradient")
        if self._grad_fn is not None:
            return self._grad_fn._register_tensor_hook(self._output_nr, hook)
        from llgrad.runtime.autograd.graph import _add_hook
        if self._hooks is None:
            self._hooks = {}
        return _add_hook(self._hooks, hook)

    def backward(self, gradient=None, retain_graph=None, create_graph=False, inputs=None):
        """Compute the gradient of this tensor w.r.t. graph leaves (accumulated into `.grad`)."""
        from llgrad.runtime.autograd import backward
        backward(self, gradient, retain_graph, create_graph, inputs=inputs)

    # -- conversions ----------------------------------------------------------------------
    def size(self, dim=None):
        return self._data.shape if dim is None else self._data.shape[dim]

    def dim(self) -> int:
        return self._data.ndim

    def numel(self) -> int:
        return int(self._data.size)

    def __len__(self) -> int:
        if not self._data.ndim:
            raise TypeError("len() of a 0-d tensor")
        return self._data.shape[0]

    def item(self):
        if self._data.size != 1:
            raise RuntimeError(f"a Tensor with {self._data.size} elements cannot be converted to "
                             f"Scalar")
        return self._data.reshape(()).item()

    def __float__(self):
        return float(self.item())

    def __int__(self):
        return int(self.item())

    def __index__(self):
        if self._data.dtype.kind not in "iub":
            raise TypeError("only integer tensors of a single element can be converted to an "
                            "index")
        return int(self.item())

    def __bool__(self):
        if self._data.size != 1:
            raise RuntimeError(f"Boolean value of Tensor with more than one value is "
                               f"ambiguous (shape {list(self._data.shape)})")
        return bool(self._data.reshape(()))

    def __iter__(self):
        if not self._data.ndim:
            raise TypeError("iteration over a 0-d tensor")
        return (self[i] for i in range(self._data.shape[0]))

    def numpy(self) -> np.ndarray:
        if self._requires_grad:
            raise RuntimeError("Can't call numpy() on Tensor that requires grad. Use "
                               "tensor.detach().numpy() instead.")
        return self._data

    def __array__(self, dtype=None, copy=None):
        # np.asarray(t), scipy on a tensor: as PyTorch, refused when t requires grad, so no
        # numpy or scipy function drops the graph silently.
        if self._requires_grad:
            raise RuntimeError("Can't call numpy() on Tensor that requires grad. Use "
                               "tensor.detach().numpy() instead.")
        d = self._data if dtype is None else self._data.astype(dtype)
        return d.copy() if copy else d

    def tolist(self):
        return self._data.tolist()

    def detach(self) -> "Tensor":
        return Tensor._wrap(self._data, vc=self._vc)

    def detach_(self) -> "Tensor":
        self._grad_fn = None
        self._requires_grad = False
        return self

    def clone(self) -> "Tensor":
        return ops.copy(self)

    def contiguous(self) -> "Tensor":
        return self

    def cpu(self) -> "Tensor":
        return self

    def to(self, *args, **kwargs) -> "Tensor":
        dt = kwargs.get("dtype")
        for a in args:
            if not isinstance(a, str):
                dt = a
        return self if dt is None else ops.astype(self, to_np(dt))

    def type(self, dtype=None):
        return str(self.dtype) if dtype is None else self.to(dtype)

    def double(self): return ops.astype(self, np.float64)
    def float(self): return ops.astype(self, np.float32)
    def long(self): return ops.astype(self, np.int64)
    def int(self): return ops.astype(self, np.int32)
    def bool(self): return ops.astype(self, np.bool_)
    def is_floating_point(self) -> bool: return self._data.dtype.kind == "f"

    def __repr__(self) -> str:
        from llgrad.runtime.printing import tensor_repr
        return tensor_repr(self)

    __str__ = __repr__

    def __setitem__(self, key, value) -> None:
        self._inplace(ops.setitem(self, key, value), "setitem")

    def __reduce_ex__(self, proto):
        return (_rebuild, (self._data, self._requires_grad))

    # -- in place -------------------------------------------------------------------------
    def _inplace(self, result, op: str) -> "Tensor":
        """Write `result` into self (and, for a view, its base), moving the graph along
        (runtime/autograd/views.py for views)."""
        if self._grad_fn is None and self._requires_grad and STATE.grad_enabled:
            raise AutogradError(
                f"a leaf Variable that requires grad is being used in an in-place operation "
                f"({op}).", fix="wrap the update in `with llgrad.no_grad():`, or use an "
                "out-of-place operation")
        view = self._view
        if view is not None:
            _views.check_inplace(self, op)
        r = result._data if isinstance(result, Tensor) else np.asarray(result)
        if not np.can_cast(r.dtype, self._data.dtype, "same_kind"):
            raise RuntimeError(f"result type {r.dtype} can't be cast to the desired output "
                               f"type {self._data.dtype} in {op}")
        if isinstance(result, Tensor) and result._grad_fn is not None:
            _snapshot_saved_self(result._grad_fn, self)
        if not self._data.flags.writeable:  # a read-only view (broadcast): now its own array
            self._data = self._data.copy()
            self._view = view = None
        self._data[...] = r
        self._vc[0] += 1
        if isinstance(result, Tensor) and result._grad_fn is not None:
            self._grad_fn, self._output_nr = result._grad_fn, result._output_nr
            self._requires_grad = True
            # The node's saved output is `result`'s buffer, which in-place ops never touch.
        if STATE.grad_enabled:
            if view is not None:
                _views.rebase(self, result, _edge)
            elif self._requires_grad and self._views:
                _views.refresh(self)
        return self

    def _inplace_direct(self, ufunc, other) -> bool:
        """`self op= other` computed straight into self's buffer, when nothing is recorded
        or profiled and no promotion is needed: it stores exactly what
        `_inplace(op(self, other))` would, without the temporary (optimizer updates)."""
        d = self._data
        if type(other) is Tensor:
            o = other._data
            if o.dtype is not d.dtype or o.shape != d.shape or \
                    (other._requires_grad and STATE.grad_enabled):
                return False
        elif type(other) is float and d.dtype.kind == "f":
            o = np.asarray(other, d.dtype)
        else:
            return False
        if (self._requires_grad and STATE.grad_enabled) or PROFILER[0] is not None or \
                d.dtype.kind != "f" or not d.flags.writeable:
            return False
        ufunc(d, o, out=d)
        self._vc[0] += 1
        return True

    def add_(self, other, alpha=1):
        if alpha == 1 and self._inplace_direct(np.add, other):
            return self
        return self._inplace(self.add(other, alpha=alpha), "add_")

    def sub_(self, other, alpha=1):
        if alpha == 1 and self._inplace_direct(np.subtract, other):
            return self
        return self._inplace(self.sub(other, alpha=alpha), "sub_")

    def mul_(self, other):
        if self._inplace_direct(np.multiply, other):
            return self
        return self._inplace(ops.mul(self, other), "mul_")

    def div_(self, other):
        if self._inplace_direct(np.true_divide, other):
            return self
        return self._inplace(ops.div(self, other), "div_")
    def pow_(self, other): return self._inplace(ops.pow(self, other), "pow_")

    # Augmented assignment is in place, as in PyTorch and numpy: `x += y` is `x.add_(y)`, seen
    # through every alias and view of x (and refused on a leaf that requires grad).
    def __iadd__(self, other): return self.add_(other)
    def __isub__(self, other): return self.sub_(other)
    def __imul__(self, other): return self.mul_(other)
    def __itruediv__(self, other): return self.div_(other)
    def __ipow__(self, other): return self.pow_(other)
    def neg_(self): return self._inplace(ops.neg(self), "neg_")
    def exp_(self): return self._inplace(ops.exp(self), "exp_")
    def clamp_(self, min=None, max=None): return self._inplace(ops.clip(self, min, max), "clamp_")
    def relu_(self): return self._inplace(ops.relu(self), "relu_")
    def sigmoid_(self): return self._inplace(ops.sigmoid(self), "sigmoid_")
    def tanh_(self): return self._inplace(ops.tanh(self), "tanh_")

    def zero_(self):
        return self._inplace(np.zeros_like(self._data), "zero_")

    def fill_(self, value):
        return self._inplace(np.full_like(self._data, value), "fill_")

    def copy_(self, src):
        src = src if isinstance(src, Tensor) else Tensor(src)
        return self._inplace(ops.broadcast_to(ops.astype(src, self._data.dtype), self.shape)
                             if src._requires_grad else np.broadcast_to(src._data, self.shape),
                             "copy_")

    # In-place initialisers (nn.init): samples from `generator` (the default generator when
    # None), written as under no_grad by the caller (a leaf that requires grad refuses them).
    def uniform_(self, a=0.0, b=1.0, *, generator=None):
        return self._inplace(_numpy_rng(generator).uniform(a, b, self.shape), "uniform_")

    def normal_(self, mean=0.0, std=1.0, *, generator=None):
        return self._inplace(_numpy_rng(generator).normal(mean, std, self.shape), "normal_")

    def bernoulli_(self, p=0.5, *, generator=None):
        from llgrad.runtime.rng import bernoulli
        return self._inplace(bernoulli(self, p, generator=generator), "bernoulli_")

    def bernoulli(self, *, generator=None):
        from llgrad.runtime.rng import bernoulli
        return bernoulli(self, generator=generator)

    def multinomial(self, num_samples, replacement=False, *, generator=None):
        from llgrad.runtime.rng import multinomial
        return multinomial(self, num_samples, replacement, generator=generator)

    # -- math (PyTorch spellings) ----------------------------------------------------------
    def add(self, other, alpha=1):
        return ops.add(self, other if alpha == 1 else ops.mul(other, alpha))

    def sub(self, other, alpha=1):
        return ops.sub(self, other if alpha == 1 else ops.mul(other, alpha))

    mul, div, pow, matmul = ops.mul, ops.div, ops.pow, ops.matmul
    # The forward operators as the op functions themselves (ArrayOperators' methods call
    # these same functions): one Python frame less per operator on the eager hot path.
    __add__, __sub__, __mul__, __truediv__, __pow__ = ops.add, ops.sub, ops.mul, ops.div, ops.pow
    multiply, divide, subtract = ops.mul, ops.div, ops.sub
    true_divide = ops.div
    exp, log, log1p, expm1, sin, cos, tan, tanh = (
        ops.exp, ops.log, ops.log1p, ops.expm1, ops.sin, ops.cos, ops.tan, ops.tanh)
    sqrt, abs, sign, neg, relu, sigmoid = ops.sqrt, ops.abs, ops.sign, ops.neg, ops.relu, ops.sigmoid
    maximum, minimum = ops.maximum, ops.minimum
    floor, remainder, floor_divide = ops.floor, ops.remainder, ops.floor_divide
    eq, ne, lt, le, gt, ge = ops.eq, ops.ne, ops.lt, ops.le, ops.gt, ops.ge
    logical_and, logical_or, logical_not = ops.logical_and, ops.logical_or, ops.logical_not
    logsumexp, softmax, log_softmax = ops.logsumexp, ops.softmax, ops.log_softmax
    reshape, view = ops.reshape, ops.reshape
    flatten, expand, repeat, split = ops.flatten, ops.expand, _ts.repeat, _ts.split

    def squeeze(self, dim=None):
        name = "SqueezeBackward0" if dim is None else \
            "SqueezeBackward1" if isinstance(dim, int) else "SqueezeBackward2"
        return _named(ops.squeeze(self, dim), name, self)

    def unsqueeze(self, dim):
        return _named(ops.unsqueeze(self, dim), "UnsqueezeBackward0", self)
    argmax, argmin, amax, amin, prod = ops.argmax, ops.argmin, ops.amax, ops.amin, ops.prod
    dot, outer, mm = ops.dot, ops.outer, ops.matmul
    addmm, bmm = _ts.addmm, _ts.bmm

    square, rsqrt = ops.square, ops.rsqrt
    # numpy's elementwise math and torch.special's functions, under PyTorch's names
    sinh, cosh, log2, log10, exp2, ceil, trunc, fix = (
        ops.sinh, ops.cosh, ops.log2, ops.log10, ops.exp2, ops.ceil, ops.trunc, ops.trunc)
    asin = arcsin = ops.arcsin
    acos = arccos = ops.arccos
    atan = arctan = ops.arctan
    asinh = arcsinh = ops.arcsinh
    acosh = arccosh = ops.arccosh
    atanh = arctanh = ops.arctanh
    atan2 = arctan2 = ops.arctan2
    logaddexp, logaddexp2, hypot, fmod, copysign = (
        ops.logaddexp, ops.logaddexp2, ops.hypot, ops.fmod, ops.copysign)
    heaviside, sinc, deg2rad, rad2deg = ops.heaviside, ops.sinc, ops.deg2rad, ops.rad2deg
    isnan, isinf, isfinite, signbit = ops.isnan, ops.isinf, ops.isfinite, ops.signbit
    erf, erfc, lgamma, digamma, xlogy = ops.erf, ops.erfc, ops.lgamma, ops.digamma, ops.xlogy
    reciprocal = _ts.reciprocal
    def positive(self): return self
    def round(self, decimals=0): return ops.round(self, decimals)
    def polygamma(self, n): return ops.polygamma(n, self)
    def nan_to_num(self, nan=0.0, posinf=None, neginf=None):
        return ops.nan_to_num(self, nan=nan, posinf=posinf, neginf=neginf)
    def logit(self, eps=None):
        return ops.logit(self if eps is None else ops.clip(self, eps, 1 - eps))
    def sum(self, dim=None, keepdim=False, dtype=None): return ops.sum(self, dim, keepdim, dtype)
    def mean(self, dim=None, keepdim=False): return ops.mean(self, dim, keepdim)
    def var(self, dim=None, unbiased=True, keepdim=False, correction=None):
        return ops.var(self, dim, unbiased, keepdim, correction)
    def std(self, dim=None, unbiased=True, keepdim=False, correction=None):
        return ops.std(self, dim, unbiased, keepdim, correction)
    def norm(self, p="fro", dim=None, keepdim=False, dtype=None):
        return ops.norm(self, p, dim, keepdim, dtype)
    def clamp(self, min=None, max=None): return ops.clip(self, min, max)
    clip = clamp
    def view_as(self, other): return ops.reshape(self, other.shape)
    def reshape_as(self, other): return ops.reshape(self, other.shape)
    def expand_as(self, other): return ops.broadcast_to(self, other.shape)
    def broadcast_to(self, shape): return ops.broadcast_to(self, shape)
    def permute(self, *dims):
        return ops.transpose(self, dims[0] if len(dims) == 1 and not isinstance(dims[0], int)
                             else dims)
    def transpose(self, dim0, dim1):
        return _named(ops.swapaxes(self, dim0, dim1), "TransposeBackward0", self)
    swapaxes = transpose
    def t(self):
        if self.ndim > 2:
            raise RuntimeError(f"t() expects a tensor with <= 2 dimensions, but self is "
                               f"{self.ndim}D")
        return _named(ops.transpose(self), "TBackward0", self)
    @property
    def T(self): return ops.transpose(self)
    @property
    def mT(self): return self.transpose(-1, -2)
    def masked_fill_(self, mask, value):
        return self._inplace(self.masked_fill(mask, value), "masked_fill_")
    def where(self, condition, other): return _ts.where(condition, self, other)
    def all(self): return Tensor._wrap(np.asarray(self._data.all()))
    def any(self): return Tensor._wrap(np.asarray(self._data.any()))
    def type_as(self, other): return ops.astype(self, other._np_dtype)
    def new_zeros(self, *size): return Tensor._wrap(np.zeros(_size(size), self._data.dtype))
    def new_ones(self, *size): return Tensor._wrap(np.ones(_size(size), self._data.dtype))
    def new_tensor(self, data): return Tensor._wrap(np.array(data, dtype=self._data.dtype))
    def new_empty(self, *size): return self.new_zeros(*size)
    def new_full(self, size, fill_value):
        return Tensor._wrap(np.full(_size((size,)), fill_value, self._data.dtype))

    # scans, sorting and structure with PyTorch's signatures (runtime/torch_shape.py)
    cumsum, cumprod, cummax, cummin, sort, argsort = (
        _ts.cumsum, _ts.cumprod, _ts.cummax, _ts.cummin, _ts.sort, _ts.argsort)
    flip, roll, tril, triu, diag, diagonal, trace = (
        _ts.flip, _ts.roll, _ts.tril, _ts.triu, _ts.diag, _ts.diagonal, _ts.trace)
    diff, tile, repeat_interleave, take_along_dim, kron, cross = (
        _ts.diff, _ts.tile, _ts.repeat_interleave, _ts.take_along_dim, _ts.kron, _ts.cross)
    # gather/scatter along a dimension and selection (runtime/ops/torch_index.py)
    gather, scatter_add, index_select, index_add = (
        _ts.gather, _ts.scatter_add, _ts.index_select, _ts.index_add)

    def scatter(self, dim, index, src=None, *, value=None, reduce=None):
        out = _ts.scatter(self, dim, index, src, value=value, reduce=reduce)
        scalar = value is not None or (src is not None and not hasattr(src, "shape"))
        return _named(out, "ScatterBackward1", self) if scalar else out
    chunk, unbind, select, narrow = _ts.chunk, _ts.unbind, _ts.select, _ts.narrow

    def masked_fill(self, mask, value):
        return _named(_ts.masked_fill(self, mask, value), "MaskedFillBackward0", self)

    def topk(self, k, dim=-1, largest=True, sorted=True):
        r = _ts.topk(self, k, dim, largest, sorted)
        return type(r)(_named(r.values, "TopkBackward0", self), r.indices)

    def scatter_(self, dim, index, src=None, *, value=None, reduce=None):
        return self._inplace(self.scatter(dim, index, src, value=value, reduce=reduce),
                             "scatter_")

    def scatter_add_(self, dim, index, src):
        return self._inplace(_ts.scatter_add(self, dim, index, src), "scatter_add_")

    def index_add_(self, dim, index, source, *, alpha=1):
        return self._inplace(_ts.index_add(self, dim, index, source, alpha=alpha),
                             "index_add_")

    def max(self, dim=None, keepdim=False):
        if dim is None:
            return _named(ops.amax(self), "MaxBackward1", self)
        if isinstance(dim, Tensor):
            return ops.maximum(self, dim)
        return MaxMin(_named(ops.amax(self, dim, keepdim), "MaxBackward0", self),
                      ops.argmax(self, dim, keepdim))

    def min(self, dim=None, keepdim=False):
        if dim is None:
            return _named(ops.amin(self), "MinBackward1", self)
        if isinstance(dim, Tensor):
            return ops.minimum(self, dim)
        return MaxMin(_named(ops.amin(self, dim, keepdim), "MinBackward0", self),
                      ops.argmin(self, dim, keepdim))

    def __rsub__(self, other):  # number - tensor: PyTorch's rsub
        return _named(ops.sub(other, self), "RsubBackward1", self)


def _record(t, prim, args, params, out) -> None:
    """Give `t`, the output of `prim` on `args` of which some tensor requires grad, its node."""
    # One edge per tensor operand (constants have none), and the SavePlan's key k: each
    # operand a constant, a tensor, or one needing grad (as save_plan counts).
    edges, k = [], 1
    for a in args:
        if isinstance(a, Tensor):
            fn = a._grad_fn
            if fn is not None:  # (a tensor with a grad_fn requires grad)
                edges.append((fn, a._output_nr))
                k = k * 3 + 2
            elif a._requires_grad:
                edges.append((a._accumulator(), 0))
                k = k * 3 + 2
            else:
                edges.append(_NONE_EDGE)
                k = k * 3 + 1
        else:
            k *= 3
    plan = _PLANS.get((prim, k))
    if plan is None:
        plan = save_plan(prim, args)
    cls = plan.cls
    if cls is None:
        cls = plan.node_cls(out.shape, params)
    node = new_node(cls, params, args, plan, tuple(edges), out.shape, out.dtype)
    t._grad_fn = node
    t._requires_grad = True
    if plan.saves_out:
        node.save_output(t)


_named = _ts.named


def _process_results(prim, args, params, arrays, out, req):
    """`_lg_process` for primitives with several results."""
    outs = [o if type(o) is np.ndarray else np.asarray(o) for o in out]
    # Integer and bool results carry no gradient (x.long(), as in PyTorch).
    record = req and STATE.grad_enabled and not prim.nondiff and outs[0].dtype.kind == "f"
    vc = None
    if prim.family in ("shape", "index") and isinstance(args[0], Tensor) and \
            np.may_share_memory(outs[0], arrays[0]):
        vc = args[0]._vc  # a view: in-place changes are seen through both
    if not record:
        res = tuple(Tensor._wrap(o, vc=vc) for o in outs)
    else:
        plan = save_plan(prim, args)
        node = new_node(plan.node_cls(outs[0].shape, params), params, args, plan,
                        tuple(_edge(args[i]) for i in plan.edges), outs[0].shape, outs[0].dtype)
        node._metas = tuple((o.shape, o.dtype) for o in outs)
        res = tuple(Tensor._wrap(o, node, i, vc) for i, o in enumerate(outs))
        if plan.saves_out:
            node.save_output(res)
    if vc is not None:
        for i, t in enumerate(res):
            _views.record(t, args[0], prim, args, params, i)
    return res


def _snapshot_saved_self(node, t: Tensor) -> None:
    """The in-place op's own node may have saved `t` (x.mul_(w) needs the old x for w's
    gradient): give it the pre-update values, as PyTorch does, so neither the new values nor
    the version bump reach that node. Earlier nodes keep `t` and see the version change."""
    if not isinstance(node, PrimNode):
        return
    inputs = node.inputs
    for k, i in enumerate(node._plan.saved):  # Note [Saved inputs]
        if inputs[i] is t:
            inputs[i] = Tensor._wrap(t._data.copy(), t._grad_fn, t._output_nr,
                                     [node._versions[k]], t._requires_grad)


def _shape_check(prim, arrays, params) -> None:
    """Run the shape rule on a failed op's operands, so the error is the rule's ShapeError."""
    from llgrad.runtime.aval import Aval
    if prim.shape is not None:
        prim.shape(*(Aval(np.shape(a), np.asarray(a).dtype) for a in arrays), **params)


def _size(size):
    return tuple(size[0]) if len(size) == 1 and isinstance(size[0], (tuple, list)) else size


def _edge(a: Tensor):
    if a._grad_fn is not None:
        return (a._grad_fn, a._output_nr)
    if a._requires_grad:
        return (a._accumulator(), 0)
    return _NONE_EDGE


def _from_data(data, dtype):
    if isinstance(data, Tensor):
        arr = data._data
    elif isinstance(data, np.ndarray):
        arr = data
    else:
        arr = np.asarray(data)
        if dtype is None and arr.dtype == np.float64 and not _has_np_float64(data):
            arr = arr.astype(np.float32)
        if arr.dtype.kind == "i" and arr.dtype != np.int64:
            arr = arr.astype(np.int64)
    if dtype is not None:
        arr = arr.astype(to_np(dtype))
    return arr


def _has_np_float64(data):
    return isinstance(data, np.float64)


def _rebuild(data, requires_grad):
    return Tensor(data, requires_grad=requires_grad)


set_default_interpretation(Tensor)
_graph._Tensor[0] = Tensor


def _numpy_rng(generator):
    from llgrad.runtime.rng import numpy_rng
    return numpy_rng(generator)
