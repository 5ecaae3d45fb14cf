"""What a generated program is, and the features the generator can leave out.

Every construct the generator makes sits behind a feature name (FEATURES). KNOWN_BUGS names
those llgrad gets wrong on main, each found by this fuzzer, or refuses by design (an
UnsupportedError at the line): the committed in-suite test runs DEFAULT_FEATURES (all but
those); when a fix lands, delete its entry here and the in-suite test covers it.
typer.rules / typecheck.py decide which KNOWN_BUGS features a program exercises, so
failures of programs that do are told apart from new ones.
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
# Off in the committed in-suite run until the named fix lands (each found by this fuzzer), or
# for good when llgrad refuses the construct.
KNOWN_BUGS: dict[str, str] = {
    "alias_inplace": "an in-place update of an array another name holds (an argument, an "
                     "alias, on one path of a traced if, or from another loop iteration) is "
                     "refused: UnsupportedError at its line (Note [In-place updates are by "
                     "value]; numpy would change what every name sees)",
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
