"""numpy's elementwise math and scipy.special inside compiled functions (issue 11): values and
dtypes equal numpy's on edge sizes (0-d, empty, 1x1) and broadcast operands, special values
(NaN, infinities, -0.0, poles), gradients against finite differences, natively and through
the interpreter; the eager runtime through numpy/scipy dispatch."""
from __future__ import annotations

import numpy as np
import pytest
import scipy.special

import llgrad
import llgrad as lg
from llgrad.runtime.errors import UnsupportedError
from tests.e2e.conftest import finite_differences

# (name, function, input domain (lo, hi)): each gets its own input in the domain.
UNARY = [
    ("sinh", np.sinh, (-5, 5)), ("cosh", np.cosh, (-5, 5)), ("arcsin", np.arcsin, (-0.9, 0.9)),
    ("arccos", np.arccos, (-0.9, 0.9)), ("arctan", np.arctan, (-5, 5)),
    ("arcsinh", np.arcsinh, (-5, 5)), ("arccosh", np.arccosh, (1.2, 5)),
    ("arctanh", np.arctanh, (-0.9, 0.9)), ("exp2", np.exp2, (-5, 5)),
    ("log2", np.log2, (0.2, 5)), ("log10", np.log10, (0.2, 5)), ("cbrt", np.cbrt, (0.2, 5)),
    ("ceil", np.ceil, (-5, 5)), ("trunc", np.trunc, (-5, 5)), ("fix", np.fix, (-5, 5)),
    ("rint", np.rint, (-5, 5)), ("round", np.round, (-5, 5)),
    ("around2", lambda x: np.around(x, 2), (-5, 5)), ("reciprocal", np.reciprocal, (0.5, 5)),
    ("positive", np.positive, (-5, 5)), ("sinc", np.sinc, (-3, 3)),
    ("deg2rad", np.deg2rad, (-360, 360)), ("rad2deg", np.rad2deg, (-5, 5)),
    ("nan_to_num", np.nan_to_num, (-5, 5)), ("erf", scipy.special.erf, (-3, 3)),
    ("erfc", scipy.special.erfc, (-3, 3)), ("gammaln", scipy.special.gammaln, (0.2, 6)),
    ("digamma", scipy.special.digamma, (0.2, 6)), ("logit", scipy.special.logit, (0.05, 0.95)),
    ("expit", scipy.special.expit, (-5, 5)), ("ndtr", scipy.special.ndtr, (-6, 6)),
    ("log_ndtr", scipy.special.log_ndtr, (-6, 6)), ("gamma", scipy.special.gamma, (0.2, 6)),
    ("log_expit", scipy.special.log_expit, (-5, 5)),
]
PREDICATES = [np.isnan, np.isinf, np.isfinite, np.signbit]
BINARY = [
    ("arctan2", np.arctan2), ("logaddexp", np.logaddexp), ("logaddexp2", np.logaddexp2),
    ("hypot", np.hypot), ("copysign", np.copysign), ("fmod", np.fmod), ("mod", np.mod),
    ("heaviside", np.heaviside), ("xlogy", scipy.special.xlogy),
    ("xlog1py", scipy.special.xlog1py),
]
TOL = {np.dtype(np.float64): dict(rtol=1e-14, atol=1e-15),
       np.dtype(np.float32): dict(rtol=2e-6, atol=1e-7)}


def _apply_each(fns):
    def apply_each(*xs):
        out = []
        for fn, x in zip(fns, xs):
            out.append(fn(x))
        return tuple(out)
    return apply_each


def _check(got, want, what):
    """Equal to numpy's result, dtype included (a 0-d result is a Python number)."""
    want = np.asarray(want)
    got = np.asarray(got, dtype=want.dtype if type(got) in (float, bool) else None)
    assert got.dtype == want.dtype and got.shape == want.shape, (
        f"{what}: {got.dtype}{list(got.shape)}, numpy {want.dtype}{list(want.shape)}")
    if want.dtype.kind == "b":
        np.testing.assert_array_equal(got, want, err_msg=what)
    else:
        np.testing.assert_allclose(got, want, **TOL[want.dtype], err_msg=what)


@pytest.mark.parametrize("shape", [(), (0,), (1, 1), (3, 4)], ids=str)
@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=["f64", "f32"])
def test_unary_functions_match_numpy(shape, dtype, mode):
    rng = np.random.default_rng(0)
    xs = [rng.uniform(*dom, shape).astype(dtype) for _, _, dom in UNARY]
    xs += [rng.standard_normal(shape).astype(dtype) for _ in PREDICATES]
    fns = [fn for _, fn, _ in UNARY] + PREDICATES
    got = llgrad.differentiate(_apply_each(fns))(*xs)
    for name, fn, x, g in zip([n for n, _, _ in UNARY] + [p.__name__ for p in PREDICATES],
                              fns, xs, got):
        _check(g, fn(x), f"{name} on {np.dtype(dtype)}{list(shape)}")


