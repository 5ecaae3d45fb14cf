"""Converted source on disk (issue 12, warm start; tracer/convert/stored.py, Note [Converted
code on disk]): a second import of a function converts nothing when its source and what its
names are bound to are unchanged; a changed source, a changed global, a damaged or foreign
entry is converted afresh. Each import below makes new function objects from one file, as a
new process would."""
import importlib.util
import itertools
import os

import numpy as np
import pytest

import llgrad
from llgrad import cache
from llgrad.tracer.convert import api as convert_api
from tests.e2e.test_disk_cache import entries

_names = itertools.count()

BODY = '''
import numpy as np

HELPER


def loss(x, n):
    total = 0.0
    for i in range(n):
        if total < 3.0:
            total = total + helper(np.sin(x) * (i + 1))
        else:
            total = total - 0.5 * np.sum(x)
    return total
'''
LIBRARY = "helper = np.sum"
USER = '''def helper(v):
    s = 0.0
    for k in range(v.shape[0]):
        s = s + v[k] * v[k]
    return s'''


def _load(path, text):
    """The module `text` written at `path`, imported afresh (a new module object)."""
    if text is not None:
        path.write_text(text)
        os.utime(path, ns=(0, next(_names) * 10 ** 9))  # (a new mtime for each text)
    spec = importlib.util.spec_from_file_location(f"lg_conv_{next(_names)}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def parses(monkeypatch):
    """The functions the gast pipeline parsed (the conversions not taken from disk)."""
    seen = []
    real = convert_api.parse_function

    def counting(fn):
        seen.append(fn.__name__)
        return real(fn)
    monkeypatch.setattr(convert_api, "parse_function", counting)
    return seen


def _reference(x, n, helper):
    total = 0.0
    for i in range(n):
        total = total + helper(np.sin(x) * (i + 1)) if total < 3.0 else total - 0.5 * np.sum(x)
    return total


def _check(module, x, helper):
    d = llgrad.differentiate(module.loss)
    v, g = d.value_and_grad(x, 4)
    assert v == pytest.approx(_reference(x, 4, helper), rel=1e-12)
    eps = 1e-6
    fd = [(_reference(x + eps * e, 4, helper) - _reference(x - eps * e, 4, helper)) / (2 * eps)
          for e in np.eye(len(x))]
    np.testing.assert_allclose(g, fd, rtol=1e-6, atol=1e-8)


X = np.array([0.3, -0.2, 0.1])


def test_a_second_import_converts_nothing(tmp_path, cache_dir, parses, monkeypatch):
    monkeypatch.setenv("LLGRAD_CACHE", "1")
    path = tmp_path / "user_mod.py"
    _check(_load(path, BODY.replace("HELPER", LIBRARY)), X, np.sum)
    assert parses == ["loss"]
    assert len(entries(cache_dir, "conversion")) == 1
    _check(_load(path, None), X, np.sum)  # the same file: converted code from the disk
    assert parses == ["loss"]


def test_changed_source_or_global_is_converted_again(tmp_path, cache_dir, parses,
                                                      monkeypatch):
    monkeypatch.setenv("LLGRAD_CACHE", "1")
    path = tmp_path / "user_mod.py"
    _check(_load(path, BODY.replace("HELPER", LIBRARY)), X, np.sum)
    # `helper` becomes a function of the user's: its call must go through the converter
    # (its loop staged), though loss's source is the same
    user = {}
    exec(USER, {"np": np}, user)
    _check(_load(path, BODY.replace("HELPER", USER)), X, user["helper"])
    assert parses == ["loss", "loss", "helper"]
    _check(_load(path, None), X, user["helper"])  # both from the disk now
    assert parses == ["loss", "loss", "helper"]
    changed = BODY.replace("HELPER", USER).replace("0.5 * np.sum", "0.25 * np.sum")
    mod = _load(path, changed)
    v = llgrad.differentiate(mod.loss)(X, 4)
    assert parses[-1:] == ["loss"] and len(parses) == 4  # a new source: converted
    assert v == pytest.approx(mod.loss(X, 4), rel=1e-12)


def test_damaged_or_foreign_entries_are_converted_again(tmp_path, cache_dir, parses,
                                                         monkeypatch):
    monkeypatch.setenv("LLGRAD_CACHE", "1")
    path = tmp_path / "user_mod.py"
    text = BODY.replace("HELPER", LIBRARY)
    _check(_load(path, text), X, np.sum)
    (entry,) = entries(cache_dir, "conversion")
    k = os.path.basename(entry)[:-5]
    meta = cache.load(k)[0]
    data = bytearray(open(entry, "rb").read())
    data[-1] ^= 0xFF  # a flipped byte: the checksum refuses it
    open(entry, "wb").write(data)
    _check(_load(path, None), X, np.sum)
    assert parses == ["loss", "loss"]  # converted again, and rewritten
    other = tmp_path / "other_mod.py"
    llgrad.differentiate(_load(other, text.replace("def loss", "def other")).other)(X, 4)
    (foreign,) = [e for e in entries(cache_dir, "conversion") if e != entry]
    tampered = [b"not marshal data", cache.load(os.path.basename(foreign)[:-5])[1]]
    for payload in tampered:  # valid checksums: not a code object, another file's code
        cache.store(k, meta, payload)
        _check(_load(path, None), X, np.sum)
    assert parses == ["loss", "loss", "other", "loss", "loss"]


def test_nothing_is_kept_without_the_disk_cache(tmp_path, cache_dir, parses):
    path = tmp_path / "user_mod.py"
    _check(_load(path, BODY.replace("HELPER", LIBRARY)), X, np.sum)
    _check(_load(path, None), X, np.sum)
    assert parses == ["loss", "loss"] and not cache_dir.exists()
