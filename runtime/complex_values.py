"""Complex arrays as pairs of real arrays: `Complex(re, im)`, what `x * 1j`, `np.exp(1j * w)`
and `np.fft.rfft(x)` give on llgrad values.

Note [Complex values are pairs]
The IR, the primitives, AD and codegen know real dtypes only (float64, float32, int64, bool).
A complex intermediate is a `Complex` holding its real and imaginary parts, each a real value
of the same shape (an IR value, an eager Tensor, or a numpy constant; the imaginary part
`None` where it is exactly zero, so a real array made complex costs nothing). Arithmetic on a Complex is written
with numpy functions and operators on the parts, so the trace holds only real ops: the
gradient of a real result with respect to real inputs is the usual real gradient, from the
ordinary VJPs, with no complex cotangent anywhere (what JAX and PyTorch give for a real loss
of real inputs through complex intermediates). The eager runtime gets the same for free:
the parts of np.fft.rfft(tensor) are Tensors.
A Complex reaches user code only as an intermediate: a returned value, `float()`, `bool()`,
comparisons and numpy functions with no rule below are errors naming the line. In staged
loops and branches it is carried as its two parts (a pytree).
Python's and numpy's operators reach it three ways: its own dunders and `__array_ufunc__` /
`__array_function__` (`_lg_level` above every value class, so a real value defers to it),
and the ops layer's elementwise functions, which send operands that are complex (a Complex,
a Python complex, a complex numpy array) to `elementwise` below before numpy's promotion
would refuse the complex dtype (runtime/ops/elementwise.py, runtime/ops/linalg.matmul)."""
from __future__ import annotations

import operator

import numpy as np

from llgrad.runtime.errors import DTypeError, UnsupportedError, user_loc
from llgrad.runtime.pytree import register_pytree

_FIX = ("compute a real value from it first: np.abs(z), z.real, z.imag, np.angle(z), "
        "np.abs(z) ** 2")


def is_complex(x) -> bool:
    """Whether `x` is complex: a Complex, a Python complex, a complex numpy array or scalar."""
    t = type(x)
    if t is Complex or t is complex:
        return True
    return (t is np.ndarray or isinstance(x, np.generic)) and x.dtype.kind == "c"


def parts(x) -> tuple:
    """`(re, im)` of any operand; `None` is the imaginary part of a real operand, an exact
    zero of the real part's shape (a complex constant's parts are arrays, zero or not: `x * 0j`
    keeps x's shape, and NaN * 0 is NaN, as in numpy)."""
    if type(x) is Complex:
        return x.re, x.im
    if type(x) is complex:  # Python floats: weak, as numpy takes a Python complex
        return x.real, x.imag
    if is_complex(x):
        return np.real(x), np.imag(x)
    return x, None


def make(re, im):
    """The Complex of two parts (`im` None: exactly zero); a numpy complex array when
    neither is a value (constants)."""
    from llgrad.runtime.prim import is_value
    if not is_value(re) and not is_value(im):
        return np.asarray(re) + 1j * (0.0 if im is None else im)
    if im is not None and not any(getattr(type(p), "_lg_padded", False) for p in (re, im)) \
            and np.shape(re) != np.shape(im):  # (x * 1j + 2; a Padded's shape is unknown)
        shape = np.broadcast_shapes(np.shape(re), np.shape(im))
        re, im = np.broadcast_to(re, shape), np.broadcast_to(im, shape)
    return Complex(re, im)


# ---- arithmetic on parts (None: exactly zero) --------------------------------------------
def _add(a, b):
    return b if a is None else a if b is None else a + b


def _sub(a, b):
    return a if b is None else -b if a is None else a - b


def _mul(a, b):
    return None if a is None or b is None else a * b


def zeros(like):
    return np.zeros(np.shape(like), np.result_type(like))


def zero_if_none(p, like):
    return zeros(like) if p is None else p


