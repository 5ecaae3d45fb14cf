"""Random numbers with PyTorch's API: `Generator` objects (`manual_seed`, `seed`,
`initial_seed`, `get_state`/`set_state`), the default generator behind `llgrad.manual_seed`, and
the sampling functions (rand, randn, randint, randperm, normal, bernoulli, multinomial and the
`*_like` forms), each taking `generator=`.

A Generator wraps a numpy PCG64 bit generator (`numpy.random.default_rng(seed)`'s): a seed
gives the same numbers on every run and platform, but not the numbers PyTorch's Mersenne
Twister gives for that seed. An unseeded generator starts from seed 0. The numpy generator is
made on first use: `numpy.random` is a lazily imported subpackage (~15 ms), and
`import llgrad` should not pay for it in a script that never draws a number. Samples carry no
gradient (as PyTorch's, whose sampling functions have zero or no derivative).
"""
from __future__ import annotations

import time

import numpy as np

from llgrad.runtime.aval import DEFAULT_FLOAT, I64, to_np
from llgrad.runtime.tensor import Tensor


class Generator:
    """A source of random numbers (torch.Generator): `Generator().manual_seed(0)`.

    Example:
        >>> import llgrad as lg
        >>> g = lg.Generator().manual_seed(0)
        >>> lg.rand(2, generator=g).tolist() == lg.rand(2, generator=lg.Generator().manual_seed(0)).tolist()
        True
    """

    def __init__(self, device="cpu"):
        if str(device) != "cpu":
            raise ValueError(f"llgrad generators are on the cpu, not {device!r}")
        self.device = "cpu"
        self.manual_seed(0)

    def manual_seed(self, seed) -> "Generator":
        """Seed the generator; returns it (so `Generator().manual_seed(s)` is one line)."""
        self._seed, self._np = int(seed), None
        return self

    def _numpy(self) -> np.random.Generator:
        g = self._np
        if g is None:
            g = self._np = np.random.default_rng(self._seed & (2 ** 64 - 1))
        return g

    def seed(self) -> int:
        """Seed from the clock (non-deterministically); returns the seed used."""
        s = time.time_ns() & (2 ** 63 - 1)
        self.manual_seed(s)
        return s

    def initial_seed(self) -> int:
        return self._seed

    def get_state(self) -> Tensor:
        """The generator's state as a tensor of byte values (int64), for `set_state`."""
        import json  # noqa: PLC0415  (on first use: `import llgrad` stays light)
        state = dict(self._numpy().bit_generator.state, seed=self._seed)
        raw = np.frombuffer(json.dumps(state).encode(), np.uint8).astype(np.int64)
        return Tensor._wrap(raw)

    def set_state(self, new_state) -> "Generator":
        """Restore a state from `get_state` (of this or another llgrad Generator)."""
        import json  # noqa: PLC0415
        raw = np.asarray(new_state._data if isinstance(new_state, Tensor) else new_state)
        try:
            state = json.loads(bytes(raw.astype(np.uint8).tolist()).decode())
            seed = state.pop("seed")
            bits = np.random.PCG64()
            bits.state = state
        except (ValueError, KeyError, TypeError, AttributeError):
            raise ValueError("set_state: not a state from an llgrad Generator's get_state()") \
                from None
        self._seed, self._np = int(seed), np.random.Generator(bits)
        return self

    def __repr__(self) -> str:
        return "<llgrad.Generator object>"


default_generator = Generator()


def manual_seed(seed) -> Generator:
    """Seed the default generator (used by rand/randn/dropout/initialisation); returns it."""
    return default_generator.manual_seed(seed)


def seed() -> int:
    """Seed the default generator from the clock; returns the seed."""
    return default_generator.seed()


def initial_seed() -> int:
    return default_generator.initial_seed()


def get_rng_state() -> Tensor:
    return default_generator.get_state()


def set_rng_state(new_state) -> None:
    default_generator.set_state(new_state)


def numpy_rng(generator=None) -> np.random.Generator:
    """The numpy generator behind `generator` (the default generator when None)."""
    if generator is None:
        return default_generator._numpy()
    if not isinstance(generator, Generator):
        raise TypeError(f"generator must be an llgrad.Generator, got "
                        f"{type(generator).__name__}")
    return generator._numpy()


# ---- sampling ----------------------------------------------------------------------------------
def _size(size) -> tuple:
    if len(size) == 1 and isinstance(size[0], (tuple, list)):
        size = size[0]
    return tuple(int(s) for s in size)


def _make(arr, dtype, requires_grad=False) -> Tensor:
    t = Tensor._wrap(arr.astype(dtype, copy=False))
    return t.requires_grad_(True) if requires_grad else t


def _float_dtype(dtype):
    dt = to_np(dtype) or DEFAULT_FLOAT
    if dt.kind != "f":
        raise TypeError(f"this sampler makes floating point numbers, not {dt}")
    return dt


def rand(*size, generator=None, dtype=None, requires_grad=False, device=None) -> Tensor:
    """Uniform on [0, 1)."""
    dt = _float_dtype(dtype)
    return _make(numpy_rng(generator).random(_size(size)), dt, requires_grad)


