"""Globals and closure values read by compiled code (Note [Captured values are guarded] in
tracer/captures.py): changing them between calls gives what Python gives (the function is
traced again), and leaving them alone costs no retrace."""
from __future__ import annotations

import copy
import dataclasses
import sys
import types

import numpy as np
import pytest

import llgrad
from llgrad.runtime.errors import RetraceWarning

W = np.array([1.0, 2.0])
SCALE = 2.0
OFFSET = 1.0
WITH_NAN = np.array([np.nan, 1.0])
X = np.array([1.0, 1.0])


def _helper(v):
    return v * OFFSET


def uses_globals(x):
    return np.sum(W * x) * SCALE + _helper(x[0])


def uses_nan_global(x):
    return np.sum(np.where(np.isnan(WITH_NAN), 0.0, WITH_NAN) * x)


def _agree(d, fn):
    value, grad = d.value_and_grad(X)
    assert float(d(X)) == value == fn(X)
    eps = 1e-6
    fd = [(fn(X + e) - fn(X - e)) / (2 * eps) for e in np.eye(2) * eps]
    np.testing.assert_allclose(grad, fd, rtol=1e-6)


def test_changed_globals_are_read_again_as_in_python(mode, monkeypatch):
    module = sys.modules[__name__]
    monkeypatch.setattr(module, "W", W.copy())
    d = llgrad.differentiate(uses_globals)
    _agree(d, uses_globals)
    for _ in range(3):
        d(X)
    assert d.cache_info()["traces"] == 1  # unchanged globals: no retrace
    module.W[0] = 10.0  # mutated in place
    _agree(d, uses_globals)
    monkeypatch.setattr(module, "SCALE", 3.0)  # rebound
    _agree(d, uses_globals)
    monkeypatch.setattr(module, "W", np.array([5.0, 5.0]))  # W changed before: an input now
    _agree(d, uses_globals)
    monkeypatch.setattr(module, "OFFSET", 7.0)  # read by a helper
    _agree(d, uses_globals)
    assert d.cache_info()["traces"] == 4


def test_closure_arrays_are_guarded(mode):
    c = np.array([2.0, 2.0])

    def g(x):
        return np.sum(c * x * x)
    d = llgrad.differentiate(g)
    _agree(d, g)
    c[1] = -3.0
    _agree(d, g)


def test_an_unchanged_array_with_nan_does_not_retrace():
    d = llgrad.differentiate(uses_nan_global)
    for _ in range(3):
        assert d(X) == 1.0
    assert d.cache_info()["traces"] == 1


# ---- objects: attribute and item reads (`cfg.lr`) are guarded by a snapshot of the object ----
CFG = types.SimpleNamespace(lr=0.5, sub=types.SimpleNamespace(w=np.array([1.0, -1.0])))
TABLE = {"scale": 2.0, "coeffs": [1.0, 3.0]}


@dataclasses.dataclass
class Settings:
    power: int = 2
    shift: float = 0.0


SETTINGS = Settings()


def uses_config(x):
    return np.sum(CFG.sub.w * x) * CFG.lr + TABLE["scale"] * x[0] * TABLE["coeffs"][1]


def uses_settings(x):
    return np.sum((x - SETTINGS.shift) ** SETTINGS.power)


def test_changed_attributes_of_global_objects_are_read_again(mode, monkeypatch):
    module = sys.modules[__name__]
    monkeypatch.setattr(module, "CFG", copy.deepcopy(CFG))
    monkeypatch.setattr(module, "TABLE", copy.deepcopy(TABLE))
    d = llgrad.differentiate(uses_config)
    _agree(d, uses_config)
    for _ in range(3):
        d(X)
    assert d.cache_info()["traces"] == 1  # unchanged objects: no retrace
    module.CFG.lr = 0.25  # an attribute rebound
    _agree(d, uses_config)
    module.CFG.sub.w[1] = 4.0  # an array two attributes deep, mutated in place
    _agree(d, uses_config)
    module.TABLE["coeffs"][1] = -2.0  # an item of a list in a dict
    _agree(d, uses_config)
    monkeypatch.setattr(module, "CFG", copy.deepcopy(module.CFG))  # equal contents: no retrace
    _agree(d, uses_config)
    assert d.cache_info()["traces"] == 4


def test_changed_dataclass_fields_are_read_again(mode):
    d = llgrad.differentiate(uses_settings)
    _agree(d, uses_settings)
    SETTINGS.power, SETTINGS.shift = 3, 0.5
    try:
        _agree(d, uses_settings)
    finally:
        SETTINGS.power, SETTINGS.shift = 2, 0.0
    _agree(d, uses_settings)


def test_closure_objects_are_guarded(mode):
    opts = types.SimpleNamespace(lr=0.1)

    def step(x):
        return np.sum(x * x) * opts.lr
    d = llgrad.differentiate(step)
    _agree(d, step)
    opts.lr = 2.0
    _agree(d, step)
    assert d(X) == 4.0


NESTED = types.SimpleNamespace(scale=2, sizes=[1.0, 2.0], opts={"p": (1.0, 3.0)}, bad=np.nan)


def uses_nested_config(x):
    return np.sum(x * NESTED.scale) * NESTED.sizes[1] + x[0] ** NESTED.opts["p"][1]


def test_nested_config_changes_are_seen(mode, monkeypatch):
    """A config of numbers, lists, dicts and tuples is checked by identity, recursively; an
    equal number of another type (2 -> 2.0) or a NaN attribute are Python's values too."""
    module = sys.modules[__name__]
    monkeypatch.setattr(module, "NESTED", copy.deepcopy(NESTED))
    d = llgrad.differentiate(uses_nested_config)
    _agree(d, uses_nested_config)
    d(X)
    assert d.cache_info()["traces"] == 1  # NaN == NaN here: no retrace
    module.NESTED.sizes[1] = -4.0
    _agree(d, uses_nested_config)
    module.NESTED.opts["p"] = (1.0, 2.0)
    _agree(d, uses_nested_config)
    module.NESTED.scale = 2.0  # equal, but a float: traced again (weak float, not int)
    _agree(d, uses_nested_config)
    module.NESTED.bad = float("nan")  # another NaN object, the same value: no new trace
    _agree(d, uses_nested_config)
    assert d.cache_info()["traces"] == 4


CALLS = types.SimpleNamespace(n=0)


def counts_its_traces(x):
    CALLS.n += 1  # a side effect on a global object: happens while the function is traced
    return np.sum(x)


def test_an_object_the_function_changes_itself_does_not_retrace_every_call(mode):
    d = llgrad.differentiate(counts_its_traces)
    for _ in range(3):
        assert d(X) == 2.0
    assert d.cache_info()["traces"] == 1


LOG: list = []


def logs_outside(x):
    return np.sum(x) * len(LOG)


def test_a_global_that_keeps_changing_warns_once_naming_it():
    d = llgrad.differentiate(logs_outside)
    with pytest.warns(RetraceWarning, match="global 'LOG' changed") as record:
        for k in range(12):
            LOG.append(k)  # changed between calls: each call traces again, as it must
            assert d(X) == logs_outside(X)
    assert len(record) == 1
    LOG.clear()
