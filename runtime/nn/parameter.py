"""`Parameter`: a leaf Tensor that a Module registers as one of its parameters.

It shares storage (and version counter) with the tensor it wraps, as `torch.nn.Parameter`
does; operations on a Parameter return plain Tensors.
"""
from __future__ import annotations

import numpy as np

from llgrad.runtime.aval import DEFAULT_FLOAT
from llgrad.runtime.tensor import Tensor


class Parameter(Tensor):
    """A Tensor that is a module parameter: assigning one to a Module attribute registers it.

    Args:
        data: the tensor to wrap (storage is shared, not copied); an empty float32 tensor
            when None.
        requires_grad: whether the parameter requires gradient (default True).

    Example:
        >>> import llgrad as lg
        >>> lg.nn.Parameter(lg.tensor([1., 2.]))
        Parameter containing:
        tensor([1., 2.], requires_grad=True)
    """

    def __new__(cls, data=None, requires_grad: bool = True):
        if data is None:
            arr, vc = np.empty((0,), DEFAULT_FLOAT), None
        elif isinstance(data, Tensor):
            arr, vc = data._data, data._vc
        else:
            arr, vc = Tensor(data)._data, None
        p = cls._wrap(arr, vc=vc, requires_grad=False)
        if requires_grad:
            p.requires_grad_(True)
        return p

    def __init__(self, data=None, requires_grad: bool = True):
        pass  # everything happens in __new__ (Tensor.__init__ would copy the data again)

    def __repr__(self) -> str:
        return "Parameter containing:\n" + super().__repr__()

    __str__ = __repr__

    def __reduce_ex__(self, proto):
        return (_rebuild_parameter, (self._data, self._requires_grad))

    def __deepcopy__(self, memo):
        if id(self) in memo:
            return memo[id(self)]
        p = Parameter(Tensor._wrap(self._data.copy()), self._requires_grad)
        memo[id(self)] = p
        return p


def _rebuild_parameter(data, requires_grad):
    return Parameter(Tensor._wrap(data), requires_grad)
