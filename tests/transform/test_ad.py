"""Reverse mode on the IR: gradients from interp of the joint function vs central finite
differences (float64) and vs the eager runtime; per primitive, composite, control flow."""
from __future__ import annotations

import numpy as np
import pytest

from llgrad.runtime import ops
from llgrad.runtime.errors import ShapeError
from llgrad.runtime.ops import elementwise as ew, index as ix, linalg, reduce as rd, shape as sh
from llgrad.runtime.prim import REGISTRY
from llgrad.transform import ad, control, interp
from llgrad.transform.loop_facts import tape_stats
from llgrad.transform.passes.pipeline import optimize
from llgrad.transform.verify import verify

from cases import CASES
from helpers import build, eager_value_and_grad, fd_grad
from cf_builders import cond_in_loop, loop_in_cond, nested, recurrence, rnn  # noqa: E402,F401

R = np.random.default_rng(1)
POS = R.uniform(0.5, 1.5, size=4)
X, Y = R.normal(size=4), R.normal(size=4)
IDX = np.array([0, 2, 2])
U = lambda p, x=X: (lambda a: p.bind(a), [x])  # noqa: E731
B = lambda p, x=X, y=Y: (lambda a, b: p.bind(a, b), [x, y])  # noqa: E731

# One sample per differentiable primitive: (call on values, float64 arguments (all wrt)).
SAMPLES = {
    "add": B(ew.add_p), "sub": B(ew.sub_p), "mul": B(ew.mul_p), "div": B(ew.div_p),
    "pow": B(ew.pow_p, POS), "maximum": B(ew.maximum_p), "minimum": B(ew.minimum_p),
    "neg": U(ew.neg_p), "exp": U(ew.exp_p), "log": U(ew.log_p, POS), "log1p": U(ew.log1p_p, POS),
    "expm1": U(ew.expm1_p), "sin": U(ew.sin_p), "cos": U(ew.cos_p), "tan": U(ew.tan_p, X / 4),
    "tanh": U(ew.tanh_p), "sqrt": U(ew.sqrt_p, POS), "abs": U(ew.abs_p), "sign": U(ew.sign_p),
    "sigmoid": U(ew.sigmoid_p), "relu": U(ew.relu_p), "copy": U(ew.copy_p),
    "floor": U(ew.floor_p, X + 0.5), "remainder": B(ew.remainder_p, X * 3, POS),
    "clip": (lambda a: ew.clip_p.bind(a, np.full(4, -0.5), np.full(4, 0.5)), [X]),
    "where": (lambda a, b: ew.where_p.bind(X > 0, a, b), [X, Y]),
    "astype": (lambda a: ew.astype_p.bind(a, dtype=np.dtype(np.float64)), [X]),  # f32: below
    "getitem": (lambda a: ix.getitem_p.bind(a, IDX, key=(("a", 0),)), [X]),
    "scatter_add": (lambda a: ix.scatter_add_p.bind(a, IDX, key=(("a", 0),), shape=(5,)),
                    [X[:3]]),
    "index_put": (lambda a, b: ix.index_put_p.bind(a, b, IDX[:2], key=(("a", 0),)),
                  [X, Y[:2]]),
    "reshape": (lambda a: sh.reshape_p.bind(a, shape=(2, 2)), [X]),
    "transpose": (lambda a: sh.transpose_p.bind(a, perm=(1, 0)), [X.reshape(2, 2)]),
    "broadcast_to": (lambda a: sh.broadcast_to_p.bind(a, shape=(3, 4)), [X]),
    "concatenate": (lambda a, b: sh.concatenate_p.bind(a, b, axis=0), [X, Y[:3]]),
    "matmul": (lambda a, b: linalg.matmul_p.bind(a, b), [X.reshape(2, 2), R.normal(size=(2, 3))]),
    "reduce_sum": (lambda a: rd.reduce_sum_p.bind(a, axes=(1,), keepdims=False),
                   [R.normal(size=(2, 3))]),
    "reduce_max": (lambda a: rd.reduce_max_p.bind(a, axes=(0,), keepdims=True),
                   [R.normal(size=(2, 3))]),
    "reduce_min": (lambda a: rd.reduce_min_p.bind(a, axes=(1,), keepdims=False),
                   [R.normal(size=(2, 3))]),
    "reduce_prod": (lambda a: rd.reduce_prod_p.bind(a, axes=(0, 1), keepdims=False),
                    [R.normal(size=(2, 3))]),
}
# scans (issue 11); the other new primitives are composites and reach the IR decomposed
from llgrad.runtime.ops import scan as sc  # noqa: E402
SAMPLES.update({
    "cumsum": (lambda a: sc.cumsum_p.bind(a, axis=1, reverse=False), [R.normal(size=(2, 3))]),
    "linrec": (lambda a, b: sc.linrec_p.bind(a, b, axis=0, reverse=True),
               [R.normal(size=(4, 2)), R.normal(size=(4, 2))]),
    "iir": (lambda v, a: sc.iir_p.bind(v, a, axis=0, reverse=False),
            [R.normal(size=(5, 2)), 0.4 * R.normal(size=2)]),
})
# numpy's elementwise math and scipy.special (issue 11)
from llgrad.runtime.ops import special as sp, ufuncs as uf  # noqa: E402

