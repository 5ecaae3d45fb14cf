"""Corpus programs (see tests/corpus/programs.py) written as new users write them: HIPS
autograd's examples ported by swapping autograd.numpy for numpy (closures returned by
make_*_funs, a generator unpacking layers, lists of (W, b) tuples, dicts with spaced keys),
objectives handed to scipy.optimize with parameters packed by hand, JAX-tutorial models
(lists of dicts, namedtuples, nested dicts), and numerical recipes from textbooks (Newton
with a Jacobian built column by column, quadrature, splines by the Thomas algorithm, Kalman
smoothing, Viterbi, finite elements, Levenberg-Marquardt, Clenshaw, divided differences).
tests/corpus/test_users.py runs the drivers those users write around them (minimize with
jac=llgrad.grad, least_squares with llgrad.jacobian, training loops with Adam by hand)."""
from __future__ import annotations

import itertools
import math
from collections import namedtuple
from dataclasses import dataclass

import numpy as np
import scipy.linalg
import scipy.special
from scipy.special import logsumexp
from scipy.stats import multivariate_normal as mvn

from tests.corpus.registry import program


# ---- HIPS autograd's examples ----------------------------------------------------------------
def init_random_params(scale, layer_sizes, rs=None):
    """A list of (weights, biases) tuples, one for each layer (examples/neural_net.py)."""
    rs = rs if rs is not None else np.random.RandomState(0)
    return [(scale * rs.randn(m, n), scale * rs.randn(n))
            for m, n in itertools.pairwise(layer_sizes)]


def neural_net_predict(params, inputs):
    for W, b in params:
        outputs = np.dot(inputs, W) + b
        inputs = np.tanh(outputs)
    return outputs - logsumexp(outputs, axis=1, keepdims=True)


def l2_norm(params):
    flattened = np.concatenate([np.ravel(p) for layer in params for p in layer])
    return np.dot(flattened, flattened)


def _hips_nn_args(rng):
    params = init_random_params(0.1, [6, 8, 5, 3], rs=np.random.RandomState(0))
    inputs = rng.standard_normal((16, 6))
    targets = np.eye(3)[rng.integers(0, 3, 16)]
    return params, inputs, targets


@program(_hips_nn_args)
def hips_neural_net_objective(params, inputs, targets, L2_reg=1.0):
    """Negative log posterior of an MLP classifier, params a list of (W, b) tuples."""
    log_prior = -L2_reg * l2_norm(params)
    log_lik = np.sum(neural_net_predict(params, inputs) * targets)
    return -(log_prior + log_lik)


def make_gp_funs(cov_func, num_cov_params):
    """examples/gaussian_process.py: closures over the covariance function."""
    def unpack_kernel_params(params):
        mean = params[0]
        cov_params = params[2:]
        noise_scale = np.exp(params[1]) + 0.0001
        return mean, cov_params, noise_scale

    def log_marginal_likelihood(params, x, y):
        mean, cov_params, noise_scale = unpack_kernel_params(params)
        cov_y_y = cov_func(cov_params, x, x) + noise_scale * np.eye(len(y))
        prior_mean = mean * np.ones(len(y))
        return mvn.logpdf(y, prior_mean, cov_y_y)

    return num_cov_params + 2, log_marginal_likelihood


def rbf_covariance(kernel_params, x, xp):
    output_scale = np.exp(kernel_params[0])
    lengthscales = np.exp(kernel_params[1:])
    diffs = np.expand_dims(x / lengthscales, 1) - np.expand_dims(xp / lengthscales, 0)
    return output_scale * np.exp(-0.5 * np.sum(diffs**2, axis=2))


num_gp_params, gp_log_marginal_likelihood = make_gp_funs(rbf_covariance, num_cov_params=2)


def _hips_gp_args(rng):
    inputs = np.concatenate([np.linspace(0, 3, num=6), np.linspace(6, 8, num=6)])
    targets = (np.cos(inputs) + rng.standard_normal(12) * 0.1) / 2.0
    inputs = ((inputs - 4.0) / 2.0).reshape((12, 1))
    return 0.1 * rng.standard_normal(num_gp_params), inputs, targets


@program(_hips_gp_args, fd_tol=(1e-5, 1e-6))
def hips_gp_objective(params, X, y):
    """-log marginal likelihood through scipy.stats.multivariate_normal.logpdf."""
    return -gp_log_marginal_likelihood(params, X, y)


