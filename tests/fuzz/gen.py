"""The fuzzer's program generator: random, valid, readable Python source for llgrad.

`generate(seed, index, features)` returns a `Program`: the source of a module with helper
functions `h0, h1, ...`, the function under test `f(...)` returning a tuple of values, and
`loss(...)` reducing `f`'s float64 outputs to a scalar (for gradients); plus the argument
specs from which the oracle draws inputs. The same (seed, index) always gives the same
program. Statements: assignments, rebinding (also inside branches and loops, keeping the
name's type), augmented assignment, element updates `y[i] = ...`, `if`/`elif`/`else` on
traced conditions (names defined in one branch only are not read after it), `for` over
`range` and over arrays, `while` with a counter, `break`/`continue`, nested loops, helper
calls; expressions in exprs.py. Each construct sits behind a feature name (program.py), so
a run can leave out a construct llgrad is known to get wrong (KNOWN_BUGS).

Note [Fresh arrays]
numpy's in-place updates (`y += a`, `y[i] = a`) are visible through every name that shares
`y`'s memory, and llgrad refuses such programs (it computes updates by value). So the
generator updates in place only names it knows own their array ("fresh": bound to the result
of arithmetic, a reduction, a copy), and marks a name not fresh as soon as an alias or view of
it is taken (`z = y`, `z = y[1:]`, `for r in y`), an argument, or a loop's row.
"""
from __future__ import annotations

import random
from dataclasses import dataclass

from tests.fuzz.exprs import E, Exprs, Var
from tests.fuzz.ftypes import Ty, merge
from tests.fuzz.program import DEFAULT_FEATURES, Arg, Program

@dataclass
class Helper:
    name: str
    params: list
    ret: Ty


def ind(lines: list[str]) -> list[str]:
    return ["    " + ln for ln in lines]


