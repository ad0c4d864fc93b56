"""The freshness run extension: baselines, stale-input warn/block, accept, drift on resume.

- Run start: a baseline for every node with ``source_files``, whatever its
  ``freshness`` mode; nodes without ``source_files`` are not tracked. A codergen
  prompt file (``prompt="@path"``) counts as one more input of its node.
- Before each attempt (after the retry delay, before the handler) of a node whose ``freshness``
  is ``warn`` or ``block``: check it against its effective snapshot (the completion snapshot once
  its handler ran, else its baseline). Stale: ``freshness.<id>.stale_files`` is set in the
  context and a ``STALE_INPUT`` event is emitted; ``warn`` proceeds, ``block`` returns RETRY with
  ``failure_reason="stale input: <files>"`` and the handler does not run. Fresh: the key is removed.
- After a step whose handler ran: a completion snapshot ("stale since run").
- ``accept_changes(run, node_id=None)`` (and the context key ``freshness.accept``, a list of node
  ids a handler may set) re-captures baselines and emits ``BASELINE_ACCEPTED``.
- Resume: the checkpointed snapshots are compared with the disk first and every change is
  reported in one ``INPUT_DRIFT`` event (kept for :func:`resume_drift`: the CLI's ``resume``
  and the notebook print it, since the checks will not see it again); then baselines of nodes
  whose handler has not run are re-captured — except nodes that a ``block`` stopped,
  which keep theirs until the change is accepted, so a pause never silently unblocks a node.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from freshness_magic.engine.extensions import BaseRunExtension
from freshness_magic.engine.model import Node
from freshness_magic.engine.outcome import Outcome, StageStatus
from freshness_magic.engine.validation import LintRule
from freshness_magic.errors import FreshnessError
from freshness_magic.freshness.attrs import (
    freshness_mode,
    inputs_checked,
    node_inputs,
    source_files,
    tracked_nodes,
)
from freshness_magic.freshness.check import FreshnessTracker
from freshness_magic.freshness.events import FreshnessEvent, describe_input_drift
from freshness_magic.freshness.filestore import FileStore
from freshness_magic.freshness.lint import freshness_rules
from freshness_magic.freshness.report import FreshnessReport, NodeReport
from freshness_magic.freshness.runcheck import changed_since_run as changed_since_run

if TYPE_CHECKING:
    from freshness_magic.engine import Run, StepResult
    from freshness_magic.freshness.snapshot import HashSources

NAME = "freshness"
ACCEPT_KEY = "freshness.accept"
MAX_EVENT_FILES = 200
"""File details per event are capped (the full list of paths is always included)."""


def stale_key(node_id: str) -> str:
    """The context key that lists a node's stale files."""
    return f"freshness.{node_id}.stale_files"


def _details(report: NodeReport) -> list[dict[str, Any]]:
    return [f.to_dict() for f in report.files if f.label.value != "fresh"][:MAX_EVENT_FILES]


