"""Python data as pytrees (runtime/pytree.py): namedtuples, dataclasses, dicts and classes
registered with llgrad.register_pytree as arguments, as values built inside a compiled
function (loop and branch state included: Note [Records in loop and branch state]) and as
outputs. Values equal plain Python's, gradients equal central differences and have the
structure and types of their argument."""
from __future__ import annotations

import collections
import dataclasses
import warnings
from typing import NamedTuple

import numpy as np
import pytest

import llgrad
from llgrad.runtime.errors import UnsupportedError
from llgrad.tracer.tracing import UnrollWarning
from tests.fd import numerical_grad_tree


class State(NamedTuple):
    pos: np.ndarray
    vel: np.ndarray


Pair = collections.namedtuple("Pair", "a b")


@dataclasses.dataclass
class Params:
    w: np.ndarray
    b: float
    power: int = 2  # static: part of the signature
    name: str = "params"


@dataclasses.dataclass(frozen=True)
class Frozen:
    scale: np.ndarray
    shift: float


class Box:
    """A user class registered as a pytree (jax.tree_util.register_pytree_node's protocol)."""

    def __init__(self, lo, hi, label="box"):
        self.lo, self.hi, self.label = lo, hi, label


llgrad.register_pytree(Box, lambda b: ((b.lo, b.hi), b.label),
                       lambda label, children: Box(*children, label=label))

X = np.array([0.3, -1.2, 0.8])
V = np.array([0.5, 0.1, -0.4])


def _assert_tree_close(got, want):
    assert type(got) is type(want), (type(got), type(want))
    gl, gs = llgrad.runtime.pytree.flatten(got)
    wl, ws = llgrad.runtime.pytree.flatten(want)
    assert gs == ws
    for g, w in zip(gl, wl):
        assert type(g) is type(w), (type(g), type(w))
        if isinstance(w, (np.ndarray, float)):
            np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-8)
        else:
            assert g == w


def _check(fn, *args, wrt=0):
    """Value as plain Python gives it; gradient as central differences, with its structure."""
    d = llgrad.differentiate(fn, wrt=wrt)
    value, grad = d.value_and_grad(*args)
    assert value == pytest.approx(fn(*args), rel=1e-12)
    assert d(*args) == pytest.approx(fn(*args), rel=1e-12)
    want = tuple(numerical_grad_tree(fn, args, k) for k in wrt) if isinstance(wrt, tuple) \
        else numerical_grad_tree(fn, args, wrt)
    _assert_tree_close(grad, want)
    return d, grad


# ---- arguments ----------------------------------------------------------------------------
def energy(s):
    return np.sum(s.pos ** 2) * 0.5 + np.sum(np.sin(s.vel) * s.pos)


def affine(p, x):
    return np.sum((x * p.w + p.b) ** p.power)


def shifted(f, x):
    return np.sum(np.tanh(x * f.scale) + f.shift)


def nested(tree, x):
    return np.sum(tree["pair"].a * x) + tree["pair"].b * np.sum(tree["list"][0] ** 2) + \
        tree["list"][1].shift


def boxed(box, x):
    return np.sum(np.minimum(np.maximum(x, box.lo), box.hi) ** 2) * \
        (2.0 if box.label == "wide" else 1.0)


def test_namedtuple_argument(mode):
    """Was a bare StopIteration (tracer/signature.py rebuilt the namedtuple as a tuple)."""
    _, g = _check(energy, State(X, V))
    assert isinstance(g, State)


def test_dataclass_argument_fields_leaves_and_static(mode):
    d, g = _check(affine, Params(X, 0.5), V)
    assert isinstance(g, Params) and isinstance(g.b, float)
    assert g.power is None and g.name is None  # static fields have no gradient
    traces = d.cache_info()["traces"]
    _check(affine, Params(X * 2, -1.5), V)  # new leaves: the same trace
    d(Params(X * 2, -1.5), V)
    assert d.cache_info()["traces"] == traces
    p3 = Params(X, 0.5, power=3)  # a static field is part of the signature
    assert d(p3, V) == pytest.approx(affine(p3, V), rel=1e-12)
    assert d.cache_info()["traces"] == traces + 1