SPECIAL = np.array([0.0, -0.0, 1.0, -1.0, 0.5, -2.5, 3.0, 1e-300, 1e300, -1e300, 700.0,
                    -750.0, np.inf, -np.inf, np.nan])


@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=["f64", "f32"])
def test_special_values_match_numpy(dtype, mode):
    """NaN, infinities, signed zeros, poles and overflow as numpy/scipy give them."""
    x = SPECIAL.astype(dtype)
    fns = [fn for _, fn, _ in UNARY] + PREDICATES
    with np.errstate(all="ignore"):
        got = llgrad.differentiate(_apply_each(fns))(*[x] * len(fns))
        for fn, g in zip(fns, got):
            want = np.asarray(fn(x))
            np.testing.assert_allclose(g, want, rtol=TOL[np.dtype(dtype)]["rtol"], atol=0,
                                       equal_nan=True, err_msg=getattr(fn, "__name__", fn))
            zero = (want == 0) & (g == 0)
            assert (np.signbit(g) == np.signbit(want))[zero].all(), f"sign of zero: {fn}"
        a, b = (v.ravel().astype(dtype) for v in np.meshgrid(SPECIAL, SPECIAL))
        for name, fn in BINARY:
            got = llgrad.differentiate(lambda p, q: fn(p, q))(a, b)
            np.testing.assert_allclose(got, fn(a, b), rtol=TOL[np.dtype(dtype)]["rtol"], atol=0,
                                       equal_nan=True, err_msg=name)


@pytest.mark.parametrize("sx, sy", [((3, 1), (4,)), ((), (2, 3)), ((1, 1), (1,)),
                                    ((0, 3), (3,)), ((2, 3), ())], ids=str)
def test_binary_functions_broadcast_like_numpy(sx, sy, mode):
    rng = np.random.default_rng(1)
    x = rng.uniform(0.2, 3.0, sx) * rng.choice([-1.0, 1.0], sx)
    y = rng.uniform(0.2, 3.0, sy)
    for name, fn in BINARY:
        f = llgrad.differentiate(lambda p, q: fn(p, q))
        _check(f(x, y), fn(x, y), f"{name}{sx, sy}")
        _check(f(y, x), fn(y, x), f"{name}{sy, sx}")


@pytest.mark.parametrize("scalar", [2.5, -0.5, 0.0], ids=str)
def test_binary_functions_with_python_scalars_keep_float32(scalar, mode):
    x = np.linspace(0.3, 2.0, 5, dtype=np.float32)
    for name, fn in BINARY:
        _check(llgrad.differentiate(lambda p: fn(p, scalar))(x), fn(x, scalar), f"{name}(x, s)")
        _check(llgrad.differentiate(lambda p: fn(scalar, p))(x), fn(scalar, x), f"{name}(s, x)")


def test_gradients_match_finite_differences(mode):
    rng = np.random.default_rng(2)
    smooth = [(n, fn, dom) for n, fn, dom in UNARY
              if n not in ("ceil", "trunc", "fix", "rint", "round", "around2")]
    xs = [rng.uniform(*dom, (3, 2)) for _, _, dom in smooth]
    ys = [rng.uniform(0.3, 2.0, (3, 2)) * s for s in (1.0, -1.0)]
    weights = rng.standard_normal(len(smooth) + len(BINARY))

    def loss(*args):
        xs, (y0, y1) = args[:-2], args[-2:]
        total = 0.0
        for k, ((_, fn, _), x) in enumerate(zip(smooth, xs)):
            total = total + weights[k] * np.sum(fn(x))
        for k, (name, fn) in enumerate(BINARY):
            a, b = (y0, -y1) if name == "heaviside" else (y1, y0)  # heaviside: d/dx is 0
            total = total + weights[len(smooth) + k] * np.sum(fn(a, b))
        return total
    args = xs + ys
    wrt = tuple(range(len(args)))
    grads = llgrad.differentiate(loss, wrt=wrt).grad(*args)
    for i, (g, e) in enumerate(zip(grads, finite_differences(loss, args, wrt))):
        np.testing.assert_allclose(g, e, rtol=1e-6, atol=1e-7, err_msg=f"argument {i}")


def test_rounding_has_zero_gradient_and_rounds_half_to_even(mode):
    def f(x):
        return np.stack([np.round(x), np.ceil(x), np.floor(x), np.trunc(x), np.rint(x),
                         np.round(x, 1), np.fix(x)])
    x = np.array([0.5, 1.5, 2.5, -0.5, -1.5, 0.25, 0.35])
    np.testing.assert_array_equal(llgrad.differentiate(f)(x), f(x))
    assert list(f(x)[0]) == [0.0, 2.0, 2.0, -0.0, -2.0, 0.0, 0.0]
    grad = llgrad.differentiate(lambda a: np.sum(f(a) * 3.0)).grad(x)
    np.testing.assert_array_equal(grad, np.zeros(7))


