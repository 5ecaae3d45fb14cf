"""Pickling compiled functions, so that Dask (or multiprocessing) can send them to workers.

A `Differentiable` pickles as a recipe, never as native code: the worker traces the function
again and compiles it, or loads the object code from its on-disk cache (llgrad/cache.py: the
key is the traced IR, so equal functions on equal machines share entries). See Note
[Pickling compiled functions].
"""
from __future__ import annotations

import ast
import hashlib
import importlib
import linecache
import textwrap
import threading
import types

# Note [Pickling compiled functions]
# A `Differentiable` is sent as (reference, source): the reference is its module and qualified
# name, which is how pickle sends functions; the source is the text of the `def` (from the
# tracer's own reader, so what the worker converts is what this process converts), its file
# and first line, its defaults and closure values, and the globals its code names (modules
# by name). On loading, the reference is tried first: an importable module gives the very
# object the worker's import made, with its caches. A function of `__main__` or of a file the
# worker cannot import is rebuilt from the source, compiled with its original file name and
# line numbers (so errors on the worker point at the user's file:line), and its lines are
# put in linecache when the worker's copy of that file differs (another host). A rebuilt
# function is kept per (source, place, options) and reused by later loads, which refresh its
# globals, closure cells and defaults: a training loop that sends it at every step traces and
# compiles once per worker, and a changed global (a captured learning rate) fails the trace's
# guards and traces again, as in the sending process. Captured values pickle with the
# pickler in use: Dask's falls back to cloudpickle for functions of `__main__`.


def reduce(d) -> tuple:
    """`Differentiable.__reduce__`: rebuild with `load` from a reference and the source."""
    fn = d.fn
    ref = (getattr(fn, "__module__", None), getattr(fn, "__qualname__", None))
    return load, (ref, _source_recipe(fn), d.wrt, d.use_disk_cache, d.method, d.checkpoint,
                  d.has_aux)


def load(ref, recipe, wrt, cache, method, checkpoint=None, has_aux=False):
    """The Differentiable a pickle describes (See Note [Pickling compiled functions])."""
    from llgrad.api import Differentiable
    found = _by_reference(*ref)
    options = (wrt, cache, method, checkpoint, has_aux)
    if found is not None and (found.wrt, found.use_disk_cache, found.method,
                              found.checkpoint, found.has_aux) == options:
        return found
    if found is not None:  # the same function with other options: no source needed
        return _remembered(("ref", ref, repr(options)),
                           lambda: Differentiable(found.fn, *options))
    if recipe is None:
        raise _unpicklable(ref)
    src, filename, firstlineno, name, qualname, module = recipe[:6]
    key = ("src", hashlib.sha256(src.encode()).hexdigest(), filename, firstlineno, qualname,
           repr(options))
    d = _remembered(key, lambda: Differentiable(_rebuild(recipe), *options))
    _refresh(d.fn, recipe)
    return d


def _by_reference(module, qualname):
    """The Differentiable at `module`.`qualname`, or None when it is not importable here."""
    from llgrad.api import Differentiable
    if not module or not qualname or module == "__main__" or "<locals>" in qualname:
        return None
    try:
        obj = importlib.import_module(module)
        for part in qualname.split("."):
            obj = vars(obj)[part] if hasattr(obj, "__dict__") else getattr(obj, part)
    except (ImportError, KeyError, AttributeError, TypeError):
        return None
    obj = obj.__func__ if isinstance(obj, staticmethod) else obj
    return obj if isinstance(obj, Differentiable) else None


_KEPT: dict = {}
_KEPT_LOCK = threading.Lock()


def _remembered(key, make):
    with _KEPT_LOCK:
        d = _KEPT.get(key)
        if d is None:
            d = _KEPT[key] = make()
        return d


def _unpicklable(ref):
    from llgrad.runtime.errors import UnsupportedError
    return UnsupportedError(
        f"cannot load the compiled function {ref[0]}.{ref[1]}: its module is not importable "
        f"here and its source was not available when it was pickled",
        fix="define the function in a .py file that the workers can import, or one whose "
        "source Python keeps (not exec or an interactive prompt without source)")


