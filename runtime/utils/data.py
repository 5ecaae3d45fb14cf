"""`llgrad.utils.data`, as `torch.utils.data`: Dataset, IterableDataset, TensorDataset,
ConcatDataset, Subset, random_split, the samplers and DataLoader with default_collate.

Randomness (shuffling, random_split) comes from a numpy Generator: the one passed as
`generator=` (a numpy Generator or an llgrad.Generator), else a fresh one seeded from llgrad's global generator (so
`llgrad.manual_seed(s)` fixes the order, as `torch.manual_seed` does), drawn anew for every
epoch as PyTorch draws a new seed. See Note [Data loading in the main process].
"""
from __future__ import annotations

import bisect
import itertools
import math
import warnings
from collections.abc import Mapping, Sequence

import numpy as np

from llgrad.runtime.creation import _rng
from llgrad.runtime.tensor import Tensor

__all__ = ["Dataset", "IterableDataset", "TensorDataset", "ConcatDataset", "Subset",
           "random_split", "Sampler", "SequentialSampler", "RandomSampler",
           "SubsetRandomSampler", "BatchSampler", "DataLoader", "default_collate",
           "default_convert"]

# Note [Data loading in the main process]
# num_workers > 0, pin_memory, prefetch_factor and persistent_workers are accepted for
# PyTorch compatibility, but batches are always loaded in the main process, in order: the
# batches are the same as PyTorch's with workers (workers only change when they are made).


def _numpy_rng(generator) -> np.random.Generator:
    """The numpy Generator to draw from (see the module docstring)."""
    if generator is None:
        return np.random.default_rng(int(_rng().integers(2 ** 63)))
    if isinstance(generator, np.random.Generator):
        return generator
    if callable(getattr(generator, "_numpy", None)):  # llgrad.Generator (runtime/rng.py)
        return generator._numpy()
    for name in ("_rng", "rng", "generator"):  # an object holding a numpy Generator
        inner = getattr(generator, name, None)
        if isinstance(inner, np.random.Generator):
            return inner
    raise TypeError(f"generator must be a numpy.random.Generator, got "
                    f"{type(generator).__name__}")


class Dataset:
    """A map-style dataset: subclasses define __getitem__(index) and usually __len__."""

    def __getitem__(self, index):
        raise NotImplementedError("Subclasses of Dataset should implement __getitem__.")

    def __add__(self, other: "Dataset") -> "ConcatDataset":
        return ConcatDataset([self, other])


class IterableDataset(Dataset):
    """A dataset that is a stream: subclasses define __iter__."""

    def __iter__(self):
        raise NotImplementedError("Subclasses of IterableDataset should implement __iter__.")


class TensorDataset(Dataset):
    """Samples are tuples of the tensors' rows: dataset[i] = (t[i] for t in tensors).

    Example:
        >>> import llgrad as lg
        >>> ds = lg.utils.data.TensorDataset(lg.arange(6.0).reshape(3, 2), lg.tensor([0, 1, 0]))
        >>> len(ds), ds[1]
        (3, (tensor([2., 3.]), tensor(1)))
    """

    def __init__(self, *tensors: Tensor) -> None:
        if any(t.shape[0] != tensors[0].shape[0] for t in tensors):
            raise ValueError("Size mismatch between tensors")
        self.tensors = tensors

    def __getitem__(self, index):
        return tuple(t[index] for t in self.tensors)

    def __len__(self) -> int:
        return self.tensors[0].shape[0]


class ConcatDataset(Dataset):
    """The datasets one after another."""

    def __init__(self, datasets) -> None:
        self.datasets = list(datasets)
        if not self.datasets:
            raise AssertionError("datasets should not be an empty iterable")
        self.cumulative_sizes = list(itertools.accumulate(len(d) for d in self.datasets))

    def __len__(self) -> int:
        return self.cumulative_sizes[-1]

    def __getitem__(self, index):
        if index < 0:
            if -index > len(self):
                raise ValueError("absolute value of index should not exceed dataset length")
            index += len(self)
        d = bisect.bisect_right(self.cumulative_sizes, index)
        return self.datasets[d][index - (self.cumulative_sizes[d - 1] if d else 0)]


class Subset(Dataset):
    """The samples of `dataset` at `indices`."""

    def __init__(self, dataset: Dataset, indices) -> None:
        self.dataset, self.indices = dataset, indices

    def __getitem__(self, index):
        if isinstance(index, list):
            return self.dataset[[self.indices[i] for i in index]]
        return self.dataset[self.indices[index]]

    def __len__(self) -> int:
        return len(self.indices)