def cmul(x, y, product=operator.mul):
    """(a + ib)(c + id) = (ac - bd) + i(ad + bc), for any bilinear `product` (`*`, `@`)."""
    (a, b), (c, d) = parts(x), parts(y)

    def prod(u, v):
        return None if u is None or v is None else product(u, v)
    return make(_sub(prod(a, c), prod(b, d)), _add(prod(a, d), prod(b, c)))


def cdiv(x, y):
    """(a + ib) / (c + id) = ((ac + bd) + i(bc - ad)) / (c^2 + d^2)."""
    (a, b), (c, d) = parts(x), parts(y)
    if d is None:
        return make(a / c, None if b is None else b / c)
    den = _add(_mul(c, c), _mul(d, d))
    re, im = _add(_mul(a, c), _mul(b, d)), _sub(_mul(b, c), _mul(a, d))
    return make(re / den, None if im is None else im / den)


def cabs(z):
    """|z| = sqrt(re^2 + im^2), with gradient 0 at z = 0 (as JAX and PyTorch define it) where
    the square root's would be infinite."""
    a, b = parts(z)
    if b is None:
        return np.abs(a)
    s = a * a + b * b
    nz = s > 0
    return np.where(nz, np.sqrt(np.where(nz, s, 1.0)), 0.0)


def angle(z, deg=False):
    """np.angle; of a real value 0 or pi, piecewise constant (no gradient, where arctan2's
    would be NaN at 0)."""
    from llgrad.runtime.ops import stop_gradient
    a, b = parts(z)
    out = stop_gradient(np.arctan2(zeros(a), a)) if b is None else np.arctan2(b, a)
    return out * (180 / np.pi) if deg else out


def cexp(z):
    """e^(a + ib) = e^a (cos b + i sin b)."""
    a, b = parts(z)
    r = np.exp(a)
    if b is None:
        return r
    return make(r * np.cos(b), r * np.sin(b))


def cpow(z, p):
    """z ** p for a real constant p: repeated products for small integers (exact, and defined
    at 0), else in polar form |z|^p (cos p theta + i sin p theta)."""
    from llgrad.runtime.prim import is_value
    if is_value(p) or is_complex(p) or np.ndim(p):
        raise UnsupportedError("z ** p of a complex z is supported for a constant real scalar "
                               "exponent only", loc=user_loc(),
                               fix="write the power as products (z * z), or np.exp(p * np.log|z|"
                               " ...) of real values")
    p = float(p)
    if p.is_integer() and 0 <= p <= 8:
        if p == 0:
            return np.ones(np.shape(parts(z)[0]))
        out = z
        for _ in range(int(p) - 1):
            out = cmul(out, z)
        return out
    r, t = cabs(z), angle(z)
    return make(r ** p * np.cos(p * t), r ** p * np.sin(p * t))


def conj(z):
    a, b = parts(z)
    return z if type(z) is not Complex and b is None else make(a, None if b is None else -b)


def real(z):
    return parts(z)[0]


def imag(z):
    a, b = parts(z)
    return zeros(a) if b is None else b


# ---- the ops layer's elementwise functions on complex operands ----------------------------
_BINARY = {"add": lambda x, y: make(*map(_add, parts(x), parts(y))),
           "sub": lambda x, y: make(*map(_sub, parts(x), parts(y))),
           "mul": cmul, "div": cdiv, "pow": cpow}
_UNARY = {"neg": lambda z: make(*(None if p is None else -p for p in parts(z))),
          "abs": cabs, "exp": cexp, "square": lambda z: cmul(z, z), "positive": lambda z: z}


def elementwise(prim, *xs):
    """The primitive `prim` applied to operands of which one is complex (ops layer hook)."""
    table = _BINARY if len(xs) == 2 else _UNARY
    fn = table.get(prim.name)
    if fn is None:
        raise _refused(_name(prim))
    return fn(*xs)


def _name(prim) -> str:
    """How the user wrote the primitive: its numpy function (np.less), else its own name."""
    f = next((f for f in prim.numpy if callable(f)), None)
    return prim.name if f is None else f"np.{f.__name__}"