class FreshnessExtension(BaseRunExtension):
    """Joins a run through the :mod:`engine.extensions` hooks; see the module docstring."""

    name = NAME

    def __init__(
        self,
        hash_size_limit: int | None = None,
        *,
        allow_outside: bool | Iterable[str] = False,
        git: bool = True,
        hash_sources: HashSources | None = None,
    ) -> None:
        self.hash_size_limit = hash_size_limit
        self.allow_outside = allow_outside
        self.git = git
        self.hash_sources = hash_sources
        """Makes the run's source of known digests (the session passes the hub's); None:
        every file is hashed here."""
        self.tracker: FreshnessTracker | None = None
        self.blocked: set[str] = set()
        """Nodes a ``block`` stopped whose change has not been accepted since."""
        self._blocked_now: set[str] = set()
        self.drift: dict[str, Any] | None = None
        """The ``INPUT_DRIFT`` data this resume found (None: no resume, or nothing changed)."""
        self._run: Run | None = None
        """The run this extension joined: its run directory keeps the snapshots' files (the
        directory moves with a ``loop_restart``)."""

    # -- setup -----------------------------------------------------------------------------

    def _tracker(self, run: Run) -> FreshnessTracker:
        self._run = run
        if self.tracker is None:
            make = self.hash_sources
            self.tracker = FreshnessTracker(
                Path(run.workdir),
                self.hash_size_limit,
                allow_outside=self.allow_outside,
                git=self.git,
                hash_source=make(str(run.workdir)) if make is not None else None,
            )
        return self.tracker

    def on_run_start(self, run: Run) -> None:
        self._tracker(run).capture(tracked_nodes(run.graph))

    def on_resume(self, run: Run, saved_state: dict[str, Any] | None) -> None:
        tracker = self._tracker(run)
        nodes = tracked_nodes(run.graph)
        if saved_state and saved_state.get("tracker"):
            tracker.load(saved_state["tracker"], FileStore(run.run_dir))
            self.blocked = {str(n) for n in saved_state.get("blocked", ())}
            known = [n for n in nodes if n in tracker.baselines]
            drift = tracker.check_many(known) if known else {}
            changed = {
                n: r
                for n, r in drift.items()
                if r.stale_files and not self._held_for(run, n, r.stale_files)
            }
            if changed:
                self.drift = {
                    "nodes": {n: r.stale_files for n, r in changed.items()},
                    "details": {n: _details(r) for n, r in changed.items()},
                    "since": {n: r.since for n, r in changed.items()},
                    "held": sorted(n for n in changed if n in self.blocked),
                }
                run.events.emit(FreshnessEvent.INPUT_DRIFT, None, self.drift)
        recapture = {
            n: entries
            for n, entries in nodes.items()
            if n not in tracker.run_snapshots and n not in self.blocked
        }
        tracker.capture(recapture)

    def _held_for(self, run: Run, node_id: str, files: list[str]) -> bool:
        """Whether a ``block`` held ``node_id`` back, before the stop, for all of ``files``:
        then they are no news at the resume."""
        if node_id not in self.blocked:
            return False
        known = {str(f) for f in run.context.get(stale_key(node_id)) or ()}
        return set(files) <= known

    # -- per attempt -----------------------------------------------------------------------

    def before_execute(self, run: Run, node: Node, attempt: int) -> Outcome | None:
        mode = freshness_mode(node)
        entries = node_inputs(node, run.graph)
        if not inputs_checked(node) or not entries:
            return None
        tracker = self._tracker(run)
        if node.id not in tracker.baselines:
            tracker.capture({node.id: entries})
        report = tracker.check(node.id)
        stale = report.stale_files
        if not stale:
            run.context.delete(stale_key(node.id))
            return None
        run.context.set(stale_key(node.id), list(stale))
        run.events.emit(
            FreshnessEvent.STALE_INPUT,
            node.id,
            {
                "mode": mode,
                "files": list(stale),
                "since": report.since,
                "label": report.label.value,
                "attempt": attempt,
                "details": _details(report),
            },
        )
        if mode == "warn":
            return None
        self._blocked_now.add(node.id)
        self.blocked.add(node.id)
        return Outcome(
            status=StageStatus.RETRY,
            failure_reason=f"stale input: {', '.join(stale)}",
            # No command here: the engine does not know the front end; each one's ``why``
            # (and step or run lines) spells its own (%pipeline accept, resume RUN_DIR --accept).
            notes=f"freshness=block: inputs changed since the {report.since} snapshot; "
            "accept them as its new baseline or restore the files",
        )

    def on_step_finished(self, run: Run, step_result: StepResult) -> None:
        node_id = step_result.node_id
        blocked_now = node_id in self._blocked_now
        self._blocked_now.discard(node_id or "")
        tracker = self._tracker(run)
        if (
            step_result.executed
            and not step_result.interrupted
            and node_id is not None
            and node_id in tracker.baselines
            and not blocked_now
            and step_result.outcome is not None
            and step_result.outcome.status is not StageStatus.WAITING
        ):
            tracker.snapshot_run(node_id)
            self.blocked.discard(node_id)
        requested = run.context.get(ACCEPT_KEY)
        if requested:
            run.context.delete(ACCEPT_KEY)
            ids = [requested] if isinstance(requested, str) else list(requested)
            ids = [i.strip() for raw in ids for i in str(raw).split(",") if i.strip()]
            accept(run, ids, source="context")

    def reuse_inputs(self, run: Run, node: Node) -> dict[str, str] | None:
        """The declared input files (``source_files``) of ``node`` now, path -> content digest
        (``"-"`` for a file that does not exist, ``"?"`` for one not hashed), for looking up an
        earlier equal execution before it runs (engine/reuse.py); None when it declares none."""
        entries = source_files(node)
        if not entries:
            return None
        taken = self._tracker(run).snapshotter.take({node.id: entries}, "current", with_git=False)
        snapshot = taken.get(node.id)
        if snapshot is None:
            return {}
        return {
            path: (record.digest or "?") if record.existed else "-"
            for path, record in snapshot.files.items()
        }

    def trace_inputs(self, run: Run, node_id: str) -> dict[str, str]:
        """The declared input files of the execution of ``node_id`` that just finished, with
        their content digests from its completion snapshot (its trace keeps them): path ->
        digest, ``"-"`` for a file that does not exist, ``"?"`` for one not hashed."""
        tracker = self.tracker
        taken = tracker.run_snapshots.get(node_id) if tracker is not None else None
        if taken is None:
            return {}
        found: dict[str, str] = {}
        for path, record in taken.files.items():
            if not record.existed:
                found[path] = "-"
            else:
                found[path] = record.digest or "?"
        return found

    def lint_rules(self) -> list[LintRule]:
        """The rules for this extension's attributes (see :mod:`freshness_magic.freshness.lint`)."""
        return freshness_rules(allow_outside=self.allow_outside)

    def event_kinds(self) -> tuple[type[FreshnessEvent]]:
        """The events this extension emits (the run's bus must know them)."""
        return (FreshnessEvent,)

    def checkpoint_state(self) -> dict[str, Any]:
        if self.tracker is None:
            return {}
        store = FileStore(self._run.run_dir) if self._run is not None else None
        return {"tracker": self.tracker.to_dict(store), "blocked": sorted(self.blocked)}

    # -- public views ----------------------------------------------------------------------

    def report(self, run: Run, node_ids: Sequence[str] | None = None) -> FreshnessReport:
        """The public freshness report of ``node_ids`` (default: every tracked node) of ``run``."""
        return self._tracker(run).report(node_ids)