def make_nn_funs(layer_sizes, L2_reg, noise_variance, nonlinearity=np.tanh):
    """examples/bayesian_neural_net.py: an MLP vectorised over weight samples, its layers
    unpacked by a generator."""
    shapes = list(itertools.pairwise(layer_sizes))
    num_weights = sum((m + 1) * n for m, n in shapes)

    def unpack_layers(weights):
        num_weight_sets = len(weights)
        for m, n in shapes:
            yield (weights[:, : m * n].reshape((num_weight_sets, m, n)),
                   weights[:, m * n: m * n + n].reshape((num_weight_sets, 1, n)))
            weights = weights[:, (m + 1) * n:]

    def predictions(weights, inputs):
        inputs = np.expand_dims(inputs, 0)
        for W, b in unpack_layers(weights):
            outputs = np.einsum("mnd,mdo->mno", inputs, W) + b
            inputs = nonlinearity(outputs)
        return outputs

    def logprob(weights, inputs, targets):
        log_prior = -L2_reg * np.sum(weights**2, axis=1)
        preds = predictions(weights, inputs)
        log_lik = -np.sum((preds - targets) ** 2, axis=1)[:, 0] / noise_variance
        return log_prior + log_lik

    return num_weights, predictions, logprob


num_bnn_weights, _, bnn_logprob = make_nn_funs([1, 6, 6, 1], L2_reg=0.1, noise_variance=0.01,
                                               nonlinearity=lambda x: np.exp(-(x**2)))


def _hips_bnn_args(rng):
    inputs = np.concatenate([np.linspace(0, 2, num=5), np.linspace(6, 8, num=5)])
    targets = (np.cos(inputs) + rng.standard_normal(10) * 0.1).reshape((10, 1))
    inputs = ((inputs - 4.0) / 4.0).reshape((10, 1))
    params = np.concatenate([rng.standard_normal(num_bnn_weights),
                             -3 * np.ones(num_bnn_weights)])
    return params, rng.standard_normal((4, num_bnn_weights)), inputs, targets


@program(_hips_bnn_args, fd_tol=(1e-5, 1e-5))
def hips_bnn_variational_objective(params, eps, inputs, targets):
    """examples/black_box_svi.py's -ELBO of the Bayesian network (its draws as an argument)."""
    D = num_bnn_weights
    mean, log_std = params[:D], params[D:]
    samples = eps * np.exp(log_std) + mean
    entropy = 0.5 * D * (1.0 + np.log(2 * np.pi)) + np.sum(log_std)
    return -(entropy + np.mean(bnn_logprob(samples, inputs, targets)))


def hips_sigmoid(x):
    return 0.5 * (np.tanh(x) + 1.0)


def concat_and_multiply(weights, *args):
    cat_state = np.hstack(args + (np.ones((args[0].shape[0], 1)),))
    return np.dot(cat_state, weights)


def rnn_predict(params, inputs):
    def update_rnn(input, hiddens):
        return np.tanh(concat_and_multiply(params["change"], input, hiddens))

    def hiddens_to_output_probs(hiddens):
        output = concat_and_multiply(params["predict"], hiddens)
        return output - logsumexp(output, axis=1, keepdims=True)

    num_sequences = inputs.shape[1]
    hiddens = np.repeat(params["init hiddens"], num_sequences, axis=0)
    output = [hiddens_to_output_probs(hiddens)]
    for input in inputs:
        hiddens = update_rnn(input, hiddens)
        output.append(hiddens_to_output_probs(hiddens))
    return output


def _hips_rnn_args(rng, lstm=False):
    n_in, n_state = 5, 4
    rp = lambda *shape: rng.standard_normal(shape) * 0.3  # noqa: E731
    params = {"init hiddens": rp(1, n_state), "change": rp(n_in + n_state + 1, n_state),
              "predict": rp(n_state + 1, n_in)}
    if lstm:
        params.update({"init cells": rp(1, n_state), "forget": rp(n_in + n_state + 1, n_state),
                       "ingate": rp(n_in + n_state + 1, n_state),
                       "outgate": rp(n_in + n_state + 1, n_state)})
    seqs = np.eye(n_in)[rng.integers(0, n_in, (9, 3))]  # (time, sequences, alphabet)
    return params, seqs, seqs


@program(_hips_rnn_args)
def hips_rnn_log_likelihood(params, inputs, targets):
    """examples/rnn.py: the list of log-probabilities built in one loop, read in another."""
    logprobs = rnn_predict(params, inputs)
    loglik = 0.0
    num_time_steps, num_examples, _ = inputs.shape
    for t in range(num_time_steps):
        loglik += np.sum(logprobs[t] * targets[t])
    return -loglik / (num_time_steps * num_examples)


def lstm_predict(params, inputs):
    def update_lstm(input, hiddens, cells):
        change = np.tanh(concat_and_multiply(params["change"], input, hiddens))
        forget = hips_sigmoid(concat_and_multiply(params["forget"], input, hiddens))
        ingate = hips_sigmoid(concat_and_multiply(params["ingate"], input, hiddens))
        outgate = hips_sigmoid(concat_and_multiply(params["outgate"], input, hiddens))
        cells = cells * forget + ingate * change
        hiddens = outgate * np.tanh(cells)
        return hiddens, cells

    def hiddens_to_output_probs(hiddens):
        output = concat_and_multiply(params["predict"], hiddens)
        return output - logsumexp(output, axis=1, keepdims=True)

    num_sequences = inputs.shape[1]
    hiddens = np.repeat(params["init hiddens"], num_sequences, axis=0)
    cells = np.repeat(params["init cells"], num_sequences, axis=0)
    output = [hiddens_to_output_probs(hiddens)]
    for input in inputs:
        hiddens, cells = update_lstm(input, hiddens, cells)
        output.append(hiddens_to_output_probs(hiddens))
    return output


