"""Use cases: plain numpy functions, the corpus of the end-to-end compiler tests.

Each function is ordinary numpy code with no llgrad in it. Arguments are named by role, so
`make_args` generates their inputs (the tangent/numba convention):

    x, w, y, v   float vectors, shape (4,)          p   positive float vector, shape (4,)
    m            float matrix, shape (3, 4)         k   float matrix, shape (4, 3)
    s            square float matrix, shape (3, 3)  t   float array, shape (2, 3, 4)
    a, b         Python floats                      n   Python int (static), 2
    idx          int64 index array [3, 0, 2, 0] (a repeat: gradients accumulate)

A trailing digit is ignored (`x1`, `x2` are vectors). The float arguments (arrays and Python
floats) are differentiated; ints and index arrays are not. tests/e2e/test_differentiate.py
runs every use case four ways: plain Python on numpy; the eager llgrad runtime (the same
function called on llgrad Tensors, which dispatch numpy calls through __array_function__);
compiled (`llgrad.differentiate`, native and LLGRAD_DISABLE_JIT=1); central differences.

`@usecase(eager=REASON)` marks functions the eager runtime cannot run unchanged, because they
use ndarray methods whose PyTorch meaning differs (`x.transpose()`, `x.sum(axis=...)`,
`x.size`) or `math.*` on a traced scalar (a Tensor becomes a Python float there). Their
gradients are checked against finite differences only.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

SHAPES = {"x": (4,), "w": (4,), "y": (4,), "v": (4,), "p": (4,), "m": (3, 4), "k": (4, 3),
          "s": (3, 3), "t": (2, 3, 4)}
POSITIVE = {"p"}


@dataclass
class UseCase:
    fn: object
    eager: str | None = None     # why the eager runtime cannot run it unchanged (None: it can)
    float32: bool = True         # also checked in float32
    fd_tol: tuple = (1e-6, 1e-8)

    @property
    def name(self) -> str:
        return self.fn.__name__

    def __repr__(self) -> str:
        return self.name


USECASES: list[UseCase] = []

NUMPY_METHOD = "ndarray method with a different PyTorch meaning on Tensors"
MATH_TRACED = "math.* on a traced scalar concretises a Tensor (no eager gradient)"


def usecase(fn=None, **kw):
    def register(f):
        USECASES.append(UseCase(f, **kw))
        return f
    return register(fn) if fn is not None else register


def role(name: str) -> str:
    return name.rstrip("0123456789")


def make_args(fn, rng: np.random.Generator, dtype=np.float64) -> list:
    """Inputs for `fn`'s parameters by role (see the module docstring)."""
    import inspect
    out = []
    for name in inspect.signature(fn).parameters:
        r = role(name)
        if r in SHAPES:
            shape = SHAPES[r]
            x = rng.uniform(0.5, 2.0, shape) if r in POSITIVE else rng.standard_normal(shape)
            out.append(np.asarray(x, dtype=dtype))
        elif r in ("a", "b"):
            out.append(float(rng.uniform(0.3, 1.5)))
        elif r == "n":
            out.append(2)
        elif r == "idx":
            out.append(np.array([3, 0, 2, 0], dtype=np.int64))
        else:
            raise ValueError(f"{fn.__name__}: no role for parameter {name!r}")
    return out


def float_argnums(fn) -> tuple[int, ...]:
    import inspect
    return tuple(i for i, name in enumerate(inspect.signature(fn).parameters)
                 if role(name) in SHAPES or role(name) in ("a", "b"))


# ---- helpers the use cases call ---------------------------------------------------------
def softplus(z):
    return np.log1p(np.exp(z))


def logsumexp(z, axis=None):
    mx = np.max(z, axis=axis, keepdims=True)
    return np.log(np.sum(np.exp(z - mx), axis=axis)) + np.squeeze(mx, axis=axis) \
        if axis is not None else np.log(np.sum(np.exp(z - mx))) + np.max(z)


