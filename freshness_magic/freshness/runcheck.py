"""The freshness report of a run on disk (for ``freshness-magic check`` and other processes)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from freshness_magic.engine.persistence import workdir_gone
from freshness_magic.errors import CheckpointError, FreshnessError, FreshnessMagicError
from freshness_magic.freshness.check import FreshnessTracker
from freshness_magic.freshness.report import FreshnessReport
from freshness_magic.freshness.snapshot import HashSources


def check_run_dir(
    run_dir: Path, *, hash_size_limit: int | None = None, hash_sources: HashSources | None = None
) -> FreshnessReport:
    """Compare the baselines in ``run_dir``'s newest valid checkpoint with the disk (read-only);
    ``hash_sources`` may supply known digests (see :data:`~.snapshot.HashSources`)."""
    from freshness_magic.engine.checkpoint import load_checkpoint
    from freshness_magic.engine.persistence import follow_restarts, stored_pipeline

    if not run_dir.is_dir():
        raise FreshnessError(
            f"{run_dir} is not a run directory; pass .freshness/runs/<run_id> of a run"
        )
    folder = follow_restarts(run_dir)
    try:
        data, used = load_checkpoint(folder)
    except CheckpointError as exc:
        raise FreshnessError(f"cannot check {run_dir}: {exc}") from exc
    report = checkpoint_report(
        data, used, folder, hash_size_limit=hash_size_limit, hash_sources=hash_sources
    )
    try:
        graph = stored_pipeline(folder, data.get("pipeline") or {}, used)
    except FreshnessMagicError:
        return report  # no pipeline to tell the modes from: every node as checked
    return report.with_modes(graph)


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
    state = (data.get("extensions") or {}).get("freshness") or {}
    tracker_state = state.get("tracker") if isinstance(state, dict) else None
    if not tracker_state:
        raise FreshnessError(
            f"checkpoint {used} has no freshness baselines (the run was not opened with the "
            "freshness extension, or has not started yet)"
        )
    workdir = str(data.get("workdir") or ".")
    if gone := workdir_gone(run_dir, workdir):
        raise FreshnessError(f"{gone}; its inputs were not checked")
    source = hash_sources(workdir) if hash_sources is not None else None
    tracker = FreshnessTracker(workdir, hash_size_limit, hash_source=source)
    tracker.load(tracker_state)
    return tracker.report()