def test_fmod_and_remainder_gradients_are_pytorchs(mode):
    # d/dx = 1; d/dy = -trunc(x / y) (fmod) and -floor(x / y) (remainder)
    x, y = np.array([5.5, -5.5, 5.5, -5.5]), np.array([2.0, 2.0, -2.0, -2.0])
    gx, gy = llgrad.differentiate(lambda a, b: np.sum(np.fmod(a, b)), wrt=(0, 1)).grad(x, y)
    np.testing.assert_array_equal(gx, np.ones(4))
    np.testing.assert_array_equal(gy, -np.trunc(x / y))
    gx, gy = llgrad.differentiate(lambda a, b: np.sum(np.mod(a, b)), wrt=(0, 1)).grad(x, y)
    np.testing.assert_array_equal(gy, -np.floor(x / y))


def test_logaddexp_is_stable_and_its_gradient_is_a_softmax(mode):
    x = np.array([1000.0, -1000.0, -np.inf, 3.0])
    y = np.array([1000.0, -999.0, -np.inf, -np.inf])
    f = llgrad.differentiate(lambda a, b: np.logaddexp(a, b))
    np.testing.assert_array_equal(f(x, y), np.logaddexp(x, y))
    gx, gy = llgrad.differentiate(lambda a, b: np.sum(np.logaddexp(a, b)), wrt=(0, 1)).grad(
        x[[0, 1, 3]], y[[0, 1, 3]])
    np.testing.assert_allclose(gx, scipy.special.expit(x[[0, 1, 3]] - y[[0, 1, 3]]))
    np.testing.assert_allclose(gx + gy, np.ones(3))


# ---- scipy.special ------------------------------------------------------------------------
def _lse(a):
    return scipy.special.logsumexp(a)


def _lse_axis(a):
    return scipy.special.logsumexp(a, axis=1)


def _lse_keepdims(a):
    return scipy.special.logsumexp(a, axis=(0, 1), keepdims=True)


def _lse_b(a):
    return scipy.special.logsumexp(a, axis=0, b=np.abs(a[::-1]) + 0.1)


def _lse_b_broadcast(a):
    return scipy.special.logsumexp(a, b=np.array([0.5, 1.0, 2.0, 0.25]))


def _softmax(a):
    return scipy.special.softmax(a)


def _softmax_axis(a):
    return scipy.special.softmax(a, axis=1)


def _log_softmax(a):
    return scipy.special.log_softmax(a, axis=0)


@pytest.mark.parametrize("fn", [_lse, _lse_axis, _lse_keepdims, _lse_b, _lse_b_broadcast,
                                _softmax, _softmax_axis, _log_softmax], ids=lambda f: f.__name__)
def test_scipy_logsumexp_softmax_log_softmax(fn, mode):
    m = np.random.default_rng(3).standard_normal((3, 4))
    _check(llgrad.differentiate(fn)(m), fn(m), fn.__name__)

    def loss(a):
        return np.sum(np.sin(3.0 * fn(a)))
    g = llgrad.differentiate(loss).grad(m)
    np.testing.assert_allclose(g, finite_differences(loss, [m], (0,))[0], rtol=1e-6, atol=1e-8)


def test_scipy_logsumexp_return_sign_is_refused():
    def f(a):
        return scipy.special.logsumexp(a, return_sign=True)[0]
    with pytest.raises(UnsupportedError, match=r"logsumexp\(return_sign=True\)"):
        llgrad.differentiate(f)(np.ones(3))


def test_from_scipy_special_import_names_work(mode):
    from scipy.special import erf, expit, gammaln, logsumexp

    def f(x):
        return logsumexp(x) + np.sum(erf(x) * expit(x)) + np.sum(gammaln(x + 3.0))
    x = np.linspace(-1.0, 1.0, 5)
    assert llgrad.differentiate(f)(x) == pytest.approx(f(x), rel=1e-14)
    np.testing.assert_allclose(llgrad.differentiate(f).grad(x),
                               finite_differences(f, [x], (0,))[0], rtol=1e-6)


def test_scipy_optimize_rosen_is_differentiated(mode):
    """scipy's own rosen (which converts its argument with scipy's array API helpers before
    computing) against scipy's rosen_der, float64 and float32."""
    import scipy.optimize
    for dtype in (np.float64, np.float32):
        x = np.array([0.5, 1.5, 2.0, -0.3, 1.1], dtype=dtype)
        f = llgrad.differentiate(scipy.optimize.rosen)
        value, grad = f.value_and_grad(x)
        assert grad.dtype == dtype
        np.testing.assert_allclose(value, scipy.optimize.rosen(x), rtol=1e-6 if dtype ==
                                   np.float32 else 1e-15)
        np.testing.assert_allclose(grad, scipy.optimize.rosen_der(x), rtol=1e-5 if dtype ==
                                   np.float32 else 1e-14)
    assert f.inspect(x).path == "staged"


