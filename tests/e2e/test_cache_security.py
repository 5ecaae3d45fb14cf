"""The disk cache's directory is trusted only when it is the user's own and private (issue 10,
items 11 and 9; llgrad/cache.py, Note [Cache threat model]): refused otherwise, nothing in
an entry runs code, links inside are never followed, `clear` and `info` touch only llgrad's
own entries. The tests run as root too (CI does): root ignores permission bits, so refusals
are checked by the modes and owners the checks read, never by EACCES."""
import glob
import hashlib
import os
import pickle

import numpy as np
import pytest

import llgrad
from llgrad import cache
from llgrad.__main__ import main
from llgrad.codegen import abi
from tests.e2e.test_disk_cache import SCRIPT, TRAMPOLINE_SCRIPT, entries, run_script

NOBODY = 65534


def f(x):
    return np.sum(np.cos(x) * x)


def _check(d) -> None:
    x = np.linspace(0.0, 1.0, 5)
    v, g = d.value_and_grad(x)
    np.testing.assert_allclose(v, np.sum(np.cos(x) * x))
    np.testing.assert_allclose(g, np.cos(x) - x * np.sin(x))


def _files(root) -> list[str]:
    return sorted(os.path.relpath(os.path.join(r, n), root)
                  for r, ds, fs in os.walk(root) for n in fs + ds)


@pytest.mark.parametrize("mode", [0o770, 0o707, 0o1777], ids=oct)
def test_directory_writable_by_others_is_refused(cache_dir, mode, capsys):
    os.mkdir(cache_dir)
    os.chmod(cache_dir, mode)
    planted = cache_dir / "ab" / ("ab" + "0" * 62 + ".llgc")
    planted.parent.mkdir()
    planted.write_bytes(b"someone else's")
    d = llgrad.differentiate(f, cache=True)
    with pytest.warns(UserWarning, match=f"without the compile cache: {cache_dir} is writable "
                                         f"by group or others \\(mode {mode:o}\\)"):
        _check(d)
    assert "disk cache" not in d.inspect(np.ones(5)).stats
    assert _files(cache_dir) == ["ab", os.path.join("ab", planted.name)]  # nothing written
    assert cache.info() == {"directory": str(cache_dir), "entries": 0, "bytes": 0,
                            "refused": f"{cache_dir} is writable by group or others (mode "
                                       f"{mode:o}); run `chmod go-w {cache_dir}` or use a "
                                       "private directory"}
    assert main(["cache", "clear"]) == 1
    assert f"not clearing: {cache_dir} is writable" in capsys.readouterr().err
    assert planted.read_bytes() == b"someone else's"  # nothing removed


@pytest.mark.skipif(os.geteuid() != 0, reason="making a directory someone else's needs root")
def test_directory_or_subdirectory_of_another_user_is_refused(cache_dir):
    os.mkdir(cache_dir, 0o700)
    os.chown(cache_dir, NOBODY, -1)
    with pytest.warns(UserWarning, match=f"{cache_dir} belongs to .*uid {NOBODY}.*not to you"):
        _check(llgrad.differentiate(f, cache=True))
    assert _files(cache_dir) == []
    os.chown(cache_dir, 0, -1)
    _check(llgrad.differentiate(f, cache=True))
    (entry,) = glob.glob(str(cache_dir / "??" / "*.llgc"))
    os.chown(os.path.dirname(entry), NOBODY, -1)
    d = llgrad.differentiate(f, cache=True)
    with pytest.warns(UserWarning, match=f"{os.path.dirname(entry)} belongs to"):
        _check(d)
    assert "disk cache" not in d.inspect(np.ones(5)).stats


def _run(tmp_path, cache_dir, script=SCRIPT):
    return run_script(tmp_path, cache_dir, script.replace("CACHE", "True"))


class _Marker:
    """Unpickling this creates `path`: what a planted pickle could do."""

    def __init__(self, path):
        self.path = str(path)

    def __reduce__(self):
        return open, (self.path, "w")


def _old_format_entry(marker, k: str) -> bytes:
    """An entry as format 2 wrote it (magic, sha256, pickle of (key, payload)): it passes
    that format's checks, and loading it unpickles the marker."""
    body = pickle.dumps((k, _Marker(marker)))
    return b"llgrad-cache-2\n" + hashlib.sha256(body).digest() + body