def random_split(dataset: Dataset, lengths, generator=None) -> list[Subset]:
    """Split into non-overlapping random Subsets of the given lengths, or of fractions
    summing to 1 (floor(frac * len) each, the remainder handed out one by one from the
    first), as PyTorch's."""
    if math.isclose(sum(lengths), 1) and sum(lengths) <= 1:
        sizes = []
        for i, frac in enumerate(lengths):
            if frac < 0 or frac > 1:
                raise ValueError(f"Fraction at index {i} is not between 0 and 1")
            sizes.append(math.floor(len(dataset) * frac))
        for i in range(len(dataset) - sum(sizes)):
            sizes[i % len(sizes)] += 1
        for i, n in enumerate(sizes):
            if n == 0:
                warnings.warn(f"Length of split at index {i} is 0. This might result in an "
                              "empty dataset.", stacklevel=2)
        lengths = sizes
    if sum(lengths) != len(dataset):
        raise ValueError("Sum of input lengths does not equal the length of the input dataset!")
    perm = _numpy_rng(generator).permutation(sum(lengths)).tolist()
    ends = list(itertools.accumulate(lengths))
    return [Subset(dataset, perm[e - n:e]) for e, n in zip(ends, lengths)]


# ---- samplers -----------------------------------------------------------------------------------
class Sampler:
    """Yields dataset indices (or, for batch samplers, lists of them)."""

    def __init__(self, data_source=None) -> None:
        pass

    def __iter__(self):
        raise NotImplementedError


class SequentialSampler(Sampler):
    def __init__(self, data_source) -> None:
        self.data_source = data_source

    def __iter__(self):
        return iter(range(len(self.data_source)))

    def __len__(self) -> int:
        return len(self.data_source)


class RandomSampler(Sampler):
    """A random permutation each epoch (or num_samples draws, with replacement if asked)."""

    def __init__(self, data_source, replacement: bool = False, num_samples=None,
                 generator=None) -> None:
        self.data_source, self.replacement = data_source, replacement
        self._num_samples, self.generator = num_samples, generator
        if not isinstance(self.num_samples, int) or self.num_samples <= 0:
            raise ValueError(f"num_samples should be a positive integer value, but got "
                             f"num_samples={self.num_samples}")

    @property
    def num_samples(self) -> int:
        return len(self.data_source) if self._num_samples is None else self._num_samples

    def __iter__(self):
        n, rng = len(self.data_source), _numpy_rng(self.generator)
        if self.replacement:
            yield from rng.integers(0, n, self.num_samples).tolist()
            return
        for _ in range(self.num_samples // n):
            yield from rng.permutation(n).tolist()
        yield from rng.permutation(n)[:self.num_samples % n].tolist()

    def __len__(self) -> int:
        return self.num_samples


class SubsetRandomSampler(Sampler):
    """The given indices in a random order each epoch."""

    def __init__(self, indices, generator=None) -> None:
        self.indices, self.generator = indices, generator

    def __iter__(self):
        for i in _numpy_rng(self.generator).permutation(len(self.indices)):
            yield self.indices[i]

    def __len__(self) -> int:
        return len(self.indices)


class BatchSampler(Sampler):
    """Groups another sampler's indices into lists of batch_size (the last one shorter
    unless drop_last)."""

    def __init__(self, sampler, batch_size: int, drop_last: bool) -> None:
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size <= 0:
            raise ValueError(f"batch_size should be a positive integer value, but got "
                             f"batch_size={batch_size}")
        self.sampler, self.batch_size, self.drop_last = sampler, batch_size, drop_last

    def __iter__(self):
        batch = []
        for idx in self.sampler:
            batch.append(idx)
            if len(batch) == self.batch_size:
                yield batch
                batch = []
        if batch and not self.drop_last:
            yield batch

    def __len__(self) -> int:
        n = len(self.sampler)
        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)


# ---- collation ----------------------------------------------------------------------------------
def default_convert(data):
    """numpy arrays (and those inside containers) to tensors, without batching."""
    if isinstance(data, np.ndarray) and data.dtype.kind not in "SUO":
        return Tensor._wrap(data)
    if isinstance(data, Mapping):
        return type(data)({k: default_convert(v) for k, v in data.items()})
    if isinstance(data, tuple) and hasattr(data, "_fields"):
        return type(data)(*(default_convert(d) for d in data))
    if isinstance(data, Sequence) and not isinstance(data, (str, bytes)):
        return [default_convert(d) for d in data]
    return data


