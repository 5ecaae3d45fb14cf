"""scipy.integrate.solve_ivp (explicit Runge-Kutta methods) and scipy.integrate.odeint on traced
values: scipy's own RK algorithm written as one staged while loop (Note [ODE solvers on traced
values]). The gradient is that of the computed solution (discretise, then differentiate),
through the loop's tape. The entry points are traced forms (tracer/traced_builtins.py): they
check the static arguments and call the converted `_integrate`."""
from __future__ import annotations

import sys

import numpy as np

from llgrad.runtime import ops
from llgrad.runtime.errors import UnsupportedError, user_loc
from llgrad.runtime.ops import stats
from llgrad.runtime.ops.control import check_p
from llgrad.runtime.prim import bind, is_value

# Note [ODE solvers on traced values]
# scipy's solve_ivp with an explicit RK method (rk.py, common.py) steps a solver object
# until it reaches t_bound, rejecting and shrinking steps whose error norm is 1 or more. Here
# the same algorithm is one while loop whose iteration is one attempted step (an accepted one
# or a rejected one: scipy's inner `while not step_accepted` flattened), carrying t, y, f,
# h_abs, whether the step being attempted follows a rejection, the t_eval columns filled so
# far and nfev. Every decision scipy takes by an `if` is an np.where over the same
# comparisons, so the loop takes scipy's steps and its values equal scipy's to rounding (as
# amplified through the step sizes: an error estimate is a difference of nearly equal sums,
# which BLAS rounds in its own order in scipy); the columns of t_eval an accepted step covers
# get the method's dense output (RK45/RK23: K^T P; DOP853: from three more stages, counted
# in nfev only where scipy computes them, at steps that cover a t_eval). The gradient
# follows everything the values depend on, the step sizes too (h_abs is a smooth function of
# the parameters between the points where a decision flips), so it is the derivative of the
# computed solution, as central differences of the solver see it. odeint (LSODA in scipy)
# runs RK45 to odeint's tolerances: its values agree with scipy's to the tolerance only.
# Where scipy would fail (a step below 10 ulps of t), the compiled code raises when it runs:
# scipy's partial solution has fewer columns than t_eval, a shape not known when tracing.
# t_span may be traced (a Python float argument is): it gets a gradient, the derivative of
# the computed solution, where scipy takes float() of it.
SAFETY, MIN_FACTOR, MAX_FACTOR = 0.9, 0.2, 10.0


def traced_forms() -> dict:
    """scipy.integrate's solvers -> their traced forms, once scipy.integrate is imported."""
    integrate = sys.modules.get("scipy.integrate")
    if integrate is None:
        return {}
    return {integrate.solve_ivp: solve_ivp, integrate.odeint: odeint}


def calls_user_functions(f) -> bool:
    """scipy.integrate.solve_ivp or odeint: they call the user's function, whose closure may
    hold traced values (`odeint(lambda y, t: -k * y, y0, t)`), so their traced forms run
    whenever a function is traced, traced arguments or not."""
    integrate = sys.modules.get("scipy.integrate")
    return integrate is not None and (f is integrate.solve_ivp or f is integrate.odeint)


def _norm(x):
    """scipy's RMS norm, with a gradient of 0 (not NaN) at x = 0 (an exact error estimate)."""
    s = ops.sum(ops.square(x))
    zero = ops.eq(s, 0.0)
    return ops.div(ops.where(zero, 0.0, ops.sqrt(ops.where(zero, 1.0, s))), np.sqrt(x.shape[0]))


def _ulp_towards(t, direction):
    """|np.nextafter(t, direction * inf) - t| of a normal (or zero) float64 t."""
    a = ops.stop_gradient(ops.abs(t))
    p = ops.exp2(ops.floor(ops.log2(ops.where(ops.eq(a, 0.0), 1.0, a))))
    p = ops.where(ops.gt(p, a), ops.mul(p, 0.5), p)  # the power of 2 at or below |t|
    p = ops.where(ops.le(ops.add(p, p), a), ops.add(p, p), p)
    towards_zero = ops.logical_and(ops.lt(ops.mul(t, direction), 0.0), ops.eq(a, p))
    ulp = ops.mul(p, ops.where(towards_zero, 2.0 ** -53, 2.0 ** -52))
    return ops.where(ops.eq(a, 0.0), 5e-324, ulp)


