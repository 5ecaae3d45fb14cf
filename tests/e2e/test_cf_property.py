"""Random programs with loops and branches (hypothesis): compiled value == plain Python, and the
gradient == central finite differences.

A program is drawn as a small AST of statements over two scalar variables and one vector,
with `if`/`else` on traced conditions, `for` over static and traced ranges, `for` over rows,
`while` with a traced test, `break`, `continue` and early `return`; it is written to a .py file
(llgrad converts from source) and imported. Assignments pass through tanh/sin so values stay
bounded; a point where the function is not smooth (a branch switching within finite-difference
reach) is rejected by comparing two step sizes.
"""
from __future__ import annotations

import importlib.util
import itertools
import textwrap

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import llgrad
from llgrad.tracer.tracing import UnrollWarning
from tests.fd import numerical_vjp

N = 4  # length of x; X is (N, 3)
MAX_DEPTH = 2  # statements nest this deep (loops in loops, branches in loops, ...)
SCALARS = ("a", "b")
_counter = itertools.count()


class Gen:
    def __init__(self, data):
        self.data = data
        self.loop_vars: list[str] = []
        self.in_loop = False

    def int(self, lo: int, hi: int) -> int:
        return self.data.draw(st.integers(lo, hi))

    def pick(self, seq):
        return seq[self.int(0, len(seq) - 1)]

    def coin(self, p_true_of_4=2) -> bool:
        return self.int(0, 3) < p_true_of_4

    def const(self) -> str:
        return repr(self.pick([0.3, 0.7, -0.4, 1.3, 0.55, -0.9]))

    # -- expressions --------------------------------------------------------------------------
    def leaf(self) -> str:
        options = list(SCALARS) + [f"x[{self.pick(range(N))}]", self.const(), "np.sum(v)",
                                   f"v[{self.pick(range(N))}]"]
        options += [f"x[{i}]" for i in self.loop_vars] + [f"np.sum(X[{i}])" for i in
                                                          self.loop_vars]
        return self.pick(options)

    def expr(self, depth=0) -> str:
        if depth >= 2 or self.coin(1):
            return self.leaf()
        kind = self.pick(["bin", "bin", "un"])
        if kind == "un":
            return f"{self.pick(['np.sin', 'np.tanh', 'np.cos'])}({self.expr(depth + 1)})"
        op = self.pick(["+", "-", "*"])
        return f"({self.expr(depth + 1)} {op} {self.expr(depth + 1)})"

    def cond(self) -> str:
        c = f"{self.expr(1)} > {self.const()}"
        if self.coin(1):
            c = f"{c} {self.pick(['and', 'or'])} {self.leaf()} < {self.const()}"
        return c

    # -- statements ---------------------------------------------------------------------------
    def assign(self) -> list[str]:
        if self.coin(1):
            f = self.pick(["np.tanh", "np.sin"])
            return [f"v = {f}(v * {self.const()} + {self.expr(1)})"]
        target = self.pick(SCALARS)
        f = self.pick(["np.tanh", "np.sin", "0.5 * "])
        rhs = f"{f}({self.expr()})" if f != "0.5 * " else f"0.5 * {target} + 0.3 * " \
            f"np.tanh({self.expr()})"
        if self.coin(1):
            return [f"{target} += 0.2 * np.tanh({self.expr()})"]
        return [f"{target} = {rhs}"]

    def block(self, depth) -> list[str]:
        out = []
        for _ in range(self.int(1, 2)):
            out += self.stmt(depth)
        return out

    def stmt(self, depth) -> list[str]:
        kinds = ["assign", "assign"]
        if depth < MAX_DEPTH:
            kinds += ["if", "for", "for_traced", "rows", "while"]
        if self.in_loop:
            kinds += ["break", "continue"]
        if depth > 0:
            kinds += ["return"]
        kind = self.pick(kinds)
        ind = lambda lines: ["    " + ln for ln in lines]  # noqa: E731
        if kind == "assign":
            return self.assign()
        if kind == "if":
            out = [f"if {self.cond()}:"] + ind(self.block(depth + 1))
            if self.coin():
                out += ["else:"] + ind(self.block(depth + 1))
            return out
        if kind == "break":
            return [f"if {self.cond()}:", "    break"]
        if kind == "continue":
            return [f"if {self.cond()}:", "    continue"]
        if kind == "return":
            return [f"if {self.cond()}:", f"    return {self.pick(SCALARS)} * 1.0 + np.sum(v)"]
        i = f"i{depth}"
        saved = self.in_loop
        self.in_loop = True
        if kind == "for":
            head = f"for {i} in range({self.pick([1, 2, 3])}, {N}):"
        elif kind == "for_traced":  # 0..N-1 trips
            head = f"for {i} in range(np.sum(x[1:] > {self.const()})):"
        elif kind == "rows":
            head = f"for r{depth} in X:"
            i = None
        else:  # while with a traced test and a bounded counter
            self.loop_vars.append(f"k{depth}")
            body = self.block(depth + 1)
            self.loop_vars.pop()
            self.in_loop = saved
            return [f"k{depth} = 0",
                    f"while k{depth} < {self.pick([2, 3])} and {self.expr(1)} < 5.0:"] + \
                ind([f"k{depth} = k{depth} + 1"] + body)  # first: `continue` must not skip it
        if i is not None:
            self.loop_vars.append(i)
        body = self.block(depth + 1)
        if kind == "rows":
            body = [f"a = np.tanh(a + 0.3 * np.sum(r{depth}) * np.mean(v))"] + body
        if i is not None:
            self.loop_vars.pop()
        self.in_loop = saved
        return [head] + ind(body)

    def program(self) -> str:
        body = ["a = x[0] * 0.5", "b = np.sum(x) * 0.1", "v = x * 0.5"]
        for _ in range(self.int(1, 3)):
            body += self.stmt(0)
        body += ["return a * b + np.sum(v * v) + a"]
        return "def prog(x, X):\n" + textwrap.indent("\n".join(body), "    ") + "\n"


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    return tmp_path_factory.mktemp("cf_programs")