UNIT, GAMMA = X / 4, np.array([0.3, 1.7, -0.4, 3.2])  # in (-1, 1); away from gamma's poles
SAMPLES.update({
    "sinh": U(uf.sinh_p), "cosh": U(uf.cosh_p), "arcsin": U(uf.arcsin_p, UNIT),
    "arccos": U(uf.arccos_p, UNIT), "arctan": U(uf.arctan_p), "arcsinh": U(uf.arcsinh_p),
    "arccosh": U(uf.arccosh_p, POS + 1), "arctanh": U(uf.arctanh_p, UNIT),
    "arctan2": B(uf.arctan2_p), "exp2": U(uf.exp2_p), "log2": U(uf.log2_p, POS),
    "log10": U(uf.log10_p, POS), "cbrt": U(uf.cbrt_p), "logaddexp": B(uf.logaddexp_p),
    "logaddexp2": B(uf.logaddexp2_p), "hypot": B(uf.hypot_p), "copysign": B(uf.copysign_p),
    "fmod": B(uf.fmod_p, X * 3, POS), "ceil": U(uf.ceil_p, X + 0.5),
    "trunc": U(uf.trunc_p, X + 0.5), "rint": U(uf.rint_p, X + 0.25), "erf": U(sp.erf_p),
    "erfc": U(sp.erfc_p), "lgamma": U(sp.lgamma_p, GAMMA), "digamma": U(sp.digamma_p, GAMMA),
    "logit": U(sp.logit_p, POS / 2), "ndtr": U(sp.ndtr_p), "xlogy": B(sp.xlogy_p, X, POS),
    "gamma": U(sp.gamma_p, GAMMA), "log_ndtr": U(sp.log_ndtr_p),
    "erfinv": U(sp.erfinv_p, X / 3),
    "xlog1py": B(sp.xlog1py_p, X, POS),
})
# scipy.special's C functions (runtime/ops/special_scipy.py): order and shape parameters are
# constants (no derivative), the last argument is differentiated
from llgrad.runtime.ops import special_scipy as ss  # noqa: E402

SAMPLES.update({
    "i0": U(ss.i0_p), "i0e": U(ss.i0e_p), "i1": U(ss.i1_p), "i1e": U(ss.i1e_p),
    "ndtri": U(ss.ndtri_p, POS / 2), "erfcx": U(ss.erfcx_p), "dawsn": U(ss.dawsn_p),
    "exprel": U(ss.exprel_p), "binom": B(ss.binom_p, POS + 3, POS),
    **{p.name: (lambda a, p=p: p.bind(np.full(4, 1.5), a), [POS]) for p in (
        ss.gammainc_p, ss.gammaincc_p, ss.kv_p, ss.kve_p, ss.jv_p)},
    "betainc": (lambda a: ss.betainc_p.bind(np.full(4, 2.0), np.full(4, 3.0), a), [POS / 2]),
})
# linear algebra (issue 11): inputs made invertible / positive definite / with spread-out
# eigenvalues by the sample itself; multi-result primitives return all results, flattened
from llgrad.runtime.ops import linalg_solve as ls, linalg_spectral as lsp  # noqa: E402
I3, SPREAD = np.eye(3) * 3, np.diag([0.0, 2.0, 4.0])


def _flat(*ys):
    return ops.concatenate([ops.reshape(y, (-1,)) for y in ys])


def _sym(a):
    return ops.add(ops.mul(ops.add(a, ops.swapaxes(a, 0, 1)), 0.5), SPREAD)


