"""What a generated program is, and the features the generator can leave out.

Every construct the generator makes sits behind a feature name (FEATURES). KNOWN_BUGS names
those llgrad gets wrong on main, each found by this fuzzer: the committed in-suite test
runs DEFAULT_FEATURES (all but those); when a fix lands, delete its entry here and the
in-suite test covers it. typer.rules / typecheck.py decide which KNOWN_BUGS features a
program exercises, so failures of programs that do are told apart from new ones.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from tests.fuzz.ftypes import Ty

FEATURES = frozenset({
    "branches", "elif", "branch_rebind", "cross_branch_reads",
    "loops", "for_rows", "while", "break_continue", "nested", "accumulators",
    "helpers", "early_return", "int_index", "element_update", "augassign",
    "mixed_dtypes", "int_float_mix", "int_to_float", "int_ops", "inplace_cast", "astype_copy",
    "f64_scalar_f32", "int_f32", "bool_xor", "bool_add", "bool_prod", "pyfloat_f32",
    "scalar_alias_aug", "branch_alias", "where_0d", "bool_index", "reductions", "matmul",
    "ternary", "math", "argmax", "pyfloat_arg", "static_args", "traced_range",
    "early_return_tuple", "clip_int", "alias_inplace", "return_in_loop",
    # constructs that plain Python rejects or concretises:
    "oob_index", "raise", "static_bool", "concretize",
})
# Off in the committed in-suite run until the named fix lands (each found by this fuzzer).
KNOWN_BUGS: dict[str, str] = {
    "cross_branch_reads": "a name rebound in one branch of a traced if leaks into its "
                          "sibling branch",
    "oob_index": "out-of-range traced indices are not checked",
    "raise": "raise inside a traced if raises at trace time",
    "static_bool": "static arguments True and 1 share one compiled signature",
    "int_to_float": "a float computed from integers and Python floats only is float32 "
                    "(numpy: float64): k * 0.5, np.sin(k), np.mean(k), np.where(b, 1.0, 2.0), "
                    "i * 0.5 for a loop counter i",
    "f64_scalar_f32": "a numpy float64 scalar constant is weak (f32 array * np.sin(0.75) "
                      "gives float32; numpy: float64)",
    "math": "math.sin(traced) is a strong float64 (Python: a weak float)",
    "inplace_cast": "y32 += x64 makes y float64 (numpy keeps float32)",
    "astype_copy": "x.astype(x.dtype) is taken for an alias of x (numpy copies): in-place "
                   "updates of it are refused",
    "int_f32": "int64 with float32 operands gives float32 (numpy: float64)",
    "bool_xor": "^ on traced arrays is a TypeError",
    "bool_add": "b + b on bool arrays is xor in native code (numpy, the interpreter: or)",
    "bool_prod": "np.prod(bool array) is a bool (numpy: int64)",
    "pyfloat_f32": "a Python float that llgrad traces (an argument; a float rebound in a "
                   "staged loop or a traced branch) is a strong float64: y32 * s gives "
                   "float64 (numpy: float32)",
    "scalar_alias_aug": "t = s; t += 1 on scalars (immutable) is refused as an in-place "
                        "update of an alias",
    "where_0d": "a traced `a if c else b` of np.where's 0-d array and a Python float is an "
                "LLGradError (ndarray vs float)",
    "bool_index": "x[b[0]] (a traced 0-d bool index) crashes in np.nonzero (numpy: a "
                  "mask that adds an axis)",
    "return_in_loop": "after a traced `if c: return a`, a `return b` inside a `for` loop is "
                      "lost: the function returns 0.0 (wrong value)",
    "alias_inplace": "an in-place update of an array another name shares is refused in "
                     "straight-line code, but not through a traced `a if c else b` or across "
                     "loop iterations: wrong values",
    "clip_int": "np.clip(b, -1.0, 1.0) of a bool or int array keeps its dtype, the bounds "
                "cast to it: wrong values (False -> True, -3 -> -1; numpy: float64)",
    "early_return_tuple": "`return (a, b)` inside a traced if is an LLGradError (`__lg_retval`"
                          " holds different Python objects: tuple and tuple)",
    "branch_alias": "an alias made in one branch refuses an in-place update in another "
                    "(llgrad's alias check does not follow paths): unsupported, not wrong",
}
DEFAULT_FEATURES = FEATURES - set(KNOWN_BUGS)


@dataclass
class Arg:
    name: str
    kind: str                 # "array", "pyfloat" or "static"
    dtype: str = "float64"
    shape: tuple = ()
    values: tuple = ()        # static: the values of successive calls


@dataclass
class Program:
    source: str
    args: list                # [Arg] of f and loss
    wrt: list                 # names of the arguments the gradient is taken w.r.t.
    seed: str                 # "seed:index", for the inputs and for reporting
    features: frozenset = field(default_factory=frozenset)

    @property
    def concretized(self) -> bool:
        """`float(t)` somewhere: no gradient flows through it (llgrad's rule, PyTorch's)."""
        return "float(" in self.source

    def param_types(self, strict: bool = False) -> dict:
        """f's argument types. llgrad traces a Python float argument as a float64 scalar:
        unless `pyfloat_f32` is on (and not `strict`), its type is ambiguous (weak or not),
        so no expression whose type depends on that is generated (typer.evaluate)."""
        weak = {"array": False, "static": True,
                "pyfloat": True if "pyfloat_f32" in self.features and not strict else None}
        return {a.name: Ty(a.dtype, a.shape, weak[a.kind]) for a in self.args}

    def known_bugs(self) -> list[str]:
        """The KNOWN_BUGS features this program exercises (typecheck.py; an index out of
        range on dummy values counts as `oob_index`, a program typable only if its Python
        float arguments are Python floats as `pyfloat_f32`)."""
        from tests.fuzz.typecheck import TypeFault, check_types
        try:
            needs = check_types(self.source, self.param_types(strict=True))
        except TypeFault as e:
            needs = {"oob_index"} if "IndexError" in str(e) else set()
            try:  # typable only with Python float arguments taken as Python floats
                check_types(self.source, dict(self.param_types(strict=True), **{
                    a.name: Ty("float64", (), True) for a in self.args if a.kind == "pyfloat"}))
                needs.add("pyfloat_f32")
            except TypeFault:
                pass
        if any(isinstance(v, bool) for a in self.args for v in a.values):
            needs.add("static_bool")
        return sorted(n for n in needs if n in KNOWN_BUGS)