@program(lambda rng: _hips_rnn_args(rng, lstm=True))
def hips_lstm_log_likelihood(params, inputs, targets):
    """examples/lstm.py: as the RNN, with cells, and the log-probabilities via np.asarray."""
    logprobs = np.asarray(lstm_predict(params, inputs))
    num_time_steps, num_examples, _ = inputs.shape
    return -np.sum(logprobs[1:] * targets) / (num_time_steps * num_examples)


def _hips_gmm_args(rng):
    params = {"log proportions": rng.standard_normal(3) * 0.1,
              "means": rng.standard_normal((3, 2)),
              "lower triangles": np.zeros((3, 2, 2)) + np.eye(2)
              + 0.1 * rng.standard_normal((3, 2, 2))}
    return params, rng.standard_normal((20, 2))


@program(_hips_gmm_args)
def hips_gmm_objective(params, data):
    """examples/gmm.py: components unpacked by zip(*...), scipy's mvn.logpdf per component."""
    def unpack_gmm_params(params):
        normalized_log_proportions = params["log proportions"] - logsumexp(
            params["log proportions"])
        return normalized_log_proportions, params["means"], params["lower triangles"]

    cluster_lls = []
    for log_proportion, mean, cov_sqrt in zip(*unpack_gmm_params(params)):
        cov = np.dot(cov_sqrt.T, cov_sqrt)
        cluster_lls.append(log_proportion + mvn.logpdf(data, mean, cov))
    return -np.sum(logsumexp(np.vstack(cluster_lls), axis=0))


def _hips_logreg_args(rng):
    inputs = np.array([[0.52, 1.12, 0.77], [0.88, -1.08, 0.15], [0.52, 0.06, -1.30],
                       [0.74, -2.49, 1.39]])
    return 0.3 * rng.standard_normal(3), inputs, np.array([True, True, False, True])


@program(_hips_logreg_args)
def hips_logistic_training_loss(weights, inputs, targets):
    """examples/logistic_regression.py: a tanh sigmoid and boolean targets in arithmetic."""
    preds = hips_sigmoid(np.dot(inputs, weights))
    label_probabilities = preds * targets + (1 - preds) * (1 - targets)
    return -np.sum(np.log(label_probabilities))


def _hips_ica_args(rng):
    return rng.standard_normal(4 * 2 + 2 * 15 + 1), rng.standard_normal((15, 4))


@program(_hips_ica_args)
def hips_ica_objective(params, observed):
    """examples/ica.py: weights, latents and a noise scale unpacked from one vector, a
    Student-t likelihood written out (autograd's t.logpdf) and a normal prior on latents."""
    num_weights, n_samples = 4 * 2, 15
    weights = np.reshape(params[:num_weights], (4, 2))
    latents = np.reshape(params[num_weights:num_weights + 2 * n_samples], (2, n_samples))
    noise_std = np.exp(params[-1])
    preds = np.dot(weights, latents).T
    df = 2.4
    z = (observed - preds) / noise_std
    log_lik = np.sum(scipy.special.gammaln((df + 1) / 2) - scipy.special.gammaln(df / 2)
                     - 0.5 * np.log(df * np.pi) - np.log(noise_std)
                     - (df + 1) / 2 * np.log1p(z ** 2 / df))
    log_prior = -0.5 * np.sum(latents ** 2)
    return -(log_lik + log_prior)


# ---- objectives handed to scipy.optimize -----------------------------------------------------
def _gamma_args(rng):
    return np.array([1.5, 0.8]), rng.gamma(2.0, 1.5, 30)


@program(_gamma_args)
def gamma_mle_neg_loglik(theta, data):
    """Gamma(shape, scale) negative log-likelihood, minimised with L-BFGS-B and bounds
    (theta unconstrained by the bounds, not by a log)."""
    k, s = theta
    n = len(data)
    return -((k - 1) * np.sum(np.log(data)) - np.sum(data) / s - n * k * np.log(s)
             - n * scipy.special.gammaln(k))


def unpack_linear(v, n_features):
    return {"w": v[:n_features], "b": v[n_features], "log_sigma": v[n_features + 1]}


def _flat_dict_args(rng):
    X = rng.standard_normal((25, 3))
    y = X @ np.array([1.0, -2.0, 0.5]) + 0.3 + 0.2 * rng.standard_normal(25)
    return 0.1 * rng.standard_normal(5), X, y