def _refused(name: str) -> UnsupportedError:
    return UnsupportedError(
        f"{name} of a complex value is not supported by llgrad (complex values support +, -, "
        f"*, /, ** by a constant, @, np.abs, np.real/np.imag, np.conj, np.angle, np.exp, "
        f"sums, means, indexing, reshaping and np.fft)", loc=user_loc(), fix=_FIX)


# ---- numpy functions on complex values ---------------------------------------------------
def _each_part(fn):
    """A numpy function that is real-linear and acts on each part alike (sum, reshape,
    transpose, roll, fftshift): applied to the first argument's parts."""
    def impl(z, *args, **kw):
        return make(*(None if p is None else fn(p, *args, **kw) for p in parts(z)))
    return impl


def _joined(fn):
    """np.concatenate / np.stack of complex and real arrays: each part joined."""
    def impl(arrays, *args, **kw):
        ps = [parts(a) for a in arrays]
        if all(im is None for _, im in ps):
            return fn([re for re, _ in ps], *args, **kw)
        return make(fn([re for re, _ in ps], *args, **kw),
                    fn([zero_if_none(im, re) for re, im in ps], *args, **kw))
    return impl


def _where(cond, x, y):
    (a, b), (c, d) = parts(x), parts(y)
    pick = lambda u, v: None if u is None and v is None else np.where(  # noqa: E731
        cond, 0.0 if u is None else u, 0.0 if v is None else v)
    return make(pick(a, c), pick(b, d))


FUNCTIONS = {
    np.add: _BINARY["add"], np.subtract: _BINARY["sub"], np.multiply: cmul,
    np.true_divide: cdiv, np.power: cpow, np.negative: _UNARY["neg"],
    np.positive: _UNARY["positive"], np.absolute: cabs, np.exp: cexp, np.square: _UNARY["square"],
    np.matmul: lambda x, y: cmul(x, y, operator.matmul), np.dot: lambda x, y: cmul(x, y, np.dot),
    np.where: _where, np.concatenate: _joined(np.concatenate), np.stack: _joined(np.stack),
}
FUNCTIONS.update({f: _each_part(f) for f in (
    np.sum, np.mean, np.cumsum, np.diff, np.trace, np.reshape, np.transpose, np.swapaxes,
    np.moveaxis, np.squeeze, np.expand_dims, np.ravel, np.broadcast_to, np.roll, np.flip,
    np.diagonal, np.copy)})
FUNCTIONS.update({np.shape: lambda z: z.shape, np.ndim: lambda z: z.ndim,
                  np.size: lambda z: z.size})
# on real values too (runtime/numpy_api.py)
REAL_AND_COMPLEX = {np.real: real, np.imag: imag, np.conjugate: conj, np.angle: angle,
                    np.iscomplexobj: is_complex, np.isrealobj: lambda x: not is_complex(x)}
FUNCTIONS.update(REAL_AND_COMPLEX)


