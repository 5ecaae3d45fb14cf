"""Expressions of the fuzzer's programs: numpy and Python arithmetic over a typed environment.

Every expression is built from a template over operand expressions and typed by evaluating
it (Note [Types by evaluation] in ftypes.py). Domains are kept safe by construction: `log`
and `sqrt` see `abs(x) + 1` or `x*x + 1`, division is by `1.5 + sin(.)`, `exp` by `exp(sin(.))`,
integer `//` and `%` only by positive constants, and every index is in range (`i % n`),
unless the `oob_index` feature asks for an index that may be out of range (then plain
Python raises IndexError and llgrad must raise too).
"""
from __future__ import annotations

from dataclasses import dataclass

from tests.fuzz.ftypes import E, Ty
from tests.fuzz.typer import TypeFault, type_template

FLOATS = ["0.5", "1.5", "-0.75", "2.0", "0.25", "-1.25", "3.0"]
INTS = ["1", "2", "3", "-1"]

UNARY = ["np.sin({0})", "np.cos({0})", "np.tanh({0})", "np.exp(np.sin({0}))",
         "np.log(np.abs({0}) + 1.0)", "np.sqrt(np.square({0}) + 1.0)", "np.abs({0})",
         "abs({0})", "(-{0})", "np.square({0})", "np.clip({0}, -1.0, 1.0)",
         "np.maximum({0}, 0.0)", "({0} ** 2)", "np.expm1(np.tanh({0}))", "np.log1p(np.abs({0}))",
         "({0} * 0.5)", "({0} + 1.0)", "(2 * {0})"]
MATH = ["math.sin({0})", "math.tanh({0})", "math.exp(math.sin({0}))", "math.cos({0})"]
BINARY = ["({0} + {1})", "({0} - {1})", "({0} * {1})", "({0} / (1.5 + np.sin({1})))",
          "np.maximum({0}, {1})", "np.minimum({0}, {1})", "np.add({0}, {1})",
          "np.multiply({0}, {1})"]
INT_BINARY = ["({0} // 2)", "({0} % 3)", "(({0} + {1}) % 5)", "(({0} * {1}) // 3)"]
BOOL_BINARY = ["({0} & {1})", "({0} | {1})", "np.logical_and({0}, {1})",
               "np.logical_or({0}, {1})", "np.logical_not({0})"]
XOR = "({0} ^ {1})"
COMPARE = ["({0} > {1})", "({0} < {1})", "({0} >= {1})", "({0} <= {1})"]
EXACT_COMPARE = ["({0} == {1})", "({0} != {1})"]  # on integers and bools only
REDUCE = ["np.sum", "np.mean", "np.max", "np.min", "np.prod"]
# Templates whose result may share memory with operand 0 (Note [Fresh arrays] in gen.py).
VIEW_MARKERS = (".T", "np.transpose(", "np.reshape(", "[None", ", None]", "np.expand_dims(",
                "[1:", "[:-1", "[::", "[:, ")


@dataclass
class Var:
    ty: Ty
    fresh: bool = True        # owns its value: in-place updates are safe
    bound: int | None = None  # an int known to lie in [0, bound): loop counters
    counter: bool = False     # may be a traced int (E.counter)
    const: bool = False       # may be a constant at trace time (E.const)

    def copy(self) -> "Var":
        return Var(self.ty, self.fresh, self.bound, self.counter, self.const)


