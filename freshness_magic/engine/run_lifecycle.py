"""A :class:`~.run.Run`'s directory over its life: open, reopen, move, close.

A new run takes its run directory's driver lock, stores the pipeline text and opens the journal
before its first event (:meth:`RunLifecycle.start`). :func:`reopen` is the first half of
``Run.resume``: follow ``loop_restart`` links, take the lock, load the newest valid state and
check it against the pipeline; :meth:`RunLifecycle._resumed` the second half, once the run
exists (journal reopened, damaged files reported, extensions told, tool process groups of a dead
driver stopped). ``loop_restart`` moves the run to a fresh, linked directory
(:meth:`RunLifecycle._loop_restart`); :meth:`RunLifecycle.close` lets go of the lock.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Self

from freshness_magic.atomicio import ensure_ignored_dir, read_jsonl
from freshness_magic.engine.checkpoint import (
    LoadedState,
    has_state,
    load_state,
    refuse_other_format,
)
from freshness_magic.engine.events import EventType
from freshness_magic.engine.model import Graph
from freshness_magic.engine.persistence import (
    EVENTS_FILE,
    follow_restarts,
    restart_dir,
    restore_memory,
    restore_stored_pipeline,
    same_pipeline,
    stored_pipeline,
    write_manifest_file,
    write_pipeline,
    write_run_files,
)
from freshness_magic.engine.run_journal import RunJournal
from freshness_magic.engine.state import Durability, RunState
from freshness_magic.engine.store import RunStore
from freshness_magic.errors import CheckpointError, RunError
from freshness_magic.pathsafety import make_state_dir

log = logging.getLogger(__name__)


@dataclass
class Reopened:
    """A run directory ready to resume: its lock held, its newest valid state loaded."""

    folder: Path
    graph: Graph
    store: RunStore
    loaded: LoadedState
    damaged: list[tuple[Path, str]]
    repaired: str | None
    """What was done to put back a missing or altered ``pipeline.dot`` from the given graph."""
    """Checkpoint files found damaged (path, why); an older valid state was used."""
    fresh: bool
    """The driver lock was taken now (not shared with a Run of this process)."""


def reopen(
    run_dir: Path, graph: Graph | None, *, history: int, durability: Durability | str
) -> Reopened:
    """Lock ``run_dir`` (after its ``loop_restart`` links) and load its state.

    Without ``graph`` the pipeline is rebuilt from the stored ``pipeline.dot``; a given graph
    must have the source hash the state recorded (CheckpointError otherwise). A run directory of
    another format is refused before the lock is taken, so nothing in it is written.
    """
    folder = follow_restarts(run_dir)
    _refuse_folders_for_files(folder)
    refuse_other_format(folder)
    damaged: list[tuple[Path, str]] = []
    store = RunStore(history=history, durability=durability)
    fresh = store.lock(folder) if folder.is_dir() else False
    loaded = load_state(folder, on_corrupt=lambda p, why: damaged.append((p, why)))
    pipeline = loaded.data.get("pipeline") or {}
    stored_hash = str(pipeline.get("sha256") or "")
    repaired = None
    if graph is None:
        graph = stored_pipeline(folder, pipeline, loaded.path)
    elif graph.source and stored_hash and not same_pipeline(graph.source, stored_hash):
        raise CheckpointError(
            f"checkpoint {loaded.path} belongs to another pipeline (source hash differs from "
            f"{graph.path or 'the given graph'}); resume with the pipeline the run used"
        )
    elif graph.source:
        repaired = restore_stored_pipeline(folder, pipeline, graph.source)
    return Reopened(folder, graph, store, loaded, damaged, repaired, fresh)


_FILE_SUFFIXES = (".json", ".jsonl", ".dot", ".lock")
"""The run directory's own files (state, logs, the pipeline, the lock) end so; none is a folder."""


def _refuse_folders_for_files(folder: Path) -> None:
    """CheckpointError when folders stand where the run keeps files (damaged by hand or by a
    tool): a resume would fail half way, at the first write to one of them."""
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return  # no such folder: load_state says so
    misplaced = sorted(
        e.name
        for e in entries
        if e.name.endswith(_FILE_SUFFIXES) and e.is_dir(follow_symlinks=False)
    )
    if misplaced:
        raise CheckpointError(
            f"run directory {folder} is damaged: "
            + (
                f"{misplaced[0]} is a folder where the run keeps a file; move it"
                if len(misplaced) == 1
                else f"{', '.join(misplaced)} are folders where the run keeps files; move them"
            )
            + " out of the run directory, then resume again"
        )