def _min(a, b):
    """Python's min(a, b) (a unless b < a: scipy's NaN behaves so), elementwise."""
    return ops.where(ops.lt(b, a), b, a)


def _max(a, b):
    """Python's max(a, b) (a unless b > a)."""
    return ops.where(ops.gt(b, a), b, a)


def _zero_like(f):
    """0.0, traced when f is (the loop's state must be traced before the loop, and f's values,
    even NaN, must not reach it)."""
    return ops.where(ops.isnan(f[0]), 0.0, 0.0) if is_value(f) else 0.0


def _error_factor(err, exponent):
    """SAFETY * err ** exponent, finite (and with a finite gradient) at err = 0."""
    return ops.mul(SAFETY, ops.pow(ops.where(ops.eq(err, 0.0), 1.0, err), exponent))


def _check_success(failed, loc) -> None:
    """Raise, when the compiled code runs, where scipy fails."""
    bind(check_p, failed, exc=UnsupportedError, args=(
        "solve_ivp failed: Required step size is less than spacing between numbers. (scipy "
        "returns status -1 and the solution so far; llgrad's solution has the shape of "
        "t_eval)", loc, "loosen rtol/atol, or check the right-hand side for a singularity"))


def _integrate(fun, t0, tf, y0, t_eval, method, rtol, atol, max_step, first_step, loc):
    """The solution at t_eval (n, m) and nfev: Note [ODE solvers on traced values]."""
    stages = len(method.rows) + 1
    exponent = -1.0 / (method.err_order + 1)
    direction = np.where(tf > t0, 1.0, -1.0)
    y = y0
    f = fun(t0, y)
    if first_step is None:
        h_abs = _initial_step(fun, t0, y, tf, max_step, f, direction, method.err_order, rtol,
                              atol)
        nfev = 2
    else:
        h_abs = first_step
        nfev = 1
    zero = _zero_like(f)  # the loop's state traced from the start
    t, h_abs, nfev = t0 + zero, h_abs + zero, nfev + (zero != 0.0)
    out = np.zeros((y.shape[0], t_eval.shape[0])) + zero
    done = t_eval != t_eval + zero
    rejected = zero != 0.0
    failed = zero != 0.0
    running = zero == 0.0
    while running:
        min_step = 10.0 * _ulp_towards(t, direction)
        h_abs = np.where(rejected | (h_abs <= max_step) & (h_abs >= min_step), h_abs,
                         np.where(h_abs > max_step, max_step, min_step))
        too_small = ~(h_abs >= min_step)  # (scipy's h_abs < min_step, and NaN: scipy hangs)
        t_new = t + h_abs * direction
        t_new = np.where(direction * (t_new - tf) > 0, tf, t_new)
        h = t_new - t
        h_abs = np.abs(h)
        K = _stages(fun, t, y, h, method.rows, [f])
        y_new = y + h * np.dot(np.stack(K, 1), method.B)
        f_new = fun(t + h, y_new)
        K.append(f_new)
        scale = atol + np.maximum(np.abs(y), np.abs(y_new)) * rtol
        err = method.error_norm(np.stack(K, 1), h, scale)
        accept = (err < 1) & ~too_small
        grow = np.where(err == 0, MAX_FACTOR, _min(MAX_FACTOR, _error_factor(err, exponent)))
        grow = np.where(rejected, _min(1.0, grow), grow)
        shrink = _max(MIN_FACTOR, _error_factor(err, exponent))
        h_abs = h_abs * np.where(accept, grow, shrink)
        # the t_eval columns this step covers, from its interpolant
        covered = accept & (direction * (t_eval - t_new) <= 0) & ~done
        out = np.where(covered, method.dense(fun, K, t, h, y, y_new, (t_eval - t) / h), out)
        done = done | covered
        nfev = nfev + np.where(too_small, 0, stages) + np.where(
            np.any(covered), method.dense_fevals, 0)
        t = np.where(accept, t_new, t)
        y = np.where(accept, y_new, y)
        f = np.where(accept, f_new, f)
        rejected = ~accept
        failed = too_small
        running = ~too_small & ~(accept & (direction * (t_new - tf) >= 0))
    _check_success(failed, loc)
    return out, nfev


