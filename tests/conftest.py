"""Shared test fixtures: a seeded rng, dtype parameters, the tolerance table, --update-golden.

Oracles (STYLE.md, Tests): numpy for values, central finite differences (tests/fd.py) for
gradients. Tests never import torch; PyTorch semantics are pinned as literal expectations.
"""
from __future__ import annotations

import numpy as np
import pytest

from fd import FD_TOL, TOL  # noqa: F401  (the tolerance table lives in tests/fd.py)


def pytest_addoption(parser):
    parser.addoption("--update-golden", action="store_true", default=False,
                     help="rewrite tests/golden/* fixtures from the current output")


@pytest.fixture
def update_golden(request) -> bool:
    return request.config.getoption("--update-golden")


@pytest.fixture
def rng() -> np.random.Generator:
    """A fresh generator with a fixed seed, so every test sees the same inputs."""
    return np.random.default_rng(0)


@pytest.fixture(autouse=True)
def _seed_llgrad():
    """Seed llgrad's global generator (rand/randn) before each test."""
    try:
        import llgrad
    except ImportError:  # pragma: no cover - the package is installed editable in CI
        return
    llgrad.manual_seed(0)


@pytest.fixture(params=[np.float32, np.float64], ids=["f32", "f64"])
def float_dtype(request):
    return np.dtype(request.param)