@program(_flat_dict_args)
def flat_vector_to_dict_nll(v, X, y):
    """A Gaussian regression likelihood whose parameters are a dict unpacked from scipy's
    flat vector by hand."""
    p = unpack_linear(v, X.shape[1])
    mu = X @ p["w"] + p["b"]
    sigma = np.exp(p["log_sigma"])
    return np.sum(0.5 * ((y - mu) / sigma) ** 2 + np.log(sigma)) + 0.5 * len(y) * np.log(2 * np.pi)


@dataclass
class Tobit:
    beta: np.ndarray
    log_sigma: float

    def pack(self):
        return np.concatenate([self.beta, [self.log_sigma]])

    @classmethod
    def unpack(cls, v):
        return cls(v[:-1], v[-1])


def _tobit_args(rng):
    X = np.column_stack([np.ones(30), rng.standard_normal((30, 2))])
    y = np.maximum(X @ np.array([0.3, 1.0, -0.7]) + 0.5 * rng.standard_normal(30), 0.0)
    return Tobit(np.array([0.1, 0.5, -0.2]), -0.3).pack(), X, y


@program(_tobit_args)
def tobit_censored_nll(v, X, y):
    """A Tobit (left-censored at 0) regression: a dataclass packed to and from scipy's vector,
    the censored points' normal CDF by scipy.special.log_ndtr written as erfc."""
    m = Tobit.unpack(v)
    sigma = np.exp(m.log_sigma)
    xb = X @ m.beta
    censored = y <= 0
    z = (y - xb) / sigma
    ll_obs = -0.5 * z ** 2 - np.log(sigma) - 0.5 * np.log(2 * np.pi)
    ll_cens = np.log(0.5 * scipy.special.erfc(xb / sigma / np.sqrt(2)))
    return -np.sum(np.where(censored, ll_cens, ll_obs))


def michaelis_menten_residuals(p, s, v):
    vmax, km = p
    return vmax * s / (km + s) - v


def _mm_args(rng):
    s = np.array([0.02, 0.06, 0.11, 0.22, 0.56, 1.1, 2.0])
    v = 0.36 * s / (0.2 + s) + 0.01 * rng.standard_normal(7)
    return np.array([0.3, 0.3]), s, v


@program(_mm_args)
def michaelis_menten_sse(p, s, v):
    """The sum of squares least_squares minimises (its residuals also given to llgrad.jacobian
    in test_users.py)."""
    return 0.5 * np.sum(michaelis_menten_residuals(p, s, v) ** 2)


def _thomson_args(rng):
    return rng.uniform(0.3, 2.8, 6), rng.uniform(0, 2 * np.pi, 6)


@program(_thomson_args, wrt=(0, 1))
def thomson_energy_spherical(theta, phi):
    """Thomson's problem (electrons on a sphere) in spherical coordinates, pairs by
    itertools.combinations over indices, as minimize(method='CG') is given it."""
    xyz = np.stack([np.sin(theta) * np.cos(phi), np.sin(theta) * np.sin(phi), np.cos(theta)], 1)
    energy = 0.0
    for i, j in itertools.combinations(range(len(theta)), 2):
        energy += 1.0 / np.linalg.norm(xyz[i] - xyz[j])
    return energy


# ---- JAX-tutorial models ---------------------------------------------------------------------
def init_mlp(rng, sizes):
    return [dict(w=rng.standard_normal((m, n)) / np.sqrt(m), b=np.zeros(n))
            for m, n in zip(sizes[:-1], sizes[1:])]


def relu(x):
    return np.maximum(0, x)


def mlp_predict(params, x):
    *hidden, last = params
    for layer in hidden:
        x = relu(x @ layer["w"] + layer["b"])
    logits = x @ last["w"] + last["b"]
    return logits - logsumexp(logits, axis=1, keepdims=True)


def _jax_mlp_args(rng):
    params = init_mlp(rng, [4, 8, 8, 3])
    for layer in params:
        layer["b"] = 0.1 * rng.standard_normal(layer["b"].shape)
    return params, rng.standard_normal((12, 4)), rng.integers(0, 3, 12)


@program(_jax_mlp_args)
def jax_mlp_cross_entropy(params, x, y):
    """The JAX tutorial's MLP: a list of dicts, `*hidden, last = params`, one-hot labels by
    np.eye(k)[y]."""
    one_hot = np.eye(3)[y]
    return -np.mean(np.sum(mlp_predict(params, x) * one_hot, axis=1))


Params = namedtuple("Params", ["w", "b"])


def _nt_args(rng):
    x = rng.uniform(-1, 1, (20, 2))
    y = x @ np.array([2.0, -1.0]) + 0.5 + 0.1 * rng.standard_normal(20)
    return Params(rng.standard_normal(2), 0.0), x, y


@program(_nt_args)
def namedtuple_linear_regression(params, x, y):
    """Linear regression with a namedtuple of a weight vector and a Python float bias."""
    pred = x @ params.w + params.b
    return np.mean((pred - y) ** 2)


