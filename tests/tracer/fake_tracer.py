"""A fake traced value and stager for testing the staging protocol of tracer/operators.py.

``Fake`` wraps a concrete value and propagates through arithmetic. ``FakeStager`` records
every stage_* call (kind, symbol names, line) and "stages" by running both branches and
selecting with the concrete condition, so staged results can be checked against Python.
"""

import operator

import numpy as np

from llgrad.tracer import operators as lg


class Fake:
    def __init__(self, value):
        self.value = value

    def __repr__(self):
        return f"Fake({self.value!r})"

    def __bool__(self):
        raise AssertionError("bool() of a traced value: the converter should have staged this")

    def __getitem__(self, i):
        return Fake(self.value[unwrap(i)])

    def __len__(self):
        return len(self.value)


def unwrap(x):
    if isinstance(x, Fake):
        return x.value
    if isinstance(x, tuple):
        return tuple(map(unwrap, x))
    return x


def _binary(op):
    return (lambda a, b: Fake(op(unwrap(a), unwrap(b))),
            lambda a, b: Fake(op(unwrap(b), unwrap(a))))


for _name in ("add", "sub", "mul", "truediv", "pow", "mod", "lt", "le", "gt", "ge", "eq", "ne"):
    _f, _r = _binary(getattr(operator, _name))
    setattr(Fake, f"__{_name}__", _f)
    setattr(Fake, f"__r{_name}__", _r)
Fake.__neg__ = lambda a: Fake(-a.value)
Fake.__hash__ = object.__hash__


def _select(name, cond, a, b, loc):
    if name.startswith("__lg_"):
        return a if cond else b
    for mine, other, branch in ((a, b, "true"), (b, a, "false")):
        if isinstance(other, lg.Undefined) and not isinstance(mine, lg.Undefined):
            return lg.Undefined(name, f"assigned only in the {branch} branch of the `if` at {loc}")
    return a if cond else b


class FakeStager:
    def __init__(self):
        self.log = []

    def stage_if(self, cond, body_fn, orelse_fn, get_state, set_state, names, nouts, loc):
        self.log.append(("if", names[:nouts], loc.line))
        s0 = get_state()
        body_fn()
        s1 = get_state()
        set_state(s0)
        orelse_fn()
        s2 = get_state()
        c = bool(unwrap(cond))
        final = [_select(n, c, a, b, loc) for n, a, b in zip(names, s1, s2)]
        final[nouts:] = [a if a is b else lg.Undefined(n) for n, a, b in
                         zip(names[nouts:], s1[nouts:], s2[nouts:])]
        set_state(tuple(final))

    def stage_for(self, iterable, extra_test, body_fn, get_state, set_state, names, loc,
                  optional=False):
        if optional:  # a loop over a Python range that only reads traced values: Python
            return False
        self.log.append(("for", names, loc.line))
        if isinstance(iterable, lg.TracedRange):
            items = range(*map(unwrap, (iterable.start, iterable.stop, iterable.step)))
        else:
            items = unwrap(iterable)
        for item in items:
            if extra_test is not None and not unwrap(extra_test()):
                break
            body_fn(Fake(item))

    def stage_while(self, test_fn, body_fn, get_state, set_state, names, loc):
        self.log.append(("while", names, loc.line))
        while unwrap(test_fn()):
            body_fn()

    def stage_if_exp(self, cond, true_fn, false_fn, loc):
        self.log.append(("if_exp", None, loc.line if loc else None))
        a, b = true_fn(), false_fn()
        return a if unwrap(cond) else b

    def stage_not(self, value, loc):
        self.log.append(("not", None, None))
        return Fake(not unwrap(value))

    def stage_setitem(self, target, index, value):
        self.log.append(("setitem", None, None))
        new = np.array(unwrap(target), copy=True)
        new[unwrap(index)] = unwrap(value)
        return Fake(new)
