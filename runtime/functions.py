"""Top-level tensor functions (`llgrad.exp`, `llgrad.cat`, `llgrad.all`, ...), PyTorch spellings."""
from __future__ import annotations

import numpy as np

from llgrad.runtime import ops
from llgrad.runtime.tensor import Tensor
from llgrad.runtime.torch_shape import *  # noqa: F401,F403  (cumsum, sort, flip, einsum, ...)
from llgrad.runtime.torch_shape import __all__ as _shape_all

__all__ = [
    "exp", "log", "log1p", "expm1", "sin", "cos", "tan", "tanh", "sqrt", "abs", "sign",
    "sigmoid", "relu", "neg", "add", "sub", "mul", "div", "pow", "maximum", "minimum",
    "clamp", "clip", "sum", "mean", "prod", "amax", "amin", "argmax", "argmin", "logsumexp",
    "var", "std", "softmax", "log_softmax", "matmul", "mm", "dot", "outer", "reshape",
    "transpose", "permute", "squeeze", "unsqueeze", "flatten", "cat", "concatenate",
    "broadcast_to", "all", "any", "allclose", "equal", "isnan", "isfinite", "max", "min",
    "eq", "ne", "lt", "le", "gt", "ge", "square", "rsqrt", "norm", "numel", "is_tensor", "t",
    "detach", "floor", "remainder", "floor_divide",
    "sinh", "cosh", "asin", "acos", "atan", "asinh", "acosh", "atanh", "arcsin", "arccos",
    "arctan", "arcsinh", "arccosh", "arctanh", "atan2", "arctan2", "log2", "log10", "exp2",
    "logaddexp", "logaddexp2", "hypot", "ceil", "round", "trunc", "fix", "fmod",
    "nan_to_num", "copysign", "heaviside", "positive", "isinf", "signbit", "sinc", "deg2rad",
    "rad2deg", "erf", "erfc", "lgamma", "digamma", "polygamma", "logit", "xlogy",
] + _shape_all

exp, log, log1p, expm1, sin, cos, tan, tanh = (
    ops.exp, ops.log, ops.log1p, ops.expm1, ops.sin, ops.cos, ops.tan, ops.tanh)
sqrt, abs, sign, sigmoid, relu, neg = ops.sqrt, ops.abs, ops.sign, ops.sigmoid, ops.relu, ops.neg
square, rsqrt = ops.square, ops.rsqrt
add, sub, mul, div, pow = ops.add, ops.sub, ops.mul, ops.div, ops.pow
maximum, minimum = ops.maximum, ops.minimum
floor, remainder, floor_divide = ops.floor, ops.remainder, ops.floor_divide
eq, ne, lt, le, gt, ge = ops.eq, ops.ne, ops.lt, ops.le, ops.gt, ops.ge
prod, amax, amin, argmax, argmin = ops.prod, ops.amax, ops.amin, ops.argmax, ops.argmin
logsumexp, var, std, softmax, log_softmax = (
    ops.logsumexp, ops.var, ops.std, ops.softmax, ops.log_softmax)
matmul, mm, dot, outer = ops.matmul, ops.matmul, ops.dot, ops.outer
reshape, flatten = ops.reshape, ops.flatten
broadcast_to = ops.broadcast_to


def sum(input, dim=None, keepdim=False, dtype=None):
    return ops.sum(input, dim, keepdim, dtype)


def mean(input, dim=None, keepdim=False):
    return ops.mean(input, dim, keepdim)


def clamp(input, min=None, max=None):
    return ops.clip(input, min, max)


clip = clamp


def transpose(input, dim0, dim1):
    return Tensor.transpose(_tensor(input), dim0, dim1)


# Functions whose node PyTorch names after the method (TopkBackward0 over a gather): as the
# Tensor methods, which name it.
def topk(input, k, dim=-1, largest=True, sorted=True):
    return Tensor.topk(_tensor(input), k, dim, largest, sorted)


def masked_fill(input, mask, value):
    return Tensor.masked_fill(_tensor(input), mask, value)


def scatter(input, dim, index, src=None, *, value=None, reduce=None):
    return Tensor.scatter(_tensor(input), dim, index, src, value=value, reduce=reduce)


def squeeze(input, dim=None):
    return Tensor.squeeze(_tensor(input), dim)


def unsqueeze(input, dim):
    return Tensor.unsqueeze(_tensor(input), dim)


def _tensor(x):
    return x if isinstance(x, Tensor) else Tensor(x)


def permute(input, dims):
    return ops.transpose(input, dims)


def t(input):
    return input.t()


def cat(tensors, dim=0):
    return ops.concatenate(list(tensors), dim)


concatenate = cat


def norm(input, p="fro", dim=None, keepdim=False, dtype=None):
    """A vector norm of `input` over `dim` (all dims by default), as torch.norm: p='fro' (the
    default) and p=2 are the 2-norm; any number, inf and -inf give the p-norm. Matrix norms
    (p='nuc') are not supported."""
    return ops.norm(input, p, dim, keepdim, dtype)


def max(input, dim=None, keepdim=False):
    return input.max(dim, keepdim) if isinstance(input, Tensor) else ops.amax(input, dim, keepdim)


def min(input, dim=None, keepdim=False):
    return input.min(dim, keepdim) if isinstance(input, Tensor) else ops.amin(input, dim, keepdim)


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
heaviside, sinc, deg2rad, rad2deg = (
    ops.heaviside, ops.sinc, ops.deg2rad, ops.rad2deg)
isnan, isinf, isfinite, signbit = ops.isnan, ops.isinf, ops.isfinite, ops.signbit
erf, erfc, lgamma, digamma, polygamma, xlogy = (
    ops.erf, ops.erfc, ops.lgamma, ops.digamma, ops.polygamma, ops.xlogy)


def round(input, *, decimals=0):
    """Round half to even (to `decimals` places), as torch.round; zero gradient."""
    return ops.round(input, decimals)


def nan_to_num(input, nan=0.0, posinf=None, neginf=None):
    return ops.nan_to_num(input, nan=nan, posinf=posinf, neginf=neginf)


def positive(input):
    return input


def logit(input, eps=None):
    """log(p / (1 - p)); with `eps`, p is clamped to [eps, 1 - eps] first (torch.logit)."""
    return input.logit(eps) if isinstance(input, Tensor) else ops.logit(
        input if eps is None else ops.clip(input, eps, 1 - eps))


def _data(x):
    return x._data if isinstance(x, Tensor) else np.asarray(x)


def all(input, dim=None) -> Tensor:
    return Tensor._wrap(np.asarray(np.all(_data(input), axis=dim)))


def any(input, dim=None) -> Tensor:
    return Tensor._wrap(np.asarray(np.any(_data(input), axis=dim)))


def allclose(a, b, rtol=1e-05, atol=1e-08, equal_nan=False) -> bool:
    return bool(np.allclose(_data(a), _data(b), rtol=rtol, atol=atol, equal_nan=equal_nan))


def equal(a, b) -> bool:
    return _data(a).shape == _data(b).shape and bool(np.all(_data(a) == _data(b)))


def numel(input) -> int:
    return int(_data(input).size)


def is_tensor(obj) -> bool:
    return isinstance(obj, Tensor)


def detach(input):
    return input.detach()
