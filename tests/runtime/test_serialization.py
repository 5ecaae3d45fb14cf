"""llgrad.save / llgrad.load (runtime/serialization.py, Note [A checkpoint is data, never
code]): exact round trips of tensors, state dicts and optimizer state, and refusal of
anything that is not plain data, when saving and when loading."""
from __future__ import annotations

import io
import json
import pickle
import zipfile
from collections import OrderedDict

import numpy as np
import pytest

import llgrad as lg
from llgrad.runtime.serialization import CheckpointError


def _round_trip(obj):
    buf = io.BytesIO()
    lg.save(obj, buf)
    return lg.load(io.BytesIO(buf.getvalue()))


@pytest.mark.parametrize("dtype", [lg.float16, lg.float32, lg.float64, lg.int32, lg.int64,
                                   lg.bool])
def test_tensors_round_trip_exactly(dtype):
    rng = np.random.default_rng(0)
    data = (rng.standard_normal((3, 4)) * 1e3).astype(dtype.np)
    t = lg.tensor(data, dtype=dtype)
    u = _round_trip(t)
    assert u.dtype == dtype and u.shape == (3, 4) and not u.requires_grad
    assert np.array_equal(u.numpy(), data) and u.numpy().tobytes() == data.tobytes()


def test_requires_grad_parameters_and_shared_tensors():
    w = lg.nn.Parameter(lg.tensor([1.5, -2.0]))
    x = lg.tensor([[1.0, np.nan, -np.inf]], dtype=lg.float64, requires_grad=True)
    y = x * 2  # a non-leaf: saved as a leaf that requires grad (as torch.save)
    e = lg.zeros(0, 3)
    got = _round_trip({"w": w, "x": x, "y": y, "again": x, "empty": e, "scalar": lg.tensor(3)})
    assert isinstance(got["w"], lg.nn.Parameter) and got["w"].requires_grad
    assert got["x"].requires_grad and got["x"].is_leaf and got["y"].is_leaf
    assert got["y"].requires_grad and got["y"].grad_fn is None
    assert got["again"] is got["x"]
    np.testing.assert_array_equal(got["x"].detach().numpy(), [[1.0, np.nan, -np.inf]])
    assert got["empty"].shape == (0, 3) and got["scalar"].shape == () and got["scalar"].item() == 3
    assert got["x"].grad is None


def test_containers_and_numbers_round_trip():
    obj = {"sd": OrderedDict([("b", 1), ("a", 2)]), 3: [1, 2.5, True, None, "s"],
           (1, "k"): (float("inf"), -0.0, 10 ** 30), None: {"nested": [[], {}, ()]},
           "np": np.arange(4, dtype=np.int32), "npscalar": np.float32(0.1)}
    got = _round_trip(obj)
    assert type(got["sd"]) is OrderedDict and list(got["sd"]) == ["b", "a"]
    assert got[3] == [1, 2.5, True, None, "s"] and type(got[3][2]) is bool
    assert got[(1, "k")] == (float("inf"), -0.0, 10 ** 30) and type(got[(1, "k")]) is tuple
    assert np.copysign(1.0, got[(1, "k")][1]) == -1.0
    assert got[None] == {"nested": [[], {}, ()]}
    assert got["np"].dtype == np.int32 and got["np"].tolist() == [0, 1, 2, 3]
    assert type(got["npscalar"]) is np.float32 and got["npscalar"] == np.float32(0.1)


def test_model_and_optimizer_state_round_trip(tmp_path):
    lg.manual_seed(0)
    model = lg.nn.Sequential(lg.nn.Linear(3, 4), lg.nn.Tanh(), lg.nn.Linear(4, 1))
    opt = lg.optim.Adam(model.parameters(), lr=0.01)
    x = lg.randn(5, 3)
    for _ in range(2):
        opt.zero_grad()
        model(x).square().mean().backward()
        opt.step()
    path = tmp_path / "ckpt.lg"
    lg.save({"model": model.state_dict(), "optim": opt.state_dict(), "epoch": 2}, path)
    ckpt = lg.load(str(path), weights_only=True, map_location="cpu")
    lg.manual_seed(1)
    model2 = lg.nn.Sequential(lg.nn.Linear(3, 4), lg.nn.Tanh(), lg.nn.Linear(4, 1))
    model2.load_state_dict(ckpt["model"])
    opt2 = lg.optim.Adam(model2.parameters(), lr=0.5)
    opt2.load_state_dict(ckpt["optim"])
    assert ckpt["epoch"] == 2 and opt2.param_groups[0]["lr"] == 0.01
    for p, q in zip(model.parameters(), model2.parameters()):
        assert np.array_equal(p.detach().numpy(), q.detach().numpy())
    # one more identical step from both: the restored optimizer state is exact
    for m, o in ((model, opt), (model2, opt2)):
        o.zero_grad()
        m(x).square().mean().backward()
        o.step()
    for p, q in zip(model.parameters(), model2.parameters()):
        assert np.array_equal(p.detach().numpy(), q.detach().numpy())


