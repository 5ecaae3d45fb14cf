"""The corpus's registry: a `Program` is a function, a maker of its arguments from a seeded
generator, and the arguments differentiated (`wrt`, as in `llgrad.differentiate`); the
`program` decorator adds one to PROGRAMS. The programs live in tests/corpus/programs*.py."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np


@dataclass
class Program:
    fn: Callable
    make_args: Callable[[np.random.Generator], tuple]
    wrt: object = 0
    fd_eps: float = 1e-6
    fd_tol: tuple = (1e-5, 1e-7)
    value_tol: tuple = (1e-9, 1e-11)  # (rtol, atol) against plain numpy: float32 needs more

    @property
    def name(self) -> str:
        return self.fn.__name__

    def __repr__(self) -> str:
        return self.name


PROGRAMS: list[Program] = []


def program(make_args, wrt=0, **kw):
    def register(fn):
        PROGRAMS.append(Program(fn, make_args, wrt, **kw))
        return fn
    return register