def load(src: str, workdir):
    path = workdir / f"prog_{next(_counter)}.py"
    path.write_text("import numpy as np\n\n\n" + src)
    spec = importlib.util.spec_from_file_location(path.stem, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.prog


@settings(max_examples=30, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                 HealthCheck.filter_too_much])
@given(data=st.data(), seed=st.integers(0, 2 ** 16))
def test_random_control_flow_programs(data, seed, workdir, monkeypatch):
    monkeypatch.setenv("LLGRAD_DISABLE_JIT", "1")
    src = Gen(data).program()
    prog = load(src, workdir)
    rng = np.random.default_rng(seed)
    x, X = rng.uniform(-1, 1, N), rng.uniform(-1, 1, (N, 3))
    expected = prog(x, X)
    d = llgrad.differentiate(prog, wrt=(0, 1))
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnrollWarning)
        value, (gx, gX) = d.value_and_grad(x, X)
        assert d(x, X) == pytest.approx(expected, rel=1e-10, abs=1e-12), src
    assert value == pytest.approx(expected, rel=1e-10, abs=1e-12), src
    n1 = numerical_vjp(prog, [x, X], np.float64(1.0), [0, 1], eps=1e-6)
    n2 = numerical_vjp(prog, [x, X], np.float64(1.0), [0, 1], eps=1e-5)
    for a, b in zip(n1, n2):
        assume(np.allclose(a, b, rtol=1e-4, atol=1e-6))  # smooth here (no branch switch)
    np.testing.assert_allclose(gx, n1[0], rtol=1e-5, atol=1e-7, err_msg=src)
    np.testing.assert_allclose(gX, n1[1], rtol=1e-5, atol=1e-7, err_msg=src)
