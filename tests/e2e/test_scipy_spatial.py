"""scipy.spatial.distance.cdist, pdist and squareform inside `llgrad.differentiate`: values
against scipy, gradients against central differences (float64), the zero distances of
cdist(a, a) (gradient 0, never NaN), and the errors for what is not supported."""
from __future__ import annotations

import numpy as np
import pytest
import scipy.spatial.distance as D

import llgrad
from llgrad.runtime.errors import UnsupportedError
from tests.e2e.conftest import compiled, finite_differences

R = np.random.default_rng(22)
A = R.standard_normal((5, 3))
B = R.standard_normal((4, 3))
W = R.standard_normal((5, 5))

METRICS = [("euclidean", {}), ("sqeuclidean", {}), ("cityblock", {}), ("chebyshev", {}),
           ("minkowski", {"p": 3.0}), ("seuclidean", {}), ("mahalanobis", {}),
           ("cosine", {}), ("correlation", {}), ("braycurtis", {})]


def _distances(metric, kw):
    def f(a):  # cdist(a, a) has zero distances on its diagonal
        return (np.sum(D.cdist(a, a, metric, **kw) * W) + np.sum(D.pdist(a, metric, **kw) ** 2)
                + np.sum(D.cdist(a, B, metric, **kw)))
    return f


_FNS = {m: _distances(m, kw) for m, kw in METRICS}


@pytest.mark.parametrize("metric", [m for m, _ in METRICS])
def test_metric_values_and_gradients(metric):
    f = _FNS[metric]
    value, grad = compiled(f, 0).value_and_grad(A)
    assert value == pytest.approx(f(A), rel=1e-12)
    np.testing.assert_allclose(grad, finite_differences(f, (A,), (0,))[0], rtol=1e-6,
                               atol=1e-7)


def test_arrays_against_scipy(mode):
    v, vi = np.array([0.5, 2.0, 1.5]), np.linalg.inv(np.cov(A.T) + np.eye(3))
    fns = {"cdist": lambda a: D.cdist(a, B, "seuclidean", V=v),
           "pdist": lambda a: D.pdist(a, "mahalanobis", VI=vi),
           "alias": lambda a: D.pdist(a, "cityblock") + D.pdist(a, "cb"),
           "tomatrix": lambda a: D.squareform(D.pdist(a, "minkowski", p=1.5)),
           "tovector": lambda a: D.squareform(D.cdist(a, a, "sqeuclidean"), checks=False)}
    for name, f in fns.items():
        np.testing.assert_allclose(llgrad.differentiate(f)(A), f(A), rtol=1e-12,
                                   err_msg=name)


def zero_distances(a):
    return np.sum(D.cdist(a, a)) + np.sum(D.squareform(D.pdist(a)) * W)


def test_zero_distance_has_gradient_zero(mode):
    # rows 0 and 3 equal: their distance is 0 too, beside the diagonal
    a = A.copy()
    a[3] = a[0]
    grad = compiled(zero_distances, 0).grad(a)
    assert np.isfinite(grad).all()
    np.testing.assert_allclose(grad, finite_differences(zero_distances, (a,), (0,))[0],
                               rtol=1e-6, atol=1e-7)
    # as np.linalg.norm's gradient at 0 (PyTorch's subgradient)
    norms = llgrad.differentiate(lambda a: np.sum(np.linalg.norm(a[:, None] - a[None], axis=-1)
                                                  ))
    np.testing.assert_allclose(llgrad.differentiate(lambda a: np.sum(D.cdist(a, a))).grad(a),
                               norms.grad(a), rtol=1e-13)


@pytest.mark.parametrize("call,err,match", [
    (lambda a: D.cdist(a, a, lambda u, v: 0.0), UnsupportedError,
     r"cdist with a callable metric(.*\n)*.*test_scipy_spatial.py:\d+(.*\n)*.*How to fix:"),
    (lambda a: D.pdist(a, "hamming"), UnsupportedError,
     r"pdist\(metric='hamming'\) is not supported(.*\n)*.*test_scipy_spatial.py:\d+"),
    (lambda a: D.pdist(a, "minkowski", w=np.ones(3)), UnsupportedError,
     r"pdist\(metric='minkowski', w=...\)(.*\n)*.*metric 'minkowski' takes p"),
    (lambda a: D.pdist(a, "nonsense"), ValueError, "Unknown Distance Metric: nonsense"),
    (lambda a: D.cdist(a, a[:, :2]), ValueError, "same number of columns"),
    (lambda a: D.squareform(a[0, :2]), ValueError, "Incompatible vector size"),
])
def test_errors(call, err, match):
    with pytest.raises(err, match=match):
        llgrad.differentiate(lambda a: np.sum(call(a)))(A)
