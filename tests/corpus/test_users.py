"""The drivers new users write around the programs of programs_users.py, run with llgrad's
derivatives: scipy.optimize.minimize with jac=llgrad.grad (L-BFGS-B with bounds and args,
BFGS, CG, value_and_grad with jac=True), least_squares with jac=llgrad.jacobian, and training
loops in the JAX-tutorial and HIPS-autograd style (llgrad.grad(loss)(params, ...) at every
step, Adam or SGD written by hand). Each is checked against the same driver with an
independent oracle (scipy's own finite differences, a closed form, a known optimum, or
central differences), and must stay on the staged path with no PerformanceWarning."""
from __future__ import annotations

import warnings

import numpy as np
import pytest
import scipy.optimize

import llgrad
from tests.corpus import programs_users as U
from tests.corpus.check import _finite_differences, _leaves, run
from tests.corpus.registry import Program


@pytest.fixture(autouse=True)
def _no_slow_paths():
    with warnings.catch_warnings():
        warnings.simplefilter("error", llgrad.PerformanceWarning)
        yield


def test_lbfgsb_with_bounds_and_args():
    data = np.random.default_rng(1).gamma(2.0, 1.5, 200)
    kw = dict(args=(data,), method="L-BFGS-B", bounds=[(1e-3, None), (1e-3, None)])
    fun = U.gamma_mle_neg_loglik
    ours = scipy.optimize.minimize(fun, np.array([1.0, 1.0]), jac=llgrad.grad(fun), **kw)
    theirs = scipy.optimize.minimize(fun, np.array([1.0, 1.0]), **kw)
    assert ours.success and ours.fun <= theirs.fun + 1e-9
    np.testing.assert_allclose(ours.x, theirs.x, rtol=1e-3)
    # the MLE's shape-scale product is the sample mean
    assert ours.x[0] * ours.x[1] == pytest.approx(np.mean(data), rel=1e-5)


def test_bfgs_on_a_dict_unpacked_from_the_vector():
    rng = np.random.default_rng(2)
    _, X, y = U._flat_dict_args(rng)
    res = scipy.optimize.minimize(U.flat_vector_to_dict_nll, np.zeros(5), args=(X, y),
                                  jac=llgrad.grad(U.flat_vector_to_dict_nll), method="BFGS",
                                  options={"gtol": 1e-9})
    A = np.column_stack([X, np.ones(len(y))])
    coef = np.linalg.lstsq(A, y, rcond=None)[0]
    sigma = np.sqrt(np.mean((A @ coef - y) ** 2))
    p = U.unpack_linear(res.x, 3)
    np.testing.assert_allclose(np.append(p["w"], p["b"]), coef, rtol=1e-6, atol=1e-8)
    assert np.exp(p["log_sigma"]) == pytest.approx(sigma, rel=1e-6)


def test_cg_with_value_and_grad_and_jac_true():
    """HIPS's gaussian_process.py: minimize(value_and_grad(objective), x0, jac=True,
    method="CG") with objective = lambda params: -log_marginal_likelihood(params, X, y)."""
    _, X, y = U._hips_gp_args(np.random.default_rng(3))
    objective = lambda params: -U.gp_log_marginal_likelihood(params, X, y)  # noqa: E731
    x0 = 0.1 * np.random.default_rng(0).standard_normal(U.num_gp_params)
    ours = scipy.optimize.minimize(llgrad.value_and_grad(objective), x0, jac=True, method="CG")
    theirs = scipy.optimize.minimize(objective, x0, method="CG")
    assert ours.fun <= theirs.fun + 1e-6
    assert np.linalg.norm(llgrad.grad(objective)(ours.x)) < 1e-4


def test_thomson_problem_reaches_the_octahedron():
    """Six electrons on a sphere end on an octahedron (energy 9.985281374...)."""
    rng = np.random.default_rng(4)
    theta, phi = U._thomson_args(rng)
    energy = lambda z: U.thomson_energy_spherical(z[:6], z[6:])  # noqa: E731
    res = scipy.optimize.minimize(energy, np.concatenate([theta, phi]),
                                  jac=llgrad.grad(energy), method="CG", options={"gtol": 1e-8})
    assert res.fun == pytest.approx(9.985281374, abs=1e-6)


def test_least_squares_with_llgrad_jacobian():
    p0, s, v = U._mm_args(np.random.default_rng(5))
    jac = llgrad.jacobian(U.michaelis_menten_residuals)
    J = jac(p0, s, v)
    fd = np.stack([(U.michaelis_menten_residuals(p0 + e, s, v)
                    - U.michaelis_menten_residuals(p0 - e, s, v)) / 2e-6
                   for e in 1e-6 * np.eye(2)], axis=1)
    np.testing.assert_allclose(J, fd, rtol=1e-6, atol=1e-9)
    ours = scipy.optimize.least_squares(U.michaelis_menten_residuals, p0, jac=jac, args=(s, v))
    theirs = scipy.optimize.least_squares(U.michaelis_menten_residuals, p0, args=(s, v))
    np.testing.assert_allclose(ours.x, theirs.x, rtol=1e-5)