# ---- elementwise ufuncs ---------------------------------------------------------------------
@usecase
def ufunc_exp_log(p):
    return np.sum(np.exp(-p) + np.log(p))


@usecase
def ufunc_trig(x):
    return np.sum(np.sin(x) * np.cos(2.0 * x) + np.tan(0.3 * x))


@usecase
def ufunc_tanh_sqrt(x, p):
    return np.sum(np.tanh(x) * np.sqrt(p))


@usecase
def ufunc_log1p_expm1(p, x):
    return np.sum(np.log1p(p) - np.expm1(0.5 * x))


@usecase
def ufunc_power(p, w):
    return np.sum(np.power(p, 3) + np.power(p, w) + np.power(2.0, w))


@usecase
def ufunc_square(x):
    return np.sum(np.square(x))


@usecase
def ufunc_abs(x):
    return np.sum(np.abs(x) + np.absolute(2 * x) + np.fabs(x) + abs(x))


@usecase
def ufunc_sign(x, w):
    return np.sum(np.sign(x) * w + np.negative(x))


@usecase
def ufunc_maximum_minimum(x, w):
    return np.sum(np.maximum(x, w) * 2 + np.minimum(x, 0.0))


@usecase
def ufunc_arith_functions(x, p):
    return np.sum(np.add(x, 1.0) * np.multiply(x, p) - np.subtract(p, x) / np.divide(p, 2.0)
                  + np.true_divide(x, p))


@usecase
def ufunc_comparisons(x, w):
    mask = np.logical_and(np.greater(x, w), np.less_equal(x, 1.0)) | (x == w) | ~(x > 0)
    return np.sum(np.where(mask, x * w, x + w)) + np.sum(np.not_equal(x, w) * x)


@usecase
def ufunc_masks_bitwise(x, w):
    # on booleans numpy's bitwise functions are logical (llgrad refuses them on integers)
    a, b = x > 0, w < 0.5
    mask = np.bitwise_or(np.bitwise_and(a, b), np.invert(a)) ^ np.bitwise_xor(a, ~b)
    return np.sum(np.where(mask, x * w, x - w)) + np.sum(np.where(np.logical_xor(x, a), x, w))


# ---- Python operators --------------------------------------------------------------------
@usecase
def operators(x, w):
    return np.sum((x + w) * (x - w) / (1.0 + w * w) + x ** 2 - (-w) + 2.0 ** x)


@usecase
def operators_scalars(x, a, b):
    return np.sum(a * x + b) / (a + 1.0) - a ** 2 * b + (2 - b) / a


@usecase
def operators_inplace_rebinding(x, w):
    z = x * 1.0
    z += w
    z *= x
    z -= 1.0
    z /= 2.0
    z **= 2
    return np.sum(z)


@usecase
def scalar_only(a, b):
    c = a * b + 3.0
    return c * c - a / b


# ---- reductions ----------------------------------------------------------------------------
@usecase
def reduce_sum_axes(m, t):
    return (np.sum(np.sum(m, axis=0) ** 2) + np.sum(np.sum(m, axis=1, keepdims=True) * m)
            + np.sum(np.sum(t, axis=(0, 2)) ** 2) + np.sum(np.sum(t, axis=-1) ** 2))


@usecase
def reduce_mean(m, x):
    return np.mean(m, axis=0) @ x + np.mean(m) * np.mean(np.mean(m, axis=1, keepdims=True) * m)


@usecase
def reduce_max_min(m, x):
    return (np.sum(np.max(m, axis=1)) + np.max(x) - np.min(x)
            + np.sum(np.min(m, axis=0, keepdims=True) * m) + np.amax(m) - np.amin(m))


@usecase
def reduce_prod(m, x):
    return np.sum(np.prod(m, axis=1)) + np.prod(x) + np.sum(np.prod(m, axis=0, keepdims=True))


