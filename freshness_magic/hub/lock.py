"""Whether a hub serves a working directory: its lock file, probed without taking it.

A module of its own so that readers (the freshness check's hash source, the notebook) learn it
without importing the hub process's code (the daemon, the indexer and its parsers).
"""

from __future__ import annotations

import os
from pathlib import Path

STATE_DIR = ".freshness"
LOCK_NAME = "hub.lock"


def state_dir(workdir: str | Path) -> Path:
    """``<workdir>/.freshness``: where the store, pid file, lock and log live."""
    return Path(workdir).resolve() / STATE_DIR


def lock_held(workdir: str | Path) -> bool:
    """Whether some process holds the hub lock of ``workdir`` (probe with a shared lock)."""
    try:
        import fcntl
    except ImportError:  # no POSIX file locks here, so no hub can hold one
        return False
    path = state_dir(workdir) / LOCK_NAME
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False
