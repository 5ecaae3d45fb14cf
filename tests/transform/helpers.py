"""Shared helpers of the transform tests: build IR from a plain numpy function, run the same
function eagerly (llgrad tensors) and compare with finite differences."""
from __future__ import annotations

import os
import pathlib
import sys

import numpy as np

import llgrad as lg
from llgrad.transform.builder import Builder

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
from fd import numerical_vjp  # noqa: E402

GOLDEN = pathlib.Path(__file__).resolve().parents[1] / "golden"


def build(f, *args, name=None):
    """Trace `f` on IR params shaped like `args` (loc-free, so golden text is stable)."""
    b = Builder(name or f.__name__, loc=None)
    with b:
        ps = [b.param((np.shape(a), np.asarray(a).dtype), n)
              for a, n in zip(args, f.__code__.co_varnames)]
        out = f(*ps)
        outs = list(out) if isinstance(out, (tuple, list)) else [out]
        b.fn.body.results.extend(b.lift(o) for o in outs)
    return b.fn


def eager_value_and_grad(f, args, wrt):
    ts = [lg.tensor(np.asarray(a), requires_grad=i in wrt) for i, a in enumerate(args)]
    y = f(*ts)
    y.backward()
    return y.detach().numpy(), [ts[i].grad.numpy() if ts[i].grad is not None
                       else np.zeros_like(args[i]) for i in wrt]


def fd_grad(f, args, wrt):
    return numerical_vjp(lambda *a: np.asarray(f(*a)), args, np.array(1.0), wrt)


def check_golden(name: str, text: str, update: bool = False) -> None:
    path = GOLDEN / name
    if update or os.environ.get("LLGRAD_UPDATE_GOLDEN") == "1" or not path.exists():
        path.write_text(text)
        return
    assert text == path.read_text(), f"{name} changed; rerun with LLGRAD_UPDATE_GOLDEN=1 and " \
                                     f"review the diff"
