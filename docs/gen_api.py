"""Generate docs/api.md, the API reference, from the public names and their docstrings.

    python docs/gen_api.py            # rewrite docs/api.md
    python docs/gen_api.py --check    # exit 1 if docs/api.md is out of date

The public names of a module (`public_names`, also used by tests/test_docs.py) are its
`__all__` when it has one; otherwise every attribute not starting with `_` that is not a
module or a `__future__` feature and is defined inside that module's package (re-exports
from numpy, dataclasses, ... are not public). For `llgrad` itself every such attribute is public
(it is a module of re-exports), plus the compiler names it loads lazily (`llgrad._LAZY`).
Names without a docstring that mirror PyTorch get a one-line pointer to the PyTorch name.
"""
from __future__ import annotations

import __future__
import importlib
import inspect
import os
import sys
import types

MODULES = [  # (public module name, one-line description)
    ("llgrad", "the compiler (`differentiate`, `grad`, ...) and the eager tensor library"),
    ("llgrad.autograd", "PyTorch's `torch.autograd`: backward, grad, Function, grad modes, "
     "anomaly mode, gradcheck"),
    ("llgrad.autograd.functional", "`jacobian`, `hessian`, `vjp`, `jvp`, `hvp`, `vhp` "
     "(as `torch.autograd.functional`)"),
    ("llgrad.autograd.profiler", "the profiler (as `torch.autograd.profiler`)"),
    ("llgrad.autograd.forward_ad", "forward-mode dual tensors (as "
     "`torch.autograd.forward_ad`)"),
    ("llgrad.nn", "modules, layers and losses (as `torch.nn`)"),
    ("llgrad.nn.functional", "stateless layers and losses (as `torch.nn.functional`)"),
    ("llgrad.nn.init", "parameter initialisation (as `torch.nn.init`)"),
    ("llgrad.nn.utils", "gradient clipping and parameter vectors (as `torch.nn.utils`)"),
    ("llgrad.optim", "optimisers (as `torch.optim`)"),
    ("llgrad.optim.lr_scheduler", "learning-rate schedules (as `torch.optim.lr_scheduler`)"),
    ("llgrad.utils.data", "datasets, samplers and DataLoader (as `torch.utils.data`)"),
    ("llgrad.linalg", "linear algebra (as `torch.linalg`): solves, factorizations, norms"),
    ("llgrad.special", "special functions (as `torch.special`, with scipy.special's names)"),
    ("llgrad.errors", "the error classes (every error says what, where and how to fix) and "
     "the performance warnings"),
    ("llgrad.config", "options set from code (`update`); the LLGRAD_* environment flags"),
    ("llgrad.viz", "pictures of autograd graphs and IR (Graphviz DOT)"),
    ("llgrad.distributed", "data-parallel gradients on Dask (`pip install llgrad[distributed]`)"),
]
OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "api.md")
TORCH_PREFIX = {"llgrad": "torch", "llgrad.autograd": "torch.autograd",
                "llgrad.nn": "torch.nn", "llgrad.nn.functional": "torch.nn.functional",
                "llgrad.nn.init": "torch.nn.init", "llgrad.nn.utils": "torch.nn.utils",
                "llgrad.optim": "torch.optim",
                "llgrad.optim.lr_scheduler": "torch.optim.lr_scheduler",
                "llgrad.utils.data": "torch.utils.data",
                "llgrad.linalg": "torch.linalg", "llgrad.special": "torch.special"}


def load(name: str):
    import llgrad
    if name == "llgrad":
        return llgrad
    obj = llgrad
    for part in name.split(".")[1:]:
        obj = getattr(obj, part, None) or importlib.import_module(
            f"{obj.__name__}.{part}")
    return obj


def public_names(name: str) -> list[str]:
    """The public names of module `name`, by the rule in this file's docstring."""
    m = load(name)
    if hasattr(m, "__all__"):
        return list(m.__all__)
    out = []
    for n, v in vars(m).items():
        if n.startswith("_") or isinstance(v, (types.ModuleType, __future__._Feature)):
            continue
        owner = getattr(v, "__module__", None) if isinstance(v, (type, types.FunctionType)) \
            else None
        if name != "llgrad" and owner is not None and not owner.startswith(m.__name__):
            continue
        out.append(n)
    if name == "llgrad":
        out += sorted(set(getattr(m, "_LAZY", ())) - set(out))
    return out


def _doc(obj) -> str | None:
    if isinstance(obj, type):
        d = obj.__dict__.get("__doc__")
        return inspect.cleandoc(d) if d else None
    if not callable(obj):
        return None
    d = getattr(obj, "__doc__", None)
    return inspect.cleandoc(d) if d else None


_SECTIONS = ("Args:", "Arguments:", "Returns:", "Raises:", "Yields:", "Attributes:",
             "Example:", "Examples:", "Note:")


def markdown(doc: str) -> str:
    """A Google-style docstring as Markdown: section bodies become bullet lists, examples
    become fenced code; other text is kept as written."""
    out: list[str] = []
    lines = doc.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.strip() in _SECTIONS:
            out.append(f"**{line.strip()[:-1]}:**")
            body = []
            i += 1
            while i < len(lines) and (not lines[i].strip() or lines[i].startswith(" ")):
                body.append(lines[i])
                i += 1
            while body and not body[-1].strip():
                body.pop()
            text = inspect.cleandoc("\n".join(body)) if body else ""
            if line.strip().startswith("Example") or text.startswith(">>>"):
                out += ["", "```python", text, "```", ""]
            elif line.strip() in ("Returns:", "Yields:", "Note:"):
                out += ["", " ".join(t.strip() for t in text.splitlines()), ""]
            else:
                items: list[str] = []
                for b in text.splitlines():
                    if b and not b.startswith(" "):
                        items.append(b.strip())
                    elif items:
                        items[-1] += " " + b.strip()
                out += [""] + [f"- {it}" for it in items] + [""]
            continue
        out.append(line)
        i += 1
    return "\n".join(out).strip()


