"""llgrad.save / llgrad.load: tensors and the plain data around them (state dicts, optimizer
state) in a file that holds only data.

Note [A checkpoint is data, never code]
torch.save pickles, and unpickling can run arbitrary code, which is why torch.load grew
`weights_only`. An llgrad checkpoint is a zip archive of two kinds of members:
`llgrad.json`, the structure (containers, numbers, strings) as JSON, and `arrays/<n>.npy`, one
numpy array per tensor, written and read with allow_pickle=False. So `weights_only` holds by
construction: what can be saved is what can be described that way -- tensors (dtype, shape,
values, requires_grad; a Parameter stays a Parameter), numpy arrays and scalars, dicts
(OrderedDicts stay ordered dicts; keys of any of these plain types), lists, tuples, str, int,
float (inf and nan too), bool and None -- and anything else is refused when saving, naming
where it sits in the object. Loading accepts only this format: a pickle, a PyTorch checkpoint
or a damaged file is refused with an error saying which, before anything in it is used. The
same tensor object saved twice loads as one object; tensors that only share memory (views)
load as separate copies, and `.grad` is not saved (as torch.save).
"""
from __future__ import annotations

import io
import os
from collections import OrderedDict

import numpy as np

from llgrad.runtime.aval import _BY_NP
from llgrad.runtime.errors import LLGradError, user_loc
from llgrad.runtime.tensor import Tensor

FORMAT, VERSION = "llgrad.save", 1
_STRUCTURE = "llgrad.json"


class CheckpointError(LLGradError, ValueError):
    """A file llgrad.load cannot read, or an object llgrad.save cannot write."""

    def __init__(self, what: str, fix: str | None = None):
        super().__init__(what, user_loc(), fix)


def save(obj, f) -> None:
    """Write `obj` (tensors, state dicts, optimizer state: see Note [A checkpoint is data,
    never code]) to `f`, a path or a binary file object.

    Example:
        >>> import io, llgrad as lg
        >>> buf = io.BytesIO()
        >>> lg.save({"w": lg.ones(2, requires_grad=True), "step": 3}, buf)
        >>> lg.load(io.BytesIO(buf.getvalue()))["w"]
        tensor([1., 1.], requires_grad=True)
    """
    import json  # noqa: PLC0415  (on first use: `import llgrad` stays light)
    import zipfile  # noqa: PLC0415
    arrays: list = []
    root = _Encoder(arrays).encode(obj, "obj")
    head = json.dumps({"format": FORMAT, "version": VERSION, "root": root})
    with zipfile.ZipFile(_writable(f), "w", zipfile.ZIP_STORED) as zf:
        zf.writestr(_STRUCTURE, head)
        for i, arr in enumerate(arrays):
            buf = io.BytesIO()
            np.save(buf, arr, allow_pickle=False)
            zf.writestr(f"arrays/{i}.npy", buf.getvalue())


def load(f, map_location=None, weights_only=None, **kwargs):
    """Read what `save` wrote. `map_location` may be None or 'cpu'; `weights_only` is
    accepted for PyTorch compatibility and always holds (no file can make llgrad.load run
    code). Pickles and PyTorch checkpoints are refused."""
    if map_location not in (None, "cpu") and str(map_location) != "cpu":
        raise ValueError(f"llgrad tensors live on the cpu; map_location={map_location!r} "
                         f"is not supported")
    if kwargs:
        raise TypeError(f"load() got unexpected arguments {sorted(kwargs)}")
    if isinstance(f, (str, os.PathLike)):
        with open(f, "rb") as fh:
            return _load(fh, os.fspath(f))
    if not (hasattr(f, "read") and hasattr(f, "seek")):
        raise TypeError(f"load() expects a path or a binary file object, got "
                        f"{type(f).__name__}")
    return _load(f, getattr(f, "name", "<file>"))


def _load(src, name):
    import json  # noqa: PLC0415  (loaded on first use, as in save)
    import zipfile  # noqa: PLC0415
    head = src.read(4)
    src.seek(0)
    if head[:2] != b"PK":
        raise _foreign(name, head)
    try:
        zf = zipfile.ZipFile(src)
    except zipfile.BadZipFile:
        raise CheckpointError(f"{name} is not an llgrad checkpoint (a damaged zip archive)") \
            from None
    with zf:
        names = set(zf.namelist())
        if _STRUCTURE not in names:
            torch = any(n.endswith("data.pkl") for n in names)
            raise CheckpointError(
                f"{name} is not an llgrad checkpoint" + (
                    ": it is a PyTorch checkpoint (torch.save), a pickle, which llgrad never "
                    "unpickles (unpickling can run arbitrary code)" if torch else
                    " (a zip archive without llgrad.json)"),
                fix="convert a PyTorch state dict once where torch is installed: "
                "llgrad.save({k: llgrad.tensor(v.numpy()) for k, v in torch.load(path, "
                "weights_only=True).items()}, new_path)" if torch else None)
        try:
            meta = json.loads(zf.read(_STRUCTURE))
        except ValueError:
            raise CheckpointError(f"{name}: llgrad.json is not valid JSON (damaged file)") \
                from None
        if not isinstance(meta, dict) or meta.get("format") != FORMAT:
            raise CheckpointError(f"{name} is not an llgrad checkpoint (no format marker)")
        if meta.get("version") != VERSION:
            raise CheckpointError(f"{name} has checkpoint version {meta.get('version')!r}; "
                                  f"this llgrad reads version {VERSION}")
        return _Decoder(zf, names, name).decode(meta.get("root"))


def _writable(f):
    return os.fspath(f) if isinstance(f, (str, os.PathLike)) else f


