"""llgrad.utils.data: datasets, random_split, samplers, DataLoader batching and shuffling
(reproducible with llgrad.manual_seed or a generator), default_collate as PyTorch's."""
from __future__ import annotations

from collections import namedtuple

import numpy as np
import pytest

import llgrad as lg
from llgrad.utils import data as D


def _ds(n=10):
    return D.TensorDataset(lg.arange(float(n)).reshape(n, 1), lg.arange(n))


def test_tensor_dataset_and_subset():
    ds = _ds()
    x, y = ds[3]
    assert len(ds) == 10 and x.tolist() == [3.0] and y.item() == 3
    with pytest.raises(ValueError, match="Size mismatch"):
        D.TensorDataset(lg.zeros(3), lg.zeros(4))
    sub = D.Subset(ds, [7, 2])
    assert len(sub) == 2 and sub[0][1].item() == 7
    both = ds + sub
    assert len(both) == 12 and both[11][1].item() == 2 and both[-1][1].item() == 2


def test_dataloader_batches_in_order_with_drop_last():
    batches = list(D.DataLoader(_ds(), batch_size=4))
    assert [b[1].tolist() for b in batches] == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]
    assert batches[0][0].shape == (4, 1) and batches[0][1].dtype == lg.int64
    loader = D.DataLoader(_ds(), batch_size=4, drop_last=True)
    assert len(loader) == 2 and [b[1].tolist() for b in loader] == [[0, 1, 2, 3], [4, 5, 6, 7]]
    assert len(D.DataLoader(_ds(), batch_size=4)) == 3


def test_shuffle_is_a_permutation_reproducible_from_the_seed():
    def epoch(loader):
        return [v for b in loader for v in b[1].tolist()]
    lg.manual_seed(7)
    loader = D.DataLoader(_ds(), batch_size=3, shuffle=True)
    first, second = epoch(loader), epoch(loader)
    assert sorted(first) == list(range(10)) and first != second  # a new order each epoch
    lg.manual_seed(7)
    assert epoch(D.DataLoader(_ds(), batch_size=3, shuffle=True)) == first
    g1, g2 = np.random.default_rng(3), np.random.default_rng(3)
    assert epoch(D.DataLoader(_ds(), batch_size=3, shuffle=True, generator=g1)) == \
        epoch(D.DataLoader(_ds(), batch_size=3, shuffle=True, generator=g2))


def test_custom_collate_fn_and_batch_size_none():
    loader = D.DataLoader(_ds(4), batch_size=2, collate_fn=lambda items: [i[1].item() for i in
                                                                          items])
    assert list(loader) == [[0, 1], [2, 3]]
    single = list(D.DataLoader(_ds(2), batch_size=None))
    assert single[1][1].item() == 1 and single[1][0].shape == (1,)


def test_default_collate_of_numbers_tuples_dicts_and_namedtuples():
    c = D.default_collate
    assert c([1.5, 2.0]).dtype == lg.float64 and c([1, 2]).dtype == lg.int64
    assert c([True, False]).dtype == lg.bool
    assert c(["a", "b"]) == ["a", "b"]
    out = c([(1, 2.0), (3, 4.0)])
    assert isinstance(out, list) and out[0].tolist() == [1, 3] and out[1].tolist() == [2.0, 4.0]
    d = c([{"x": np.ones(2, np.float32), "y": 0}, {"x": np.zeros(2, np.float32), "y": 1}])
    assert d["x"].shape == (2, 2) and d["x"].dtype == lg.float32 and d["y"].tolist() == [0, 1]
    P = namedtuple("P", "a b")
    p = c([P(lg.ones(2), 1), P(lg.zeros(2), 2)])
    assert isinstance(p, P) and p.a.shape == (2, 2) and p.b.tolist() == [1, 2]
    with pytest.raises(RuntimeError, match="equal size"):
        c([[1, 2], [3]])


def test_default_collate_stacks_with_a_graph():
    w = lg.ones(2, requires_grad=True)
    batch = D.default_collate([w * 2, w * 3])
    batch.sum().backward()
    assert w.grad.tolist() == [5.0, 5.0]


def test_random_split_lengths_and_fractions():
    ds = _ds()
    a, b = D.random_split(ds, [3, 7], generator=np.random.default_rng(0))
    idx = sorted(a.indices + b.indices)
    assert len(a) == 3 and len(b) == 7 and idx == list(range(10))
    parts = D.random_split(range(11), [0.3, 0.3, 0.4], generator=np.random.default_rng(1))
    assert [len(p) for p in parts] == [4, 3, 4]  # floor 3, 3, 4 and one left over, as PyTorch
    with pytest.raises(ValueError, match="Sum of input lengths"):
        D.random_split(ds, [3, 3])
    lg.manual_seed(5)
    first = D.random_split(ds, [5, 5])[0].indices
    lg.manual_seed(5)
    assert D.random_split(ds, [5, 5])[0].indices == first


def test_samplers_and_errors():
    ds = _ds(5)
    assert list(D.SequentialSampler(ds)) == [0, 1, 2, 3, 4]
    rs = D.RandomSampler(ds, num_samples=7, generator=np.random.default_rng(0))
    drawn = list(rs)
    assert len(rs) == 7 and len(drawn) == 7 and sorted(drawn[:5]) == [0, 1, 2, 3, 4]
    assert all(0 <= i < 5 for i in D.RandomSampler(ds, replacement=True, num_samples=9))
    assert sorted(D.SubsetRandomSampler([4, 9, 2])) == [2, 4, 9]
    bs = D.BatchSampler(D.SequentialSampler(ds), 2, drop_last=False)
    assert list(bs) == [[0, 1], [2, 3], [4]] and len(bs) == 3
    loader = D.DataLoader(ds, batch_sampler=[[4, 0], [1]])
    assert [b[1].tolist() for b in loader] == [[4, 0], [1]]
    with pytest.raises(ValueError, match="mutually exclusive with shuffle"):
        D.DataLoader(ds, sampler=D.SequentialSampler(ds), shuffle=True)
    with pytest.raises(ValueError, match="batch_size should be a positive integer"):
        D.DataLoader(ds, batch_size=0)
    with pytest.raises(TypeError, match="numpy.random.Generator"):
        list(D.DataLoader(ds, shuffle=True, generator=42))


def test_iterable_dataset():
    class Stream(D.IterableDataset):
        def __iter__(self):
            return iter(range(5))
    assert [b.tolist() for b in D.DataLoader(Stream(), batch_size=2)] == [[0, 1], [2, 3], [4]]
    assert [b.tolist() for b in D.DataLoader(Stream(), batch_size=2, drop_last=True)] == \
        [[0, 1], [2, 3]]
    with pytest.raises(ValueError, match="IterableDataset"):
        D.DataLoader(Stream(), shuffle=True)
