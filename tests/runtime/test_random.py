"""Random numbers with PyTorch's API (runtime/rng.py): Generator objects and `generator=`,
the default generator behind llgrad.manual_seed, state save/restore, the samplers'
signatures, shapes and dtypes (PyTorch's defaults), and the in-place initialisers."""
from __future__ import annotations

import numpy as np
import pytest

import llgrad as lg


def test_generators_are_reproducible_and_independent():
    g1, g2 = lg.Generator().manual_seed(5), lg.Generator().manual_seed(5)
    assert lg.rand(3, generator=g1).tolist() == lg.rand(3, generator=g2).tolist()
    # a generator's stream is not touched by draws from others (or the default one)
    a = lg.Generator().manual_seed(7)
    first = lg.randn(4, generator=a).tolist()
    b = lg.Generator().manual_seed(7)
    lg.randn(10)
    lg.rand(2, generator=lg.Generator())
    assert lg.randn(4, generator=b).tolist() == first
    assert g1.initial_seed() == 5 and lg.Generator().initial_seed() == 0
    assert lg.Generator().manual_seed(5) is not None and isinstance(g1.manual_seed(1), lg.Generator)


def test_manual_seed_seeds_the_default_generator():
    g = lg.manual_seed(11)
    assert g is lg.default_generator and lg.initial_seed() == 11
    a = lg.rand(2, 3)
    lg.manual_seed(11)
    assert lg.rand(2, 3).tolist() == a.tolist()
    # nn initialisation and dropout draw from it too
    lg.manual_seed(3)
    w1 = lg.nn.Linear(3, 2).weight.detach().numpy().copy()
    lg.manual_seed(3)
    assert (lg.nn.Linear(3, 2).weight.detach().numpy() == w1).all()


def test_state_round_trip():
    g = lg.Generator().manual_seed(2)
    lg.rand(5, generator=g)
    state = g.get_state()
    a = lg.randn(3, generator=g).tolist()
    assert lg.randn(3, generator=g).tolist() != a
    g.set_state(state)
    assert lg.randn(3, generator=g).tolist() == a
    h = lg.Generator().set_state(state)  # another generator continues from the same point
    assert lg.randn(3, generator=h).tolist() == a and h.initial_seed() == 2
    s = lg.get_rng_state()
    b = lg.rand(2).tolist()
    lg.set_rng_state(s)
    assert lg.rand(2).tolist() == b
    with pytest.raises(ValueError, match="not a state from an llgrad Generator"):
        g.set_state(lg.tensor([1, 2, 3]))


def test_seed_is_fresh_and_returned():
    g = lg.Generator()
    s = g.seed()
    assert g.initial_seed() == s
    assert lg.rand(2, generator=g).tolist() == lg.rand(
        2, generator=lg.Generator().manual_seed(s)).tolist()


def test_sampler_signatures_shapes_and_dtypes():
    g = lg.Generator().manual_seed(0)
    assert lg.rand(2, 3, generator=g).shape == (2, 3) and lg.rand((4,)).dtype == lg.float32
    assert lg.randn(2, dtype=lg.float64, generator=g).dtype == lg.float64
    assert lg.randn(2, requires_grad=True).requires_grad
    for t in (lg.randint(5, (100,), generator=g), lg.randint(2, 5, (100,)),
              lg.randint(low=2, high=5, size=(100,)), lg.randint(5, size=(100,))):
        assert t.dtype == lg.int64 and t.shape == (100,)
        assert 0 <= t.numpy().min() and t.numpy().max() < 5
    assert lg.randint(2, 5, (100,)).numpy().min() >= 2
    p = lg.randperm(10, generator=g)
    assert p.dtype == lg.int64 and sorted(p.tolist()) == list(range(10))
    n = lg.normal(2.0, 0.0, (3,))
    assert n.tolist() == [2.0, 2.0, 2.0] and n.dtype == lg.float32
    m = lg.normal(lg.tensor([[0.0], [10.0]], dtype=lg.float64), lg.tensor([0.0, 0.0, 0.0]))
    assert m.shape == (2, 3) and m.dtype == lg.float64 and m.tolist()[1] == [10.0] * 3
    u = lg.rand_like(lg.zeros(2, dtype=lg.float64))
    assert u.dtype == lg.float64 and u.shape == (2,)
    assert lg.randint_like(lg.zeros(3), 4).dtype == lg.float32  # PyTorch: input's dtype


