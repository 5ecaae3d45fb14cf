"""Structural primitives of the compiler's IR: constants and structured control flow.

`constant` holds a literal array. `cond`, `for_loop` and `while_loop` carry regions; their
evaluation lives in transform/interp.py and their reverse mode in transform/ad.py
(See Note [Loop tapes] there), the one special case of "run each primitive's VJP rule".
They are declared here so every phase keys its tables by the same objects.
"""
from __future__ import annotations

from llgrad.runtime.aval import Aval
from llgrad.runtime.prim import Primitive, register


def _region_op(name):
    def impl(*args, **params):
        raise NotImplementedError(f"{name} is evaluated by transform/interp.py")
    return impl


constant_p = register(Primitive(
    "constant", "const", lambda value: value,
    lambda value: Aval(tuple(value.shape), value.dtype), nondiff=True))

cond_p = register(Primitive("cond", "control", _region_op("cond"), None, nondiff=True))
for_loop_p = register(Primitive("for_loop", "control", _region_op("for_loop"), None,
                                nondiff=True))
while_loop_p = register(Primitive("while_loop", "control", _region_op("while_loop"), None,
                                  nondiff=True))
