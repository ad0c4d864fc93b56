"""A stat cache that avoids re-hashing unchanged files, with git's racy-clean rule.

An entry remembers a file's :class:`StatKey`, its digest, and the filesystem time at which it was
verified (the snapshot's own timestamp, taken from a file touched in ``.freshness/``). A file
whose current stat key equals the entry's is trusted without reading it, unless its mtime lies
within :data:`RACY_WINDOW_NS` before (or after) that verification time: a write in the same
timestamp tick could then have kept size and mtime, so such entries are always re-hashed.
"""

from __future__ import annotations

import os
import tempfile
import time
from typing import Any

from freshness_magic.freshness.hashing import RACY_WINDOW_NS, StatKey


def is_racy(mtime_ns: int, verified_ns: int) -> bool:
    """Whether a file with this mtime, verified at ``verified_ns``, must be re-hashed anyway."""
    return mtime_ns >= verified_ns - RACY_WINDOW_NS


class StatCache:
    """Key -> record and key -> verification time; owned by one snapshotter.

    The record is any object with a ``stat`` attribute (a baseline ``FileRecord``); returning
    the very same object for an unchanged file lets a comparison stop at an identity check.
    Two dicts rather than one of pairs: a snapshot of 20,000 files then makes no pair objects
    for the cycle collector to scan afterwards.
    """

    def __init__(self) -> None:
        self.records: dict[str, Any] = {}
        self.verified: dict[str, int] = {}

    def __len__(self) -> int:
        return len(self.records)

    def trusted(self, path: str) -> Any | None:
        """The cached record unless it is racily clean (then it must be hashed again)."""
        record = self.records.get(path)
        if record is None or record.stat is None:
            return None
        if is_racy(record.stat.mtime_ns, self.verified[path]):
            return None
        return record

    def lookup(self, path: str, key: StatKey) -> Any | None:
        """The cached record when ``key`` matches and the entry is not racily clean."""
        record = self.trusted(path)
        return record if record is not None and record.stat == key else None

    def store(self, path: str, record: Any, verified_ns: int) -> None:
        self.records[path] = record
        self.verified[path] = verified_ns

    def forget(self, path: str) -> None:
        self.records.pop(path, None)
        self.verified.pop(path, None)


def filesystem_now_ns(state_dir: str | os.PathLike[str]) -> int:
    """The filesystem's own current time: the mtime of a file just written in ``state_dir``.

    Using the filesystem's clock (not the process clock) keeps the racy rule right on network
    mounts and in containers whose clocks differ; falls back to the process clock if the folder
    cannot be written.
    """
    folder = os.fspath(state_dir)
    try:
        os.makedirs(folder, exist_ok=True)
        fd, name = tempfile.mkstemp(prefix=".now.", dir=folder)
        try:
            os.write(fd, b"\0")
            return os.fstat(fd).st_mtime_ns
        finally:
            os.close(fd)
            os.unlink(name)
    except OSError:
        return time.time_ns()
