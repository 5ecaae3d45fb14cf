"""vmap through the public API (llgrad/batching.py, transform/vmap.py): `vmap(f)(xs)` equals
`np.stack([f(x) for x in xs])` on the control-flow corpus and the OpInfo table, native and
interpreted; in_axes/out_axes; composition with grad, jvp and itself; errors."""
from __future__ import annotations

import numpy as np
import pytest

import llgrad
from tests import cf_corpus

CASES = cf_corpus.CASES
B = 4


def _batch(make_args, n=B):
    """(the stacked array arguments, in_axes, the per-example argument tuples): examples
    from seeds 0..n-1; non-array arguments (ints, objects) fixed to seed 0's."""
    base = make_args(0)
    examples = []
    for s in range(n):
        args = make_args(s)
        examples.append(tuple(
            np.float64(a) if isinstance(a, float) else a if _mapped(b) else b
            for a, b in zip(args, base)))
    axes = tuple(0 if _mapped(a) else None for a in base)
    stacked = tuple(np.stack([e[k] for e in examples]) if ax == 0 else base[k]
                    for k, ax in enumerate(axes))
    return stacked, axes, examples


def _mapped(a) -> bool:
    return isinstance(a, (np.ndarray, float, np.floating))


def _per_example(f, examples):
    outs = [f(*[np.copy(a) if isinstance(a, np.ndarray) else a for a in e]) for e in examples]
    return np.stack([np.asarray(o) for o in outs])


@pytest.mark.parametrize("name", sorted(CASES))
def test_vmap_on_the_control_flow_corpus(name, mode):
    c = CASES[name]
    stacked, axes, examples = _batch(c.args)
    with np.errstate(all="ignore"):
        want = _per_example(c.fn, examples)
        got = llgrad.vmap(c.fn, in_axes=axes)(*stacked)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