@usecase
def reduce_var_std(m, x):
    return np.var(x) + np.std(m, axis=0) @ np.ones(4) + np.sum(np.var(m, axis=1, keepdims=True))


@usecase
def reduce_linalg_norm(m, x):
    return (np.linalg.norm(x) + np.linalg.norm(m, "fro") + np.linalg.norm(m, 1, axis=0) @ x
            + np.sum(np.linalg.norm(m, axis=1, keepdims=True)) + np.linalg.norm(x, np.inf))


@usecase(eager=NUMPY_METHOD)
def reduce_methods(m, x):
    return m.sum(axis=0) @ x + m.mean() + m.max(axis=1).sum() - x.min() + m.prod(axis=0).sum()


# ---- linear algebra ------------------------------------------------------------------------
@usecase
def dot_forms(x, w, m, k):
    return np.dot(x, w) + np.sum(np.dot(m, x)) + np.sum(np.dot(m, k)) + np.sum(np.dot(x, k))


@usecase
def matmul_forms(x, m, k, s):
    return (np.sum(np.matmul(m, x)) + np.sum(x @ k) + np.sum((m @ k) @ s)
            + x @ (k @ np.ones(3)))


@usecase
def matmul_batched(t, k):
    return np.sum((t @ k) ** 2)


@usecase
def outer_product(x, w):
    return np.sum(np.outer(x, w) ** 2)


# ---- selection -----------------------------------------------------------------------------
@usecase
def where_forms(x, w):
    return np.sum(np.where(x > 0, x, 0.1 * x) + np.where(x < w, w, 0.0) + np.where(w > 0.2, 1.0, x))


@usecase
def clip_forms(x, m):
    return np.sum(np.clip(x, -0.5, 0.5)) + np.sum(np.clip(m, 0.0, None)) + np.sum(np.clip(m, None, 0.1))


# ---- shape manipulation --------------------------------------------------------------------
@usecase
def concatenate_stack(x, w, m):
    c = np.concatenate([x, w * 2.0, x[:2]])
    cm = np.concatenate([m, m ** 2], axis=1)
    s0 = np.stack([x, w])
    s1 = np.stack([x, w, x * w], axis=1)
    return np.sum(c ** 2) + np.sum(cm) + np.sum(s0 @ w) + np.sum(s1 @ np.arange(3.0))


@usecase
def reshape_functions(m, t):
    return (np.sum(np.reshape(m, (4, 3))[1] ** 2) + np.sum(np.reshape(t, (6, -1)) @ np.ones(4))
            + np.sum(np.reshape(m, -1) * np.arange(12.0)))


@usecase
def reshape_methods(x, m):
    return np.sum(x.reshape(2, 2) @ x.reshape((2, 2))) + np.sum(m.reshape(2, 6)[0] ** 2)


@usecase
def transpose_T(m, k):
    return np.sum((m.T - k) ** 2) + np.sum(np.transpose(m) @ m)


@usecase(eager=NUMPY_METHOD)
def transpose_methods(m, t):
    return (np.sum(m.transpose() @ m) + np.sum(t.transpose(2, 0, 1)[0] ** 2)
            + np.sum(t.transpose((1, 0, 2))[0] * np.arange(8.0).reshape(2, 4))
            + np.sum(np.transpose(t, (2, 1, 0))[1] ** 2))


@usecase
def squeeze_expand(x, m):
    c = np.expand_dims(x, 0) * np.expand_dims(m[:, 0], 1)
    return np.sum(np.squeeze(c[:1]) ** 2) + np.sum(np.ravel(m) ** 3) + np.sum(np.swapaxes(m, 0, 1) @ x[:3])


@usecase
def zeros_ones_like(x, m):
    return np.sum(np.zeros_like(x) + x * np.ones_like(x)) + np.sum(np.ones_like(m) @ x)