def test_saving_arbitrary_objects_is_refused_naming_where():
    class Foo:
        pass
    with pytest.raises(CheckpointError, match=r"cannot write obj\['a'\]\[1\], a .*Foo"):
        lg.save({"a": [1, Foo()]}, io.BytesIO())
    with pytest.raises(CheckpointError, match="How to fix: save the object's state as plain"):
        lg.save(lg.nn.Linear(2, 2), io.BytesIO())
    with pytest.raises(CheckpointError, match="an array of dtype object"):
        lg.save(np.array([None, 1]), io.BytesIO())
    cyc: list = []
    cyc.append(cyc)
    with pytest.raises(CheckpointError, match="contains itself"):
        lg.save(cyc, io.BytesIO())


def test_foreign_files_are_refused_before_anything_is_read(tmp_path):
    ran = []

    class Evil:
        def __reduce__(self):
            return (ran.append, ("unpickled",))

    with pytest.raises(CheckpointError, match="is a pickle, not an llgrad checkpoint"):
        lg.load(io.BytesIO(pickle.dumps(Evil())))
    assert ran == []
    # what torch.save writes: a zip archive with a pickled data.pkl
    torch_like = io.BytesIO()
    with zipfile.ZipFile(torch_like, "w") as zf:
        zf.writestr("archive/data.pkl", pickle.dumps(Evil()))
        zf.writestr("archive/version", "3\n")
    with pytest.raises(CheckpointError, match="it is a PyTorch checkpoint"):
        lg.load(io.BytesIO(torch_like.getvalue()))
    assert ran == []
    npy = io.BytesIO()
    np.save(npy, np.arange(3))
    with pytest.raises(CheckpointError, match="a .npy array"):
        lg.load(io.BytesIO(npy.getvalue()))
    path = tmp_path / "junk.bin"
    path.write_bytes(b"PK\x03\x04 not really a zip")
    with pytest.raises(CheckpointError, match="damaged zip archive"):
        lg.load(path)
    with pytest.raises(CheckpointError, match="not an llgrad checkpoint"):
        lg.load(io.BytesIO(b"hello"))


def _archive(structure, arrays=()):
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("llgrad.json", json.dumps(structure))
        for name, data in arrays:
            zf.writestr(name, data)
    return io.BytesIO(buf.getvalue())


def test_damaged_or_doctored_archives_are_refused():
    ok = {"format": "llgrad.save", "version": 1}
    with pytest.raises(CheckpointError, match="checkpoint version 9"):
        lg.load(_archive(dict(ok, version=9)))
    with pytest.raises(CheckpointError, match="no format marker"):
        lg.load(_archive({"root": 1}))
    with pytest.raises(CheckpointError, match="a missing array 0"):
        lg.load(_archive(dict(ok, root={"tensor": 0, "requires_grad": False,
                                        "parameter": False})))
    with pytest.raises(CheckpointError, match="an unknown entry"):
        lg.load(_archive(dict(ok, root={"object": "os.system"})))
    pickled = io.BytesIO()
    np.save(pickled, np.array([{"a": 1}], dtype=object), allow_pickle=True)
    with pytest.raises(CheckpointError, match="cannot be read without pickle"):
        lg.load(_archive(dict(ok, root={"ndarray": 0}), [("arrays/0.npy", pickled.getvalue())]))


def test_load_arguments():
    buf = io.BytesIO()
    lg.save([1], buf)
    with pytest.raises(ValueError, match="map_location"):
        lg.load(io.BytesIO(buf.getvalue()), map_location="cuda:0")
    assert lg.load(io.BytesIO(buf.getvalue()), weights_only=False) == [1]