def _stages(fun, t, y, h, rows, K):
    """rk_step's stages after K's: K[s] = fun(t + c h, y + h K[:s]^T a) for (a, c) in rows."""
    for a, c in rows:
        dy = ops.mul(np.dot(np.stack(K, 1), a), h)
        K.append(fun(ops.add(t, ops.mul(c, h)), ops.add(y, dy)))
    return K


class _RungeKutta:
    """One of scipy's explicit RK methods: its stages, its error norm and its interpolant."""

    def __init__(self, solver):
        n = solver.n_stages
        self.rows = [(solver.A[s, :s], solver.C[s]) for s in range(1, n)]
        self.B, self.err_order, self.solver, self.dense_fevals = (
            solver.B, solver.error_estimator_order, solver, 0)

    def error_norm(self, K, h, scale):
        """RungeKutta._estimate_error_norm."""
        return _norm(ops.div(ops.mul(np.dot(K, self.solver.E), h), scale))

    def dense(self, fun, K, t, h, y, y_new, x):
        """RkDenseOutput at x = (t_eval - t) / h: y + h Q p(x), Q = K^T P, p the powers."""
        powers = [x]
        for _ in range(self.solver.P.shape[1] - 1):
            powers.append(ops.mul(powers[-1], x))
        q = np.dot(np.stack(K, 1), self.solver.P)
        return ops.add(ops.mul(h, np.dot(q, np.stack(powers))), y[:, None])


class _DOP853(_RungeKutta):
    """DOP853: two error estimates, and an interpolant of three more stages."""

    def __init__(self, solver):
        super().__init__(solver)
        n = solver.n_stages
        self.extra = [(solver.A_EXTRA[i, :n + 1 + i], c) for i, c in enumerate(solver.C_EXTRA)]
        self.dense_fevals = len(self.extra)

    def error_norm(self, K, h, scale):
        """DOP853._estimate_error_norm (0 where both estimates are, finite gradients)."""
        e5 = ops.sum(ops.square(ops.div(np.dot(K, self.solver.E5), scale)))
        e3 = ops.sum(ops.square(ops.div(np.dot(K, self.solver.E3), scale)))
        zero = ops.logical_and(ops.eq(e5, 0.0), ops.eq(e3, 0.0))
        denom = ops.where(zero, 1.0, ops.mul(ops.add(e5, ops.mul(0.01, e3)), scale.shape[0]))
        return ops.where(zero, 0.0, ops.div(ops.mul(ops.abs(h), e5), ops.sqrt(denom)))

    def dense(self, fun, K, t, h, y, y_new, x):
        """Dop853DenseOutput at x = (t_eval - t) / h, from the extra stages."""
        K = _stages(fun, t, y, h, self.extra, list(K))
        dy = ops.sub(y_new, y)
        F = [dy, ops.sub(ops.mul(h, K[0]), dy),
             ops.sub(ops.mul(2.0, dy), ops.mul(h, ops.add(K[-len(self.extra) - 1], K[0])))]
        F += list(ops.mul(h, np.dot(self.solver.D, np.stack(K))))
        x = x[None, :]
        out = 0.0
        for i, f in enumerate(reversed(F)):
            out = ops.mul(ops.add(out, f[:, None]), x if i % 2 == 0 else ops.sub(1.0, x))
        return ops.add(out, y[:, None])


def _initial_step(fun, t0, y0, t_bound, max_step, f0, direction, order, rtol, atol):
    """scipy's select_initial_step (common.py), its `if`s as np.where."""
    interval = np.abs(t_bound - t0)
    scale = atol + np.abs(y0) * rtol
    d0 = _norm(y0 / scale)
    d1 = _norm(f0 / scale)
    h0 = np.where((d0 < 1e-5) | (d1 < 1e-5), 1e-6, 0.01 * d0 / np.where(d1 == 0, 1.0, d1))
    h0 = _min(h0, interval)
    y1 = y0 + h0 * direction * f0
    f1 = fun(t0 + h0 * direction, y1)
    d2 = _norm((f1 - f0) / scale) / h0
    small = (d1 <= 1e-15) & (d2 <= 1e-15)
    h1 = np.where(small, _max(1e-6, h0 * 1e-3),
                  (0.01 / np.where(small, 1.0, _max(d1, d2))) ** (1.0 / (order + 1)))
    return _min(_min(_min(100 * h0, h1), interval), max_step)


