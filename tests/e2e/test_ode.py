"""scipy.integrate.solve_ivp (RK45, RK23, DOP853) and odeint inside `llgrad.differentiate` (Note [ODE
solvers on traced values] in tracer/ode.py): solve_ivp's values and nfev equal scipy's (the
same steps), gradients against central differences (float64) through the interpreter and
natively; odeint (RK45, not LSODA) against scipy to the solver tolerance; one staged while
loop; the errors for what is not supported."""
from __future__ import annotations

import numpy as np
import pytest
import scipy.integrate as si

import llgrad
from llgrad.runtime.errors import DTypeError, UnsupportedError
from tests.e2e.conftest import compiled, finite_differences

T5 = np.linspace(0.0, 2.0, 5)
DATA5 = np.array([1.0, 0.7, 0.5, 0.45, 0.4])


def kinetics_rhs(t, y, k):
    return [-k[0] * y[0] + k[1] * y[1], k[0] * y[0] - k[1] * y[1]]


def kinetics(k, data=DATA5, method="RK45", span=(0.0, 2.0), t_eval=T5):
    sol = si.solve_ivp(kinetics_rhs, span, [1.0, 0.0], method=method, t_eval=t_eval,
                       args=(k,))
    return np.sum((sol.y[0] - data) ** 2) + np.sum(sol.y[1] * t_eval)


def kinetics_rk23(k):
    return kinetics(k, method="RK23")


def kinetics_dop853(k):
    return kinetics(k, method="DOP853")


def kinetics_backwards(k):  # from t = 2 down to 0
    return kinetics(k, data=DATA5[::-1], span=(2.0, 0.0), t_eval=T5[::-1])


def lotka_volterra_rhs(t, z, p):
    x, y = z
    return np.array([p[0] * x - p[1] * x * y, p[2] * x * y - p[3] * y])


LV_T = np.linspace(0.0, 4.0, 7)
LV_DATA = np.array([[1.0, 1.4, 1.6, 1.2, 0.8, 0.7, 0.9], [0.5, 0.6, 0.9, 1.2, 1.1, 0.8, 0.6]])


def lotka_volterra(p, z0):  # a fit of parameters and initial state together
    sol = si.solve_ivp(lotka_volterra_rhs, (0.0, 4.0), z0, t_eval=LV_T, args=(p,),
                       rtol=1e-6, atol=1e-9)
    return np.sum((sol.y - LV_DATA) ** 2)


def oscillator_rhs(t, y, omega, zeta):
    force = 0.0
    if t > 1.0:  # (converted: a traced branch on the solver's time)
        force = 0.5 * (t - 1.0)  # (a kink: a jump amplifies rounding through step sizes)
    return [y[1], force - 2.0 * zeta * omega * y[1] - omega ** 2 * y[0]]


def damped_oscillator(w):
    sol = si.solve_ivp(oscillator_rhs, (0.0, 3.0), np.array([1.0, 0.0]),
                       t_eval=np.linspace(0.5, 3.0, 6), args=(w[0], w[1]), first_step=0.05)
    return np.sum(sol.y[0] ** 2) + sol.y[1][-1]


def relaxation_rhs(t, y, lam):  # stiff-ish: the explicit solver is held by max_step
    return -lam * (y - np.cos(t))


def relaxation(lam):
    sol = si.solve_ivp(relaxation_rhs, (0.0, 1.5), [2.0], t_eval=np.linspace(0.0, 1.5, 4),
                       args=(lam,), max_step=0.05, rtol=1e-5)
    return np.sum(sol.y ** 2)


def kinetics_until(T):  # a traced end of the interval, and a time of t_eval
    sol = si.solve_ivp(kinetics_rhs, (0.0, T), [1.0, 0.0], t_eval=[0.5, T],
                       args=(np.array([1.3, 0.4]),), rtol=1e-6)
    return np.sum(sol.y[0] * np.array([1.0, 3.0])) + sol.y[1][1]


