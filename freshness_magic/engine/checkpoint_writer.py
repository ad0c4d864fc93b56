"""Writing a run directory's state: journal records, snapshots with a bounded history, manifest.

:class:`CheckpointWriter` appends each step's record to the journal (fsynced when durable) and
writes ``checkpoint.json`` plus a hard-linked history entry when asked; the format is
:mod:`.checkpoint_format`, and :class:`~.store.RunStore` decides when to snapshot.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections import deque
from pathlib import Path
from typing import Any

from freshness_magic import faults
from freshness_magic.atomicio import write_atomic, write_json_atomic
from freshness_magic.engine.checkpoint_format import (
    CHECKPOINT_FILE,
    HISTORY_DIR,
    HISTORY_RE,
    JOURNAL_FILE,
    MANIFEST_FILE,
    encode_checkpoint,
    history_files,
    journal_line,
)


class CheckpointWriter:
    """Appends a run's journal records and writes its snapshots (at most ``history`` kept).

    ``durable``: fsync each journal record (the default; one fsync per step). ``valid_end``
    (resume) cuts a torn or damaged journal tail before the first append.
    """

    def __init__(
        self,
        run_dir: Path,
        *,
        history: int = 50,
        keep: tuple[Path, ...] = (),
        durable: bool = True,
        valid_end: int | None = None,
    ) -> None:
        self.run_dir = run_dir
        self.history = max(history, 0)
        self.durable = durable
        existing = history_files(run_dir)
        kept = {p.resolve() for p in keep}
        self._history: deque[Path] = deque(p for p in existing if p.resolve() not in kept)
        self._last_ms = 0
        if existing:
            match = HISTORY_RE.match(existing[-1].name)
            self._last_ms = int(match.group(1)) if match else 0
        self.journal = run_dir / JOURNAL_FILE
        self._end = self.journal.stat().st_size if self.journal.exists() else 0
        if valid_end is not None and (valid_end < self._end or self._end < valid_end):
            # A tail after the valid records is cut; a journal shorter than its snapshot says
            # (bytes the snapshot already holds were lost) is cut to its last whole line, so
            # the next record never continues a torn one.
            self._cut(valid_end if valid_end < self._end else _last_line_end(self.journal))
        self._since_snapshot = 0
        self._snapshot_size = 0
        self._inode: int | None = None
        """The journal file this writer appends to, once it has: another (or none) means the
        run directory was removed or replaced under the run (:meth:`lost`)."""
        self.needs_snapshot = True
        """True until this writer has written a snapshot (the first save compacts)."""

    def _cut(self, end: int) -> None:
        with open(self.journal, "r+b") as handle:
            handle.truncate(end)
        self._end = end

    def append(self, record: dict[str, Any]) -> int:
        """Append one record (fsynced when durable); returns the journal's new end."""
        line = journal_line(record)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        faults.reached(faults.JOURNAL, self.journal)
        fd = os.open(self.journal, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line)
            if self.durable:
                os.fsync(fd)
            self._inode = os.fstat(fd).st_ino
        finally:
            os.close(fd)
        self._end += len(line)
        self._since_snapshot += len(line)
        return self._end

    def lost(self) -> bool:
        """Whether the journal this writer appended to is gone or another file stands in its
        place: its records after that would continue a state the new file does not hold."""
        if self._inode is None:
            return False
        try:
            return os.stat(self.journal).st_ino != self._inode
        except FileNotFoundError:
            return True

    def start_over(self) -> None:
        """Write the next save as a whole state (a record that stands alone), after :meth:`lost`."""
        self._end = self.journal.stat().st_size if self.journal.exists() else 0
        self._since_snapshot = 0
        self._inode = None
        self._history.clear()
        self.needs_snapshot = True

    @property
    def compaction_due(self) -> bool:
        """The journal since the last snapshot is larger than that snapshot."""
        return self.needs_snapshot or self._since_snapshot > self._snapshot_size

    def snapshot(self, data: dict[str, Any]) -> Path:
        """Write ``data`` (the whole state, covering the journal so far) as ``checkpoint.json``
        and one history entry; returns its path."""
        payload = encode_checkpoint({**data, "journal_offset": self._end})
        latest = self.run_dir / CHECKPOINT_FILE
        write_atomic(latest, payload, fsync=False)
        self._snapshot_size = len(payload)
        self._since_snapshot = 0
        self.needs_snapshot = False
        if self.history:
            target = self._next_name()
            target.parent.mkdir(parents=True, exist_ok=True)
            try:
                os.link(latest, target)
            except OSError:
                write_atomic(target, payload, fsync=False)
            self._history.append(target)
            while len(self._history) > self.history:
                old = self._history.popleft()
                with contextlib.suppress(FileNotFoundError):
                    old.unlink()
        return latest

    def _next_name(self) -> Path:
        now_ms = time.time_ns() // 1_000_000
        self._last_ms = max(now_ms, self._last_ms + 1)
        return self.run_dir / HISTORY_DIR / f"checkpoint_{self._last_ms}.json"


def _last_line_end(path: Path, chunk: int = 1 << 16) -> int:
    """The size of ``path`` up to and including its last newline (0 when it has none)."""
    with open(path, "rb") as handle:
        end = handle.seek(0, os.SEEK_END)
        while end > 0:
            start = max(end - chunk, 0)
            handle.seek(start)
            found = handle.read(end - start).rfind(b"\n")
            if found >= 0:
                return start + found + 1
            end = start
    return 0


def write_manifest(run_dir: Path, data: dict[str, Any]) -> None:
    """``manifest.json`` (§5.6): pipeline name, goal, start time, run id, paths."""
    write_json_atomic(run_dir / MANIFEST_FILE, data)
