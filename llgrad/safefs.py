"""Reading and writing files under a directory that other users must not be able to subvert:
the disk cache (llgrad/cache.py) and LLGRAD_DUMP (llgrad/dump.py).

A directory is used only when it belongs to this user (and, for `private` ones, is not
writable by group or others). Everything below it is opened relative to the directory's
descriptor with O_NOFOLLOW, so a symbolic link planted inside, to a file or to a directory,
is never followed; files are created under a fresh name with O_EXCL and renamed into place
(a reader never sees half a file, and a link at the final name is replaced, not written
through). The top directory itself may be reached through links: what is checked is the
directory actually opened.
"""
from __future__ import annotations

import os
import stat

_DIR_FLAGS = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_CLOEXEC", 0)
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
# O_NONBLOCK: opening a FIFO planted under an entry's name returns instead of waiting.
_READ_FLAGS = os.O_RDONLY | _NOFOLLOW | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NONBLOCK", 0)
_CREATE_FLAGS = (os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | getattr(os, "O_CLOEXEC", 0))
SUPPORTED = bool(_NOFOLLOW) and {os.open, os.mkdir, os.rename, os.unlink} <= os.supports_dir_fd
TMP_PREFIX = ".tmp-"


class UnsafeDirectory(OSError):
    """A directory llgrad will not use: its message says which, why and how to fix it."""


def _owner(uid: int) -> str:
    try:
        import pwd
        return f"user {pwd.getpwuid(uid).pw_name!r} (uid {uid})"
    except (ImportError, KeyError):
        return f"uid {uid}"


def check_dir(st: os.stat_result, path: str, private: bool) -> None:
    """Raise UnsafeDirectory unless `st` is a directory of this user (not writable by group
    or others, when `private`)."""
    if not stat.S_ISDIR(st.st_mode):
        raise UnsafeDirectory(f"{path} is not a directory")
    if st.st_uid != os.geteuid():
        raise UnsafeDirectory(f"{path} belongs to {_owner(st.st_uid)}, not to you "
                              f"({_owner(os.geteuid())}); use a directory of your own")
    if private and st.st_mode & 0o022:
        raise UnsafeDirectory(f"{path} is writable by group or others (mode "
                              f"{stat.S_IMODE(st.st_mode):o}); run `chmod go-w {path}` or use "
                              "a private directory")


def open_root(path: str, *, private: bool, mode: int = 0o700) -> int:
    """A descriptor of directory `path`, created (with `mode`; missing parents as by
    os.makedirs) when absent, after `check_dir`. Raises UnsafeDirectory or OSError."""
    if not SUPPORTED:
        raise UnsafeDirectory(f"{path}: this platform cannot open files without following "
                              "symbolic links (no O_NOFOLLOW / dir_fd support)")
    try:
        fd = os.open(path, _DIR_FLAGS)
    except FileNotFoundError:
        parent = os.path.dirname(os.path.abspath(path))
        os.makedirs(parent, exist_ok=True)
        try:
            os.mkdir(path, mode)
        except FileExistsError:  # made meanwhile by another process: checked below
            pass
        fd = os.open(path, _DIR_FLAGS)
    try:
        check_dir(os.fstat(fd), path, private)
    except BaseException:
        os.close(fd)
        raise
    return fd


def open_subdir(dir_fd: int, name: str, path: str, *, private: bool, create: bool = True,
                mode: int = 0o700) -> int | None:
    """A descriptor of directory `name` inside `dir_fd` (shown as `path` in messages), not
    through a link, after `check_dir`; None when absent and not `create`."""
    flags = _DIR_FLAGS | _NOFOLLOW
    try:
        fd = os.open(name, flags, dir_fd=dir_fd)
    except FileNotFoundError:
        if not create:
            return None
        try:
            os.mkdir(name, mode, dir_fd=dir_fd)
        except FileExistsError:
            pass
        fd = os.open(name, flags, dir_fd=dir_fd)
    except OSError as e:  # ELOOP (a link) or ENOTDIR (a file) in its place
        raise UnsafeDirectory(f"{path} is not a plain directory ({e.strerror}); remove it")
    try:
        check_dir(os.fstat(fd), path, private)
    except BaseException:
        os.close(fd)
        raise
    return fd


def read_file(dir_fd: int, name: str, limit: int) -> bytes | None:
    """The bytes of regular file `name` in `dir_fd`, owned by this user, not writable by
    group or others and at most `limit` bytes long; None when absent or anything else (a
    link, a FIFO, a directory, someone else's or an oversized file)."""
    try:
        fd = os.open(name, _READ_FLAGS, dir_fd=dir_fd)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if (not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid()
                or st.st_mode & 0o022 or st.st_size > limit):
            return None
        with os.fdopen(fd, "rb", closefd=False) as f:
            return f.read(st.st_size)
    finally:
        os.close(fd)


def write_file(dir_fd: int, name: str, data: bytes, mode: int = 0o600) -> None:
    """Replace `name` in `dir_fd` with `data`, atomically: written to a new file (O_EXCL,
    O_NOFOLLOW) under a random temporary name, then renamed over `name`."""
    tmp = TMP_PREFIX + os.urandom(8).hex()
    fd = os.open(tmp, _CREATE_FLAGS, mode, dir_fd=dir_fd)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except BaseException:
        try:
            os.unlink(tmp, dir_fd=dir_fd)
        except OSError:
            pass
        raise
