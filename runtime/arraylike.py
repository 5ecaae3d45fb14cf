"""Python operators and numpy dispatch shared by every value class (Tensor, IR and traced
values): `x + y`, `x @ y`, `x[i]`, `np.exp(x)`, ... all go through `llgrad.runtime.ops`."""
from __future__ import annotations

from llgrad.runtime import ops
from llgrad.runtime.errors import UnsupportedError, user_loc


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
    def __matmul__(self, o): return ops.matmul(self, o)
    def __rmatmul__(self, o): return ops.matmul(o, self)
    def __neg__(self): return ops.neg(self)
    def __pos__(self): return self
    def __abs__(self): return ops.abs(self)
    def __lt__(self, o): return ops.lt(self, o)
    def __le__(self, o): return ops.le(self, o)
    def __gt__(self, o): return ops.gt(self, o)
    def __ge__(self, o): return ops.ge(self, o)
    def __eq__(self, o): return ops.eq(self, o)
    def __ne__(self, o): return ops.ne(self, o)
    def __and__(self, o): return ops.logical_and(self, o)
    def __rand__(self, o): return ops.logical_and(o, self)
    def __or__(self, o): return ops.logical_or(self, o)
    def __ror__(self, o): return ops.logical_or(o, self)
    def __invert__(self): return ops.logical_not(self)
    def __getitem__(self, key): return ops.getitem(self, key)

    __hash__ = object.__hash__

    # -- numpy dispatch ---------------------------------------------------------------------
    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        from llgrad.runtime.numpy_api import FUNCTIONS
        fn = FUNCTIONS.get(ufunc) if method == "__call__" else None
        if fn is None:
            return self._lg_numpy_fallback(ufunc if method == "__call__" else
                                           getattr(ufunc, method), inputs, kwargs)
        return fn(*inputs, **kwargs)

    def __array_function__(self, func, types, args, kwargs):
        from llgrad.runtime.numpy_api import FUNCTIONS
        fn = FUNCTIONS.get(func)
        if fn is None:
            return self._lg_numpy_fallback(func, args, kwargs)
        return fn(*args, **kwargs)

    def _lg_numpy_fallback(self, func, args, kwargs):
        from llgrad.runtime.numpy_api import numpy_name
        raise UnsupportedError(
            f"{numpy_name(func)} is not supported on llgrad values ({type(self).__name__})",
            loc=user_loc(), fix="rewrite it with supported numpy functions (see README, "
            "'Supported subset'), or compute it outside the differentiated function")
