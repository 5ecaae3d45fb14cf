"""The compiler's differential fuzzer in the default test run, and tests of its parts.

`test_generated_programs_agree` checks a few hundred generated programs (fixed seed, the
default features: everything but gen.KNOWN_BUGS) against plain Python, the interpreter
and finite differences, natively for every NATIVE_EVERY-th. A failure prints the program and
the command that reruns it; `make fuzz` runs 10,000 (tests/fuzz/run.py).
"""
from __future__ import annotations

import collections
import re

import numpy as np
import pytest

import llgrad
from llgrad.runtime.errors import UnsupportedError
from tests.fuzz import minimize as minimize_mod
from tests.fuzz import oracle
from tests.fuzz.gen import generate
from tests.fuzz.program import DEFAULT_FEATURES, FEATURES, KNOWN_BUGS, Arg, Program
from tests.fuzz.minimize import minimize
from tests.fuzz.run import Pool, parse_features
from tests.fuzz.typecheck import TypeFault, check_types

SEED, N, NATIVE_EVERY = 20261201, 300, 10


def test_generated_programs_agree():
    counts, failures = collections.Counter(), []
    for i in range(N):
        program = generate(SEED, i, DEFAULT_FEATURES)
        engines = ("interp", "native") if i % NATIVE_EVERY == 0 else ("interp",)
        out = oracle.check(program, engines)
        counts[out.status] += 1
        if out.status in ("mismatch", "crash") and not out.known:
            failures.append(f"program {i}: {out.failures[0].key}\n{out.failures[0].detail}\n"
                            f"{program.source}rerun: python -m tests.fuzz.run --seed {SEED} "
                            f"--only {i} --features default --show")
    assert not failures, f"{len(failures)} of {N} programs failed:\n" + "\n".join(failures[:3])
    # the generator makes valid, mostly supported programs, clear of branch boundaries
    assert counts["ok"] >= 0.95 * N, counts
    assert counts["invalid"] + counts["boundary"] + counts["unsupported"] <= 0.03 * N, counts


# -- the generator -----------------------------------------------------------------------------
def test_generation_is_reproducible():
    a, b = generate(7, 3), generate(7, 3)
    assert a.source == b.source and a.args == b.args
    assert generate(7, 4).source != a.source


def test_default_programs_are_well_typed_on_every_path():
    touching = 0
    for i in range(60):
        p = generate(SEED, i, DEFAULT_FEATURES)
        touching += bool(set(check_types(p.source, p.param_types())) & set(KNOWN_BUGS))
    assert touching <= 3  # (the generator's rules and the checker's agree but for a few)


def test_a_feature_left_out_is_not_generated():
    features = DEFAULT_FEATURES - {"loops", "while", "for_rows", "branches", "helpers",
                                   "early_return_tuple"}
    for i in range(30):
        src = generate(SEED, i, features).source
        assert not re.search(r"^\s*(for|while|if) |^def h\d", src, re.M), src


def test_parse_features():
    assert parse_features("default") == DEFAULT_FEATURES
    assert parse_features("all,-raise") == FEATURES - {"raise"}
    assert parse_features("default,+raise") == DEFAULT_FEATURES | {"raise"}
    with pytest.raises(SystemExit, match="unknown feature 'nope'"):
        parse_features("default,+nope")


def test_typecheck_rejects_what_only_an_untaken_branch_gets_wrong():
    src = ("def f(x):\n    v = 0.25\n    if np.sum(x) > 0:\n        v = x[:-1] + x\n"
           "    return (v,)\n")
    with pytest.raises(TypeFault, match="broadcast"):
        check_types("import numpy as np\n" + src, {"x": generate(1, 0).param_types()["x"]})


def test_typecheck_sees_an_alias_kept_on_one_path_only():
    src = ("import numpy as np\n\ndef f(x):\n    v = x\n    w = v\n    if np.sum(x) < 1.5:\n"
           "        w = 0.5 * w\n    w *= 2.0\n    return (v,)\n")
    assert check_types(src, {"x": generate(1, 0).param_types()["x"]}) == {"alias_inplace"}


# -- the oracle ----------------------------------------------------------------------------------
def _program(body: str, args=None) -> Program:
    src = (f"import math\n\nimport numpy as np\n\n\ndef f(x):\n{body}\n\n\n"
           "def loss(x):\n    r = f(x)\n    return np.sum(np.sin(r[0]))\n")
    return Program(src, args or [Arg("x", "array", "float64", (3,))], ["x"], "test:0")