def _ae_args(rng):
    def dense(m, n):
        return {"kernel": rng.standard_normal((m, n)) / np.sqrt(m), "bias": 0.1 * np.ones(n)}
    params = {"encoder": {"dense1": dense(6, 4), "dense2": dense(4, 2)},
              "decoder": {"dense1": dense(2, 4), "dense2": dense(4, 6)}}
    return params, rng.standard_normal((10, 6))


@program(_ae_args)
def flax_style_autoencoder(params, x):
    """An autoencoder with Flax-style nested dicts, layers applied by iterating .values()."""
    def apply(block, h, final_activation):
        layers = list(block.values())
        for k, layer in enumerate(layers):
            h = h @ layer["kernel"] + layer["bias"]
            if k < len(layers) - 1 or final_activation:
                h = np.tanh(h)
        return h
    z = apply(params["encoder"], x, True)
    recon = apply(params["decoder"], z, False)
    return np.mean(np.sum((recon - x) ** 2, axis=-1))


def _aux_args(rng):
    X = rng.standard_normal((16, 3))
    return rng.standard_normal((3, 4)), X, rng.integers(0, 4, 16)


@program(_aux_args)
def softmax_classifier_with_accuracy(W, X, y):
    """A loss written for value_and_grad(has_aux=True) in its training loop: the program is its
    first output (test_users.py checks the aux)."""
    return softmax_loss_and_accuracy(W, X, y)[0]


def softmax_loss_and_accuracy(W, X, y):
    logits = X @ W
    logp = logits - logsumexp(logits, axis=-1, keepdims=True)
    loss = -np.mean(logp[np.arange(len(y)), y])
    accuracy = np.mean(np.argmax(logits, axis=-1) == y)
    return loss, {"accuracy": accuracy, "mean logit": np.mean(logits)}


# ---- numerical recipes -----------------------------------------------------------------------
def equations(x, p):
    a, b, c = p
    return np.array([x[0] ** 2 + a * x[1] ** 2 - 4.0,
                     np.exp(b * x[0]) + x[1] - c])


@program(lambda rng: (np.array([1.0, 0.5, 2.0]),))
def newton_system_fd_jacobian(p, x0=(2.0, -0.5), h=1e-7, iters=8):
    """Newton's method on two nonlinear equations with a forward-difference Jacobian built
    column by column in a loop (textbook style); the loss reads the root, differentiated
    through the iterations with respect to the equations' parameters."""
    x = np.array(x0)
    n = len(x)
    for _ in range(iters):
        F = equations(x, p)
        J = np.zeros((n, n))
        for j in range(n):
            e = np.zeros(n)
            e[j] = h
            J[:, j] = (equations(x + e, p) - F) / h
        x = x - np.linalg.solve(J, F)
    return x[0] ** 2 + 3 * x[1]


@program(lambda rng: (np.array([0.7, 1.3, 0.4]),))
def gauss_legendre_and_simpson(theta, n_simpson=16):
    """The same integral of exp(-a x^2) cos(b x) + c x over [0, 2] by Gauss-Legendre nodes
    from np.polynomial.legendre.leggauss mapped to [0, 2] and by the composite Simpson rule
    with its odd and even sums in a loop; a loss on both."""
    a, b, c = theta
    f = lambda x: np.exp(-a * x ** 2) * np.cos(b * x) + c * x  # noqa: E731
    nodes, weights = np.polynomial.legendre.leggauss(8)
    lo, hi = 0.0, 2.0
    gl = 0.5 * (hi - lo) * np.sum(weights * f(0.5 * (hi - lo) * nodes + 0.5 * (hi + lo)))
    h = (hi - lo) / n_simpson
    s = f(lo) + f(hi)
    for i in range(1, n_simpson):
        s += (4 if i % 2 else 2) * f(lo + i * h)
    simpson = s * h / 3
    return gl ** 2 + simpson


def _spline_args(rng):
    x = np.linspace(0, 4, 7)
    return np.sin(x) + 0.1 * rng.standard_normal(7), x, rng.uniform(0.1, 3.9, 10)


@program(_spline_args)
def natural_cubic_spline_thomas(y, x, x_eval):
    """A natural cubic spline through (x, y) by the Thomas algorithm (forward sweep and back
    substitution written with element updates), evaluated at x_eval via np.searchsorted."""
    n = len(x) - 1
    h = np.diff(x)
    alpha = np.zeros(n + 1)
    for i in range(1, n):
        alpha[i] = 3 / h[i] * (y[i + 1] - y[i]) - 3 / h[i - 1] * (y[i] - y[i - 1])
    l, mu, z = np.ones(n + 1), np.zeros(n + 1), np.zeros(n + 1)
    for i in range(1, n):
        l[i] = 2 * (x[i + 1] - x[i - 1]) - h[i - 1] * mu[i - 1]
        mu[i] = h[i] / l[i]
        z[i] = (alpha[i] - h[i - 1] * z[i - 1]) / l[i]
    c, b, d = np.zeros(n + 1), np.zeros(n), np.zeros(n)
    for j in range(n - 1, -1, -1):
        c[j] = z[j] - mu[j] * c[j + 1]
        b[j] = (y[j + 1] - y[j]) / h[j] - h[j] * (c[j + 1] + 2 * c[j]) / 3
        d[j] = (c[j + 1] - c[j]) / (3 * h[j])
    k = np.clip(np.searchsorted(x, x_eval) - 1, 0, n - 1)
    dx = x_eval - x[k]
    s = y[k] + b[k] * dx + c[k] * dx ** 2 + d[k] * dx ** 3
    return np.sum(s ** 2)