# -- the source recipe ---------------------------------------------------------------------
class _Module:
    """A module among the captured globals, pickled by name."""

    def __init__(self, name):
        self.name = name

    def get(self):
        return importlib.import_module(self.name)


def _source_recipe(fn):
    """(source, filename, first line, name, qualname, module, globals, closure, defaults,
    kwdefaults), or None without source."""
    from llgrad.tracer.convert.parsing import source_lines
    code = getattr(fn, "__code__", None)
    if code is None:
        return None
    try:
        lines, first = source_lines(fn)
        node = ast.parse(textwrap.dedent("".join(lines))).body[0]
    except (OSError, TypeError, SyntaxError, IndexError):
        return None
    if getattr(node, "name", None) != fn.__name__:  # the file changed since it was imported
        return None
    names = _global_names(code)
    glob = {k: _pickled(fn.__globals__[k]) for k in sorted(names) if k in fn.__globals__}
    cells = [_pickled(c.cell_contents) for c in fn.__closure__ or ()]
    return ("".join(lines), code.co_filename, first, fn.__name__, fn.__qualname__,
            fn.__module__, glob, tuple(zip(code.co_freevars, cells)), fn.__defaults__,
            fn.__kwdefaults__)


def _pickled(value):
    return _Module(value.__name__) if isinstance(value, types.ModuleType) else value


def _unpickled(value):
    return value.get() if isinstance(value, _Module) else value


def _global_names(code) -> set:
    """The names `code` (and the code nested in it) may read as globals."""
    out = set(code.co_names)
    for c in code.co_consts:
        if isinstance(c, types.CodeType):
            out |= _global_names(c)
    return out


def _rebuild(recipe):
    """A new function from a source recipe, compiled at the user's file and lines; its
    closure variables are parameters of an enclosing `def` called once."""
    src, filename, first, name, qualname, module, glob, cells = recipe[:8]
    _ensure_lines(filename, first, src)
    tree = ast.parse(textwrap.dedent(src))
    node = tree.body[0]
    node.decorator_list = []
    ast.increment_lineno(tree, first - 1)
    free = [k for k, _ in cells]
    outer = ast.parse(f"def __lg_outer({', '.join(free)}):\n    pass\n").body[0]
    outer.body = [node, ast.Return(ast.Name(name, ast.Load()))]
    ast.copy_location(outer, node)
    module_ast = ast.fix_missing_locations(ast.Module([outer], []))
    namespace = {"__name__": module, "__builtins__": __builtins__}
    exec(compile(module_ast, filename, "exec"), namespace)  # noqa: S102 (the user's own code)
    fn = namespace["__lg_outer"](*[None] * len(free))
    fn.__qualname__ = qualname
    return fn


def _refresh(fn, recipe) -> None:
    """Set `fn`'s globals, closure cells and defaults to the recipe's values."""
    glob, cells, defaults, kwdefaults = recipe[6:10]
    fn.__globals__.update({k: _unpickled(v) for k, v in glob.items()})
    by_name = dict(zip(fn.__code__.co_freevars, fn.__closure__ or ()))
    for k, v in cells:
        by_name[k].cell_contents = _unpickled(v)
    fn.__defaults__, fn.__kwdefaults__ = defaults, kwdefaults


def _ensure_lines(filename, first, src) -> None:
    """Make linecache give `src` at lines first.. of `filename` (the tracer reads the source
    through it): unchanged when this machine's file already has those lines."""
    want = src.splitlines(True)
    have = linecache.getlines(filename)
    if have[first - 1:first - 1 + len(want)] == want:
        return
    prev = linecache.cache.get(filename)
    ours = prev is not None and len(prev) == 4 and prev[1] is None  # installed here before
    lines = list(prev[2]) if ours else []
    lines += ["\n"] * max(0, first - 1 + len(want) - len(lines))
    lines[first - 1:first - 1 + len(want)] = want
    linecache.cache[filename] = (sum(map(len, lines)), None, lines, filename)


__all__ = ["reduce", "load"]