@usecase
def shape_and_len(x, m):
    rows, cols = m.shape
    return np.sum(x) * x.shape[0] + np.sum(m) / (rows * cols) + len(m) * np.sum(x ** 2) / len(x)


@usecase(eager=NUMPY_METHOD)
def size_and_ndim(x, t):
    return np.sum(t) / t.size + x.ndim * np.sum(x) + np.size(x) * np.ndim(t) * np.sum(x ** 2)


@usecase
def broadcasting(x, m, t, a):
    return np.sum(m + x) + np.sum(t * x) + np.sum(m[:, :1] * x[None, :] * a) + np.sum(x[:3, None] - m)


# ---- indexing ------------------------------------------------------------------------------
@usecase
def index_int(x, m):
    return x[1] * m[2, 3] + m[-1][0] * x[-1] + np.sum(m[1] * x)


@usecase
def index_slices(x, m):
    return (np.sum(x[1:-1] * x[:-2]) + np.sum(x[::2] ** 2) + np.sum(x[::-1] * x)
            + np.sum(m[1:, :2] ** 2) + np.sum(m[:, 1]) + np.sum(m[..., -1] ** 3))


@usecase
def index_newaxis(x, w):
    return np.sum(x[:, None] * w[None, :] ** 2) + np.sum(x[None] * w)


@usecase
def index_array(x, m, idx):
    return np.sum(x[idx] ** 2) + np.sum(m[:, idx] * x) + np.sum(m[idx[:3] - 1] ** 2)


@usecase
def open_mesh_block(m, idx):
    return np.sum(m[np.ix_([0, 2], idx[:2])] ** 2) + np.sum(m[np.ix_(idx[1:3] - 1, idx)])


@usecase
def index_constant_array(x, m):
    sel = np.array([2, 2, 0])
    mask = np.array([True, False, True, True])
    return np.sum(x[sel] * x[:3]) + np.sum(m[1, sel] ** 2) + np.sum(x[mask] ** 3)


# ---- Python-level code that runs during tracing -------------------------------------------
@usecase(eager=MATH_TRACED)
def math_on_static_scalars(x, n):
    c = math.sqrt(n) * math.pi + math.exp(-n) + math.log(len(x))
    return np.sum(x ** n) * c + math.cos(0.5) * np.sum(x)


@usecase(eager=MATH_TRACED, float32=False)  # (numpy's float32 has no __trunc__)
def math_functions_of_traced_scalars(x, p):
    # every math.* function of floats on traced scalars: Python floats, staged
    u = math.tanh(x[0]) * 0.9
    q = p[0] + 1.0
    r = math.log(p[1], 2.0) + math.log(p[1], q) + math.log2(q) + math.log10(p[2])
    r += math.asin(u) + math.acos(u) + math.atan(x[1]) + math.atan2(x[1], q) + math.atanh(u)
    r += math.sinh(x[2]) + math.cosh(x[2]) + math.asinh(x[3]) + math.acosh(q)
    r += math.erf(x[0]) + math.erfc(x[1]) + math.gamma(q) + math.lgamma(p[3])
    r += math.degrees(x[2]) + math.radians(x[3]) + math.hypot(x[0], x[1])
    r += math.hypot(x[0], 3.0, x[2]) + math.copysign(x[3], -1.0) + math.fmod(q + 3.0, q)
    r += math.floor(q) * x[0] + math.ceil(x[1]) + math.trunc(x[2])
    r += math.fsum([x[0], x[1]]) + math.prod([x[0], x[1], q]) + math.exp2(x[0])
    if math.isfinite(x[0]) and not math.isnan(x[1]) and not math.isinf(x[2]):
        r += x[3]
    return r


@usecase
def static_int_argument(x, m, n):
    # n is static: Python code on it runs while tracing (no IR for the `if` or the slices)
    y = x[:n] * 2.0 if n > 1 else x
    return np.sum(y ** 2) + np.sum(m[n] * x) + n * np.sum(m)