_CONVERTED: list = []


def _run(fun, args: tuple, tfirst: bool, t_span, y0, t_eval, method: str, rtol, atol,
         max_step, first_step, loc):
    """The solution at t_eval (n, m) and nfev: the converted `_integrate` of fun(t, y, *args)
    (fun(y, t, *args) unless tfirst) by the coefficients of scipy's own class for `method`."""
    from scipy.integrate import _ivp
    from scipy.integrate._ivp import common

    from llgrad.runtime.numpy_api import CONVERSIONS

    from .convert.api import convert
    from .operators import converted_call
    if not _CONVERTED:
        _CONVERTED.append(convert(_integrate))
    asarray = CONVERSIONS[np.asarray]

    def rhs(t, y):  # scipy's fun_wrapped: the user's function, its result a float array
        return asarray(converted_call(fun, (t, y, *args) if tfirst else (y, t, *args), None),
                       dtype=np.float64)
    t0, tf = (ops.astype(t, np.float64) if is_value(t) else float(t) for t in t_span)
    t_eval = _times(asarray(t_eval), t0, tf, loc)
    y0 = asarray(y0)  # (complex values are refused there)
    if len(y0.shape) != 1:
        raise ValueError("`y0` must be 1-dimensional.")
    y0 = asarray(y0, dtype=np.float64)
    if not any(map(is_value, (rtol, atol))):  # (scipy's checks, where it makes them)
        rtol, atol = common.validate_tol(rtol, atol, y0.shape[0])
    if not is_value(max_step):
        common.validate_max_step(max_step)
    if first_step is not None and not any(map(is_value, (first_step, t0, tf))):
        common.validate_first_step(first_step, t0, tf)
    rk = (_DOP853 if method == "DOP853" else _RungeKutta)(getattr(_ivp, method))
    y, nfev = _CONVERTED[0](rhs, t0, tf, y0, t_eval, rk, rtol, atol, max_step, first_step, loc)
    return t_eval, y, nfev


def _times(t_eval, t0, tf, loc):
    """t_eval as a float array, checked as scipy checks it: while tracing when it and t_span
    are constants, else when the function runs."""
    if len(np.shape(t_eval)) != 1:
        raise ValueError("`t_eval` must be 1-dimensional.")
    if not any(map(is_value, (t_eval, t0, tf))):
        if t0 == tf:
            raise _refuse("solve_ivp over an empty interval (t_span[0] == t_span[1]) is not "
                          "supported on traced values", "give an interval of nonzero length")
        if np.any(t_eval < min(t0, tf)) or np.any(t_eval > max(t0, tf)):
            raise ValueError("Values in `t_eval` are not within `t_span`.")
        t_eval = np.asarray(t_eval, dtype=float)
        d = np.diff(t_eval)
        if tf > t0 and np.any(d <= 0) or tf < t0 and np.any(d >= 0):
            raise ValueError("Values in `t_eval` are not properly sorted.")
        return t_eval
    t_eval = ops.astype(t_eval, np.float64)
    lo, hi = ops.minimum(t0, tf), ops.maximum(t0, tf)
    d = ops.mul(ops.diff(t_eval), ops.sub(tf, t0))  # (the steps times the direction)
    for bad, exc, what in [
            (ops.eq(t0, tf), UnsupportedError, "solve_ivp over an empty interval (t_span[0] == "
             "t_span[1]) is not supported on traced values"),
            (stats.any(ops.logical_or(ops.lt(t_eval, lo), ops.gt(t_eval, hi))), ValueError,
             "Values in `t_eval` are not within `t_span`."),
            (stats.any(ops.le(d, 0.0)), ValueError, "Values in `t_eval` are not properly "
             "sorted.")]:
        bind(check_p, bad, exc=exc, args=(what, loc, None))
    return t_eval


