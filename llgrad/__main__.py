"""The `llgrad` command line (`python -m llgrad ...`, also the `llgrad` console script).

    llgrad inspect FILE.py:FUNC --arg f64[100] --arg float --arg int=5 --stage backward
    llgrad cache info|clear

`inspect` imports FILE as a module (its `if __name__ == "__main__":` block does not run),
builds arguments from the specs with a seeded random generator, compiles FUNC and prints the
chosen stages. Usage errors print one line and exit 2.
"""
from __future__ import annotations

import argparse
import importlib.util
import os
import re
import sys
import traceback

STAGES = {  # stage name -> (header, Inspection attribute)
    "converted": ("converted source", "converted_source"),
    "graph": ("graph (traced IR)", "graph"),
    "forward": ("forward IR (optimised)", "forward_ir"),
    "backward": ("forward+backward IR (optimised)", "backward_ir"),
    "python": ("backward as Python source", "python_source"),
    "llvm": ("LLVM IR", "llvm_ir"),
    "asm": ("assembly", "asm"),
    "stats": ("stats", "stats"),
    "dot": ("Graphviz DOT of the forward+backward IR", None),
}
ALL = ("converted", "graph", "forward", "backward", "python", "llvm", "asm", "stats")

_DTYPES = {"f64": "float64", "float64": "float64", "f32": "float32", "float32": "float32",
           "i64": "int64", "int64": "int64", "i32": "int64", "int": "int64",
           "bool": "bool", "b1": "bool"}
_ARRAY_SPEC = re.compile(r"^\s*([A-Za-z0-9_]+)\s*\[\s*([0-9,\s]*)\]\s*$")

ARG_HELP = """\
argument specs (one --arg per positional argument, in order):
  f64[100]    a float64 array of shape (100,), standard normal values
  f32[3,4]    a float32 array of shape (3, 4); f64[] is a 0-d array
  i64[5]      an int64 array (values in 0..9); bool[5] a boolean array
  float       a Python float (standard normal); float=0.5 a given float
  int=5       a static Python int (part of the call signature, not traced)
  bool=true   a static Python bool
Values come from numpy.random.default_rng(--seed), so runs are repeatable.
"""


class UsageError(Exception):
    """A mistake on the command line: printed as one line, exit status 2."""


# -- argument specs ----------------------------------------------------------------------
def parse_spec(spec: str, rng):
    """The argument value for one `--arg` spec (see ARG_HELP)."""
    import numpy as np

    s = spec.strip()
    head, eq, value = s.partition("=")
    head = head.strip()
    if head in ("float", "int", "bool") and eq:
        try:
            if head == "float":
                return float(value)
            if head == "int":
                return int(value)
            if value.strip().lower() in ("true", "1", "false", "0"):
                return value.strip().lower() in ("true", "1")
            raise ValueError
        except ValueError:
            raise UsageError(f"bad --arg {spec!r}: {value.strip()!r} is not a {head}") from None
    if s == "float":
        return float(rng.standard_normal())
    if s in ("int", "bool"):
        raise UsageError(f"bad --arg {spec!r}: a static {s} needs a value, e.g. '{s}=5'"
                         if s == "int" else f"bad --arg {spec!r}: write 'bool=true'")
    m = _ARRAY_SPEC.match(s)
    if not m or m.group(1) not in _DTYPES:
        raise UsageError(f"bad --arg {spec!r}: expected an array like 'f64[100]' or "
                         "'f32[3,4]', or 'float', 'float=V', 'int=N', 'bool=true'")
    dims = [d.strip() for d in m.group(2).split(",") if d.strip()]
    if m.group(2).strip() and len(dims) != m.group(2).count(",") + 1:
        raise UsageError(f"bad --arg {spec!r}: empty dimension in the shape")
    shape = tuple(int(d) for d in dims)
    dtype = np.dtype(_DTYPES[m.group(1)])
    if dtype.kind == "f":
        return rng.standard_normal(shape).astype(dtype)
    if dtype.kind == "b":
        return rng.random(shape) < 0.5
    return rng.integers(0, 10, shape).astype(dtype)


def parse_wrt(items: list[str] | None):
    """`--wrt 0 --wrt 1` or `--wrt 0,1` (ints or parameter names); None keeps the default."""
    if not items:
        return None
    out: list = []
    for item in items:
        for w in item.split(","):
            w = w.strip()
            if not w:
                continue
            out.append(int(w) if re.fullmatch(r"-?\d+", w) else w)
    if not out:
        raise UsageError("--wrt needs an argument index or parameter name")
    return out[0] if len(out) == 1 else tuple(out)