@usecase
def python_loop_over_constants(x, w):
    total = 0.0
    for c in (0.5, 1.0, 2.0):  # a loop over a Python tuple: unrolled while tracing
        total = total + np.sum(np.sin(c * x) * w)
    return total


@usecase
def helper_functions(x, m):
    return np.sum(softplus(m @ x)) + logsumexp(x) + np.sum(logsumexp(m, axis=1))


@usecase
def python_containers_inside(x, w):
    parts = [x, w, x * w]
    d = {"a": parts[0], "b": parts[-1]}
    return np.sum(np.stack(parts) ** 2) + np.sum(d["a"] * d["b"])


@usecase
def constants_and_captured_arrays(x):
    return np.sum(x * COEF) + np.sum(np.linspace(0.0, 1.0, 4) * x) + np.float64(2.5) * np.sum(x)


COEF = np.array([0.5, -1.0, 2.0, 0.25])


# ---- small models --------------------------------------------------------------------------
@usecase
def model_linear_regression(w, m, y):
    r = m @ w - y[:3]
    return np.mean(r ** 2)


@usecase
def model_logistic(w, m, y, a):
    z = m @ w + a
    prob = 1.0 / (1.0 + np.exp(-z))
    t = (y[:3] > 0) * 1.0
    return -np.mean(t * np.log(prob) + (1 - t) * np.log(1 - prob)) + 0.01 * np.sum(w ** 2)


@usecase
def model_mlp_softmax(m, k, s, x):
    h = np.tanh(m @ k)                        # (3, 3)
    logits = h @ s + x[:3]
    z = logits - np.max(logits, axis=1, keepdims=True)
    logp = z - np.log(np.sum(np.exp(z), axis=1, keepdims=True))
    onehot = np.eye(3)
    return -np.sum(onehot * logp) / 3


@usecase
def model_gmm_like(t, x, p):
    d = t - x                                  # (2, 3, 4)
    q = np.sum(d ** 2 * p, axis=-1)            # (2, 3)
    return np.sum(logsumexp(-0.5 * q, axis=0)) + 0.5 * np.sum(np.log(p))


@usecase
def model_relu_layer(m, x, w):
    h = np.maximum(m @ x, 0.0)
    return np.sum(h * w[:3]) + np.sum(np.abs(w)) * 0.1


@usecase
def argmax_and_comparison_ufuncs(x, w, m):
    i = np.argmax(w)
    j = np.argmin(m, axis=1)
    sel = np.logical_or(np.less(x, 0.0), np.greater_equal(x, w)) & np.logical_not(np.equal(x, w))
    return x[i] * 3.0 + np.sum(m[0, j] ** 2) + np.sum(np.where(sel, x, -x)) + np.sum(
        np.broadcast_to(x, (3, 4)) * m)


@usecase
def floor_remainder(x, p):
    return (np.sum((3.0 * x) % 2.0 * p) + np.sum(np.remainder(x, 0.7) ** 2)
            + np.sum(np.floor(2.0 * x) * x) + np.sum(np.floor_divide(x, 0.3) * p + x // 0.45))


@usecase
def divmod_parts(x, p):
    q, r = np.divmod(x, 0.6)
    q2, r2 = divmod(2.0 * x, 0.7)
    return np.sum(q * p + r ** 2) + np.sum(q2 * x - r2 * p)


@usecase
def comparison_operators(x, w, m):
    rows = np.shape(m)[0]
    keep = (x <= w) | (x >= 1.0) | (x != w)
    return np.sum(np.where(keep, x * w, 0.0)) * rows + np.sum((m >= 0.0) * m)


# scans, sorting, structure and contractions (issue 11): more use cases, registered on import
from tests import usecases_shape  # noqa: E402,F401
from tests import usecases_math  # noqa: E402,F401  (numpy's math, scipy.special, conversions)
from tests import usecases_linalg  # noqa: E402,F401  (linear algebra)
