"""The freshness report of a run on disk (for ``freshness-magic check`` and other processes).

A check starts the report's view from git (:mod:`.gitstart`) before it loads the rest of the
freshness code (about 20 ms of imports) and reads the checkpoint, so that git runs on the other
core meanwhile: this module imports them only where they are used.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from freshness_magic.engine.runread import follow_restarts, workdir_gone
from freshness_magic.errors import CheckpointError, FreshnessError, FreshnessMagicError
from freshness_magic.freshness.gitstart import TreeStatus, start_for_run

if TYPE_CHECKING:
    from freshness_magic.engine.model import Graph
    from freshness_magic.engine.trace import Trace
    from freshness_magic.freshness.check import FreshnessTracker
    from freshness_magic.freshness.report import FreshnessReport
    from freshness_magic.freshness.snapshot import HashSources


@dataclass(frozen=True)
class RunCheck:
    """A run's freshness report with what was read to make it (its stored pipeline or None,
    and then its executions' traces), so a caller that needs them too does not read and parse
    them a second time."""

    report: FreshnessReport
    graph: Graph | None
    traces: list[Trace] = field(default_factory=list)
    """The checkpoint's traces when the pipeline was read and one of them read what another
    execution of the run wrote (the outdated marks need both; without such a read no node is
    outdated)."""


def check_run(
    run_dir: Path,
    *,
    hash_size_limit: int | None = None,
    hash_sources: HashSources | None = None,
    started: TreeStatus | None = None,
) -> RunCheck:
    """Compare the baselines in ``run_dir``'s newest valid checkpoint with the disk (read-only),
    keeping the checkpoint, pipeline and traces it read; ``hash_sources`` may supply known
    digests (see :data:`~.snapshot.HashSources`). ``started``: the report's status, started
    for this run by :func:`~.gitstart.start_for_run` (else it is started here, first).

    The pipeline and the traces are read while the report's view from git runs (between
    starting it and looking at the files): the report waits for git then anyway."""
    folder = follow_restarts(run_dir)
    early = started if started is not None else start_for_run(folder)
    try:
        if not run_dir.is_dir():
            raise FreshnessError(
                f"{run_dir} is not a run directory; pass .freshness/runs/<run_id> of a run"
            )
        from freshness_magic.engine.checkpoint import load_checkpoint

        data, used = load_checkpoint(folder)
    except BaseException as exc:
        if early is not None:
            early.cancel()
        if isinstance(exc, CheckpointError):
            raise FreshnessError(f"cannot check {run_dir}: {exc}") from exc
        raise
    tracker = loaded_tracker(
        data,
        used,
        folder,
        hash_size_limit=hash_size_limit,
        hash_sources=hash_sources,
        started=early,
    )
    try:
        graph, traces = _pipeline_and_traces(folder, data, used)
    except BaseException:
        tracker.cancel_report()
        raise
    report = tracker.report()
    if graph is not None:
        report = report.with_modes(graph)
    return RunCheck(report, graph, traces)


def _reporting_tracker(
    workdir: str,
    hash_size_limit: int | None,
    hash_sources: HashSources | None,
    started: TreeStatus | None = None,
) -> FreshnessTracker:
    """A tracker for ``workdir`` with its report's view from git started (``started``: the
    one already started for it)."""
    from freshness_magic.freshness.check import FreshnessTracker

    source = hash_sources(workdir) if hash_sources is not None else None
    tracker = FreshnessTracker(workdir, hash_size_limit, hash_source=source)
    tracker.start_report(started)
    return tracker


def _pipeline_and_traces(
    folder: Path, data: dict[str, Any], used: Path
) -> tuple[Graph | None, list[Trace]]:
    """The run's stored pipeline (None: there is none to tell the modes from, every node is
    then checked) and, with it, the checkpoint's traces when one of them read a value another
    execution of the run wrote (else none is outdated: no trace is built)."""
    from freshness_magic.engine.runread import reads_within_run, stored_pipeline

    try:
        graph: Graph | None = stored_pipeline(folder, data.get("pipeline") or {}, used)
    except FreshnessMagicError:
        return None, []
    records = data.get("traces") or ()
    if not reads_within_run(records):
        return graph, []
    from freshness_magic.engine.trace import Trace

    run_id = str(data.get("run_id") or "")
    return graph, [Trace.from_dict(t, run_id) for t in records]


def checkpoint_report(
    data: dict[str, Any],
    used: Path,
    run_dir: Path,
    *,
    hash_size_limit: int | None = None,
    hash_sources: HashSources | None = None,
) -> FreshnessReport:
    """The report of a checkpoint already read (``load_checkpoint``'s data and file) of the run
    in ``run_dir``; a FreshnessError when it keeps no baselines or its working directory is
    gone."""
    tracker = loaded_tracker(
        data, used, run_dir, hash_size_limit=hash_size_limit, hash_sources=hash_sources
    )
    return tracker.report()


def loaded_tracker(
    data: dict[str, Any],
    used: Path,
    run_dir: Path,
    *,
    hash_size_limit: int | None = None,
    hash_sources: HashSources | None = None,
    started: TreeStatus | None = None,
) -> FreshnessTracker:
    """A tracker holding the baselines of a checkpoint already read, git's view for its
    report started (see :func:`checkpoint_report`; a caller that does not ask for the report
    calls ``cancel_report``). ``started``: git's view started before the checkpoint was read
    (:func:`~.gitstart.start_for_run`), taken when it is for the checkpoint's working
    directory, else stopped; an error stops it too."""
    try:
        tracker = _tracker_of(data, used, run_dir, hash_size_limit, hash_sources, started)
    except BaseException:
        if started is not None:
            started.cancel()
        raise
    from freshness_magic.freshness.filestore import FileStore

    try:
        tracker.load(_tracker_state(data), FileStore(run_dir))
    except BaseException:
        tracker.cancel_report()
        raise
    return tracker


def unchecked_because(exc: FreshnessError, data: dict[str, Any], run_dir: Path) -> str | None:
    """Why the inputs of a run whose checkpoint keeps baselines could not be checked (``exc``,
    the error the report raised); None when the checkpoint keeps none or the working directory
    is gone (said on its own), so that a view that shows no stale mark says why it cannot."""
    if not _tracker_state(data) or workdir_gone(run_dir, str(data.get("workdir") or ".")):
        return None
    return str(exc)


def _tracker_state(data: dict[str, Any]) -> Any:
    """The freshness tracker's state in a checkpoint's data (None or empty: it keeps none)."""
    state = (data.get("extensions") or {}).get("freshness") or {}
    return state.get("tracker") if isinstance(state, dict) else None


def _tracker_of(
    data: dict[str, Any],
    used: Path,
    run_dir: Path,
    hash_size_limit: int | None,
    hash_sources: HashSources | None,
    started: TreeStatus | None,
) -> FreshnessTracker:
    """The tracker for the checkpoint's working directory, its report's view from git started
    (``started`` when it is for that directory); FreshnessError when the checkpoint keeps no
    baselines or the directory is gone."""
    if not _tracker_state(data):
        raise FreshnessError(
            f"checkpoint {used} has no freshness baselines (the run was not opened with the "
            "freshness extension, or has not started yet)"
        )
    workdir = str(data.get("workdir") or ".")
    if gone := workdir_gone(run_dir, workdir):
        raise FreshnessError(f"{gone}; its inputs were not checked")
    if started is not None and started.workdir != os.path.abspath(workdir):
        started.cancel()
        started = None
    # git runs while the baselines load
    return _reporting_tracker(workdir, hash_size_limit, hash_sources, started)


def changed_since_run(report: FreshnessReport, graph: Any) -> dict[str, list[str]]:
    """Node id -> its input files that changed since its latest execution finished, for the
    nodes whose inputs are checked (what :func:`~freshness_magic.engine.marks.derive_marks`
    takes as ``stale_inputs``)."""
    from freshness_magic.freshness.attrs import inputs_checked

    found: dict[str, list[str]] = {}
    for node_id, entry in report.nodes.items():
        node = graph.nodes.get(node_id)
        if node is None or not inputs_checked(node) or entry.since_run is None:
            continue
        files = entry.since_run.stale_files
        if files:
            found[node_id] = list(files)
    return found