SAMPLES.update({
    "cholesky": (lambda a: ls.cholesky_p.bind(ops.add(ops.matmul(a, ops.swapaxes(a, 0, 1)), I3)),
                 [R.normal(size=(3, 3))]),
    "triangular_solve": (lambda a, b: ls.triangular_solve_p.bind(
        ops.add(a, I3), b, lower=False, trans=True, unit_diagonal=False),
        [R.normal(size=(3, 3)), R.normal(size=(3, 2))]),
    "solve": (lambda a, b: ls.solve_p.bind(ops.add(a, I3), b),
              [R.normal(size=(3, 3)), R.normal(size=(3, 2))]),
    "inv": (lambda a: ls.inv_p.bind(ops.add(a, I3)), [R.normal(size=(3, 3))]),
    "slogdet": (lambda a: _flat(*ls.slogdet_p.bind(ops.add(a, I3))), [R.normal(size=(3, 3))]),
    "eigh": (lambda a: _flat(*lsp.eigh_p.bind(_sym(a), lower=True)), [R.normal(size=(3, 3))]),
    "svd": (lambda a: _flat(*lsp.svd_p.bind(ops.add(a, SPREAD[:, :2] * 2), full_matrices=False)),
            [R.normal(size=(3, 2)) * 0.3]),
    "qr": (lambda a: _flat(*lsp.qr_p.bind(a, complete=False)), [R.normal(size=(3, 2))]),
})
# windows of run-time length (issue 12): start 1, length 2, padded to 3 (the last entry is 0)
from llgrad.runtime.ops import window as wd  # noqa: E402
SAMPLES.update({
    "dynamic_window": (lambda a: wd.dynamic_window_p.bind(a, np.int64(1), np.int64(2), axis=0,
                                                          size=3, stride=1), [X]),
    "window_update": (lambda a, b: wd.window_update_p.bind(a, b, np.int64(3), np.int64(2),
                                                           axis=0, stride=-1), [X, Y[:3]]),
})

# activations (issue 15); the other nn primitives are composites and reach the IR decomposed
from llgrad.runtime.ops import activation as act  # noqa: E402

SAMPLES.update({
    "gelu": (lambda a: act.gelu_p.bind(a, approximate="none"), [X]),
    "silu": U(act.silu_p),
    "elu": (lambda a: act.elu_p.bind(a, alpha=0.7, scale=1.2, input_scale=0.5), [X]),
    "softplus": (lambda a: act.softplus_p.bind(a, beta=2.0, threshold=1.0), [X]),
    "hardtanh": (lambda a: act.hardtanh_p.bind(a, min_val=-0.5, max_val=0.7), [X]),
    "leaky_relu": (lambda a: act.leaky_relu_p.bind(a, negative_slope=0.1), [X]),
})
STRUCTURAL = {"control", "const", "tape"}


def _scalarise(call):
    """sum(call(*xs) * W) for fixed weights W, so every output element matters differently."""
    def f(*xs):
        y = call(*xs)
        w = np.random.default_rng(7).normal(size=y.shape).astype(y._np_dtype)
        return ops.sum(ops.mul(y, w))
    return f



def test_every_differentiable_primitive_has_a_sample():
    missing = sorted(n for n, p in REGISTRY.items()  # composites reach the IR decomposed
                     if not p.nondiff and p.family not in STRUCTURAL and n not in SAMPLES
                     and p.decompose is None and n != "trigamma")  # its VJP: test_special

    assert not missing, f"add AD samples for {missing}"


def _check(f, args, rtol=1e-6, atol=1e-8, eager=True):
    wrt = list(range(len(args)))
    fn = verify(build(f, *args))
    joint = verify(ad.grad_function(fn, wrt))
    outs = interp.run(joint, *args)
    grads = outs[len(fn.outputs):]
    for g, ref in zip(grads, fd_grad(lambda *a: interp.run(fn, *a)[0], args, wrt)):
        np.testing.assert_allclose(g, ref, rtol=rtol, atol=atol)
    if eager:
        value, eg = eager_value_and_grad(f, args, wrt)
        np.testing.assert_allclose(outs[0], value, rtol=1e-12)
        for g, ref in zip(grads, eg):
            np.testing.assert_allclose(g, ref, rtol=1e-12, atol=1e-14)
    opt = interp.run(verify(optimize(joint)), *args)  # the optimised joint function agrees
    for a, b in zip(opt, outs):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-14)
    return joint


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_primitive_gradient(name):
    call, args = SAMPLES[name]
    tol = (2e-3, 1e-4) if name == "astype" else (1e-6, 1e-8)
    _check(_scalarise(call), args, *tol)