class Exprs:
    """Expression generation; the statement generator (gen.Gen) provides the environment."""

    # -- provided by gen.Gen -------------------------------------------------------------------
    rng = None
    features: frozenset = frozenset()
    helpers: list = []

    def readable(self) -> dict[str, Var]:
        raise NotImplementedError

    def on(self, feature: str, p: float = 1.0) -> bool:
        return feature in self.features and self.rng.random() < p

    # -- leaves --------------------------------------------------------------------------------
    def var(self, name: str, v: Var) -> E:
        return E(name, v.ty, frozenset([name]), v.counter, v.const)

    def const(self, kind: str | None = None) -> E:
        kind = kind or self.rng.choice("ffffi")
        if kind == "f":
            return E(self.rng.choice(FLOATS), Ty("float64", (), True), const=True)
        if kind == "i":
            return E(self.rng.choice(INTS), Ty("int64", (), True), const=True)
        return E(self.rng.choice(["True", "False"]), Ty("bool", (), True), const=True)

    def leaf(self) -> E:
        env = self.readable()
        if env and self.rng.random() < 0.85:
            name = self.rng.choice(sorted(env))
            return self.var(name, env[name])
        return self.const()

    # -- composite expressions -----------------------------------------------------------------
    def apply(self, template: str, operands: list[E], view: bool | None = None) -> E | None:
        """`template` over `operands`, typed; None if numpy rejects it or it exercises a
        feature this run leaves out (typer.rules)."""
        try:
            r, needs = type_template(template, operands, {})
        except TypeFault:
            return None
        ty = r.ty
        if needs - self.features:
            return None
        if view is None:
            view = any(m in template for m in VIEW_MARKERS)
        views = operands[0].views if view and ty.shape else frozenset()
        return E(template.format(*[o.src for o in operands]), ty, views, r.counter, r.const)

    def expr(self, depth: int) -> E:
        """A random expression of any type."""
        if depth <= 0 or self.rng.random() < 0.2:
            return self.leaf()
        for _ in range(8):
            e = self.compose(depth)
            if e is not None:
                return e
        return self.leaf()

    def compose(self, depth: int) -> E | None:
        r = self.rng
        fam = r.choices(["unary", "binary", "compare", "reduce", "index", "where", "matmul",
                         "cast", "ternary", "call", "pyint", "math", "concretize"],
                        [6, 8, 1, 3, 3, 1, 1, 1, 1, 1, 0.5, 0.5, 0.05])[0]
        a = self.expr(depth - 1)
        if fam == "unary":
            return self.apply(r.choice(UNARY), [a])
        if fam == "math" and not a.ty.shape and a.ty.kind == "f":
            return self.apply(r.choice(MATH), [a])
        if fam == "binary":
            b = self.expr(depth - 1)
            if a.ty.kind in "ib" and b.ty.kind in "ib" and self.on("int_ops", 0.5):
                t = r.choice(INT_BINARY if a.ty.kind == "i" or b.ty.kind == "i" else
                             BOOL_BINARY + [XOR])
                return self.apply(t, [a, b])
            if not self.mix_ok(a, b):
                return None
            return self.apply(r.choice(BINARY), [a, b])
        if fam == "compare":
            return self.compare(a, self.expr(depth - 1))
        if fam == "reduce" and a.ty.shape and self.on("reductions"):
            return self.reduce(a)
        if fam == "index" and a.ty.shape:
            return self.index(a, depth)
        if fam == "where":
            c = self.compare(self.expr(depth - 1), self.expr(depth - 1))
            b = self.expr(depth - 1)
            if c is None or not self.mix_ok(a, b):
                return None
            return self.apply("np.where({0}, {1}, {2})", [c, a, b])
        if fam == "matmul" and self.on("matmul") and a.ty.ndim in (1, 2) and a.ty.kind == "f":
            return self.matmul(a, depth)
        if fam == "cast" and self.on("mixed_dtypes"):
            return self.cast(a)
        if fam == "ternary" and self.on("ternary"):
            c = self.cond(depth - 1)
            b = self.like(a.ty, depth - 1)
            e = b and self.apply("({1} if {0} else {2})", [c, a, b])
            return e and E(e.src, e.ty, a.views | b.views, e.counter, e.const)
        if fam == "call" and self.helpers and self.on("helpers"):
            return self.call(self.rng.choice(self.helpers), depth)
        if fam == "pyint" and a.ty.shape:
            ax = r.randrange(a.ty.ndim)
            return self.apply(r.choice(["len({0})", f"{{0}}.shape[{ax}]"]), [a])
        if fam == "concretize" and not a.ty.shape and a.ty.kind == "f":
            return self.apply("float({0})", [a])
        return None

    def mix_ok(self, a: E, b: E) -> bool:
        """Integer or bool with float operands only under the `int_float_mix` feature."""
        return (a.ty.kind in "ib") == (b.ty.kind in "ib") or self.on("int_float_mix")

    def compare(self, a: E, b: E) -> E | None:
        ints = a.ty.kind in "ib" and b.ty.kind in "ib"
        return self.apply(self.rng.choice(COMPARE + (EXACT_COMPARE if ints else [])), [a, b])

    def reduce(self, a: E) -> E | None:
        r = self.rng
        fn = r.choice(REDUCE + (["np.argmax", "np.argmin"] if self.on("argmax", 0.3) else []))
        if r.random() < 0.4 or fn.startswith("np.arg"):
            return self.apply(f"{fn}({{0}})", [a])
        ax = r.randrange(-a.ty.ndim, a.ty.ndim)
        keep = ", keepdims=True" if r.random() < 0.25 else ""
        if r.random() < 0.3:
            return self.apply(f"{{0}}.{fn[3:]}(axis={ax}{keep})", [a])
        return self.apply(f"{fn}({{0}}, axis={ax}{keep})", [a])

    def int_scalar(self, depth: int) -> E | None:
        """An integer scalar expression (traced or a Python int)."""
        env = self.readable()
        names = [n for n, v in env.items() if v.ty.kind == "i" and not v.ty.shape]
        arrays = [n for n, v in env.items() if v.ty.kind in "ib" and v.ty.ndim == 1]
        if names and self.rng.random() < 0.6:
            n = self.rng.choice(sorted(names))
            return self.var(n, env[n])
        if arrays:
            n = self.rng.choice(sorted(arrays))
            return self.apply(self.rng.choice(["np.sum({0})", "{0}[0]", "{0}[-1]"]),
                              [self.var(n, env[n])])
        return None

    def index(self, a: E, depth: int) -> E | None:
        r, d = self.rng, a.ty.shape[0]
        form = r.choice(["static", "static", "traced", "array", "const_array", "slice",
                         "shape"])
        if form == "static":
            k = r.randrange(-d, d)
            return self.apply(f"{{0}}[{k}]", [a], view=a.ty.ndim > 1)
        if form == "traced" and self.on("int_index"):
            i = self.int_scalar(depth)
            if i is None:
                return None
            env = self.readable()
            v = env.get(i.src)
            if v is not None and v.bound is not None and v.bound <= d and r.random() < 0.5:
                return self.apply("{0}[{1}]", [a, i], view=a.ty.ndim > 1)
            if self.on("oob_index", 0.3):
                return self.apply("{0}[{1}]", [a, i], view=a.ty.ndim > 1)
            return self.apply(f"{{0}}[{{1}} % {d}]", [a, i], view=a.ty.ndim > 1)
        if form == "array" and self.on("int_index"):
            env = self.readable()
            arrays = [n for n, v in env.items() if v.ty.dtype == "int64" and v.ty.ndim == 1]
            if not arrays:
                return None
            n = r.choice(sorted(arrays))
            idx = self.var(n, env[n])
            if self.on("oob_index", 0.3):
                return self.apply("{0}[{1}]", [a, idx], view=False)
            return self.apply(f"{{0}}[{{1}} % {d}]", [a, idx], view=False)
        if form == "const_array" and self.on("int_index"):
            idx = [r.randrange(-d, d) for _ in range(r.randint(1, 4))]
            return self.apply(f"{{0}}[np.array({idx})]", [a], view=False)
        if form == "slice" and d >= 2:
            t = r.choice(["{0}[1:]", "{0}[:-1]", "{0}[::-1]", "{0}[::2]"] +
                         (["{0}[:, 0]", "{0}[1:, ::-1]", "{0}[:, 1:]"] if a.ty.ndim == 2 else []))
            return self.apply(t, [a])
        if form == "shape":
            t = r.choice(["np.reshape({0}, (-1,))", "np.expand_dims({0}, 0)"] +
                         (["{0}.T", "np.transpose({0})"] if a.ty.ndim == 2 else
                          ["{0}[None, :]", "{0}[:, None]"]))
            if r.random() < 0.3:
                b = self.like(a.ty, depth - 1)
                t = r.choice(["np.concatenate([{0}, {1}])", "np.stack([{0}, {1}])"])
                return b and self.apply(t, [a, b], view=False)
            return self.apply(t, [a])
        return None

    def matmul(self, a: E, depth: int) -> E | None:
        env = self.readable()
        k = a.ty.shape[-1]
        fits = [n for n, v in env.items() if v.ty.kind == "f" and v.ty.ndim in (1, 2)
                and v.ty.shape[0] == k]
        if not fits:
            return None
        n = self.rng.choice(sorted(fits))
        b = self.var(n, env[n])
        if a.ty.ndim == 1 and b.ty.ndim == 1 and self.rng.random() < 0.4:
            return self.apply("np.outer({0}, {1})", [a, b])
        return self.apply(self.rng.choice(["({0} @ {1})", "np.dot({0}, {1})"]), [a, b])

    def cast(self, a: E) -> E | None:
        if a.ty.kind == "b":
            t = self.rng.choice(["{0}.astype(np.int64)", "{0}.astype(np.float64)",
                                 "{0}.astype(np.float32)"])
        elif a.ty.kind == "i" or a.ty.dtype == "float32":
            t = self.rng.choice(["{0}.astype(np.float64)", "{0}.astype(np.float32)"])
        else:
            t = "{0}.astype(np.float64)"
        return self.apply(t, [a], view=False) if a.ty.shape else None

    def call(self, h, depth: int) -> E | None:
        args = []
        for t in h.params:
            e = self.like(t, depth - 1)
            if e is None:
                return None
            args.append(e)
        views = frozenset().union(*[e.views for e in args])  # (it may return an argument)
        src = f"{h.name}({', '.join(e.src for e in args)})"
        return E(src, h.ret, views, h.ret.kind in "ib", True)  # (maybe: typer._helper_call)

    def cond(self, depth: int) -> E:
        """A scalar condition for `if`/`while`/ternaries: a comparison, maybe combined."""
        for _ in range(10):
            a = self.scalar(depth)
            b = self.scalar(depth - 1) if self.rng.random() < 0.4 else self.const("f")
            c = self.compare(a, b)
            if c is None:
                continue
            r = self.rng.random()
            if r < 0.15:
                c2 = self.compare(self.scalar(depth - 1), self.const("f"))
                c2 = c2 and self.apply(f"({{0}} {self.rng.choice(['and', 'or'])} {{1}})",
                                       [c, c2])
                if c2 is not None:
                    return c2
            if r > 0.92:
                return self.apply("(not {0})", [c]) or c
            return c
        return E("True", Ty("bool", (), True))

    def scalar(self, depth: int) -> E:
        """A 0-d numeric expression (an array expression reduced or indexed to a scalar)."""
        for _ in range(6):
            e = self.expr(depth)
            if e.ty.kind == "b":
                continue
            if not e.ty.shape:
                return e
            t = self.rng.choice(["np.sum({0})", "np.mean({0})", "np.max({0})"]) \
                if self.on("reductions") else "{0}" + "[0]" * e.ty.ndim
            s = self.apply(t, [e])
            if s is not None:
                return s
        return self.const("f")

    def like(self, ty: Ty, depth: int, exact: bool = True) -> E | None:
        """An expression of type `ty` (or `ty` up to Python/numpy scalar, unless `exact`)."""
        def ok(e):
            return e is not None and (e.ty == ty or (not exact and e.ty.same_up_to_weakness(ty)
                                                     and not ty.shape))
        env = self.readable()
        same = [n for n, v in env.items() if ok(E(n, v.ty))]
        for _ in range(12):
            r = self.rng.random()
            if same and (depth <= 0 or r < 0.25):
                n = self.rng.choice(sorted(same))
                return self.var(n, env[n])
            if ty.weak and not ty.shape and r < 0.35:
                return self.const(ty.kind)
            if same and r < 0.8:  # wrap a value of the right type
                base = self.like(ty, depth - 1, exact)
                if base is None:
                    continue
                if self.rng.random() < 0.5:
                    e = self.apply(self.rng.choice(UNARY), [base])
                else:
                    other = self.expr(depth - 1)
                    if not self.mix_ok(base, other):
                        continue
                    e = self.apply(self.rng.choice(BINARY), [base, other])
                    if e is None or not ok(e):
                        e = self.apply(self.rng.choice(BINARY), [other, base])
            else:
                e = self.expr(depth)
            if ok(e):
                return e
        if same:
            n = self.rng.choice(sorted(same))
            return self.var(n, env[n])
        if ty.weak and not ty.shape:
            return self.const(ty.kind)
        return None