def test_frozen_dataclass_argument(mode):
    _, g = _check(shifted, Frozen(X, 0.25), V)
    assert isinstance(g, Frozen) and isinstance(g.shift, float)


def test_nested_containers_and_float_leaves(mode):
    tree = {"pair": Pair(V, 1.5), "list": [X, Frozen(V, 2.0)]}
    _, g = _check(nested, tree, X)
    assert set(g) == {"pair", "list"} and isinstance(g["pair"], Pair)
    assert isinstance(g["pair"].b, float) and isinstance(g["list"][1], Frozen)


def test_registered_class_argument_aux_is_static(mode):
    d, g = _check(boxed, Box(np.full(3, -0.5), np.full(3, 0.5)), X)
    assert isinstance(g, Box) and g.label == "box"
    wide = Box(np.full(3, -0.5), np.full(3, 0.5), "wide")
    assert d(wide, X) == pytest.approx(boxed(wide, X), rel=1e-12)
    assert d.cache_info()["traces"] == 2


def test_dataclass_without_arrays_is_passed_as_itself(mode):
    @dataclasses.dataclass
    class Config:
        power: int
        name: str

    seen = []

    def f(x, cfg):
        seen.append(cfg)
        return np.sum(x ** cfg.power)
    cfg = Config(3, "cube")
    assert llgrad.differentiate(f)(X, cfg) == pytest.approx(f(X, cfg), rel=1e-12)
    assert seen[0] is cfg


# ---- values built inside, loop and branch state --------------------------------------------
def leapfrog(x0, v0):
    s = State(x0, v0)
    for _ in range(200):
        s = State(s.pos + 0.01 * s.vel, s.vel - 0.01 * np.sin(s.pos + 0.01 * s.vel))
    return np.sum(s.pos ** 2) + np.sum(s.vel)


@dataclasses.dataclass
class Particle:
    pos: np.ndarray
    vel: np.ndarray
    t: float = 0.0


def mutating_loop(x0, v0):
    p = Particle(x0 * 1.0, v0 * 1.0)
    for _ in range(150):
        p.pos = p.pos + 0.01 * p.vel
        p.vel = p.vel - 0.01 * p.pos ** 3
        if np.sum(p.pos) > 0.3:  # a traced condition: the write happens on one path only
            p.t = p.t + 0.01
    return np.sum(p.pos * p.vel) + p.t


def while_state(x0, v0):
    s = Particle(x0, v0)
    i = 0
    while i < 50:
        s = Particle(s.pos * 0.99 + 0.01 * s.vel, s.vel, s.t + 1.0)
        i += 1
    return np.sum(s.pos ** 2) * s.t


def branch_state(x0, v0):
    s = State(x0, v0)
    if np.sum(x0) > 0:
        s = State(s.pos * 2.0, s.vel)
    else:
        s = State(s.pos, s.vel * 3.0)
    return np.sum(s.pos * s.vel)


@pytest.mark.parametrize("fn", [leapfrog, mutating_loop, while_state, branch_state],
                         ids=lambda f: f.__name__)
def test_records_as_loop_and_branch_state(fn, mode):
    with warnings.catch_warnings():
        warnings.simplefilter("error", UnrollWarning)  # one loop op, not unrolled
        d, _ = _check(fn, X, V, wrt=(0, 1))
    stats = d.inspect(X, V).stats
    assert stats["path"] == "staged" and stats["ops (traced)"] < 60, stats["ops (traced)"]


def test_attribute_written_on_one_branch_only(mode):
    """A traced if ran an attribute write of its body at trace time whatever the condition
    (`p.t` was 1.0 below, for both signs); now it is branch state."""
    def f(x):
        p = Particle(x, x)
        if np.sum(x) > 0:
            p.t = 1.0
        return np.sum(p.pos) + p.t
    d = llgrad.differentiate(f)
    for x in (X, -X):
        assert d(x) == pytest.approx(f(x), rel=1e-12)