@pytest.mark.parametrize("name", sorted(CASES))
def test_composite_gradient(name, rng):
    f, make = CASES[name]
    _check(f, make(rng))


# ---- control flow ------------------------------------------------------------------------------








def grow(x):
    s, n = control.while_loop(lambda s, n: s < 10.0, lambda s, n: (s * 1.5 + np.sum(x ** 2), n + 1),
                              np.sum(x), np.int64(0))
    return s * 2.0




def flag_in_while(x):
    # the carried flag and the swapped pair are yielded by the inner cond only (never read by
    # another op of the body): they must still be on the tape for the reverse recomputation
    def body(i, s, t, done):
        s2 = s + x[i] ** 2 * t
        done2, a, b = control.cond(s2 > 1.0, lambda a, b: (np.bool_(True), b, a),
                                   lambda a, b: (done, a, b), s2, t)
        return i + 1, a, b, done2
    out = control.while_loop(lambda i, s, t, done: (i < x.shape[0]) & ~done, body,
                             np.int64(0), np.float64(0.0), np.float64(1.0), np.bool_(False))
    return out[1] * 2.0 + out[2]


def carried_yielded_by_inner_loop(x):
    def body(i, s, keep):
        s2 = s * 0.5 + np.sin(x[i])
        keep2, = control.for_loop(0, 2, 1, lambda j, k: keep, s2)  # yields `keep` (enclosing)
        return s2, keep2
    s, keep = control.for_loop(0, x.shape[0], 1, body, np.float64(0.0), x[0] * 3.0)
    return s + keep


@pytest.mark.parametrize("f,args", [
    (flag_in_while, [np.array([0.3, 0.5, 0.7, 0.2])]),
    (carried_yielded_by_inner_loop, [np.array([0.3, 0.5, 0.7])]),
    (recurrence, [np.linspace(-1, 1, 8)]),
    (nested, [R.normal(size=3), R.normal(size=4)]),
    (cond_in_loop, [R.normal(size=7)]),
    (rnn, [R.normal(size=(3, 3)) * 0.5, R.normal(size=(5, 3))]),
    (grow, [np.array([0.3, 0.4])]),
    (loop_in_cond, [np.array([0.5, 0.2, 0.1])]),
    (loop_in_cond, [np.array([-0.5, 0.2, 0.1])]),
], ids=["flag_in_while", "yield_in_inner_loop", "recurrence", "nested", "cond_in_loop", "rnn", "while", "loop_in_cond+",
        "loop_in_cond-"])
def test_control_flow_gradient(f, args):
    _check(f, args, eager=False)


def test_recurrence_matches_eager_python_loop():
    x = np.linspace(-1, 1, 8)

    def plain(x):
        s = 0.0
        for i in range(1, x.shape[0]):
            s = 0.9 * s + np.sin(x[i]) * x[i - 1]
        return s

    joint = ad.grad_function(build(recurrence, x), [0])
    np.testing.assert_allclose(interp.run(joint, x)[1], eager_value_and_grad(plain, [x], [0])[1][0],
                               rtol=1e-12)


def test_dynamic_trip_count_grows_the_tape():
    def f(x, n):
        return control.for_loop(0, n, 1, lambda i, s: s * x[i] + 1.0, np.float64(1.0))[0]
    x = R.normal(size=5)
    joint = verify(ad.grad_function(build(f, x, np.int64(4)), [0]))
    tapes = [op for op in joint.walk() if op.name == "tape_new"]
    assert tapes and all(op.params["rows"] is None for op in tapes)
    assert all(t["rows"] == t["bytes"] == "grows" for t in joint.meta["tapes"])
    assert tape_stats(joint)["tape bytes (static)"] == 0
    for n in (0, 2, 4):
        ref = fd_grad(lambda x: f_plain(x, n), [x], [0])[0]
        np.testing.assert_allclose(interp.run(joint, x, np.int64(n))[1], ref, rtol=1e-6,
                                   atol=1e-9)


def overwrite_for(x, n):
    return control.for_loop(0, n, 1, lambda i, c: np.sin(x[i]), np.sum(x) * 0.1)[0]