def _signature(obj) -> str:
    try:
        target = obj.__init__ if isinstance(obj, type) and "__init__" in vars(obj) else obj
        sig = inspect.signature(target)
    except (TypeError, ValueError):
        return "(...)"
    params = [p.replace(annotation=_Raw(p.annotation)) if isinstance(p.annotation, str) else p
              for p in sig.parameters.values()]
    if isinstance(obj, type) and params and params[0].name == "self":
        params = params[1:]
    return str(sig.replace(parameters=params, return_annotation=inspect.Signature.empty))


class _Raw:
    """A string annotation printed without quotes."""

    def __init__(self, text: str):
        self.text = text

    def __repr__(self) -> str:
        return self.text


def _summary(doc: str | None) -> str:
    return (doc or "").split("\n\n")[0].replace("\n", " ").strip()


def _members(cls) -> list[str]:
    """`name`: first docstring line, for public methods and properties of a class."""
    rows = []
    for n, v in sorted(vars(cls).items()):
        if n.startswith("_") and n not in ("__call__",):
            continue
        if isinstance(v, (staticmethod, classmethod)):
            v = v.__func__
        if not (callable(v) or isinstance(v, property)):
            continue
        d = _summary(v.__doc__ and inspect.cleandoc(v.__doc__))
        sig = "" if isinstance(v, property) else _signature(v).replace("(self, ", "(").replace(
            "(self)", "()")
        rows.append(f"- `{n}{sig}`" + (f": {d}" if d else ""))
    return rows


def _entry(mod: str, name: str, obj, seen: dict) -> list[str]:
    qual = f"{mod}.{name}"
    if id(obj) in seen and not isinstance(obj, (int, float, str, bool)):
        return [f"- `{name}`: the same object as `{seen[id(obj)]}`."]
    if callable(obj) or isinstance(obj, type):
        seen[id(obj)] = qual
    doc = _doc(obj)
    kind = "class" if isinstance(obj, type) else ("" if callable(obj) else "value")
    if not callable(obj):
        return [f"- `{name}`: `{obj!r}` ({type(obj).__name__})."]
    head = f"### `{qual}{_signature(obj)}`" + (f" ({kind})" if kind else "")
    if doc is None:
        torch = TORCH_PREFIX.get(mod)
        doc = (f"As PyTorch's `{torch}.{name}` (same arguments and semantics)."
               if torch else "(no docstring)")
    lines = [head, "", markdown(doc), ""]
    if isinstance(obj, type):
        members = _members(obj)
        if members:
            lines += ["Members:", ""] + members + [""]
    return lines


def _tensor_methods() -> list[str]:
    from llgrad import Tensor
    names = sorted(n for n in dir(Tensor) if not n.startswith("_"))
    documented, plain = [], []
    for n in names:
        v = inspect.getattr_static(Tensor, n)
        d = v.__doc__ if isinstance(v, (types.FunctionType, property)) else None
        (documented if d else plain).append((n, _summary(d and inspect.cleandoc(d))))
    out = ["### `llgrad.Tensor` methods and attributes", "",
           "Tensor methods follow `torch.Tensor` (same names, arguments and semantics, "
           "including in-place `_` variants, in-place augmented assignment (`x += y`), their "
           "version counters, and in-place ops through views updating the base's graph). "
           "Documented here:", ""]
    out += [f"- `Tensor.{n}`: {d}" for n, d in documented]
    out += ["", "Also (as in PyTorch): " + ", ".join(f"`{n}`" for n, _ in plain) + ".", ""]
    return out


def generate() -> str:
    lines = ["# llgrad API reference", "",
             "Generated from the docstrings by `python docs/gen_api.py` (do not edit by hand; "
             "`tests/test_docs.py` fails when a public name is missing). For the ideas behind "
             "the API see [how_it_works.md](how_it_works.md).", "", "Modules:", ""]
    lines += [f"- [`{m}`](#{m.replace('.', '')}): {d}" for m, d in MODULES]
    lines.append("")
    seen: dict = {}
    for mod, desc in MODULES:
        m = load(mod)
        lines += [f"## `{mod}`", "", desc[0].upper() + desc[1:] + ".", ""]
        mdoc = inspect.getdoc(m) if mod != "llgrad" else None
        if mdoc:
            lines += [markdown(mdoc), ""]
        names = public_names(mod)
        if mod == "llgrad":  # the compiler first
            lazy = [n for n in names if n in getattr(m, "_LAZY", ())]
            names = lazy + [n for n in names if n not in lazy]
        values = []
        for n in names:
            try:
                obj = getattr(m, n)
            except AttributeError:
                lines += [f"### `{mod}.{n}`", "", "(not available in this build)", ""]
                continue
            if not callable(obj):
                values.append(f"- `{n}`: `{obj!r}`")
                continue
            lines += _entry(mod, n, obj, seen)
            if mod == "llgrad" and n == "Tensor":
                lines += _tensor_methods()
        if values:
            lines += ["Values:", ""] + values + [""]
    return "\n".join(lines).rstrip() + "\n"


def main(argv: list[str]) -> int:
    text = generate()
    if "--check" in argv:
        with open(OUT, encoding="utf-8") as f:
            if f.read() != text:
                print("docs/api.md is out of date: run python docs/gen_api.py", file=sys.stderr)
                return 1
        return 0
    with open(OUT, "w", encoding="utf-8") as f:
        f.write(text)
    print(f"wrote {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