# -- loading the user's function -------------------------------------------------------------
def load_function(target: str):
    """`path/to/script.py:func` -> the object `func` in that script, imported as a module
    named `__lg_inspect_<stem>__` so its `__main__` block does not run."""
    path, sep, name = target.rpartition(":")
    if not sep or not path or not name:
        raise UsageError(f"expected FILE.py:FUNCTION, got {target!r}")
    if not os.path.isfile(path):
        raise UsageError(f"file not found: {path}")
    path = os.path.abspath(path)
    stem = re.sub(r"\W", "_", os.path.splitext(os.path.basename(path))[0])
    mod_name = f"__lg_inspect_{stem}__"
    spec = importlib.util.spec_from_file_location(mod_name, path)
    if spec is None or spec.loader is None:
        raise UsageError(f"cannot import {path}: not a Python source file")
    module = importlib.util.module_from_spec(spec)
    sys.modules[mod_name] = module
    script_dir = os.path.dirname(path)
    if script_dir not in sys.path:
        sys.path.insert(0, script_dir)  # the script's own sibling imports work, as under python
    spec.loader.exec_module(module)
    obj = module
    for part in name.split("."):
        if not hasattr(obj, part):
            found = sorted(n for n, v in vars(module).items()
                           if callable(v) and not n.startswith("_")
                           and getattr(v, "__module__", mod_name) == mod_name)
            hint = f" (functions there: {', '.join(found)})" if found else ""
            raise UsageError(f"{os.path.basename(path)} has no function {name!r}{hint}")
        obj = getattr(obj, part)
    if not callable(obj):
        raise UsageError(f"{name!r} in {os.path.basename(path)} is not a function")
    return obj


def as_differentiable(obj, wrt):
    from llgrad.api import Differentiable

    if isinstance(obj, Differentiable):
        return obj if wrt is None or wrt == obj.wrt else Differentiable(obj.fn, wrt)
    return Differentiable(obj, 0 if wrt is None else wrt)


def check_call(fn, values: list, wrt) -> None:
    """Usage errors for a wrong number of --arg or a --wrt that names no argument."""
    import inspect

    try:
        sig = inspect.signature(fn)
        sig.bind(*values)
    except TypeError as e:
        n = len(values)
        raise UsageError(f"{getattr(fn, '__name__', 'the function')}{sig}: {e} "
                         f"({n} --arg given)") from None
    except ValueError:
        return  # no signature to check (a builtin): let the compiler report
    names = list(sig.parameters)
    for w in wrt if isinstance(wrt, tuple) else (wrt,):
        if isinstance(w, str) and w not in names:
            raise UsageError(f"--wrt {w}: not a parameter (parameters: {', '.join(names)})")
        if isinstance(w, int) and not -len(values) <= w < len(values):
            raise UsageError(f"--wrt {w}: out of range for {len(values)} arguments")


def _stages(items: list[str] | None) -> list[str]:
    out: list[str] = []
    for item in items or ["all"]:
        for s in item.split(","):
            s = s.strip()
            if s == "all":
                out.extend(ALL)
            elif s in STAGES:
                out.append(s)
            else:
                raise UsageError(f"unknown stage {s!r}; choose from "
                                 f"{', '.join(list(STAGES) + ['all'])}")
    return list(dict.fromkeys(out))


def stage_text(inspection, stage: str) -> str:
    if stage == "dot":
        return inspection.draw() if hasattr(inspection, "draw") else _dot(inspection)
    text = getattr(inspection, STAGES[stage][1], None)
    return "(not available in this build)" if text is None else str(text)


def _dot(inspection) -> str:
    from llgrad.transform.printers.dot import to_dot
    c = inspection._c
    return to_dot(c.joint if c.joint is not None else c.forward)


# -- commands --------------------------------------------------------------------------------
def cmd_inspect(args) -> int:
    import numpy as np

    stages = _stages(args.stage)
    wrt = parse_wrt(args.wrt)
    rng = np.random.default_rng(args.seed)
    values = [parse_spec(s, rng) for s in args.arg or []]
    try:
        obj = load_function(args.target)
    except UsageError:
        raise
    except SystemExit as e:
        print(f"llgrad inspect: error: importing {args.target.rpartition(':')[0]} called "
              f"sys.exit({e.code!r})", file=sys.stderr)
        return 1
    except Exception:  # the script itself failed to import: show its traceback
        traceback.print_exc()
        return 1
    from llgrad.api import Differentiable
    is_diff = isinstance(obj, Differentiable)
    check_call(obj.fn if is_diff else obj, values,
               wrt if wrt is not None else (obj.wrt if is_diff else 0))
    f = as_differentiable(obj, wrt)
    inspection = f.inspect(*values)
    name = getattr(f, "__name__", "function")
    stats = inspection.stats
    print(f"# {name}{stats.get('signature', '')}  wrt={f.wrt!r}  path: {inspection.path}")
    for s in stages:
        print(f"\n== {STAGES[s][0]} ==")
        print(stage_text(inspection, s).rstrip("\n"))
    return 0


