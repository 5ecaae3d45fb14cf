"""Activation functions as elementwise primitives, one eager node each with PyTorch's name
(GeluBackward0, SiluBackward0, EluBackward0, SoftplusBackward0, HardtanhBackward0,
LeakyReluBackward0), with PyTorch's formulas for values and derivatives (at kinks too: the
gradient of hardtanh is 0 at its bounds, of leaky_relu the slope at 0).

Each scalar rule doubles as the numpy impl (through `_formula`), so eager mode and native
code compute one formula; VJPs are written with ops, so gradients of any order exist.
"""
from __future__ import annotations

import math

import numpy as np

from llgrad.runtime.ops import elementwise as ew
from llgrad.runtime.ops._scalar import NUMPY
from llgrad.runtime.ops.elementwise import elementwise
from llgrad.runtime.prim import bind

_SQRT1_2 = math.sqrt(0.5)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)
_BETA = math.sqrt(2.0 / math.pi)  # the tanh approximation's constants (PyTorch's kBeta, kKappa)
_KAPPA = 0.044715


def _formula(rule):
    """A numpy impl from a scalar rule with params (warnings off: selects compute both sides)."""
    def impl(x, **params):
        with np.errstate(all="ignore"):
            out = rule(NUMPY, x, **params)
        return np.asarray(out, dtype=x.dtype)
    return impl


def _act(name, rule, vjp, saves, node_name):
    return elementwise(name, _formula(rule), (vjp,), rule, saves=saves, node_name=node_name)


# ---- gelu: x * Phi(x), or its tanh approximation ------------------------------------------------
def _gelu_rule(s, x, approximate):
    if approximate == "tanh":
        inner = s.mul(_BETA, s.add(x, s.mul(_KAPPA, s.mul(x, s.mul(x, x)))))
        return s.mul(s.mul(0.5, x), s.add(1.0, s.tanh(inner)))
    return s.mul(s.mul(0.5, x), s.add(1.0, s.call("erf", s.mul(x, _SQRT1_2))))


def _gelu_vjp(g, out, x, approximate):
    from llgrad.runtime.ops.special import erf
    if approximate == "tanh":  # PyTorch's GeluBackward0 for approximate='tanh'
        x2 = ew.mul(x, x)
        t = ew.tanh(ew.mul(_BETA, ew.add(x, ew.mul(_KAPPA, ew.mul(x2, x)))))
        left = ew.mul(0.5, ew.add(1.0, t))
        right = ew.mul(ew.mul(ew.mul(0.5, x), ew.sub(1.0, ew.mul(t, t))),
                       ew.mul(_BETA, ew.add(1.0, ew.mul(3.0 * _KAPPA, x2))))
        return ew.mul(g, ew.add(left, right))
    cdf = ew.mul(0.5, ew.add(1.0, erf(ew.mul(x, _SQRT1_2))))
    pdf = ew.mul(_INV_SQRT_2PI, ew.exp(ew.mul(-0.5, ew.mul(x, x))))
    return ew.mul(g, ew.add(cdf, ew.mul(x, pdf)))


gelu_p = _act("gelu", _gelu_rule, _gelu_vjp, (0,), "GeluBackward0")


# ---- silu: x * sigmoid(x) ---------------------------------------------------------------------
def _silu_vjp(g, out, x):
    sig = ew.sigmoid(x)
    return ew.mul(g, ew.mul(sig, ew.add(1.0, ew.mul(x, ew.sub(1.0, sig)))))


silu_p = _act("silu", lambda s, x: s.div(x, s.add(1.0, s.exp(s.neg(x)))), _silu_vjp, (0,),
              "SiluBackward0")


# ---- elu (and selu, celu): scale * x for x > 0, else alpha * scale * (exp(x * input_scale) - 1)
def _elu_rule(s, x, alpha, scale, input_scale):
    neg = s.mul(alpha * scale, s.expm1(s.mul(x, input_scale)))
    return s.select(s.cmp(">", x, 0.0), s.mul(x, scale), neg)


def _elu_vjp(g, out, x, alpha, scale, input_scale):
    neg = ew.mul(g, ew.mul(alpha * scale * input_scale, ew.exp(ew.mul(x, input_scale))))
    return ew.where(ew.gt(x, 0.0), ew.mul(g, scale), neg)


elu_p = _act("elu", _elu_rule, _elu_vjp, (0,), "EluBackward0")


# ---- softplus: log(1 + exp(beta x)) / beta, linear above the threshold ------------------------
def _softplus_rule(s, x, beta, threshold):
    bx = s.mul(x, beta)
    return s.select(s.cmp(">", bx, threshold), x, s.div(s.log1p(s.exp(bx)), beta))


def _softplus_vjp(g, out, x, beta, threshold):
    bx = ew.mul(x, beta)
    return ew.where(ew.gt(bx, threshold), g, ew.mul(g, ew.sigmoid(bx)))


softplus_p = _act("softplus", _softplus_rule, _softplus_vjp, (0,), "SoftplusBackward0")


# ---- hardtanh: clamp to [min_val, max_val] (relu6 is hardtanh(0, 6)) ---------------------------
def _hardtanh_rule(s, x, min_val, max_val):
    return s.select(s.cmp("<", x, min_val), s.add(s.zero(x), min_val),
                    s.select(s.cmp(">", x, max_val), s.add(s.zero(x), max_val), x))


def _hardtanh_vjp(g, out, x, min_val, max_val):
    inside = ew.logical_and(ew.gt(x, min_val), ew.lt(x, max_val))
    return ew.where(inside, g, 0.0)


hardtanh_p = _act("hardtanh", _hardtanh_rule, _hardtanh_vjp, (0,), "HardtanhBackward0")


# ---- leaky_relu: x for x > 0, else negative_slope * x ------------------------------------------
leaky_relu_p = _act(
    "leaky_relu",
    lambda s, x, negative_slope: s.select(s.cmp(">", x, 0.0), x, s.mul(x, negative_slope)),
    lambda g, out, x, negative_slope: ew.where(ew.gt(x, 0.0), g, ew.mul(g, negative_slope)),
    (0,), "LeakyReluBackward0")


# ---- the ops API (floating inputs; integer ones are promoted as PyTorch refuses them) -----------
def _float(x):
    from llgrad.runtime.ops.reduce import _floating
    return _floating(x)


def gelu(x, approximate="none"):
    if approximate not in ("none", "tanh"):
        raise ValueError(f"approximate argument must be either none or tanh, got "
                         f"{approximate!r}")
    return bind(gelu_p, _float(x), approximate=approximate)


def silu(x):
    return bind(silu_p, _float(x))


def elu(x, alpha=1.0, scale=1.0, input_scale=1.0):
    return bind(elu_p, _float(x), alpha=float(alpha), scale=float(scale),
                input_scale=float(input_scale))


def softplus(x, beta=1.0, threshold=20.0):
    return bind(softplus_p, _float(x), beta=float(beta), threshold=float(threshold))


def hardtanh(x, min_val=-1.0, max_val=1.0):
    if min_val > max_val:
        raise ValueError("min_val cannot be greater than max_val")
    return bind(hardtanh_p, _float(x), min_val=float(min_val), max_val=float(max_val))


def leaky_relu(x, negative_slope=0.01):
    return bind(leaky_relu_p, _float(x), negative_slope=float(negative_slope))