def _foreign(name, head: bytes) -> CheckpointError:
    if head[:1] == b"\x80":
        return CheckpointError(f"{name} is a pickle, not an llgrad checkpoint: llgrad.load "
                               f"never unpickles (unpickling can run arbitrary code)",
                               fix="save the data with llgrad.save")
    if head[:4] == b"\x93NUM":
        return CheckpointError(f"{name} is a .npy array, not an llgrad checkpoint",
                               fix="read it with numpy.load")
    return CheckpointError(f"{name} is not an llgrad checkpoint (written by llgrad.save)")


class _Encoder:
    """obj -> JSON structure; arrays are appended to `arrays` and named by their index."""

    def __init__(self, arrays: list):
        self.arrays, self.seen, self.active = arrays, {}, set()

    def encode(self, x, where: str):
        if x is None or type(x) in (bool, int, float, str):
            return x
        if isinstance(x, Tensor):
            from llgrad.runtime.nn.parameter import Parameter
            return self._array(x, where, {"tensor": None, "requires_grad": x.requires_grad,
                                          "parameter": isinstance(x, Parameter)})
        if isinstance(x, np.ndarray):
            return self._array(x, where, {"ndarray": None})
        if isinstance(x, np.generic):
            return self._array(x, where, {"npscalar": None})
        if type(x) in (list, tuple, dict, OrderedDict):
            if id(x) in self.active:
                raise CheckpointError(f"{where} contains itself: a cycle cannot be saved")
            self.active.add(id(x))
            try:
                if isinstance(x, dict):
                    items = [[self.encode(k, f"a key of {where}"), self.encode(v, f"{where}[{k!r}]")]
                             for k, v in x.items()]
                    return {"odict" if type(x) is OrderedDict else "dict": items}
                return {type(x).__name__: [self.encode(v, f"{where}[{i}]")
                                           for i, v in enumerate(x)]}
            finally:
                self.active.discard(id(x))
        raise CheckpointError(
            f"llgrad.save cannot write {where}, a {type(x).__module__}.{type(x).__qualname__}: "
            f"a checkpoint holds tensors, numpy arrays and plain data (dict, list, tuple, str, "
            f"int, float, bool, None), never arbitrary objects",
            fix="save the object's state as plain data (a dict of tensors and numbers, like "
            "module.state_dict()) and rebuild the object from it after loading")

    def _array(self, x, where, entry):
        key = id(x)
        if key in self.seen:  # the same object again: one object when loaded
            return {"same": self.seen[key]}
        arr = x._data if isinstance(x, Tensor) else np.asarray(x)
        if arr.dtype.hasobject or arr.dtype.kind not in "biufc":
            raise CheckpointError(f"llgrad.save cannot write {where}: an array of dtype "
                                  f"{arr.dtype} (only numbers and booleans)")
        n = len(self.arrays)
        self.arrays.append(arr)
        self.seen[key] = n
        tag = next(iter(entry))
        entry[tag] = n
        return entry


class _Decoder:
    """JSON structure -> objects, reading arrays from the archive (each checked)."""

    def __init__(self, zf, names, fname):
        self.zf, self.names, self.fname, self.objs = zf, names, fname, {}

    def fail(self, what):
        raise CheckpointError(f"{self.fname}: {what} (damaged or not written by llgrad.save)")

    def decode(self, x):
        if x is None or type(x) in (bool, int, float, str):
            return x
        if not isinstance(x, dict) or len(x) not in (1, 3):
            self.fail(f"unexpected entry {str(x)[:60]}")
        if "same" in x:
            n = x["same"]
            if n not in self.objs:
                self.fail("a reference to an array not read yet")
            return self.objs[n]
        for tag in ("list", "tuple"):
            if tag in x:
                items = x[tag]
                if not isinstance(items, list):
                    self.fail(f"a malformed {tag}")
                seq = [self.decode(v) for v in items]
                return seq if tag == "list" else tuple(seq)
        for tag, kind in (("dict", dict), ("odict", OrderedDict)):
            if tag in x:
                items = x[tag]
                if not isinstance(items, list) or not all(
                        isinstance(kv, list) and len(kv) == 2 for kv in items):
                    self.fail(f"a malformed {tag}")
                out = kind()
                for k, v in items:
                    key = self.decode(k)
                    try:
                        out[key] = self.decode(v)
                    except TypeError:
                        self.fail("an unhashable dict key")
                return out
        if "tensor" in x:
            arr = self._array(x["tensor"])
            if arr.dtype not in _BY_NP:
                self.fail(f"a tensor of dtype {arr.dtype}")
            t = Tensor._wrap(arr)
            if x.get("parameter") is True:
                from llgrad.runtime.nn.parameter import Parameter
                t = Parameter(t, requires_grad=bool(x.get("requires_grad")))
            elif x.get("requires_grad") is True:
                t.requires_grad_(True)
            self.objs[x["tensor"]] = t
            return t
        if "ndarray" in x:
            arr = self.objs[x["ndarray"]] = self._array(x["ndarray"])
            return arr
        if "npscalar" in x:
            arr = self._array(x["npscalar"])
            if arr.ndim:
                self.fail("a numpy scalar that is not 0-d")
            v = self.objs[x["npscalar"]] = arr[()]
            return v
        self.fail(f"an unknown entry {sorted(x)}")

    def _array(self, n):
        name = f"arrays/{n}.npy"
        if type(n) is not int or name not in self.names:
            self.fail(f"a missing array {n!r}")
        try:
            with self.zf.open(name) as fh:
                arr = np.load(io.BytesIO(fh.read()), allow_pickle=False)
        except ValueError as e:
            self.fail(f"array {n} cannot be read without pickle ({e})")
        if arr.dtype.kind not in "biufc":
            self.fail(f"array {n} of dtype {arr.dtype}")
        return arr
