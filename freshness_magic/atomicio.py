"""Crash-safe file writes shared by checkpoints, evidence, status files and the hub.

A reader never sees a half-written file: whole files are written to a temporary file in the same
folder, flushed, fsynced and renamed over the target, and the folder is fsynced after the rename.
Append-only logs are written one record per ``write`` call on an ``O_APPEND`` descriptor, so a
killed process leaves either the whole line or nothing; readers still tolerate a torn last line
(power loss) by reporting and skipping it.

Inside :func:`journaled_writes` (the run's step in its default durable mode) these writes stay
atomic but skip their fsyncs: the run journal's one fsync per step is the durability point, and
a killed process loses nothing the kernel already has.
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import os
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

_SKIP_FSYNC: contextvars.ContextVar[bool] = contextvars.ContextVar("skip_fsync", default=False)


@contextlib.contextmanager
def journaled_writes() -> Iterator[None]:
    """Writes in this block (this thread) skip their fsyncs; a journal record made durable."""
    token = _SKIP_FSYNC.set(True)
    try:
        yield
    finally:
        _SKIP_FSYNC.reset(token)


def fsync_dir(folder: Path) -> None:
    """Make a rename or a new file in ``folder`` durable."""
    if _SKIP_FSYNC.get():
        return
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def write_atomic(path: str | os.PathLike[str], data: bytes | str, *, fsync: bool = True) -> None:
    """Replace ``path`` with ``data``: readers see the old or the new content, never a mix.

    ``fsync=False`` (a cache such as a snapshot of a journal) skips the fsyncs.
    """
    fsync = fsync and not _SKIP_FSYNC.get()
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    payload = data.encode("utf-8") if isinstance(data, str) else data
    fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        try:
            mode = stat.S_IMODE(os.stat(target).st_mode)
        except FileNotFoundError:
            mode = 0o644
        os.fchmod(fd, mode)
        with os.fdopen(fd, "wb") as handle:
            handle.write(payload)
            handle.flush()
            if fsync:
                os.fsync(handle.fileno())
        os.replace(tmp_name, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp_name)
        raise
    if fsync:
        fsync_dir(target.parent)


def dumps(obj: Any) -> str:
    """The project's one JSON style for files on disk (sorted keys, UTF-8, no NaN)."""
    return json.dumps(
        obj, indent=2, sort_keys=True, ensure_ascii=False, allow_nan=False, default=str
    )


def ensure_ignored_dir(folder: str | os.PathLike[str]) -> Path:
    """Create ``folder`` with a ``.gitignore`` of ``*`` (as ``.pytest_cache/`` does).

    The project's own state folders (``.freshness/``, ``.orchestrator/``) must never show up as
    the user's changes in ``git status``.
    """
    root = Path(folder)
    root.mkdir(parents=True, exist_ok=True)
    ignore = root / ".gitignore"
    if not ignore.exists():
        write_atomic(ignore, "# Created by freshness_magic: tool state, not user changes.\n*\n")
    return root


def write_json_atomic(path: str | os.PathLike[str], obj: Any) -> None:
    """Atomically write ``obj`` as pretty JSON followed by a newline."""
    write_atomic(path, dumps(obj) + "\n")


def append_jsonl(path: str | os.PathLike[str], obj: Any, *, fsync: bool = True) -> None:
    """Append one JSON record as one line, first cutting a torn last line left by a crash."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    line = (
        json.dumps(obj, sort_keys=True, ensure_ascii=False, allow_nan=False, default=str) + "\n"
    ).encode("utf-8")
    fd = os.open(target, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        size = os.fstat(fd).st_size
        if size and os.pread(fd, 1, size - 1) != b"\n":
            _truncate_after_last_newline(fd, size)
        os.write(fd, line)
        if fsync and not _SKIP_FSYNC.get():
            os.fsync(fd)
    finally:
        os.close(fd)


def _truncate_after_last_newline(fd: int, size: int) -> None:
    """Cut a last line that has no newline: a ``write`` torn by a kill at a page boundary.

    Appending after such a fragment would glue the next record to it, so every append of a
    single-writer log first restores the invariant that each line is a whole record.
    """
    end = size
    keep = 0
    while end > 0:
        start = max(0, end - 65536)
        chunk = os.pread(fd, end - start, start)
        index = chunk.rfind(b"\n")
        if index >= 0:
            keep = start + index + 1
            break
        end = start
    os.ftruncate(fd, keep)


def read_jsonl(path: str | os.PathLike[str]) -> Iterator[dict[str, Any]]:
    """Yield the records of a JSONL log, skipping a torn or corrupt line instead of failing."""
    target = Path(path)
    if not target.exists():
        return
    with target.open("rb") as handle:
        for raw in handle:
            if not raw.endswith(b"\n"):
                break
            try:
                record = json.loads(raw)
            except ValueError:
                continue
            if isinstance(record, dict):
                yield record
