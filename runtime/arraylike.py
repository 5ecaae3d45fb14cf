"""Python operators and numpy dispatch shared by every value class (Tensor, IR and traced
values): `x + y`, `x @ y`, `x[i]`, `np.exp(x)`, ... all go through `llgrad.runtime.ops`."""
from __future__ import annotations

from llgrad.runtime import ops
from llgrad.runtime.errors import DTypeError, LLGradError, UnsupportedError, _compose, user_loc
from llgrad.runtime.prim import is_value


def as_array(v):
    """`v`, marked as a 0-d array when it is one (numpy's reshape and squeeze return arrays,
    where arithmetic on 0-d values returns immutable scalars): `+=` then updates it in place
    (Note [Augmented assignment] in transform/builder.py). Tensors have no mark."""
    mark = getattr(v, "_lg_as_array", None)
    return v if mark is None else mark()


def _locate(e: LLGradError) -> LLGradError:
    """Stamp an error raised by the ops layer (a shape rule, an argument check) with the
    user's file:line, where it has none yet."""
    if e.loc is None:
        e.loc = user_loc()
        if e.loc is not None:
            e.args = (_compose(e.what, e.loc, e.fix),)
    return e


def _booleans(sym: str, *xs):
    """`&`, `|`, `^`, `~`: see `booleans`; on a Python bool `~True == -2`, also refused."""
    return booleans(f"the operator {sym}", f"supports {sym}", *xs, python_bool=sym != "~")


def booleans(what: str, claim: str, *xs, python_bool: bool = True):
    """`xs`, when each is boolean: the bitwise operators and numpy's bitwise functions
    (`what`: "the operator &", "np.bitwise_and") are logical on booleans only, since on
    integers numpy and PyTorch compute bitwise (5 & 3 == 1); anything else is refused."""
    for x in xs:
        dt = x._np_dtype if is_value(x) else getattr(x, "dtype", None)
        weak = getattr(x, "_lg_weak", False) and not python_bool
        if not (isinstance(x, bool) or dt == bool) or weak:
            of = "a Python bool" if weak else f"a {type(x).__name__}" if dt is None else str(dt)
            raise DTypeError(f"{what} on {of}: llgrad {claim} on booleans only (numpy and "
                             f"PyTorch compute it bitwise on integers)",
                             loc=user_loc(), fix="use np.logical_and / np.logical_or / "
                             "np.logical_not (`a != b` for ^), or `not` for a Python bool")
    return xs


def _defers(self, other) -> bool:
    """Whether `other` is a value of a higher level (a runtime/padded.py Padded next to an IR
    value), whose own method must decide: `@` and numpy functions read operand shapes."""
    return getattr(type(other), "_lg_level", -2) > self._lg_level