def _rts_args(rng):
    T = 12
    pos = np.cumsum(0.5 + 0.1 * rng.standard_normal(T))
    return np.array([-1.0, 0.0]), pos + 0.3 * rng.standard_normal(T), pos


@program(_rts_args)
def kalman_rts_smoother_mse(log_qr, ys, truth, dt=1.0):
    """A constant-velocity Kalman filter storing its means and covariances in lists, then the
    Rauch-Tung-Striebel smoother backwards over them into a preallocated array; the smoothed positions' squared error
    as a function of the log noise variances (tuning the filter)."""
    q, r = np.exp(log_qr)
    F = np.array([[1.0, dt], [0.0, 1.0]])
    H = np.array([[1.0, 0.0]])
    Q = q * np.array([[dt ** 3 / 3, dt ** 2 / 2], [dt ** 2 / 2, dt]])
    m, P = np.array([ys[0], 0.0]), np.eye(2)
    ms, Ps, mps, Pps = [], [], [], []
    for y in ys:
        mp, Pp = F @ m, F @ P @ F.T + Q
        S = H @ Pp @ H.T + r
        K = Pp @ H.T / S
        m = mp + (K * (y - H @ mp)).ravel()
        P = Pp - K @ H @ Pp
        ms.append(m)
        Ps.append(P)
        mps.append(mp)
        Pps.append(Pp)
    sm = np.zeros((len(ys), 2))
    sm[-1] = ms[-1]
    for k in range(len(ys) - 2, -1, -1):
        G = Ps[k] @ F.T @ np.linalg.inv(Pps[k + 1])
        sm[k] = ms[k] + G @ (sm[k + 1] - mps[k + 1])
    return np.mean((sm[:, 0] - truth) ** 2)


def _viterbi_args(rng):
    K, T = 3, 10
    log_A = np.log(rng.dirichlet(np.ones(K) * 3, K))
    return rng.standard_normal(K), log_A, rng.standard_normal(T) + rng.integers(0, K, T)


@program(_viterbi_args)
def viterbi_decoded_path_score(means, log_A, obs):
    """Viterbi decoding of Gaussian emissions with integer back-pointers, then backtracking
    with the decoded states as indices; the loss is the decoded path's log joint (its
    gradient is that of the best path's score, as the path is locally constant)."""
    K, T = len(means), len(obs)
    log_B = -0.5 * (obs[:, None] - means[None, :]) ** 2
    delta = np.log(np.ones(K) / K) + log_B[0]
    backptr = np.zeros((T, K), dtype=int)
    for t in range(1, T):
        scores = delta[:, None] + log_A
        backptr[t] = np.argmax(scores, axis=0)
        delta = np.max(scores, axis=0) + log_B[t]
    path = np.zeros(T, dtype=int)
    path[-1] = np.argmax(delta)
    for t in range(T - 2, -1, -1):
        path[t] = backptr[t + 1, path[t + 1]]
    score = log_B[0, path[0]]
    for t in range(1, T):
        score = score + log_A[path[t - 1], path[t]] + log_B[t, path[t]]
    return -score


@program(_viterbi_args)
def hmm_forward_logsumexp_columns(means, log_A, obs, sigma=1.0):
    """The forward algorithm with scipy.special.logsumexp over each column of a (K, K) table
    in a loop over states, as in textbooks, then logsumexp of the last alpha."""
    K, T = len(means), len(obs)
    log_alpha = np.zeros((T, K))
    log_alpha[0] = -np.log(K) - 0.5 * ((obs[0] - means) / sigma) ** 2
    for t in range(1, T):
        for j in range(K):
            log_alpha[t, j] = (logsumexp(log_alpha[t - 1] + log_A[:, j])
                               - 0.5 * ((obs[t] - means[j]) / sigma) ** 2)
    return -logsumexp(log_alpha[-1])


def _fem_args(rng):
    return rng.uniform(0.5, 2.0, 8), rng.uniform(0.5, 1.5, 9)