class Complex:
    """A complex array as its real and imaginary parts (Note [Complex values are pairs])."""

    __slots__ = ("re", "im")
    _lg_level = 3  # above every real value class: they defer to it
    __array_priority__ = 1001

    def __init__(self, re, im):
        self.re, self.im = re, im

    @property
    def shape(self) -> tuple:
        return tuple(np.shape(self.re))

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return int(np.prod(self.shape))

    @property
    def dtype(self):
        return np.dtype(np.complex64 if np.result_type(self.re) == np.float32 else
                        np.complex128)

    _np_dtype = dtype

    real = property(real)
    imag = property(imag)
    T = property(lambda self: FUNCTIONS[np.transpose](self))

    def conj(self):
        return conj(self)

    conjugate = conj

    def __len__(self) -> int:
        return self.shape[0]

    def __iter__(self):
        return (self[i] for i in range(len(self)))

    def __getitem__(self, key):
        return make(*(None if p is None else p[key] for p in parts(self)))

    def __setitem__(self, key, value):
        raise UnsupportedError("assigning into a complex value (z[k] = v) is not supported",
                               loc=user_loc(), fix="multiply by a mask (z = z * mask) or "
                               "select: z = np.where(mask, z, 0)")

    # -- operators ----------------------------------------------------------------------------
    def __add__(self, o): return FUNCTIONS[np.add](self, o)
    def __radd__(self, o): return FUNCTIONS[np.add](o, self)
    def __sub__(self, o): return FUNCTIONS[np.subtract](self, o)
    def __rsub__(self, o): return FUNCTIONS[np.subtract](o, self)
    def __mul__(self, o): return cmul(self, o)
    def __rmul__(self, o): return cmul(o, self)
    def __truediv__(self, o): return cdiv(self, o)
    def __rtruediv__(self, o): return cdiv(o, self)
    def __pow__(self, o): return cpow(self, o)
    def __matmul__(self, o): return cmul(self, o, operator.matmul)
    def __rmatmul__(self, o): return cmul(o, self, operator.matmul)
    def __neg__(self): return _UNARY["neg"](self)
    def __pos__(self): return self
    def __abs__(self): return cabs(self)

    def __rpow__(self, o):
        raise _refused("a power with a complex exponent")

    # methods of numpy arrays
    def sum(self, axis=None, keepdims=False, **kw):
        return FUNCTIONS[np.sum](self, axis=axis, keepdims=keepdims, **kw)

    def mean(self, axis=None, keepdims=False, **kw):
        return FUNCTIONS[np.mean](self, axis=axis, keepdims=keepdims, **kw)

    def reshape(self, *shape, order="C"):
        return FUNCTIONS[np.reshape](self, shape[0] if len(shape) == 1 else shape)

    def transpose(self, *axes):
        axes = axes[0] if len(axes) == 1 and not isinstance(axes[0], int) else axes
        return FUNCTIONS[np.transpose](self, axes or None)

    def ravel(self):
        return FUNCTIONS[np.ravel](self)

    flatten = ravel

    def copy(self):
        return self

    def swapaxes(self, a, b):
        return FUNCTIONS[np.swapaxes](self, a, b)

    def squeeze(self, axis=None):
        return FUNCTIONS[np.squeeze](self, axis)

    # -- what a complex value cannot do ----------------------------------------------------
    def _refuse(self, what: str, cls=UnsupportedError):
        return cls(f"{what} of a complex value (llgrad differentiates real results only)",
                   loc=user_loc(3), fix=_FIX)

    def __bool__(self): raise self._refuse("bool()")
    def __float__(self): raise self._refuse("float()", DTypeError)
    def __complex__(self): raise self._refuse("complex()", DTypeError)
    def __int__(self): raise self._refuse("int()", DTypeError)
    def __array__(self, dtype=None, copy=None): raise self._refuse("a numpy array")
    def __lt__(self, o): raise self._refuse("a comparison")
    __le__ = __gt__ = __ge__ = __eq__ = __ne__ = __lt__
    __hash__ = object.__hash__

    def __repr__(self) -> str:
        return f"Complex(re={self.re!r}, im={self.im!r})"

    @staticmethod
    def _lg_process(prim, args, params):
        raise _refused(_name(prim))

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        fn = FUNCTIONS.get(ufunc) if method == "__call__" else None
        name = f"np.{ufunc.__name__}" + ("" if method == "__call__" else f".{method}")
        if fn is None or kwargs:  # (out=, where=, dtype=)
            raise _refused(name + "".join(f" with {k}=" for k in kwargs))
        return fn(*inputs)

    def __array_function__(self, func, types, args, kwargs):
        from llgrad.runtime.numpy_api import numpy_name
        from llgrad.runtime.numpy_fft import FUNCTIONS as FFT
        fn = FUNCTIONS.get(func) or FFT.get(func)
        if fn is None:
            raise _refused(numpy_name(func))
        return fn(*args, **kwargs)


# In staged loops and branches a Complex is carried as its two parts (a part that is exactly
# zero, None, becomes an array of zeros: the two paths of a branch may differ in which part is
# zero). Returned from a differentiated function it is still an error (tracer/tracing.py).
register_pytree(Complex, lambda z: ((z.re, zero_if_none(z.im, z.re)), None),
                lambda aux, children: Complex(*children))
