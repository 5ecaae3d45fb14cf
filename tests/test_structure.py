"""The structural claims of issue 14, Step 1: every region op has one description that every
phase's rule table covers, per-primitive facts live in the declarations, and a new
elementwise primitive needs nothing but its declaration (its scalar rule is its lowering)."""
from __future__ import annotations

import numpy as np
import pytest

import llgrad as lg
from llgrad.runtime.prim import REGISTRY
from llgrad.runtime.ops.control import custom_vjp_p, check_p
from llgrad.transform import control

REGION_OPS = [p for p in REGISTRY.values() if p.family == "control"
              and p not in (custom_vjp_p, check_p)]


@pytest.mark.parametrize("prim", REGION_OPS, ids=lambda p: p.name)
def test_every_region_op_has_one_description_and_every_phase_a_rule(prim):
    from llgrad.transform import interp, jvp, verify, vmap
    from llgrad.transform.printers import python_src
    assert prim in control.CONTROL, f"{prim.name}: no ControlOp in transform/control.py"
    for phase, table in (("interp", interp._RULES), ("verify", verify._REGION_RULES),
                         ("python printer", python_src._REGION_PRINTERS),
                         ("forward mode", jvp._RULES), ("batching", vmap._RULES)):
        assert prim in table, f"{prim.name} has no {phase} rule"


def test_descriptions_name_the_operands():
    """The accessors read the layouts the builders make (Note [Control-flow ops])."""
    from llgrad.transform.builder import Builder
    b = Builder("f", loc=None)
    with b:
        x = b.param(((3,), np.dtype(np.float64)), "x")
        out = control.for_loop(0, 4, 1, lambda i, a: a * 2.0, x)[0]
        loop = out.op
        w = control.while_loop(lambda a: np.sum(a) < 10.0, lambda a: a + 1.0, x)[0].op
        c = control.cond(np.sum(x) > 0, lambda a: a, lambda a: -a, x)[0].op
    assert [int(v.op.params["value"]) for v in control.bounds(loop)] == [0, 4, 1]
    assert control.state(loop) == [x] and control.carried(loop) == loop.regions[0].params[1:]
    assert control.counter(loop) is loop.regions[0].params[0]
    assert control.state(w) == [x] and control.loop_test(w) is w.regions[0]
    assert control.body(w) is w.regions[1] and control.carried(w) == w.regions[1].params
    assert control.pred(c) is c.inputs[0] and control.state(c) == [x]
    assert control.branches(c) == (c.regions[0], c.regions[1])


def test_declared_facts():
    """Facts other phases need are fields of the declaration, not tables elsewhere."""
    for p in REGISTRY.values():
        if p.np_name is not None:  # the printer calls np.<np_name>: impl must be it
            assert getattr(np, p.np_name) is p.impl, p.name
        if p.expensive:  # taped by loop AD: a differentiable primitive
            assert not p.nondiff, p.name
        assert p.linear in (None, "linear", "multilinear"), p.name
    assert REGISTRY["exp"].expensive and not REGISTRY["add"].expensive
    assert REGISTRY["matmul"].expensive and REGISTRY["reduce_sum"].expensive
    assert REGISTRY["abs"].np_name == "absolute" and REGISTRY["matmul"].np_name == "matmul"
    assert REGISTRY["reshape"].batch is not None and REGISTRY["reduce_sum"].batch is not None


@pytest.fixture
def cube():
    """A new elementwise primitive, declared as the STYLE guide says, and nothing else."""
    from llgrad.runtime.ops.elementwise import elementwise, mul
    prim = elementwise("cube_t14", lambda x: x * x * x,
                       (lambda g, out, x: mul(g, mul(mul(x, x), 3.0)),),
                       lambda s, x: s.mul(x, s.mul(x, x)), saves=(0,))
    try:
        yield prim
    finally:
        del REGISTRY[prim.name]


def test_a_new_elementwise_primitive_needs_only_its_declaration(cube, rng):
    """Eager, the interpreter, the Python printer, native code (fused, in a loop, its reverse
    sweep) and forward mode all run it with no other change."""
    from llgrad.codegen import compile_functions
    from llgrad.transform import ad, interp
    from llgrad.transform.builder import Builder
    from llgrad.transform.jvp import jvp_function
    from llgrad.transform.passes.pipeline import optimize
    from llgrad.transform.printers.python_src import to_python

    x0 = rng.normal(size=5)
    t = lg.tensor(x0, requires_grad=True)
    y = cube.bind(t)
    y.sum().backward()
    np.testing.assert_allclose(y.detach().numpy(), x0 ** 3)
    np.testing.assert_allclose(t.grad.numpy(), 3 * x0 ** 2)

    b = Builder("f", loc=None)
    with b:
        x = b.param(((5,), np.dtype(np.float64)), "x")
        s = control.for_loop(0, 3, 1, lambda i, a: cube.bind(a * 0.5) + x, x)[0]
        b.fn.body.results = [np.sum(cube.bind(s) * 2.0)]
    fn = b.fn

    def f(v):
        a = v
        for _ in range(3):
            a = (a * 0.5) ** 3 + v
        return np.sum(a ** 3 * 2.0)

    eps = 1e-6
    fd = np.array([(f(x0 + eps * e) - f(x0 - eps * e)) / (2 * eps) for e in np.eye(5)])
    joint = optimize(ad.grad_function(optimize(fn, fuse=False), [0]))
    native = compile_functions({"f": optimize(fn), "g": joint})
    np.testing.assert_allclose(native["f"](x0)[0], f(x0), rtol=1e-12)
    np.testing.assert_allclose(interp.run(fn, x0)[0], f(x0), rtol=1e-12)
    np.testing.assert_allclose(native["g"](x0)[1], fd, rtol=1e-6)
    ns: dict = {}
    exec(to_python(fn), ns)
    np.testing.assert_allclose(ns["f"](x0)[0], f(x0), rtol=1e-12)
    tangent = rng.normal(size=5)
    jf = optimize(jvp_function(optimize(fn, fuse=False), [0]))
    np.testing.assert_allclose(compile_functions({"j": jf})["j"](x0, tangent)[1], fd @ tangent,
                               rtol=1e-6)