@program(_fem_args)
def fem_bar_compliance(E, f):
    """A 1-D bar in linear finite elements: the global stiffness assembled by scatter-adding
    each element's 2x2 matrix (np.ix_), clamped at node 0, solved; the compliance f.u as a
    function of the elements' moduli (topology-optimisation style)."""
    n_el = len(E)
    h = 1.0 / n_el
    K = np.zeros((n_el + 1, n_el + 1))
    ke = np.array([[1.0, -1.0], [-1.0, 1.0]]) / h
    for e in range(n_el):
        dofs = [e, e + 1]
        K[np.ix_(dofs, dofs)] += E[e] * ke
    u = np.zeros(n_el + 1)
    u[1:] = np.linalg.solve(K[1:, 1:], f[1:])
    return f @ u


@program(_fem_args)
def fem_bar_compliance_loops(E, f):
    """The same assembly with two nested loops over local indices (K[I, J] += ...)."""
    n_el = len(E)
    h = 1.0 / n_el
    K = np.zeros((n_el + 1, n_el + 1))
    ke = np.array([[1.0, -1.0], [-1.0, 1.0]]) / h
    conn = np.array([[e, e + 1] for e in range(n_el)])
    for e in range(n_el):
        for a in range(2):
            for b in range(2):
                K[conn[e, a], conn[e, b]] += E[e] * ke[a, b]
    free = np.arange(1, n_el + 1)
    u = np.linalg.solve(K[np.ix_(free, free)], f[free])
    return f[free] @ u


TRUSS_NODES = np.array([[0.0, 0.0], [1.0, 0.0], [2.0, 0.0], [0.5, 1.0], [1.5, 1.0]])
TRUSS_ELEMS = [(0, 1), (1, 2), (0, 3), (1, 3), (1, 4), (2, 4), (3, 4)]


def _truss_args(rng):
    load = np.zeros(10)
    load[3], load[5] = -0.5, -1.0
    return rng.uniform(0.5, 1.5, 7), TRUSS_NODES, TRUSS_ELEMS, [0, 1, 5], load


@program(_truss_args)
def truss_compliance(areas, nodes, elems, fixed, load):
    """A 2-D truss: each bar's 4x4 stiffness (direction cosines, np.outer) scatter-added at
    its four degrees of freedom with np.ix_, supports removed with np.setdiff1d, solved; the
    compliance as a function of the bars' areas."""
    ndof = 2 * len(nodes)
    K = np.zeros((ndof, ndof))
    for e, (i, j) in enumerate(elems):
        d = nodes[j] - nodes[i]
        L = np.sqrt(d @ d)
        c, s = d / L
        k = areas[e] / L * np.outer([c, s, -c, -s], [c, s, -c, -s])
        dofs = [2 * i, 2 * i + 1, 2 * j, 2 * j + 1]
        K[np.ix_(dofs, dofs)] += k
    free = np.setdiff1d(np.arange(ndof), fixed)
    u = np.zeros(ndof)
    u[free] = np.linalg.solve(K[np.ix_(free, free)], load[free])
    return load @ u


def _lm_args(rng):
    t = np.linspace(0, 4, 15)
    return 2.0 * np.exp(-0.7 * t) + 0.02 * rng.standard_normal(15), t


@program(_lm_args, fd_eps=1e-4, fd_tol=(1e-4, 1e-6))
def levenberg_marquardt_by_hand(y, t, iters=12):
    """Levenberg-Marquardt for y = a exp(-b t) with an analytic Jacobian and the damping
    divided or multiplied by 10 as a step is accepted or not; the fitted rate as a function
    of the data (sensitivity of the estimate)."""
    p = np.array([1.0, 1.0])
    lam = 1e-2

    def residual(p):
        return p[0] * np.exp(-p[1] * t) - y

    cost = np.sum(residual(p) ** 2)
    for _ in range(iters):
        r = residual(p)
        J = np.stack([np.exp(-p[1] * t), -p[0] * t * np.exp(-p[1] * t)], axis=1)
        A = J.T @ J
        step = np.linalg.solve(A + lam * np.diag(np.diag(A)), -J.T @ r)
        new_cost = np.sum(residual(p + step) ** 2)
        if new_cost < cost:
            p, cost, lam = p + step, new_cost, lam / 10
        else:
            lam = lam * 10
    return p[1]


def _cheb_args(rng):
    return rng.standard_normal(9) / np.arange(1, 10) ** 2, np.linspace(-1, 1, 11)


@program(_cheb_args)
def clenshaw_chebyshev_fit(c, x):
    """A Chebyshev series evaluated by Clenshaw's recurrence in a reversed loop (Numerical
    Recipes' chebev), fitted to |x| by squared error."""
    b1, b2 = np.zeros_like(x), np.zeros_like(x)
    for k in range(len(c) - 1, 0, -1):
        b1, b2 = 2 * x * b1 - b2 + c[k], b1
    s = x * b1 - b2 + c[0]
    return np.sum((s - np.abs(x)) ** 2)


def _divdiff_args(rng):
    x = np.sort(rng.uniform(0, 3, 6))
    return np.cos(x), x, np.linspace(0, 3, 8)