def _adam(grad_fn, params, batches, steps, lr=0.01, b1=0.9, b2=0.999, eps=1e-8):
    """Adam as the JAX tutorials write it, over a list of dicts of arrays."""
    m = [{k: np.zeros_like(v) for k, v in layer.items()} for layer in params]
    s = [{k: np.zeros_like(v) for k, v in layer.items()} for layer in params]
    for t in range(1, steps + 1):
        xb, yb = batches[t % len(batches)]
        grads = grad_fn(params, xb, yb)
        new = []
        for layer, g, ml, sl in zip(params, grads, m, s):
            for k in layer:
                ml[k] = b1 * ml[k] + (1 - b1) * g[k]
                sl[k] = b2 * sl[k] + (1 - b2) * g[k] ** 2
            new.append({k: layer[k] - lr * (ml[k] / (1 - b1 ** t))
                        / (np.sqrt(sl[k] / (1 - b2 ** t)) + eps) for k in layer})
        params = new
    return params


def test_adam_loop_on_minibatches_matches_central_differences():
    rng = np.random.default_rng(6)
    params, x, y = U._jax_mlp_args(rng)
    batches = [(x[i:i + 4], y[i:i + 4]) for i in range(0, 12, 4)]

    def fd_grad(params, xb, yb):
        leaves = _finite_differences(U.jax_mlp_cross_entropy, [params, xb, yb], (0,), 1e-6)[0]
        it = iter(leaves)
        return [{k: next(it) for k in sorted(layer)} for layer in params]

    ours = _adam(lambda p, xb, yb: llgrad.grad(U.jax_mlp_cross_entropy)(p, xb, yb), params,
                 batches, 6)
    theirs = _adam(fd_grad, params, batches, 6)
    for a, b in zip(_leaves(ours), _leaves(theirs)):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-7)


def test_sgd_on_a_namedtuple_with_a_float_bias():
    params, x, y = U._nt_args(np.random.default_rng(7))
    grad = llgrad.grad(U.namedtuple_linear_regression)
    for _ in range(200):
        grads = grad(params, x, y)
        assert isinstance(grads, U.Params) and isinstance(grads.b, float)
        params = U.Params(*[p - 0.1 * g for p, g in zip(params, grads)])
    A = np.column_stack([x, np.ones(len(y))])
    coef = np.linalg.lstsq(A, y, rcond=None)[0]
    np.testing.assert_allclose(np.append(params.w, params.b), coef, rtol=1e-4)


def test_value_and_grad_with_aux_metrics():
    W, X, y = U._aux_args(np.random.default_rng(8))
    (loss, aux), g = llgrad.value_and_grad(U.softmax_loss_and_accuracy, has_aux=True)(W, X, y)
    want_loss, want_aux = U.softmax_loss_and_accuracy(W, X, y)
    assert loss == pytest.approx(want_loss, rel=1e-12)
    assert aux["accuracy"] == want_aux["accuracy"]
    assert aux["mean logit"] == pytest.approx(want_aux["mean logit"], rel=1e-12)
    np.testing.assert_allclose(g, llgrad.grad(U.softmax_classifier_with_accuracy)(W, X, y))


def test_hips_logistic_regression_descent_loop():
    """examples/logistic_regression.py's loop, `weights -= training_gradient_fun(weights) *
    0.01`, the data held by the loss's closure; against the gradient written by hand."""
    _, inputs, targets = U._hips_logreg_args(np.random.default_rng(9))

    def training_loss(weights):
        return U.hips_logistic_training_loss(weights, inputs, targets)

    def by_hand(weights):
        preds = U.hips_sigmoid(inputs @ weights)
        dp = -(2 * targets - 1) / (preds * targets + (1 - preds) * (1 - targets))
        return inputs.T @ (dp * 0.5 * (1 - np.tanh(inputs @ weights) ** 2))

    training_gradient_fun = llgrad.grad(training_loss)
    weights, check = np.zeros(3), np.zeros(3)
    for _ in range(100):
        weights -= training_gradient_fun(weights) * 0.01
        check -= by_hand(check) * 0.01
    np.testing.assert_allclose(weights, check, rtol=1e-10)


def test_dict_key_set_in_one_branch_is_right_on_the_dynamic_path():
    """programs_users.metrics_dict_filled_in_branches takes the dynamic path (whether the
    dict has the key depends on the traced condition), with right values and gradients on
    both sides of the condition and a warning naming the `if`."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", llgrad.PerformanceWarning)
        for seed in (0, 3):
            r = run(Program(U.metrics_dict_filled_in_branches, U._branch_dict_args), seed)
            assert r["path"].startswith("dynamic (terms['penalty'] is set only in the true "
                                        "branch of the traced `if`"), r["path"]
            assert "set terms['penalty'] on both paths" in r["slow paths"][0]