class Gen(Exprs):
    MAX_DEPTH = 3

    def __init__(self, rng: random.Random, features=DEFAULT_FEATURES):
        self.rng, self.features = rng, frozenset(features)
        self.env: dict[str, Var] = {}
        self.blocked: set[str] = set()   # not readable here (rebound in a sibling branch)
        self.protected: set[str] = set()  # loop counters, rows, arguments: never rebound
        self.helpers: list[Helper] = []
        self.counter = 0
        self.loop = 0                    # enclosing loops (break/continue allowed when > 0)
        self.outer: set[str] = set()     # names bound before the enclosing loops
        self.helper_ret: Ty | None = None
        self.assigned: set[str] = set()  # names (re)bound or updated in the current branch

    def readable(self) -> dict[str, Var]:
        return {n: v for n, v in self.env.items() if n not in self.blocked}

    def fresh_name(self, prefix="v") -> str:
        self.counter += 1
        return f"{prefix}{self.counter}"

    def bind(self, name: str, e: E) -> None:
        for n in e.views:
            if n in self.env:
                self.env[n].fresh = False
        self.env[name] = Var(e.ty, fresh=not e.views, counter=e.counter, const=e.const)
        self.assigned.add(name)

    def rebind_ok(self, old: Ty, new: Ty, depth: int) -> bool:
        """May a name of type `old` be rebound to `new` here? In a loop the type must stay
        (each iteration runs the same code); in a branch the paths' types must merge."""
        if self.loop:
            return new == old or (old.weak is None and old.same_up_to_weakness(new))
        return depth == 0 or merge(old, new) is not None

    # -- statements ----------------------------------------------------------------------------
    def block(self, depth: int, n: tuple = (1, 3)) -> list[str]:
        out = []
        for _ in range(self.rng.randint(*n)):
            out += self.stmt(depth)
        return out or ["pass"]

    def stmt(self, depth: int) -> list[str]:
        w = {"assign": 5, "rebind": 4 if self.on("branch_rebind") or depth == 0 else 0,
             "aug": 1.5 * self.on("augassign"), "update": 1.5 * self.on("element_update")}
        if depth < self.MAX_DEPTH and (depth == 0 or self.on("nested", 0.7 / depth)):
            w.update({"if": 2.5 * self.on("branches"), "for": 2 * self.on("loops"),
                      "rows": 0.6 * self.on("for_rows"), "while": 0.8 * self.on("while")})
        if self.loop and self.on("break_continue"):
            w["jump"] = 1.2
        if self.helper_ret is not None and depth > 0 and self.on("early_return") and \
                (not self.loop or self.on("return_in_loop")):
            w["return"] = 0.6
        if depth > 0 and self.on("raise"):
            w["raise"] = 0.2
        kind = self.rng.choices(list(w), list(w.values()))[0]
        return getattr(self, "s_" + kind)(depth)

    def aliases_outer(self, e: E) -> bool:
        """Would binding `e` alias a value a loop around us updates in place? (On the next
        iteration an update before this statement would show through the alias.)"""
        return any(n in self.outer and self.env[n].fresh for n in e.views if n in self.env)

    def s_assign(self, depth: int) -> list[str]:
        for _ in range(4):
            e = self.expr(self.rng.randint(1, 3))
            if e.ty.ndim <= 2 and not self.aliases_outer(e):
                break
        else:
            return []
        name = self.fresh_name()
        self.bind(name, e)
        return [f"{name} = {e.src}"]

    def rebindable(self, pred=lambda v: True) -> list[str]:
        return sorted(n for n, v in self.readable().items()
                      if n not in self.protected and pred(v))

    def bounded(self, name: str, e: E) -> E:
        """Inside a loop: keep a carried value bounded (tanh, or a mean with the old value)."""
        if not self.loop:
            return e
        if e.ty.kind == "f":
            t = self.rng.choice(["np.tanh({0})", "np.sin({0})", "(0.5 * {1} + 0.5 * np.tanh({0}))"])
        elif e.ty.kind == "i":
            t = "({0} % 5)"
        else:
            return e
        old = self.var(name, self.env[name]) if name in self.env else e
        b = self.apply(t, [e, old])
        return b if b is not None and b.ty == e.ty else e

    def s_rebind(self, depth: int) -> list[str]:
        names = self.rebindable()
        if not names:
            return self.s_assign(depth)
        name = self.rng.choice(names)
        ty = self.env[name].ty
        e = self.like(ty, self.rng.randint(1, 3), exact=bool(self.loop) and ty.weak is not None)
        if e is not None:
            e = self.bounded(name, e)
        if e is None or not self.rebind_ok(ty, e.ty, depth) or self.aliases_outer(e):
            return self.s_assign(depth)
        if ty.weak is None and ty.same_up_to_weakness(e.ty):
            e = E(e.src, ty, e.views)
        self.bind(name, e)
        return [f"{name} = {e.src}"]

    def s_aug(self, depth: int) -> list[str]:
        alias = self.on("alias_inplace", 0.3)  # (llgrad must refuse, or agree with numpy)
        names = self.rebindable(lambda v: v.fresh or alias or (not v.ty.shape and
                                                               self.on("scalar_alias_aug")))
        if not names:
            return self.s_assign(depth)
        name = self.rng.choice(names)
        v = self.env[name]
        op = self.rng.choice(["+", "-", "*"])
        rhs = self.expr(self.rng.randint(0, 2))
        if op == "*" and self.loop and rhs.ty.kind == "f":
            rhs = self.apply("np.cos({0})", [rhs]) or rhs
        if not self.mix_ok(self.var(name, v), rhs):
            return self.s_assign(depth)

        res = self.apply(f"({{0}} {op} {{1}})", [self.var(name, v), rhs])
        if res is None or not self.assignable(v.ty, res.ty, inplace=bool(v.ty.shape)):
            return self.s_assign(depth)
        if v.ty.shape and res.ty.dtype != v.ty.dtype and not self.on("inplace_cast"):
            return self.s_assign(depth)  # `y32 += x64` stays float32 in numpy
        if not v.ty.shape and not self.rebind_ok(v.ty, res.ty, depth):
            return self.s_assign(depth)
        if not v.ty.shape:
            keep = v.ty.weak is None and v.ty.same_up_to_weakness(res.ty)
            self.env[name] = Var(v.ty if keep else res.ty, counter=res.counter or v.counter)
        self.assigned.add(name)
        return [f"{name} {op}= {rhs.src}"]

    @staticmethod
    def assignable(target: Ty, value: Ty, inplace: bool) -> bool:
        """numpy stores `value` into `target` without a cross-kind cast (float into int)."""
        if inplace:
            import numpy as np
            try:
                if np.broadcast_shapes(target.shape, value.shape) != target.shape:
                    return False
            except ValueError:
                return False
        return value.kind in {"f": "fib", "i": "ib", "b": "b"}[target.kind]

    def s_update(self, depth: int) -> list[str]:
        alias = self.on("alias_inplace", 0.3)
        names = self.rebindable(lambda v: (v.fresh or alias) and v.ty.shape)
        if not names:
            return self.s_assign(depth)
        name = self.rng.choice(names)
        v = self.env[name]
        d = v.ty.shape[0]
        r = self.rng.random()
        i = self.int_scalar(depth) if self.on("int_index") and r < 0.4 else None
        if i is not None:
            idx = f"{{1}} % {d}"
        else:
            idx = self.rng.choice([str(self.rng.randrange(-d, d)), "1:", ":-1", "::2"])
        if v.ty.ndim == 2 and self.rng.random() < 0.5:
            idx += f", {self.rng.randrange(v.ty.shape[1])}"
        operands = [self.var(name, v)] + ([i] if i is not None else [])
        target = self.apply(f"{{0}}[{idx}]", operands)
        idx = idx.replace("{1}", i.src) if i is not None else idx
        if target is None:
            return self.s_assign(depth)
        val = self.like(target.ty, 2, exact=False) if self.rng.random() < 0.5 else \
            self.expr(self.rng.randint(0, 2))
        if val is not None and self.loop and val.ty.kind == "f":
            val = self.apply("np.tanh({0})", [val]) or val
        op = self.rng.choice(["=", "=", "+="]) if target.ty.kind != "b" else "="
        stored = val and (val if op == "=" else self.apply("({0} + {1})", [target, val]))
        if stored is None or not self.assignable(target.ty, stored.ty, inplace=True):
            return self.s_assign(depth)
        if stored.ty.dtype != target.ty.dtype and stored.ty.weak is not True and \
                not self.on("inplace_cast"):
            return self.s_assign(depth)  # numpy casts to the array's dtype
        self.assigned.add(name)
        return [f"{name}[{idx}] {op} {val.src}"]

    def branch(self, depth: int, before: dict) -> tuple[list[str], dict, set]:
        self.env = {n: v.copy() for n, v in before.items()}
        outer, self.assigned = self.assigned, set()
        lines = self.block(depth + 1)
        assigned, self.assigned = self.assigned, outer | self.assigned
        return lines, self.env, assigned

    def s_if(self, depth: int) -> list[str]:
        before, blocked = self.env, set(self.blocked)
        out = [f"if {self.cond(2).src}:"]
        lines, env_t, assigned = self.branch(depth, before)
        envs, out = [env_t], out + ind(lines)
        n_else = self.rng.choice([0, 1, 1, 2] if self.on("elif") else [0, 1])
        base = before
        for k in range(n_else):
            if not self.on("cross_branch_reads"):
                self.blocked |= assigned  # a sibling branch must not see the rebinding
            if not self.on("branch_alias"):  # llgrad's alias check is path-insensitive
                base = {n: Var(v.ty, v.fresh and all(e[n].fresh for e in envs), v.bound,
                               v.counter, v.const) for n, v in base.items()}
            head = "else:" if k == n_else - 1 else None
            if head is None:
                self.env = base
                head = f"elif {self.cond(2).src}:"
            lines, env_k, assigned_k = self.branch(depth, base)
            assigned |= assigned_k
            envs.append(env_k)
            out += [head] + ind(lines)
        self.blocked = blocked
        if n_else == 0:
            envs.append(before)
        self.env = self.join(before, envs)
        for n in assigned & set(self.env):  # bound in a traced branch: typecheck.traced
            v = self.env[n]
            v.counter |= v.ty.kind in "ib"
            if v.ty.weak is True and v.ty.kind == "f" and not self.on("pyfloat_f32"):
                v.ty = Ty(v.ty.dtype, v.ty.shape, None)
        return out

    def join(self, before: dict, envs: list[dict], keep_new: bool = True) -> dict:
        """The environment after control flow that ran one of `envs` (names bound on every
        path, with a type all paths agree on, up to Python-vs-numpy scalars)."""
        out = {}
        names = set.intersection(*[set(e) for e in envs])
        for n in sorted(names):
            if n not in before and not keep_new:
                continue
            ty = envs[0][n].ty
            for e in envs[1:]:
                ty = ty and merge(ty, e[n].ty)
            if ty is not None:  # fresh only if no path took a view of it
                out[n] = Var(ty, all(e[n].fresh for e in envs), envs[0][n].bound,
                             any(e[n].counter for e in envs), any(e[n].const for e in envs))
        return out

    def loop_body(self, depth: int, header: list[str], locals_: dict) -> list[str]:
        before = self.env
        self.env = {n: v.copy() for n, v in before.items()}
        for v in self.env.values():  # what a staged loop carries is traced: typecheck.traced
            v.counter |= v.ty.kind in "ib"
            if v.ty.weak is True and v.ty.kind == "f" and not self.on("pyfloat_f32"):
                v.ty = Ty(v.ty.dtype, v.ty.shape, None)
        self.env.update(locals_)
        self.protected |= set(locals_)
        self.loop += 1
        outer, self.outer = self.outer, self.outer | set(before)
        body = self.block(depth + 1, (1, 3))
        self.loop, self.outer = self.loop - 1, outer
        after = self.env
        self.env = self.join(before, [before, after], keep_new=False)
        for n in locals_:
            self.env.pop(n, None)
        return header + ind(body)

    def accumulator(self) -> list[str]:
        if not self.on("accumulators", 0.4):
            return []
        name = self.fresh_name("acc")
        kind = self.rng.choice(["float64", "int64"])
        self.env[name] = Var(Ty(kind, (), None), counter=kind == "int64", const=True)
        return [f"{name} = {'0.0' if self.env[name].ty.kind == 'f' else '0'}"]

    def s_for(self, depth: int) -> list[str]:
        pre = self.accumulator()
        i = self.fresh_name("i")
        env = self.readable()
        sized = sorted(n for n, v in env.items() if v.ty.shape)
        r = self.rng.random()
        bound = None
        if r < 0.4 or not sized:
            stop = self.rng.randint(1, 4)
            rng_src, bound = f"range({stop})", stop
        elif r < 0.7:
            a = self.rng.choice(sized)
            d = env[a].ty.shape[0]
            rng_src, bound = self.rng.choice(
                [(f"range(len({a}))", d), (f"range(1, {a}.shape[0])", d),
                 (f"range({d} - 1, -1, -1)", d)])
        elif "n" in env and "static_args" in self.features and r < 0.8:
            rng_src = "range(n)"
        elif self.on("traced_range"):
            k = self.int_scalar(1)
            if k is None:
                rng_src, bound = "range(2)", 2
            else:
                rng_src = f"range({k.src} % 3 + 1)"
        else:
            rng_src, bound = "range(3)", 3
        locals_ = {i: Var(Ty("int64", (), True), bound=bound, counter=True, const=True)}
        return pre + self.loop_body(depth, [f"for {i} in {rng_src}:"], locals_)

    def s_rows(self, depth: int) -> list[str]:
        env = self.readable()
        arrays = sorted(n for n, v in env.items() if v.ty.shape and v.ty.ndim <= 2)
        if not arrays:
            return self.s_for(depth)
        a = self.rng.choice(arrays)
        self.env[a].fresh = False
        r = self.fresh_name("r")
        t = env[a].ty
        locals_ = {r: Var(Ty(t.dtype, t.shape[1:], False), fresh=False)}
        return self.accumulator() + self.loop_body(depth, [f"for {r} in {a}:"], locals_)

    def s_while(self, depth: int) -> list[str]:
        w = self.fresh_name("w")
        self.env[w] = Var(Ty("int64", (), True), counter=True, const=True)
        self.protected.add(w)
        pre = self.accumulator()
        cond = self.cond(1).src
        head = [f"{w} = 0", *pre, f"while {w} < {self.rng.randint(1, 4)} and {cond}:"]
        lines = self.loop_body(depth, [], {})
        return head + ind([f"{w} = {w} + 1"]) + lines

    def s_jump(self, depth: int) -> list[str]:
        return [f"if {self.cond(2).src}:", f"    {self.rng.choice(['break', 'continue'])}"]

    def s_return(self, depth: int) -> list[str]:
        e = self.like(self.helper_ret, 2)
        if e is None:
            return self.s_assign(depth)
        return [f"if {self.cond(2).src}:", f"    return {e.src}"]

    def s_raise(self, depth: int) -> list[str]:
        return [f"if {self.cond(2).src}:", '    raise ValueError("fuzz: raised")']

    # -- functions -----------------------------------------------------------------------------
    def helper(self, k: int, pool: list[Ty]) -> list[str]:
        params = [self.rng.choice(pool) for _ in range(self.rng.randint(1, 3))]
        names = [f"p{j}" for j in range(len(params))]
        self.env = {n: Var(t, fresh=False, counter=t.kind in "ib", const=True)
                    for n, t in zip(names, params)}  # (may get constants or traced values)
        self.protected = set(names)
        ret = self.expr(2)
        for _ in range(5):  # pick the return type first, so early returns can match it
            if ret.ty.weak is not None and ret.ty.ndim <= 2:
                break
            ret = self.expr(2)
        self.helper_ret = ret.ty
        body = self.block(1, (1, 4))
        self.helper_ret = None
        final = self.like(ret.ty, 2) or ret
        if final.ty != ret.ty:
            final = ret
        h = Helper(f"h{k}", params, ret.ty)
        self.helpers.append(h)
        return [f"def {h.name}({', '.join(names)}):"] + ind(body + [f"return {final.src}"])

    def arguments(self) -> list[Arg]:
        r = self.rng
        n, m = r.randint(2, 4), r.randint(2, 3)
        args = [Arg("x", "array", "float64", (n,))]
        if r.random() < 0.5:
            args.append(Arg("X", "array", "float64", r.choice([(m, n), (n, m)])))
        if self.on("mixed_dtypes"):
            if r.random() < 0.5:
                args.append(Arg("y", "array", "float32", r.choice([(n,), (m, n)])))
            if r.random() < 0.6:
                args.append(Arg("k", "array", "int64", (r.randint(2, 4),)))
            if r.random() < 0.4:
                args.append(Arg("b", "array", "bool", (n,)))
        if self.on("pyfloat_arg", 0.4):
            args.append(Arg("s", "pyfloat"))
        if self.on("static_args", 0.3):
            pairs = [(2, 3), (3, 1), (1, 2)]
            if self.on("static_bool", 0.5):
                pairs = [(True, 1), (1, True), (False, 0), (0, False)]
            args.append(Arg("n", "static", "int64", (), r.choice(pairs)))
        return args

    def program(self, seed: str) -> Program:
        args = self.arguments()
        types = Program("", args, [], "", features=self.features).param_types()
        arg_env = {a.name: Var(types[a.name], fresh=False, const=a.kind == "static")
                   for a in args}
        pool = [v.ty for v in arg_env.values()] + [Ty("float64", ()), Ty("float64", (), True)]
        lines = []
        for k in range(self.rng.choice([0, 0, 1, 2]) if self.on("helpers") else 0):
            lines += self.helper(k, pool) + ["", ""]
        self.env, self.protected = dict(arg_env), set(arg_env)
        body, outs = [], []
        static = next((a for a in args if a.kind == "static"), None)
        if static is not None and any(isinstance(v, bool) for v in static.values):
            # True and 1 differ only in types: n is used where they give different dtypes
            self.blocked.add("n")
            body.append("t0 = (x > 0.0) * n")
            outs.append("t0")
        body += self.block(0, (2, 6))
        defined = sorted((n for n in self.env if n not in arg_env),
                         key=lambda n: int(n.lstrip("abcdefghijklmnopqrstuvwxyz")))
        outs += defined[-4:]
        if not any(self.env[n].ty.dtype == "float64" for n in outs if n in self.env):
            body.append("vout = np.tanh(x)")
            self.env["vout"] = Var(Ty("float64", args[0].shape))
            outs.append("vout")
        ret = [f"np.reshape({n}, (1,))" if n in self.env and not self.env[n].ty.shape else n
               for n in outs]
        if "t0" not in outs and self.on("early_return_tuple", 0.25):
            alts = [self.like(self.env[n].ty, 1) for n in outs]
            if all(alts):  # `if c: return (...)` of the same types as the final return
                ret_alt = [f"np.reshape({e.src}, (1,))" if not e.ty.shape else e.src
                           for e in alts]
                body += [f"if {self.cond(1).src}:", f"    return ({', '.join(ret_alt)},)"]
        params = ", ".join(a.name for a in args)
        lines += [f"def f({params}):"] + ind(body + [f"return ({', '.join(ret)},)"])
        terms = [f"np.sum(np.sin(r[{j}]))" for j, n in enumerate(outs)
                 if n in self.env and self.env[n].ty.dtype == "float64"]
        lines += ["", "", f"def loss({params}):", f"    r = f({params})",
                  f"    return {' + '.join(terms)}"]
        src = "import math\n\nimport numpy as np\n\n\n" + "\n".join(lines) + "\n"
        f32 = any(a.dtype == "float32" for a in args) or "float32" in src
        wrt = [a.name for a in args if (a.kind == "array" and a.dtype == "float64")
               or (a.kind == "pyfloat" and not f32)]
        return Program(src, args, wrt, seed, self.features)


def generate(seed: int, index: int, features=DEFAULT_FEATURES) -> Program:
    """Program number `index` of the run seeded `seed` (reproducible)."""
    return Gen(random.Random(f"{seed}:{index}"), features).program(f"{seed}:{index}")
