"""A stat cache that avoids re-hashing unchanged files, with git's racy-clean rule.

An entry remembers a file's :class:`StatKey` and its digest, verified at the snapshot's own
filesystem time (taken from a file touched in ``.freshness/``). A file whose current stat key
equals the entry's is trusted without reading it. A file whose mtime lies within
:data:`RACY_WINDOW_NS` before (or after) that verification time never becomes an entry: a
write in the same timestamp tick could have kept size and mtime, so it is always re-hashed.
"""

from __future__ import annotations

import os
import time
from typing import Any

from freshness_magic.freshness.hashing import RACY_WINDOW_NS, StatKey


def is_racy(mtime_ns: int, verified_ns: int) -> bool:
    """Whether a file with this mtime, verified at ``verified_ns``, must be re-hashed anyway."""
    return mtime_ns >= verified_ns - RACY_WINDOW_NS


class StatCache:
    """Key -> record of files whose hash may be trusted while their stat key is unchanged.

    The record is any object with ``stat`` and ``mtime_ns`` attributes (a baseline
    ``FileRecord``); returning
    the very same object for an unchanged file lets a comparison stop at an identity check.
    The racy rule is decided when a record is stored (its verification time never changes
    afterwards): a record that is racily clean at that time is not kept, so the file is hashed
    again at the next look, and nothing per file besides the record has to be remembered.
    """

    def __init__(self) -> None:
        self.records: dict[str, Any] = {}

    def __len__(self) -> int:
        return len(self.records)

    def lookup(self, path: str, key: StatKey) -> Any | None:
        """The cached record when ``key`` matches."""
        record = self.records.get(path)
        return record if record is not None and record.stat == key else None

    def store(self, path: str, record: Any, verified_ns: int) -> None:
        """Keep ``record``, verified at filesystem time ``verified_ns``, unless racily clean."""
        mtime_ns = record.mtime_ns
        if mtime_ns is None or is_racy(mtime_ns, verified_ns):
            self.records.pop(path, None)
        else:
            self.records[path] = record

    def forget(self, path: str) -> None:
        self.records.pop(path, None)


def filesystem_now_ns(state_dir: str | os.PathLike[str]) -> int:
    """The filesystem's own current time: the mtime of a file just written in ``state_dir``.

    Using the filesystem's clock (not the process clock) keeps the racy rule right on network
    mounts and in containers whose clocks differ; falls back to the process clock if the folder
    is not there or cannot be written. It is never created here: a command that only reads a
    run (``status``, ``why``, ``check``) must not make a moved project's old folder again.
    """
    folder = os.fspath(state_dir)
    try:
        fd, name = _new_file(folder)
        try:
            os.write(fd, b"\0")
            return os.fstat(fd).st_mtime_ns
        finally:
            os.close(fd)
            os.unlink(name)
    except OSError:
        return time.time_ns()


_NEW_FILE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)


def _new_file(folder: str) -> tuple[int, str]:
    """A new file of a name no other process uses in ``folder``, open for writing (what
    ``tempfile.mkstemp`` does, without importing it in every command that checks)."""
    for _ in range(100):
        name = os.path.join(folder, f".now.{os.getpid()}.{os.urandom(6).hex()}")
        try:
            return os.open(name, _NEW_FILE_FLAGS, 0o600), name
        except FileExistsError:
            continue
    raise FileExistsError(f"no free temporary name in {folder}")