_METHODS = ("RK45", "RK23", "DOP853")


def _refuse(what: str, fix: str) -> UnsupportedError:
    return UnsupportedError(what, loc=user_loc(3), fix=fix)


def solve_ivp(fun, t_span, y0, method="RK45", t_eval=None, dense_output=False, events=None,
              vectorized=False, args=None, **options):
    """scipy.integrate.solve_ivp on traced values, methods RK45, RK23 and DOP853, at t_eval:
    scipy's steps and values (Note [ODE solvers on traced values]); the result is scipy's
    OdeResult (t, y, nfev, status, success, message)."""
    from scipy.integrate._ivp.ivp import OdeResult
    fix = "use method='RK45' (or 'RK23', 'DOP853') with t_eval, and no dense_output, events or " \
        "vectorized"
    if method not in _METHODS:
        raise _refuse(f"solve_ivp(method={method!r}) is not supported on traced values (llgrad "
                      f"has the explicit Runge-Kutta methods {', '.join(_METHODS)})", fix)
    for name, given in (("dense_output", dense_output), ("events", events),
                        ("vectorized", vectorized)):
        if given:
            raise _refuse(f"solve_ivp({name}=...) is not supported on traced values", fix)
    if t_eval is None:
        raise _refuse("solve_ivp without t_eval is not supported on traced values (the number "
                      "of steps scipy returns is known only when it runs)",
                      "pass t_eval, the times at which you need the solution")
    extra = set(options) - {"rtol", "atol", "max_step", "first_step"}
    if extra:
        raise _refuse(f"solve_ivp({', '.join(sorted(extra))}=...) is not supported on traced "
                      f"values", "pass only rtol, atol, max_step and first_step as options")
    t, y, nfev = _run(fun, () if args is None else tuple(args), True, t_span, y0, t_eval,
                      method, options.get("rtol", 1e-3), options.get("atol", 1e-6),
                      options.get("max_step", np.inf), options.get("first_step"), user_loc(2))
    return OdeResult(t=t, y=y, sol=None, t_events=None, y_events=None, nfev=nfev, njev=0,
                     nlu=0, status=0, message="The solver successfully reached the end of the "
                     "integration interval.", success=True)


_ODEINT_TOL = 1.49012e-8


def odeint(func, y0, t, args=(), Dfun=None, col_deriv=0, full_output=0, ml=None, mu=None,
           rtol=None, atol=None, tcrit=None, h0=0.0, hmax=0.0, hmin=0.0, ixpr=0, mxstep=0,
           mxhnil=0, mxordn=12, mxords=5, printmessg=0, tfirst=False):
    """scipy.integrate.odeint on traced values: y at the times t, shape (len(t), len(y0)),
    by the RK45 solver of solve_ivp (not scipy's LSODA) to odeint's tolerances (1.49012e-8),
    so the values agree with scipy's to the tolerance, not to rounding; h0 is the first step
    and hmax the largest. LSODA's own options (Dfun, col_deriv, ml, mu, mxordn, mxords, ixpr,
    mxhnil, printmessg) change nothing here (Note [ODE solvers on traced values])."""
    fix = "call odeint without full_output, tcrit, hmin and mxstep"
    for name, given in (("full_output", full_output), ("tcrit", tcrit), ("hmin", hmin),
                        ("mxstep", mxstep)):
        if given is not None and np.any(given):
            raise _refuse(f"odeint({name}=...) is not supported on traced values", fix)
    if not is_value(t):
        t = np.asarray(t, dtype=float)
    if len(t.shape) != 1 or t.shape[0] < 2:
        raise _refuse("odeint on traced values needs a 1-D array of at least two times t",
                      "pass t with the initial time first and at least one more")
    args = tuple(args) if isinstance(args, (tuple, list)) else (args,)
    _, y, _ = _run(func, args, tfirst, (t[0], t[-1]), y0, t, "RK45",
                   _ODEINT_TOL if rtol is None else rtol, _ODEINT_TOL if atol is None else atol,
                   hmax if hmax else np.inf, h0 if h0 else None, user_loc(2))
    return ops.transpose(y)
