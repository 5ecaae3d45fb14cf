"""Structured control flow (cond, for_loop, while_loop): not lowered yet.

The planner (lower.py) rejects any op that carries regions with an UnsupportedError naming
the op and its source line, so these primitives fail loudly rather than fall back; constants
are module globals (compile.py). TODO(codegen): lower cond/for_loop/while_loop once the
transform layer's region conventions (and its loop tapes) are settled (#4).
"""