def overwrite_while(x, n):
    return control.while_loop(lambda i, c: i < n, lambda i, c: (i + 1, np.sin(x[i])),
                              np.int64(0), np.sum(x) * 0.1)[1]


def half_overwrite_for(x, n):  # one carried value overwritten, one accumulated
    a, c = control.for_loop(0, n, 1, lambda i, a, c: (a * 0.5 + c, np.cos(x[i])),
                            x[0] ** 2, np.sum(x) * 0.1)
    return a + c


@pytest.mark.parametrize("f", [overwrite_for, overwrite_while, half_overwrite_for])
@pytest.mark.parametrize("n", [0, 1, 3])
def test_loop_output_cotangent_reaches_init_only_on_zero_trips(f, n):
    """An output's cotangent flows to the init when the loop runs zero times, else through the
    body: a carried value the body never reads gets a gradient from init only when n == 0."""
    x = np.array([0.1, 0.2, 0.3, 0.4])
    joint = verify(ad.grad_function(build(f, x, np.int64(1)), [0]))
    ref = fd_grad(lambda x: interp.run(build(f, x, np.int64(n)), x, np.int64(n))[0], [x], [0])[0]
    for g in (joint, verify(optimize(joint))):
        np.testing.assert_allclose(interp.run(g, x, np.int64(n))[1], ref, rtol=1e-7, atol=1e-10)


def f_plain(x, n):
    s = 1.0
    for i in range(n):
        s = s * x[i] + 1.0
    return s


def test_tape_is_o_iterations_times_carried():
    def f(x):
        return control.for_loop(0, 1000, 1, lambda i, s, t: (s * 0.5 + t * x[0], t * 0.9),
                                np.float64(0.0), np.float64(1.0))[0]
    joint = ad.grad_function(build(f, np.ones(3)), [0])
    tapes = [op for op in joint.walk() if op.name == "tape_new"]
    assert sorted(op.params["rows"] for op in tapes) == [1000, 1000]
    assert all(op.params["shape"] == () for op in tapes)
    assert joint.meta["tapes"] == [{"row": "f64[]", "rows": 1000, "row bytes": 8,
                                    "bytes": 8000, "in loop": False}] * 2
    # after optimisation only what the reverse sweep reads is stored: t, not s
    opt = optimize(joint)
    assert [op.params["rows"] for op in opt.walk() if op.name == "tape_new"] == [1000]
    assert tape_stats(opt) == {"tapes": 1, "tape bytes (static)": 8000}
    ref = fd_grad(lambda x: interp.run(build(f, x), x)[0], [np.ones(3)], [0])[0]
    np.testing.assert_allclose(interp.run(opt, np.ones(3))[1], ref, rtol=1e-6)


def test_activity_analysis_skips_inactive_ops():
    def f(x, y):
        return np.sum(np.exp(x)) + np.sum(np.sin(y))
    args = [X, Y]
    joint = ad.grad_function(build(f, *args), [0])
    names = [op.name for op in joint.walk()]
    assert "cos" not in names and names.count("exp") == 1


def test_no_path_and_integer_params_get_zeros():
    def f(x, y, n):
        return np.sum(x * 2.0)
    args = [X, Y, np.int64(3)]
    outs = interp.run(ad.grad_function(build(f, *args), [0, 1, 2]), *args)
    np.testing.assert_array_equal(outs[1], np.full(4, 2.0))
    np.testing.assert_array_equal(outs[2], np.zeros(4))
    assert outs[3] == 0 and outs[3].dtype == np.int64


def test_gradient_reduced_to_broadcast_operand_and_cast():
    def f(x, w):  # x f32 broadcast against w f64 rows
        return np.sum(ops.astype(x, np.float64) * w)
    args = [X.astype(np.float32), R.normal(size=(3, 4))]
    outs = interp.run(ad.grad_function(build(f, *args), [0]), *args)
    assert outs[1].dtype == np.float32 and outs[1].shape == (4,)
    np.testing.assert_allclose(outs[1], args[1].sum(0), rtol=1e-6)


def test_output_must_be_a_float_scalar():
    with pytest.raises(ShapeError, match=r"must be a float scalar, got f64\[4\]"):
        ad.grad_function(build(lambda x: x * 2.0, X), [0])
    with pytest.raises(ShapeError, match=r"got i64\[\]"):
        ad.grad_function(build(lambda n: n + 1, np.int64(1)), [0])


