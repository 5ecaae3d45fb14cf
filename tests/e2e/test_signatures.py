"""Call signatures (tracer/signature.py, Note [Static arguments]; llgrad/api.py, Note [Dynamic
signatures]): static arguments are keyed as Python would tell them apart and reach the function
as themselves; a call that raises leaves nothing behind; unsupported argument types are errors
that name the argument."""
from __future__ import annotations

import enum
import re
import types

import numpy as np
import pytest

import llgrad
from llgrad.runtime.errors import DTypeError
from tests.fd import numerical_vjp

X = np.array([0.5, -1.0, 2.0])


def _check(d, fn, *args):
    """Value and gradient as plain Python and central differences give them."""
    value, grad = d.value_and_grad(*args)
    assert d(*args) == pytest.approx(fn(*args), rel=1e-12)
    assert value == pytest.approx(fn(*args), rel=1e-12)
    np.testing.assert_allclose(grad, numerical_vjp(fn, args, 1.0, wrt=[0])[0], rtol=1e-6,
                               atol=1e-8)


# ---- static values are keyed with their type ------------------------------------------------------
def scale_by_kind(x, k):
    return np.sum(x) * (k + 2 if type(k) is int else k + 1)


def keyed_by_dict_key(x, d):
    (key,) = d
    return np.sum(x) * (3.0 if type(key) is bool else 2.0) * d[key]


def test_true_and_1_are_different_signatures(mode):
    d = llgrad.differentiate(scale_by_kind)
    for k in (True, 1, 1.0, np.int64(1), True, 1):  # True == 1 == 1.0, hash(True) == hash(1)
        assert d(X, k) == scale_by_kind(X, k), k
    assert d.cache_info()["signatures"] == 4
    e = llgrad.differentiate(keyed_by_dict_key)
    for arg in ({True: 2}, {1: 2}, {True: 2}):
        assert e(X, arg) == keyed_by_dict_key(X, arg)


# ---- mutable static objects reach the function and are keyed by their contents ---------------------
class Config:
    """A user class: static, unlike a dataclass (a pytree: tests/e2e/test_pytrees.py)."""

    def __init__(self, scale, power, name="cfg"):
        self.scale, self.power, self.name = scale, power, name


class Polynomial:
    """A user class (hashed by identity in Python) holding its coefficients in a list."""

    def __init__(self, coeffs):
        self.coeffs = coeffs


class Mode(enum.Enum):
    SQUARE = 1
    CUBE = 2


class Received:
    """What `configured` was passed (a class attribute: a global list it appends to would be
    guarded, and the plain-Python calls in _check change it: Note [Captured values are
    guarded])."""
    last = None


def configured(x, cfg):
    Received.last = cfg
    return np.sum(x ** cfg.power) * cfg.scale


def selected(x, idx):
    s = 0.0
    for i in sorted(idx):
        s = s + np.sin(x[i])
    return s


def polynomial(x, p):
    s = 0.0
    for k, c in enumerate(p.coeffs):
        s = s + c * np.sum(x ** k)
    return s


def by_mode(x, mode):
    return np.sum(x ** 2) if mode is Mode.SQUARE else np.sum(x ** 3)


@pytest.mark.parametrize("make", [lambda s, p: Config(s, p),
                                  lambda s, p: types.SimpleNamespace(scale=s, power=p)],
                         ids=["user class", "SimpleNamespace"])
def test_config_object_read_by_attribute(make, mode):
    d = llgrad.differentiate(configured)
    cfg = make(2.0, 3)
    _check(d, configured, X, cfg)
    assert Received.last is cfg  # the object itself, not a flattened copy
    traces = d.cache_info()["traces"]
    _check(d, configured, X, make(2.0, 3))  # a new object with the same contents: no trace
    assert d.cache_info()["traces"] == traces
    cfg.scale = 5.0  # mutated between calls: traced again, as Python reads the new value
    _check(d, configured, X, cfg)
    cfg.power = 2
    _check(d, configured, X, cfg)
    assert d.cache_info()["traces"] == traces + 2


def test_set_argument_is_passed_and_its_mutation_retraces(mode):
    d = llgrad.differentiate(selected)
    idx = {0, 2}
    _check(d, selected, X, idx)
    idx.add(1)
    _check(d, selected, X, idx)
    assert d(X, {2, 0}) == selected(X, {0, 2})
    assert d.cache_info()["traces"] == 2


def test_user_class_instance_nested_mutation_retraces(mode):
    d = llgrad.differentiate(polynomial)
    p = Polynomial([1.0, 2.0, 0.5])
    _check(d, polynomial, X, p)
    p.coeffs[1] = -3.0  # a change two levels down
    _check(d, polynomial, X, p)
    p.coeffs.append(4.0)
    _check(d, polynomial, X, p)