def test_gammaln_is_twice_differentiable_digamma_once():
    x = np.array([0.7, 2.5, 4.0])
    h = llgrad.hessian(lambda a: np.sum(scipy.special.gammaln(a)))(x)
    np.testing.assert_allclose(np.diag(h), scipy.special.polygamma(1, x), rtol=1e-13)
    t = lg.tensor(x, requires_grad=True)
    (g,) = lg.autograd.grad(scipy.special.digamma(t).sum(), t, create_graph=True)
    np.testing.assert_allclose(g.detach().numpy(), scipy.special.polygamma(1, x), rtol=1e-13)
    with pytest.raises(UnsupportedError, match=r"derivative of trigamma \(polygamma\(2, x\)\)"):
        g.sum().backward()


def test_scipy_ufuncs_on_eager_tensors():
    t = lg.tensor([0.3, 1.2, 2.5], dtype=lg.float64, requires_grad=True)
    y = scipy.special.erf(t) + scipy.special.gammaln(t) + scipy.special.expit(t)
    assert isinstance(y, lg.Tensor) and y.grad_fn.name() == "AddBackward0"
    y.sum().backward()
    x = t.detach().numpy()
    np.testing.assert_allclose(t.grad.numpy(), 2 / np.sqrt(np.pi) * np.exp(-x * x)
                               + scipy.special.digamma(x) + scipy.special.expit(x)
                               * scipy.special.expit(-x), rtol=1e-13)
    with pytest.raises(UnsupportedError, match=r"scipy\.special\.k0 is not supported"):
        scipy.special.k0(t)



def _outer_loss(x, y):
    return (np.sum(np.exp(-np.subtract.outer(x, y) ** 2)) + np.sum(np.maximum.outer(y, x))
            + np.sum(np.multiply.outer(x, [1.0, 2.0]) * np.less.outer(x, [0.5]))
            + np.sum(np.power.outer(np.abs(y), x[:2])))


def test_ufunc_outer_of_binary_ufuncs(mode):
    """np.subtract.outer (the pairwise differences of a kernel) was unsupported; every binary
    ufunc's .outer is now the ufunc of x extended by y's axes and y."""
    x, y = np.array([0.3, -1.2, 0.9]), np.array([[0.5, 1.5], [-0.7, 2.0]])
    d = llgrad.differentiate(_outer_loss, wrt=(0, 1))
    value, grads = d.value_and_grad(x, y)
    assert value == pytest.approx(_outer_loss(x, y), rel=1e-14)
    for g, fd in zip(grads, finite_differences(_outer_loss, [x, y], (0, 1))):
        np.testing.assert_allclose(g, fd, rtol=1e-6, atol=1e-8)
    got = llgrad.differentiate(lambda x, y: np.hypot.outer(x, y))(x, y)
    assert got.shape == (3, 2, 2)
    np.testing.assert_allclose(got, np.hypot.outer(x, y), rtol=1e-15)
    t = lg.tensor(x, requires_grad=True)
    np.subtract.outer(t, t).sum().backward()  # eagerly too: 0
    np.testing.assert_array_equal(t.grad.numpy(), np.zeros(3))


def _close_branches(x):
    if np.allclose(x, 1.0, atol=0.5):  # (a traced condition: one compiled cond)
        return np.sum(x ** 2)
    return np.sum(np.where(np.isclose(x, 3.0, rtol=0.1), x, 0.0))


def test_isclose_and_allclose_follow_numpys_formula(mode):
    """np.isclose / np.allclose were unsupported; infinities, NaN (equal_nan) and each
    tolerance as numpy, and allclose as a traced condition."""
    a = np.array([1.0, np.inf, np.nan, -np.inf, 1e-9, 2.0, 1.0])
    b = np.array([1.0 + 1e-6, np.inf, np.nan, np.inf, 0.0, 2.1, np.nan])
    for kw in ({}, {"equal_nan": True}, {"rtol": 0.1}, {"atol": 1e-3}):
        got = llgrad.differentiate(lambda a, b: np.isclose(a, b, **kw))(a, b)
        np.testing.assert_array_equal(got, np.isclose(a, b, **kw))
    d = llgrad.differentiate(_close_branches)
    for x in (np.array([1.1, 0.9]), np.array([3.1, 1.0])):
        value, g = d.value_and_grad(x)
        assert value == _close_branches(x) and d.inspect(x).path == "staged"
        np.testing.assert_allclose(g, finite_differences(_close_branches, [x], (0,))[0],
                                   atol=1e-8)