def test_a_planted_pickle_is_never_unpickled(tmp_path, cache_dir):
    pickle.loads(_old_format_entry(tmp_path / "proof", "k")[15 + 32:])
    assert (tmp_path / "proof").exists()  # the payload is live
    first, _ = _run(tmp_path, cache_dir)
    paths = entries(cache_dir, None)
    assert len(paths) == 2  # the function's code (with the support functions) and its
    marker = tmp_path / "marker"  # conversion: both replaced
    for path in paths:
        with open(path, "wb") as fh:
            fh.write(_old_format_entry(marker, os.path.basename(path)[:-5]))
    assert _run(tmp_path, cache_dir)[0] == [first[0], "miss"]
    assert not marker.exists()
    assert _run(tmp_path, cache_dir)[0] == [first[0], "hit"]  # rewritten in the new format


def test_links_and_fifos_inside_the_cache_are_not_followed(tmp_path, cache_dir):
    first, _ = _run(tmp_path, cache_dir, TRAMPOLINE_SCRIPT)
    (kernel,) = entries(cache_dir)
    outside = tmp_path / "outside"
    outside.mkdir()
    copy = outside / os.path.basename(kernel)
    original = open(kernel, "rb").read()
    copy.write_bytes(original)
    os.unlink(kernel)
    os.symlink(copy, kernel)  # a valid entry, but through a link
    assert _run(tmp_path, cache_dir, TRAMPOLINE_SCRIPT)[0] == [first[0], "llvm", "lowering"]
    # (compiled again, and replaced by a regular entry: the link, not its target)
    assert os.path.isfile(kernel) and not os.path.islink(kernel)
    assert _files(outside) == [copy.name] and copy.read_bytes() == original
    assert _run(tmp_path, cache_dir, TRAMPOLINE_SCRIPT)[0] == [first[0], "no-llvm",
                                                             "no-lowering"]
    os.unlink(kernel)
    os.mkfifo(kernel)  # opening it for reading would wait for a writer
    assert _run(tmp_path, cache_dir, TRAMPOLINE_SCRIPT)[0] == [first[0], "llvm", "lowering"]
    assert os.path.isfile(kernel)
    # a linked subdirectory is neither read nor written
    sub = os.path.dirname(kernel)
    os.rename(sub, outside / "sub")
    os.symlink(outside / "sub", sub)
    before = _files(outside)
    out, err = _run(tmp_path, cache_dir, TRAMPOLINE_SCRIPT)
    assert (out[0], out[2]) == (first[0], "lowering") and "not a plain directory" in err
    assert _files(outside) == before


def test_clear_and_info_touch_only_llgrads_own_entries(tmp_path, cache_dir, capsys):
    _check(llgrad.differentiate(f, cache=True))
    (entry,) = glob.glob(str(cache_dir / "??" / "*.llgc"))
    size = os.path.getsize(entry)
    sub = os.path.dirname(entry)
    outside = tmp_path / "outside"
    outside.mkdir()
    victim = outside / ("ab" + "1" * 62 + ".llgc")
    victim.write_bytes(b"not the cache's")
    name = os.path.basename(sub) + "2" * 62 + ".llgc"
    os.symlink(victim, os.path.join(sub, name))                       # entry-named link
    os.symlink(tmp_path / "nowhere", os.path.join(sub, name.replace("2", "3")))  # dangling
    free = [h for h in ("ab", "cd", "ef") if h != os.path.basename(sub)]
    os.symlink(outside, cache_dir / free[0])                          # subdirectory-named link
    os.symlink(tmp_path / "nowhere", cache_dir / free[1])             # dangling subdirectory
    (cache_dir / "notes.txt").write_text("mine")
    (cache_dir / "zz").mkdir()
    (cache_dir / "zz" / os.path.basename(entry)).write_text("not under an llgrad name")
    with open(os.path.join(sub, "keep.txt"), "w") as fh:
        fh.write("mine too")
    kept = sorted(set(_files(cache_dir)) - {os.path.relpath(entry, cache_dir)})
    assert cache.info() == {"directory": str(cache_dir), "entries": 1, "bytes": size}
    assert main(["cache", "info"]) == 0 and "entries    1" in capsys.readouterr().out
    assert main(["cache", "clear"]) == 0
    assert capsys.readouterr().out == "removed 1 cache entries\n"
    assert _files(cache_dir) == kept  # everything but the entry
    assert victim.read_bytes() == b"not the cache's"
    assert cache.info()["entries"] == 0