def _print_result(result) -> None:
    if result is None:
        return
    if isinstance(result, dict):
        width = max((len(str(k)) for k in result), default=0)
        for k, v in result.items():
            print(f"{str(k):<{width}}  {v}")
    else:
        print(result)


def cmd_cache(args) -> int:
    try:
        cache = importlib.import_module("llgrad.cache")
    except ModuleNotFoundError as e:
        if e.name != "llgrad.cache":
            raise
        print("the on-disk compile cache is not available in this build of llgrad",
              file=sys.stderr)
        return 1
    if args.action == "info":
        _print_result(cache.info())
    else:
        try:
            n = cache.clear()
        except OSError as e:
            print(f"llgrad cache: not clearing: {e}", file=sys.stderr)
            return 1
        print(f"removed {n} cache entries" if isinstance(n, int) else ("cleared" if n is None
                                                                         else n))
    return 0


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="llgrad",
        description="llgrad: a reverse-mode AD compiler for Python/numpy. Commands:\n"
        "  inspect  compile a function from a script and print its IR, LLVM IR and assembly\n"
        "  cache    show or clear the on-disk compile cache",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="Run `llgrad COMMAND --help` for a command's options. Environment: "
        "LLGRAD_DUMP=DIR writes every stage of every compile to DIR; LLGRAD_DISABLE_JIT=1 "
        "runs the IR through the reference interpreter; LLGRAD_CACHE_DIR sets the cache "
        "directory.")
    sub = ap.add_subparsers(dest="command", metavar="COMMAND")

    ins = sub.add_parser(
        "inspect", help="print the stages of a compiled function",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Import FILE.py (without running its __main__ block), compile FUNCTION "
        "(a plain function or an @llgrad.differentiate one) for the given argument specs, "
        "and print the chosen stages.",
        epilog=ARG_HELP + "\nstages (--stage, repeat or comma-separate):\n" + "".join(
            f"  {k:<10}  {v[0]}\n" for k, v in STAGES.items()) + "  all         " + ", ".join(ALL)
        + "\n\nexample:\n  llgrad inspect model.py:loss --arg 'f64[3]' --arg 'f64[50,3]' "
        "--arg 'f64[50]' --stage backward\n")
    ins.add_argument("target", metavar="FILE.py:FUNCTION",
                     help="the script and the function in it (Class.attr paths work too)")
    ins.add_argument("--arg", action="append", metavar="SPEC",
                     help="one positional argument, e.g. 'f64[100]', 'float', 'int=5' "
                     "(repeat, in order)")
    ins.add_argument("--wrt", action="append", metavar="ARG",
                     help="differentiate w.r.t. this argument index or name (repeat or "
                     "'0,1' for several; default: the function's own wrt, else 0)")
    ins.add_argument("--stage", action="append", metavar="STAGE",
                     help="converted|graph|forward|backward|python|llvm|asm|stats|dot|all "
                     "(repeat or comma-separate; default all)")
    ins.add_argument("--seed", type=int, default=0, help="seed of the argument values "
                     "(default 0)")
    ins.set_defaults(run=cmd_inspect)

    cache = sub.add_parser("cache", help="show or clear the on-disk compile cache",
                           description="Show (info) or delete (clear) the on-disk cache of "
                           "compiled code (LLGRAD_CACHE_DIR, default the user's cache "
                           "directory).")
    cache.add_argument("action", choices=("info", "clear"))
    cache.set_defaults(run=cmd_cache)
    return ap


def main(argv: list[str] | None = None) -> int:
    ap = build_parser()
    args = ap.parse_args(argv)
    if args.command is None:
        ap.print_help(sys.stderr)
        return 2
    try:
        return args.run(args)
    except UsageError as e:
        print(f"llgrad {args.command}: error: {e}", file=sys.stderr)
        return 2
    except Exception as e:  # noqa: BLE001  a compile error: its message is the report
        from llgrad.runtime.errors import LLGradError
        if not isinstance(e, LLGradError):
            raise
        print(f"llgrad {args.command}: {type(e).__name__}: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