CASES = [  # (function, arguments, central differences' step)
    (kinetics, (np.array([1.3, 0.4]),), 1e-6), (kinetics_rk23, (np.array([1.3, 0.4]),), 1e-6),
    (kinetics_dop853, (np.array([1.3, 0.4]),), 1e-6),
    (kinetics_backwards, (np.array([0.8, 0.3]),), 1e-6),
    (lotka_volterra, (np.array([1.1, 0.9, 0.8, 1.2]), np.array([1.0, 0.5])), 1e-6),
    # (rounding, amplified through the step sizes, makes the value rough at 1e-13: a step of
    # 1e-6 errs by 4e-7, one of 1e-5 agrees with the gradient to 2e-8)
    (damped_oscillator, (np.array([2.0, 0.3]),), 1e-5), (relaxation, (40.0,), 1e-6),
    (kinetics_until, (1.7,), 1e-6),
]


@pytest.mark.parametrize("fn,args,eps", CASES, ids=[c[0].__name__ for c in CASES])
def test_solve_ivp_value_and_gradient(fn, args, eps, mode):
    wrt = tuple(range(len(args)))
    value, grad = compiled(fn, wrt).value_and_grad(*args)
    # scipy's steps; the values to rounding, as amplified through the step sizes: each step's
    # error estimate is a difference of nearly equal sums (rounded in BLAS's order in scipy),
    # and the next step size its power -1/5 (1e-15 for the kinetics, 1e-13 for the oscillator,
    # 2e-11 were its force to jump)
    np.testing.assert_allclose(value, fn(*args), rtol=1e-10)
    for g, fd in zip(grad, finite_differences(fn, args, wrt, eps)):
        np.testing.assert_allclose(g, fd, rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("method", ["RK45", "RK23", "DOP853"])
def test_solve_ivp_result_is_scipys(method):
    def solve(k):
        sol = si.solve_ivp(kinetics_rhs, (0.0, 3.0), [1.0, 0.0], t_eval=np.linspace(0, 3, 7),
                           args=(k,), method=method)
        return sol.y, sol.t, sol.nfev, sol.status, sol.success
    def loss(k):
        result = solve(k)
        return np.sum(result[0]), result
    k = np.array([1.3, 0.4])
    want = solve(k)
    got = llgrad.differentiate(loss, has_aux=True)(k)[1]
    np.testing.assert_allclose(got[0], want[0], rtol=1e-12)
    np.testing.assert_array_equal(got[1], want[1])
    assert int(got[2]) == want[2] and int(got[3]) == want[3] and bool(got[4]) == want[4]


def test_solve_ivp_is_one_staged_while_loop():
    ir = llgrad.differentiate(kinetics).inspect(np.array([1.3, 0.4])).forward_ir
    assert ir.count("while_loop") == 1 and "for_loop" not in ir


def odeint_fit(k, t):
    y = si.odeint(lambda y, s, k: np.array(kinetics_rhs(s, y, k)), [1.0, 0.0], t, args=(k,))
    return np.sum(y[:, 0] * t) + np.sum(y[:, 1] ** 2)


def test_odeint_agrees_with_scipy_to_its_tolerance(mode):
    k, t = np.array([1.3, 0.4]), np.linspace(0.0, 3.0, 7)
    f = llgrad.differentiate(odeint_fit)
    value, grad = f.value_and_grad(k, t)
    # LSODA and RK45 both keep each step's error below 1.49e-8 relative: the sums agree far
    # closer than 1e-6
    np.testing.assert_allclose(value, odeint_fit(k, t), rtol=1e-6)
    e = 1e-6  # central differences of llgrad's own solver, then (loosely) of scipy's
    own = [(f(k + e * d, t) - f(k - e * d, t)) / (2 * e) for d in np.eye(2)]
    np.testing.assert_allclose(grad, own, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(grad, finite_differences(odeint_fit, (k, t), (0,))[0], rtol=1e-4)


def test_odeint_tfirst_and_shape():
    y0, t = np.array([2.0, 1.0]), np.array([0.0, 0.5, 1.0])

    def decay(a):
        y = si.odeint(lambda s, y: -a * y, y0, t, tfirst=True)
        return np.sum(y[:, 0] + 3.0 * y[:, 1]), y
    (value, y), grad = llgrad.differentiate(decay, has_aux=True).value_and_grad(0.7)
    assert y.shape == (3, 2)
    np.testing.assert_allclose(y, np.outer(np.exp(-0.7 * t), y0), rtol=1e-7)
    np.testing.assert_allclose(grad, np.sum(-t * 5.0 * np.exp(-0.7 * t)), rtol=1e-6)


def blow_up(k):  # y' = k y^2 from 1: infinite at t = 1 / k
    return np.sum(si.solve_ivp(lambda t, y: k * y ** 2, (0.0, 2.0), [1.0],
                               t_eval=[0.0, 2.0]).y)


def test_solver_failure_raises_when_it_runs():
    f = llgrad.differentiate(blow_up)
    assert np.isfinite(f(0.4))  # no singularity in (0, 2)
    with pytest.raises(UnsupportedError, match="Required step size is less than spacing"):
        f(1.0)


def _solve(span=(0.0, 2.0), **kw):
    def f(k):
        return np.sum(si.solve_ivp(kinetics_rhs, span, [1.0, 0.0], args=(k,), **kw).y)
    return f


@pytest.mark.parametrize("kw,match,fix", [
    (dict(method="Radau", t_eval=T5), r"solve_ivp\(method='Radau'\)", "method='RK45'"),
    (dict(method="LSODA", t_eval=T5), r"method='LSODA'", "method='RK45'"),
    (dict(method="BDF", t_eval=T5), r"method=.BDF.", "method=.RK45."),
    (dict(dense_output=True, t_eval=T5), r"solve_ivp\(dense_output=...\)", "no dense_output"),
    (dict(events=lambda t, y, k: y[0] - 0.5, t_eval=T5), r"events=", "events"),
    (dict(vectorized=True, t_eval=T5), r"vectorized=", "vectorized"),
    (dict(), "without t_eval", "pass t_eval"),
    (dict(t_eval=T5, jac=None), r"solve_ivp\(jac=...\)", "rtol, atol"),
    (dict(t_eval=[0.0], span=(1.0, 1.0)), "empty interval", "nonzero length"),
])
def test_unsupported_options_name_the_line(kw, match, fix):
    with pytest.raises(UnsupportedError, match=rf"{match}(.*\n)*.*test_ode.py:\d+ \(in f\)"
                       rf"(.*\n)*.*How to fix:.*{fix}"):
        llgrad.differentiate(_solve(**kw))(np.array([1.3, 0.4]))


COMPLEX_Y0 = np.array([1j])


def test_argument_errors():
    k = np.array([1.3, 0.4])
    with pytest.raises(ValueError, match="not within `t_span`"):
        llgrad.differentiate(_solve(t_eval=[0.0, 3.0]))(k)
    with pytest.raises(ValueError, match="not properly sorted"):
        llgrad.differentiate(_solve(t_eval=[1.0, 0.5]))(k)
    with pytest.raises(ValueError, match="`first_step` exceeds bounds"):  # (scipy's checks)
        llgrad.differentiate(_solve(t_eval=T5, first_step=3.0))(k)
    with pytest.raises(ValueError, match="not within `t_span`"):  # (checked when it runs)
        llgrad.differentiate(lambda s: np.sum(si.solve_ivp(
            kinetics_rhs, (0.0, s), [1.0, 0.0], t_eval=[0.0, 1.5], args=(k,)).y))(1.0)
    with pytest.raises(ValueError, match="`y0` must be 1-dimensional"):
        llgrad.differentiate(lambda a: np.sum(si.odeint(lambda y, t: -a * y, [[1.0]], T5)))(0.5)
    with pytest.raises(DTypeError, match="dtype complex128"):
        llgrad.differentiate(lambda a: np.sum(si.odeint(lambda y, t: -a * y, COMPLEX_Y0, T5)))(0.5)
    with pytest.raises(UnsupportedError, match=r"odeint\(full_output=...\)"):
        llgrad.differentiate(lambda a: np.sum(si.odeint(
            lambda y, t: -a * y, [1.0], T5, full_output=1)[0]))(0.5)
