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
from dataclasses import dataclass

from freshness_magic.freshness.hashing import StatKey

RACY_WINDOW_NS = 2_000_000_000
"""2 seconds: covers the coarsest common timestamp granularity (FAT, some network mounts)."""


@dataclass(frozen=True, slots=True)
class CacheEntry:
    stat: StatKey
    digest: str
    verified_ns: int


class StatCache:
    """Path -> (stat key, digest, verification time); owned by one tracker, not shared."""

    def __init__(self) -> None:
        self._entries: dict[str, CacheEntry] = {}

    def __len__(self) -> int:
        return len(self._entries)

    def lookup(self, path: str, key: StatKey) -> str | None:
        """The cached digest when ``key`` matches and the entry is not racily clean."""
        entry = self._entries.get(path)
        if entry is None or entry.stat != key:
            return None
        if key.mtime_ns >= entry.verified_ns - RACY_WINDOW_NS:
            return None
        return entry.digest

    def has(self, path: str) -> bool:
        return path in self._entries

    def store(self, path: str, key: StatKey, digest: str, verified_ns: int) -> None:
        self._entries[path] = CacheEntry(key, digest, verified_ns)

    def forget(self, path: str) -> None:
        self._entries.pop(path, None)


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
