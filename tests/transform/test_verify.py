"""The verifier accepts what the builder, AD and passes produce and names the op on errors."""
from __future__ import annotations

import numpy as np
import pytest

from llgrad.runtime.aval import Aval
from llgrad.runtime.errors import InternalError
from llgrad.runtime.ops import elementwise as ew
from llgrad.runtime.ops.control import fusion_p
from llgrad.runtime.ops.index import getitem_p
from llgrad.runtime.ops.reduce import reduce_sum_p
from llgrad.transform import control, ir
from llgrad.transform.verify import verify

from cases import CASES
from helpers import build

F64 = np.dtype(np.float64)


def small():
    return build(lambda x: np.sum(np.exp(x) * 2.0), np.zeros(3))


@pytest.mark.parametrize("name", sorted(CASES))
def test_good_ir_passes(name, rng):
    f, make = CASES[name]
    verify(build(f, *make(rng)))


def test_control_flow_passes():
    def f(x):
        s, = control.for_loop(0, 3, 1, lambda i, s: s + x[i], np.float64(0.0))
        return control.cond(s > 0, lambda a: a * 2.0, lambda a: -a, s)[0]
    verify(build(f, np.zeros(3)))


def test_use_before_definition():
    fn = small()
    fn.body.ops.reverse()
    with pytest.raises(InternalError, match=r"verify @<lambda>: %\d+ = .*is not defined before "
                                            r"its use \(SSA dominance\)"):
        verify(fn)


def test_wrong_output_aval_names_both():
    fn = small()
    exp_op = next(op for op in fn.body.ops if op.name == "exp")
    exp_op.outputs[0].aval = Aval((4,), F64)
    with pytest.raises(InternalError, match=r"exp .*outputs are f64\[4\] but the shape rule "
                                            r"gives f64\[3\]"):
        verify(fn)


def test_implicit_broadcast_is_rejected():
    fn = small()
    mul = next(op for op in fn.body.ops if op.name == "mul")
    mul.inputs[1] = mul.inputs[1].op.inputs[0]  # skip the explicit broadcast_to
    with pytest.raises(InternalError, match=r"elementwise operand %\d+ has shape \[\], the output "
                                            r"\[3\] \(broadcasts must be explicit"):
        verify(fn)


def test_defined_twice():
    fn = small()
    fn.body.ops.append(fn.body.ops[-1])
    with pytest.raises(InternalError, match="is defined twice"):
        verify(fn)


def test_loop_region_conventions():
    fn = build(lambda x: control.for_loop(0, 3, 1, lambda i, s: s + x[i], np.float64(0.0))[0],
               np.zeros(3))
    loop = next(op for op in fn.body.ops if op.name == "for_loop")
    loop.regions[0].params.pop(0)
    with pytest.raises(InternalError, match=r"for_loop .*body params \(i, \*carried\): f64\[\] "
                                            r"but expected i64\[\], f64\[\]"):
        verify(fn)


def _fusion_of(p, ops, result):
    """f(x) = fusion(x) of `ops` over body param `p`, yielding `result`."""
    x, out = ir.Value(p.aval, "x"), ir.Value(result.aval)
    body = ir.Region([p], ops, [result])
    return ir.Function("f", ir.Region([x], [ir.Op(fusion_p, [x], {}, [out], [body])], [out]))


def test_fusion_body_is_elementwise_ops_and_reductions():
    x = ir.Value(Aval((3,), F64), "x")
    r = ir.Value(Aval((3,), F64))
    fn = _fusion_of(x, [ir.Op(getitem_p, [x], {"key": (("s", 0, 3, 1),)}, [r])], r)
    with pytest.raises(InternalError, match="fusion body holds getitem, which is neither "
                                            "elementwise nor a reduction"):
        verify(fn)


def test_fusion_body_reads_no_reduction_of_its_loop():
    """A reduction's result exists only after the loop (Note [Fusion is decided once])."""
    x = ir.Value(Aval((3,), F64), "x")
    e, s, d = ir.Value(Aval((3,), F64)), ir.Value(Aval((), F64)), ir.Value(Aval((), F64))
    ops = [ir.Op(ew.exp_p, [x], {}, [e]),
           ir.Op(reduce_sum_p, [e], {"axes": (0,), "keepdims": False}, [s]),
           ir.Op(ew.neg_p, [s], {}, [d])]
    verify(_fusion_of(x, ops[:2], s))  # a reduction of the loop's values: fine
    with pytest.raises(InternalError, match="fusion body's neg reads a reduction of the same "
                                            "loop"):
        verify(_fusion_of(x, ops, d))


def test_error_carries_the_loc():
    from llgrad.runtime.errors import SourceLoc
    fn = small()
    op = fn.body.ops[1]
    op.loc = SourceLoc("model.py", 12, 0, "f")
    op.outputs[0].aval = Aval((7,), op.outputs[0].aval.dtype)
    with pytest.raises(InternalError, match="model.py:12"):
        verify(fn)


def test_undefined_output():
    fn = small()
    fn.body.results.append(ir.Value(Aval((), F64)))
    with pytest.raises(InternalError, match="returns %.* not defined"):
        verify(fn)
    assert ew.exp_p  # noqa: B018