@program(_divdiff_args)
def newton_divided_differences(y, x, x_eval):
    """Newton's interpolating polynomial: divided differences updated in place on slices of
    shrinking length, evaluated by Horner's rule backwards."""
    n = len(x)
    coef = y.copy()
    for j in range(1, n):
        coef[j:] = (coef[j:] - coef[j - 1:-1]) / (x[j:] - x[:-j])
    p = coef[-1] * np.ones_like(x_eval)
    for k in range(n - 2, -1, -1):
        p = coef[k] + (x_eval - x[k]) * p
    return np.sum(p ** 2)


@program(lambda rng: (np.array([1.3, 0.4]),))
def romberg_table(theta, levels=5):
    """Romberg integration of 1 / (1 + a x^2) + b sin x over [0, 1]: trapezoid refinements and
    Richardson extrapolation kept in a list of lists R[i][j], each row read back while it is
    appended to."""
    a, b = theta
    f = lambda x: 1 / (1 + a * x ** 2) + b * np.sin(x)  # noqa: E731
    R = [[0.5 * (f(0.0) + f(1.0))]]
    for i in range(1, levels):
        h = 1.0 / 2 ** i
        mids = f(h * np.arange(1, 2 ** i, 2))
        row = [0.5 * R[i - 1][0] + h * np.sum(mids)]
        for j in range(1, i + 1):
            row.append(row[j - 1] + (row[j - 1] - R[i - 1][j - 1]) / (4 ** j - 1))
        R.append(row)
    return R[-1][-1]


def _growth_args(rng):
    return np.array([0.3, 8.0]), 2.0 + np.cumsum(rng.uniform(0.1, 0.6, 25))


@program(_growth_args)
def gompertz_simulated_with_lists(theta, observed, dt=0.5):
    """A Gompertz growth curve simulated step by step into a list, each step reading the
    previous one as sizes[t - 1] (tutorial style), then a squared log error."""
    r, K = theta
    sizes = [observed[0]]
    for t in range(1, len(observed)):
        sizes.append(sizes[t - 1] + dt * r * sizes[t - 1] * np.log(K / sizes[t - 1]))
    return np.sum((np.log(np.array(sizes)) - np.log(observed)) ** 2)


def _cg_args(rng):
    A = rng.standard_normal((6, 6))
    return rng.standard_normal(6), A @ A.T + 6 * np.eye(6)


@program(_cg_args, wrt=(0, 1))
def conjugate_gradient_by_hand(b, A, iters=6):
    """The conjugate gradient method as textbooks write it (r, p, rs_old / rs_new) for a fixed
    number of iterations; a loss on the solution, differentiated through the iterations."""
    x = np.zeros_like(b)
    r = b - A @ x
    p = r.copy()
    rs_old = r @ r
    for _ in range(iters):
        Ap = A @ p
        alpha = rs_old / (p @ Ap)
        x = x + alpha * p
        r = r - alpha * Ap
        rs_new = r @ r
        p = r + (rs_new / rs_old) * p
        rs_old = rs_new
    return np.sum(x ** 2)


def _seasonal_args(rng):
    return 0.1 * rng.standard_normal(7), rng.standard_normal(30) + 10


@program(_seasonal_args)
def weekly_seasonal_by_divmod(effects, y, level=10.0):
    """Daily counts with a day-of-week effect indexed by divmod of the day (week, weekday),
    and a trend per week."""
    loss = 0.0
    for day in range(len(y)):
        week, weekday = divmod(day, 7)
        pred = level + 0.05 * week + effects[weekday]
        loss = loss + (y[day] - pred) ** 2
    return loss + np.sum(effects) ** 2


def _sched_args(rng):
    return rng.standard_normal(5), rng.standard_normal((12, 5))


@program(_sched_args)
def cyclic_lr_schedule_divmod(w, X, n_per_cycle=4.0):
    """Unrolled gradient steps with a cyclic learning rate whose phase is divmod of a traced
    step counter by a float period (the SGDR schedule), then a validation loss."""
    y = X @ np.ones(5)
    step = 0.0
    for i in range(6):
        cycle, phase = divmod(step, n_per_cycle)
        lr = 0.01 + 0.04 * (1 + math.cos(math.pi * 0.0)) * (1 - phase / n_per_cycle) / 2
        g = X.T @ (X @ w - y) / len(y)
        w = w - lr * g / (1 + cycle)
        step = step + 1.0
    return np.mean((X @ w - y) ** 2)


def _branch_dict_args(rng):
    return rng.standard_normal(4), rng.standard_normal(4)


def metrics_dict_filled_in_branches(x, target):
    """A dict of terms where one key is set only in one branch of an `if` on a traced value,
    then read with .get and a default (notebook bookkeeping): the dynamic path, so not in
    PROGRAMS (test_users.py checks it)."""
    terms = {"mse": np.mean((x - target) ** 2)}
    if np.sum(x) > 0:
        terms["penalty"] = 0.1 * np.sum(x ** 2)
    return terms["mse"] + terms.get("penalty", 0.0)
