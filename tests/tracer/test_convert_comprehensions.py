"""List comprehensions rewritten to `__lg.list_comp` loops (Note [Comprehensions as loops] in
tracer/convert/comprehensions.py): which are rewritten, and that on Python data the converted
function is exactly the original (values, scoping, evaluation order, errors)."""
from __future__ import annotations

import math

import pytest

from llgrad.tracer.convert import convert


def words(ws):
    return [w.upper() + "!" for w in ws]


def shape_from_range(n):
    return tuple([2 * i + 1 for i in range(n)])


def dict_items(d):
    return sorted(k + str(v) for k, v in d.items())


def nested(rows):
    return [[a * b for a in row] for b, row in enumerate(rows)]


def closure_and_no_leak(xs):
    x = "outer"
    scale = 3
    ys = [x * scale for x in xs]
    return ys, x


def inner_reads_outer_target(rows):
    return [[v + len(row) for v in row] for row in rows]


def in_a_lambda(xs):
    f = lambda ys: [y * 2 for y in ys]  # noqa: E731
    return f(xs)


def consumers(xs):
    return (sum(x * x for x in xs), max(x - 1 for x in xs), min((-x for x in xs), default=0),
            tuple(str(x) for x in xs), sorted((x % 3 for x in xs), reverse=True),
            math.fsum(x / 10 for x in xs), list(x for x in xs))


def unpacking(pairs):
    return [a + b * c for a, (b, c) in pairs]


def with_filters(xs):
    return ([x for x in xs if x % 2], [x + y for x in xs for y in xs], {x % 3 for x in xs},
            {x: x * x for x in xs}, any(x > 2 for x in xs), list(zip(x for x in xs)))


CASES = [(words, (["a", "bc"],)), (shape_from_range, (4,)), (dict_items, ({"a": 1, "b": 2},)),
         (nested, ([[1, 2], [3, 4, 5]],)), (closure_and_no_leak, ([1, 2],)),
         (inner_reads_outer_target, ([[1], [2, 3]],)), (in_a_lambda, ([1, 2],)),
         (consumers, ([3, 1, 4, 1, 5],)), (unpacking, ([(1, (2, 3)), (4, (5, 6))],)),
         (with_filters, ([1, 2, 3],)), (shape_from_range, (0,)), (consumers, ([7],))]


@pytest.mark.parametrize("fn,args", CASES, ids=lambda c: getattr(c, "__name__", ""))
def test_python_data_gives_what_python_gives(fn, args):
    assert convert(fn)(*args) == fn(*args)


@pytest.mark.parametrize("fn,rewritten", [
    (words, 1), (nested, 2), (in_a_lambda, 1), (consumers, 7), (unpacking, 1),
    (with_filters, 0)], ids=lambda c: getattr(c, "__name__", ""))
def test_which_comprehensions_are_rewritten(fn, rewritten):
    source = convert(fn).source
    assert source.count("__lg.list_comp(") == rewritten, source


def test_unpacking_errors_are_pythons():
    for pairs in ([(1, (2,))], [(1, (2, 3, 4))], [(1,)]):
        with pytest.raises(ValueError) as want:
            unpacking(pairs)
        with pytest.raises(ValueError) as got:
            convert(unpacking)(pairs)
        assert str(got.value) == str(want.value)


def test_the_iterable_is_evaluated_once_before_the_elements():
    log = []

    def source():
        log.append("iter")
        return [1, 2]

    def element(x):
        log.append(x)
        return x

    def fn():
        return [element(x) for x in source()]

    assert convert(fn)() == [1, 2] and log == ["iter", 1, 2]


def test_a_local_named_like_a_consumer_is_not_one():
    def fn(xs):
        sum = list  # noqa: A001
        return sum(x for x in xs)

    assert "list_comp" not in convert(fn).source
    assert convert(fn)([1, 2]) == [1, 2]


def late_binding(n):
    fs = [lambda: i for i in range(n)]  # noqa: B023
    gs = [(i * j for j in range(2)) for i in range(n)]
    hs = [lambda k=i: k for i in range(n)]
    return [f() for f in fs], [list(g) for g in gs], [h() for h in hs]


def test_closures_over_a_target_see_its_last_value_as_in_python():
    assert convert(late_binding)(3) == late_binding(3) == (
        [2, 2, 2], [[0, 2], [0, 2], [0, 2]], [0, 1, 2])
    # (a default read counts too: kept as written, conservatively)
    assert convert(late_binding).source.count("__lg.list_comp(") == 3  # (the last three)