def randn(*size, generator=None, dtype=None, requires_grad=False, device=None) -> Tensor:
    """Standard normal."""
    dt = _float_dtype(dtype)
    return _make(numpy_rng(generator).standard_normal(_size(size)), dt, requires_grad)


def randint(*args, low=None, high=None, size=None, generator=None, dtype=None,
            requires_grad=False, device=None) -> Tensor:
    """Integers uniform on [low, high): `randint(high, size)` or `randint(low, high, size)`."""
    args = list(args)
    if size is None and args and isinstance(args[-1], (tuple, list)):
        size = args.pop()
    if high is not None:
        args.append(high)
    if low is not None:
        args.insert(0, low)
    if len(args) == 1:
        low, high = 0, args[0]
    elif len(args) == 2:
        low, high = args
    else:
        raise TypeError("randint(low=0, high, size): give high, or low and high, and a size")
    if size is None:
        raise TypeError("randint() missing the size argument (a tuple of ints)")
    low, high = int(low), int(high)
    if high <= low:
        raise ValueError(f"randint: expected low < high, got low={low}, high={high}")
    dt = to_np(dtype) or I64
    return _make(numpy_rng(generator).integers(low, high, _size((size,))), dt, requires_grad)


def randperm(n, *, generator=None, dtype=None, requires_grad=False, device=None) -> Tensor:
    """A random permutation of 0, ..., n-1."""
    return _make(numpy_rng(generator).permutation(int(n)), to_np(dtype) or I64, requires_grad)


def _data(x):
    return x._data if isinstance(x, Tensor) else np.asarray(x)


def normal(mean=0.0, std=1.0, size=None, *, generator=None, dtype=None,
           requires_grad=False) -> Tensor:
    """Normal samples: `normal(mean, std)` elementwise over tensor means and/or stds (of their
    broadcast shape), or `normal(mean, std, size)` for numbers."""
    m, s = _data(mean), _data(std)
    if np.any(s < 0):
        raise ValueError("normal: std must be >= 0")
    tensors = [x for x in (mean, std) if isinstance(x, Tensor)]
    if size is not None:
        if tensors:
            raise TypeError("normal: give size only with a number mean and std")
        shape = _size((size,))
        dt = _float_dtype(dtype)
    else:
        if not tensors:
            raise TypeError("normal(mean, std) of two numbers needs a size")
        shape = np.broadcast_shapes(m.shape, s.shape)
        dt = to_np(dtype) or np.result_type(*(t._data.dtype for t in tensors))
    z = numpy_rng(generator).standard_normal(shape)
    return _make(m + s * z, dt, requires_grad)


def bernoulli(input, p=None, *, generator=None) -> Tensor:
    """1 with probability `input` (or `p`) elementwise, else 0, in input's dtype."""
    probs = _data(input) if p is None else np.broadcast_to(np.asarray(p), _data(input).shape)
    if np.any((probs < 0) | (probs > 1)) or np.any(np.isnan(probs)):
        raise ValueError("bernoulli: probabilities must be in [0, 1]")
    u = numpy_rng(generator).random(probs.shape)
    return _make(u < probs, _data(input).dtype)


def multinomial(input, num_samples, replacement=False, *, generator=None) -> Tensor:
    """Indices drawn from the categories weighted by each row of `input` (1-D or 2-D)."""
    w = _data(input).astype(np.float64)
    if w.ndim not in (1, 2):
        raise ValueError(f"multinomial: input must be 1-D or 2-D, got {w.ndim}-D")
    if np.any(w < 0) or not np.all(np.isfinite(w)):
        raise ValueError("multinomial: weights must be finite and non-negative")
    rows = w.reshape(-1, w.shape[-1])
    rng = numpy_rng(generator)
    out = []
    for row in rows:
        total = row.sum()
        if total <= 0:
            raise ValueError("multinomial: a row of weights sums to 0")
        if not replacement and num_samples > np.count_nonzero(row):
            raise ValueError(f"multinomial: cannot draw {num_samples} samples without "
                             f"replacement from {np.count_nonzero(row)} non-zero categories")
        out.append(rng.choice(row.size, num_samples, replace=replacement, p=row / total))
    res = np.stack(out) if out else np.zeros((0, num_samples), np.int64)
    return _make(res.reshape(w.shape[:-1] + (num_samples,)), I64)


def rand_like(input, *, dtype=None, requires_grad=False, generator=None) -> Tensor:
    return rand(*input.shape, dtype=dtype or input.dtype, requires_grad=requires_grad,
                generator=generator)


def randn_like(input, *, dtype=None, requires_grad=False, generator=None) -> Tensor:
    return randn(*input.shape, dtype=dtype or input.dtype, requires_grad=requires_grad,
                 generator=generator)


def randint_like(input, low=0, high=None, *, dtype=None, generator=None) -> Tensor:
    if high is None:
        low, high = 0, low
    return randint(low, high, tuple(input.shape), dtype=dtype or input.dtype,
                   generator=generator)


__all__ = ["Generator", "default_generator", "manual_seed", "seed", "initial_seed",
           "get_rng_state", "set_rng_state", "rand", "randn", "randint", "randperm", "normal",
           "bernoulli", "multinomial", "rand_like", "randn_like", "randint_like"]