class ArrayOperators:
    """Operators; classes using this mixin also define `shape`, `_np_dtype`, `_lg_level`."""

    __slots__ = ()
    __array_priority__ = 1000

    def __add__(self, o): return ops.add(self, o)
    def __radd__(self, o): return ops.add(o, self)
    def __sub__(self, o): return ops.sub(self, o)
    def __rsub__(self, o): return ops.sub(o, self)
    def __mul__(self, o): return ops.mul(self, o)
    def __rmul__(self, o): return ops.mul(o, self)
    def __truediv__(self, o): return ops.div(self, o)
    def __rtruediv__(self, o): return ops.div(o, self)
    def __pow__(self, o): return ops.pow(self, o)
    def __rpow__(self, o): return ops.pow(o, self)
    def __matmul__(self, o):
        if _defers(self, o):
            return NotImplemented
        try:
            return ops.matmul(self, o)
        except LLGradError as e:
            raise _locate(e) from None

    def __rmatmul__(self, o):
        if _defers(self, o):
            return NotImplemented
        try:
            return ops.matmul(o, self)
        except LLGradError as e:
            raise _locate(e) from None

    def __mod__(self, o): return ops.remainder(self, o)
    def __rmod__(self, o): return ops.remainder(o, self)
    def __floordiv__(self, o): return ops.floor_divide(self, o)
    def __rfloordiv__(self, o): return ops.floor_divide(o, self)
    def __divmod__(self, o): return ops.divmod(self, o)
    def __rdivmod__(self, o): return ops.divmod(o, self)
    def __neg__(self): return ops.neg(self)
    def __pos__(self): return self
    def __abs__(self): return ops.abs(self)
    def __lt__(self, o): return ops.lt(self, o)
    def __le__(self, o): return ops.le(self, o)
    def __gt__(self, o): return ops.gt(self, o)
    def __ge__(self, o): return ops.ge(self, o)
    def __eq__(self, o): return ops.eq(self, o)
    def __ne__(self, o): return ops.ne(self, o)
    def __and__(self, o): return ops.logical_and(*_booleans("&", self, o))
    def __rand__(self, o): return ops.logical_and(*_booleans("&", o, self))
    def __or__(self, o): return ops.logical_or(*_booleans("|", self, o))
    def __ror__(self, o): return ops.logical_or(*_booleans("|", o, self))
    def __xor__(self, o): return ops.ne(*_booleans("^", self, o))
    def __rxor__(self, o): return ops.ne(*_booleans("^", o, self))
    def __invert__(self): return ops.logical_not(*_booleans("~", self))
    def __getitem__(self, key):
        try:
            return ops.getitem(self, key)
        except LLGradError as e:
            raise _locate(e) from None

    __hash__ = object.__hash__

    # -- numpy dispatch ---------------------------------------------------------------------
    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        from llgrad.runtime.numpy_api import FUNCTIONS, LAZY, resolve_lazy
        if any(_defers(self, x) for x in inputs):
            return NotImplemented
        fn = FUNCTIONS.get(ufunc if method == "__call__" else getattr(ufunc, method))
        if fn is None and LAZY and method == "__call__":  # scipy.special's ufuncs
            resolve_lazy()
            fn = FUNCTIONS.get(ufunc)
        if fn is None:
            return self._lg_numpy_fallback(ufunc if method == "__call__" else
                                           getattr(ufunc, method), inputs, kwargs)
        try:
            return fn(*inputs, **kwargs)
        except LLGradError as e:
            raise _locate(e) from None
        except NotImplementedError as e:  # (an ops-layer refusal: the user's line too)
            raise UnsupportedError(str(e), loc=user_loc()) from None

    def __array_function__(self, func, types, args, kwargs):
        from llgrad.runtime.numpy_api import FUNCTIONS
        if any(getattr(t, "_lg_level", -2) > self._lg_level for t in types):
            return NotImplemented
        fn = FUNCTIONS.get(func)
        if fn is None:
            return self._lg_numpy_fallback(func, args, kwargs)
        try:
            return fn(*args, **kwargs)
        except LLGradError as e:
            raise _locate(e) from None
        except NotImplementedError as e:  # (an ops-layer refusal: the user's line too)
            raise UnsupportedError(str(e), loc=user_loc()) from None

    def _lg_numpy_fallback(self, func, args, kwargs):
        from llgrad.runtime.numpy_api import numpy_name
        raise UnsupportedError(
            f"{numpy_name(func)} is not supported on llgrad values ({type(self).__name__})",
            loc=user_loc(), fix="rewrite it with supported numpy functions (see README, "
            "'Supported subset'), or compute it outside the differentiated function")


class _Flat:
    """`x.flat` of an abstract value: reads of its elements in C order (x.ravel()[k])."""

    __slots__ = ("x",)

    def __init__(self, x):
        self.x = x

    def __getitem__(self, k):
        return ops.ravel(self.x)[k]

    def __len__(self) -> int:
        return self.x.size

    def __iter__(self):
        return iter(ops.ravel(self.x))

    def __setitem__(self, k, v):
        raise UnsupportedError(
            "x.flat[k] = v changes x in place through an iterator, which a traced array cannot "
            "do", loc=user_loc(), fix="write x = x.ravel(); x[k] = v; x = x.reshape(shape) "
            "(or index x with np.unravel_index(k, x.shape))")


