"""Every corpus function, converted, equals the original on plain Python/numpy values."""

import copy

import numpy as np
import pytest

from llgrad.tracer.convert import convert

import convert_corpus as corpus


def _run(fn, args):
    try:
        return "ok", fn(*copy.deepcopy(args))
    except Exception as e:  # noqa: BLE001 (compare exceptions too)
        return "raised", type(e)


def _same(a, b) -> bool:
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return np.array_equal(a, b)
    if isinstance(a, (tuple, list)) and isinstance(b, (tuple, list)):
        return type(a) is type(b) and len(a) == len(b) and all(map(_same, a, b))
    return a == b and type(a) is type(b)


@pytest.mark.parametrize("fn, arg_sets", corpus.CASES, ids=[f.__name__ for f, _ in corpus.CASES])
def test_converted_equals_python(fn, arg_sets):
    converted = convert(fn)
    for args in arg_sets:
        expected, got = _run(fn, args), _run(converted, args)
        assert expected[0] == got[0] and _same(expected[1], got[1]), (args, expected, got)


def test_mutable_default_is_shared():
    converted = convert(corpus.mutable_default)
    corpus.mutable_default(1)
    converted(2)
    assert corpus.mutable_default.__defaults__[0] == [1, 2]


def test_global_write_plain():
    corpus.GLOBAL_COUNTER = 0
    assert convert(corpus.global_write)(1) == 1
    assert corpus.GLOBAL_COUNTER == 1
    assert convert(corpus.global_write)(-1) == 1


def test_undefined_variable_raises_like_python():
    with pytest.raises(UnboundLocalError, match="'y'"):
        convert(corpus.maybe_undefined)(-1)


def test_cached_per_function():
    assert convert(corpus.if_else) is convert(corpus.if_else)


def test_helpers_are_converted_recursively():
    from llgrad.tracer.convert import api
    convert(corpus.helper_calls)(corpus._x)
    assert corpus.helper_abs in api._CACHE and corpus.helper_recursive in api._CACHE
    assert np.sin not in api._CACHE


def test_tracebacks_name_the_users_line():
    import traceback
    try:
        convert(corpus.raises_inside)(1)
    except ValueError as e:
        frames = traceback.extract_tb(e.__traceback__)
    last = frames[-1]
    assert last.filename == corpus.__file__
    assert last.line.strip() == 'raise ValueError("positive")'


def test_bound_methods_and_method_calls():
    from llgrad.tracer.convert import api
    m = corpus.Model(2.0)
    assert convert(m.total)(corpus._x) == m.total(corpus._x)
    assert corpus.Model.scale in api._CACHE  # reached through converted_call on self.scale
