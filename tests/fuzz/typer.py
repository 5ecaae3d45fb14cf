"""Types of expressions, node by node, and the known-bug features each node touches.

`type_expr(node, env)` types every sub-expression of `node` bottom-up: each node is
evaluated on dummy values of its operands' types (Note [Types by evaluation] in ftypes.py).
Per node, `rules` names the features of gen.KNOWN_BUGS the node exercises (an int64 array
times a Python float: `int_to_float`), so the generator can leave out what a run disables,
and the minimiser can refuse a rewrite that turns one bug into another (a known one).
"""
from __future__ import annotations

import ast
import copy
import itertools
import re
import warnings

import numpy as np

from tests.fuzz.ftypes import NAMESPACE, E, Ty, merge, typeof

MODULES = ("np", "math")
F64_SCALAR = Ty("float64", (), False)


class TypeFault(Exception):
    """The expression or program is ill-typed (the message says where)."""


def _helper_call(node: ast.expr) -> bool:
    """A call of one of the program's functions (its result may be a constant: maybe)."""
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and \
        node.func.id not in ("abs", "min", "max", "len", "float", "range", "int")


def _static(node: ast.expr) -> bool:
    """`len(x)`, `x.shape[0]`: a Python int at trace time."""
    if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "len":
        return True
    return isinstance(node, ast.Subscript) and isinstance(node.value, ast.Attribute) and \
        node.value.attr == "shape"


def _arithmetic(node: ast.expr) -> bool:
    """Operators and numpy calls (not indexing, comparisons, `a if c else b`, helper calls:
    a helper's body is checked on its own)."""
    if isinstance(node, ast.Call):
        return isinstance(node.func, ast.Attribute) or \
            getattr(node.func, "id", "") in ("abs", "min", "max")
    return isinstance(node, (ast.BinOp, ast.UnaryOp))


def rules(template: str, ops: list[E], ty: Ty, node: ast.expr) -> set[str]:
    """The KNOWN_BUGS features exercised by one node `template` (operands `_o0`, ...)."""
    out = set()
    strong = [o for o in ops if o.ty.weak is False]
    f32 = any(o.ty.dtype == "float32" for o in ops)
    if _arithmetic(node):
        if f32 and any(o.ty == F64_SCALAR and o.const for o in ops):
            out.add("f64_scalar_f32")
        if f32 and any(o.ty.dtype == "int64" for o in strong):
            out.add("int_f32")
        # a float from traced integers and Python floats (a numpy scalar constant counts
        # as a Python float: llgrad makes it weak, see f64_scalar_f32)
        vals = ops[1:] if template.startswith("np.where(") else ops  # (not the condition)
        traced_int = any(o.ty.kind in "ib" and (o.counter or (o.ty.weak is not True and
                                                              not o.const)) for o in vals)
        if ty.kind == "f" and "astype" not in template and not any(
                o.ty.kind == "f" and o.ty.weak is False and (o.ty.shape or not o.const)
                for o in vals) and (traced_int or vals is not ops and bool(ops) and not ops[0].const):
            out.add("int_to_float")
    if re.search(r"\+|np\.add\(", template) and len(ops) == 2 and \
            all(o.ty.kind == "b" and o.ty.weak is not True for o in ops):
        out.add("bool_add")
    if "^" in template:
        out.add("bool_xor")
    if "prod" in template and any(o.ty.kind == "b" for o in ops):
        out.add("bool_prod")
    if template.startswith("math."):
        out.add("math")
    m = re.search(r"astype\(np\.(\w+)\)", template)
    if m and ops and ops[0].ty.dtype == m.group(1):
        out.add("astype_copy")
    if template.startswith("float("):
        out.add("concretize")
    if isinstance(node, ast.Subscript) and any(o.ty.kind == "b" and not o.ty.shape
                                               for o in ops[1:]):
        out.add("bool_index")
    if template.startswith("np.clip(") and ops and \
            ops[0].ty.kind in "ib" and ty.kind == "f":
        out.add("clip_int")
    if template.startswith("np.where(") and not ty.shape:
        out.add("where_0d")  # a 0-d ndarray, not a numpy scalar
    return out


def is_module(node) -> bool:
    while isinstance(node, ast.Attribute):
        node = node.value
    return isinstance(node, ast.Name) and node.id in MODULES


def literal(node: ast.expr) -> bool:
    """A constant written out (`-1`, `3 - 1`): kept in the template, since its value may
    decide a shape (`x[:-1]`, `axis=-1`). A numpy call on constants (`np.sin(0.75)`) is an
    operand still: its type (a strong numpy scalar) matters to typer.rules."""
    return not any(isinstance(n, ast.Call) or isinstance(n, ast.Name) and n.id not in MODULES
                   for n in ast.walk(node))


def operands(node: ast.AST) -> list[ast.expr]:
    """The value sub-expressions of `node` (seen through lists, tuples, slices, keywords,
    `x.shape`; not function references or literals)."""
    out = []

    def visit(n):
        for fld, val in ast.iter_fields(n):
            for ch in val if isinstance(val, list) else [val]:
                if isinstance(ch, (ast.List, ast.Tuple, ast.Slice, ast.keyword)):
                    visit(ch)
                elif not isinstance(ch, ast.expr) or literal(ch) or is_module(ch):
                    continue
                elif isinstance(n, ast.Call) and fld == "func":
                    if isinstance(ch, ast.Attribute):
                        out.append(ch.value)  # a method: x.sum(axis=0)
                    # else a builtin or a helper: `len(x)`, `h0(x)`
                elif isinstance(ch, ast.Attribute) and ch.attr == "shape":
                    visit(ch)
                else:
                    out.append(ch)
    visit(node)
    return out


