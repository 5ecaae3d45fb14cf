"""Branch margins: how close a program's comparisons came to flipping, for the oracle.

The reference run executes an instrumented copy of the program in which every comparison
`a < b` becomes `_lgf_cmp("Lt", a, b)` and every `np.argmax(a)` becomes
`_lgf_arg(np.argmax, a)`: they return what the original returns and record the smallest gap
seen on float operands (|a - b| relative to the operands' size; for an arg-extremum, the gap
between any two entries). A gap near rounding error means compiled code may legitimately
take the other branch (a different but correct summation order is enough), and a gap near
the finite-difference step means the central differences straddle a jump; the oracle draws
new inputs or skips the gradient check instead of reporting such a program. An exact tie (a
gap of 0, as in `np.maximum(a, b) > b` where the maximum is `b`) comes from exact operations
that compiled code computes the same way, so it only rules out the gradient check.
Every call's result is also checked not to be a float16 (numpy's `np.sin(bool)`: llgrad
computes it in float32, so the values differ; outside the fuzzer's scope).
"""
from __future__ import annotations

import ast
import operator

import numpy as np

from tests.fuzz.ftypes import check_value

OPS = {"Lt": operator.lt, "LtE": operator.le, "Gt": operator.gt, "GtE": operator.ge,
       "Eq": operator.eq, "NotEq": operator.ne}


class Margins:
    """The smallest relative gap seen, separately for float64 and float32 comparisons."""

    def __init__(self):
        self.f64 = self.f32 = float("inf")
        self.tie = False  # an exact tie: the same value both ways (gradient unsafe only)

    def note_gaps(self, gaps: np.ndarray, f32: bool) -> None:
        if gaps.size and np.min(gaps) == 0.0:
            self.tie = True
        gaps = gaps[gaps > 0]
        if not gaps.size:
            return
        if f32:
            self.f32 = min(self.f32, float(np.min(gaps)))
        else:
            self.f64 = min(self.f64, float(np.min(gaps)))

    def cmp(self, op: str, a, b):
        out = OPS[op](a, b)
        A, B = np.asarray(a), np.asarray(b)
        if A.dtype.kind == "f" or B.dtype.kind == "f":
            with np.errstate(all="ignore"):
                A64, B64 = A.astype(np.float64), B.astype(np.float64)
                gap = np.abs(A64 - B64) / (1.0 + np.maximum(np.abs(A64), np.abs(B64)))
            self.note_gaps(gap.ravel(), np.float32 in (A.dtype, B.dtype))
        return out

    def arg(self, fn, a, *args, **kwargs):
        A = np.asarray(a)
        if A.dtype.kind == "f" and A.size > 1:
            top = np.sort(A.astype(np.float64).ravel())
            scale = 1.0 + np.max(np.abs(top))
            gaps = np.diff(top) / scale  # a near-tie anywhere may decide an arg-extremum
            self.note_gaps(gaps, A.dtype == np.float32)
        return fn(a, *args, **kwargs)


class Rewrite(ast.NodeTransformer):
    """Checks every call's result; with `margins`, also records comparisons' gaps."""

    def __init__(self, margins: bool = True):
        self.margins = margins

    def visit_Compare(self, node):
        self.generic_visit(node)
        if len(node.ops) != 1 or not self.margins:
            return node
        return ast.copy_location(ast.Call(
            ast.Name("_lgf_cmp", ast.Load()),
            [ast.Constant(type(node.ops[0]).__name__), node.left, node.comparators[0]], []),
            node)

    def visit_Call(self, node):
        self.generic_visit(node)
        f = node.func
        if self.margins and isinstance(f, ast.Attribute) and f.attr in ("argmax", "argmin") and \
                isinstance(f.value, ast.Name) and f.value.id == "np":
            node = ast.Call(ast.Name("_lgf_arg", ast.Load()), [f, *node.args], node.keywords)
        return ast.copy_location(ast.Call(ast.Name("_lgf_val", ast.Load()), [node], []), node)


def instrumented(source: str, filename: str, margins: Margins) -> dict:
    """Execute the instrumented program; returns its namespace (f, loss, helpers)."""
    tree = ast.fix_missing_locations(Rewrite().visit(ast.parse(source)))
    ns = {"_lgf_cmp": margins.cmp, "_lgf_arg": margins.arg, "_lgf_val": check_value,
          "__name__": "fuzz_reference"}
    exec(compile(tree, filename, "exec"), ns)  # noqa: S102 - our own generated program
    return ns