def test_hashable_static_objects_are_keyed_by_value(mode):
    d = llgrad.differentiate(by_mode)
    for m in (Mode.SQUARE, Mode.CUBE, Mode.SQUARE):
        _check(d, by_mode, X, m)
    assert d.cache_info()["traces"] == 2


# ---- a failed call leaves no state; dynamic signatures are per signature ---------------------------
def exp_sum(x):
    return np.sum(np.exp(x))


def test_a_failed_call_does_not_poison_the_function(mode):
    d = llgrad.differentiate(exp_sum)
    assert d(X) == pytest.approx(exp_sum(X), rel=1e-14)
    with pytest.raises(ValueError, match="inhomogeneous shape"):
        d([[0.1, 0.2], [0.3]])  # a ragged list of traced floats is no array, on both paths
    traces = d.cache_info()["traces"]
    for x in (X, np.ones(4)):  # the old signature and a new one both stay staged
        assert d(x) == pytest.approx(exp_sum(x), rel=1e-14)
        assert d.inspect(x).path == "staged"
    assert d.cache_info()["traces"] == traces + 1
    with pytest.raises(DTypeError, match=r"argument `x` is an array of dtype datetime64"):
        d(np.array(["2020-01-01"], dtype="datetime64[D]"))


def float_of_first_when_long(x):
    s = np.sum(x)
    if x.shape[0] > 3:
        s = s * float(x[0])
    return s


def test_dynamic_path_is_per_signature(mode):
    d = llgrad.differentiate(float_of_first_when_long)
    small, big = np.array([1.0, 2.0]), np.array([2.0, 1.0, 1.0, 1.0])
    assert d(small) == float_of_first_when_long(small)
    assert d(big) == float_of_first_when_long(big)
    assert d.inspect(big).path.startswith("dynamic")
    np.testing.assert_allclose(d.grad(big), np.full(4, 2.0))  # float(x[0]) is a constant
    traces = d.cache_info()["traces"]
    assert d(small) == float_of_first_when_long(small)
    assert d.inspect(small).path == "staged"
    assert d.cache_info()["traces"] == traces  # small's native code is reused
    with pytest.raises(DTypeError, match=r"argument `x` is an array of dtype datetime64"):
        d(np.array(["2020-01-01", "2020-01-02", "2020-01-03", "2020-01-04"],
                   dtype="datetime64[D]"))


# ---- unsupported argument types --------------------------------------------------------------------
@pytest.mark.parametrize("arr,fix", [
    (np.array(["2020-01-01"], dtype="datetime64[D]"), r"convert the dates to numbers"),
    (np.array([1, 2], dtype="timedelta64[s]"), r"convert the durations to numbers"),
    (np.array([1 + 2j]), r"pass the real and imaginary parts"),
    (np.array(["a", "b"]), r"strings cannot be traced"),
    (np.array([b"a"]), r"strings cannot be traced"),
    (np.array([object()], dtype=object), r"np.asarray\(x, dtype=np.float64\)"),
    (np.array([1, 2], dtype=np.uint8), r"x.astype\(np.int64\)"),
    (np.array([1.0], dtype=np.float16), r"x.astype\(np.float64\)"),
    # numpy's int8/16/32 arithmetic wraps at their width: a silent int64 would not
    (np.array([1, 2], dtype=np.int8), r"x.astype\(np.int64\).*narrower dtype's limit"),
    (np.array([1, 2], dtype=np.int16), r"x.astype\(np.int64\)"),
    (np.array([1, 2], dtype=np.int32), r"x.astype\(np.int64\)"),
], ids=lambda v: str(v.dtype) if isinstance(v, np.ndarray) else "")
def test_unsupported_array_dtypes_name_the_argument(arr, fix):
    d = llgrad.differentiate(exp_sum)
    with pytest.raises(DTypeError, match=rf"(?s)argument `x` is an array of dtype {re.escape(str(arr.dtype))}.*"
                       rf"test_signatures.py.*How to fix: .*{fix}") as e:
        d(arr)
    assert e.value.loc.file == __file__
    with pytest.raises(DTypeError, match=r"argument `x\['w'\]\[1\]` is an array of dtype"):
        llgrad.differentiate(lambda x: np.sum(x["w"][0]))({"w": [X, arr]})
    assert d(X) == pytest.approx(exp_sum(X), rel=1e-14)


def squares_ints(x, k):
    return np.sum(x * (k * k))


def test_int32_arguments_are_refused_not_widened():
    """k * k of int32 wraps at 2**31 in numpy; compiled in int64 it did not (a different
    answer). Refused with the argument's name; int64 gives numpy's int64 answer."""
    k = np.array([50000, 3], dtype=np.int32)
    with pytest.raises(DTypeError, match=r"(?s)argument `k` is an array of dtype int32.*"
                       r"k.astype\(np.int64\)"):
        llgrad.differentiate(squares_ints)(np.ones(2), k)
    k64 = k.astype(np.int64)
    assert llgrad.differentiate(squares_ints)(np.ones(2), k64) == squares_ints(np.ones(2), k64)