class _Holes(ast.NodeTransformer):
    def __init__(self, ids: dict):
        self.ids = ids

    def visit(self, node):
        k = self.ids.get(id(node))
        if k is not None:
            return ast.Name(f"_o{k}", ast.Load())
        return self.generic_visit(node)


def template(node: ast.expr) -> tuple[str, list[ast.expr]]:
    """`node`'s source with its operands replaced by `_o0`, `_o1`, ..., and the operands."""
    ops = operands(node)
    cp = copy.deepcopy(node)
    ids = {id(o): k for k, o in enumerate(operands(cp))}
    return ast.unparse(_Holes(ids).visit(cp)), ops


_CODE: dict = {}


def merge_or_tag(a: Ty, b: Ty, needs: set | None) -> Ty | None:
    """`merge(a, b)`; else, with `needs` (lenient), `a` when the two differ only as float32
    vs float64, adding `pyfloat_f32` to `needs`: a Python float that llgrad traces is a
    strong float64, so its dtype with float32 operands depends on it (typecheck.traced)."""
    m = merge(a, b)
    if m is None and needs is not None and a.shape == b.shape and \
            {a.dtype, b.dtype} == {"float32", "float64"}:
        needs.add("pyfloat_f32")
        return a
    return m


def evaluate(src: str, ops: list[E], helpers: dict, needs: set | None = None) -> Ty:
    """The type of `src` (operands `_o0`, ...) on every dummy combination of the operands
    (they must agree: merge_or_tag)."""
    code = _CODE.get(src)
    if code is None:
        code = _CODE[src] = compile(src, "<fuzz-type>", "eval")
    names = [f"_o{i}" for i in range(len(ops))]
    out = None
    for combo in itertools.product(*[o.ty.dummies() for o in ops]):
        scope = dict(zip(names, combo), **helpers)
        try:
            with np.errstate(all="ignore"), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                v = eval(code, NAMESPACE, scope)  # noqa: S307 - our own program
        except TypeFault:
            raise
        except Exception as e:  # noqa: BLE001 - numpy or Python rejected it
            raise TypeFault(f"`{src}`: {type(e).__name__}: {e}") from None
        t = typeof(v)
        if t is None:
            raise TypeFault(f"`{src}` is a {type(v).__name__} {getattr(v, 'dtype', '')}")
        out = t if out is None else merge_or_tag(out, t, needs)
        if out is None:
            raise TypeFault(f"`{src}`: its type depends on Python vs numpy scalars")
    return out


def type_expr(node: ast.expr, env: dict, helpers: dict, needs: set,
              lenient: bool = False) -> E:
    """The type of `node`; adds the KNOWN_BUGS features it touches to `needs`. The checker
    is `lenient` (merge_or_tag); the generator is not: it makes no such expression."""
    if isinstance(node, ast.Name):
        if node.id not in env:
            raise TypeFault(f"`{node.id}` may be unbound here")
        return env[node.id]
    if isinstance(node, ast.Constant):
        t = typeof(node.value)
        if t is None:
            raise TypeFault(f"constant {node.value!r}")
        return E(repr(node.value), t, const=True)
    src, ops = template(node)
    typed = [type_expr(o, env, helpers, needs, lenient) for o in ops]
    alts = [node.body, node.orelse] if isinstance(node, ast.IfExp) else \
        node.values if isinstance(node, ast.BoolOp) else []
    alt_tys = [type_expr(a, env, helpers, needs, lenient).ty for a in alts]
    lenient_needs = needs if lenient else None
    for t in alt_tys[1:]:  # `a if c else b`, `a and b`: one type, whichever is taken
        if merge_or_tag(alt_tys[0], t, lenient_needs) is None:
            raise TypeFault(f"`{ast.unparse(node)}`: its type depends on the path")
    ty = evaluate(src, typed, helpers, lenient_needs)
    needs |= rules(src, typed, ty, node)
    const = all(o.const for o in typed) or _helper_call(node) or _static(node)
    if alts:  # chosen by a traced condition: traced, but constants may keep their weakness
        alt_es = [typed[i] for i, o in enumerate(ops) if any(o is a for a in alts)]
        chosen = not const
        const = any(e.const for e in alt_es) or not alt_es
        if chosen and ty.weak is True and ty.kind == "f":
            ty = Ty(ty.dtype, ty.shape, None)  # (a traced Python float is strong in llgrad)
    else:
        chosen = False
    counter = (chosen or _helper_call(node) or any(o.counter for o in typed)) and \
        ty.kind in "ib"
    return E(ast.unparse(node), ty, frozenset(), counter, const)


_PARSED: dict = {}


def type_template(tmpl: str, ops: list[E], helpers: dict) -> tuple[E, set]:
    """(typed result, features needed) of a generator template `tmpl` ({0}, {1}, ...) over
    typed operands. Raises TypeFault."""
    src = tmpl.format(*[f"_o{i}" for i in range(len(ops))])
    tree = _PARSED.get(src)
    if tree is None:
        tree = _PARSED[src] = ast.parse(src, mode="eval").body
    needs: set = set()
    env = {f"_o{i}": o for i, o in enumerate(ops)}
    e = type_expr(tree, env, helpers, needs)
    return e, needs
