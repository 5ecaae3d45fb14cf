"""parsing.source_lines: the converter's source of a function, found by indentation where that
is certain (Note [Finding the source]) and otherwise by inspect; always what
`inspect.getsourcelines` finds, up to trailing comment lines, with the same first line."""
import functools
import importlib.util
import inspect
import textwrap

import numpy as np
import pytest

import llgrad
from llgrad.tracer.convert import parsing, source_lines

MODULE = '''\
import functools


def deco(f):
    return f


def plain(x):
    return x + 1


@deco
def decorated(x):
    y = x * 2
    return y


@functools.lru_cache(
    maxsize=None)
@deco
def multi_line_decorator(x):
    return x


def outer(x):
    def inner(y):
        return y * x
    # a comment inside, at the body's level
    return inner


class Model:
    def method(self, x):
        return x

    @staticmethod
    def static(x):
        return x

    @classmethod
    def klass(cls, x):
        return x


def before_comment(x):
    return x
# a comment at column 0, then the next function
def after_comment(x):
    return x


def header_continues(
x):
    return x


def string_at_column_0(x):
    s = """
not code
"""
    return x


def tabs(x):
\tif x:
\t\treturn x
\treturn -x

one_liner = lambda x: x + 1


def last(x):
    return x'''  # no newline at the end of the file


@pytest.fixture(scope="module")
def mod(tmp_path_factory):
    path = tmp_path_factory.mktemp("src") / "source_lines_cases.py"
    path.write_text(MODULE)
    spec = importlib.util.spec_from_file_location("source_lines_cases", path)
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    return m


def _cases(m):
    return [m.plain, m.decorated, m.multi_line_decorator.__wrapped__, m.outer, m.outer(2),
            m.Model.method, m.Model().method, m.Model.static, m.Model.klass, m.before_comment,
            m.after_comment, m.header_continues, m.string_at_column_0, m.tabs, m.one_liner,
            m.last]


def _without_trailing_comments(lines):
    lines = list(lines)
    while lines and lines[-1].lstrip()[:1] in ("", "#"):
        lines.pop()
    return lines


def test_same_lines_as_inspect(mod):
    for fn in _cases(mod):
        parsing._SOURCES.clear()
        lines, first = source_lines(fn)
        want, want_first = inspect.getsourcelines(fn)
        assert first == want_first, fn
        assert _without_trailing_comments(lines) == _without_trailing_comments(want), fn


def test_a_def_is_found_without_tokenizing(mod, monkeypatch):
    fns = (mod.plain, mod.decorated, mod.multi_line_decorator.__wrapped__, mod.outer(2),
           mod.Model.static, mod.before_comment, mod.after_comment, mod.last)
    want = [inspect.getsourcelines(fn) for fn in fns]

    def no_tokenize(lines):
        raise AssertionError("inspect.getblock tokenized the source")
    parsing._SOURCES.clear()
    monkeypatch.setattr(inspect, "getblock", no_tokenize)
    for fn, (lines, first) in zip(fns, want):
        assert source_lines(fn) == (_without_trailing_comments(lines), first), fn


def test_uncertain_layouts_fall_back_to_inspect(mod):
    for fn in (mod.header_continues, mod.string_at_column_0, mod.tabs):
        lines, first = inspect.findsource(fn)
        assert parsing._def_block(lines, first, fn.__name__) is None, fn


def test_read_once_per_code_object(mod, monkeypatch):
    calls = []
    real = inspect.findsource
    monkeypatch.setattr(inspect, "findsource", lambda f: calls.append(f) or real(f))
    parsing._SOURCES.clear()
    a, b = mod.outer(1), mod.outer(2)  # two closures, one code object
    assert source_lines(a) is source_lines(b)
    assert len(calls) == 1


def test_no_source_raises_like_inspect():
    ns = {}
    exec("def f(x):\n    return x\n", ns)
    with pytest.raises(OSError):
        source_lines(ns["f"])


def test_a_wrapper_is_read_as_itself_not_as_the_function_it_wraps(mod):
    """inspect.getsourcelines unwraps (`__wrapped__`, set by functools.wraps): converting the
    wrapped function in the wrapper's place dropped what the wrapper does."""
    @functools.wraps(mod.plain)
    def wrapper(x):
        return mod.plain(x)
    lines, first = source_lines(wrapper)
    assert (lines, first) != inspect.getsourcelines(wrapper)  # (mod.plain's)
    assert first == wrapper.__code__.co_firstlineno and "def wrapper(x):" in lines[1]


def test_decorated_nested_function_compiles_with_its_lines(rng):
    def outer_scale(s):
        @llgrad.differentiate
        def f(x):
            if np.sum(x) > 0:  # staged: needs the converted source
                return np.sum(x * s)
            return np.sum(x * x)
        return f
    x = rng.standard_normal(4) + 3
    f = outer_scale(2.0)
    np.testing.assert_allclose(f.grad(x), np.full(4, 2.0))
    src = textwrap.dedent("".join(source_lines(f.fn)[0]))
    assert src.startswith("@llgrad.differentiate\ndef f(x):")
    assert source_lines(f.fn)[1] == inspect.getsourcelines(f.fn)[1]