# ---- outputs ------------------------------------------------------------------------------
def make_records(x):
    return {"state": State(x * 2.0, np.sin(x)), "params": Params(x + 1.0, 0.5),
            "box": Box(x - 1.0, x + 1.0, "out"), "n": 3}


def test_pytree_outputs_are_rebuilt_as_their_types(mode):
    got = llgrad.differentiate(make_records)(X)
    want = make_records(X)
    assert isinstance(got["state"], State) and isinstance(got["params"], Params)
    np.testing.assert_allclose(got["state"].vel, want["state"].vel, rtol=1e-12)
    np.testing.assert_allclose(got["params"].w, want["params"].w, rtol=1e-12)
    assert got["params"].b == 0.5 and got["params"].name == "params"
    assert isinstance(got["box"], Box) and got["box"].label == "out"
    np.testing.assert_allclose(got["box"].hi, want["box"].hi, rtol=1e-12)


# ---- arguments are not written --------------------------------------------------------------
def appends(x, acc):
    acc.append(np.sum(x))
    return np.sum(x)


def sets_field(p, x):
    p.b = 2.0
    return np.sum(p.w * x)


@pytest.mark.parametrize("fn,args,what", [
    (appends, (X, [1.0]), r"changes its argument `acc` \(list\) in place"),
    (sets_field, (Params(X, 0.5), V), r"changes its argument `p` \(Params\) in place")],
    ids=["list", "dataclass"])
def test_changing_a_container_argument_is_an_error(fn, args, what):
    with pytest.raises(UnsupportedError, match=what + r"(.|\n)*How to fix: copy it first"):
        llgrad.differentiate(fn)(*args)


# ---- eager tensors inside containers; the fast path -------------------------------------------
def test_tensors_inside_a_namedtuple_get_eager_gradients():
    d = llgrad.differentiate(energy)
    pos = llgrad.tensor(X, requires_grad=True)
    vel = llgrad.tensor(V, requires_grad=True)
    d(State(pos, vel)).backward()
    want = numerical_grad_tree(energy, (State(X, V),), 0)
    np.testing.assert_allclose(pos.grad.numpy(), want.pos, rtol=1e-6)
    np.testing.assert_allclose(vel.grad.numpy(), want.vel, rtol=1e-6)


def test_plain_array_calls_keep_the_fast_path():
    d = llgrad.differentiate(lambda x, y: np.sum(x * y))
    d(X, V)
    assert len(d._fast) == 1  # Note [Per-call fast path]: keyed, not flattened, from now on


def test_static_entries_have_no_gradient(mode):
    """An int or a string inside a differentiated argument is static: its gradient entry is
    None, not its own value (which read as a gradient: `[1.0, 2]` gave `[2.0, 2]`)."""
    f = lambda c: c[0] * 2.0 + c[1] * 3.0  # noqa: E731
    assert llgrad.grad(f)([1.0, 2]) == [2.0, None]
    assert llgrad.differentiate(f).value_and_grad((1.0, 2)) == (8.0, (2.0, None))
    g = llgrad.grad(lambda d: d["a"] * d["k"] * 2.0)({"a": 1.5, "k": 3, "act": "tanh"})
    assert g == {"a": 6.0, "k": None, "act": None}
    jac = llgrad.jacobian(lambda d: d["a"] * np.arange(2.0) * d["k"])({"a": 1.5, "k": 3})
    np.testing.assert_allclose(jac["a"], [0.0, 3.0])
    assert jac["k"] is None


def test_tree_map_updates_a_pytree_of_parameters():
    p = Params(X, 0.5)
    g = llgrad.grad(affine)(p, V)
    new = llgrad.tree_map(lambda a, b: a - 0.1 * b if isinstance(a, (float, np.ndarray))
                          else a, p, g)
    assert isinstance(new, Params) and new.power == 2
    np.testing.assert_allclose(new.w, X - 0.1 * g.w, rtol=1e-12)