def test_joint_function_layout():
    fn = build(CASES["elementwise"][0], X)
    joint = ad.grad_function(fn, [0], name="g")
    assert joint.name == "g" and len(joint.outputs) == 2
    n_fwd = len(fn.body.ops)
    assert [op.name for op in joint.body.ops[:n_fwd]] == [op.name for op in fn.body.ops]
    assert joint.outputs[1].name == "ct_x"


# ---- store-vs-recompute policy of loop tapes (Note [Loop tapes]) ---------------------------------
def _reverse_loop(joint):
    """The reverse sweep's for_loop: the last top-level for_loop of the joint function."""
    return [op for op in joint.body.ops if op.name == "for_loop"][-1]


def _names(op):
    return [o.name for o in op.regions[-1].walk()]


def f_sin_plain(x):
    s = x[0] * 0.0
    for i in range(1, x.shape[0]):
        s = 0.9 * s + np.sin(x[i]) * x[i - 1]
    return s


def test_reverse_sweep_reads_expensive_values_and_residuals():
    """s = 0.9 s + sin(x[i]) x[i-1]: the forward tapes sin(x[i]) and cos(x[i]) (sin's rule run
    in the forward up to the cotangent), the reverse sweep computes neither; values unchanged."""
    def f(x):
        return control.for_loop(1, x.shape[0], 1,
                                lambda i, s: 0.9 * s + np.sin(x[i]) * x[i - 1], x[0] * 0.0)[0]
    x = R.normal(size=7)
    joint = verify(ad.grad_function(build(f, x), [0]))
    opt = verify(optimize(joint))
    want = eager_value_and_grad(f_sin_plain, [x], [0])[1][0]
    for g in (joint, opt):
        rev = _reverse_loop(g)
        assert "sin" not in _names(rev) and "cos" not in _names(rev)
        np.testing.assert_allclose(interp.run(g, x)[1], want, rtol=1e-13)
    assert tape_stats(opt) == {"tapes": 2, "tape bytes (static)": 2 * 6 * 8}


def test_reverse_sweep_reads_next_carried_value():
    """h = tanh(h @ W + x[t]): tanh's rule reads its output, the next iteration's entry state,
    read from row j+1 of h's tape (one more row: the exit state); no tanh or forward matmul is
    recomputed in the reverse sweep."""
    def f(W, x):
        h = control.for_loop(0, x.shape[0], 1, lambda t, h: np.tanh(h @ W + x[t]),
                             np.zeros((2, 3)))[0]
        return np.sum(h * h)
    W, x = R.normal(size=(3, 3)) * 0.5, R.normal(size=(4, 2, 3))
    joint = verify(ad.grad_function(build(f, W, x), [0, 1]))
    opt = verify(optimize(joint))
    rev = _reverse_loop(opt)
    assert "tanh" not in _names(rev)
    assert _names(rev).count("matmul") == 2  # the adjoint's: g @ W.T and h.T @ g
    assert any(t["rows"] == 5 for t in opt.meta.get("tapes", [])) or \
        any(op.params["rows"] == 5 for op in opt.walk() if op.name == "tape_new")
    def plain(W, x):
        h = np.zeros((2, 3))
        for t in range(x.shape[0]):
            h = np.tanh(h @ W + x[t])
        return np.sum(h * h)
    want = eager_value_and_grad(plain, [W, x], [0, 1])[1]
    for g in (joint, opt):
        for got, w in zip(interp.run(g, W, x)[1:], want):
            np.testing.assert_allclose(got, w, rtol=1e-13)


def test_next_carried_value_in_while_loop():
    """A while loop's exit state is the extra row; Newton iterations read x' from it."""
    def f(a):
        x, fx, k = control.while_loop(
            lambda x, fx, k: (np.abs(fx) > 1e-12) & (k < 50),
            lambda x, fx, k: (x - fx / (3.0 * x * x + a), None, k + 1)[:1] + (
                (x - fx / (3.0 * x * x + a)) ** 3 + a * (x - fx / (3.0 * x * x + a)) - 2.0,
                k + 1),
            a * 0.0 + 1.0, 1.0 + a - 2.0, np.int64(0))
        return x * x
    a = np.float64(0.7)
    joint = verify(ad.grad_function(build(f, a), [0]))
    ref = fd_grad(lambda a: interp.run(build(f, a), a)[0], [a], [0])[0]
    for g in (joint, verify(optimize(joint))):
        np.testing.assert_allclose(interp.run(g, a)[1], ref, rtol=1e-6)