class RunLifecycle(RunJournal):
    """Start, resume, ``loop_restart`` and close; see the module docstring."""

    def start(self) -> None:
        """Begin the run (idempotent): run dir, manifest, graph keys, PIPELINE_STARTED.

        Called by the first ``step()``; call it earlier to take extension baselines at load time.
        """
        if self._started:
            return
        resuming = self._store.writer is not None
        if not resuming and has_state(self._run_dir):
            raise RunError(
                f"run directory {self._run_dir} already holds a run; resume it with "
                "Run.resume(run_dir) or start with another run_id"
            )
        if self._run_dir.parent == self.workdir / ".freshness" / "runs":
            ensure_ignored_dir(self.workdir / ".freshness")
        make_state_dir(self._run_dir)
        if not resuming:
            self._store.lock(self._run_dir)
            if has_state(self._run_dir):
                self._store.release()
                raise RunError(
                    f"run directory {self._run_dir} already holds a run; resume it with "
                    "Run.resume(run_dir) or start with another run_id"
                )
            write_pipeline(self._run_dir, self.graph)
            self._store.open(self._run_dir)
        self._started = True
        self._save(rest=True, announce=False)
        write_manifest_file(
            self._run_dir, self.graph, self._run_id, self.workdir, self._memory, self._pipeline_path
        )
        self._context.set("graph.goal", self.graph.goal)
        for key, value in self.graph.attrs.items():
            self._context.set(f"graph.{key}", value)
        self.events.emit(
            EventType.PIPELINE_STARTED,
            data={"name": self.graph.name, "goal": self.graph.goal, "run_dir": str(self._run_dir)},
        )
        for ext in self.extensions:
            self.call_extension(ext, "on_run_start", self)
        self.save_checkpoint()

    def close(self) -> None:
        """Release the run directory's driver lock (another process may then drive the run)
        and what the run was given to close with it (:meth:`close_with`)."""
        self._store.release()
        while self._closers:
            self._closers.pop()()

    def close_with(self, closer: Callable[[], None]) -> None:
        """Call ``closer`` when the run closes (e.g. a cluster started for this run)."""
        self._closers.append(closer)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _restore_state(self, data: dict[str, Any]) -> None:
        """Take memory, context and the event sequence from a loaded state (``Run.__init__``)."""
        self._memory, self._context = restore_memory(data, self._run_dir)
        stored = (data.get("pipeline") or {}).get("source_file")
        if isinstance(stored, str) and stored:
            self._pipeline_file = stored
        next_node = self._memory.next_node
        if next_node is not None and next_node not in self.graph.nodes:
            raise CheckpointError(
                f"checkpoint of {self._run_dir} continues at node '{next_node}', which "
                "the pipeline does not have; resume with the pipeline the run was started with"
            )
        self._started = data.get("state") != RunState.READY.value
        last_seq = int(data.get("event_seq", 0))
        for record in read_jsonl(self._run_dir / EVENTS_FILE):
            last_seq = max(last_seq, int(record.get("seq", 0)))
        self.events.rebind(self._run_id, self._run_dir / EVENTS_FILE, seq=last_seq)

    def _resumed(self, found: Reopened) -> None:
        """Finish ``Run.resume`` on the restored run (see the module docstring)."""
        self._store = found.store
        found.store.open(
            self._run_dir,
            keep=tuple(p for p, _ in found.damaged),
            valid_end=found.loaded.journal_end,
        )
        for path, why in found.damaged:
            self.events.emit(EventType.CHECKPOINT_CORRUPT, None, {"path": str(path), "why": why})
        if found.repaired is not None:
            log.warning("%s", found.repaired)
            self.events.emit(
                EventType.STAGE_OUTPUT, None, {"stream": "stderr", "text": found.repaired}
            )
        self.events.emit(
            EventType.PIPELINE_RESUMED,
            self._memory.next_node,
            {"checkpoint": str(found.loaded.path), "state": self._memory.state.value},
        )
        saved = found.loaded.data.get("extensions") or {}
        for ext in self.extensions:
            state = saved.get(ext.name) if isinstance(saved, dict) else None
            self.call_extension(ext, "on_resume", self, state if isinstance(state, dict) else None)
        if found.fresh:
            self._reap_survivors()

    def _reap_survivors(self) -> None:
        """Stop tool process groups a dead driver left running (branch nodes included)."""
        from freshness_magic.engine.handlers.tool import reap_survivors

        for message in reap_survivors(self._run_dir):
            log.warning("%s", message)
            self.events.emit(EventType.STAGE_OUTPUT, None, {"stream": "stderr", "text": message})

    def _loop_restart(self, target: str, reason: str) -> str:
        """Continue in a fresh run directory linked from the old one; returns the new reason."""
        self.save_checkpoint()
        memory = self._memory
        old_dir, old_id = self._run_dir, self._run_id
        memory.restarts += 1
        new_id, new_dir = restart_dir(old_dir, old_id, memory.restarts, target)
        self.events.emit(
            EventType.PIPELINE_RESTARTED,
            target,
            {"new_run_dir": str(new_dir), "new_run_id": new_id, "target": target},
        )
        self._run_id, self._run_dir = new_id, new_dir
        memory.restarted_from = str(old_dir)
        with self._lock:
            memory.forget_nodes()
        self.events.rebind(new_id, new_dir / EVENTS_FILE)
        make_state_dir(new_dir)
        self._store.lock(new_dir)
        self._store.open(new_dir)
        write_run_files(new_dir, self.graph, new_id, self.workdir, memory, self._pipeline_path)
        self.events.emit(
            EventType.PIPELINE_RESTARTED,
            target,
            {"restarted_from": str(old_dir), "old_run_id": old_id, "target": target},
        )
        return f"{reason}; loop_restart: continuing at '{target}' in {new_dir}"