class NumpyMethods:
    """ndarray-style methods for abstract values (IR/traced), so user numpy code runs on them."""

    __slots__ = ()

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n

    @property
    def dtype(self):
        return self._np_dtype

    @property
    def T(self):
        return ops.transpose(self)

    @property
    def mT(self):
        return ops.swapaxes(self, -1, -2)

    @property
    def itemsize(self) -> int:
        return self._np_dtype.itemsize

    @property
    def nbytes(self) -> int:
        return self.size * self._np_dtype.itemsize

    @property
    def strides(self) -> tuple:
        """The strides of a C-contiguous array of this shape (what code computing offsets
        from them expects of a fresh numpy array)."""
        out, step = [], self._np_dtype.itemsize
        for d in reversed(self.shape):
            out.append(step)
            step *= d
        return tuple(reversed(out))

    @property
    def flat(self) -> "_Flat":
        return _Flat(self)

    def nonzero(self):
        import numpy as np
        return np.nonzero(self)  # (refused: its length depends on the data)

    # a real value's complex parts (a complex one is a runtime/complex_values.Complex)
    @property
    def real(self):
        return self

    @property
    def imag(self):
        import numpy as np
        return np.zeros(self.shape, self._np_dtype)

    def conj(self):
        return self

    conjugate = conj

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of unsized object (a 0-d value)")
        return self.shape[0]

    def __iter__(self):
        if not self.shape:
            raise TypeError("iteration over a 0-d value")
        return (self[i] for i in range(self.shape[0]))

    def sum(self, axis=None, dtype=None, keepdims=False):
        from llgrad.runtime.numpy_api import FUNCTIONS
        import numpy as np
        return FUNCTIONS[np.sum](self, axis=axis, dtype=dtype, keepdims=keepdims)

    def _np(self, name, *args, **kwargs):
        from llgrad.runtime.numpy_api import FUNCTIONS
        import numpy as np
        try:
            return FUNCTIONS[getattr(np, name)](self, *args, **kwargs)
        except LLGradError as e:
            raise _locate(e) from None

    def mean(self, axis=None, keepdims=False, **kw):
        return self._np("mean", axis=axis, keepdims=keepdims, **kw)

    def prod(self, axis=None, keepdims=False, **kw):
        return self._np("prod", axis=axis, keepdims=keepdims, **kw)

    def max(self, axis=None, keepdims=False, **kw):
        return self._np("max", axis=axis, keepdims=keepdims, **kw)

    def min(self, axis=None, keepdims=False, **kw):
        return self._np("min", axis=axis, keepdims=keepdims, **kw)

    # scans, sorting and structure (issue 11): ndarray's methods, by value
    def cumsum(self, axis=None, dtype=None): return self._np("cumsum", axis=axis, dtype=dtype)
    def cumprod(self, axis=None, dtype=None): return self._np("cumprod", axis=axis, dtype=dtype)
    def argsort(self, axis=-1, kind=None): return self._np("argsort", axis=axis, kind=kind)
    def diagonal(self, offset=0, axis1=0, axis2=1):
        return self._np("diagonal", offset, axis1, axis2)

    def trace(self, offset=0, axis1=0, axis2=1): return self._np("trace", offset, axis1, axis2)
    def repeat(self, repeats, axis=None): return self._np("repeat", repeats, axis)

    def take(self, indices, axis=None, mode="raise"):
        return self._np("take", indices, axis, mode=mode)

    def all(self, axis=None, keepdims=False): return self._np("all", axis=axis, keepdims=keepdims)
    def any(self, axis=None, keepdims=False): return self._np("any", axis=axis, keepdims=keepdims)

    def sort(self, axis=-1, kind=None):
        raise UnsupportedError(
            "x.sort() sorts x in place, which a traced array cannot do (it is an immutable "
            "value)", loc=user_loc(), fix="write `x = np.sort(x)` instead of `x.sort()`")
    def var(self, axis=None, ddof=0, keepdims=False):
        return self._np("var", axis=axis, ddof=ddof, keepdims=keepdims)
    def std(self, axis=None, ddof=0, keepdims=False):
        return self._np("std", axis=axis, ddof=ddof, keepdims=keepdims)
    def argmax(self, axis=None): return ops.argmax(self, axis)
    def argmin(self, axis=None): return ops.argmin(self, axis)
    def dot(self, other): return ops.dot(self, other)
    def clip(self, a_min=None, a_max=None, **kw):  # (numpy 2's min=/max= too)
        return ops.clip(self, kw.pop("min", a_min), kw.pop("max", a_max), **kw)
    def astype(self, dtype, order="K", casting="unsafe", subok=True, copy=True):
        out = ops.astype(self, dtype)
        return ops.copy(out) if copy and out is self else out  # numpy copies by default

    def round(self, decimals=0): return self._np("round", decimals)
    def copy(self): return ops.copy(self)
    def ravel(self): return ops.ravel(self)
    def flatten(self): return ops.ravel(self)
    def squeeze(self, axis=None): return as_array(ops.squeeze(self, axis))
    def swapaxes(self, a, b): return ops.swapaxes(self, a, b)

    def reshape(self, *shape, order="C"):
        try:
            return as_array(ops.reshape(self, shape[0] if len(shape) == 1 else shape))
        except LLGradError as e:
            raise _locate(e) from None

    def transpose(self, *axes):
        if len(axes) == 1 and not isinstance(axes[0], int):
            axes = axes[0]
        return ops.transpose(self, axes or None)