def default_collate(batch):
    """A list of samples to a batch, as PyTorch's: tensors and numpy arrays stack along a new
    first dimension; Python floats become a float64 tensor, ints int64, bools bool; strings
    stay a list; dicts, namedtuples and sequences are collated field by field (a tuple of
    fields gives a list, as PyTorch)."""
    from llgrad.runtime import ops
    elem = batch[0]
    if isinstance(elem, Tensor):
        return ops.stack(list(batch), 0)
    if isinstance(elem, np.ndarray) and elem.dtype.kind not in "SUO":
        return Tensor._wrap(np.stack(batch))
    if isinstance(elem, np.generic) and elem.dtype.kind not in "SUO":
        return Tensor._wrap(np.asarray(batch))
    if isinstance(elem, bool):
        return Tensor._wrap(np.asarray(batch, np.bool_))
    if isinstance(elem, float):
        return Tensor._wrap(np.asarray(batch, np.float64))
    if isinstance(elem, int):
        return Tensor._wrap(np.asarray(batch, np.int64))
    if isinstance(elem, (str, bytes)):
        return batch
    if isinstance(elem, Mapping):
        out = {k: default_collate([d[k] for d in batch]) for k in elem}
        try:
            return type(elem)(out)
        except TypeError:
            return out
    if isinstance(elem, tuple) and hasattr(elem, "_fields"):
        return type(elem)(*(default_collate(s) for s in zip(*batch)))
    if isinstance(elem, Sequence):
        if any(len(s) != len(elem) for s in batch):
            raise RuntimeError("each element in list of batch should be of equal size")
        fields = [default_collate(list(s)) for s in zip(*batch)]
        if isinstance(elem, tuple):
            return fields
        try:
            return type(elem)(fields)
        except TypeError:
            return fields
    raise TypeError(f"default_collate: batch must contain tensors, numpy arrays, numbers, "
                    f"dicts or lists; found {type(elem)}")


# ---- the loader ---------------------------------------------------------------------------------
class DataLoader:
    """Iterates over `dataset` in batches: each batch is collate_fn of the samples at the
    indices a (batch) sampler yields. shuffle=True draws a new permutation every epoch
    from `generator` (or llgrad's global generator).

    Example:
        >>> import llgrad as lg
        >>> ds = lg.utils.data.TensorDataset(lg.arange(10.0))
        >>> [b[0].tolist() for b in lg.utils.data.DataLoader(ds, batch_size=4)]
        [[0.0, 1.0, 2.0, 3.0], [4.0, 5.0, 6.0, 7.0], [8.0, 9.0]]
    """

    def __init__(self, dataset: Dataset, batch_size: int | None = 1, shuffle: bool | None = None,
                 sampler=None, batch_sampler=None, num_workers: int = 0, collate_fn=None,
                 pin_memory: bool = False, drop_last: bool = False, timeout: float = 0,
                 worker_init_fn=None, multiprocessing_context=None, generator=None, *,
                 prefetch_factor=None, persistent_workers: bool = False,
                 pin_memory_device: str = "", in_order: bool = True) -> None:
        if num_workers < 0:
            raise ValueError("num_workers option should be non-negative; use num_workers=0 "
                             "to disable multiprocessing.")
        self.dataset, self.num_workers, self.generator = dataset, num_workers, generator
        self.batch_size, self.drop_last = batch_size, drop_last
        self._iterable = isinstance(dataset, IterableDataset)
        if self._iterable:
            if shuffle or sampler is not None or batch_sampler is not None:
                raise ValueError("DataLoader with IterableDataset: expected unspecified "
                                 "shuffle, sampler and batch_sampler options")
        else:
            if sampler is not None and shuffle:
                raise ValueError("sampler option is mutually exclusive with shuffle")
            if batch_sampler is not None:
                if batch_size != 1 or shuffle or sampler is not None or drop_last:
                    raise ValueError("batch_sampler option is mutually exclusive with "
                                     "batch_size, shuffle, sampler, and drop_last")
                self.batch_size, self.drop_last = None, False
            if sampler is None:
                sampler = RandomSampler(dataset, generator=generator) if shuffle else \
                    SequentialSampler(dataset)
            if batch_sampler is None and batch_size is not None:
                batch_sampler = BatchSampler(sampler, batch_size, drop_last)
        self.sampler, self.batch_sampler = sampler, batch_sampler
        if collate_fn is None:
            collate_fn = default_collate if self.batch_size is not None or \
                batch_sampler is not None else default_convert
        self.collate_fn = collate_fn

    def __iter__(self):
        if self._iterable:
            yield from self._iter_stream()
        elif self.batch_sampler is not None:
            for indices in self.batch_sampler:
                yield self.collate_fn([self.dataset[i] for i in indices])
        else:
            for i in self.sampler:
                yield self.collate_fn(self.dataset[i])

    def _iter_stream(self):
        it = iter(self.dataset)
        if self.batch_size is None:
            yield from (self.collate_fn(s) for s in it)
            return
        while True:
            batch = list(itertools.islice(it, self.batch_size))
            if not batch or (self.drop_last and len(batch) < self.batch_size):
                return
            yield self.collate_fn(batch)

    def __len__(self) -> int:
        if self._iterable:
            n = len(self.dataset)
            if self.batch_size is None:
                return n
            return n // self.batch_size if self.drop_last else -(-n // self.batch_size)
        return len(self.batch_sampler if self.batch_sampler is not None else self.sampler)
