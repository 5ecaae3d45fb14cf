"""Eager forward mode, as `torch.autograd.forward_ad`: `dual_level`, `make_dual`,
`unpack_dual`.

A dual tensor is a Tensor (its primal: data, grad_fn, requires_grad as usual) carrying a
tangent for the open level. Its class sits one interpretation above Tensor, so `bind` sends
every primitive with a dual operand here: the primal runs as an eager op, the tangents by the
forward rules of runtime/forward_rules.py (the same rules the compiler's forward mode uses),
computed with eager ops. Closing the level drops the tangents (`unpack_dual` then gives
None). In-place operations on a dual tensor are refused (their tangent would be lost).

    >>> import llgrad as lg
    >>> import llgrad.autograd.forward_ad as fwAD
    >>> with fwAD.dual_level():
    ...     y = fwAD.make_dual(lg.tensor([1.0, 2.0]), lg.tensor([1.0, 0.0])) ** 2
    ...     fwAD.unpack_dual(y).tangent
    tensor([2., 0.])
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from llgrad.runtime.errors import AutogradError, ShapeError, UnsupportedError
from llgrad.runtime.forward_rules import tangents as _tangents
from llgrad.runtime.tensor import Tensor

_LEVELS: list = []  # the open levels, innermost last (each an object: tangents remember it)


class dual_level:
    """Context manager of a forward-AD level: dual tensors made inside carry tangents until
    it exits. One level at a time (as PyTorch's default)."""

    def __enter__(self) -> int:
        if _LEVELS:
            raise AutogradError("forward_ad.dual_level: a level is already open",
                                fix="nest no dual_level inside another")
        self._token = object()
        _LEVELS.append(self._token)
        return 0

    def __exit__(self, *exc) -> bool:
        _LEVELS.remove(self._token)
        return False


class UnpackedDualTensor(NamedTuple):
    """What `unpack_dual` returns: the primal tensor and its tangent (or None)."""
    primal: object
    tangent: object


class _Dual(Tensor):
    """A Tensor with a tangent at a forward-AD level (made by make_dual and by ops on duals)."""

    _lg_level = 0.5
    __slots__ = ()

    @staticmethod
    def _lg_process(prim, args, params):
        primals = [_primal(a) for a in args]
        out = Tensor._lg_process(prim, primals, params)
        level = _LEVELS[-1] if _LEVELS else None
        tins = [_tangent(a, level) for a in args]
        if prim.nondiff or level is None or all(t is None for t in tins):
            return out
        outs = list(out) if isinstance(out, tuple) else [out]
        touts = _tangents(prim, primals, tins, outs, params, _zeros, _transposed_vjp)
        duals = [_make(o, t, level) if t is not None and o._data.dtype.kind == "f" else o
                 for o, t in zip(outs, touts)]
        return tuple(duals) if isinstance(out, tuple) else duals[0]

    @staticmethod
    def _lg_custom_vjp(call):
        raise UnsupportedError(
            f"{call.name} has a custom reverse-mode rule (autograd.Function or custom_vjp), "
            f"which gives no forward-mode derivative of a dual tensor", loc=call.loc,
            fix="compute this derivative in reverse mode, or call it on the primal "
            "(forward_ad.unpack_dual(x).primal)")

    def _inplace(self, result, op: str):
        raise UnsupportedError(f"in-place {op} on a dual tensor (forward-mode AD) would lose "
                               f"its tangent", fix="use the out-of-place operation")

    def _inplace_direct(self, ufunc, other) -> bool:
        return False


def _primal(a):
    return a.__dict__["_lg_primal"] if isinstance(a, _Dual) else a


def _tangent(a, level):
    if isinstance(a, _Dual) and a.__dict__.get("_lg_level_token") is level:
        return a.__dict__["_lg_tangent"]
    return None


def _make(t: Tensor, tangent: Tensor, level) -> _Dual:
    d = _Dual._wrap(t._data, t._grad_fn, t._output_nr, t._vc, t._requires_grad)
    d.__dict__["_lg_primal"] = t  # the tensor itself: backward reaches its graph and leaves
    d.__dict__["_lg_tangent"] = _fit(tangent, t)
    d.__dict__["_lg_level_token"] = level
    return d


def _fit(g, like: Tensor) -> Tensor:
    from llgrad.runtime import ops
    if not isinstance(g, Tensor):
        g = Tensor._wrap(np.asarray(g, like._data.dtype))
    if g._data.shape != like._data.shape:
        g = ops.broadcast_to(g, like._data.shape)
    if g._data.dtype != like._data.dtype:
        g = ops.astype(g, like._data.dtype)
    return g


def _zeros(x) -> Tensor:
    return Tensor._wrap(np.zeros(np.shape(x._data if isinstance(x, Tensor) else x),
                                 x._data.dtype if isinstance(x, Tensor) else np.asarray(x).dtype))


def _transposed_vjp(prim, ins, tins, outs, params) -> list:
    """J t as the gradient in u of sum(vjp(u) * t), with eager autograd (forward_rules)."""
    from llgrad.runtime import ops
    from llgrad.runtime.autograd import grad
    from llgrad.runtime.autograd.grad_mode import enable_grad
    floats = [k for k, o in enumerate(outs) if o._data.dtype.kind == "f"]
    with enable_grad():
        us = {k: Tensor(np.zeros(outs[k]._data.shape, outs[k]._data.dtype), requires_grad=True)
              for k in floats}
        if prim.multiple_results:
            g, out = tuple(us.get(k) for k in range(len(outs))), tuple(outs)
        else:
            g, out = us[0], outs[0]
        total = None
        for i, t in enumerate(tins):
            if t is None:
                continue
            c = prim.vjp_rule(i)(g, out, *ins, **params)
            if c is None:
                continue
            c = ops.sum_to(c, t._data.shape) if np.shape(c._data) != t._data.shape else c
            s = ops.sum(ops.mul(c, t))
            total = s if total is None else ops.add(total, s)
        got = grad([total], [us[k] for k in floats], allow_unused=True)
    res = [None] * len(outs)
    for k, gk in zip(floats, got):
        res[k] = gk.detach() if gk is not None else None
    return res


def is_dual(x) -> bool:
    """A dual tensor with a tangent at the open level."""
    return isinstance(x, _Dual) and _tangent(x, _LEVELS[-1] if _LEVELS else None) is not None


def primal_array(x):
    """An argument as a compiled function takes it: a tensor's data (numbers stay)."""
    return _primal(x)._data if isinstance(x, Tensor) else x


def tangent_array(x):
    """The tangent of an argument for a compiled forward-mode call: a dual's tangent, zeros
    for other float tensors and arrays and for floats; other values stay as they are."""
    if is_dual(x):
        return _tangent(x, _LEVELS[-1])._data
    if isinstance(x, Tensor):
        return np.zeros_like(x._data)
    if isinstance(x, (np.ndarray, float, np.floating)):
        return np.zeros_like(x)
    return x


def make_dual(tensor: Tensor, tangent: Tensor, *, level=None) -> Tensor:
    """`tensor` with `tangent` attached at the open level (inside `dual_level()`)."""
    if not _LEVELS:
        raise AutogradError("make_dual: no forward AD level is open",
                            fix="call it inside `with forward_ad.dual_level():`")
    if not isinstance(tensor, Tensor) or not isinstance(tangent, Tensor):
        raise TypeError("make_dual expects two tensors")
    if tensor._data.shape != tangent._data.shape:
        raise ShapeError(f"make_dual: the tangent's shape {list(tangent._data.shape)} differs "
                         f"from the tensor's {list(tensor._data.shape)}",
                         fix="give a tangent of the tensor's shape")
    if tensor._data.dtype.kind != "f":
        raise AutogradError(f"make_dual: a {tensor._data.dtype} tensor has no tangent",
                            fix="use a float tensor")
    return _make(tensor, tangent.detach(), _LEVELS[-1])


def unpack_dual(tensor, *, level=None) -> UnpackedDualTensor:
    """(primal, tangent) of a dual tensor; tangent None when it has none at the open
    level (or for any other tensor)."""
    if not isinstance(tensor, Tensor):
        return UnpackedDualTensor(tensor, None)
    level_token = _LEVELS[-1] if _LEVELS else None
    return UnpackedDualTensor(_primal(tensor), _tangent(tensor, level_token))


__all__ = ["dual_level", "make_dual", "unpack_dual", "UnpackedDualTensor"]