def test_bernoulli_and_multinomial():
    g = lg.Generator().manual_seed(1)
    p = lg.tensor([0.0, 1.0, 0.0, 1.0], dtype=lg.float64)
    b = lg.bernoulli(p, generator=g)
    assert b.tolist() == [0.0, 1.0, 0.0, 1.0] and b.dtype == lg.float64
    assert p.bernoulli().tolist() == [0.0, 1.0, 0.0, 1.0]
    assert set(lg.bernoulli(lg.zeros(50), 0.5).tolist()) == {0.0, 1.0}
    w = lg.tensor([0.0, 3.0, 1.0, 0.0, 2.0])
    d = lg.multinomial(w, 3, generator=g)
    assert d.dtype == lg.int64 and sorted(d.tolist()) == [1, 2, 4]  # no zero-weight category
    r = w.multinomial(20, replacement=True)
    assert set(r.tolist()) <= {1, 2, 4}
    rows = lg.multinomial(lg.tensor([[1.0, 0.0], [0.0, 1.0]]), 4, True)
    assert rows.tolist() == [[0] * 4, [1] * 4]
    with pytest.raises(ValueError, match="cannot draw 4 samples without replacement"):
        lg.multinomial(w, 4)
    with pytest.raises(ValueError, match=r"probabilities must be in \[0, 1\]"):
        lg.bernoulli(lg.tensor([1.5]))


def test_in_place_initialisers():
    t = lg.zeros(1000, dtype=lg.float64)
    t.uniform_(-2.0, 3.0, generator=lg.Generator().manual_seed(4))
    assert -2.0 <= t.numpy().min() and t.numpy().max() < 3.0 and t.dtype == lg.float64
    u = lg.zeros(1000, dtype=lg.float64).uniform_(-2.0, 3.0,
                                                  generator=lg.Generator().manual_seed(4))
    assert u.tolist() == t.tolist()
    n = lg.zeros(2000).normal_(1.0, 0.5)
    assert n.dtype == lg.float32 and abs(float(n.mean()) - 1.0) < 0.1
    b = lg.zeros(10).bernoulli_(1.0)
    assert b.tolist() == [1.0] * 10
    w = lg.zeros(3, requires_grad=True)
    with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
        w.normal_()
    with lg.no_grad():
        w.normal_()
    assert w.requires_grad and w.is_leaf


def test_argument_errors():
    with pytest.raises(TypeError, match="generator must be an llgrad.Generator"):
        lg.rand(2, generator=np.random.default_rng(0))
    with pytest.raises(ValueError, match="expected low < high"):
        lg.randint(3, 3, (2,))
    with pytest.raises(TypeError, match="missing the size"):
        lg.randint(3)
    with pytest.raises(TypeError, match="floating point"):
        lg.rand(2, dtype=lg.int64)
    with pytest.raises(ValueError, match="cpu"):
        lg.Generator(device="cuda")


def test_nn_init_draws_from_a_given_generator():
    # PyTorch's nn.init functions take generator=; the default generator is left untouched
    init = lg.nn.init
    lg.manual_seed(0)
    untouched = lg.rand(3).tolist()
    lg.manual_seed(0)
    w = lg.empty(8, 12, dtype=lg.float64)
    init.kaiming_uniform_(w, a=5 ** 0.5, generator=lg.Generator().manual_seed(9))
    # kaiming_uniform_ with a = sqrt(5): gain sqrt(2 / 6), bound gain * sqrt(3 / fan_in) =
    # 1 / sqrt(12); a Generator seeded s draws as numpy's default_rng(s)
    bound = 1 / np.sqrt(12)
    want = np.random.default_rng(9).uniform(-bound, bound, (8, 12))
    np.testing.assert_allclose(w.numpy(), want, rtol=1e-12)
    assert lg.rand(3).tolist() == untouched
    # each random initialiser takes one, and two generators with one seed agree
    for fn, args in [(init.uniform_, (-1.0, 2.0)), (init.normal_, (0.5, 2.0)),
                     (init.kaiming_normal_, ()), (init.xavier_uniform_, ()),
                     (init.xavier_normal_, ()), (init.orthogonal_, ()),
                     (init.trunc_normal_, ())]:
        a, b = lg.empty(5, 4), lg.empty(5, 4)
        fn(a, *args, generator=lg.Generator().manual_seed(4))
        fn(b, *args, generator=lg.Generator().manual_seed(4))
        c = fn(lg.empty(5, 4), *args, generator=lg.Generator().manual_seed(5))
        assert a.tolist() == b.tolist() != c.tolist(), fn.__name__
    with pytest.raises(TypeError, match="generator must be an llgrad.Generator"):
        init.normal_(lg.empty(2), generator=np.random.default_rng(0))
