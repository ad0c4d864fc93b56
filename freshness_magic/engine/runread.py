"""Reading a run directory without the engine: its restart link, working directory, stored
pipeline copy and when its state last changed.

What ``check`` and the other read-only commands need of a run directory, kept apart from
:mod:`.persistence` (which writes and restores runs and imports the engine's routing and state),
so a read-only command does not pay for importing the engine.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from freshness_magic.atomicio import loads_bounded
from freshness_magic.engine.checkpoint_format import CHECKPOINT_FILE, JOURNAL_FILE, MANIFEST_FILE
from freshness_magic.errors import StoredPipelineError
from freshness_magic.pathsafety import read_state

if TYPE_CHECKING:
    from freshness_magic.engine.model import Graph

RESTART_LINK = "restarted_as.json"
"""In a run directory a loop restart left: where the run continues."""


def source_hash(source: str) -> str:
    """Identity of a pipeline text, to check that a checkpoint belongs to a pipeline."""
    import hashlib  # here: ``check`` starts git before it needs any hash of its own

    return hashlib.sha256(source.encode("utf-8")).hexdigest()


def has_state(run_dir: Path) -> bool:
    """True when ``run_dir`` holds a run's saved state (of any format)."""
    return last_written_ns(run_dir) is not None


def last_written_ns(run_dir: Path) -> int | None:
    """When the run's state last changed (its journal or snapshot, whichever is newer); None
    without saved state. ``checkpoint.json`` alone lags: between snapshots only the journal
    grows, so "the newest run" must be judged by both."""
    stamps = []
    for name in (JOURNAL_FILE, CHECKPOINT_FILE):
        try:
            stamps.append((run_dir / name).stat().st_mtime_ns)
        except OSError:
            continue
    return max(stamps, default=None)


def follow_restarts(run_dir: Path) -> Path:
    """The directory a run continued in after ``loop_restart`` (``run_dir`` if none)."""
    seen: set[Path] = set()
    current = run_dir
    while (current / RESTART_LINK).exists() and current not in seen:
        seen.add(current)
        try:
            link = loads_bounded(read_state(current / RESTART_LINK))
            current = Path(str(link["run_dir"]))
        except (OSError, ValueError, KeyError, TypeError):
            break
    return current


def manifest_workdir(run_dir: Path) -> str | None:
    """The working directory the run's manifest names (a few hundred bytes, read before the
    checkpoint); None when it names none or cannot be read. A hint only: the checkpoint's
    ``workdir`` decides (a resume may have moved the run)."""
    try:
        manifest = loads_bounded(read_state(run_dir / MANIFEST_FILE))
    except (OSError, ValueError):
        return None
    workdir = manifest.get("workdir") if isinstance(manifest, dict) else None
    return workdir if isinstance(workdir, str) and workdir else None


def workdir_gone(run_dir: Path, stored: object) -> str:
    """What to say when the working directory a run was started in (``stored``) is gone, a
    project moved or deleted; empty when it is there (or unknown). Nothing that reads or goes
    on with the run may create it again: its tools would run in an empty folder."""
    if not isinstance(stored, str) or Path(stored).is_dir():
        return ""
    import shlex  # only to say it

    home = run_dir.parent.parent.parent
    if run_dir.parent.name == "runs" and run_dir.parent.parent.name == ".freshness":
        hint = (
            f"if the project moved to {home}, resume with --workdir {shlex.quote(str(home))} "
            "(workdir= in Python)"
        )
    else:
        hint = "restore it, or resume with --workdir DIR (workdir= in Python) to work in another"
    return (
        f"{run_dir}: the run's working directory {stored} is not there (moved or deleted?); {hint}"
    )


def reads_within_run(traces: Iterable[Any]) -> bool:
    """Whether a checkpoint's trace records (``Trace.to_dict``) hold a read of a value an
    execution of this run wrote: what :mod:`.marks` follows to find an outdated execution
    (other reads never link), so without one no execution is outdated, and a reader need
    not build the traces or load the marks to know it."""
    for trace in traces:
        reads = trace.get("reads") if isinstance(trace, dict) else None
        for read in reads if isinstance(reads, list) else ():
            if (
                isinstance(read, dict)
                and read.get("writer") is not None
                and read.get("writer_run") is None
            ):
                return True
    return False


def stored_pipeline(folder: Path, pipeline: dict[str, Any], used: Path) -> Graph:
    """The pipeline a run was started with, from ``pipeline.dot`` in its run directory."""
    from freshness_magic.engine.pipeline import load_pipeline

    if not pipeline.get("source_file"):
        raise StoredPipelineError(
            f"checkpoint {used} has no stored pipeline (the run was started from a Graph built in "
            "code)",
            "to resume it",
        )
    stored = folder / str(pipeline["source_file"])
    try:
        source = read_state(stored).decode("utf-8")
    except OSError as exc:
        raise StoredPipelineError(
            f"cannot read the run's stored pipeline {stored} ({exc.strerror or exc})"
        ) from exc
    if source_hash(source) != pipeline.get("sha256"):
        raise StoredPipelineError(
            f"the stored pipeline {stored} does not match its checkpoint {used} (hash differs)"
        )
    path = pipeline.get("path")
    return load_pipeline(source, path=str(path) if path else None)
