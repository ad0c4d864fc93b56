"""Crash-safe file writes shared by checkpoints, evidence, status files and the hub.

A reader never sees a half-written file: whole files are written to a temporary file in the same
folder, flushed, fsynced and renamed over the target, and the folder is fsynced after the rename.
Append-only logs are written one record per ``write`` call on an ``O_APPEND`` descriptor, so a
killed process leaves either the whole line or nothing; readers still tolerate a torn last line
(power loss) by reporting and skipping it.

Every writer goes through :mod:`freshness_magic.pathsafety` (no writing through a symbolic link
inside a state folder; within a run's step, folders checked once are confirmed with one
``lstat``). Every reader decodes with :func:`loads_bounded`, which refuses JSON nested
deeper than :data:`MAX_JSON_DEPTH` before the decoder can hit Python's recursion limit.
:func:`remove_stale_temp_files` removes the temporary files a crash left behind.

Inside :func:`journaled_writes` (the run's step in its default durable mode) these writes stay
atomic but skip their fsyncs: the run journal's one fsync per step is the durability point, and
a killed process loses nothing the kernel already has.
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import os
import re
import stat
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from freshness_magic import faults, pathsafety
from freshness_magic.errors import StateFileError


def _warn(message: str, *args: object) -> None:
    """Log a warning. ``logging`` (and ``tempfile`` for the writers) is imported where used:
    a read-only command such as ``freshness-magic check`` needs neither (about 10 ms)."""
    import logging

    logging.getLogger(__name__).warning(message, *args)


MAX_JSON_DEPTH = 100
"""Deepest nesting of arrays/objects any state file may have (ours never exceed ~10)."""

TEMP_SUFFIX = ".tmp"
_TEMP_RE = re.compile(r"\A\..+\.[A-Za-z0-9_]{8}\.tmp\Z")
"""The names :func:`write_atomic` gives its temporary files (``.<name>.<8 random>.tmp``)."""
_PAIR_RE = re.compile(rb"\[\]|\{\}")
_NOT_BRACKETS_OR_QUOTES = bytes(b for b in range(256) if b not in b'[]{}"')

_SKIP_FSYNC: contextvars.ContextVar[bool] = contextvars.ContextVar("skip_fsync", default=False)


@contextlib.contextmanager
def journaled_writes() -> Iterator[None]:
    """Writes in this block (this thread) skip their fsyncs; a journal record made durable."""
    token = _SKIP_FSYNC.set(True)
    try:
        yield
    finally:
        _SKIP_FSYNC.reset(token)


def fsync_dir(folder: Path, *, always: bool = False) -> None:
    """Make a rename or a new file in ``folder`` durable (``always``: in journaled writes too)."""
    if _SKIP_FSYNC.get() and not always:
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
    _write(path, data, fsync=fsync and not _SKIP_FSYNC.get())


def write_before_record(path: str | os.PathLike[str], data: bytes) -> None:
    """:func:`write_atomic` with its fsyncs even in journaled writes: for a file the next
    journal record names, which the run cannot be read without once that record is durable."""
    _write(path, data, fsync=True)


def _write(path: str | os.PathLike[str], data: bytes | str, *, fsync: bool) -> None:
    target = pathsafety.state_file(path)
    existing = pathsafety.refuse_link(target)
    mode = stat.S_IMODE(existing.st_mode) if existing is not None else 0o644
    payload = data.encode("utf-8") if isinstance(data, str) else data
    faults.reached(faults.ATOMIC, target)
    import tempfile

    fd, tmp_name = tempfile.mkstemp(
        prefix=f".{target.name}.", suffix=TEMP_SUFFIX, dir=target.parent
    )
    try:
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
        fsync_dir(target.parent, always=True)


def check_writable(folder: str | os.PathLike[str]) -> None:
    """Raise the OSError a new file in ``folder`` would meet (a read-only folder, a lost
    permission), before a run commits anything there: a journal record appended to a file that
    is still writable must not be the one write of a step that succeeds."""
    import tempfile

    fd, name = tempfile.mkstemp(prefix=".probe.", suffix=TEMP_SUFFIX, dir=folder)
    os.close(fd)
    os.unlink(name)


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
    root = pathsafety.make_state_dir(folder)
    ignore = root / ".gitignore"
    if not ignore.exists():
        write_atomic(ignore, "# Created by freshness_magic: tool state, not user changes.\n*\n")
    return root


def write_json_atomic(path: str | os.PathLike[str], obj: Any) -> None:
    """Atomically write ``obj`` as pretty JSON followed by a newline."""
    write_atomic(path, dumps(obj) + "\n")


def append_jsonl(path: str | os.PathLike[str], obj: Any, *, fsync: bool = True) -> None:
    """Append one JSON record as one line, first cutting a torn last line left by a crash."""
    line = (
        json.dumps(obj, sort_keys=True, ensure_ascii=False, allow_nan=False, default=str) + "\n"
    ).encode("utf-8")
    faults.reached(faults.APPEND, path)
    fd = pathsafety.open_for_write(path, os.O_RDWR | os.O_APPEND | os.O_CREAT)
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


def _too_deep(data: bytes, max_depth: int) -> bool:
    """Whether JSON text nests arrays/objects deeper than ``max_depth`` (no recursion).

    Strings are cut out, every byte but brackets dropped, then each pass removes the innermost
    ``[]``/``{}`` pairs: text that is not empty after ``max_depth`` passes is deeper than that
    (or its brackets do not match, which makes it damaged anyway). All in C-speed passes: the
    escaped backslashes and then the escaped quotes are dropped first (a backslash only
    appears in a string, and a run of them pairs up from its left, as the decoder reads it),
    so that the quotes left alternate between opening and closing a string and every other
    piece between them is outside the strings (a regex over the strings of a 2 MB checkpoint
    took 20 ms, most of reading it).
    """
    if b"\\" in data:
        data = data.replace(b"\\\\", b"").replace(b'\\"', b"")
    # Two quotes side by side hold no bracket between them: a string without brackets (most
    # of a checkpoint's: paths) or the gap between two strings. Dropping such pairs keeps the
    # quotes alternating and every bracket outside the strings, and leaves few to split on.
    marks = data.translate(None, _NOT_BRACKETS_OR_QUOTES).replace(b'""', b"")
    brackets = b"".join(marks.split(b'"')[::2]) if b'"' in marks else marks
    for _ in range(max_depth):
        if not brackets:
            return False
        brackets = _PAIR_RE.sub(b"", brackets)
    return bool(brackets)


def loads_bounded(raw: bytes | str, *, max_depth: int = MAX_JSON_DEPTH, what: str = "") -> Any:
    """``json.loads`` that refuses nesting deeper than ``max_depth`` (StateFileError).

    Python's decoder recurses once per level, so a hostile or damaged file of 200k ``[`` would
    raise RecursionError from deep inside; the depth is checked first, without recursion.
    StateFileError is a ValueError, like the decoder's own errors.
    """
    data = raw.encode("utf-8", "surrogatepass") if isinstance(raw, str) else raw
    if data.count(b"[") + data.count(b"{") > max_depth and _too_deep(data, max_depth):
        name = f"{what}: " if what else ""
        raise StateFileError(
            f"{name}JSON nested more than {max_depth} levels deep (or with unmatched brackets); "
            "the file is damaged or not ours"
        )
    try:
        return json.loads(data)
    except RecursionError as exc:
        raise StateFileError(f"{what or 'JSON'}: nested too deeply to decode") from exc


def read_jsonl(path: str | os.PathLike[str]) -> Iterator[dict[str, Any]]:
    """Yield the records of a JSONL log, skipping (with a warning) a torn or damaged line."""
    target = Path(path)
    try:
        handle = pathsafety.open_state(target)
    except FileNotFoundError:
        return
    with handle:
        for number, raw in enumerate(handle, start=1):
            if not raw.endswith(b"\n"):
                break
            try:
                record = loads_bounded(raw)
            except (ValueError, UnicodeDecodeError) as exc:
                _warn("%s:%d: damaged line skipped (%s)", target, number, exc)
                continue
            if isinstance(record, dict):
                yield record
            else:
                _warn("%s:%d: line is not a JSON object; skipped", target, number)


def remove_stale_temp_files(folder: str | os.PathLike[str], *, min_age: float = 0.0) -> list[Path]:
    """Remove the temporary files of :func:`write_atomic` a crash left in ``folder`` (recursive).

    Only names of our own pattern (``.<name>.<8 chars>.tmp``) older than ``min_age`` seconds are
    removed; symbolic links are neither followed nor removed. Returns what was removed. Call it
    when a run starts or resumes (one driver per run, so nothing of ours is in flight there).
    """
    root = Path(folder)
    removed: list[Path] = []
    if not root.is_dir() or root.is_symlink():
        return removed
    now = time.time()
    for current, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if not os.path.islink(os.path.join(current, d))]
        for name in files:
            if not _TEMP_RE.match(name):
                continue
            path = Path(current) / name
            try:
                info = os.lstat(path)
            except OSError:
                continue
            if not stat.S_ISREG(info.st_mode) or now - info.st_mtime < min_age:
                continue
            with contextlib.suppress(OSError):
                path.unlink()
                removed.append(path)
    return removed