class _Fake:
    """llgrad.differentiate, but the values (not gradients) pass through `post` (or are
    `post(None)`, without calling llgrad, if not `call`)."""

    def __init__(self, post, call=True):
        self.post, self.call, self.real = post, call, llgrad.differentiate

    def __call__(self, fn, **kw):
        d, post, call = self.real(fn, **kw), self.post, self.call

        class Wrapped:
            def __call__(self, *a):
                return post(d(*a) if call else None)

            def value_and_grad(self, *a):
                return d.value_and_grad(*a)
        return Wrapped()


def test_oracle_passes_a_correct_program_and_checks_its_gradient():
    out = oracle.check(_program("    return (np.sin(x) * 2.0,)"), ("interp",))
    assert (out.status, out.grad) == ("ok", "checked")


@pytest.mark.parametrize("post, status, kind", [
    (lambda r: (r[0] + 1e-6,), "mismatch", "value"),
    (lambda r: (r[0].astype(np.float32),), "mismatch", "dtype"),
    (lambda r: (r[0][:2],), "mismatch", "shape"),
    (lambda r: {}[0], "crash", "KeyError at"),
    (lambda r: (_ for _ in ()).throw(UnsupportedError("no such thing")), "unsupported",
     "UnsupportedError: no such thing"),
])
def test_oracle_classifies_a_wrong_llgrad(monkeypatch, post, status, kind):
    monkeypatch.setattr(llgrad, "differentiate", _Fake(post))
    out = oracle.check(_program("    return (np.sin(x) * 2.0,)"), ("interp",))
    assert out.status == status and out.failures[0].kind.startswith(kind), out


def test_oracle_reports_a_missing_error(monkeypatch):
    monkeypatch.setattr(llgrad, "differentiate", _Fake(lambda r: (np.zeros(3),), call=False))
    body = "    if np.sum(x) > -100.0:\n        raise ValueError('fuzz: raised')\n    return (x,)"
    out = oracle.check(_program(body), ("interp",))
    assert out.failures[0].kind == "missing_error"


def test_oracle_stays_away_from_branch_boundaries():
    body = "    v = -x\n    if {} + 0.0 * np.sum(x) > 0.0:\n        v = x * x\n    return (v,)"
    assert oracle.check(_program(body.format(1e-12)), ("interp",)).status == "boundary"
    out = oracle.check(_program(body.format(1e-6)), ("interp",))  # clear of rounding only
    assert (out.status, out.grad) == ("ok", "interp-only: near a branch")


# -- the minimiser and the runner ------------------------------------------------------------------
def test_minimize_keeps_the_failure_and_drops_the_rest(monkeypatch):
    def fake_check(program, engines, fd, seconds):  # "fails" while np.tanh is used
        fail = [oracle.Failure("mismatch", "value", "interp", "")] if "np.tanh(" in \
            program.source else []
        return oracle.Outcome("mismatch" if fail else "ok", fail)
    monkeypatch.setattr(minimize_mod, "check_with_timeout", fake_check)
    i = next(i for i in range(100) if "np.tanh(" in generate(SEED, i).source and
             len(generate(SEED, i).source.splitlines()) > 25)
    program = generate(SEED, i)
    small, _ = minimize(program, oracle.Failure("mismatch", "value", "interp", ""),
                        max_tries=400)
    assert "np.tanh(" in small.source and len(small.source.splitlines()) <= 16, small.source
    check_types(small.source, small.param_types())


def test_pool_counts_a_dead_worker_and_goes_on():
    cfg = dict(seed=SEED, features=sorted(DEFAULT_FEATURES), engines=["interp"], fd=False,
               min_budget=1, die_on=[1])
    got = {r["index"]: (reply or {}).get("status", why)
           for r, reply, why in Pool(cfg, 2, timeout=120).run(
               {"op": "check", "index": i} for i in range(3))}
    assert got[1] == "segfault" and {got[0], got[2]} <= {"ok", "mismatch", "crash",
                                                        "unsupported", "invalid", "boundary"}


def test_typecheck_of_a_where_of_constants():
    """`np.where((2.0 > 3.0), 1.5, 2)` has no operand after its condition: the typer indexed
    an empty list, and the worker's exception was counted as a segfault (seed 96, 691)."""
    assert generate(96, 691, parse_features("all")).known_bugs() == ["alias_inplace"]