def run_marks(run: Any) -> dict[str, Any]:
    """The mark of each node's latest execution in ``run`` (:func:`~.engine.marks.node_marks`
    with the inputs changed since each node ran, as the run's freshness extension sees them)."""
    from freshness_magic.engine.marks import node_marks

    stale: dict[str, list[str]] = {}
    for ext in getattr(run, "extensions", ()):
        if isinstance(ext, FreshnessExtension):
            stale = changed_since_run(ext.report(run), run.graph)
    return dict(node_marks(run.traces, stale))


def extension_of(run: Any) -> FreshnessExtension:
    """The run's freshness extension; FreshnessError when the run has none."""
    for ext in getattr(run, "extensions", ()):
        if isinstance(ext, FreshnessExtension):
            return ext
    raise FreshnessError(
        "this run has no freshness extension; open it with freshness_magic.session.open_run "
        "(or pass FreshnessExtension() in extensions=)"
    )


def resume_drift(run: Any) -> list[tuple[str, str]]:
    """What changed while ``run`` was stopped, found when it was resumed: (node id, words) per
    node (:func:`~freshness_magic.freshness.events.describe_input_drift`); empty when nothing
    did or the run has no freshness extension."""
    for ext in getattr(run, "extensions", ()):
        if isinstance(ext, FreshnessExtension) and ext.drift is not None:
            return describe_input_drift(ext.drift)
    return []


def missing_inputs(run: Any, node_id: str) -> list[str]:
    """The paths ``node_id``'s ``source_files`` names that exist neither now nor at its last
    snapshot (freshness tracks nothing there, so the node counts as fresh); empty when none, or
    when the run has no freshness extension or does not track the node."""
    for ext in getattr(run, "extensions", ()):
        if isinstance(ext, FreshnessExtension) and node_id in ext._tracker(run).baselines:
            entry = ext.report(run, [node_id]).nodes[node_id]
            return entry.effective.missing_files
    return []


def blocked_inputs(run: Any, node_id: str | None) -> list[str] | None:
    """The changed inputs a ``freshness=block`` held ``node_id`` back for; None when it was not
    held back (or the run has no freshness extension)."""
    for ext in getattr(run, "extensions", ()):
        if isinstance(ext, FreshnessExtension) and node_id is not None and node_id in ext.blocked:
            return [str(f) for f in run.context.get(stale_key(node_id)) or []]
    return None


def accept(run: Run, node_ids: Iterable[str], *, source: str = "api") -> dict[str, list[str]]:
    """Re-capture the baselines of ``node_ids``; emits BASELINE_ACCEPTED; returns changed files."""
    ext = extension_of(run)
    tracker = ext._tracker(run)
    nodes = tracked_nodes(run.graph)
    ids = list(dict.fromkeys(node_ids))
    unknown = [n for n in ids if n not in run.graph.nodes]
    if unknown:
        raise FreshnessError(
            f"cannot accept changes of unknown node(s) {', '.join(map(repr, unknown))}; "
            f"nodes with source_files: {', '.join(nodes) or 'none'}"
        )
    ids = [n for n in ids if n in nodes]
    for node_id in ids:
        if node_id not in tracker.baselines:
            tracker.capture({node_id: nodes[node_id]})
    changed = tracker.accept(ids)
    for node_id in ids:
        ext.blocked.discard(node_id)
        run.context.delete(stale_key(node_id))
    run.events.emit(
        FreshnessEvent.BASELINE_ACCEPTED,
        ids[0] if len(ids) == 1 else None,
        {
            "nodes": changed,
            "files": sorted({f for fs in changed.values() for f in fs}),
            "source": source,
        },
    )
    return changed


def accept_changes(run: Run, node_id: str | None = None) -> dict[str, list[str]]:
    """Accept the current inputs of ``node_id`` (or of every node whose handler has not run).

    Returns node id -> files that had changed; the new baselines are in the next checkpoint,
    which is written at once.
    """
    ext = extension_of(run)
    tracker = ext._tracker(run)
    if node_id is not None:
        ids = [node_id]
    else:
        ids = [n for n in tracked_nodes(run.graph) if n not in tracker.run_snapshots]
        ids.extend(n for n in ext.blocked if n not in ids)
    changed = accept(run, ids)
    run.save_checkpoint()
    return changed
