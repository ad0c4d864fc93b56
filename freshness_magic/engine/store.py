"""Where a :class:`~.run.Run` keeps its state: journal writer, what the journal holds, the lock.

:class:`RunStore` decides per save whether to append a whole-state record (a new journal, after
a resume) or a step record, and when to write a snapshot (compaction due, or the run at rest);
see :mod:`.checkpoint_format` for the format and :mod:`.runlock` for the driver lock.
"""

from __future__ import annotations

import contextlib
import weakref
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from freshness_magic.atomicio import check_writable, journaled_writes
from freshness_magic.engine.checkpoint_writer import CheckpointWriter
from freshness_magic.engine.context import Context
from freshness_magic.engine.persistence import JournalMarks, RunMemory, step_record
from freshness_magic.engine.runlock import PROCESS_LOCKS, HeldLock
from freshness_magic.engine.state import Durability
from freshness_magic.errors import RunError
from freshness_magic.pathsafety import StateDirs, remembering


class RunStore:
    """A run's journal writer and driver lock (one per Run; re-pointed by ``loop_restart``)."""

    def __init__(self, *, history: int, durability: Durability | str) -> None:
        self.history = history
        try:
            self.durability = Durability(durability)
        except ValueError:
            choices = ", ".join(repr(d.value) for d in Durability)
            raise RunError(f"durability {durability!r} is not one of {choices}") from None
        self.writer: CheckpointWriter | None = None
        self.marks = JournalMarks()
        self._lock: HeldLock | None = None
        self._closed_at: Path | None = None
        """The run directory this store let go of (:meth:`release`); it acts on it no more."""
        self.state_dirs = StateDirs()
        """State folders verified during this run (re-checked with one lstat each)."""

    def lock(self, run_dir: Path) -> bool:
        """Hold ``run_dir``'s driver lock (RunError when another process holds it); True when
        it was taken now rather than shared with another Run object of this process."""
        held, fresh = PROCESS_LOCKS.acquire(run_dir)
        held.driver = weakref.ref(self)
        self._lock = held
        self._closed_at = None
        return fresh

    def check_driver(self) -> None:
        """RunError when the run was closed, or when another object of this process opened it
        since this one did: it drives the run now, and two writers would interleave the
        journal."""
        if self._closed_at is not None:
            raise RunError(
                f"run {self._closed_at.name} was closed (close(), or the end of its with block): "
                "this object no longer drives it and another may; to go on, resume it "
                f"(resume_run({str(self._closed_at)!r}))"
            )
        held = self._lock
        if held is None or held.driver is None or held.driver() is self:
            return
        raise RunError(
            f"run {held.path.parent.name} was opened again in this process since this object "
            "opened it (a newer load or resume of it drives it now); this one no longer acts "
            "on it: use the newer one"
        )

    def lost(self) -> bool:
        """Whether the run directory was removed or replaced under the run (see
        :meth:`CheckpointWriter.lost`): :meth:`start_over` before the next save."""
        return self.writer is not None and self.writer.lost()

    def start_over(self) -> None:
        """Take the driver lock again and make the next save a whole state, in a run directory
        written again after :meth:`lost`."""
        if self._lock is not None:
            self._lock.renew()
        assert self.writer is not None
        self.writer.start_over()

    def release(self) -> None:
        """Let go of the driver lock (the last Run object of this process releases it); from
        then on this store refuses to act (:meth:`check_driver`)."""
        if self._lock is not None:
            self._closed_at = self._lock.path.parent
        self._lock = None

    def open(
        self, run_dir: Path, *, keep: tuple[Path, ...] = (), valid_end: int | None = None
    ) -> None:
        """Start writing to ``run_dir`` (its first save writes the whole state); an OSError when
        the folder refuses new files, before anything is written."""
        check_writable(run_dir)
        self.writer = CheckpointWriter(
            run_dir,
            history=self.history,
            keep=keep,
            durable=self.durability is not Durability.NONE,
            valid_end=valid_end,
        )
        self.marks = JournalMarks()

    def rewrite_whole(self) -> None:
        """Make the next save a whole-state record (the pipeline itself changed)."""
        if self.writer is not None:
            self.writer.needs_snapshot = True

    @contextlib.contextmanager
    def writes(self) -> Iterator[None]:
        """The context a step's writes run in: journaled unless STRICT; the run's checked state
        folders remembered (:class:`~freshness_magic.pathsafety.StateDirs`)."""
        with remembering(self.state_dirs):
            if self.durability is Durability.STRICT:
                yield
            else:
                with journaled_writes():
                    yield

    def save(
        self,
        memory: RunMemory,
        context: Context,
        payload: Callable[[dict[str, Any]], dict[str, Any]],
        *,
        extensions: dict[str, dict[str, Any]],
        event_seq: int,
        now: float,
        rest: bool,
    ) -> Path:
        """Record the run's state; returns the snapshot written or the journal."""
        writer = self.writer
        assert writer is not None, "RunStore.open() first"
        self.check_driver()
        if writer.needs_snapshot:
            data = payload(extensions)
            writer.append({"kind": "full", **data})
            self.marks.reset(memory, context, extensions)
            return writer.snapshot(data)
        record = step_record(
            memory, context, self.marks, event_seq=event_seq, now=now, extensions=extensions
        )
        writer.append(record)
        if rest or writer.compaction_due:
            return writer.snapshot(payload(extensions))
        return writer.journal
