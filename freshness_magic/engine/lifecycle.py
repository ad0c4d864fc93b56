"""A run's directory over its life: open, reopen, move; functions over :class:`~.run_data.RunData`.

A new run takes its run directory's driver lock, stores the pipeline text and opens the journal
before its first event (:func:`begin`, the start of ``Run.start``). :func:`reopen` is the first
half of ``Run.resume``: follow ``loop_restart`` links, take the lock, load the newest valid state
and check it against the pipeline; :func:`restore` puts that state into the new run's data, and
:func:`resumed` finishes once the run exists (journal reopened, damaged files reported; the
facade then tells the extensions and, holding a fresh lock, :func:`reap_survivors` stops tool
process groups of a dead driver). :func:`loop_restart` moves the run to a fresh, linked
directory, and :func:`carry_over` into an edited pipeline. ``Run.close`` lets go of the lock
through the journal's store.

The run directory's manifest is read here too, without a lock (:func:`read_manifest`,
:func:`stored_workdir`), for commands that look at a run before they open it.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from freshness_magic.atomicio import ensure_ignored_dir, loads_bounded, read_jsonl, write_atomic
from freshness_magic.engine.carry import CarryPlan, apply_carry_over
from freshness_magic.engine.checkpoint import (
    LoadedState,
    load_state,
    refuse_other_format,
)
from freshness_magic.engine.checkpoint_format import MANIFEST_FILE
from freshness_magic.engine.events import EventType
from freshness_magic.engine.journal import Journal
from freshness_magic.engine.model import Graph
from freshness_magic.engine.persistence import (
    EVENTS_FILE,
    PIPELINE_FILE,
    edited_pipeline_file,
    follow_restarts,
    restart_dir,
    restore_memory,
    restore_stored_pipeline,
    same_pipeline,
    source_hash,
    stored_pipeline,
    stored_pipeline_path,
    workdir_gone,
    write_manifest_file,
    write_pipeline,
    write_run_files,
)
from freshness_magic.engine.run_data import RunData
from freshness_magic.engine.runread import has_state
from freshness_magic.engine.state import Durability, RunState
from freshness_magic.engine.store import RunStore
from freshness_magic.errors import CheckpointError, FreshnessMagicError, RunError
from freshness_magic.pathsafety import make_state_dir, read_state

log = logging.getLogger(__name__)


@dataclass
class Reopened:
    """A run directory ready to resume: its lock held, its newest valid state loaded."""

    folder: Path
    graph: Graph
    store: RunStore
    loaded: LoadedState
    damaged: list[tuple[Path, str]]
    """Checkpoint files found damaged (path, why); an older valid state was used."""
    repaired: str | None
    """What was done to put back a missing or altered ``pipeline.dot`` from the given graph."""
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


def begin(data: RunData, journal: Journal) -> None:
    """Set up a run's directory and journal before its first event (``Run.start``): the driver
    lock, ``pipeline.dot``, the first journal record, the manifest, the ``graph.*`` context keys
    and PIPELINE_STARTED. A resumed run already holds its lock and an open journal."""
    store = journal.store
    resuming = store.writer is not None
    if not resuming and has_state(data.run_dir):
        raise RunError(
            f"run directory {data.run_dir} already holds a run; resume it with "
            "Run.resume(run_dir) or start with another run_id"
        )
    if data.run_dir.parent == data.workdir / ".freshness" / "runs":
        ensure_ignored_dir(data.workdir / ".freshness")
    make_state_dir(data.run_dir)
    if not resuming:
        store.lock(data.run_dir)
        if has_state(data.run_dir):
            store.release()
            raise RunError(
                f"run directory {data.run_dir} already holds a run; resume it with "
                "Run.resume(run_dir) or start with another run_id"
            )
        write_pipeline(data.run_dir, data.graph)
        store.open(data.run_dir)
    data.started = True
    journal.save(rest=True, announce=False)
    write_manifest_file(
        data.run_dir, data.graph, data.run_id, data.workdir, data.memory, data.pipeline_path
    )
    data.context.set("graph.goal", data.graph.goal)
    for key, value in data.graph.attrs.items():
        data.context.set(f"graph.{key}", value)
    data.events.emit(
        EventType.PIPELINE_STARTED,
        data={"name": data.graph.name, "goal": data.graph.goal, "run_dir": str(data.run_dir)},
    )


def restore(data: RunData, saved: dict[str, Any]) -> None:
    """Take memory, context and the event sequence from a loaded state (a resumed run's data)."""
    data.memory, data.context = restore_memory(saved, data.run_dir)
    stored = (saved.get("pipeline") or {}).get("source_file")
    if isinstance(stored, str) and stored:
        data.pipeline_file = stored
    next_node = data.memory.next_node
    if next_node is not None and next_node not in data.graph.nodes:
        raise CheckpointError(
            f"checkpoint of {data.run_dir} continues at node '{next_node}', which "
            "the pipeline does not have; resume with the pipeline the run was started with"
        )
    data.started = saved.get("state") != RunState.READY.value
    last_seq = int(saved.get("event_seq", 0))
    for record in read_jsonl(data.run_dir / EVENTS_FILE):
        last_seq = max(last_seq, int(record.get("seq", 0)))
    data.events.rebind(data.run_id, data.run_dir / EVENTS_FILE, seq=last_seq)


def resumed(data: RunData, journal: Journal, found: Reopened) -> dict[str, Any]:
    """Reopen the journal of a restored run with the store ``reopen`` locked, report damaged
    files and a repaired pipeline copy, emit PIPELINE_RESUMED; returns the extensions' saved
    state by name, for their ``on_resume``."""
    journal.store = found.store
    found.store.open(
        data.run_dir,
        keep=tuple(p for p, _ in found.damaged),
        valid_end=found.loaded.journal_end,
    )
    for path, why in found.damaged:
        data.events.emit(EventType.CHECKPOINT_CORRUPT, None, {"path": str(path), "why": why})
    if found.repaired is not None:
        log.warning("%s", found.repaired)
        data.events.emit(EventType.STAGE_OUTPUT, None, {"stream": "stderr", "text": found.repaired})
    data.events.emit(
        EventType.PIPELINE_RESUMED,
        data.memory.next_node,
        {"checkpoint": str(found.loaded.path), "state": data.memory.state.value},
    )
    saved = found.loaded.data.get("extensions") or {}
    return saved if isinstance(saved, dict) else {}


def reap_survivors(data: RunData) -> None:
    """Stop tool process groups a dead driver left running (branch nodes included)."""
    from freshness_magic.engine.handlers.tool import reap_survivors as reap

    for message in reap(data.run_dir):
        log.warning("%s", message)
        data.events.emit(EventType.STAGE_OUTPUT, None, {"stream": "stderr", "text": message})


def loop_restart(data: RunData, journal: Journal, target: str, reason: str) -> str:
    """Continue in a fresh run directory linked from the old one; returns the step's new reason."""
    journal.save_checkpoint()
    memory = data.memory
    old_dir, old_id = data.run_dir, data.run_id
    memory.restarts += 1
    new_id, new_dir = restart_dir(old_dir, old_id, memory.restarts, target)
    data.events.emit(
        EventType.PIPELINE_RESTARTED,
        target,
        {"new_run_dir": str(new_dir), "new_run_id": new_id, "target": target},
    )
    data.run_id, data.run_dir = new_id, new_dir
    memory.restarted_from = str(old_dir)
    with data.lock:
        memory.forget_nodes()
    data.events.rebind(new_id, new_dir / EVENTS_FILE)
    make_state_dir(new_dir)
    journal.store.lock(new_dir)
    journal.store.open(new_dir)
    write_run_files(new_dir, data.graph, new_id, data.workdir, memory, data.pipeline_path)
    data.events.emit(
        EventType.PIPELINE_RESTARTED,
        target,
        {"restarted_from": str(old_dir), "old_run_id": old_id, "target": target},
    )
    return f"{reason}; loop_restart: continuing at '{target}' in {new_dir}"


def carry_over(data: RunData, journal: Journal, graph: Graph, plan: CarryPlan) -> None:
    """Go on in the edited, checked pipeline ``graph`` (``Run.carry_over``): its text in the run
    directory (``pipeline-<hash>.dot``), the memory changed as ``plan`` says, PIPELINE_EDITED,
    the whole state journaled naming that file; then ``pipeline.dot`` and the manifest. A crash
    before the record leaves the run as it was, after it the edited one."""
    name = edited_pipeline_file(graph.source)
    write_atomic(data.run_dir / name, graph.source)
    with data.lock:
        apply_carry_over(data.memory, plan)
        data.graph = graph
        data.source_hash = source_hash(graph.source)
        data.pipeline_file = name
        data.pipeline_path = stored_pipeline_path(graph.path)
        data.exit_ids = frozenset(n.id for n in graph.exit_candidates())
    for key, value in graph.attrs.items():
        data.context.set(f"graph.{key}", value)
    data.context.set("graph.goal", graph.goal)
    data.events.emit(
        EventType.PIPELINE_EDITED, data.memory.next_node, {**plan.to_dict(), "pipeline": name}
    )
    journal.store.rewrite_whole()
    journal.save_checkpoint()
    write_atomic(data.run_dir / PIPELINE_FILE, graph.source)
    write_manifest_file(
        data.run_dir, graph, data.run_id, data.workdir, data.memory, data.pipeline_path
    )


# --------------------------------------------------------------------- the manifest, unlocked


def read_manifest(run_dir: Path) -> dict[str, Any]:
    """``manifest.json`` of ``run_dir``, read as the run's own files are (empty when it cannot
    be read)."""
    try:
        data = loads_bounded(read_state(run_dir / MANIFEST_FILE))
    except (OSError, ValueError, FreshnessMagicError):
        return {}
    return data if isinstance(data, dict) else {}


def manifest_workdir(run_dir: Path) -> str | None:
    """The working directory ``manifest.json`` names (None when it cannot be read)."""
    found = read_manifest(run_dir).get("workdir")
    return found if isinstance(found, str) else None


def stored_workdir(run_dir: Path) -> str:
    """The working directory the run in ``run_dir`` was started in: its manifest's, else its
    state's (loading it; a warning for a damaged file says so)."""
    found = manifest_workdir(run_dir)
    if found is None:
        from freshness_magic.engine.checkpoint import load_checkpoint

        data, _ = load_checkpoint(run_dir)
        found = str(data.get("workdir", "."))
    return found


def check_stored_workdir(run_dir: Path, stored: str | None) -> None:
    """A RunError when the working directory the run was started in is gone (a project moved
    or deleted): resuming must not recreate the old folder and run its tools there."""
    if gone := workdir_gone(run_dir, stored):
        raise RunError(gone.replace("; ", "; nothing was run or written; ", 1))
